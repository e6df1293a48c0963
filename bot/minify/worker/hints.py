"""What is known before the culprit search: the node a compile error names (:func:`error_hint`) and,
for accuracy failures, the first compiled intermediate that diverges from the fp64 run
(:func:`all_outputs_state` compiled once, then :func:`divergence_hint`). A :class:`Hint` is
unverified: the search tries it first and falls back when it is wrong (:func:`bot.minify.worker.
search.find_culprit`); the ``hint`` pass (:mod:`bot.minify.worker.passes`) asks for it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.minify.worker.graph import State, args_for, call_nodes, eager_values, is_tensor, op_name, rebuild


@dataclass
class Hint:
    """What is known before searching (see :func:`bot.minify.worker.search.find_culprit`): a node to
    try compiled alone first (the node a compile error names), and/or the range of call nodes the culprit lies in
    (the first compiled intermediate that diverges from the fp64 run, and the last one before it
    that agrees). Unverified: a wrong hint costs one query, then the plain search runs."""

    source: str                # "error" | "divergence"
    node: str | None = None    # a call node's name
    lo: int = 0                # prefix ``lo`` (call nodes) computes correctly
    hi: int | None = None      # prefix ``hi`` holds the first diverging value
    integers: bool = False     # that value is an integer or bool one: the failure shows in integers


_TARGET = re.compile(r"\btarget: ((?:aten|prims|torch\.ops\.aten)\.[\w.]+)")


def error_hint(gm, text: str | None) -> Hint | None:
    """The node a compile error names: inductor's ``LoweringException`` reads ``target: aten.x.y``
    (the op it failed to lower); the first call node of that op is the candidate."""
    if not text:
        return None
    for m in _TARGET.finditer(text):
        target = m.group(1).replace("torch.ops.", "")
        for n in call_nodes(gm):
            if op_name(n) == target or str(n.target) == target:
                return Hint("error", node=n.name)
    return None


def all_outputs_state(st: State, integers: bool = False) -> tuple[State, list[str]]:
    """The graph with every floating-point tensor intermediate as an output (``integers``: every
    integer and bool one too), and the names, in output order: compiled once, it shows each node's
    compiled value. (torch's post-AOT ``analyze`` reads them through inductor's intermediate hooks,
    which on the C++ backend only see extern kernels' buffers; outputs are materialized by every
    backend.)"""
    vals, kinds = eager_values(st.gm, st.args, lambda n: False)
    outs = [n for n in call_nodes(st.gm) if kinds.get(n.name) == "tensor"
            and (integers or getattr(n.meta.get("val"), "is_floating_point", lambda: True)())]
    gm, sources = rebuild(st.gm, call_nodes(st.gm), outs)
    return State(gm, args_for(sources, st.args, [])), [n.name for n in outs]


def divergence_hint(gm, args, compiled: dict, *, tol: float) -> Hint | None:
    """The ``analyze`` idea of torch's post-AOT accuracy minifier: ``compiled`` maps node names to
    the values the compiled graph produced for them (see :func:`all_outputs_state`); the first of
    them that fails the check's fp64 criterion against the eager run bounds the culprit from
    above, the last one before it that passes from below.

    An integer or bool value counts too where it is exact arithmetic: computed from integer and
    bool tensors only (or from none: an ``arange``), its compiled value must equal eager's, value
    and dtype (a uint8 ``amin`` that vectorizes wrong, an int64 product that overflows). Such a
    first divergence is an integer one (``Hint.integers``): the failure shows in integers. One
    computed from floats (``argmax``, a comparison) may differ legitimately and is not judged."""
    import torch

    from bot.torch_adapter.minifier import accuracy_fails, fp64_values

    tensors = {k for k, v in compiled.items() if isinstance(v, torch.Tensor)}
    names = {k for k in tensors if compiled[k].is_floating_point()}
    if not tensors:
        return None
    eager, _ = eager_values(gm, args, lambda n: n.name in tensors or any(u.name in tensors for u in n.users))
    fp64 = fp64_values(gm, args, names) if names else {}
    lo = 0
    for i, n in enumerate(call_nodes(gm)):
        ref, res = eager.get(n.name), compiled.get(n.name)
        if not isinstance(ref, torch.Tensor) or not isinstance(res, torch.Tensor) or ref.shape != res.shape:
            continue
        if n.name in names:
            if accuracy_fails(ref, res, fp64.get(n.name), tol=tol, ignore_non_fp=True):
                return Hint("divergence", lo=lo, hi=i + 1)
        elif ref.is_floating_point() or not _exact_arithmetic(n, eager):
            continue
        elif ref.dtype != res.dtype or not torch.equal(ref, res):
            return Hint("divergence", lo=lo, hi=i + 1, integers=True)
        lo = i + 1
    return None


def _exact_arithmetic(node, values: dict) -> bool:
    """Whether a node's tensor inputs are all integer or bool (or it reads none)."""
    ins = [values.get(a.name, a.meta.get("val")) for a in node.all_input_nodes]
    return all(not (is_tensor(v) or hasattr(v, "dtype")) or not v.is_floating_point() for v in ins)
