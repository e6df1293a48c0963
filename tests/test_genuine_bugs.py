"""Genuine (not injected) inductor bugs end to end, on the mechanisms they need: torch's level-4
accuracy check can pass a wrong graph (then every graph is captured at level 3 and judged by the
worker's own predicate), a program judged by its exit status alone can hide an accuracy failure,
and the repro must judge like the worker and carry only the settings the failure needs.

The program is tests/data/genuine/index_add_expanded.py (pytorch/pytorch#183986, present in
torch 2.13): it runs as a real subprocess through `minify-bot run`, with real inductor compiles."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.minify.package import clean_source
from bot.minify.worker.main import query_bound
from bot.records import ConfigEntry, ConfigSetting

PROGRAM = Path(__file__).parent / "data" / "genuine" / "index_add_expanded.py"
CONFIG_LINE = re.compile(r"^torch\.(_dynamo|_inductor|_functorch)\.config\.\w", re.M)


PASS = ["capture", "reduce", "verify", "package", "trace", "next_capture"]   # one capture pass's steps
BEFORE = ["given_launcher", "screen", "reuse_known", "localize"]


def _steps(stderr: str) -> list[str]:
    """The steps minify's runner entered for the run's one failure, in order (its ``steps:`` line)."""
    (line,) = [ln for ln in stderr.splitlines() if ": steps: " in ln]
    return [part.rsplit(" ", 2)[0] for part in line.split(": steps: ", 1)[1].split(", ")]


def _failure(out: Path) -> dict:
    (fdir,) = (out / "failures").iterdir()
    return json.loads((fdir / "failure.json").read_text()) | {"_dir": str(fdir)}


@pytest.mark.slow
def test_a_wrong_result_torchs_level4_check_misses_is_captured_at_level3_and_verified(workdir, bot):
    """With the FX graph cache off (a user's setting), the capture compiles the graph afresh, and
    torch's level-4 check passes this wrong graph: every graph is then captured at level 3."""
    out = workdir / "level4"
    # no rerun in the check (a rerun would capture every graph at level 3 already): torch's level 4 first
    proc = bot("run", "--command", f"{sys.executable} {PROGRAM}", "--out", out, "--issues-dir", workdir / "issues4",
               "--no-bisect", "--reruns", "0", env={"TORCHINDUCTOR_FX_GRAPH_CACHE": "0"})
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    assert f["class"] == "accuracy"
    cap = f["repro"]["capture"]
    assert cap["repro_level"] == 3 and "level-4" in cap["note"], cap
    assert f["repro"]["status"] == "minimized", f["repro"]["reason"]
    # the level-3 capture is a second pass through the same steps: the runner went back to capture
    assert _steps(proc.stderr) == BEFORE + PASS + PASS, proc.stderr[-3000:]
    assert f["repro"]["verification"]["failed_same_way"] == 3
    ops = {n["op"] for n in f["repro"]["graph"]}
    assert "aten.index_put.default" in ops and "aten.expand.default" in ops, ops
    repro = (Path(f["_dir"]) / "repro.py").read_text()
    # only the judge's settings: the check's tolerance, not torch's looser default, and nothing else
    assert CONFIG_LINE.findall(repro) == ["_dynamo", "_dynamo"], CONFIG_LINE.findall(repro)
    assert "repro_tolerance = 0.0001" in repro and len(repro) < 4000, len(repro)
    body = next((workdir / "issues4").glob("1.md")).read_text()
    assert "index_put" in body.split("\n", 1)[0]                          # the title
    # inlined (the short repro, which reproduces: a function of public torch calls); says which capture
    assert "def fn(" in body and "torch.index_put(" in body and "level-4 accuracy check" in body
    assert "Save as `repro_short.py`" in body
    assert "torch.ops.aten" not in body.split("### Minimized repro")[1].split("\n### ")[0]
    assert "unlocalized" not in body


@pytest.mark.slow
def test_a_wrong_result_whose_graph_comes_from_the_fx_graph_cache_is_caught_by_torchs_level4_check(workdir, bot):
    """With the FX graph cache as the program has it (on), the capture's graph comes from the cache
    the check's run filled, and torch's level-4 check catches the same wrong graph it passes when it
    compiles it afresh (above): one capture pass, at level 4, and the same verified repro."""
    out = workdir / "level4-cached"
    proc = bot("run", "--command", f"{sys.executable} {PROGRAM}", "--out", out, "--issues-dir", workdir / "issues4c",
               "--no-bisect", "--reruns", "0")
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    cap = f["repro"]["capture"]
    assert (f["class"], cap["repro_level"], f["repro"]["status"]) == ("accuracy", 4, "minimized"), cap
    assert _steps(proc.stderr) == BEFORE + PASS, proc.stderr[-3000:]
    assert f["repro"]["verification"]["failed_same_way"] == 3
    ops = {n["op"] for n in f["repro"]["graph"]}
    assert "aten.index_put.default" in ops and "aten.expand.default" in ops, ops


@pytest.mark.slow
def test_a_program_judged_by_its_exit_status_alone_gets_its_wrong_result_minified(workdir, bot):
    out = workdir / "exit"
    proc = bot("run", "--command", f"{sys.executable} {PROGRAM} --quiet", "--out", out, "--issues-dir",
               workdir / "issues-exit", "--no-bisect")
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    assert f["check"]["classified_by"] == "exit status"
    assert f["class"] == "accuracy", f["repro"]["reason"]   # learned from the graph
    assert "judged by minify-bot's predicate" in f["repro"]["capture"]["note"]   # the issue says how
    assert f["repro"]["status"] == "minimized" and f["repro"]["verification"]["failed_same_way"] == 3


LAUNCHER_TAIL = """
mod = Repro()
if __name__ == '__main__':
    from torch._dynamo.repro.after_aot import run_repro
    with torch.no_grad():
        run_repro(mod, load_args, accuracy='accuracy', command='run', save_dir='/abs/dir', tracing_mode='real')
"""


def test_a_repro_carries_the_settings_the_failure_needs_and_how_it_is_judged():
    torch_lines = "\n".join(f"torch._inductor.config.k{i} = {i}" for i in range(700))
    src = ("import torch\nimport torch._dynamo.config\nimport torch._inductor.config\nimport torch._functorch.config\n"
           "import torch.fx.experimental._config\n" + torch_lines + "\n"
           'if "__compile_source__" in globals():\n    import linecache\n'
           "    linecache.cache[0] = (\n        1,\n    )\n"
           "class Repro(torch.nn.Module):\n    pass\n" + LAUNCHER_TAIL)
    judge = [ConfigSetting("dynamo.repro_tolerance", 0.0001), ConfigSetting("dynamo.repro_ignore_non_fp", True)]
    out = clean_source(src, [ConfigEntry("inductor.k7", value=7)], standalone=False, name="repro.py", judge=judge)
    assert CONFIG_LINE.findall(out) == ["_inductor", "_dynamo", "_dynamo"]
    assert "torch._inductor.config.k7 = 7" in out and "k8 = 8" not in out
    assert "repro_tolerance = 0.0001" in out and "__compile_source__" not in out
    # no settings needed: none written; the judge still is
    out = clean_source(src, [], standalone=False, name="repro.py", judge=judge)
    assert CONFIG_LINE.findall(out) == ["_dynamo", "_dynamo"]
    # the file's own settings kept (the last fallback): the judge comes after them, so it holds
    out = clean_source(src, None, standalone=False, name="repro.py", judge=judge)
    assert out.index("k699 = 699") < out.index("repro_tolerance = 0.0001")


ABORT = Path(__file__).parent / "data" / "genuine" / "index_abort.py"


@pytest.mark.slow
def test_a_crash_on_inputs_eager_rejects_is_minified_to_the_op_that_aborts(workdir, bot):
    """Eager raises IndexError on the program's invalid id; the compiled graph aborts the process
    (SIGABRT). The captured graph cannot even be traced on its real inputs: it is traced on fake
    tensors, each query judges the abort against eager's own error, and the repro (traced the
    same way) aborts in fresh processes."""
    out = workdir / "abort"
    proc = bot("run", "--command", f"{sys.executable} {ABORT}", "--out", out, "--issues-dir", workdir / "issues-abort",
               "--no-bisect")
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    assert f["class"] == "runtime_error" and f["check"]["error"]["type"] == "UncaughtCppException"
    assert f["repro"]["status"] == "minimized", f["repro"]["reason"]
    assert f["culprit"]["ops"] == ["aten.index.Tensor"] and f["culprit"]["method"] == "compiled-alone"
    v = f["repro"]["verification"]
    assert v["failed_same_way"] == 3 and v["random_inputs_reproduce"] is False   # the invalid id is in inputs/
    assert "tracing_mode='fake'" in (Path(f["_dir"]) / "repro.py").read_text()


@pytest.mark.slow
def test_a_program_whose_own_code_fails_after_compiling_is_not_blamed_on_the_compiler(workdir, bot):
    """The check's rerun captured every graph (level 3), so minify tries them before any localize
    run; none fails on its own, and only then are the stages rerun: the program fails without the
    compiler, and no repro or culprit is claimed."""
    prog = workdir / "own_error.py"
    prog.write_text("import torch\nm = torch.nn.Linear(4, 4)\ntorch.compile(m)(torch.randn(2, 4))\n"
                    "raise RuntimeError(\"the benchmark's own bookkeeping failed\")\n")
    out = workdir / "own"
    proc = bot("run", "--command", f"{sys.executable} {prog}", "--out", out, "--no-report")
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    assert f["stage"] == "eager" and f["repro"]["status"] == "none" and f["culprit"] is None
    assert "fails without the compiler" in f["repro"]["reason"]


@pytest.mark.slow
def test_a_failure_before_inductor_is_captured_after_dynamo_and_minified_forward_and_backward(workdir, bot):
    """pytorch/pytorch#197622 (benchmarks/genuine/thumbnailer_aa_dynamic.py): a training program whose
    compile fails in AOTAutograd (the backward of antialiased bicubic interpolate under dynamic
    shapes). torch's repro-after-AOT wraps inductor only, so the program's dynamo graph is captured
    with its real inputs and minified with the first failing backend, forward and backward
    together; the record says training (the program ran a backward), the stage and the capture."""
    program = Path(__file__).resolve().parent.parent / "benchmarks" / "genuine" / "thumbnailer_aa_dynamic.py"
    out = workdir / "aot-stage"
    proc = bot("run", "--command", f"{sys.executable} {program}", "--name", "thumbnailer", "--out", out,
               "--issues-dir", workdir / "issues-aot", "--verify-runs", "2")
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    assert (f["class"], f["stage"], f["check"]["mode"]) == ("compile_error", "aot_eager", "training")
    cap = f["repro"]["capture"]
    assert cap["repro_after"] == "dynamo" and "forward and backward" in cap["note"], cap
    assert f["repro"]["status"] == "minimized", f["repro"]["reason"]
    assert f["repro"]["verification"]["failed_same_way"] == 2
    assert f["repro"]["nodes_after"] <= 4 and "interpolate" in json.dumps(f["repro"]["graph"])
    repro = (Path(f["_dir"]) / "repro.py").read_text()
    assert "requires_grad=True" in repro and "backend='aot_eager'" in repro   # the backward runs in the repro
    body = next((workdir / "issues-aot").glob("1.md")).read_text()
    title = body.split("\n", 1)[0]
    assert "aot_eager" in title and "interpolate" in title and "inference" not in body
    assert "captured after dynamo" in body
    # the plain repro runs the training step too, and so does the short one, which is inlined: a
    # paste of it fails alone
    plain = f["repro"]["plain"]
    assert plain["failed_same_way"] == 2 and plain["inputs_inline"], plain
    # random inputs fail the same way: its 24 KB input is made from a seed, not carried as base64
    assert plain["inputs_random"] and f["repro"]["verification"]["random_inputs_reproduce"], plain
    assert plain["short_failed_same_way"] == plain["short_runs"] > 0, plain
    assert "Save as `repro_short.py`" in body
    m = re.search(r"### Minimized repro\n.*?^(`{3,})python\n(.*?)\n\1$", body, re.S | re.M)
    assert m and "torch.autograd.grad" in m.group(2) and "backend='aot_eager'" in m.group(2), body[:3000]
    assert "torch.randn(2, 3, 32, 32).requires_grad_()" in m.group(2) and "base64" not in m.group(2), m.group(2)
    assert len(m.group(2).splitlines()) <= 30, m.group(2)
    paste = workdir / "paste-aot"
    paste.mkdir()
    (paste / "repro_short.py").write_text(m.group(2) + "\n")
    run = subprocess.run([sys.executable, "repro_short.py"], cwd=paste, capture_output=True, text=True, timeout=600,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert run.returncode == 1 and "isIntList" in run.stderr, (run.stdout + run.stderr)[-3000:]


@pytest.mark.slow
def test_a_built_models_bug_made_before_the_aot_capture_is_captured_after_dynamo_and_verified(workdir, bot):
    """A model of a YAML model file (built in-process, not a program) whose bug inductor makes in a
    joint-graph rewrite (tests/data/genuine/uint8_log_softmax.py: the fuzzer found it): every graph
    captured after AOT already holds the rewrite and passes alone, forward and backward alike (each
    kept, not only the last torch wrote). The after-dynamo pass a program gets now runs for a built
    model too: the dynamo graph, judged as a training step, fails alone and minifies to the division
    and the log_softmax."""
    import shutil

    d = workdir / "built_after_dynamo"
    d.mkdir()
    shutil.copy(PROGRAM.parent / "uint8_log_softmax.py", d / "uint8_log_softmax.py")
    (d / "models.yaml").write_text("scaled_counts: uint8_log_softmax:scaled_counts\n")
    out = d / "out"
    proc = bot("run", "--suite", "yaml", "--model-file", d / "models.yaml", "--mode", "training", "--out", out,
               "--issues-dir", d / "issues", "--no-bisect", cwd=d)
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    assert f["repro"]["status"] == "minimized", f["repro"]["reason"]
    cap = f["repro"]["capture"]
    assert cap["repro_after"] == "dynamo" and "after-AOT capture first" in cap["note"], cap
    # both graphs torch dumped at level 3 were tried after AOT (its own launcher keeps only the last)
    assert "launcher_001.py" in proc.stderr and "launcher_002.py" in proc.stderr, proc.stderr[-3000:]
    assert _steps(proc.stderr) == BEFORE + PASS + PASS + ["localize_again", "capture_after_dynamo"] + PASS
    assert {n["op"] for n in f["repro"]["graph"]} == {"div", "log_softmax"}
    assert f["repro"]["verification"]["failed_same_way"] == 3
    assert "log_softmax" in (d / "issues" / "1.md").read_text()


@pytest.mark.slow
def test_a_training_failure_torchs_run_repro_misses_is_verified_by_the_plain_repro(workdir, bot):
    """pytorch/pytorch#197089 (benchmarks/genuine/star_catalog_std.py): compiled float32 ``std``
    accumulates in float32 and overflows on 1e30-scale columns; no graph captured after AOT fails
    alone, the dynamo graph does, judged by a training step. torch's launcher-format repro passes
    it (``run_repro`` could not make its fp64 reference); the plain repro, which judges as the
    check did, fails the same way, so it is the verified repro the issue inlines and says so."""
    program = Path(__file__).resolve().parent.parent / "benchmarks" / "genuine" / "star_catalog_std.py"
    out = workdir / "std-overflow"
    proc = bot("run", "--command", f"{sys.executable} {program}", "--name", "star_catalog", "--out", out,
               "--issues-dir", workdir / "issues-std", "--verify-runs", "2", "--no-trace")
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    assert (f["class"], f["check"]["mode"]) == ("accuracy", "training"), f["check"]
    assert f["repro"]["capture"]["repro_after"] == "dynamo"
    # after the after-AOT passes, the after-dynamo capture is one more pass through the same steps
    steps = _steps(proc.stderr)
    assert steps[:4] == BEFORE and steps[-8:] == ["localize_again", "capture_after_dynamo", *PASS], steps
    assert steps.count("capture_after_dynamo") == 1 and steps.count("capture") >= 2, steps
    ver, plain = f["repro"]["verification"], f["repro"]["plain"]
    assert f["repro"]["status"] == "minimized", f["repro"]["reason"]
    assert plain["failed_same_way"] == 2 and ver["failed_same_way"] == 2, (ver, plain)
    assert ver.get("launcher_failed_same_way") == 0, ver
    assert "std" in json.dumps(f["repro"]["graph"])
    body = next((workdir / "issues-std").glob("1.md")).read_text()
    title = body.split("\n", 1)[0]
    assert "std" in title and "(float32, cpu)" in title, title
    # the issue shows the short repro (a training step as a person writes it), verified like the plain
    # one; the plain repro's runs are the verification, and the issue says torch's judge misses it
    assert plain["short_failed_same_way"] == plain["short_runs"] > 0, plain
    assert "Save as `repro_short.py`" in body and "its judge misses this failure" in body
    block = re.search(r"### Minimized repro\n.*?^(`{3,})python\n(.*?)\n\1$", body, re.S | re.M).group(2)
    assert "torch.autograd.grad" in block and len(block.splitlines()) <= 30, block


@pytest.mark.slow
def test_a_compile_error_of_two_fused_reductions_stays_within_the_query_bound(workdir, bot):
    """pytorch/pytorch#194706 (benchmarks/genuine/anomaly_scorer_bf16.py): two bf16 sums of one
    tensor share an accumulator that the C++ codegen declares twice. No node fails alone and the
    second sum's own output does not show it (the first sum does not feed it), so the prefix is
    cut from the front: 146 nodes to the two sums within 2*ceil(log2 N) + 2*final + 4 queries."""
    import math

    program = Path(__file__).resolve().parent.parent / "benchmarks" / "genuine" / "anomaly_scorer_bf16.py"
    out = workdir / "bf16-acc"
    proc = bot("run", "--command", f"{sys.executable} {program}", "--name", "anomaly", "--out", out,
               "--issues-dir", workdir / "issues-bf16", "--verify-runs", "1", "--no-trace", "--no-bisect")
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    rep = f["repro"]
    assert (f["class"], f["check"]["dtype"]) == ("compile_error", "bfloat16")
    assert rep["status"] == "minimized" and rep["verification"]["failed_same_way"] == 1, rep.get("reason")
    n, final = rep["nodes_before"], rep["nodes_after"]
    # 146 nodes captured after AOT; where that capture compiles no failing graph (it depends on the
    # CPU's vector ISA) the graph captured after dynamo, 60 nodes: the bound holds for either
    assert n >= 50 and final <= 6, (n, final)
    assert rep["queries"] <= query_bound(n, final), (rep["queries"], n, final)
    assert math.ceil(math.log2(n)) * 2 + 2 * final + 4 == query_bound(n, final)
    sums = [g["op"] for g in rep["graph"] if g["op"] in ("aten.sum.dim_IntList", "sum")]   # after AOT / dynamo
    assert len(sums) == 2, rep["graph"]
    title = next((workdir / "issues-bf16").glob("1.md")).read_text().split("\n", 1)[0]
    assert f"compile error in {sums[0]} (bfloat16, cpu)" in title, title


@pytest.mark.slow
def test_a_failure_that_shows_in_integers_ends_on_the_integer_op_alone(workdir, bot):
    """pytorch/pytorch#191499 (benchmarks/genuine/uint8_image_stretch.py): a uint8 ``amin`` of 32 positive
    values compiles to 0; the program compares float logits. The search compares integers computed from
    integers exactly once the first diverging value is one, so it ends on ``amin`` alone (not on the float
    conversion after it), and the repro's judge compares integer outputs too."""
    program = Path(__file__).resolve().parent.parent / "benchmarks" / "genuine" / "uint8_image_stretch.py"
    out = workdir / "uint8-amin"
    proc = bot("run", "--command", f"{sys.executable} {program}", "--name", "stretch", "--out", out,
               "--issues-dir", workdir / "issues-amin", "--verify-runs", "1", "--no-trace", "--no-bisect")
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    rep = f["repro"]
    assert rep["status"] == "minimized" and rep["verification"]["failed_same_way"] == 1, rep.get("reason")
    assert [g["op"] for g in rep["graph"]] == ["aten.amin.default"], rep["graph"]
    assert f["culprit"]["ops"] == ["aten.amin.default"] and f["culprit"]["method"] == "compiled-alone"
    assert "repro_ignore_non_fp = False" in (Path(f["_dir"]) / "repro.py").read_text()
    title = next((workdir / "issues-amin").glob("1.md")).read_text().split("\n", 1)[0]
    assert "accuracy failure in aten.amin.default" in title, title


@pytest.mark.slow
def test_a_culprit_that_reads_no_input_of_a_dynamic_capture_is_reduced_static_and_verified(workdir, bot):
    """pytorch/pytorch#175966 (benchmarks/genuine/timeseries_dynamic.py): ``torch.arange(L, dtype=int64) *
    1_000_000_000`` wraps in 32 bits; the program compiles with ``dynamic=True``. Static first: the graph
    with its sizes set to the captured values fails too, so the repro is static, and its culprit (the
    ``iota`` and the ``mul``) reads no input: torch's writer leaves ``load_args`` without a body, which the
    bot completes, so the repro is Python and verifies (it was an internal error)."""
    import ast
    import math

    program = Path(__file__).resolve().parent.parent / "benchmarks" / "genuine" / "timeseries_dynamic.py"
    out = workdir / "no-input"
    proc = bot("run", "--command", f"{sys.executable} {program}", "--name", "timeseries", "--out", out,
               "--issues-dir", workdir / "issues-no-input", "--verify-runs", "1", "--no-trace", "--no-bisect")
    assert proc.returncode == 1, proc.stderr[-3000:]
    f = _failure(out)
    rep = f["repro"]
    assert rep["status"] == "minimized" and rep["verification"]["failed_same_way"] == 1, rep.get("reason")
    assert sorted(g["op"] for g in rep["graph"]) == ["aten.mul.Tensor", "prims.iota.default"], rep["graph"]
    assert rep["capture"]["dynamic"] is False and "captured with dynamic shapes" in rep["capture"]["note"]
    n, final = rep["nodes_before"], rep["nodes_after"]
    assert rep["queries"] <= query_bound(n, final), (rep["queries"], n, final)
    assert math.ceil(math.log2(n)) * 2 + 2 * final + 4 == query_bound(n, final)
    src = (Path(f["_dir"]) / "repro.py").read_text()
    ast.parse(src)
    assert "reader.symint(" not in src and "pass  # the graph reads no input" in src
