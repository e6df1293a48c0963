"""Reduction passes over one state: the current fx graph and its inputs.

The reduction runs them as one ordered list of steps over one problem (:mod:`bot.minify.problem`:
``REDUCTION``, its runner and its per-pass statistics); this module holds the graph operations.
Every pass is a small function ``pass_(state, oracle) -> State`` that only ever returns a state
the oracle says still fails the pinned way (or the state it was given). The oracle caches answers
by graph and input fingerprint, so no candidate is ever compiled twice, and it answers "does not
fail" for free on a graph with no computation left.

The order, and why:

0. :func:`inline_subgraphs` - control flow and subgraph calls as straight-line code: a ``cond``
   becomes the branch its predicate took on these inputs, an ``invoke_subgraph`` (a nested compile
   region) its subgraph's nodes. Every later pass sees only the nodes of one graph, so a culprit
   inside a branch is otherwise out of reach (the whole ``cond`` is one node). One query, and only
   for a graph that has such a call; kept when the flat graph still fails the pinned way.
1. :func:`find_culprit` - a binary search for the culprit node (``ceil(log2 N)`` queries on an
   N-node graph), then one query on that node compiled alone, fed its real eager inputs. When that
   fails, the repro *is* the culprit op plus its inputs and output: nothing else can be removed.
   The search first compiles only the half of the range still in question, fed the eager values
   it reads (:func:`window_state`: compiles that shrink with every query); when the node it ends on
   does not fail alone (a failure that needs its surroundings), it searches over graph prefixes,
   which holds for any failure that shows at a prefix's outputs, then :func:`reach_back` finds
   how far back from there it reaches (log N again). Errors and crashes skip the window search:
   their cost is the number of compiles, and a miss would add log N to the two searches (the
   bound is 2*ceil(log2 N) + 2*(final nodes) + 4 queries in all). This runs first because it is
   the only step whose cost grows with log N rather than N; everything after it works on a graph
   that is already small.
2. :func:`remove_dead` - drop call nodes whose results nobody uses, including those FX keeps
   because it treats them as impure (``_scaled_dot_product_flash_attention_for_cpu`` with unused
   outputs): they are deleted explicitly, not through ``eliminate_dead_code``. One query for all.
3. :func:`drop_outputs` - keep only the outputs the failure needs (each dropped output makes more
   nodes dead, so :func:`remove_dead` follows it).
4. :func:`remove_nodes` - turn single call nodes into inputs (their eager value becomes a
   placeholder) while the failure keeps, last to first, to a fixpoint: the result is 1-minimal
   (no single node can be removed and still fail).
5. :func:`drop_unused_inputs` - placeholders nobody reads; no query needed.

Dynamic shapes: a graph traced symbolically (a launcher captured with dynamic shapes) stays
symbolic through every pass: cut-out graphs keep the SymInt inputs whose symbols their tensors'
sizes use, a size read inside the graph is fed from the matching SymInt input rather than frozen
into a constant, and the predicate only counts a candidate that still compiles with symbolic sizes
(see ``Evaluator``), so a bug that only shows with dynamic shapes is never specialized away.

Input-size shrinking is not done: the culprit repro keeps the captured shapes (a smaller shape can
take a different kernel path and fail differently).
"""

from __future__ import annotations

import hashlib
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from bot.minify.records import PassStat
from bot.records import GraphBisect
from bot.torch_adapter.fxutil import inline_subgraph_calls, subgraph_call
from bot.torch_adapter.minifier import CALL_OPS, has_compute, op_label


@dataclass
class State:
    gm: Any                    # torch.fx.GraphModule
    args: list


@dataclass
class Culprit:
    """What :func:`find_culprit` found: the culprit nodes' op names and how."""

    ops: list[str]
    method: str                # "compiled-alone" | "graph"
    node: str | None = None    # the culprit node's name in the captured graph
    prefix_queries: int = 0


@dataclass
class Hint:
    """What is known before searching (see :func:`find_culprit`): a node to try compiled alone
    first (the node a compile error names), and/or the range of call nodes the culprit lies in
    (the first compiled intermediate that diverges from the fp64 run, and the last one before it
    that agrees). Unverified: a wrong hint costs one query, then the plain search runs."""

    source: str                # "error" | "divergence"
    node: str | None = None    # a call node's name
    lo: int = 0                # prefix ``lo`` (call nodes) computes correctly
    hi: int | None = None      # prefix ``hi`` holds the first diverging value
    integers: bool = False     # that value is an integer or bool one: the failure shows in integers


@dataclass
class Oracle:
    """The predicate ("fails the same way") with a cache: a candidate is never asked twice. The one
    door to the evaluator during a reduction: every pass asks here, and the one analysis that reads
    compiled values instead of asking (the fp64 divergence hint) compiles through
    :meth:`compiled_outputs`. ``fails`` is the worker's evaluator (``bot.minify.predicate``) or any
    predicate ``(gm, args) -> bool`` (the fast tests'); what only an evaluator has is read with a
    default."""

    fails: Callable[[Any, list], bool]
    cache: dict = field(default_factory=dict)
    asked: int = 0
    hits: int = 0
    analyzed: int = 0          # compiles for an analysis (:meth:`compiled_outputs`), not in ``asked``

    @property
    def last_error(self) -> str:
        """The error text of the evaluator's last failing run ("" for a plain predicate)."""
        return getattr(self.fails, "last_error", "") or ""

    @property
    def analyzes(self) -> bool:
        """Whether :meth:`compiled_outputs` can run here: an in-process evaluator of an aten graph."""
        return callable(getattr(self.fails, "compile", None)) and getattr(self.fails, "kind", None) == "aot"

    @property
    def tolerance(self) -> float:
        return getattr(self.fails, "tol", 1e-4)

    @property
    def queries(self) -> int:
        """The evaluator's queries so far (the search's and the analysis's; ``asked`` for a plain predicate)."""
        return getattr(self.fails, "queries", self.asked)

    def compare_integers(self) -> bool:
        """From now on integer and bool outputs are compared exactly; False when they already were."""
        if not getattr(self.fails, "ignore_non_fp", False):
            return False
        self.fails.ignore_non_fp = False
        return True

    def compiled_outputs(self, st: State) -> list:
        """``st`` compiled once and run on clones of its inputs (no grad): its flat outputs. Counted
        as one of the evaluator's queries, as a candidate is, but neither cached nor in ``asked`` (the
        search's queries, which the bound counts). Raises ``BudgetExceeded`` past the deadline."""
        import time

        import torch

        from bot.minify.predicate import BudgetExceeded
        from bot.torch_adapter.fxutil import clone_inputs
        from bot.torch_adapter.minifier import flat_outputs

        ev = self.fails
        if ev.deadline and time.time() > ev.deadline:
            raise BudgetExceeded()
        ev.queries += 1
        self.analyzed += 1
        with torch.no_grad():
            return flat_outputs(ev.compile(st.gm, st.args)(clone_inputs(st.args)))

    def __call__(self, st: State) -> bool:
        if not has_compute(st.gm):
            return False
        key = fingerprint(st)
        if key in self.cache:
            self.hits += 1
            return self.cache[key]
        self.asked += 1
        ok = bool(self.fails(st.gm, st.args))
        self.cache[key] = ok
        return ok


# ------------------------------------------------------------------------------------------
# small graph helpers
# ------------------------------------------------------------------------------------------


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


def _is_tensor(v) -> bool:
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
            if _is_tensor(v):
                kinds[n.name] = "tensor"
            elif isinstance(v, (tuple, list)) and all(_is_tensor(x) or x is None for x in v):
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
            if n.name not in kinds and n.op in CALL_OPS and _is_tensor(n.meta.get("val")):
                kinds[n.name] = "tensor"
    return kept, kinds


def _rebuild(gm, nodes_in_order, outputs, *, new_inputs=None, values=None) -> Any:
    """A new GraphModule from ``gm`` with the given call nodes (in order), the given outputs, the
    original placeholders/get_attrs they need, and ``new_inputs`` (node -> placeholder name) that
    replace nodes by inputs. Returns (graph module, [placeholder source]) where each source is
    ("arg", i) for an original input or ("value", node name) for a replaced node."""
    import torch.fx as fx

    new_inputs = new_inputs or {}
    g = fx.Graph()
    env: dict = {}
    sources: list = []
    keep = set(nodes_in_order)
    needed = set()
    for n in nodes_in_order:
        needed.update(n.all_input_nodes)
    needed.update(o for o in outputs)
    needed.update(_symint_placeholders_for(
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
        if n in keep and n not in new_inputs:
            env[n] = g.node_copy(n, lambda x: env[x])
    g.output(tuple(env[o] for o in outputs))
    new = fx.GraphModule(gm, g)
    new.graph.lint()
    return new, sources


def _symint_placeholders_for(gm, vals) -> list:
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


def _args_for(sources, args, values) -> list:
    return [args[i] if kind == "arg" else values[i] for kind, i in sources]


def _multi_output_source(node):
    """The op whose tuple result ``node`` takes one element of (``getitem(op, 0)``); None for any other
    node, a tensor indexed (``x[:, None]``, a dynamo graph's ``getitem``) included: that is an op of its own."""
    if node.op == "call_function" and node.target is operator.getitem and len(node.args) == 2 and \
            getattr(node.args[0], "op", None) in CALL_OPS and isinstance(node.args[1], int) and \
            not _is_tensor(node.args[0].meta.get("val", node.args[0].meta.get("example_value"))):
        return node.args[0]
    return None


# ------------------------------------------------------------------------------------------
# 0. subgraph calls inlined
# ------------------------------------------------------------------------------------------


def inline_subgraphs(st: State, oracle: Oracle, log=lambda m: None) -> State:
    """The graph with its subgraph calls (``cond``, ``invoke_subgraph``, ``tag_activation_checkpoint``,
    ``wrap``) inlined (see the module's order), when it still fails; else the graph as it was."""
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


# ------------------------------------------------------------------------------------------
# 1. the culprit: prefix bisection, then the culprit compiled alone
# ------------------------------------------------------------------------------------------


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
    gm, sources = _rebuild(st.gm, prefix, frontier)
    return State(gm, _args_for(sources, st.args, []))


def find_culprit(st: State, oracle: Oracle, log=lambda m: None, hint: Hint | None = None, windows: bool = True
                 ) -> tuple[State, Culprit] | None:
    """Binary search for the first call node whose compiled prefix fails, then that node alone.

    Prefix ``k`` fails iff it contains the culprit (one bug, the failure shows at the frontier),
    so with ``lo`` (empty, passes) and ``hi`` (the whole graph, fails) the search halves the range
    each query. Returns (the culprit-alone state, Culprit) when the node fails compiled alone, or
    (the smallest failing prefix, Culprit(method="graph")) when it does not; None when no prefix
    short of the whole graph could be cut.

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
    gm, sources = _rebuild(st.gm, window, frontier, new_inputs={n: f"cut_{n.name}" for n in cut}, values=values)
    return State(gm, _args_for(sources, st.args, values))


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
    node = _multi_output_source(node) or node
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
    node = _multi_output_source(node) or node
    log(f"culprit search: prefix of {hi} of {len(calls)} call nodes fails, {lo} does not "
        f"({queries} queries); candidate {node.name} = {op_name(node)}")
    alone = alone_state(st, node)
    if alone is not None and oracle(alone):
        return alone, Culprit([op_name(node)], "compiled-alone", node.name, queries)
    if best_prefix is None:
        return None
    return best_prefix, Culprit([op_name(node)], "graph", node.name, queries)


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
    end = _multi_output_source(end) or end
    outs = [u for u in end.users if _multi_output_source(u) is end] or [end]
    cand = _restrict(st, outs)
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
    cut = (lambda j: _cut_before(cand, anc, j, kinds)) if own else (lambda j: window_state(cand, j, len(anc), kinds))
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
        n = _multi_output_source(n) or n
        outs += [u for u in n.users if _multi_output_source(u) is n] or [n]
    cand = _restrict(st, list(dict.fromkeys(outs)))
    if len(call_nodes(cand.gm)) < len(call_nodes(st.gm)) and oracle(cand):
        return cand
    return st


def _cut_before(st: State, anc: list, k: int, kinds: dict) -> State | None:
    """``anc[k:]`` on its own: what it reads from ``anc[:k]`` becomes inputs fed the eager values
    (None when such a value is not a tensor)."""
    later = set(anc[k:])
    cut = [n for n in anc[:k] if any(u in later for u in n.users)]
    if not cut or any(kinds.get(n.name) != "tensor" for n in cut):
        return None
    values, _ = eager_values(st.gm, st.args, lambda n: n in set(cut))
    if any(n.name not in values for n in cut):
        return None  # after a node that raises in eager: no value to feed
    return _restrict(st, _outputs(st.gm), new_inputs={n: f"cut_{n.name}" for n in cut}, values=values)


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
    for p in _symint_placeholders_for(st.gm, [a.meta.get("val") for a in ins] + [node.meta.get("val")]):
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
        elif _is_tensor(v):
            p = g.placeholder(a.name if a.op == "placeholder" else f"arg{i}_{a.name}")
            if "val" in a.meta:
                p.meta["val"] = a.meta["val"] if a.op == "placeholder" else _input_val(a, v, p.name)
            env[a] = p
            args.append(v)
        else:
            env[a] = v  # a size or a scalar: a constant of the repro
    new = g.node_copy(node, lambda x: env[x])
    out = values.get(node.name, node.meta.get("val"))  # a node that raised in eager: its traced value
    if _is_tensor(out):
        g.output((new,))
    else:
        g.output(tuple(g.call_function(operator.getitem, (new, i)) for i, v in enumerate(out) if _is_tensor(v)))
    gm = fx.GraphModule(st.gm, g)
    gm.graph.lint()
    return State(gm, args)


# ------------------------------------------------------------------------------------------
# what is known before searching
# ------------------------------------------------------------------------------------------

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
    gm, sources = _rebuild(st.gm, call_nodes(st.gm), outs)
    return State(gm, _args_for(sources, st.args, [])), [n.name for n in outs]


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
    return all(not (_is_tensor(v) or hasattr(v, "dtype")) or not v.is_floating_point() for v in ins)


# ------------------------------------------------------------------------------------------
# 2-5. cleanup passes to a 1-minimal graph
# ------------------------------------------------------------------------------------------


def _outputs(gm) -> list:
    out = next(n for n in gm.graph.nodes if n.op == "output")
    val = out.args[0]
    return list(val) if isinstance(val, (tuple, list)) else [val]


def _live(gm, outputs) -> list:
    """Call nodes that some output depends on, in graph order."""
    live, stack = set(), [o for o in outputs if hasattr(o, "op")]
    while stack:
        n = stack.pop()
        if n in live:
            continue
        live.add(n)
        stack.extend(n.all_input_nodes)
    return [n for n in gm.graph.nodes if n.op in CALL_OPS and n in live]


def _restrict(st: State, outputs, new_inputs=None, values=None) -> State:
    """``st`` cut down to what ``outputs`` need; ``new_inputs`` (node -> name) become placeholders
    fed ``values[node.name]``."""
    outputs = [o for o in outputs if hasattr(o, "op")]
    cut = new_inputs or {}
    gm, sources = _rebuild(st.gm, _live_cut(st.gm, outputs, cut), outputs, new_inputs=cut, values=values)
    return State(gm, [st.args[i] if kind == "arg" else values[i] for kind, i in sources])


def _live_cut(gm, outputs, cut) -> list:
    live, stack = set(), list(outputs)
    while stack:
        n = stack.pop()
        if n in live:
            continue
        live.add(n)
        if n not in cut:
            stack.extend(n.all_input_nodes)
    return [n for n in gm.graph.nodes if n.op in CALL_OPS and n in live and n not in cut]


def remove_dead(st: State, oracle: Oracle) -> State:
    """Drop every call node no output depends on, impure-looking ones included (one query)."""
    live = _live(st.gm, _outputs(st.gm))
    if len(live) == len(call_nodes(st.gm)):
        return st
    cand = _restrict(st, _outputs(st.gm))
    return cand if oracle(cand) else st


def drop_outputs(st: State, oracle: Oracle) -> State:
    """Keep only the outputs the failure needs: try each output alone first (a single failing
    output is the common case), then drop outputs one at a time."""
    outs = _outputs(st.gm)
    if len(outs) <= 1:
        return st
    for o in outs:
        cand = _restrict(st, [o])
        if oracle(cand):
            return cand
    cur, best = list(outs), st
    for o in list(outs):
        if len(cur) == 1:
            break
        trial = [x for x in cur if x is not o]
        cand = _restrict(st, trial)   # always cut from ``st``: ``trial`` holds its output nodes
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
            if n is None or _multi_output_source(n) is not None:
                continue  # gone with an earlier removal; a getitem goes with its op
            cand = _drop_node(st, n)
            if cand is not None and oracle(cand):
                st, changed = cand, True
                continue
            values, kinds = eager_values(st.gm, st.args, lambda m, n=n: m is n)
            if kinds.get(n.name) != "tensor" or n.name not in values:
                continue
            cand = _restrict(st, _outputs(st.gm), new_inputs={n: f"in_{n.name}"}, values={n.name: values[n.name]})
            if oracle(cand):
                st, changed = cand, True
    return st


def _drop_node(st: State, n) -> State | None:
    outs = _outputs(st.gm)
    if n not in outs or any(u.op != "output" for u in n.users):
        return None
    repl = [a for a in n.all_input_nodes if a.op in CALL_OPS or a.op == "placeholder"]
    new_outs = list(dict.fromkeys([o for o in outs if o is not n] + repl))
    if not new_outs:
        return None
    return _restrict(st, new_outs)


def drop_unused_inputs(st: State) -> State:
    """Placeholders nobody reads (no query: an unread input cannot change what is computed)."""
    g = st.gm.graph
    phs = [n for n in g.nodes if n.op == "placeholder"]
    sizes = set(_symint_placeholders_for(st.gm, [n.meta.get("val") for n in phs if n.users]))
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


# Passes 2-5, in the order the module docstring explains; :func:`cleanup` runs the list until a
# round changes nothing (a later pass can open a chance for an earlier one: a cut node can leave
# an output dead).
CLEANUP_PASSES: tuple[Callable[[State, Oracle], State], ...] = (
    remove_dead, drop_outputs, remove_dead, remove_nodes, _drop_unused_inputs)


@dataclass
class PassStats:
    """What each pass did over a reduction, by name in the order they first ran: queries it asked,
    call nodes it removed, seconds it took (summed over the cleanup's rounds), and the rounds."""

    queries: dict = field(default_factory=dict)
    removed: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    rounds: int = 0
    recorded: int = 0          # records so far: a pass whose sub-passes recorded their own gets none

    def record(self, name: str, queries: int, removed: int, seconds: float = 0.0) -> None:
        self.queries[name] = self.queries.get(name, 0) + queries
        self.removed[name] = self.removed.get(name, 0) + removed
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.recorded += 1

    def records(self) -> list[PassStat]:
        """The worker result's ``passes``: one typed record per pass."""
        return [PassStat(name, self.queries[name], self.removed.get(name, 0), round(self.seconds.get(name, 0.0), 2))
                for name in self.queries]

    def lines(self) -> list[str]:
        return [f"{s.name}: {s.queries} queries, {s.removed} nodes removed, {s.seconds:.1f} s" for s in self.records()]


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


def culprit_ops(st: State) -> list[str]:
    """The op names of a reduced graph's computing nodes (getitems fold into their op), sorted."""
    return sorted({op_name(n) for n in call_nodes(st.gm) if _multi_output_source(n) is None})


def agrees_with_bisect(ops: list[str], bisect: GraphBisect | None) -> bool | None:
    """Whether the bisector's answer names one of ``ops`` (e.g. lowerings: relu vs aten.relu.default);
    None when the bisector gave no op-level answer."""
    if bisect is None or not bisect.detail:
        return None
    detail = str(bisect.detail).lower()
    names = {o.split(".")[1] if o.startswith("aten.") and o.count(".") >= 2 else o for o in ops}
    return any(n.lower() in detail for n in names)
