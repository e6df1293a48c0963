"""fx graph helpers that the rest of the adapter shares: fresh copies of a graph's inputs, a graph's
size symbols, and higher-order ops that run a subgraph (found and inlined).

The bottom of ``bot.torch_adapter``'s compile side: it imports no other part of minify-bot, and
``runtime``, ``minifier`` and ``repro`` share these helpers through it instead of importing one
another (``device`` <- ``runtime`` <- ``minifier``, and ``repro``, point one way).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any


def clone_inputs(args) -> list:
    """Fresh copies of a model's or a graph's inputs for one run (a check's iteration, a minifier
    query): compiled code may mutate or (boxed calls) clear its inputs. Tensors keep their strides
    and whether they require grad; containers are deep-copied; anything else is passed as it is."""
    import torch

    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            c = _clone_strided(a.detach())
            if a.requires_grad:
                c.requires_grad_(True)
            out.append(c)
        else:
            out.append(copy.deepcopy(a) if isinstance(a, (list, tuple, dict)) else a)
    return out


def _clone_strided(a):
    """A copy with ``a``'s strides, overlapping ones included: ``clone()`` keeps the strides of a
    dense tensor only, and an expanded (stride-0) or sliced input that became contiguous would be
    another input than the one the graph was compiled for and the repro file reads back."""
    c = a.clone()
    if c.stride() == a.stride() or a.layout is not c.layout or a.numel() <= 1 or c.is_sparse:
        return c
    span = 1 + sum((size - 1) * stride for size, stride in zip(a.shape, a.stride()))
    return a.as_strided((span,), (1,), a.storage_offset()).clone().as_strided(a.shape, a.stride())


def node_value(node):
    """A node's example value: ``val`` (an AOT graph's), else ``example_value`` (a dynamo graph's)."""
    return node.meta.get("val", node.meta.get("example_value"))


def free_symbols_of(val, unbacked: bool = False) -> set:
    """The free size symbols of a node's example value (a SymInt, a tensor's sizes/strides);
    empty for static values. ``unbacked``: only those a tensor's data gave (``item()``, ``nonzero``)."""
    import torch
    from torch.fx.experimental import symbolic_shapes as S

    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, torch.Tensor)):
        try:
            return set(S.free_unbacked_symbols(val) if unbacked else S.free_symbols(val))
        except Exception:  # noqa: BLE001 - a value whose symbols cannot be read counts as static
            return set()
    return set()


def symbolic_placeholders(gm) -> bool:
    """True when some input of ``gm`` has a symbolic size (a graph traced with dynamic shapes)."""
    return any(free_symbols_of(n.meta.get("val")) for n in gm.graph.nodes if n.op == "placeholder")


def data_dependent(gm) -> bool:
    """True when some value in ``gm`` depends on a tensor's data (``item()``, ``nonzero``: an
    unbacked symbol in its example value, as a graph traced with fake tensors records it)."""
    return any(free_symbols_of(n.meta.get("val"), unbacked=True) for n in gm.graph.nodes)


@dataclass
class SubgraphCall:
    """A higher-order op whose body is a subgraph of the module: ``cond(pred, true, false, operands)``
    (``subgraphs`` = [true, false], ``pred`` its predicate), or one that always runs its one
    subgraph on its operands: ``invoke_subgraph(subgraph, identifier, *operands)`` (a
    ``torch.compiler.nested_compile_region``), ``tag_activation_checkpoint(body, *operands, **kw)``
    (``torch.utils.checkpoint`` under torch.compile; recomputation changes no value) and
    ``wrap(body, *operands)``. The subgraphs are the get_attr nodes that name them."""

    kind: str
    subgraphs: list
    operands: list
    pred: Any = None


_BODY_FIRST = ("tag_activation_checkpoint", "wrap")   # hop(body, *operands, **options)


def subgraph_call(node) -> SubgraphCall | None:
    """The node as a :class:`SubgraphCall`, or None (any other node, or a higher-order op of a form
    this torch does not have)."""
    import torch

    hop = getattr(torch.ops, "higher_order", None)
    if node.op != "call_function" or hop is None or not node.args:
        return None
    body = getattr(node.args[0], "op", None) == "get_attr"
    for name in _BODY_FIRST:
        if node.target is getattr(hop, name, None) and body:
            return SubgraphCall(name, [node.args[0]], list(node.args[1:]))
    if node.kwargs:
        return None
    named = [a for a in node.args[1:3] if getattr(a, "op", None) == "get_attr"]
    if node.target is getattr(hop, "cond", None) and len(node.args) == 4 and len(named) == 2 \
            and isinstance(node.args[3], (tuple, list)):
        return SubgraphCall("cond", named, list(node.args[3]), node.args[0])
    if node.target is getattr(hop, "invoke_subgraph", None) and len(node.args) >= 2 and body:
        return SubgraphCall("invoke_subgraph", [node.args[0]], list(node.args[2:]))
    return None


def inline_subgraph_calls(gm, calls: dict, values: dict | None = None):
    """``gm`` with each call in ``calls`` (node -> :class:`SubgraphCall`) replaced by the nodes of
    the subgraph it runs (a cond's: the branch its predicate's value in ``values``, by node name,
    picks), as a new GraphModule on the same inputs; None when one cannot be (a predicate with no
    value, a nested subgraph, a body that is no fx graph, a result read other than by index)."""
    import operator

    import torch.fx as fx

    g = fx.Graph()
    env: dict = {}
    results: dict = {}
    for n in gm.graph.nodes:
        c = calls.get(n)
        if c is not None:
            which = 0
            if c.kind == "cond":
                pred = (values or {}).get(c.pred.name) if isinstance(c.pred, fx.Node) else c.pred
                if pred is None:
                    return None
                which = 0 if bool(pred) else 1
            operands = [env[a] if isinstance(a, fx.Node) else a for a in c.operands]
            outs = _copy_subgraph(g, gm.get_submodule(c.subgraphs[which].target), operands, n.name)
            if outs is None:
                return None
            results[n] = outs
        elif n.op == "get_attr" and n.users and all(u in calls and n in calls[u].subgraphs for u in n.users):
            continue   # a subgraph: its nodes are inlined
        elif (n.op == "call_function" and n.target is operator.getitem and n.args[0] in results
              and isinstance(n.args[1], int)):
            env[n] = results[n.args[0]][n.args[1]]
        elif any(a in results for a in n.all_input_nodes):
            return None
        elif n.op == "output":
            g.output(fx.map_arg(n.args[0], lambda x: env[x]))
        else:
            env[n] = g.node_copy(n, lambda x: env[x])
    new = fx.GraphModule(gm, g)
    new.graph.lint()
    return new


def _copy_subgraph(g, sub, operands: list, prefix: str) -> list | None:
    """Copy the subgraph ``sub``'s nodes into ``g``, its inputs read from ``operands``, each named
    after the call (``prefix``) so that no node of the graph it joins is renamed; its outputs."""
    import torch.fx as fx

    if not isinstance(getattr(sub, "graph", None), fx.Graph):
        return None
    env: dict = {}
    placeholders = [m for m in sub.graph.nodes if m.op == "placeholder"]
    if len(placeholders) != len(operands):
        return None
    for m in sub.graph.nodes:
        if m.op == "placeholder":
            env[m] = operands[len(env)]
        elif m.op in ("get_attr", "call_module"):
            return None   # an attribute or module of the subgraph's own (nested control flow): not inlined
        elif m.op == "output":
            out = m.args[0]
            return [env[o] if isinstance(o, fx.Node) else o for o in (out if isinstance(out, (tuple, list)) else [out])]
        else:
            node = g.create_node(m.op, m.target, fx.map_arg(m.args, lambda x: env[x]),
                                 fx.map_arg(m.kwargs, lambda x: env[x]), name=f"{prefix}_{m.name}", type_expr=m.type)
            node.meta = dict(m.meta)
            env[m] = node
    return None
