"""minify end to end on real injected inductor bugs (real checks, real compiles, real subprocesses).

One sweep per bug — cpp relu compile_error / runtime_error / accuracy and cpp log1p accuracy —
over the built-in models that show each mechanism once, run by the real `minify-bot check`, with a
harmless extra override (inductor.compile_threads=1): relu's accuracy bug on an MLP and on a conv
net with batch norm, its compile error on a residual block, its runtime error raised (MLP) and
aborting the process (conv_bn: a C++ exception thrown inside an OpenMP region, which minify must
still reduce, one forked process per query), log1p's accuracy bug in a where/exp chain and in a GRU.
The checks compile the models first, so minify's capture runs against a warm inductor cache (FX
graph cache populated): capture must still work.

The four sweeps' rows go into one run directory, with a broken row first (no spec: minify cannot
rerun it), and ONE `minify` call handles all eight: the broken one must not stop the others.
Every failure is verified in 3 fresh processes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
LOG1P = "inductor.cpp.inject_log1p_bug_TESTING_ONLY"
BUGS = {
    "relu-accuracy": (RELU, "accuracy", ["mlp_relu", "conv_bn"], "aten.relu.default"),
    "relu-compile_error": (RELU, "compile_error", ["resblock"], "aten.relu.default"),
    # conv_bn aborts (SIGABRT) instead of raising
    "relu-runtime_error": (RELU, "runtime_error", ["mlp_relu", "conv_bn"], "aten.relu.default"),
    "log1p-accuracy": (LOG1P, "accuracy", ["log1p_exp_where", "gru"], "aten.log1p.default"),
}
CASES = [(bug, i) for bug in BUGS for i in range(len(BUGS[bug][2]))]
HARMLESS = "inductor.compile_threads"


@pytest.fixture(scope="module")
def sweep(workdir, bot):
    """One `check` per bug over its three models; the rows are combined into one run directory
    (with a broken row that minify cannot rerun) and minified by ONE `minify` call.
    Returns (run_dir, {bug: {model: row}}, minify stderr, broken row id)."""
    rows_by_bug, all_rows, settings = {}, [], None
    for bug, (key, kind, models, _) in BUGS.items():
        run = workdir / "checks" / bug
        p = bot("check", "--out", run, "--models", ",".join(models), "--config", f"{key}={kind}",
                "--config", f"{HARMLESS}=1", "--timeout", "300", "--reruns", "0")
        doc = json.loads((run / "results.json").read_text())
        rows = {r["model"]: r for r in doc["checks"]}
        assert [rows[m]["failure_class"] for m in models] == [kind] * len(models), (p.stderr[-2000:], [
            (r["id"], r["status"], r.get("error")) for r in doc["checks"]])
        for r in doc["checks"]:
            r["id"] = f"{bug}-{r['id']}"
        rows_by_bug[bug] = rows
        all_rows += doc["checks"]
        settings = doc["settings"]
    fx_cache = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "fxgraph")
    assert os.path.isdir(fx_cache) and os.listdir(fx_cache), "the checks should have warmed the FX graph cache"
    good = rows_by_bug["relu-accuracy"]["mlp_relu"]
    broken = {k: v for k, v in good.items() if k != "spec"}  # no spec: minify cannot rerun it
    broken["id"] = "broken-" + good["id"]
    run = workdir / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({**doc, "settings": settings, "checks": [broken] + all_rows}))
    p = bot("minify", "--out", run, "--budget", "300", "--no-bisect")
    assert p.returncode == 1, p.stderr[-4000:]
    return run, rows_by_bug, p.stderr, broken["id"]


@pytest.mark.parametrize("bug,i", CASES, ids=[f"{b}-{BUGS[b][2][i]}" for b, i in CASES])
def test_each_injected_bug_minimizes_to_the_culprit_op_and_verifies_3_of_3(sweep, bug, i):
    key, fclass, models, culprit = BUGS[bug]
    run, rows_by_bug, stderr, _ = sweep
    row = rows_by_bug[bug][models[i]]
    fdir = run / "failures" / row["id"]
    rec = json.loads((fdir / "failure.json").read_text())
    r = rec["repro"]
    assert r["status"] == "minimized", (r["reason"], stderr[-3000:])
    assert rec["class"] == fclass and rec["stage"] == "inductor"
    assert [a["backend"] for a in rec["ablation"]] == ["eager", "aot_eager", "aot_eager_decomp_partition",
                                                       "inductor"]
    assert [a["status"] for a in rec["ablation"][:3]] == ["pass"] * 3
    ops = [g["op"] for g in r["graph"]]
    # culprit-exact: the one op that fails compiled alone, its inputs and its output
    assert ops == [culprit], ops
    assert rec["culprit"] == {"ops": [culprit], "method": "compiled-alone", "bisect": None}, rec["culprit"]
    assert r["capture"]["role"] == "inference"
    assert r["nodes_after"] < r["nodes_before"]
    assert r["verification"]["runs"] == 3 and r["verification"]["failed_same_way"] == 3, (
        r["verification"], (fdir / "minifier.log").read_text()[-6000:])
    assert r["capture"]["repro_after"] == "aot"
    assert r["capture"]["repro_level"] == {"accuracy": 4, "compile_error": 2, "runtime_error": 3}[fclass]
    # the minimal config is exactly the injection key, although compile_threads=1 was also given
    assert [d["key"] for d in rec["config"]["minimal"]] == [key]
    assert HARMLESS in [d["key"] for d in rec["config"]["diff"]]
    assert rec["versions"]["torch"] and rec["versions"]["python"]
    assert {"localize", "capture", "reduce", "verify", "total"} <= set(r["timings"])
    # the published repro is clean and self-contained
    src = (fdir / "repro.py").read_text()
    assert not re.search(r"['\"]/(tmp|home|root|work)/", src)
    assert "os.environ[" not in src and "TORCHINDUCTOR_CACHE_DIR" not in src
    assert "compile_threads" not in src and f"{key.split('.', 1)[1]} = {fclass!r}" in src
    assert (fdir / "inputs" / "storages").is_dir() and (fdir / "minifier.log").exists()
    if fclass == "accuracy":  # never drifts into an error or an empty graph
        assert "accuracy='accuracy'" in src and "AccuracyError" not in (rec["error"] or {}).get("type", "")
    # a standalone repro (random inputs) exactly when random inputs reproduce the failure
    standalone = bool(r["verification"]["random_inputs_reproduce"])
    assert (r["standalone_path"] == "repro_standalone.py", (fdir / "repro_standalone.py").exists()) == \
        (standalone, standalone), r
    if row["error"] and row["error"].get("type") == "UncaughtCppException":
        assert "one forked process per query" in stderr or "isolated" in stderr


def test_the_sweep_holds_a_runtime_error_that_aborts_the_process(sweep):
    """The mechanism the one-process-per-query path exists for is in the corpus: conv_bn's injected
    runtime error is a C++ exception thrown inside an OpenMP region, which aborts the process."""
    _, rows_by_bug, stderr, _ = sweep
    row = rows_by_bug["relu-runtime_error"]["conv_bn"]
    assert (row["error"] or {}).get("type") == "UncaughtCppException", row["error"]
    assert "one forked process per query" in stderr or "isolated" in stderr


def test_failure_records_follow_the_schema(sweep):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parent.parent / "bot" / "schemas" / "failure.schema.json").read_text())
    run = sweep[0]
    failing = {r["id"] for r in json.loads((run / "results.json").read_text())["checks"] if r.get("failure_class")}
    records = sorted((run / "failures").glob("*/failure.json"))
    assert failing and {f.parent.name for f in records} == failing   # one record per failing check
    for f in records:
        jsonschema.validate(json.loads(f.read_text()), schema)


def test_a_failure_minify_cannot_rerun_says_why_and_does_not_stop_the_others(sweep):
    run, rows_by_bug, stderr, broken = sweep
    bad = json.loads((run / "failures" / broken / "failure.json").read_text())
    # not blamed on dynamo (its rerun "fails" with every backend): it cannot be rerun at all
    assert bad["repro"]["status"] == "none" and "it has no spec" in bad["repro"]["reason"]
    assert bad["stage"] is None
    assert f"{broken}: none" in stderr
    # it came first; all the others were still minified (checked one by one above)
    assert len(list((run / "failures").glob("*/repro.py"))) == len(CASES)


def test_a_clean_graph_gives_no_repro_and_says_why(sweep, bot, workdir):
    """The minimized accuracy repro with the injection switched off is a clean graph."""
    run, rows_by_bug, _, _ = sweep
    fdir = run / "failures" / rows_by_bug["relu-accuracy"]["mlp_relu"]["id"]
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


def test_a_crashing_worker_resumes_isolated_from_its_checkpoint(sweep, bot, workdir):
    run, rows_by_bug, _, _ = sweep
    fdir = run / "failures" / rows_by_bug["relu-accuracy"]["mlp_relu"]["id"]
    out = workdir / "again"
    p = bot("minify", "--repro", fdir / "repro.py", "--out", out, "--verify-runs", "1", "--no-bisect", "--no-trace",
            env={"MINIFY_BOT_WORKER_CRASH_AFTER": "0"})  # the worker dies on its first query
    rec = json.loads((out / "failures" / "repro" / "failure.json").read_text())
    assert rec["repro"]["status"] == "minimized", p.stderr[-3000:]
    # --no-trace: the verified repro is not rerun with TORCH_TRACE
    assert "trace" not in rec and "trace: skipped (--no-trace)" in p.stderr
    assert not (out / "failures" / "repro" / "trace").exists()
    assert "one process per query" in (rec["repro"]["capture"]["note"] or "")
    assert [g["op"] for g in rec["repro"]["graph"]] == ["aten.relu.default"]


def test_a_worker_that_dies_in_the_bisector_still_ends_with_one_verified_repro(sweep, bot, workdir):
    """The parent starts verifying the final repro while the worker bisects; the worker dies there,
    minification resumes isolated, and the record, the repro and its verification still agree."""
    run, rows_by_bug, _, _ = sweep
    fdir = run / "failures" / rows_by_bug["relu-accuracy"]["conv_bn"]["id"]
    out = workdir / "bisect-crash"
    p = bot("minify", "--repro", fdir / "repro.py", "--out", out, env={"MINIFY_BOT_WORKER_CRASH_IN_BISECT": "1"})
    assert "while the bisector runs" in p.stderr, p.stderr[-3000:]
    rec = json.loads((out / "failures" / "repro" / "failure.json").read_text())
    r = rec["repro"]
    assert r["status"] == "minimized" and r["verification"]["failed_same_way"] == 3, (r, p.stderr[-3000:])
    assert "one process per query" in (r["capture"]["note"] or "")
    assert [g["op"] for g in r["graph"]] == ["aten.relu.default"]
    src = (out / "failures" / "repro" / "repro.py").read_text()
    assert "inject_relu_bug_TESTING_ONLY = 'accuracy'" in src
    log = (out / "failures" / "repro" / "minifier.log").read_text()
    # the launcher verified once, not twice (the plain repro's own runs say "plain repro: verify run ...")
    assert len(re.findall(r"(?m)^verify run 1/3", log)) == 1, log[-3000:]
    # both workers (the one that died and the resumed one) forked from the command's fork server
    assert log.count("(forked from the fork server) -m bot.minify.worker minify") == 2, log[-3000:]


def relu_backend(name: str, doc: str, relu_off: str) -> str:
    """The source of a user's compiler module: ``name`` compiles a graph with every relu replaced
    by ``_relu_off`` (its body: ``relu_off``, over ``x``)."""
    return f'''
import torch


def _relu_off(x, *args, **kwargs):
    {relu_off}


def {name}(gm, example_inputs):
    """{doc}"""
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in (torch.relu, torch.nn.functional.relu):
            n.target = _relu_off
        elif n.op == "call_module" and isinstance(gm.get_submodule(n.target), torch.nn.ReLU):
            n.op, n.target = "call_function", _relu_off
    gm.recompile()
    return gm.forward
'''


def run_with_backend(bot, workdir, module: str, source: str, function: str, models: str, *extra):
    """``minify-bot run`` over ``models`` with a user's compiler ``module:function`` (its
    ``source`` written where the run imports it): (run directory, process, the env it needs)."""
    pkg = workdir / f"{module}-pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / f"{module}.py").write_text(source)
    env = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent), str(pkg)])}
    out = workdir / f"{module}-run"
    p = bot("run", "--models", models, "--backend", f"{module}:{function}", *extra, "--out", out, env=env)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    return out, p, env


USER_BACKEND = relu_backend("buggy", "A user's compiler with a bug: relu comes out 0.01 too high.",
                            "return torch.relu(x) + 0.01")


def test_a_users_own_backend_is_minified_verified_and_its_repro_registers_it(bot, workdir):
    """`--backend module:function`: the worker compiles with the user's function, the repros import
    and register it under the name the check used, and two models that hit its one bug file one
    issue with a verified repro that runs on its own."""
    import subprocess
    import sys

    out, _, env = run_with_backend(bot, workdir, "mycompiler", USER_BACKEND, "buggy", "mlp_relu,conv_bn")
    issues = [json.loads(f.read_text()) for f in (out / "issues").glob("*.json")]
    bugs = [i for i in issues if "dashboard" not in i["title"]]
    assert len(bugs) == 1 and "relu" in bugs[0]["title"], [i["title"] for i in issues]
    for cid in ("mlp_relu-mycompiler_buggy-inference-float32-cpu", "conv_bn-mycompiler_buggy-inference-float32-cpu"):
        rec = json.loads((out / "failures" / cid / "failure.json").read_text())
        assert rec["repro"]["status"] == "minimized" and rec["repro"]["verification"]["failed_same_way"] == 3, rec
        plain = (out / "failures" / cid / "repro_plain.py").read_text()
        assert "torch._dynamo.register_backend(_backend_under_test, 'mycompiler:buggy')" in plain
        run = subprocess.run([sys.executable, str(out / "failures" / cid / "repro_plain.py")], capture_output=True,
                             text=True, timeout=300, env={**os.environ, **env})
        assert run.returncode == 1 and "AccuracyError" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]


POISONING_BACKEND = '''
import torch


class AcceleratorError(RuntimeError):
    """What torch raises for a sticky CUDA fault."""


_FAULTED = []   # this process's device is unusable from the first fault on, as CUDA's context is


def _has_relu(gm):
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in (torch.relu, torch.nn.functional.relu):
            return True
        if n.op == "call_module" and isinstance(gm.get_submodule(n.target), torch.nn.ReLU):
            return True
    return False


def faulting(gm, example_inputs):
    """A user's GPU compiler whose relu kernel reads out of bounds: the run faults, and every
    later run in the same process fails the same way."""
    relu = _has_relu(gm)

    def run(*args):
        if relu or _FAULTED:
            _FAULTED.append(1)
            raise AcceleratorError("CUDA error: an illegal memory access was encountered\\n"
                                   "CUDA kernel errors might be asynchronously reported at some other API call")
        return gm.forward(*args)
    return run
'''


def test_a_device_fault_is_pinned_then_minimized_in_fresh_processes_and_verified(bot, workdir):
    """The whole chain a GPU fault takes: the in-process worker pins the fault the capture shows,
    leaves (its process can judge nothing more), and minification resumes with one process per
    query; the repro is minimal, verified 3/3 in fresh processes, and filed as one issue."""
    out, _, _ = run_with_backend(bot, workdir, "gpucompiler", POISONING_BACKEND, "faulting", "mlp_relu")
    fdir = out / "failures" / "mlp_relu-gpucompiler_faulting-inference-float32-cpu"
    rec = json.loads((fdir / "failure.json").read_text())
    r = rec["repro"]
    log = (fdir / "minifier.log").read_text()
    assert r["status"] == "minimized" and r["verification"]["failed_same_way"] == 3, (r, log[-4000:])
    assert "the device is unusable in this process" in log, log[-4000:]
    note = r["capture"]["note"] or ""
    assert "device unusable" in note and "one process per query" in note and "InvalidBackend" not in note, note
    assert [g["op"] for g in r["graph"]] == ["relu"], r["graph"]
    assert rec["error"]["type"] == "AcceleratorError"
    bugs = [json.loads(f.read_text()) for f in (out / "issues").glob("*.json")]
    bugs = [i for i in bugs if "dashboard" not in i["title"]]
    assert len(bugs) == 1 and "illegal memory access" in bugs[0]["body"], [i["title"] for i in bugs]


AMP_BACKEND = relu_backend("half_relu_off", "A user's compiler whose relu is off by one in reduced precision only.",
                           "return torch.relu(x) + (1 if x.dtype in (torch.bfloat16, torch.float16) else 0)")


def test_a_graph_captured_after_dynamo_is_judged_and_repro_d_under_the_programs_autocast(bot, workdir):
    """An amp check whose bug shows only in reduced precision, captured after dynamo: the graph
    holds the program's float32 ops (autocast cast them as they ran), so the worker and the repros
    run it under the autocast the capture recorded. Without it the graph computes in float32 and
    the failure was "not reproduced"."""
    import subprocess
    import sys

    out, _, env = run_with_backend(bot, workdir, "ampcompiler", AMP_BACKEND, "half_relu_off", "mlp_relu",
                                   "--dtype", "amp")
    fdir = out / "failures" / "mlp_relu-ampcompiler_half_relu_off-inference-amp-cpu"
    rec = json.loads((fdir / "failure.json").read_text())
    r = rec["repro"]
    assert r["status"] == "minimized" and r["verification"]["failed_same_way"] == 3, (
        r, (fdir / "minifier.log").read_text()[-4000:])
    assert r["capture"]["repro_after"] == "dynamo" and [g["op"] for g in r["graph"]] == ["relu"], r
    on = "torch.set_autocast_enabled('cpu', True); torch.set_autocast_dtype('cpu', torch.bfloat16)"
    plain = (fdir / "repro_plain.py").read_text()
    assert on in plain and on in (fdir / "repro.py").read_text()
    assert "autocast=True" in (fdir / "repro.py").read_text()   # torch's run_repro would turn it off
    run = subprocess.run([sys.executable, str(fdir / "repro_plain.py")], capture_output=True, text=True,
                         timeout=300, env={**os.environ, **env})
    assert run.returncode == 1 and "AccuracyError" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
