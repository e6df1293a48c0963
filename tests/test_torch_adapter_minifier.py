"""bot/torch_adapter/minifier.py: how minify names, runs and judges a graph, through torch's own
APIs (fast tier: FX tracing, make_fx and eager runs; nothing is compiled)."""

from __future__ import annotations

import operator

import pytest

from bot.torch_adapter import minifier as M

torch = pytest.importorskip("torch")


def _aten_graph(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn)(*args)


def test_ops_carry_torch_names_python_operators_included():
    gm = torch.fx.symbolic_trace(lambda x, y: torch.relu(x * y) // 2 - x.sum())
    labels = [M.op_label(n) for n in gm.graph.nodes if n.op in M.CALL_OPS]
    assert labels == ["mul", "relu", "floor_divide", "sum", "sub"], labels
    aten = _aten_graph(lambda x: torch.relu(x) + 1, torch.randn(3))
    assert [M.op_label(n) for n in aten.graph.nodes if n.op == "call_function"] == ["aten.relu.default",
                                                                                  "aten.add.Tensor"]
    ops = M.graph_ops(aten)
    assert [o.op for o in ops] == ["aten.relu.default", "aten.add.Tensor"] and ops[0].dtypes == ["float32"]
    assert M.is_op_overload(torch.ops.aten.relu.default) and not M.is_op_overload(operator.add)


def test_a_graph_without_calls_computes_nothing():
    assert not M.has_compute(torch.fx.symbolic_trace(lambda x: x))
    assert M.has_compute(torch.fx.symbolic_trace(lambda x: x + 1))


def test_outputs_flatten_and_the_fp64_reference_runs_the_graph_in_float64():
    x = torch.randn(4, dtype=torch.float32)
    gm = _aten_graph(lambda x: (torch.sin(x), [x.to(torch.float16)]), x)
    assert [o.dtype for o in M.flat_outputs(M.run_eager(gm, [x]))] == [torch.float32, torch.float16]
    ref = M.flat_outputs(M.fp64_reference(gm, [x]))
    assert ref[0].dtype == torch.float64 and torch.allclose(ref[0], torch.sin(x.double()))
    assert M.flat_outputs(3) == [] and M.flat_outputs(None) == []


def test_the_accuracy_rule_is_torchs_with_the_checks_tolerance():
    x = torch.randn(64, dtype=torch.float64)
    ref, fp64 = [x.float()], [x]
    assert not M.accuracy_fails(ref, [x.float()], fp64, tol=1e-4, ignore_non_fp=True)
    assert M.accuracy_fails(ref, [x.float() + 1.0], fp64, tol=1e-4, ignore_non_fp=True)
    ints = [torch.tensor([1, 2, 3])]
    assert not M.accuracy_fails(ref + ints, [x.float(), torch.tensor([1, 2, 4])], fp64 + ints, tol=1e-4,
                                ignore_non_fp=True)


def test_a_training_step_differentiates_what_required_grad_and_never_a_buffer():
    w = torch.randn(3, requires_grad=True)
    data, stat = torch.randn(3), torch.randn(3)
    gm = torch.fx.symbolic_trace(lambda w, data, stat: ((w * data + stat).sum(),))
    mask = M.grad_mask(gm, [w, data, stat])
    assert mask == [True, False, False]
    outs = M.train_step(lambda a: gm(*a), [w, data, stat], mask)
    assert len(outs) == 2 and torch.allclose(outs[1], data)   # d/dw sum(w * data + stat) = data
    assert M.grad_mask(gm, [torch.randn(3), torch.randn(3), torch.arange(3)]) == [True, True, False]


@pytest.mark.slow
def test_a_graph_that_reads_a_tensors_value_compiles_as_the_program_compiled_it():
    """``x * x.amax().item()`` captured with ``capture_scalar_outputs`` (a fuzz finding): the graph
    holds ``_local_scalar_dense``, so it is traced with fake tensors, and compiled from real
    inputs inductor's own trace raised DataDependentOutputException - an error the program never
    saw - so the captured graph "did not fail on its own". It compiles from its example values,
    as the program's compile did, and computes what eager does."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    from bot.torch_adapter.fxutil import data_dependent

    x = torch.tensor([3, 1, 2], dtype=torch.uint8)
    with torch.no_grad():   # as after_aot captures it: inductor's decompositions applied
        gm = make_fx(lambda x: ((x * x.amax().item()).clamp(0, 7),), tracing_mode="fake",
                     decomposition_table=select_decomp_table())(x)
    assert data_dependent(gm) and not data_dependent(make_fx(lambda x: (x * 2,))(x))
    compiled = M.compile_aot(gm, [x])
    assert torch.equal(compiled([x])[0], torch.tensor([7, 3, 6], dtype=torch.uint8))
