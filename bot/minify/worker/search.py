"""The culprit search and reach-back, over one :class:`~bot.minify.worker.graph.State` and the
oracle (the order and the query bound: :mod:`bot.minify.worker.passes`).

- :func:`inline_subgraphs`: control flow and subgraph calls as straight-line code, kept when the
  flat graph still fails the pinned way (one query, only for a graph that has such a call).
- :func:`find_culprit`: a binary search for the culprit node (``ceil(log2 N)`` queries on an N-node
  graph), first over windows of the range still in question, then over prefixes; then that node
  compiled alone, fed its real eager inputs.
- :func:`reach_back`: for a culprit that needs its surroundings, how far back from where it shows
  the failure reaches (log N again).

Each only ever returns a state the oracle says still fails the pinned way (or None)."""

from __future__ import annotations

from bot.minify.worker.graph import (
    State,
    alone_state,
    call_nodes,
    cut_before,
    eager_values,
    multi_output_source,
    op_name,
    prefix_state,
    restrict,
    window_state,
)
from bot.minify.worker.hints import Hint
from bot.minify.worker.problem import Culprit, Oracle
from bot.torch_adapter.fxutil import inline_subgraph_calls, subgraph_call


def inline_subgraphs(st: State, oracle: Oracle, log=lambda m: None) -> State:
    """The graph with its subgraph calls (``cond``, ``invoke_subgraph``, ``tag_activation_checkpoint``,
    ``wrap``) inlined (see the order in :mod:`bot.minify.worker.passes`), when it still fails; else
    the graph as it was."""
    calls = {n: c for n in call_nodes(st.gm) if (c := subgraph_call(n)) is not None}
    if not calls:
        return st
    kinds = f"{len(calls)} subgraph call(s) ({', '.join(sorted({c.kind for c in calls.values()}))})"
    preds = {c.pred for c in calls.values() if getattr(c.pred, "op", None) is not None}
    values = eager_values(st.gm, st.args, keep=lambda n: n in preds)[0] if preds else {}
    try:
        flat = inline_subgraph_calls(st.gm, calls, values)
    except Exception as exc:  # noqa: BLE001 - a form of call not foreseen: the graph stays as called
        log(f"inline: {type(exc).__name__}: {exc}")
        flat = None
    if flat is None:
        log(f"inline: {kinds} kept: a branch could not be chosen or inlined")
        return st
    flat_st = State(flat, list(st.args))
    if not oracle(flat_st):
        log(f"inline: the graph with its {kinds} inlined does not fail: kept as called")
        return st
    log(f"inline: {kinds} inlined: {len(call_nodes(st.gm))} -> {len(call_nodes(flat))} call nodes")
    return flat_st


def find_culprit(st: State, oracle: Oracle, log=lambda m: None, hint: Hint | None = None, windows: bool = True
                 ) -> tuple[State, Culprit] | None:
    """Binary search for the first call node whose compiled prefix fails, then that node alone.

    Prefix ``k`` fails iff it contains the culprit (one bug, the failure shows at the frontier),
    so with ``lo`` (empty, passes) and ``hi`` (the whole graph, fails) the search halves the range
    each query. Returns (the culprit-alone state, Culprit) when the node fails compiled alone, or
    (the smallest failing prefix, Culprit(method="graph")) when it does not (the whole graph when
    only the whole graph fails: the failure shows at its last node); None when no prefix could be cut.

    ``hint`` (what is known before searching) goes first: its node is tried compiled alone (one
    query), and its range [lo, hi) replaces the whole graph as the search range. When the search
    inside the hinted range does not end on a node that fails alone, the plain search runs (the
    oracle's cache answers what was already asked).

    ``windows=False`` skips the window search: for errors and crashes, whose cost is the number
    of compiles rather than their size, a window search that misses (the failure needs nodes
    before the culprit) would add log2 N queries to the prefix search's."""
    calls = call_nodes(st.gm)
    asked0 = oracle.asked
    if hint is not None and hint.node is not None:
        node = next((n for n in calls if n.name == hint.node), None)
        alone = alone_state(st, node) if node is not None else None
        if alone is not None and oracle(alone):
            log(f"culprit search: {hint.source} named {node.name} = {op_name(node)}; it fails compiled alone "
                f"({oracle.asked - asked0} queries)")
            return alone, Culprit([op_name(node)], "compiled-alone", node.name, oracle.asked - asked0)
        log(f"culprit search: {hint.source} named {hint.node}, which does not fail compiled alone")
    if hint is not None and hint.hi is not None and 0 <= hint.lo < hint.hi <= len(calls) \
            and (hint.lo, hint.hi) != (0, len(calls)):
        log(f"culprit search: {hint.source} puts the culprit in call nodes {hint.lo + 1}..{hint.hi} of {len(calls)}")
        _, kinds = eager_values(st.gm, st.args, lambda n: False)
        found = _window_search(st, oracle, log, calls, hint.lo, hint.hi, kinds, asked0)
        if found is not None:
            return found
        log("culprit search: not in the hinted range; searching the whole graph")
        return _search(st, oracle, log, calls, 0, len(calls), asked0)
    # the window search is tried once: a failure it misses is not local, and prefixes decide
    return _search(st, oracle, log, calls, 0, len(calls), asked0, windows=windows)


def _nearest_cut(lo: int, hi: int, make) -> tuple[State | None, int | None]:
    """The candidate ``make(j)`` for the cut point ``j`` strictly between ``lo`` and ``hi`` nearest
    their middle that can be made (a cut can fall where no state can be built: a non-tensor value,
    a multi-output node split from its getitems); (None, None) when none can."""
    mid = (lo + hi) // 2
    for j in sorted(range(lo + 1, hi), key=lambda j: abs(j - mid)):
        cand = make(j)
        if cand is not None:
            return cand, j
    return None, None


def _window_search(st: State, oracle: Oracle, log, calls, lo: int, hi: int, kinds: dict, asked0: int):
    """The prefix search's halving, but each query compiles only the part of the range still in
    question, ``lo``..``mid``, fed the eager values of what it reads from before: a graph that
    halves with every query instead of a prefix that stays large (a compile costs about its size:
    on a 90-node graph the search's compiles shrink from some 80 nodes each to 45, 22, 11...).
    It assumes the failure is local (a part of the range that holds the culprit fails on its own),
    so its answer counts only when the node it ends on fails compiled alone; otherwise None and the
    prefix search decides."""
    while hi - lo > 1:
        cand, k = _nearest_cut(lo, hi, lambda j, lo=lo: window_state(st, lo, j, kinds))
        if cand is None:
            return None
        if oracle(cand):
            hi = k
        else:
            lo = k
    node = calls[hi - 1]
    node = multi_output_source(node) or node
    alone = alone_state(st, node)
    if alone is not None and oracle(alone):
        queries = oracle.asked - asked0
        log(f"culprit search: the window search ends on node {hi} of {len(calls)}, {node.name} = {op_name(node)}; "
            f"it fails compiled alone ({queries} queries)")
        return alone, Culprit([op_name(node)], "compiled-alone", node.name, queries)
    log(f"culprit search: the window search ends on {node.name}, which does not fail compiled alone; "
        "searching prefixes")
    return None


def _search(st: State, oracle: Oracle, log, calls, lo: int, hi: int, asked0: int, windows: bool = False):
    _, kinds = eager_values(st.gm, st.args, lambda n: False)
    if windows:
        found = _window_search(st, oracle, log, calls, lo, hi, kinds, asked0)
        if found is not None:
            return found
    # the smallest failing prefix: a failing prefix moves the upper end down
    lo, hi, best_prefix = bisect_cuts(lo, hi, lambda j: prefix_state(st, j, kinds), oracle, fails_move="hi")
    queries = oracle.asked - asked0
    node = calls[hi - 1]
    node = multi_output_source(node) or node
    log(f"culprit search: prefix of {hi} of {len(calls)} call nodes fails, {lo} does not "
        f"({queries} queries); candidate {node.name} = {op_name(node)}")
    alone = alone_state(st, node)
    if alone is not None and oracle(alone):
        return alone, Culprit([op_name(node)], "compiled-alone", node.name, queries)
    if best_prefix is None and hi < len(calls):
        return None
    # the smallest failing prefix, the whole graph when its last node is where the failure shows
    # (every shorter prefix passes): reach-back then looks back from there, as from any other end
    return best_prefix or st, Culprit([op_name(node)], "graph", node.name, queries)


def bisect_cuts(lo: int, hi: int, build, oracle: Oracle, *, fails_move: str):
    """Binary search between cut points ``lo`` and ``hi`` (``build(k)``: the candidate at cut k,
    the buildable one nearest the middle): a failing candidate moves the ``fails_move`` end to its
    cut, a passing one the other. (lo, hi, the last failing candidate or None)."""
    best = None
    while hi - lo > 1:
        cand, k = _nearest_cut(lo, hi, build)
        if cand is None:
            break
        fails = oracle(cand)
        best = cand if fails else best
        if fails == (fails_move == "lo"):
            lo = k
        else:
            hi = k
    return lo, hi, best


def reach_back(st: State, oracle: Oracle, end_name: str, log=lambda m: None) -> State | None:
    """How far back a failure that needs its surroundings reaches. ``st`` is the smallest failing
    prefix and ``end_name`` its last node, where the failure shows (the prefix search found it in
    log2 N queries). First only ``end``'s own output and what it depends on (one query); then a
    binary search for the latest cut point: the ancestors of ``end`` from there on, fed the eager
    values of what they read from before, still fail (log2 of the ancestors). The result is the
    connected piece of data flow the failure needs, plus at most the nodes between its first node
    and ``end`` that also feed ``end``; the cleanup makes it 1-minimal. When ``end``'s own output
    does not show the failure (it needs a node that does not feed ``end``: a kernel that fuses
    ``end`` with a sibling), the same cut runs over the whole prefix, its outputs kept. None when
    no cut of it fails (the caller falls back to torch's delta debugging)."""
    end = next((n for n in call_nodes(st.gm) if n.name == end_name), None)
    if end is None:
        return None
    end = multi_output_source(end) or end
    outs = [u for u in end.users if multi_output_source(u) is end] or [end]
    cand = restrict(st, outs)
    own = oracle(cand)
    if not own:
        # it needs a node that does not feed ``end`` (a kernel that fuses ``end`` with a
        # sibling): the prefix cut from the front, what the kept part reads fed eager values
        log(f"culprit search: {end_name}'s own output does not show the failure; cutting the prefix from the front")
        cand = st
    anc = call_nodes(cand.gm)
    # cut before the first (fails) .. before the end node (did not fail alone): the latest cut
    # that still fails; a failing cut moves the lower end up
    _, kinds = eager_values(cand.gm, cand.args, lambda n: False)
    cut = (lambda j: cut_before(cand, anc, j, kinds)) if own else (lambda j: window_state(cand, j, len(anc), kinds))
    good, _, best = bisect_cuts(0, len(anc) - 1, cut, oracle, fails_move="lo")
    if best is None and not own:
        return None  # no cut of the prefix fails: the caller falls back to torch's delta debugging
    if not own:
        best = _first_and_end(best, anc[good].name, end.name, oracle)
    best = best or cand
    log(f"culprit search: the failure reaches back {len(anc) - good} of {len(anc)} call nodes before "
        f"{end_name}")
    return best


def _first_and_end(st: State, first: str, end: str, oracle: Oracle) -> State:
    """A prefix cut from the front keeps every output of what is left; the failure needs the
    first node kept (a later cut passed) and the end node: only their outputs, when that still
    fails (one query, often most of the outputs and the nodes between them gone)."""
    nodes = {n.name: n for n in call_nodes(st.gm)}
    if first not in nodes or end not in nodes:
        return st
    outs = []
    for n in (nodes[first], nodes[end]):
        n = multi_output_source(n) or n
        outs += [u for u in n.users if multi_output_source(u) is n] or [n]
    cand = restrict(st, list(dict.fromkeys(outs)))
    if len(call_nodes(cand.gm)) < len(call_nodes(st.gm)) and oracle(cand):
        return cand
    return st
