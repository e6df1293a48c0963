"""bot/failure.py: the failure record minify writes and report, reuse and bisect read back, and the
signature ("the same failure") and culprit a record gives, for new and older records alike."""

from __future__ import annotations

import json

from bot import rundir
from bot.failure import FailureRecord, signature_of
from bot.records import Culprit, GraphBisect
from tests import rundirs


def test_the_record_of_a_check_before_minify_learned_anything():
    row = rundirs.check("mlp_relu")
    rec = FailureRecord.for_check(row)
    assert rec.id == row.id and rec.failure_class == "accuracy" and rec.check == row and rec.check is not row
    assert rec.accuracy.tolerance == row.accuracy.tolerance and rec.accuracy.rmse_res == row.accuracy.rmse_res
    assert not rec.repro_verified and rec.torch is None
    crash = FailureRecord.for_check(rundirs.check("gru", failure_class="crash", status="fail_to_run"))
    assert crash.accuracy is None and crash.failure_class == "crash"


def test_written_and_read_back_the_same_optional_parts_left_out(tmp_path):
    rec = rundirs.failure(rundirs.check("mlp_relu"), culprit=Culprit(["aten.relu.default"], None, "culprit"))
    rundir.write_failure(tmp_path, rec)
    doc = json.loads((tmp_path / rundir.FAILURE).read_text())
    assert doc["schema"] == rundir.FAILURE_SCHEMA and doc["class"] == "accuracy"
    assert not {"builds", "collect_env", "readout", "trace"} & set(doc)
    run = tmp_path / "run"
    d = rundir.failure_dir(run, rec.id)
    d.mkdir(parents=True)
    rundir.write_failure(d, rec)
    back = rundir.read_failure(run, rec.id)
    assert back == rec and back.repro_verified and back.torch == "2.13.0+cpu"


def test_the_culprit_comes_from_the_culprit_then_the_bisector_then_the_graph():
    row = rundirs.check("mlp_relu")
    by_graph = rundirs.failure(row, ops=("aten.view.default", "aten.relu.default", "aten.relu.default",
                                         "aten.add.Tensor"))
    assert by_graph.culprit_found() == (["aten.add.Tensor", "aten.relu.default"], None, "graph")  # no plumbing
    bisected = by_graph.replace(bisect=GraphBisect(backend="inductor", subsystem="lowerings", detail="relu"))
    assert bisected.culprit_found() == ([], "lowerings: relu", "bisector")
    incomplete = by_graph.replace(bisect=GraphBisect(incomplete=True, subsystem="lowerings"))
    assert incomplete.culprit_found()[2] == "graph"
    found = bisected.replace(culprit=Culprit(["aten.sin.default", "aten.sin.default"], None, "alone"))
    assert found.culprit_found() == (["aten.sin.default"], None, "alone")
    assert rundirs.failure(row, ops=("aten.view.default",)).culprit_found() == ([], None, None)


def test_signature_of_a_check_and_of_its_record():
    row = rundirs.check("mlp_relu")
    bare = signature_of(row)
    assert (bare.failure_class, bare.stage, bare.device, bare.dtype, bare.verified) == \
        ("accuracy", "unlocalized", "cpu", "float32", False)
    verified = signature_of(row, rundirs.failure(row, stage="inductor"))
    assert verified.verified and verified.stage == "inductor" and verified.culprit_ops == ["aten.relu.default"]
    unverified = signature_of(row, rundirs.failure(row, status="not_reproduced"))
    assert not unverified.verified and unverified.culprit_ops == []
    other_dtype = rundirs.check("mlp_relu", settings=rundirs.Settings(dtype="bfloat16"))
    assert signature_of(other_dtype).dtype == "bfloat16"


def test_a_recorded_signature_is_used_and_refined():
    row = rundirs.check("mlp_relu")
    rec = rundirs.failure(row, ops=("aten.sigmoid.default",))
    pinned = signature_of(row)
    rec = rec.replace(signature=rec.verified_signature(pinned))
    sig = signature_of(row, rec)
    assert sig.verified and sig.culprit_ops == ["aten.sigmoid.default"] and sig.culprit_method == "graph"
    assert rec.known().nodes_after == 1 and rec.known().status == "minimized" and rec.known().nodes_before == 40
