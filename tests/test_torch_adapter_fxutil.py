"""bot/torch_adapter/fxutil.py: the graph helpers the rest of the torch adapter shares (fast tier:
eager torch and FX tracing, nothing compiled)."""

from __future__ import annotations

import pytest

from bot.torch_adapter import fxutil

torch = pytest.importorskip("torch")


def test_inputs_are_cloned_with_their_strides_grad_and_containers():
    base = torch.arange(6.0)
    expanded = base[:2].unsqueeze(0).expand(3, 2)            # stride 0: a clone() would make it dense
    sliced = torch.arange(12.0).view(3, 4)[:, ::2]
    leaf = torch.randn(2, requires_grad=True)
    nested = [torch.ones(2)]
    out = fxutil.clone_inputs([expanded, sliced, leaf, nested, 3])
    assert out[0].stride() == expanded.stride() and torch.equal(out[0], expanded)
    assert out[1].stride() == sliced.stride() and torch.equal(out[1], sliced)
    assert out[0].data_ptr() != expanded.data_ptr()
    assert out[2].requires_grad and out[2].is_leaf and torch.equal(out[2], leaf)
    out[3][0].add_(1)                                         # containers are copies
    assert torch.equal(nested[0], torch.ones(2)) and out[4] == 3


def test_a_graph_traced_static_has_no_symbolic_placeholder_and_no_subgraph_call():
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    assert fxutil.symbolic_placeholders(gm) is False
    assert fxutil.free_symbols_of(torch.ones(2)) == set() and fxutil.free_symbols_of(3) == set()
    assert all(fxutil.subgraph_call(n) is None for n in gm.graph.nodes)
