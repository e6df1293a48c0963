"""The graph operations of the reduction: a :class:`State` (an fx graph and its inputs) cut, rebuilt
and run eagerly. Nothing here asks a query: the passes (:mod:`bot.minify.worker.passes`, with the
search in :mod:`bot.minify.worker.search` and the cleanup in :mod:`bot.minify.worker.cleanup`) ask
the oracle (:class:`bot.minify.worker.problem.Oracle`) about the states these build.

Dynamic shapes: a graph traced symbolically (a launcher captured with dynamic shapes) stays
symbolic through every cut: cut-out graphs keep the SymInt inputs whose symbols their tensors'
sizes use, a size read inside the graph is fed from the matching SymInt input rather than frozen
into a constant, and the predicate only counts a candidate that still compiles with symbolic sizes
(see ``Evaluator``), so a bug that only shows with dynamic shapes is never specialized away.
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass
from typing import Any, Callable

from bot.torch_adapter.fxutil import node_value
from bot.torch_adapter.minifier import CALL_OPS, op_label


@dataclass
class State:
    gm: Any                    # torch.fx.GraphModule
    args: list


def call_nodes(gm) -> list:
    return [n for n in gm.graph.nodes if n.op in CALL_OPS]


def op_name(node) -> str:
    """The node's op as torch names it (``mul``, not ``_operator.mul``): the adapter's one definition."""
    return op_label(node)


def fingerprint(st: State) -> str:
    """A key for (graph, inputs): the generated code plus each input's shape, dtype and a checksum."""
    import torch

    h = hashlib.sha256(st.gm.code.encode())
    for a in st.args:
        if isinstance(a, torch.Tensor):
            h.update(f"{tuple(a.shape)}|{tuple(a.stride())}|{a.dtype}|{a.device}".encode())
            try:
                h.update(repr(float(a.detach().double().sum())).encode() if a.numel() else b"0")
            except Exception:  # noqa: BLE001 - e.g. a tensor whose sum cannot be taken: shape is enough
                pass
        else:
            h.update(repr(a).encode())
    return h.hexdigest()


def is_tensor(v) -> bool:
    import torch

    return isinstance(v, torch.Tensor)


def eager_values(gm, args, keep: Callable[[Any], bool]) -> tuple[dict, dict]:
    """Run ``gm`` eagerly node by node (no grad); returns ({name: value} for nodes ``keep`` picks,
    {name: kind}) where kind is "tensor", "tensors" (a tuple/list of tensors), "scalar" or "other".
    Only the kept values stay alive, so peak memory is that of one eager run."""
    import torch
    import torch.fx as fx

    from bot.torch_adapter.fxutil import clone_inputs

    kept: dict = {}
    kinds: dict = {}

    class _Rec(fx.Interpreter):
        def run_node(self, n):
            v = super().run_node(n)
            if is_tensor(v):
                kinds[n.name] = "tensor"
            elif isinstance(v, (tuple, list)) and all(is_tensor(x) or x is None for x in v):
                kinds[n.name] = "tensors"
            elif isinstance(v, (int, float, bool)) or type(v).__name__.startswith("Sym"):
                kinds[n.name] = "scalar"
            else:
                kinds[n.name] = "other"
            if keep(n):
                kept[n.name] = v
            return v

    try:
        with torch.no_grad():
            _Rec(gm, garbage_collect_values=True).run(*clone_inputs(args))
    except Exception:  # noqa: BLE001 - a graph that raises on its inputs (an index eager rejects)
        # the nodes from the one that raised on have no value; their kinds come from the traced
        # example values, so a cut before or at the raising node is still possible
        for n in gm.graph.nodes:
            if n.name not in kinds and n.op in CALL_OPS and is_tensor(n.meta.get("val")):
                kinds[n.name] = "tensor"
    return kept, kinds


def rebuild(gm, nodes_in_order, outputs, *, new_inputs=None, values=None, replace=None) -> Any:
    """A new GraphModule from ``gm`` with the given call nodes (in order), the given outputs, the
    original placeholders/get_attrs they need, ``new_inputs`` (node -> placeholder name) that
    replace nodes by inputs, and ``replace`` (node -> an earlier node) whose nodes are read as
    that earlier node wherever they are read. Returns (graph module, [placeholder source]) where
    each source is ("arg", i) for an original input or ("value", node name) for a replaced node."""
    import torch.fx as fx

    new_inputs, replace = new_inputs or {}, replace or {}
    g = fx.Graph()
    env: dict = {}
    sources: list = []
    keep = set(nodes_in_order)
    needed = set()
    for n in nodes_in_order:
        needed.update(replace.get(x, x) for x in n.all_input_nodes)
    needed.update(o for o in outputs)
    needed.update(symint_placeholders_for(
        gm, [n.meta.get("val") for n in needed if n.op == "placeholder" or n in new_inputs]))
    ph_index = 0
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            if n in needed and n not in new_inputs:
                env[n] = g.node_copy(n)
                sources.append(("arg", ph_index))
            ph_index += 1
    for n, name in new_inputs.items():
        if n in needed:
            p = g.placeholder(name)
            if "val" in n.meta:
                p.meta["val"] = _input_val(n, (values or {}).get(n.name), name)
            env[n] = p
            sources.append(("value", n.name))
    for n in gm.graph.nodes:
        if n.op == "get_attr" and n in needed:
            env[n] = g.node_copy(n)
    for n in gm.graph.nodes:
        if n in replace:
            if replace[n] in env:
                env[n] = env[replace[n]]
        elif n in keep and n not in new_inputs:
            env[n] = g.node_copy(n, lambda x: env[x])
    g.output(tuple(env[o] for o in outputs))
    new = fx.GraphModule(gm, g)
    new.graph.lint()
    return new, sources


def symint_placeholders_for(gm, vals) -> list:
    """The SymInt inputs of ``gm`` whose symbol is a free size symbol of one of ``vals``: a graph
    cut out of a dynamic-shapes graph keeps them, so that torch's ``run_repro`` (which compiles a
    symbolic repro with dynamic shapes only when a SymInt input is left) compiles it dynamically,
    as the launcher it came from."""
    from bot.torch_adapter.fxutil import free_symbols_of

    syms = set()
    for v in vals:
        syms |= free_symbols_of(v)
    if not syms:
        return []
    out = []
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta.get("val")
        if type(v).__name__ == "SymInt" and getattr(getattr(v, "node", None), "expr", None) in syms:
            out.append(n)
    return out


def _input_val(node, value, name: str):
    """The example value of a placeholder that stands for ``node`` (fed ``value``)."""
    from bot.torch_adapter.repro import input_val

    return input_val(node.meta.get("val"), value, name)


def args_for(sources, args, values) -> list:
    return [args[i] if kind == "arg" else values[i] for kind, i in sources]


def multi_output_source(node):
    """The op whose tuple result ``node`` takes one element of (``getitem(op, 0)``); None for any other
    node, a tensor indexed (``x[:, None]``, a dynamo graph's ``getitem``) included: that is an op of its own."""
    if node.op == "call_function" and node.target is operator.getitem and len(node.args) == 2 and \
            getattr(node.args[0], "op", None) in CALL_OPS and isinstance(node.args[1], int) and \
            not is_tensor(node_value(node.args[0])):
        return node.args[0]
    return None


def outputs_of(gm) -> list:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    val = out.args[0]
    return list(val) if isinstance(val, (tuple, list)) else [val]


def live_nodes(gm, outputs) -> list:
    """Call nodes that some output depends on, in graph order."""
    live, stack = set(), [o for o in outputs if hasattr(o, "op")]
    while stack:
        n = stack.pop()
        if n in live:
            continue
        live.add(n)
        stack.extend(n.all_input_nodes)
    return [n for n in gm.graph.nodes if n.op in CALL_OPS and n in live]


def restrict(st: State, outputs, new_inputs=None, values=None) -> State:
    """``st`` cut down to what ``outputs`` need; ``new_inputs`` (node -> name) become placeholders
    fed ``values[node.name]``."""
    outputs = [o for o in outputs if hasattr(o, "op")]
    cut = new_inputs or {}
    gm, sources = rebuild(st.gm, _live_cut(st.gm, outputs, cut), outputs, new_inputs=cut, values=values)
    return State(gm, [st.args[i] if kind == "arg" else values[i] for kind, i in sources])


def _live_cut(gm, outputs, cut, replace=None) -> list:
    live, stack = set(), list(outputs)
    while stack:
        n = _through(stack.pop(), replace)
        if n in live:
            continue
        live.add(n)
        if n not in cut:
            stack.extend(n.all_input_nodes)
    return [n for n in gm.graph.nodes if n.op in CALL_OPS and n in live and n not in cut]


def _through(n, replace):
    while replace and n in replace:
        n = replace[n]
    return n


def bypass_operands(node) -> list:
    """The inputs of ``node`` that could stand in its place: tensors of its shape, dtype and device
    (so that every node reading it still reads what its metadata says), call nodes or inputs."""
    def meta(n):
        v = node_value(n)
        return (str(tuple(v.shape)), v.dtype, v.device) if is_tensor(v) else None

    if node.op not in CALL_OPS or multi_output_source(node) is not None or meta(node) is None:
        return []
    return [a for a in dict.fromkeys(node.all_input_nodes)
            if (a.op in CALL_OPS or a.op == "placeholder") and meta(a) == meta(node)]


def bypass(st: State, replace: dict) -> State:
    """``st`` with the nodes of ``replace`` (node -> one of its :func:`bypass_operands`) bypassed:
    whatever read such a node reads its operand instead (through a chain of bypassed nodes, the
    first that is not), and whatever only they needed is gone with them."""
    replace = {n: _through(a, replace) for n, a in replace.items()}
    outputs = list(dict.fromkeys(_through(o, replace) for o in outputs_of(st.gm) if hasattr(o, "op")))
    gm, sources = rebuild(st.gm, _live_cut(st.gm, outputs, {}, replace), outputs, replace=replace)
    return State(gm, args_for(sources, st.args, []))


def prefix_state(st: State, k: int, kinds: dict):
    """The graph of the first ``k`` call nodes whose outputs are the prefix's frontier (the tensors
    that later nodes or the graph's outputs read); None when the cut would split a multi-output
    node from its getitems or would output a non-tensor."""
    calls = call_nodes(st.gm)
    prefix = calls[:k]
    inside = set(prefix)
    frontier = []
    for n in prefix:
        if any(u not in inside for u in n.users):
            kind = kinds.get(n.name)
            if kind == "scalar":
                continue  # a size feeding later nodes: not an output the check compares
            if kind != "tensor":
                return None
            frontier.append(n)
    if not frontier:
        return None
    gm, sources = rebuild(st.gm, prefix, frontier)
    return State(gm, args_for(sources, st.args, []))


def window_state(st: State, lo: int, k: int, kinds: dict):
    """Call nodes ``lo``..``k-1`` on their own: the values they read from earlier call nodes become
    inputs fed their real eager values, and their frontier the outputs (:func:`prefix_state` when
    ``lo`` is 0). None when a cut would need a non-tensor input or output."""
    if lo == 0:
        return prefix_state(st, k, kinds)
    calls = call_nodes(st.gm)
    window = calls[lo:k]
    inside, earlier = set(window), set(calls[:lo])
    cut = [n for n in dict.fromkeys(x for w in window for x in w.all_input_nodes) if n in earlier]
    if any(kinds.get(n.name) != "tensor" for n in cut):
        return None
    frontier = []
    for n in window:
        if any(u not in inside for u in n.users):
            if kinds.get(n.name) == "scalar":
                continue
            if kinds.get(n.name) != "tensor":
                return None
            frontier.append(n)
    if not frontier:
        return None
    values, _ = eager_values(st.gm, st.args, lambda n: n in cut)
    if any(n.name not in values for n in cut):
        return None  # after a node that raises in eager: no value to feed
    gm, sources = rebuild(st.gm, window, frontier, new_inputs={n: f"cut_{n.name}" for n in cut}, values=values)
    return State(gm, args_for(sources, st.args, values))


def cut_before(st: State, anc: list, k: int, kinds: dict) -> State | None:
    """``anc[k:]`` on its own: what it reads from ``anc[:k]`` becomes inputs fed the eager values
    (None when such a value is not a tensor)."""
    later = set(anc[k:])
    cut = [n for n in anc[:k] if any(u in later for u in n.users)]
    if not cut or any(kinds.get(n.name) != "tensor" for n in cut):
        return None
    values, _ = eager_values(st.gm, st.args, lambda n: n in set(cut))
    if any(n.name not in values for n in cut):
        return None  # after a node that raises in eager: no value to feed
    return restrict(st, outputs_of(st.gm), new_inputs={n: f"cut_{n.name}" for n in cut}, values=values)


def alone_state(st: State, node) -> State | None:
    """``node`` compiled alone: its tensor inputs become placeholders fed their real eager values,
    its outputs (every tensor it returns) the graph's outputs."""
    import torch.fx as fx

    ins = list(dict.fromkeys(node.all_input_nodes))
    values, kinds = eager_values(st.gm, st.args, lambda n: n in ins or n is node)
    if kinds.get(node.name) not in ("tensor", "tensors"):
        return None
    g = fx.Graph()
    env: dict = {}
    args = []
    phs = [n for n in st.gm.graph.nodes if n.op == "placeholder"]
    for p in symint_placeholders_for(st.gm, [a.meta.get("val") for a in ins] + [node.meta.get("val")]):
        env[p] = g.node_copy(p)  # dynamic shapes: the size inputs stay inputs
        args.append(st.args[phs.index(p)])
    by_expr = {getattr(p.meta["val"].node, "expr", None): p for p in env}
    for i, a in enumerate(ins):
        v = values.get(a.name)
        expr = getattr(getattr(a.meta.get("val"), "node", None), "expr", None)
        if a in env:
            continue
        if expr is not None and expr in by_expr:
            env[a] = env[by_expr[expr]]  # a size read from a tensor: the matching size input
        elif a.op == "get_attr":
            env[a] = g.node_copy(a)
        elif is_tensor(v):
            p = g.placeholder(a.name if a.op == "placeholder" else f"arg{i}_{a.name}")
            if "val" in a.meta:
                p.meta["val"] = a.meta["val"] if a.op == "placeholder" else _input_val(a, v, p.name)
            env[a] = p
            args.append(v)
        else:
            env[a] = v  # a size or a scalar: a constant of the repro
    new = g.node_copy(node, lambda x: env[x])
    out = values.get(node.name, node.meta.get("val"))  # a node that raised in eager: its traced value
    if is_tensor(out):
        g.output((new,))
    else:
        g.output(tuple(g.call_function(operator.getitem, (new, i)) for i, v in enumerate(out) if is_tensor(v)))
    gm = fx.GraphModule(st.gm, g)
    gm.graph.lint()
    return State(gm, args)


def culprit_ops(st: State) -> list[str]:
    """The op names of a reduced graph's computing nodes (getitems fold into their op), sorted."""
    return sorted({op_name(n) for n in call_nodes(st.gm) if multi_output_source(n) is None})
