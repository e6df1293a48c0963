"""One reduction's state, and the one cached oracle every query goes through.

A :class:`Problem` holds everything the reduction knows: the current graph and inputs (``state``,
a :class:`~bot.minify.worker.graph.State`), the one cached :class:`Oracle` every query goes
through, the hint, the culprit found so far (:class:`Culprit`), the job's flags, each pass's
statistics (:class:`PassStats`), and ``done``: the failing window is found (the culprit compiled
alone, or reach-back's window), so the fallback does not run. The passes that change it, in one
ordered list, and their runner are :mod:`bot.minify.worker.passes`'.

The :class:`Oracle` is the one door to the evaluator during a reduction (``tests/test_minify_shape.py``
checks that nothing else in the worker package asks one): it caches answers by graph and input
fingerprint, so no candidate is ever compiled twice, and it answers "does not fail" for free on a
graph with no computation left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from bot.minify.records import MinifyJob, PassStat
from bot.minify.worker.graph import State, fingerprint
from bot.minify.worker.hints import Hint
from bot.records import GraphBisect
from bot.torch_adapter.minifier import has_compute


def _quiet(msg: str) -> None:
    pass


@dataclass
class Culprit:
    """What :func:`bot.minify.worker.search.find_culprit` found: the culprit nodes' op names and how."""

    ops: list[str]
    method: str                # "compiled-alone" | "graph"
    node: str | None = None    # the culprit node's name in the captured graph
    prefix_queries: int = 0


def agrees_with_bisect(ops: list[str], bisect: GraphBisect | None) -> bool | None:
    """Whether the bisector's answer names one of ``ops`` (e.g. lowerings: relu vs aten.relu.default);
    None when the bisector gave no op-level answer."""
    if bisect is None or not bisect.detail:
        return None
    detail = str(bisect.detail).lower()
    names = {o.split(".")[1] if o.startswith("aten.") and o.count(".") >= 2 else o for o in ops}
    return any(n.lower() in detail for n in names)


@dataclass
class Oracle:
    """The predicate ("fails the same way") with a cache: a candidate is never asked twice. The one
    door to the evaluator during a reduction: every pass asks here, and the one analysis that reads
    compiled values instead of asking (the fp64 divergence hint) compiles through
    :meth:`compiled_outputs`. ``fails`` is the worker's evaluator (``bot.minify.worker.predicate``) or any
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

        from bot.minify.worker.predicate import BudgetExceeded
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
