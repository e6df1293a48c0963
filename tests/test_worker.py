"""bot/minify/worker/main.py (the worker process), the parts a failure record shows that need no compile: which graph
AOTAutograd handed the compiler (from repros torch writes for real forward, backward and inference
graphs), the minimal config diff (delta debugging with a predicate that is a plain function of the
settings), and the culprit record (the ops and the bisector's answer, only for a finished
minimization)."""

from __future__ import annotations

import pytest

from bot.minify.worker import main as worker
from bot.minify.worker import problem as PR
from bot.records import Culprit, GraphBisect

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    """Repros torch writes for the graphs AOTAutograd hands a compiler: the forward and backward of
    a training step (aot_function with compilers that only record, nothing compiled), and an
    inference graph."""
    import torch
    from functorch.compile import aot_function, make_boxed_func
    from torch.fx.experimental.proxy_tensor import make_fx

    from bot.torch_adapter import repro as R

    got = {}

    def recording(name):
        def compiler(gm, args):
            got[name] = R.repro_source(gm, args, kind="aot", accuracy="accuracy", save_dir=None)
            return make_boxed_func(gm.forward)
        return compiler

    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
    step = aot_function(lambda x, w: torch.relu(x @ w).sum(), fw_compiler=recording("forward"),
                        bw_compiler=recording("backward"))
    step(x, w).backward()
    with torch.no_grad():
        gm = make_fx(lambda x, w: (torch.relu(x @ w),))(x.detach(), w.detach())
        got["inference"] = R.repro_source(gm, [x.detach(), w.detach()], kind="aot", accuracy="accuracy",
                                          save_dir=None)
    return got


@pytest.mark.parametrize("role", ["forward", "backward", "inference"])
def test_the_graph_role_is_read_from_the_captured_repros_forward_signature(sources, role):
    assert worker.graph_role(sources[role]) == role


def test_a_backward_graph_is_backward_though_it_reads_primals_too(sources):
    src = sources["backward"]
    assert "primals_" in src[src.index("def forward"):].splitlines()[0]
    assert worker.graph_role(src) == "backward"


def test_a_source_without_a_repro_class_reads_as_inference():
    assert worker.graph_role("def forward(self, primals_1):\n    pass\n") == "inference"


class Settings:
    """A predicate over config subsets: the graph fails exactly when every key of ``needed`` is set
    to its value. Records what it was asked."""

    def __init__(self, needed: dict):
        self.needed = needed
        self.asked: list[dict] = []

    def __call__(self, cfg: dict) -> bool:
        self.asked.append(dict(cfg))
        return all(cfg.get(k) == v for k, v in self.needed.items())


HARMLESS = {"inductor.compile_threads": 1, "inductor.comprehensive_padding": True, "dynamo.cache_size_limit": 16,
            "inductor.max_autotune": False, "functorch.donated_buffer": False}


def test_the_one_setting_the_failure_needs_is_found_among_harmless_ones():
    keys = {**HARMLESS, RELU: "accuracy"}
    fails = Settings({RELU: "accuracy"})
    assert worker.minimal_config(keys, fails) == [RELU]
    assert keys not in fails.asked[1:] and fails.asked[0] == {}   # the full diff is known to fail
    assert all(set(cfg) <= set(keys) and all(keys[k] == v for k, v in cfg.items()) for cfg in fails.asked)


def test_two_settings_needed_together_are_both_kept():
    keys = {**HARMLESS, RELU: "accuracy", "inductor.cpp.simdlen": 8}
    assert sorted(worker.minimal_config(keys, Settings({RELU: "accuracy", "inductor.cpp.simdlen": 8}))) == sorted(
        [RELU, "inductor.cpp.simdlen"])


def test_a_failure_that_needs_no_setting_has_an_empty_minimal_config_after_one_query():
    fails = Settings({})
    assert worker.minimal_config({**HARMLESS, RELU: "accuracy"}, fails) == []
    assert fails.asked == [{}]


def test_one_setting_is_decided_by_one_query_without_it():
    fails = Settings({RELU: "accuracy"})
    assert worker.minimal_config({RELU: "accuracy"}, fails) == [RELU]
    assert fails.asked == [{}]


def test_the_culprit_record_sorts_the_ops_and_words_the_bisectors_answer():
    found = PR.Culprit(["aten.relu.default", "aten.add.Tensor"], "graph", "relu")
    bisect = GraphBisect(backend="inductor", subsystem="lowerings", bisect_number=3, detail="lowering relu")
    assert worker.culprit_record(None, found, bisect, "minimized") == Culprit(
        ["aten.add.Tensor", "aten.relu.default"], "lowerings: lowering relu", "graph")


def test_a_culprit_the_bisector_disagrees_with_is_kept_and_the_disagreement_logged(capsys):
    found = PR.Culprit(["aten.relu.default"], "compiled-alone")
    bisect = GraphBisect(backend="inductor", subsystem="lowerings", detail="log1p")
    assert worker.culprit_record(None, found, bisect, "minimized") == Culprit(["aten.relu.default"], "lowerings: log1p",
                                                                             "compiled-alone")
    assert "does not match the bisector's answer 'lowerings: log1p'" in capsys.readouterr().out


def test_without_a_bisect_answer_the_culprit_has_ops_only(capsys):
    found = PR.Culprit(["aten.relu.default"], "compiled-alone")
    assert worker.culprit_record(None, found, None, "minimized") == Culprit(["aten.relu.default"], None,
                                                                           "compiled-alone")
    incomplete = GraphBisect(subsystem="lowerings", detail="relu", incomplete=True)
    assert worker.culprit_record(None, found, incomplete, "minimized").bisect is None
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("status", ["partial", "not_reproduced"])
def test_an_unfinished_minimization_proves_no_culprit(status):
    found = PR.Culprit(["aten.relu.default"], "compiled-alone")
    assert worker.culprit_record(None, found, None, status) is None


def test_no_culprit_found_is_no_culprit_record():
    assert worker.culprit_record(None, None, {"subsystem": "lowerings", "detail": "relu"}, "minimized") is None


def test_an_unknown_worker_command_is_a_usage_error(capsys):
    assert worker.main(["shrink", "job.json"]) == 2
    assert "unknown worker command shrink" in capsys.readouterr().err
    assert worker.main([]) == 2


def fails_only_with_symbolic_sizes(gm, example_inputs):
    """A torch.compile backend that raises only for a graph dynamo traced with symbolic sizes: what a
    dynamic-shapes-only compiler bug looks like to the worker (torch 2.13's CPU backends have none
    that is injectable)."""
    import torch

    vals = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    if any(isinstance(v, torch.SymInt) or (isinstance(v, torch.Tensor) and any(
            not isinstance(s, int) for s in v.shape)) for v in vals):
        raise RuntimeError("only symbolic sizes fail here")
    return gm.forward


BACKEND = f"{__name__}:fails_only_with_symbolic_sizes"


def _dynamo_launcher(tmp_path, mark_dynamic: bool):
    import torch

    from bot.torch_adapter import repro as R

    seen = {}

    def capture(gm, example_inputs):
        seen["gm"], seen["args"] = gm, list(example_inputs)
        return gm.forward

    x = torch.randn(6, 4)
    if mark_dynamic:
        torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.reset()
    torch.compile(lambda x: (x * 2).sum(0), backend=capture)(x)
    path = tmp_path / "launcher.py"
    path.write_text(R.repro_source(seen["gm"], seen["args"], kind="dynamo", accuracy="",
                                   save_dir=str(tmp_path / "in"), backend=BACKEND))
    return path


@pytest.mark.parametrize("mark_dynamic", [True, False])
def test_a_dynamo_graph_captured_dynamic_is_judged_static_first_then_dynamic_as_captured(tmp_path, mark_dynamic,
                                                                                         monkeypatch):
    import json

    from bot.minify.records import MinifyJob
    from bot.records import CheckError

    path = _dynamo_launcher(tmp_path, mark_dynamic)
    assert ("reader.symint(" in path.read_text()) is mark_dynamic
    job = MinifyJob(repro=str(path), workdir=str(tmp_path / "w"), failure_class="runtime_error", budget=600.0,
                    backend=BACKEND, original_error=CheckError(type="RuntimeError",
                                                               message="only symbolic sizes fail here"))
    job_path = tmp_path / "job.json"
    job_path.write_text(json.dumps(job.to_json()))
    monkeypatch.chdir(tmp_path)   # the worker enters its directory: the test's is restored after it
    run = worker.load_run(str(job_path))
    assert run.kind == "dynamo" and not run.job.dynamic
    sig, why = worker.static_first(run)
    if mark_dynamic:   # static does not fail: compiled with dynamic shapes, as captured, and the record says so
        assert sig is not None and sig.exc_type == "RuntimeError", why
        assert run.job.dynamic and not run.result.static_first
    else:              # captured static: judged static, and it does not fail
        assert sig is None and not run.job.dynamic
