"""minify end to end on real injected inductor bugs (real checks, real compiles, real subprocesses).

One run directory holds four failing checks — cpp relu compile_error / runtime_error / accuracy and
cpp log1p accuracy — on different zoo models, each with a harmless extra override
(inductor.compile_threads=1). The checks themselves compile the models first, so minify's capture
runs against a warm inductor cache (FX graph cache populated): capture must still work.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from bot.minify.fixtures import run_checks

pytestmark = pytest.mark.slow

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
LOG1P = "inductor.cpp.inject_log1p_bug_TESTING_ONLY"
CASES = [
    ("mlp_relu", {RELU: "accuracy"}, "accuracy", "aten.relu.default"),
    ("resblock", {RELU: "compile_error"}, "compile_error", "aten.relu.default"),
    # (the transformer's relu runs inside an OpenMP region, where the injected `throw` aborts the process)
    ("mlp_relu", {RELU: "runtime_error"}, "runtime_error", "aten.relu.default"),
    ("log1p_exp_where", {LOG1P: "accuracy"}, "accuracy", "aten.log1p.default"),
]
# ops that may carry the culprit's input (views/copies), never compute
PLUMBING = {"aten.view.default", "aten.permute.default", "aten.t.default", "aten.clone.default",
            "aten.expand.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.alias.default"}


@pytest.fixture(scope="module")
def workdir():
    # not pytest's tmp_path: its retention policy can delete a directory of a concurrent session
    d = Path(tempfile.mkdtemp(prefix="minify-test-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def minified(workdir, bot):
    run = workdir / "run"
    doc = run_checks(str(run), [(m, cfg) for m, cfg, _, _ in CASES], {"inductor.compile_threads": 1})
    assert [r["failure_class"] for r in doc["checks"]] == [c for _, _, c, _ in CASES], \
        [(r["id"], r["status"], r.get("error")) for r in doc["checks"]]
    fx_cache = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "fxgraph")
    assert os.path.isdir(fx_cache) and os.listdir(fx_cache), "the checks should have warmed the FX graph cache"
    proc = bot("minify", "--out", run, "--budget", "300", check=True)
    return run, doc, proc


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_each_injected_bug_minimizes_to_the_culprit_op_and_verifies(minified, case):
    model, cfg, fclass, culprit = CASES[case]
    run, doc, proc = minified
    row = doc["checks"][case]
    fdir = run / "failures" / row["id"]
    rec = json.loads((fdir / "failure.json").read_text())
    r = rec["repro"]
    assert r["status"] == "minimized", (r["reason"], proc.stderr[-3000:])
    assert rec["class"] == fclass and rec["stage"] == "inductor"
    assert [a["backend"] for a in rec["ablation"]] == ["eager", "aot_eager", "aot_eager_decomp_partition",
                                                       "inductor"]
    ops = [g["op"] for g in r["graph"]]
    assert ops.count(culprit) == 1 and set(ops) - {culprit} <= PLUMBING, ops
    assert r["nodes_after"] < r["nodes_before"]
    assert r["verification"] == {"runs": 3, "failed_same_way": 3,
                                 "random_inputs_reproduce": r["verification"]["random_inputs_reproduce"]}
    assert r["capture"]["repro_after"] == "aot"
    assert r["capture"]["repro_level"] == {"accuracy": 4, "compile_error": 2, "runtime_error": 3}[fclass]
    # the minimal config is exactly the injection key, although compile_threads=1 was also given
    key = next(iter(cfg))
    assert [d["key"] for d in rec["config"]["minimal"]] == [key]
    assert "inductor.compile_threads" in [d["key"] for d in rec["config"]["diff"]]
    assert rec["versions"]["torch"] and rec["versions"]["python"]
    # the published repro is clean and self-contained
    src = (fdir / "repro.py").read_text()
    assert not re.search(r"['\"]/(tmp|home|root|work)/", src)
    assert "os.environ[" not in src and "TORCHINDUCTOR_CACHE_DIR" not in src
    assert "compile_threads" not in src and f"{key.split('.', 1)[1]} = {cfg[key]!r}" in src
    assert (fdir / "inputs" / "storages").is_dir() and (fdir / "minifier.log").exists()
    if r["verification"]["random_inputs_reproduce"]:
        assert r["standalone_path"] == "repro_standalone.py" and (fdir / "repro_standalone.py").exists()


def test_failure_records_follow_the_schema(minified):
    jsonschema = pytest.importorskip("jsonschema")
    run, doc, _ = minified
    schema = json.loads(open(os.path.join(os.path.dirname(__file__), "..", "bot", "schemas",
                                          "failure.schema.json")).read())
    for row in doc["checks"]:
        jsonschema.validate(json.loads((run / "failures" / row["id"] / "failure.json").read_text()), schema)


def test_accuracy_minification_never_drifts_to_an_error(minified):
    run, doc, _ = minified
    for row in doc["checks"]:
        if row["failure_class"] != "accuracy":
            continue
        rec = json.loads((run / "failures" / row["id"] / "failure.json").read_text())
        out = (run / "failures" / row["id"] / "repro.py").read_text()
        assert "accuracy='accuracy'" in out and rec["repro"]["graph"], "an accuracy repro must check accuracy"


def test_a_crashing_worker_resumes_isolated_from_its_checkpoint(minified, bot, workdir):
    run, doc, _ = minified
    row = doc["checks"][0]
    fdir = run / "failures" / row["id"]
    out = workdir / "again"
    p = bot("minify", "--repro", fdir / "repro.py", "--out", out, "--verify-runs", "1", "--no-bisect",
            env={"MINIFY_BOT_WORKER_CRASH_AFTER": "1"})
    rec = json.loads((out / "failures" / "repro" / "failure.json").read_text())
    assert rec["repro"]["status"] == "minimized", p.stderr[-3000:]
    assert "one process per query" in (rec["repro"]["capture"]["note"] or "")
    assert [g["op"] for g in rec["repro"]["graph"]] == ["aten.relu.default"]
