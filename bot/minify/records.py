"""The minify stage's records between its processes: the job the parent gives the worker
(``job.json``), the worker's result (``result.json``) and its ``@@`` progress events.

Each default is defined once: the job's are filled from the stage's options
(:class:`bot.options.MinifyOptions`) by :func:`bot.minify.pipeline.job_for`, and the worker reads
the job as written; it does not default anything again.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

from bot import records
from bot.records import (
    CheckError,
    ConfigEntry,
    ConfigSetting,
    Culprit,
    GraphBisect,
    GraphOp,
    Readout,
    Record,
    StageVerdict,
)
from bot.signature import Signature

CHECK_TOLERANCE = 1e-4   # the check's tolerance when its row names none (bot/check/judge.py's default)


EXIT_POISONED = 75   # the in-process worker left: a run made its device unusable (predicate.ProcessPoisoned)

@dataclass
class Judge(Record):
    """How a candidate's result is judged, as the sanity step learned it; the repro carries it
    (its ``config`` lines: repro_tolerance / repro_ignore_non_fp)."""

    failure_class: str
    tolerance: float | None = None
    compare_non_fp: bool | None = None
    config: list[ConfigSetting] = field(default_factory=list)


class _File(Record):
    """A record the parent and the worker hand over as a JSON file of the worker's directory."""

    def write(self, path: str) -> None:
        """Write the whole file or none of it: a reader never sees half a record."""
        with open(path + ".tmp", "w") as fh:
            json.dump(self.to_json(), fh, indent=2, default=str)
        os.replace(path + ".tmp", path)

    @classmethod
    def read(cls, path: str):
        with open(path) as fh:
            return cls.from_json(json.load(fh))


@dataclass
class QueryJob(_File):
    """One candidate judged in a fresh interpreter (``python -m bot.minify.worker query QDIR``):
    its kind, and the config step's question ([every key of the diff, the subset to set]) if any."""

    kind: str = "aot"
    config: list | None = None


@dataclass
class QueryAnswer(_File):
    """What that interpreter found: the candidate's failure signature (None: it does not fail)."""

    signature: dict | None = None


@dataclass
class MinifyJob(_File):
    """One worker run over one captured graph (``job.json``)."""

    repro: str                       # the launcher / repro file to load
    workdir: str
    failure_class: str               # what the candidate must show; the sanity step may learn better
    budget: float                    # seconds for the whole run
    deadline: float | None = None    # set by the parent when it starts the worker; None: no limit
    class_uncertain: bool = False    # the check could not tell the class (exit status, a plain launcher)
    original_error: CheckError | None = None
    tolerance: float = CHECK_TOLERANCE
    strict_accuracy: bool = False
    compare_non_fp: bool = False     # learned: integer outputs are compared too
    offload_to_disk: bool = False
    isolate: bool = False
    check_config: dict = field(default_factory=dict)
    compile_options: dict = field(default_factory=dict)   # the program's torch.compile(mode=, options=) settings
    numerics: dict = field(default_factory=dict)   # the program's numerics flags (bot.torch_adapter.numerics)
    training: bool = False           # the check ran a backward: a dynamo-level graph is judged by a
                                     # training step (outputs and gradients, bot.torch_adapter.minifier.train_step)
    bisect: bool = True
    bisect_budget: float = 60.0
    query_timeout: float = 300.0
    backend: str = "inductor"
    nodes_before: int | None = None  # a resumed run: the size before the first run
    dynamic: bool = False            # learned on load: the graph has symbolic sizes
    frozen_inputs: list | None = None   # learned on load (training): the graph's floating inputs
                                     # that did not require grad in the program (buffers, data): never differentiated
    threads: int | None = None       # learned on load (isolated runs): the parent's thread count
    culprit_search: bool = True
    use_hints: bool = True

    def learn(self, judge: Judge) -> None:
        """Take what a sanity step learned (a resumed run reads it from judge.json)."""
        self.failure_class = judge.failure_class
        if judge.compare_non_fp is not None:
            self.compare_non_fp = judge.compare_non_fp


@dataclass
class PassStat(Record):
    """What one reduction pass did (``bot.minify.worker.passes.REDUCTION``; the cleanup's passes summed
    over its rounds): the queries it asked, the call nodes it removed (0 for one that adds nodes, as
    inlining a subgraph does), the seconds it took."""

    name: str
    queries: int = 0
    removed: int = 0
    seconds: float = 0.0


@dataclass
class WorkerResult(_File):
    """What one minify (worker run, or its resumption) found (``result.json``)."""

    # how it ended
    status: str | None = None        # minimized | partial | not_reproduced | none | error (internal)
    reason: str | None = None
    final: str | None = None         # the repro file to package
    note: str | None = None
    # the captured graph, as loaded
    kind: str | None = None
    backend: str | None = None
    graph_role: str | None = None
    dynamic: bool = False            # the reduced graph and its repro have symbolic sizes
    static_first: bool = False       # captured with dynamic shapes, failing with the captured sizes: made static
    nodes_before: int | None = None
    # the failure pinned, and the graph reduced to it
    signature: Signature | None = None   # the pinned failure the candidates must show
    judge: Judge | None = None
    graph: list[GraphOp] | None = None
    nodes_after: int | None = None
    queries: int = 0
    passes: list[PassStat] = field(default_factory=list)   # per reduction pass, in the order they ran
    # what the final repro needs, and where in the graph it fails
    config_diff: list[ConfigEntry] | None = None
    config_minimal: list[ConfigEntry] | None = None
    random_inputs_reproduce: bool | None = None
    bisect: GraphBisect | None = None
    culprit: Culprit | None = None
    readout: Readout | None = None   # accuracy failures: the final graph's numerics per op (bot.minify.worker.readout)
    # how it ran
    isolated: bool = False           # every query in a fresh process
    timings: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class Localized(Record):
    """Which stage fails first (localize): the stage, each debug backend's verdict, the backend to
    capture with; ``provisional`` when taken from a level-3 capture before any localize run."""

    stage: str | None
    ablation: list[StageVerdict] = field(default_factory=list)
    first_failing: str | None = None
    provisional: bool = False
    note: str | None = None


# --- events: one ``@@ {json}`` line each on the worker's stdout --------------------------------------


class Event(records.Event):
    """One ``@@ {json}`` line of the worker's stdout (:func:`emit`; :func:`parse_event` reads it)."""


class Loaded(Event, kind="loaded"):
    nodes: int
    kind: str | None = None
    dynamic: bool = False


class Checkpoint(Event, kind="checkpoint"):
    nodes: int
    path: str | None = None


class Pinned(Event, kind="signature"):
    """The failure the sanity step pinned."""

    signature: Signature | None = None


class Final(Event, kind="final"):
    """The final repro, written before the bisector runs: the parent may verify it meanwhile."""

    path: str
    config_diff: list[ConfigEntry] | None = None
    config_minimal: list[ConfigEntry] | None = None
    random_inputs_reproduce: bool | None = None
    bisects: bool = False
    judge: Judge | None = None


class Query(Event, kind="query"):
    n: int
    nodes: int
    fails: bool
    analysis: bool = False
    isolated: bool = False


class Done(Event, kind="done"):
    status: str | None = None


class Probe(Event, kind="probe"):
    """Does TORCHDYNAMO_REPRO_AFTER=dynamo work with this backend here?"""

    broken: bool
    reason: str | None = None


class Stage(Event, kind="stage"):
    """localize: one debug backend's verdict (an in-process progress callback)."""

    backend: str
    status: str | None = None


parse_event = Event.parse   # the typed event of a ``@@`` line's JSON; None for one this stage does not know


def emit(event: Event) -> None:
    """Write one event for the parent (bot.proc reads ``@@`` lines)."""
    sys.stdout.write("@@ " + json.dumps(event.to_json()) + "\n")
    sys.stdout.flush()
