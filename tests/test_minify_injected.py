"""minify end to end on real injected inductor bugs (real checks, real compiles, real subprocesses).

One sweep per bug — cpp relu compile_error / runtime_error / accuracy and cpp log1p accuracy —
over three built-in models each, run by the real `minify-bot check`, with a harmless extra
override (inductor.compile_threads=1). The checks compile the models first, so minify's capture
runs against a warm inductor cache (FX graph cache populated): capture must still work. On
conv_bn and the transformer the injected runtime error aborts the process (a C++ exception thrown
inside an OpenMP region): minify must still reduce it, one forked process per query.

Every failure is verified in 3 fresh processes. Localize (the stage ablation) runs for the first
model of each bug; the others use --no-localize to keep the suite's time down.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
LOG1P = "inductor.cpp.inject_log1p_bug_TESTING_ONLY"
BUGS = {
    "relu-accuracy": (RELU, "accuracy", ["mlp_relu", "conv_bn", "resblock"], "aten.relu.default"),
    "relu-compile_error": (RELU, "compile_error", ["resblock", "mlp_relu", "conv_bn"], "aten.relu.default"),
    # conv_bn and transformer abort (SIGABRT) instead of raising
    "relu-runtime_error": (RELU, "runtime_error", ["mlp_relu", "conv_bn", "transformer"], "aten.relu.default"),
    "log1p-accuracy": (LOG1P, "accuracy", ["log1p_exp_where", "mlp_gelu", "gru"], "aten.log1p.default"),
}
CASES = [(bug, i) for bug in BUGS for i in range(3)]
# ops that may carry the culprit's input (views/copies), never compute
PLUMBING = {"aten.view.default", "aten.permute.default", "aten.t.default", "aten.clone.default",
            "aten.expand.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.alias.default"}
HARMLESS = "inductor.compile_threads"


@pytest.fixture(scope="module")
def workdir():
    # not pytest's tmp_path: its retention policy can delete a directory of a concurrent session
    d = Path(tempfile.mkdtemp(prefix="minify-test-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


_SWEEPS: dict = {}


@pytest.fixture(scope="module")
def sweep(workdir, bot):
    """sweep(bug) -> (run_dir, {model: row}, minify stderr); each bug's sweep runs once."""

    def get(bug):
        if bug in _SWEEPS:
            return _SWEEPS[bug]
        key, kind, models, _ = BUGS[bug]
        run = workdir / bug
        p = bot("check", "--out", run, "--models", ",".join(models), "--config", f"{key}={kind}",
                "--config", f"{HARMLESS}=1", "--timeout", "300")
        doc = json.loads((run / "results.json").read_text())
        rows = {r["model"]: r for r in doc["checks"]}
        assert [rows[m]["failure_class"] for m in models] == [kind] * 3, (p.stderr[-2000:], [
            (r["id"], r["status"], r.get("error")) for r in doc["checks"]])
        fx_cache = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "fxgraph")
        assert os.path.isdir(fx_cache) and os.listdir(fx_cache), "the checks should have warmed the FX graph cache"
        first, rest = rows[models[0]]["id"], ",".join(rows[m]["id"] for m in models[1:])
        p1 = bot("minify", "--out", run, "--only", first, "--budget", "300", "--no-bisect", check=True)
        p2 = bot("minify", "--out", run, "--only", rest, "--budget", "300", "--no-bisect", "--no-localize",
                 check=True)
        _SWEEPS[bug] = (run, rows, p1.stderr + p2.stderr)
        return _SWEEPS[bug]

    return get


@pytest.mark.parametrize("bug,i", CASES, ids=[f"{b}-{BUGS[b][2][i]}" for b, i in CASES])
def test_each_injected_bug_minimizes_to_the_culprit_op_and_verifies_3_of_3(sweep, bug, i):
    key, fclass, models, culprit = BUGS[bug]
    run, rows, stderr = sweep(bug)
    row = rows[models[i]]
    fdir = run / "failures" / row["id"]
    rec = json.loads((fdir / "failure.json").read_text())
    r = rec["repro"]
    assert r["status"] == "minimized", (r["reason"], stderr[-3000:])
    assert rec["class"] == fclass and rec["stage"] == "inductor"
    if i == 0:
        assert [a["backend"] for a in rec["ablation"]] == ["eager", "aot_eager", "aot_eager_decomp_partition",
                                                           "inductor"]
        assert [a["status"] for a in rec["ablation"][:3]] == ["pass"] * 3
    ops = [g["op"] for g in r["graph"]]
    assert ops.count(culprit) == 1 and set(ops) - {culprit} <= PLUMBING, ops
    assert r["nodes_after"] < r["nodes_before"]
    assert r["verification"]["runs"] == 3 and r["verification"]["failed_same_way"] == 3, r["verification"]
    assert r["capture"]["repro_after"] == "aot"
    assert r["capture"]["repro_level"] == {"accuracy": 4, "compile_error": 2, "runtime_error": 3}[fclass]
    # the minimal config is exactly the injection key, although compile_threads=1 was also given
    assert [d["key"] for d in rec["config"]["minimal"]] == [key]
    assert HARMLESS in [d["key"] for d in rec["config"]["diff"]]
    assert rec["versions"]["torch"] and rec["versions"]["python"]
    assert {"capture", "reduce", "verify", "total"} <= set(r["timings"])
    # the published repro is clean and self-contained
    src = (fdir / "repro.py").read_text()
    assert not re.search(r"['\"]/(tmp|home|root|work)/", src)
    assert "os.environ[" not in src and "TORCHINDUCTOR_CACHE_DIR" not in src
    assert "compile_threads" not in src and f"{key.split('.', 1)[1]} = {fclass!r}" in src
    assert (fdir / "inputs" / "storages").is_dir() and (fdir / "minifier.log").exists()
    if fclass == "accuracy":  # never drifts into an error or an empty graph
        assert "accuracy='accuracy'" in src and "AccuracyError" not in (rec["error"] or {}).get("type", "")
    if r["verification"]["random_inputs_reproduce"]:
        assert r["standalone_path"] == "repro_standalone.py" and (fdir / "repro_standalone.py").exists()
    if row["error"] and row["error"].get("type") == "UncaughtCppException":
        assert "one forked process per query" in stderr or "isolated" in stderr


def test_failure_records_follow_the_schema(sweep):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parent.parent / "bot" / "schemas" / "failure.schema.json").read_text())
    for bug in ("relu-accuracy", "relu-runtime_error"):
        run, rows, _ = sweep(bug)
        for row in rows.values():
            jsonschema.validate(json.loads((run / "failures" / row["id"] / "failure.json").read_text()), schema)


def test_a_clean_graph_gives_no_repro_and_says_why(sweep, bot, workdir):
    """The minimized accuracy repro with the injection switched off is a clean graph."""
    run, rows, _ = sweep("relu-accuracy")
    fdir = run / "failures" / rows["mlp_relu"]["id"]
    clean = workdir / "clean"
    shutil.copytree(fdir, clean)
    src = (clean / "repro.py").read_text()
    (clean / "repro.py").write_text(src.replace("inject_relu_bug_TESTING_ONLY = 'accuracy'",
                                                "inject_relu_bug_TESTING_ONLY = None"))
    out = workdir / "clean-out"
    p = bot("minify", "--repro", clean / "repro.py", "--out", out, "--no-bisect")
    assert p.returncode == 0, p.stderr[-3000:]
    rec = json.loads((out / "failures" / "repro" / "failure.json").read_text())
    assert rec["repro"]["status"] == "not_reproduced"
    assert "does not fail when run on its own" in rec["repro"]["reason"]
    assert not (out / "failures" / "repro" / "repro.py").exists()


def test_a_crash_while_minifying_one_failure_does_not_stop_the_others(sweep, bot, workdir):
    run, rows, _ = sweep("relu-accuracy")
    doc = json.loads((run / "results.json").read_text())
    good = rows["mlp_relu"]
    broken = {k: v for k, v in good.items() if k != "spec"}  # no spec: minify cannot rerun it
    broken["id"] = "broken-" + good["id"]
    doc["checks"] = [broken, good]
    other = workdir / "with-broken"
    other.mkdir()
    (other / "results.json").write_text(json.dumps(doc))
    p = bot("minify", "--out", other, "--no-bisect", "--no-localize", "--verify-runs", "1")
    assert p.returncode == 1, p.stderr[-3000:]
    bad = json.loads((other / "failures" / broken["id"] / "failure.json").read_text())
    assert bad["repro"]["status"] == "none" and "internal error" in bad["repro"]["reason"]
    ok = json.loads((other / "failures" / good["id"] / "failure.json").read_text())
    assert ok["repro"]["status"] == "minimized"


def test_a_crashing_worker_resumes_isolated_from_its_checkpoint(sweep, bot, workdir):
    run, rows, _ = sweep("relu-accuracy")
    fdir = run / "failures" / rows["mlp_relu"]["id"]
    out = workdir / "again"
    p = bot("minify", "--repro", fdir / "repro.py", "--out", out, "--verify-runs", "1", "--no-bisect",
            env={"MINIFY_BOT_WORKER_CRASH_AFTER": "1"})
    rec = json.loads((out / "failures" / "repro" / "failure.json").read_text())
    assert rec["repro"]["status"] == "minimized", p.stderr[-3000:]
    assert "one process per query" in (rec["repro"]["capture"]["note"] or "")
    assert [g["op"] for g in rec["repro"]["graph"]] == ["aten.relu.default"]
