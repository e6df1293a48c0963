"""The run directory has one owner (bot/rundir.py): its schemas and its code agree, what one stage
writes the next (and `merge`, which trusts nothing) accepts, and no other module parses its files."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jsonschema
import pytest

from bot import rundir
from bot.check import isolate
from bot.check.results import ResultsWriter, csv_to_rows
from bot.check.settings import Settings
from bot.errors import UsageError
from bot.failure import FailureRecord
from bot.records import RunSettings
from tests.ghstub.rundir import check_row, row_of

ROOT = Path(__file__).resolve().parent.parent
BOT = ROOT / "bot"
SETTINGS = Settings()


def _schema(kind):
    return rundir.load_schema(kind)


def test_schemas_and_code_agree_on_ids_status_words_classes_and_actions():
    results, failure, report = _schema("results"), _schema("failure"), _schema("report")
    assert results["properties"]["schema"]["const"] == rundir.RESULTS_SCHEMA
    assert failure["properties"]["schema"]["const"] == rundir.FAILURE_SCHEMA
    assert report["properties"]["schema"]["const"] == rundir.REPORT_SCHEMA
    row = results["properties"]["checks"]["items"]["properties"]
    assert row["status"]["enum"] == list(rundir.STATUSES)
    assert row["failure_class"]["enum"] == [*rundir.FAILURE_CLASSES, None]
    assert failure["properties"]["class"]["enum"] == [*rundir.FAILURE_CLASSES, None]
    assert failure["properties"]["repro"]["properties"]["status"]["enum"] == list(rundir.REPRO_STATUSES)
    assert report["properties"]["actions"]["items"]["properties"]["action"]["enum"] == list(rundir.REPORT_ACTIONS)
    assert {c for c in rundir.STATUS_CLASS.values() if c} <= set(rundir.FAILURE_CLASSES)
    # the harness's words (benchmarks/dynamo/common.py) are all known
    harness = {"pass", "pass_due_to_skip", "fail_accuracy", "fail_to_run", "eager_fail_to_run", "eager_1st_run_fail",
               "eager_2nd_run_fail", "eager_1st_run_OOM", "eager_2nd_run_OOM", "eager_two_runs_differ",
               "eager_variation", "fail_exception", "OOM", "timeout", "model_fail_to_load", "infra_error",
               "not_bitwise_equivalent"}
    assert harness <= set(rundir.STATUSES)
    for schema in (results, failure, report):
        jsonschema.Draft202012Validator.check_schema(schema)


def _status_words_in_code() -> set[str]:
    """Every status word a check writes: the row helpers' calls (judge's _result, classify's _row,
    isolate's died), ``status=`` of a row built in the check and suite modules, {"status": ...}
    literals there, isolate's phase tables."""
    words = set(isolate.PHASE_STATUS.values()) | set(isolate.OOM_PHASE_STATUS.values())
    for path in [*(BOT / "check").glob("*.py"), *(BOT / "suites").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("_result", "_row", "died") \
                    and node.args and isinstance(node.args[0], ast.Constant):
                words.add(node.args[0].value)
            if isinstance(node, ast.Call):
                words.update(k.value.value for k in node.keywords
                             if k.arg == "status" and isinstance(k.value, ast.Constant))
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value == "status" and isinstance(v, ast.Constant):
                        words.add(v.value)
    return words


def test_every_status_word_the_code_writes_is_in_the_schema():
    words = _status_words_in_code()
    assert {"pass", "fail_accuracy", "fail_to_run", "timeout", "model_fail_to_load"} <= words  # the scan works
    assert words <= set(_schema("results")["properties"]["checks"]["items"]["properties"]["status"]["enum"])


def test_what_the_writers_write_validates_as_untrusted_input(tmp_path):
    rows = csv_to_rows([{"name": f"m{i}", "accuracy": s} for i, s in enumerate(rundir.STATUSES)], SETTINGS)
    w = ResultsWriter(str(tmp_path), RunSettings.from_json(SETTINGS.to_dict()).replace(source="csv", shard="1/1"))
    row = row_of(check_row("mlp_relu")).replace(id="mlp_relu-inductor")
    for r in [*rows, row]:
        w.add(r)
    w.finish()
    fdir = rundir.failure_dir(tmp_path, row.id)
    fdir.mkdir(parents=True)
    rundir.write_failure(fdir, FailureRecord.for_check(row))
    run = rundir.load_untrusted(tmp_path)
    assert [r.status for r in run.rows][:len(rundir.STATUSES)] == list(rundir.STATUSES)
    assert run.failures[row.id].signature is None and run.failures[row.id].check == row
    assert rundir.read_results(tmp_path).checks[-1] == row


def test_a_failure_record_with_a_verified_signature_validates(tmp_path):
    from bot.signature import Signature
    from tests.ghstub.rundir import failure_record, record_of

    c = check_row()
    rec = failure_record(c)
    rec["culprit"] = {"ops": ["aten.relu.default"], "bisect": "lowerings: relu", "method": "compiled-alone"}
    rec["signature"] = record_of(rec).verified_signature(Signature("accuracy")).to_json()
    assert rec["signature"]["culprit_ops"] == ["aten.relu.default"] and rec["signature"]["verified"]
    rundir.validate(rec, "failure", "failure.json", rundir.FAILURE_LIMITS)
    rec["signature"]["messages"] = "not a list"
    with pytest.raises(Exception, match="invalid at signature/messages"):
        rundir.validate(rec, "failure", "failure.json")


@pytest.mark.slow
def test_csv_import_with_every_status_word_goes_through_merge_and_report(tmp_path, bot):
    lines = ["dev,name,batch_size,accuracy,calls_captured,unique_graphs,graph_breaks,unique_graph_breaks,"
             "autograd_captures,autograd_compiles,cudagraph_skips,compilation_latency"]
    lines += [f"cpu,model_{i},4,{s},1,1,0,0,0,0,0,1.5" for i, s in enumerate(rundir.STATUSES)]
    (tmp_path / "acc.csv").write_text("\n".join(lines) + "\n")
    shard = tmp_path / "shard"
    p = bot("check", "--suite", "csv", "--csv", tmp_path / "acc.csv", "--out", shard)
    assert p.returncode == 1, p.stderr[-2000:]
    merged = tmp_path / "merged"
    p = bot("merge", shard, "--out", merged)
    assert p.returncode == 0, p.stderr[-2000:]
    p = bot("report", "--out", merged, "--issues-dir", tmp_path / "issues")
    assert p.returncode in (0, 1), p.stderr[-2000:]
    report = rundir.read_report(merged).to_json()
    rundir.validate({"schema": rundir.REPORT_SCHEMA, **report}, "report", "report.json")
    failing = [s for s, c in rundir.STATUS_CLASS.items() if c]
    assert sum(len(a["checks"]) for a in report["actions"]) == len(failing)
    # and an unknown word is refused at import, with a clear error, not later in the report job
    (tmp_path / "bad.csv").write_text(lines[0] + "\ncpu,m,4,fail_sideways,1,1,0,0,0,0,0,1.5\n")
    p = bot("check", "--suite", "csv", "--csv", tmp_path / "bad.csv", "--out", tmp_path / "bad")
    assert p.returncode == 2 and "fail_sideways" in p.stderr and "Traceback" not in p.stderr


# Modules that parse JSON that is not a run-directory file, and what they parse.
JSON_READERS = {
    "bot/rundir.py": "the run directory",
    "bot/safejson.py": "the bounded parser that untrusted JSON (payloads, artifacts) goes through",
    "bot/minify/worker/main.py": "the worker's pinned signature and judge (minify-work/)",
    "bot/minify/records.py": "the worker's job and result files (minify-work/)",
    "bot/minify/reduce.py": "the worker's signature file (minify-work/)",
    "bot/minify/capture.py": "the capture check's row file (minify-work/)",
    "bot/proc.py": "event lines and a forked child's messages over its pipe",
    "bot/forkserver.py": "the preload list and the jobs the fork server is sent",
    "bot/minify/procs.py": "the one line of torch facts a fork of the fork server prints",
    "bot/check/one.py": "the check request file",
    "bot/slash.py": "a /minify request",
    "bot/gha.py": "the GitHub event payload",
    "bot/fingerprint.py": "the issue-body marker",
    "bot/tracker/local.py": "the local tracker's issue files",
    "bot/minify/worker/plain.py": "the plain repro writer's job and result files (a temporary directory)",
}
RUN_DIR_FILES = {rundir.RESULTS, rundir.FAILURE, rundir.REPORT, rundir.MERGE}


def test_each_run_directory_file_has_one_reader_and_one_writer():
    offenders = []
    for path in sorted(BOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name = f"{getattr(node.func.value, 'id', '?')}.{node.func.attr}"
            if name in ("json.load", "json.loads") and rel not in JSON_READERS:
                offenders.append(f"{rel}:{node.lineno} parses JSON ({name})")
            if name in ("json.dump", "json.dumps") and rel not in JSON_READERS and rel != "bot/rundir.py":
                # writing a run-directory file: a file name of the run directory in the same call
                names = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)}
                if names & RUN_DIR_FILES:
                    offenders.append(f"{rel}:{node.lineno} writes a run-directory file")
        if rel != "bot/rundir.py":
            for node in ast.walk(tree):
                # open("…/results.json") / Path(...) / "failure.json" then .read_text / .write_text
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                        node.func.attr in ("read_text", "write_text", "read_bytes") and \
                        any(isinstance(n, ast.Constant) and n.value in RUN_DIR_FILES
                            for n in ast.walk(node.func.value)):
                    offenders.append(f"{rel}:{node.lineno} reads or writes a run-directory file directly")
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open" and \
                        any(isinstance(n, ast.Constant) and isinstance(n.value, str) and
                            n.value.rsplit("/", 1)[-1] in RUN_DIR_FILES for n in ast.walk(node)):
                    offenders.append(f"{rel}:{node.lineno} opens a run-directory file directly")
    assert offenders == []
    # the allowlisted readers parse what they say, not run-directory files
    for rel in JSON_READERS:
        if rel != "bot/rundir.py":
            consts = {n.value for n in ast.walk(ast.parse((ROOT / rel).read_text())) if isinstance(n, ast.Constant)}
            assert not consts & RUN_DIR_FILES, rel


def test_results_rows_share_the_failure_schemas_typed_fields():
    """Fields that reach markdown are typed once (failure.schema.json's $defs); results.json rows
    carry a copy of those definitions, which must not drift."""
    failure, results = rundir.load_schema("failure"), rundir.load_schema("results")
    for name in ("spec", "error", "accuracy", "versions"):
        assert results["$defs"][name] == failure["$defs"][name], name


@pytest.mark.parametrize("part,value", [("settings", ["inductor"]), ("versions", "2.13.0"), ("checks", {})])
def test_a_results_document_with_a_malformed_part_is_refused_naming_the_file(tmp_path, part, value):
    w = ResultsWriter(str(tmp_path), RunSettings(source="zoo"))
    w.add(row_of(check_row("mlp_relu")))
    doc = json.loads((tmp_path / rundir.RESULTS).read_text())
    (tmp_path / rundir.RESULTS).write_text(json.dumps({**doc, part: value}))
    with pytest.raises(UsageError, match=f"results.json: '{part}' must be"):
        rundir.read_results(tmp_path)


def test_the_run_settings_read_back_as_the_check_stage_wrote_them(tmp_path):
    settings = RunSettings.from_json(Settings(backend="aot_eager", dynamic=True).to_dict()).replace(
        source="zoo", shard="2/3", models=["mlp_relu"], reruns=1, retry=[])
    ResultsWriter(str(tmp_path), settings).finish()
    doc = rundir.read_results(tmp_path)
    assert doc.settings == settings and doc.complete and doc.finished and doc.versions["python"]
    assert doc.settings.shard == "2/3" and doc.settings.configurations()[0].label() == \
        "aot_eager, inference, float32, cpu, dynamic"
