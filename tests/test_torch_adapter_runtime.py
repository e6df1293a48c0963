"""bot/torch_adapter/runtime.py: the harness's rules a check runs by, on real torch (eager and the
eager backend: nothing compiled by inductor): backends resolved or refused, how an exception is
classed, the accuracy comparison and its RMSE summary, determinism, one iteration."""

from __future__ import annotations

import sys

import pytest
import torch

from bot.errors import UsageError
from bot.torch_adapter import runtime


def test_backends_resolved_or_refused(tmp_path, monkeypatch):
    (tmp_path / "rt_backends.py").write_text("def mine(gm, inputs):\n    return gm\nnot_callable = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert runtime.resolve_backend("inductor") == "inductor"
    assert runtime.resolve_backend("rt_backends:mine").__name__ == "mine"
    runtime.validate_backend("rt_backends:mine")
    runtime.validate_backend("aot_eager")
    with pytest.raises(UsageError, match="cannot load custom backend 'rt_backends:missing'"):
        runtime.resolve_backend("rt_backends:missing")
    with pytest.raises(UsageError, match="cannot load custom backend 'no_module_rt:f'"):
        runtime.validate_backend("no_module_rt:f")
    with pytest.raises(UsageError, match="is not callable"):
        runtime.resolve_backend("rt_backends:not_callable")
    with pytest.raises(UsageError, match="unknown backend 'inductr'"):
        runtime.validate_backend("inductr")
    assert "inductor" in runtime.known_backend_names()


def test_exceptions_are_classed():
    from torch._dynamo.exc import BackendCompilerFailed, Unsupported

    assert runtime.is_compile_exception(Unsupported("graph break"))
    assert runtime.is_compile_exception(BackendCompilerFailed(lambda: None, RuntimeError("x"), None))
    assert not runtime.is_compile_exception(RuntimeError("shape mismatch"))
    assert runtime.is_oom(MemoryError()) and runtime.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate "
                                                                        "memory: you tried... out of memory"))
    assert runtime.is_oom(torch.OutOfMemoryError("x")) and not runtime.is_oom(ValueError("bad"))
    try:
        try:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        except RuntimeError as inner:
            raise ValueError("while comparing") from inner
    except ValueError as exc:
        assert runtime.poisons_process(exc)  # found through the cause
    assert not runtime.poisons_process(RuntimeError("CUDA error: out of memory"))
    assert not runtime.poisons_process(RuntimeError("an illegal value"))


def test_accuracy_comparison_and_its_summary():
    ref = torch.linspace(-1, 1, 64)
    fp64 = ref.double()
    assert runtime.same(ref, ref.clone(), fp64, tol=1e-4)
    off = ref + 0.5
    assert not runtime.same(ref, off, fp64, tol=1e-4)
    s = runtime.rmse_summary((ref,), (off,), (fp64,))
    assert s["max_abs_diff"] == pytest.approx(0.5) and s["rmse_res"] == pytest.approx(0.5) and s["rmse_ref"] < 1e-6
    nested = runtime.rmse_summary({"b": ref, "a": [ref]}, {"a": [off], "b": ref}, None)
    assert nested["max_abs_diff"] == pytest.approx(0.5) and nested["rmse_res"] == 0.0


def test_determinism_and_one_iteration():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    x = torch.randn(3, 4, requires_grad=True)
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fallback_random=False):  # setup_determinism sets it; restored after
        _determinism_and_one_iteration(model, x)
        assert inductor_config.fallback_random is True


def _determinism_and_one_iteration(model, x):
    runtime.setup_determinism("cpu")
    try:
        model.train()
        a = runtime.run_iteration(model, (x,), training=True)
        b = runtime.run_iteration(model, (x,), training=True)  # reseeded: the same dropout mask
        assert runtime.same(a, b, tol=0)
        assert x.grad is None  # the inputs were cloned
        model.eval()
        out = runtime.run_iteration(model, (x,), training=False)
        assert not out.requires_grad
    finally:
        torch.use_deterministic_algorithms(False)


def test_cast_to_keeps_integers_and_grad_flags():
    model, (f, i) = runtime.cast_to(torch.bfloat16, torch.nn.Linear(2, 2), (torch.randn(2, requires_grad=True),
                                                                             torch.arange(3)))
    assert model.weight.dtype == torch.bfloat16 and f.dtype == torch.bfloat16 and f.requires_grad
    assert i.dtype == torch.int64


def test_synchronize_without_cuda_does_nothing():
    runtime.synchronize()
    assert "torch" in sys.modules and not torch.cuda.is_initialized()
