"""The reduction as one ordered list of passes over one problem.

A :class:`Problem` holds everything the reduction knows: the current graph and inputs (``state``),
the one cached :class:`~bot.minify.passes.Oracle` every query goes through, the hint, the culprit
found so far, the job's flags, and ``done``: the failing window is found (the culprit compiled
alone, or reach-back's window), so the fallback does not run. Every step is a function
``step(problem) -> None`` that mutates it, in one list, :data:`REDUCTION`, with an ``applies``
condition where it is conditional (:func:`when`); :func:`run` runs the list and records, for every
step that ran, the queries it asked (an analysis compile included: the hint's), the call nodes it
removed and its seconds
(:class:`bot.minify.records.PassStat`), which reach the ``reduce:`` log line and the worker's
``result.json``. The cleanup's passes (``passes.CLEANUP_PASSES``, state -> state, repeated until a
round removes nothing) record their own, one record each.

Adding a pass: write ``def my_pass(problem) -> None`` (ask only ``problem.oracle``; decorate it with
``@when(condition)`` when it is conditional) and put it in :data:`REDUCTION` where it belongs, with
the reason next to it. Its statistics appear in the log and the result with no further code.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from bot.minify import passes as P
from bot.minify.passes import Culprit, Hint, Oracle, PassStats, State
from bot.minify.records import MinifyJob

NO_HINTS_ENV = "MINIFY_BOT_NO_SEARCH_HINTS"        # =1: culprit search without hints (benchmarks compare)


def _quiet(msg: str) -> None:
    pass


@dataclass
class Problem:
    """One reduction: what the passes read and change (see the module's docstring)."""

    state: State
    oracle: Oracle
    job: MinifyJob                             # the flags the passes read (culprit_search, use_hints, ...)
    workdir: str = "."
    checkpoint_to: Callable[[Any, list], None] = lambda gm, args: None   # writes a checkpoint repro
    log: Callable[[str], None] = _quiet
    hint: Hint | None = None
    culprit: Culprit | None = None
    done: bool = False                         # the failing window is found: no fallback needed
    stats: PassStats = field(default_factory=PassStats)

    def checkpoint(self) -> None:
        """The current state as a checkpoint (the smallest is kept should a later pass die)."""
        self.checkpoint_to(self.state.gm, self.state.args)


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
        n0, q0, r0, t0 = len(P.call_nodes(problem.state.gm)), oracle.asked + oracle.analyzed, \
            problem.stats.recorded, time.monotonic()
        step(problem)
        if problem.stats.recorded == r0:
            removed = n0 - len(P.call_nodes(problem.state.gm))
            problem.stats.record(step.__name__, oracle.asked + oracle.analyzed - q0, max(removed, 0),  # inlining adds
                                 time.monotonic() - t0)
    return problem


# ------------------------------------------------------------------------------------------
# the steps, in order
# ------------------------------------------------------------------------------------------


@when(lambda p: any(P.subgraph_call(n) is not None for n in p.state.gm.graph.nodes))
def inline_subgraphs(problem: Problem) -> None:
    """Subgraph calls (cond, nested compile regions) as straight-line code (passes.inline_subgraphs)."""
    problem.state = P.inline_subgraphs(problem.state, problem.oracle, log=problem.log)


@when(lambda p: p.job.culprit_search and p.job.use_hints and os.environ.get(NO_HINTS_ENV) != "1")
def hint(problem: Problem) -> None:
    """What is known before the culprit search (:func:`known_hint`); unverified, so a hint that
    cannot be had only leaves the search without it."""
    from bot.minify.predicate import BudgetExceeded, ProcessPoisoned

    try:
        problem.hint = known_hint(problem)
    except (BudgetExceeded, ProcessPoisoned):
        raise
    except Exception as exc:  # noqa: BLE001 - the search runs without a hint
        problem.log(f"hint failed: {type(exc).__name__}: {exc}")


@when(lambda p: p.job.culprit_search)
def culprit_search(problem: Problem) -> None:
    """The binary search for the culprit (passes.find_culprit); a culprit that fails compiled alone
    is the answer. A search that fails for another reason than the budget leaves the fallback to it."""
    from bot.minify.predicate import BudgetExceeded, ProcessPoisoned

    t, oracle = time.time(), problem.oracle
    try:
        found = P.find_culprit(problem.state, oracle, log=problem.log, hint=problem.hint,
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
    (passes.reach_back); its window, when it fails, is the answer."""
    window = P.reach_back(problem.state, problem.oracle, problem.culprit.node, log=problem.log)
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
    """The cleanup passes (passes.CLEANUP_PASSES, each recording its statistics) to a 1-minimal
    graph; then the checkpoint and, unless the culprit failed compiled alone, the culprit is the
    remaining graph's ops."""
    n = len(problem.state.gm.graph.nodes)
    problem.state = P.cleanup(problem.state, problem.oracle, problem.stats)
    if problem.done or len(problem.state.gm.graph.nodes) < n:
        problem.checkpoint()
    found = problem.culprit
    if found is None or found.method != "compiled-alone":
        problem.culprit = Culprit(P.culprit_ops(problem.state), "graph", found.node if found else None)


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
        found = P.error_hint(st.gm, "\n".join(t for t in texts if t))
        if found is not None:
            log(f"hint: the error names {found.node}")
        return found
    if not oracle.analyzes:
        return None
    return _divergence(problem)


def _divergence(problem: Problem) -> Hint | None:
    from bot.minify.predicate import BudgetExceeded
    from bot.minify.records import Query, emit

    job, oracle, st, log = problem.job, problem.oracle, problem.state, problem.log
    t = time.time()
    try:
        probe, names = P.all_outputs_state(st, integers=True)
        outputs = oracle.compiled_outputs(probe)
        found = P.divergence_hint(st.gm, st.args, dict(zip(names, outputs)), tol=oracle.tolerance)
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
