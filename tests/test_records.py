"""The typed records that cross process and stage boundaries (bot/records.py, bot/minify/records.py):
what one side writes the other reads back as the same types; malformed JSON is an error, not a
half-filled record; failure.json written from a FailureRecord is what its schema says."""

from __future__ import annotations

import json

import pytest

from bot import rundir
from bot.check.one import CheckRequest, read_row
from bot.check.results import ResultsWriter
from bot.check.settings import Settings
from bot.failure import FailureRecord
from bot.minify.records import (
    Checkpoint,
    Done,
    Event,
    Final,
    Judge,
    Loaded,
    Localized,
    MinifyJob,
    PassStat,
    Pinned,
    Probe,
    Query,
    Stage,
    WorkerResult,
    emit,
    parse_event,
)
from bot.records import (
    Accuracy,
    BuildBoundary,
    BuildsFound,
    BuildVerdict,
    Capture,
    CheckError,
    CheckRow,
    ConfigDiff,
    ConfigEntry,
    ConfigSetting,
    Configuration,
    Culprit,
    FirstAttempt,
    GraphBisect,
    GraphOp,
    HarnessFacts,
    KnownRecord,
    Launcher,
    MergedShard,
    MergeRecord,
    RecordError,
    Repro,
    RerunCapture,
    ResultsDoc,
    Reused,
    RunSettings,
    Spec,
    StageVerdict,
    Verification,
)
from bot.signature import Signature
from tests.ghstub.rundir import check_row, row_of


def _verified_record() -> FailureRecord:
    row = row_of(check_row("mlp_relu", status="fail_accuracy", failure_class="accuracy"))
    rec = FailureRecord.for_check(row)
    rec.stage, rec.culprit = "inductor", Culprit(["aten.relu.default"], "lowerings: relu", "compiled-alone")
    key = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
    rec.config = ConfigDiff([ConfigEntry(key, None, "accuracy")], [])
    graph = [GraphOp("aten.relu.default", ["float32"], [2])]
    rec.repro = Repro("minimized", None, "repro.py", None, "inputs", "minifier.log", 40, 3, 12, 4.5, graph,
                      Verification(3, 3, True), Capture("aot", 4, "torch", graph=1, graphs=2), {"reduce": 4.5},
                      Reused(7, 1.5, 30.0))
    rec.ablation = [StageVerdict("aot_eager", "pass"), StageVerdict("inductor", "fail_accuracy")]
    rec.bisect = GraphBisect(backend="inductor", subsystem="lowerings", bisect_number=3, detail="relu", runs=6)
    rec.signature = rec.verified_signature(Signature("accuracy"))
    return rec


def test_a_failure_record_reads_back_as_the_same_types():
    rec = _verified_record()
    back = FailureRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert back == rec
    assert isinstance(back.repro.capture, Capture) and isinstance(back.repro.verification, Verification)
    assert isinstance(back.culprit, Culprit) and back.to_json()["class"] == "accuracy"


def test_failure_json_written_from_a_record_is_what_its_schema_says(tmp_path):
    rec = _verified_record()
    fdir = tmp_path / "failures" / rec.id
    fdir.mkdir(parents=True)
    rundir.write_failure(fdir, rec)
    doc = json.loads((fdir / rundir.FAILURE).read_text())
    rundir.validate(doc, "failure", rundir.FAILURE)
    assert "builds" not in doc   # written only once `minify-bot bisect` answered


def test_a_malformed_record_is_an_error_not_a_half_filled_record():
    with pytest.raises(RecordError, match="FailureRecord: expected an object, got list"):
        FailureRecord.from_json([])
    with pytest.raises(RecordError, match="GraphOp"):
        FailureRecord.from_json({"id": "x", "repro": {"graph": [{"dtypes": []}]}})   # a graph op without its op
    with pytest.raises(RecordError, match="MinifyJob"):
        MinifyJob.from_json({"repro": "r.py"})


def test_a_missing_field_takes_the_records_one_default_and_an_unknown_key_is_dropped():
    rec = FailureRecord.from_json({"id": "x", "something_new": 1})
    assert rec.repro == Repro() and rec.config == ConfigDiff() and not rec.flaky
    assert "something_new" not in rec.to_json()


def test_the_minify_job_crosses_to_the_worker_unchanged(tmp_path):
    job = MinifyJob("launcher.py", str(tmp_path), "accuracy", 120.0, tolerance=0.01, isolate=True,
                    check_config={"inductor.x": 1}, original_error=CheckError("E", message="m"))
    job.write(str(tmp_path / "job.json"))
    back = MinifyJob.read(str(tmp_path / "job.json"))
    assert back == job and back.budget == 120.0 and back.deadline is None


def test_what_a_sanity_step_learned_is_taken_by_a_resumed_job():
    job = MinifyJob("l.py", ".", "runtime_error", 60.0, class_uncertain=True)
    job.learn(Judge.from_json(Judge("accuracy", 1e-3, True, [ConfigSetting("dynamo.repro_tolerance", 1e-3)])
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
        ConfigDiff([ConfigEntry("inductor.a", 0, 1)], None), _verified_record(),
        _verified_record().known(),
        Judge("accuracy", 1e-3, False, [ConfigSetting("dynamo.repro_tolerance", 0.001)]),
        MinifyJob("l.py", "/w", "accuracy", 60.0, deadline=123.0, nodes_before=9, dynamic=True, threads=2),
        WorkerResult(status="partial", reason="budget", timings={"load": 1.0}, signature=sig,
                     judge=Judge("runtime_error"), passes=[PassStat("culprit_search", 3, 40, 1.5)],
                     graph=[GraphOp("aten.relu.default")],
                     nodes_before=9, nodes_after=4, queries=7, kind="aot", backend="inductor", graph_role="forward",
                     dynamic=False, config_diff=[], config_minimal=None, random_inputs_reproduce=True,
                     bisect=GraphBisect(incomplete=True, runs=2, detail="stopped after 5 s"),
                     culprit=Culprit(["aten.relu.default"]), seconds=2.0,
                     final="/w/checkpoints/4.py", isolated=True, note="resumed"),
        Localized("inductor", [StageVerdict("eager", "pass")], "inductor", True, "from the capture"),
        _builds_found(), _verified_record().replace(builds=_builds_found(), collect_env="PyTorch version: 2.13.0"),
        Loaded(9, "aot", True), Checkpoint(4, "/w/4.py"), Pinned(sig), Query(2, 4, False, True, True),
        Final("/w/final/repro.py", [], [], False, True, Judge("accuracy")), Done("partial"), Probe(True, "broken"),
        Stage("aot_eager", "pass"),
        ResultsDoc(RunSettings(backend="inductor", dynamic=False, config={}, source="zoo", timeout=60.0, shard="1/2",
                               models=["m"], reruns=1, retry=[],
                               matrix=[Configuration("inductor", "inference", "float32", "cpu", False, {}),
                                       Configuration("eager", "training", "bfloat16", "cuda", True, {"a.b": 1})]),
                   {"torch": "2.13.0+cpu", "gpus": []}, [CheckRow(id="m", status="pass", spec=Spec("zoo"))], "0.1.0",
                   "2026-11-22T03:00:00Z", None, False),
        MergeRecord("2026-11-22T03:01:00Z", [MergedShard("1/2", "shard-1", "inductor, inference, float32, cpu", 3)],
                    ["2/2"], {"shard-1": ["stray.txt"]}, False, 3, 1),
    ]


def _builds_found() -> BuildsFound:
    return BuildsFound([BuildVerdict("2.13.0", "good", "", "2.13.0+cpu", "a" * 40, 2, 0, 3.5),
                        BuildVerdict("2.14.0", "untested"),
                        BuildVerdict("2.15.0", "bad", "", "2.15.0+cu130", "b" * 40, 2, 2, 4.0)],
                       ["2.15.0"], ["2.13.0"], [], [BuildBoundary("introduced", "2.13.0", "2.15.0", "2.13.0+cpu",
                                                                  "2.15.0+cu130", [], {"from": "a", "to": "b"})],
                       {"anchor": 1, "before": 1, "after": 0}, 2, 2, 3)


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


# --- the check row (results.json's "checks") and the check child's request ---------------------------


def _program_row() -> CheckRow:
    """A harness check's row with every nested record: it failed its first run and deterministically
    on its rerun, which captured for minify."""
    return CheckRow(
        id="relu_mlp-inductor-inference-float32-cpu", model="relu_mlp",
        spec=Spec(source="harness", pytorch="/src/pytorch", suite="timm_models", model="relu_mlp", batch_size=2,
                  patterns={"accuracy": ["drift"], "error": []}),
        backend="inductor", mode="inference", dtype="float32", device="cpu", dynamic=False,
        config={"inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy"},
        status="fail_accuracy", failure_class="accuracy",
        error=CheckError(type="AccuracyCheck", message="the harness's accuracy check failed for output 'logits'",
                         traceback="tb", frames=[], output_key="logits"),
        accuracy=Accuracy(tolerance=0.01, rmse_res=0.5, rmse_ref=1e-4), classified_by="harness csv", exit_code=1,
        batch_size=2, compile_s=1.5, stats={"unique_graphs": 1},
        harness=HarnessFacts("timm_models", "benchmarks/dynamo/timm_models.py", "a" * 40, "5.23.0", None, None,
                             "avx2"),
        reproduce="python benchmarks/dynamo/timm_models.py --accuracy", compiled_graphs=1, compile_frames=1,
        duration_s=12.5, reruns=1, deterministic=True,
        capture=RerunCapture("aot", 4, [Launcher(1, "/w/checks/x.capture/launchers/1.py")], 1),
        log="checks/relu_mlp-inductor-inference-float32-cpu.log", baseline="new", baseline_status="pass")


def _check_rows() -> list[CheckRow]:
    flaky = CheckRow(id="m-eager", model="m", spec=Spec(source="zoo", model="m"), backend="eager", mode="training",
                     dtype="bfloat16", device="cuda", dynamic=True, config={}, status="pass",
                     flaky=FirstAttempt(2, "checks/m-eager.log", "fail_to_run", "runtime_error",
                                        CheckError("RuntimeError", "builtins", None, "boom", "tb", [])),
                     duration_s=3.0, log="checks/m-eager.log")
    return [_program_row(), flaky, CheckRow(status="timeout", failure_class="timeout", phase="compile")]


@pytest.mark.parametrize("record", [*_check_rows(), Spec(source="yaml", file="/m.yaml", model="m", factory="f:g",
                                                           options={"tolerance": 0.1}, batch_size=4),
                                    CheckRequest(Spec(source="zoo", model="mlp_relu"),
                                                 Settings(backend="aot_eager", config={"inductor.a": 1}, timeout=9.0))],
                         ids=lambda r: type(r).__name__)
def test_a_check_row_spec_and_request_read_back_equal_from_their_json(record):
    back = type(record).from_json(json.loads(json.dumps(record.to_json())))
    assert back == record and type(back) is type(record)


def test_the_check_childs_request_and_row_cross_as_files(tmp_path):
    req = CheckRequest(Spec(source="zoo", model="mlp_relu"), Settings(dtype="bfloat16"))
    req.write(str(tmp_path / "check.json"))
    assert CheckRequest.read(str(tmp_path / "check.json")) == req
    assert read_row(str(tmp_path / "row.json")) is None   # the child died before writing one


def test_a_row_writes_what_its_check_set_and_every_rows_verdict():
    doc = CheckRow(id="x", status="pass", launchers=[Launcher(1, "/w/1.py")]).to_json()
    assert doc == {"id": "x", "status": "pass", "failure_class": None, "error": None, "accuracy": None,
                   "duration_s": None, "log": None, "baseline": None}   # the hook's launchers stay here
    err = CheckError("RuntimeError", "builtins", None, "m", "tb", []).to_json()
    assert list(err) == ["type", "module", "wrapper", "message", "traceback", "frames"] and err["wrapper"] is None


def test_a_row_from_the_results_writer_validates_and_reads_back(tmp_path):
    rows = [*_check_rows()[:2], _program_row().replace(id="b", error=None, accuracy=None, status="pass",
                                                        failure_class=None, capture=None, log=None)]
    w = ResultsWriter(str(tmp_path), RunSettings(source="harness", backend="inductor"), {"torch": "2.13.0"})
    for row in rows:
        w.add(row)
    w.finish()
    doc = json.loads((tmp_path / rundir.RESULTS).read_text())
    rundir.validate(doc, "results", "results.json")
    assert rundir.read_results(tmp_path).checks == rows
    assert rundir.load_untrusted(tmp_path).rows == rows


def test_a_rows_unknown_keys_are_dropped_at_every_level():
    doc = _program_row().to_json()
    doc["from_a_newer_version"] = 1
    doc["spec"]["extra"] = "x"
    doc["error"]["hint"] = "y"
    doc["capture"]["launchers"][0]["size"] = 3
    back = CheckRow.from_json(doc)
    assert back == _program_row() and back.to_json() == _program_row().to_json()
    with pytest.raises(RecordError, match="Spec: expected an object, got str"):
        CheckRow.from_json({"id": "x", "spec": "zoo"})


def test_an_event_family_parses_its_own_kinds_and_takes_no_kind_twice():
    from bot import records

    class Family(records.Event):
        pass

    class Ping(Family, kind="ping"):
        n: int

    assert Ping(3).to_json() == {"event": "ping", "n": 3}
    assert Family.parse({"event": "ping", "n": 3}) == Ping(3)
    assert Family.parse({"event": "query", "n": 1, "nodes": 2, "fails": True}) is None   # another family's kind
    assert Family.parse({"event": ["ping"]}) is None and Family.parse({"event": "ping"}) is None
    with pytest.raises(TypeError, match="taken"):
        class Pong(Family, kind="ping"):
            pass
