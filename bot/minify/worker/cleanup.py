"""The cleanup: passes ``pass_(state, oracle) -> State`` run in order, as a list
(:data:`CLEANUP_PASSES`), until a round removes no call node; the result is 1-minimal (no single
node can be removed and still fail). Each records its statistics (queries, removed call nodes,
seconds) in the problem's :class:`~bot.minify.worker.problem.PassStats`; the order and why:
:mod:`bot.minify.worker.passes`."""

from __future__ import annotations

import functools
from typing import Callable

from bot.minify.worker.graph import (
    State,
    bypass,
    bypass_operands,
    call_nodes,
    eager_values,
    live_nodes,
    multi_output_source,
    outputs_of,
    restrict,
    symint_placeholders_for,
)
from bot.minify.worker.problem import Oracle, PassStats
from bot.torch_adapter.minifier import CALL_OPS


def remove_dead(st: State, oracle: Oracle) -> State:
    """Drop every call node no output depends on, impure-looking ones included (one query)."""
    live = live_nodes(st.gm, outputs_of(st.gm))
    if len(live) == len(call_nodes(st.gm)):
        return st
    cand = restrict(st, outputs_of(st.gm))
    return cand if oracle(cand) else st


def drop_outputs(st: State, oracle: Oracle) -> State:
    """Keep only the outputs the failure needs: try each output alone first (a single failing
    output is the common case), then drop outputs one at a time."""
    outs = outputs_of(st.gm)
    if len(outs) <= 1:
        return st
    for o in outs:
        cand = restrict(st, [o])
        if oracle(cand):
            return cand
    cur, best = list(outs), st
    for o in list(outs):
        if len(cur) == 1:
            break
        trial = [x for x in cur if x is not o]
        cand = restrict(st, trial)   # always cut from ``st``: ``trial`` holds its output nodes
        if oracle(cand):
            cur, best = trial, cand
    return best


def remove_nodes(st: State, oracle: Oracle) -> State:
    """Remove single call nodes while the failure keeps, last to first, until no single removal
    keeps it: the result is 1-minimal. A node is removed either by *cutting* it (it becomes an
    input fed its eager value: what it computed is kept, how is dropped) or, when it is an
    output, by *dropping* it (its tensor inputs become outputs in its place)."""
    changed = True
    while changed:
        changed = False
        # one pass, last to first, goes on after a removal (a restart would ask the nodes after
        # it again); passes repeat until one removes nothing: that pass proves 1-minimality
        for name in [n.name for n in reversed(call_nodes(st.gm))]:
            n = next((m for m in call_nodes(st.gm) if m.name == name), None)
            if n is None or multi_output_source(n) is not None:
                continue  # gone with an earlier removal; a getitem goes with its op
            cand = _drop_node(st, n)
            if cand is not None and oracle(cand):
                st, changed = cand, True
                continue
            if cand is not None and all(a.op == "placeholder" for a in n.all_input_nodes):
                continue  # an output op of inputs only: cutting it leaves the ops dropping it left
            values, kinds = eager_values(st.gm, st.args, lambda m, n=n: m is n)
            if kinds.get(n.name) != "tensor" or n.name not in values:
                continue
            cand = restrict(st, outputs_of(st.gm), new_inputs={n: f"in_{n.name}"}, values={n.name: values[n.name]})
            if oracle(cand):
                st, changed = cand, True
    return st


def bypass_nodes(st: State, oracle: Oracle) -> State:
    """Remove call nodes by *bypassing* them while the failure keeps, last to first: what read a
    node reads one of its own inputs instead (one of the same shape, dtype and device,
    :func:`bot.minify.worker.graph.bypass_operands`). Cutting (:func:`remove_nodes`) keeps a node's
    value and drops how it was computed; some failures need an earlier node's code but none of the
    nodes between: ``argmax(div(abs(x), 3))`` fails because ``abs`` of int16 reaches ``argmax``.
    Cutting ``div`` feeds ``argmax`` an input and loses it; bypassing ``div`` gives ``argmax(abs(x))``.

    A node that can go is tried with the chain of nodes it reads through (its operand, that one's,
    back to an input): first the whole chain (its readers read the chain's input: one query
    removes a whole branch), then the longest part that keeps the failure, by doubling and then
    halving as Hypothesis' shrinker grows a deletion: a stretch of N nodes between two ops a
    failure needs costs about 2*log2 N queries, not N."""
    failed: set = set()
    while True:
        n = next((m for m in reversed(call_nodes(st.gm)) if m.name not in failed and bypass_operands(m)), None)
        if n is None:
            return st
        first = next((a for a in bypass_operands(n) if _keeps(st, {n: a}, oracle)), None)
        if first is None:
            failed.add(n.name)
            continue
        chain = _chain(n, first)
        keeps = functools.partial(_keeps_part, st, chain, oracle)
        k = len(chain) if len(chain) == 1 or keeps(len(chain)) else _longest(keeps, len(chain) - 1)
        st = bypass(st, dict(chain[:k]))


def _chain(n, operand) -> list:
    """``[(n, operand), (operand, its first bypass operand), ...]`` back to an input."""
    chain, seen = [(n, operand)], {n}
    while operand not in seen and (nxt := bypass_operands(operand)):
        seen.add(operand)
        chain.append((operand, nxt[0]))
        operand = nxt[0]
    return chain


def _keeps_part(st: State, chain: list, oracle: Oracle, k: int) -> bool:
    return _keeps(st, dict(chain[:k]), oracle)


def _keeps(st: State, replace: dict, oracle: Oracle) -> bool:
    cand = bypass(st, replace)
    return bool(call_nodes(cand.gm)) and oracle(cand)  # a graph of no op cannot fail to compile


def _longest(ok: Callable[[int], bool], most: int) -> int:
    """The largest k <= ``most`` for which ``ok`` holds, given ``ok(1)``: double while it holds,
    then halve the gap (about 2*log2 k calls)."""
    lo, hi = 1, 2
    while hi <= most and ok(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, most + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _drop_node(st: State, n) -> State | None:
    outs = outputs_of(st.gm)
    if n not in outs or any(u.op != "output" for u in n.users):
        return None
    repl = [a for a in n.all_input_nodes if a.op in CALL_OPS or a.op == "placeholder"]
    new_outs = list(dict.fromkeys([o for o in outs if o is not n] + repl))
    if not new_outs:
        return None
    return restrict(st, new_outs)


def drop_unused_inputs(st: State) -> State:
    """Placeholders nobody reads (no query: an unread input cannot change what is computed)."""
    g = st.gm.graph
    phs = [n for n in g.nodes if n.op == "placeholder"]
    sizes = set(symint_placeholders_for(st.gm, [n.meta.get("val") for n in phs if n.users]))
    unused = [i for i, n in enumerate(phs) if not n.users and n not in sizes]
    if not unused:
        return st
    for i in unused:
        g.erase_node(phs[i])
    st.gm.recompile()
    return State(st.gm, [a for i, a in enumerate(st.args) if i not in set(unused)])


def is_one_minimal(st: State, oracle: Oracle) -> bool:
    """True when removing any single call node (making it an input) loses the failure."""
    return remove_nodes(st, oracle) is st


def _drop_unused_inputs(st: State, oracle: Oracle) -> State:
    return drop_unused_inputs(st)


# Passes 2-5, in the order bot.minify.worker.passes explains; :func:`cleanup` runs the list until a
# round changes nothing (a later pass can open a chance for an earlier one: a cut node can leave
# an output dead).
CLEANUP_PASSES: tuple[Callable[[State, Oracle], State], ...] = (
    remove_dead, drop_outputs, remove_dead, bypass_nodes, remove_nodes, _drop_unused_inputs)


def cleanup(st: State, oracle: Oracle, stats: PassStats | None = None,
            passes: tuple = CLEANUP_PASSES) -> State:
    """The passes in order, repeated until a whole round removes no call node."""
    import time

    stats = stats if stats is not None else PassStats()
    while True:
        stats.rounds += 1
        before_round = len(call_nodes(st.gm))
        for p in passes:
            n0, q0, t0 = len(call_nodes(st.gm)), oracle.asked, time.monotonic()
            st = p(st, oracle)
            stats.record(p.__name__.lstrip("_"), oracle.asked - q0, n0 - len(call_nodes(st.gm)),
                         time.monotonic() - t0)
        if len(call_nodes(st.gm)) == before_round:
            return st
