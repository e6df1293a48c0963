"""The reduction as one ordered list of passes over one problem.

Every step of the reduction is a pass ``pass_(problem) -> None`` that changes one
:class:`~bot.minify.worker.problem.Problem` (:mod:`bot.minify.worker.problem`: the state, the one
cached oracle every query goes through, the hint, the culprit, ``done``), in one list,
:data:`REDUCTION`, with an ``applies`` condition where it is conditional (:func:`when`); :func:`run`
runs the list and records, for every pass that ran, the queries it asked (an analysis compile
included: the hint's), the call nodes it removed and its seconds
(:class:`bot.minify.records.PassStat`), which reach the ``reduce:`` log line and the worker's
``result.json``. The cleanup's passes (``cleanup.CLEANUP_PASSES``, state -> state, repeated until a
round removes nothing) record their own, one record each. What the passes do to a graph is in
:mod:`bot.minify.worker.search` (the culprit search, reach-back), :mod:`bot.minify.worker.cleanup`,
:mod:`bot.minify.worker.hints` and :mod:`bot.minify.worker.graph`; every candidate they build is
asked of ``problem.oracle`` only.

Adding a pass: write ``def my_pass(problem) -> None`` (ask only ``problem.oracle``; decorate it with
``@when(condition)`` when it is conditional) and put it in :data:`REDUCTION` where it belongs, with
the reason next to it. Its statistics appear in the log and the result with no further code.

The order, and why:

0. :func:`search.inline_subgraphs` - control flow and subgraph calls as straight-line code: a ``cond``
   becomes the branch its predicate took on these inputs, an ``invoke_subgraph`` (a nested compile
   region) its subgraph's nodes. Every later pass sees only the nodes of one graph, so a culprit
   inside a branch is otherwise out of reach (the whole ``cond`` is one node). One query, and only
   for a graph that has such a call; kept when the flat graph still fails the pinned way.
1. :func:`search.find_culprit` - a binary search for the culprit node (``ceil(log2 N)`` queries on an
   N-node graph), then one query on that node compiled alone, fed its real eager inputs. When that
   fails, the repro *is* the culprit op plus its inputs and output: nothing else can be removed.
   The search first compiles only the half of the range still in question, fed the eager values
   it reads (:func:`graph.window_state`: compiles that shrink with every query); when the node it ends on
   does not fail alone (a failure that needs its surroundings), it searches over graph prefixes,
   which holds for any failure that shows at a prefix's outputs, then :func:`search.reach_back` finds
   how far back from there it reaches (log N again). Errors and crashes skip the window search:
   their cost is the number of compiles, and a miss would add log N to the two searches (the
   bound is 2*ceil(log2 N) + 2*(final nodes) + 4 queries in all). This runs first because it is
   the only step whose cost grows with log N rather than N; everything after it works on a graph
   that is already small.
2. :func:`cleanup.remove_dead` - drop call nodes whose results nobody uses, including those FX keeps
   because it treats them as impure (``_scaled_dot_product_flash_attention_for_cpu`` with unused
   outputs): they are deleted explicitly, not through ``eliminate_dead_code``. One query for all.
3. :func:`cleanup.drop_outputs` - keep only the outputs the failure needs (each dropped output makes more
   nodes dead, so :func:`cleanup.remove_dead` follows it).
4. :func:`cleanup.bypass_nodes` - remove call nodes by reading one of their inputs in their place
   (same shape, dtype and device), last to first: a node's whole chain of operands back to an
   input in one query, else the longest part of it that keeps the failure (doubling, halving).
   Cutting keeps what a node computed; bypassing drops it, which finds the shorter form when the
   bug needs an earlier node's code but not the nodes between (``argmax(div(abs(x), 3))`` ->
   ``argmax(abs(x))``). Before the cutting: cutting asks one query per node of such a chain and
   removes none of it, while a chain bypassed whole costs one.
5. :func:`cleanup.remove_nodes` - turn single call nodes into inputs (their eager value becomes a
   placeholder) while the failure keeps, last to first, to a fixpoint: the result is 1-minimal
   (no single node can be removed and still fail, by either).
6. :func:`cleanup.drop_unused_inputs` - placeholders nobody reads; no query needed.

Input-size shrinking is not done: the culprit repro keeps the captured shapes (a smaller shape can
take a different kernel path and fail differently).
"""

from __future__ import annotations

import os
import time
from typing import Callable

from bot.minify.worker import cleanup as C
from bot.minify.worker import graph as G
from bot.minify.worker import hints as H
from bot.minify.worker import search as S
from bot.minify.worker.graph import State
from bot.minify.worker.hints import Hint
from bot.minify.worker.problem import Culprit, Problem
from bot.torch_adapter.fxutil import subgraph_call

NO_HINTS_ENV = "MINIFY_BOT_NO_SEARCH_HINTS"        # =1: culprit search without hints (benchmarks compare)


def when(condition: Callable[[Problem], bool]):
    """A step that runs only when ``condition(problem)`` holds (its ``applies``)."""
    def mark(step):
        step.applies = condition
        return step
    return mark


def applies(step, problem: Problem) -> bool:
    return getattr(step, "applies", lambda _p: True)(problem)


def run(problem: Problem, steps) -> Problem:
    """Run ``steps`` in order over ``problem``; each step that applies gets a statistics record (a
    step whose sub-passes recorded their own, the cleanup, gets none of its own)."""
    for step in steps:
        if not applies(step, problem):
            continue
        oracle = problem.oracle
        n0, q0, r0, t0 = len(G.call_nodes(problem.state.gm)), oracle.asked + oracle.analyzed, \
            problem.stats.recorded, time.monotonic()
        step(problem)
        if problem.stats.recorded == r0:
            removed = n0 - len(G.call_nodes(problem.state.gm))
            problem.stats.record(step.__name__, oracle.asked + oracle.analyzed - q0, max(removed, 0),  # inlining adds
                                 time.monotonic() - t0)
    return problem


# ------------------------------------------------------------------------------------------
# the steps, in order
# ------------------------------------------------------------------------------------------


@when(lambda p: any(subgraph_call(n) is not None for n in p.state.gm.graph.nodes))
def inline_subgraphs(problem: Problem) -> None:
    """Subgraph calls (cond, nested compile regions) as straight-line code (search.inline_subgraphs)."""
    problem.state = S.inline_subgraphs(problem.state, problem.oracle, log=problem.log)


@when(lambda p: p.job.culprit_search and p.job.use_hints and os.environ.get(NO_HINTS_ENV) != "1")
def hint(problem: Problem) -> None:
    """What is known before the culprit search (:func:`known_hint`); unverified, so a hint that
    cannot be had only leaves the search without it."""
    from bot.minify.worker.predicate import BudgetExceeded, ProcessPoisoned

    try:
        problem.hint = known_hint(problem)
    except (BudgetExceeded, ProcessPoisoned):
        raise
    except Exception as exc:  # noqa: BLE001 - the search runs without a hint
        problem.log(f"hint failed: {type(exc).__name__}: {exc}")


@when(lambda p: p.job.culprit_search)
def culprit_search(problem: Problem) -> None:
    """The binary search for the culprit (search.find_culprit); a culprit that fails compiled alone
    is the answer. A search that fails for another reason than the budget leaves the fallback to it."""
    from bot.minify.worker.predicate import BudgetExceeded, ProcessPoisoned

    t, oracle = time.time(), problem.oracle
    try:
        found = S.find_culprit(problem.state, oracle, log=problem.log, hint=problem.hint,
                               windows=problem.job.failure_class == "accuracy")
    except (BudgetExceeded, ProcessPoisoned):
        raise
    except Exception as exc:  # noqa: BLE001 - the search is an accelerator; the fx minifier still runs
        problem.log(f"culprit search failed: {type(exc).__name__}: {exc}")
        found = None
    problem.log(f"culprit search: {time.time() - t:.1f} s, {oracle.asked} queries")
    if found is None:
        return
    problem.state, problem.culprit = found
    if problem.culprit.method == "compiled-alone":
        problem.done = True
        problem.checkpoint()   # should the cleanup die


@when(lambda p: p.culprit is not None and not p.done)
def reach_back(problem: Problem) -> None:
    """A culprit of several connected nodes: how far back from where it shows the failure reaches
    (search.reach_back); its window, when it fails, is the answer."""
    window = S.reach_back(problem.state, problem.oracle, problem.culprit.node, log=problem.log)
    if window is not None:
        problem.state, problem.done = window, True
        problem.checkpoint()   # should the cleanup die


@when(lambda p: not p.done)
def fx_minifier(problem: Problem) -> None:
    """Neither the culprit alone nor reach-back's window: torch's fx minifier (delta debugging) on
    the smallest failing prefix (or the whole graph when the search found none)."""
    from bot.torch_adapter import minifier as M

    st, oracle = problem.state, problem.oracle
    if problem.culprit is not None:
        problem.checkpoint()
    g, a = M.fx_minify(st.gm, st.args, lambda g_, a_: oracle(State(g_, list(a_))), problem.checkpoint_to,
                       skip_sanity=True, offload_to_disk=problem.job.offload_to_disk,
                       save_dir=os.path.join(problem.workdir, "offload"))
    problem.state = State(g, list(a))


def cleanup(problem: Problem) -> None:
    """The cleanup passes (cleanup.CLEANUP_PASSES, each recording its statistics) to a 1-minimal
    graph; then the checkpoint and, unless the culprit failed compiled alone, the culprit is the
    remaining graph's ops."""
    n = len(problem.state.gm.graph.nodes)
    problem.state = C.cleanup(problem.state, problem.oracle, problem.stats)
    if problem.done or len(problem.state.gm.graph.nodes) < n:
        problem.checkpoint()
    found = problem.culprit
    if found is None or found.method != "compiled-alone":
        problem.culprit = Culprit(G.culprit_ops(problem.state), "graph", found.node if found else None)


# The order, and why: control flow first (every later step sees one graph's nodes); what is known
# (one query at most) narrows the search; the search, whose cost grows with log N, before anything
# whose cost grows with N; reach-back only for a culprit that needs its surroundings; torch's delta
# debugging only when neither found the failing window; the cleanup makes the result 1-minimal.
REDUCTION: list[Callable[[Problem], None]] = [inline_subgraphs, hint, culprit_search, reach_back, fx_minifier, cleanup]


def known_hint(problem: Problem) -> Hint | None:
    """What is known before the culprit search: for errors, the node the error message names
    (the check's error and the sanity run's); for accuracy failures (in-process only), the first
    intermediate of the compiled graph that diverges from the fp64 run (one compile of the graph
    with every intermediate as an output, through the oracle; counted as a query)."""
    job, oracle, st, log = problem.job, problem.oracle, problem.state, problem.log
    if job.failure_class != "accuracy":
        texts = [(job.original_error.message if job.original_error else None) or "", oracle.last_error]
        found = H.error_hint(st.gm, "\n".join(t for t in texts if t))
        if found is not None:
            log(f"hint: the error names {found.node}")
        return found
    if not oracle.analyzes:
        return None
    return _divergence(problem)


def _divergence(problem: Problem) -> Hint | None:
    from bot.minify.records import Query, emit
    from bot.minify.worker.predicate import BudgetExceeded

    job, oracle, st, log = problem.job, problem.oracle, problem.state, problem.log
    t = time.time()
    try:
        probe, names = H.all_outputs_state(st, integers=True)
        outputs = oracle.compiled_outputs(probe)
        found = H.divergence_hint(st.gm, st.args, dict(zip(names, outputs)), tol=oracle.tolerance)
        if found is not None and found.integers and oracle.compare_integers():
            # the failure shows in integers: the search compares integer and bool outputs (value and
            # dtype) too, so it may end on the integer op; the repro's judge does the same
            job.compare_non_fp = True
            log("hint: the first diverging value is an integer one: integer and bool outputs are compared exactly")
    except BudgetExceeded:
        raise
    except Exception as exc:  # noqa: BLE001 - an analysis that fails only costs its time
        log(f"hint: fp64 divergence analysis failed: {type(exc).__name__}: {exc}")
        return None
    emit(Query(n=oracle.queries, nodes=len(st.gm.graph.nodes), fails=found is not None, analysis=True))
    log(f"hint: fp64 divergence analysis in {time.time() - t:.1f} s: "
        + (f"first divergence within call nodes {found.lo + 1}..{found.hi}" if found else "no intermediate diverges"))
    return found
