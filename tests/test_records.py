"""The typed records that cross process and stage boundaries (bot/records.py, bot/minify/records.py):
what one side writes the other reads back as the same types; malformed JSON is an error, not a
half-filled record; failure.json written from a FailureRecord is what its schema says."""

from __future__ import annotations

import json

import pytest

from bot import rundir
from bot.minify.records import (
    Checkpoint,
    Done,
    Event,
    Final,
    Judge,
    Loaded,
    Localized,
    MinifyJob,
    Pinned,
    Probe,
    Query,
    Stage,
    WorkerResult,
    emit,
    parse_event,
)
from bot.records import (
    Capture,
    ConfigDiff,
    Culprit,
    FailureRecord,
    KnownRecord,
    RecordError,
    Repro,
    Reused,
    Verification,
)
from bot.signature import Signature
from tests.ghstub.rundir import check_row


def _verified_record() -> FailureRecord:
    row = check_row("mlp_relu", status="fail_accuracy", failure_class="accuracy")
    rec = FailureRecord.for_check(row)
    rec.stage, rec.culprit = "inductor", Culprit(["aten.relu.default"], "lowerings: relu", "compiled-alone")
    key = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
    rec.config = ConfigDiff([{"key": key, "value": "accuracy", "default": None}], [])
    graph = [{"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [2]}]
    rec.repro = Repro("minimized", None, "repro.py", None, "inputs", "minifier.log", 40, 3, 12, 4.5, graph,
                      Verification(3, 3, True), Capture("aot", 4, "torch", graph=1, graphs=2), {"reduce": 4.5},
                      Reused(7, 1.5, 30.0))
    return rec


def test_a_failure_record_reads_back_as_the_same_types():
    rec = _verified_record()
    back = FailureRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert back == rec
    assert isinstance(back.repro.capture, Capture) and isinstance(back.repro.verification, Verification)
    assert isinstance(back.culprit, Culprit) and back.to_json()["class"] == "accuracy"


def test_failure_json_written_from_a_record_is_what_its_schema_says(tmp_path):
    rec = _verified_record()
    rec.signature = Signature("accuracy", verified=True).to_json()
    fdir = tmp_path / "failures" / rec.id
    fdir.mkdir(parents=True)
    rundir.write_failure(fdir, rec.to_json())
    doc = json.loads((fdir / rundir.FAILURE).read_text())
    rundir.validate(doc, "failure", rundir.FAILURE)
    assert "builds" not in doc   # written only once `minify-bot bisect` answered


def test_a_malformed_record_is_an_error_not_a_half_filled_record():
    with pytest.raises(RecordError, match="FailureRecord: expected an object, got list"):
        FailureRecord.from_json([])
    with pytest.raises(RecordError, match="Culprit"):
        FailureRecord.from_json({"id": "x", "culprit": {"bisect": None}})   # a culprit without its ops
    with pytest.raises(RecordError, match="MinifyJob"):
        MinifyJob.from_json({"repro": "r.py"})


def test_a_missing_field_takes_the_records_one_default_and_an_unknown_key_is_dropped():
    rec = FailureRecord.from_json({"id": "x", "something_new": 1})
    assert rec.repro == Repro() and rec.config == ConfigDiff() and not rec.flaky
    assert "something_new" not in rec.to_json()


def test_the_minify_job_crosses_to_the_worker_unchanged(tmp_path):
    job = MinifyJob("launcher.py", str(tmp_path), "accuracy", 120.0, tolerance=0.01, isolate=True,
                    check_config={"inductor.x": 1}, original_error={"type": "E", "message": "m"})
    job.write(str(tmp_path / "job.json"))
    back = MinifyJob.read(str(tmp_path / "job.json"))
    assert back == job and back.budget == 120.0 and back.deadline is None


def test_what_a_sanity_step_learned_is_taken_by_a_resumed_job():
    job = MinifyJob("l.py", ".", "runtime_error", 60.0, class_uncertain=True)
    job.learn(Judge.from_json(Judge("accuracy", 1e-3, True, [{"key": "dynamo.repro_tolerance", "value": 1e-3}])
                              .to_json()))
    assert (job.failure_class, job.compare_non_fp) == ("accuracy", True)


def test_the_workers_result_reads_back_with_its_signature_and_culprit(tmp_path):
    res = WorkerResult(status="minimized", signature=Signature("runtime_error", "RuntimeError", ["boom"]),
                       judge=Judge("runtime_error"), culprit=Culprit(["aten.add.Tensor"]), timings={"load": 1.0})
    res.write(str(tmp_path / "result.json"))
    back = WorkerResult.read(str(tmp_path / "result.json"))
    assert back.signature.matches(res.signature) and back.culprit == res.culprit and back.judge == res.judge


def test_events_are_written_as_at_at_lines_and_parsed_back_as_their_types(capsys):
    for event in (Loaded(12, "aot", False), Checkpoint(5, "/w/5.py"), Pinned(Signature("accuracy")),
                  Query(3, 9, True), Final("/w/final/repro.py", [], None, True, True, Judge("accuracy", 1e-4))):
        emit(event)
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith("@@ ") for line in lines)
    parsed = [parse_event(json.loads(line[3:])) for line in lines]
    assert [type(e).__name__ for e in parsed] == ["Loaded", "Checkpoint", "Pinned", "Query", "Final"]
    assert parsed[-1].judge == Judge("accuracy", 1e-4) and parsed[2].signature.failure_class == "accuracy"


def test_an_unknown_or_malformed_event_is_ignored():
    assert parse_event({"event": "hook", "pid": 1}) is None
    assert parse_event({"event": "query"}) is None          # without its fields
    assert parse_event("not an object") is None


def test_a_known_record_restores_typed_parts():
    known = KnownRecord.from_json({"class": "accuracy", "stage": "inductor",
                                   "culprit": {"ops": ["aten.relu.default"], "bisect": None, "method": "graph"},
                                   "config": {"diff": [], "minimal": []}, "capture": {"method": "torch"}})
    assert isinstance(known.culprit, Culprit) and known.config.minimal == [] and known.capture.method == "torch"


def _every_record():
    sig = Signature("runtime_error", "RuntimeError", ["boom"])
    return [
        Culprit(["aten.relu.default"], "lowerings: relu", "graph"), Verification(3, 2, False),
        Capture("aot", 3, "environment", "a note", 2, 5, "backward", True), Reused(4, 1.0, None),
        Repro("partial", "budget", "repro.py", None, "inputs", "minifier.log", 9, 4, 20, 3.0, None,
              Verification(1, 1, True), Capture(method="given"), {"reduce": 1.0}, None),
        ConfigDiff([{"key": "inductor.a", "value": 1, "default": 0}], None), _verified_record(),
        KnownRecord.of_failure(_verified_record()),
        Judge("accuracy", 1e-3, False, ["torch._dynamo.config.repro_tolerance = 0.001"]),
        MinifyJob("l.py", "/w", "accuracy", 60.0, deadline=123.0, nodes_before=9, dynamic=True, threads=2),
        WorkerResult("partial", "budget", {"load": 1.0}, sig, Judge("runtime_error"), {"culprit_search": 3},
                     [{"op": "aten.relu.default"}], 9, 4, 7, "aot", "inductor", "forward", False, [], None, True,
                     {"subsystem": "lowerings"}, Culprit(["aten.relu.default"]), 2.0, "/w/checkpoints/4.py", True,
                     "resumed"),
        Localized("inductor", [{"backend": "eager", "status": "pass"}], "inductor", True, "from the capture"),
        Loaded(9, "aot", True), Checkpoint(4, "/w/4.py"), Pinned(sig), Query(2, 4, False, True, True),
        Final("/w/final/repro.py", [], [], False, True, Judge("accuracy")), Done("partial"), Probe(True, "broken"),
        Stage("aot_eager", "pass"),
    ]


@pytest.mark.parametrize("record", _every_record(), ids=lambda r: type(r).__name__)
def test_every_record_reads_back_equal_from_its_json(record):
    back = type(record).from_json(json.loads(json.dumps(record.to_json())))
    assert back == record and type(back) is type(record)


@pytest.mark.parametrize("record", [r for r in _every_record() if isinstance(r, Event)], ids=lambda r: type(r).__name__)
def test_every_event_is_parsed_back_as_its_own_type(record):
    assert parse_event(json.loads(json.dumps(record.to_json()))) == record


def test_an_unknown_key_inside_a_nested_record_is_dropped():
    doc = _verified_record().to_json()
    doc["repro"]["verification"]["by_whom"] = "someone"
    doc["culprit"]["extra"] = [1]
    back = FailureRecord.from_json(doc)
    assert back == _verified_record()
    assert "by_whom" not in back.to_json()["repro"]["verification"]


def test_a_malformed_nested_record_is_an_error_naming_its_type():
    doc = _verified_record().to_json()
    doc["repro"]["verification"] = [3, 3, True]
    with pytest.raises(RecordError, match="Verification: expected an object, got list"):
        FailureRecord.from_json(doc)
    with pytest.raises(RecordError, match="Repro: expected an object, got str"):
        FailureRecord.from_json({"id": "x", "repro": "repro.py"})


def test_an_event_with_a_malformed_nested_record_is_ignored():
    assert parse_event({"event": "final", "path": "/w/r.py", "judge": "accuracy"}) is None
    assert parse_event({"event": "signature", "signature": {"failure_class": "accuracy"}}) == Pinned(
        Signature("accuracy"))


def test_a_worker_result_is_replaced_whole_never_half_written(tmp_path):
    path = tmp_path / "result.json"
    WorkerResult(status="minimized").write(str(path))
    assert not (tmp_path / "result.json.tmp").exists()
    assert WorkerResult.read(str(path)).status == "minimized"
