"""The minify stage's records between its processes: the job the parent gives the worker
(``job.json``), the worker's result (``result.json``) and its ``@@`` progress events.

Each default is defined once: the job's are filled from the stage's options
(:class:`bot.options.MinifyOptions`) by :func:`bot.minify.pipeline.job_for`, and the worker reads
the job as written; it does not default anything again.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import ClassVar

from bot.records import Culprit, Record
from bot.signature import Signature

CHECK_TOLERANCE = 1e-4   # the check's tolerance when its row names none (bot/check/judge.py's default)


@dataclass
class Judge(Record):
    """How a candidate's result is judged, as the sanity step learned it; the repro carries it
    (its ``config`` lines: repro_tolerance / repro_ignore_non_fp)."""

    failure_class: str
    tolerance: float | None = None
    compare_non_fp: bool | None = None
    config: list[str] = field(default_factory=list)


@dataclass
class MinifyJob(Record):
    """One worker run over one captured graph."""

    repro: str                       # the launcher / repro file to load
    workdir: str
    failure_class: str               # what the candidate must show; the sanity step may learn better
    budget: float                    # seconds for the whole run
    deadline: float | None = None    # set by the parent when it starts the worker; None: no limit
    class_uncertain: bool = False    # the check could not tell the class (exit status, a plain launcher)
    original_error: dict | None = None
    tolerance: float = CHECK_TOLERANCE
    strict_accuracy: bool = False
    compare_non_fp: bool = False     # learned: integer outputs are compared too
    offload_to_disk: bool = False
    isolate: bool = False
    check_config: dict = field(default_factory=dict)
    bisect: bool = True
    bisect_budget: float = 60.0
    query_timeout: float = 300.0
    backend: str = "inductor"
    nodes_before: int | None = None  # a resumed run: the size before the first run
    dynamic: bool = False            # learned on load: the graph has symbolic sizes
    threads: int | None = None       # learned on load (isolated runs): the parent's thread count
    culprit_search: bool = True
    use_hints: bool = True

    def learn(self, judge: Judge) -> None:
        """Take what a sanity step learned (a resumed run reads it from judge.json)."""
        self.failure_class = judge.failure_class
        if judge.compare_non_fp is not None:
            self.compare_non_fp = judge.compare_non_fp

    def write(self, path: str) -> None:
        with open(path, "w") as fh:
            json.dump(self.to_json(), fh)

    @classmethod
    def read(cls, path: str) -> "MinifyJob":
        with open(path) as fh:
            return cls.from_json(json.load(fh))


@dataclass
class WorkerResult(Record):
    """What one minify (worker run, or its resumption) found."""

    status: str | None = None        # minimized | partial | not_reproduced | none
    reason: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    signature: Signature | None = None   # the pinned failure the candidates must show
    judge: Judge | None = None
    passes: dict = field(default_factory=dict)   # per stage and pass: queries asked
    graph: list | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    queries: int = 0
    kind: str | None = None
    backend: str | None = None
    graph_role: str | None = None
    dynamic: bool = False
    config_diff: list | None = None
    config_minimal: list | None = None
    random_inputs_reproduce: bool | None = None
    bisect: dict | None = None
    culprit: Culprit | None = None
    seconds: float = 0.0
    final: str | None = None         # the repro file to package
    isolated: bool = False
    note: str | None = None

    def write(self, path: str) -> None:
        import os

        with open(path + ".tmp", "w") as fh:
            json.dump(self.to_json(), fh, indent=2, default=str)
        os.replace(path + ".tmp", path)

    @classmethod
    def read(cls, path: str) -> "WorkerResult":
        with open(path) as fh:
            return cls.from_json(json.load(fh))


@dataclass
class Localized(Record):
    """Which stage fails first (localize): the stage, each debug backend's verdict, the backend to
    capture with; ``provisional`` when taken from a level-3 capture before any localize run."""

    stage: str | None
    ablation: list = field(default_factory=list)
    first_failing: str | None = None
    provisional: bool = False
    note: str | None = None


# --- events: one ``@@ {json}`` line each on the worker's stdout --------------------------------------


class Event(Record):
    KIND: ClassVar[str] = ""

    def to_json(self) -> dict:
        return {"event": self.KIND, **super().to_json()}


@dataclass
class Loaded(Event):
    KIND: ClassVar[str] = "loaded"
    nodes: int
    kind: str | None = None
    dynamic: bool = False


@dataclass
class Checkpoint(Event):
    KIND: ClassVar[str] = "checkpoint"
    nodes: int
    path: str | None = None


@dataclass
class Pinned(Event):
    """The failure the sanity step pinned."""

    KIND: ClassVar[str] = "signature"
    signature: Signature | None = None


@dataclass
class Final(Event):
    """The final repro, written before the bisector runs: the parent may verify it meanwhile."""

    KIND: ClassVar[str] = "final"
    path: str
    config_diff: list | None = None
    config_minimal: list | None = None
    random_inputs_reproduce: bool | None = None
    bisects: bool = False
    judge: Judge | None = None


@dataclass
class Query(Event):
    KIND: ClassVar[str] = "query"
    n: int
    nodes: int
    fails: bool
    analysis: bool = False
    isolated: bool = False


@dataclass
class Done(Event):
    KIND: ClassVar[str] = "done"
    status: str | None = None


@dataclass
class Probe(Event):
    """Does TORCHDYNAMO_REPRO_AFTER=dynamo work with this backend here?"""

    KIND: ClassVar[str] = "probe"
    broken: bool
    reason: str | None = None


@dataclass
class Stage(Event):
    """localize: one debug backend's verdict (an in-process progress callback)."""

    KIND: ClassVar[str] = "stage"
    backend: str
    status: str | None = None


EVENTS: dict[str, type[Event]] = {cls.KIND: cls for cls in (Loaded, Checkpoint, Pinned, Final, Query, Done, Probe,
                                                              Stage)}


def parse_event(doc: dict) -> Event | None:
    """The typed event of a ``@@`` line's JSON; None for an event this stage does not know."""
    cls = EVENTS.get(doc.get("event")) if isinstance(doc, dict) else None
    if cls is None:
        return None
    try:
        return cls.from_json(doc)
    except ValueError:
        return None


def emit(event: Event) -> None:
    """Write one event for the parent (bot.proc reads ``@@`` lines)."""
    sys.stdout.write("@@ " + json.dumps(event.to_json()) + "\n")
    sys.stdout.flush()
