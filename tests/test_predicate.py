"""bot/minify/worker/predicate.py: how a candidate graph is loaded, compiled and judged ("fails the same
way"). The fast tests compile nothing: the judge a repro carries, the config a query runs with, a
query past the budget, and the errors for files that are not launchers. The slow tests judge real
graphs with inductor's C++ backend under its injected bugs (relu accuracy / runtime_error /
compile_error), in this process and in forked children: the failing graph fails the pinned way and
nothing else does, the sanity step learns what the check could not tell, a query past its time
limit is killed, and a graph that fails only on its real inputs is told apart."""

from __future__ import annotations

import json
import time

import pytest
import torch
import torch._inductor.config as inductor_config
from torch.fx.experimental.proxy_tensor import make_fx

from bot.errors import UsageError
from bot.minify.records import Judge, MinifyJob, Query, parse_event
from bot.minify.worker import predicate as P
from bot.records import CheckError, ConfigSetting
from bot.signature import Signature
from bot.torch_adapter import repro as R
from tests import test_reduce

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
launcher = test_reduce.launcher   # the shared fixture: mm -> relu -> add under the relu bug, its inputs saved beside it


def _job(tmp_path, failure_class: str = "accuracy", **kw) -> MinifyJob:
    return MinifyJob(**{"repro": str(tmp_path / "launcher.py"), "workdir": str(tmp_path),
                        "failure_class": failure_class, "budget": 300.0, **kw})


def _bug(kind: str | None):
    """inductor's injected C++ relu bug (None: no bug)."""
    return inductor_config.patch({"cpp.inject_relu_bug_TESTING_ONLY": kind})


def _queries(out: str) -> list[Query]:
    """The ``@@`` query events a predicate wrote to stdout."""
    events = [parse_event(json.loads(line[3:])) for line in out.splitlines() if line.startswith("@@ ")]
    return [e for e in events if isinstance(e, Query)]


# ---------------------------------------------------------------------------- fast: nothing compiled


@pytest.mark.parametrize("failure_class,strict,mode", [("accuracy", False, "accuracy"),
                                                        ("accuracy", True, "strict_accuracy"),
                                                        ("runtime_error", True, ""), ("compile_error", False, "")])
def test_the_repro_is_written_with_an_accuracy_check_only_for_accuracy_failures(tmp_path, failure_class, strict,
                                                                                  mode):
    assert P.acc_mode(_job(tmp_path, failure_class, strict_accuracy=strict)) == mode


def test_the_judge_carries_the_checks_tolerance_and_integer_comparison_into_the_repros_config(tmp_path):
    assert P.judge_of(_job(tmp_path, "runtime_error", tolerance=0.5)) == Judge("runtime_error")
    assert P.judge_of(_job(tmp_path, tolerance=0.02)) == Judge("accuracy", 0.02, False, [
        ConfigSetting("dynamo.repro_tolerance", 0.02), ConfigSetting("dynamo.repro_ignore_non_fp", True)])
    for compared in (_job(tmp_path, strict_accuracy=True), _job(tmp_path, compare_non_fp=True)):
        judge = P.judge_of(compared)
        assert judge.compare_non_fp is True
        assert ConfigSetting("dynamo.repro_ignore_non_fp", False) in judge.config


def test_a_config_subset_runs_with_every_other_key_of_the_diff_at_its_default_and_is_undone_after():
    threads = "inductor.compile_threads"
    keys = {RELU: "accuracy", threads: 1}
    seen = lambda: (inductor_config.cpp.inject_relu_bug_TESTING_ONLY, inductor_config.compile_threads)  # noqa: E731
    with inductor_config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "runtime_error", "compile_threads": 3}):
        assert P.with_config(keys, {RELU: "accuracy"}, seen) == ("accuracy", R.config_default(threads))
        assert P.with_config(keys, {threads: 1}, seen) == (None, 1)
        with pytest.raises(ZeroDivisionError):
            P.with_config(keys, {RELU: "compile_error"}, lambda: 1 / 0)
        assert seen() == ("runtime_error", 3)


@pytest.mark.parametrize("text,message", [
    (None, "cannot read repro file"),
    ("class Repro(torch.nn.Module:\n", "is not valid Python (line 1): corrupt or truncated repro file"),
    ("import torch\nprint('a script')\n", "is not a torch repro/minifier launcher"),
])
def test_a_file_that_is_not_a_launcher_is_refused_with_what_is_wrong_with_it(tmp_path, text, message):
    path = tmp_path / "launcher.py"
    if text is not None:
        path.write_text(text)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        P.load_graph(str(path))


def test_a_launcher_loads_as_its_graph_with_the_real_inputs_saved_beside_it(launcher):
    rf, gm, args = P.load_graph(str(launcher))
    assert (rf.kind, rf.accuracy, rf.config[RELU]) == ("aot", "accuracy", "accuracy")
    assert len(gm.graph.nodes) == 6 and [tuple(a.shape) for a in args] == [(8, 16), (16, 16)]
    _, _, again = P.load_graph(str(launcher))
    assert all(torch.equal(a, b) for a, b in zip(args, again))   # the saved inputs, not random ones


def test_a_query_after_the_deadline_stops_the_minimization_before_compiling(tmp_path, launcher, capsys):
    _, gm, args = P.load_graph(str(launcher))
    for evaluator in (P.Evaluator, P.IsolatedEvaluator):
        ev = evaluator(_job(tmp_path, deadline=time.time() - 1), "aot", None)
        with pytest.raises(P.BudgetExceeded):
            ev(gm, args)
        assert ev.queries == 0
    assert _queries(capsys.readouterr().out) == []


def test_random_inputs_are_undecided_when_the_final_repro_cannot_be_read(tmp_path, launcher, capsys):
    _, gm, _ = P.load_graph(str(launcher))
    (tmp_path / "repro.py").write_text("not a repro\n")
    assert P.random_inputs_reproduce(_job(tmp_path), "aot", Signature("accuracy"), gm, str(tmp_path / "repro.py"),
                                     False) is None
    assert "random-input check failed: UsageError:" in capsys.readouterr().out


# ---------------------------------------------------------------------------- slow: real compiles


@pytest.mark.slow
def test_the_failing_graph_fails_the_pinned_way_and_the_same_graph_without_the_bug_does_not(
        tmp_path, launcher, capsys):
    _, gm, args = P.load_graph(str(launcher))
    with _bug("accuracy"):
        pinned = P.Evaluator(_job(tmp_path), "aot", None).observe(gm, args)
        assert pinned == Signature("accuracy")
        ev = P.Evaluator(_job(tmp_path), "aot", pinned)
        assert ev(gm, args) is True
    with _bug(None):
        assert ev(gm, args) is False
    assert [(q.n, q.nodes, q.fails, q.isolated) for q in _queries(capsys.readouterr().out)] == [
        (1, 6, True, False), (2, 6, False, False)]


@pytest.mark.slow
def test_a_graph_that_fails_another_way_is_not_the_pinned_failure(tmp_path, launcher):
    _, gm, args = P.load_graph(str(launcher))
    with _bug("runtime_error"):
        pinned = P.Evaluator(_job(tmp_path, "runtime_error"), "aot", None).observe(gm, args)
        assert (pinned.failure_class, pinned.exc_type) == ("runtime_error", "RuntimeError")
        # an accuracy failure never drifts into an error: the erroring candidate is not a wrong result
        assert P.Evaluator(_job(tmp_path), "aot", None).observe(gm, args) is None
    with _bug("compile_error"):
        ev = P.Evaluator(_job(tmp_path, "runtime_error"), "aot", pinned)
        assert ev.observe(gm, args).failure_class == "compile_error"
        assert ev(gm, args) is False


@pytest.mark.slow
def test_sanity_learns_that_a_graph_judged_by_exit_status_computes_a_wrong_result(tmp_path, launcher):
    _, gm, args = P.load_graph(str(launcher))
    job = _job(tmp_path, "runtime_error", class_uncertain=True)   # a program that only exited non-zero
    with _bug("accuracy"):
        assert P.sanity(job, "aot", gm, args, False) == (Signature("accuracy"), "")
    assert job.failure_class == "accuracy" and P.judge_of(job).failure_class == "accuracy"


@pytest.mark.slow
def test_sanity_compares_integer_outputs_when_the_floating_point_ones_agree(tmp_path):
    x = torch.randint(-5, 5, (8, 16))
    gm = make_fx(lambda x: (x * 2.0, torch.relu(x)))(x)   # the relu bug is in the integer output only
    job = _job(tmp_path)
    with _bug("accuracy"):
        assert P.sanity(job, "aot", gm, [x], False) == (Signature("accuracy"), "")
    assert job.compare_non_fp is True and P.judge_of(job).compare_non_fp is True


@pytest.mark.slow
def test_sanity_refuses_a_graph_that_fails_differently_from_the_check(tmp_path, launcher):
    _, gm, args = P.load_graph(str(launcher))
    job = _job(tmp_path, "compile_error", original_error=CheckError(
        type="CppCompileError", message="C++ compile error\n error: 'compile' was not declared in this scope"))
    with _bug("runtime_error"):
        sig, why = P.sanity(job, "aot", gm, args, False)
    assert sig is None
    assert why.startswith("the captured graph fails differently (runtime_error RuntimeError") and \
        why.endswith("than the check (compile_error CppCompileError: error: 'compile' was not declared in this scope)")


@pytest.mark.slow
def test_an_isolated_query_fails_in_its_own_process_and_runs_with_only_the_config_subset_asked(
        tmp_path, launcher, capsys):
    _, gm, args = P.load_graph(str(launcher))
    with _bug("runtime_error"):
        pinned = P.Evaluator(_job(tmp_path, "runtime_error"), "aot", None).observe(gm, args)
        ev = P.IsolatedEvaluator(_job(tmp_path, "runtime_error"), "aot", pinned)
        assert ev(gm, args) is True
        # what the config step asks: the injected setting left out of the subset, the graph passes
        assert ev.observe(gm, args, config=({RELU: "runtime_error"}, {})) is None
        assert pinned.matches(ev.observe(gm, args, config=({RELU: "runtime_error"}, {RELU: "runtime_error"})))
    assert [(q.fails, q.isolated) for q in _queries(capsys.readouterr().out)] == [(True, True)]
    assert (tmp_path / "isolate" / "query.log").is_file()


@pytest.mark.slow
def test_a_forked_query_past_its_time_limit_is_killed_and_does_not_count_as_failing(tmp_path, capsys):
    x = torch.randn(1024, 1024)

    def slow(x):
        for _ in range(40):
            x = torch.tanh(x @ x)
        return (x,)

    gm = make_fx(slow, tracing_mode="fake")(x)
    t = time.monotonic()
    assert P.observe_forked(_job(tmp_path), "aot", gm, [x], 1.0, str(tmp_path)) is None
    assert time.monotonic() - t < 15
    assert "query: killed at its 1 s limit" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:could not load .*, generating random data instead:UserWarning")
def test_a_graph_that_fails_only_on_its_real_inputs_is_told_apart_from_one_random_inputs_reproduce(
        tmp_path, launcher):
    x = torch.randn(4, 8) + 10    # every value above 5: the relu (and its bug) is what the graph returns
    gm = make_fx(lambda x: (torch.where(x > 5, torch.relu(x), x),))(x)
    final = tmp_path / "repro.py"
    with _bug("accuracy"):
        final.write_text(R.repro_source(gm, [x], kind="aot", accuracy="accuracy", save_dir=str(tmp_path / "inputs")))
        pinned = P.Evaluator(_job(tmp_path), "aot", None).observe(gm, [x])
        assert pinned == Signature("accuracy")
        # random inputs (randn) are almost never above 5: the graph returns x, and nothing fails
        assert P.random_inputs_reproduce(_job(tmp_path), "aot", pinned, gm, str(final), False) is False
        _, mm_relu, _ = P.load_graph(str(launcher))
        assert P.random_inputs_reproduce(_job(tmp_path), "aot", pinned, mm_relu, str(launcher), False) is True


def test_an_inductor_compile_error_raised_at_the_first_call_is_a_compile_error():
    """torch.compile compiles at the first call: a C++ compile error inductor raises there (not
    wrapped in BackendCompilerFailed) is a compile error, as the check classes it; an error of
    the compiled code is not."""
    from torch._inductor.exc import CppCompileError

    from bot.minify.worker.predicate import _phase

    try:
        try:
            raise CppCompileError(["g++"], "error: conflicting declaration 'auto at_BFloat16_tmp_acc0_vec'")
        except CppCompileError as inner:
            raise RuntimeError("compiled call failed") from inner
    except RuntimeError as exc:
        wrapped = exc
    assert _phase("runtime_error", wrapped) == "compile_error"
    assert _phase("runtime_error", IndexError("index 9 is out of bounds")) == "runtime_error"


# ---------------------------------------------------------------------------- device faults


class _IllegalAccess(RuntimeError):
    pass


def _faulting_backend(gm, example_inputs):
    """A compiler whose code faults the way a CUDA kernel that reads out of bounds does: the run
    raises, and the message says the device is gone."""
    def run(*args):
        raise _IllegalAccess("CUDA error: an illegal memory access was encountered\n"
                             "CUDA kernel errors might be asynchronously reported at some other API call")
    return run


class _ReluPlusOne(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1


def test_a_sticky_device_fault_is_told_from_other_errors():
    from bot.torch_adapter.runtime import poisons_process

    fault = RuntimeError("CUDA error: device-side assert triggered\nCompile with `TORCH_USE_CUDA_DSA`")
    assert poisons_process(fault)
    try:   # wrapped, as inductor and dynamo re-raise it
        try:
            raise fault
        except RuntimeError as inner:
            raise ValueError("while running the compiled graph") from inner
    except ValueError as outer:
        assert poisons_process(outer)
    for other in (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                  RuntimeError("index 7 is out of bounds for dimension 0 with size 4"),
                  IndexError("an illegal memory access was encountered")):   # no device error
        assert not poisons_process(other)


def _out_of_bounds_backend(gm, example_inputs):
    """A compiler whose code indexes out of bounds at run time (a runtime error, raised in C++)."""
    def run(*args):
        return torch.ones(3)[torch.tensor([7])]
    return run


def test_a_dynamo_level_graph_that_raises_at_run_time_is_judged_by_its_own_error(tmp_path):
    """The error the compiled code raised, not what dynamo said while unwinding: compiling the
    graph module itself under fullgraph turned every run-time error into "Unsupported: Attempt to
    trace generator" (a compile error), so a dynamo-level runtime error never reproduced."""
    gm = torch.fx.symbolic_trace(_ReluPlusOne())
    ev = P.Evaluator(_job(tmp_path, "runtime_error"), "dynamo", None)
    ev.backend = _out_of_bounds_backend
    sig = ev.observe(gm, [torch.randn(4, 4)])
    assert (sig.failure_class, sig.exc_type) == ("runtime_error", "IndexError"), sig


@pytest.mark.slow
def test_a_device_fault_ends_the_in_process_worker_with_what_it_saw(tmp_path):
    """The in-process evaluator raises ProcessPoisoned carrying the failure it observed (the worker
    pins it, then leaves so the rest runs in fresh processes); an isolated one, whose process
    answers one query, just answers."""
    gm = torch.fx.symbolic_trace(_ReluPlusOne())
    args = [torch.randn(4, 4)]
    ev = P.Evaluator(_job(tmp_path, "runtime_error"), "backend", None)   # the graph handed to the compiler
    ev.backend = _faulting_backend
    with pytest.raises(P.ProcessPoisoned) as raised:
        ev.observe(gm, args)
    sig = raised.value.signature
    assert (sig.failure_class, sig.exc_type) == ("runtime_error", "_IllegalAccess")
    assert "illegal memory access" in str(raised.value)
    isolated = P.Evaluator(_job(tmp_path, "runtime_error", isolate=True), "backend", None)
    isolated.backend = _faulting_backend
    assert isolated.observe(gm, args) == sig and isolated.poisoned


@pytest.mark.slow
def test_a_query_in_a_fresh_interpreter_judges_the_candidate_as_a_fork_would(tmp_path, launcher):
    """What an isolated worker whose graph is on the GPU does instead of forking: the candidate
    written beside its job and judged by `python -m bot.minify.worker query`."""
    _, gm, args = P.load_graph(str(launcher))
    job = _job(tmp_path, isolate=True)
    with _bug("accuracy"):
        res = P._observe_exec(job, "aot", gm, args, 300.0, str(tmp_path / "q1"), None)
        assert res.returncode == 0, res.output[-3000:]
        assert P._judged(job, res, 300.0) == (Signature("accuracy"), False)
        # the config step's question: without the injected setting the candidate passes
        res = P._observe_exec(job, "aot", gm, args, 300.0, str(tmp_path / "q2"), ({RELU: "accuracy"}, {}))
        assert P._judged(job, res, 300.0) == (None, False), res.output[-3000:]
    assert "aten.relu" in (tmp_path / "q1" / "candidate.py").read_text()


def test_compile_options_torch_refuses_or_that_only_debug_are_dropped_from_the_job():
    """The program's torch.compile options are set in the worker over the captured file's config;
    a key this torch lacks, a value of the wrong type, and debug or cache settings are not set, and
    leave the job (so no config diff or repro line names them)."""
    import torch._inductor.config as ic

    from bot.minify.records import MinifyJob
    from bot.minify.worker.predicate import apply_compile_options
    from bot.torch_adapter import repro as R

    job = MinifyJob(repro="r.py", workdir=".", failure_class="accuracy", budget=1.0, compile_options={
        "inductor.epilogue_fusion": False, "inductor.no_such_setting": 1, "inductor.max_autotune": "often",
        "inductor.fx_graph_cache": True, "inductor.trace.enabled": True})
    with R.config_snapshot():
        refused = apply_compile_options(job)
        assert ic.epilogue_fusion is False and ic.trace.enabled is False
    assert sorted(refused) == ["inductor.fx_graph_cache", "inductor.max_autotune", "inductor.no_such_setting",
                               "inductor.trace.enabled"]
    assert job.compile_options == {"inductor.epilogue_fusion": False}


def _dynamo_graph_of_a_training_step():
    """The dynamo-level graph of a Conv + BatchNorm model in training, as the after-dynamo capture
    holds it: parameters and BatchNorm's running statistics are inputs, as the program had them."""
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    seen = {}

    def capture(gm, example_inputs):
        seen["gm"], seen["args"] = gm, list(example_inputs)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=capture)(torch.randn(2, 3, 8, 8))
    return seen["gm"], seen["args"]


def test_a_training_graph_differentiates_what_required_grad_in_the_program_never_its_buffers():
    import torch

    from bot.minify.worker.predicate import Evaluator, differentiable
    from bot.torch_adapter.minifier import grad_mask, train_step

    gm, args = _dynamo_graph_of_a_training_step()
    mask = grad_mask(gm, args)
    floats = [isinstance(a, torch.Tensor) and a.is_floating_point() for a in args]
    assert sum(mask) == 4 and sum(floats) == 7   # conv and bn weight and bias; not the input, mean, var
    with pytest.raises(RuntimeError, match="not differentiable"):   # every float input: eager refuses
        train_step(lambda xs: gm(*xs), args)
    outs = train_step(lambda xs: gm(*xs), args, mask)
    assert len(outs) == 1 + 4
    job = MinifyJob(repro="repro.py", workdir=".", failure_class="accuracy", budget=600.0, training=True)
    loaded = differentiable(job, "dynamo", gm, list(args))   # as the capture saved them, flags included
    assert [isinstance(a, torch.Tensor) and a.requires_grad for a in loaded] == mask
    ev = Evaluator(job, "dynamo", None)
    ev.compile = lambda g, a: (lambda xs: g(*xs))   # the eager step is the point: "compiled" as itself
    assert ev.observe(gm, args) is None and ev.eager_error is None
    # what the program held without grad is known by name: an activation cut out of the graph (an input
    # of a candidate the program never had) is differentiated, the buffer beside it is not
    frozen = job.frozen_inputs   # the data and BatchNorm's running statistics, by their names in the graph
    assert len(frozen) == 3 and sum("running_mean" in n or "running_var" in n for n in frozen) == 2, frozen
    cut = torch.fx.symbolic_trace(lambda act, running_mean: act * running_mean)
    assert grad_mask(cut, [torch.randn(3), torch.randn(3)], frozen={"running_mean"}) == [True, False]


def test_a_training_graph_whose_own_eager_step_raises_is_a_named_limitation_not_a_pass():
    import torch

    gm, args = _dynamo_graph_of_a_training_step()
    # a capture that marked the running statistics as requiring grad: eager's own step refuses them
    args = [a.detach().requires_grad_(True) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args]
    job = MinifyJob(repro="repro.py", workdir=".", failure_class="accuracy", budget=600.0, training=True)
    sig, why = P.sanity(job, "dynamo", gm, args, isolate=False)
    assert sig is None
    assert why.startswith("limitation: the captured graph's own eager training step raises (RuntimeError: ")
    assert "not differentiable" in why and "does not fail" not in why
