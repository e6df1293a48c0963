"""Typed records: what crosses a process or stage boundary, as dataclasses with ``to_json`` /
``from_json``, used on both sides of the boundary (never a bare dict).

``Record`` is the one way a record becomes JSON and comes back: a field is written under its name
(or its ``key`` metadata, e.g. ``class``); a field whose type is a record (or a list of records, or
anything else with a ``from_json`` classmethod, like :class:`bot.signature.Signature`) is read back
as that type. A field missing from the JSON takes its default; a key the record does not know is
dropped. Reading is for this machine's own files; what comes from an artifact is checked by
:mod:`bot.rundir`'s bounded readers first.

The failure record's parts are defined here (the record itself, ``failures/<id>/failure.json``, is
:class:`bot.failure.FailureRecord`: its signature is a :class:`bot.signature.Signature`, which reads
check rows). The minify stage's own records (the job, the worker's result and events) are in
:mod:`bot.minify.records`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

FAILURE_SCHEMA = "minify-action/failure/v1"


class RecordError(ValueError):
    """A record's JSON is not what its type says."""


def key(name: str) -> dict:
    """Field metadata: the JSON key of a field whose name cannot be the key (``class``)."""
    return {"key": name}


def json_value(value: Any) -> Any:
    """The JSON of a value: a record (or anything with ``to_json``) as its JSON, lists and dicts
    item by item, anything else as it is."""
    if isinstance(value, Record) or hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return value


def _loader(tp: Any):
    """How a JSON value becomes a value of type ``tp``: a record type (optionally in ``X | None``,
    ``list[X]`` or ``dict[str, X]``) is read with its ``from_json``; anything else is taken as it is."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) == 1:
            load = _loader(inner[0])
            return lambda v: None if v is None else load(v)
        return lambda v: v
    if origin is list:
        (arg,) = typing.get_args(tp) or (Any,)
        load = _loader(arg)
        return lambda v: [load(x) for x in v] if isinstance(v, list) else v
    if origin is dict:
        _, arg = typing.get_args(tp) or (str, Any)
        load = _loader(arg)
        return lambda v: {k: load(x) for k, x in v.items()} if isinstance(v, dict) else v
    if isinstance(tp, type) and hasattr(tp, "from_json"):
        return tp.from_json
    return lambda v: v


class Record:
    """Base of every typed record (a dataclass)."""

    @classmethod
    def _fields(cls) -> list[tuple[str, str, Any]]:
        cached = cls.__dict__.get("_field_cache")
        if cached is None:
            hints = typing.get_type_hints(cls)
            cached = [(f.name, f.metadata.get("key", f.name), _loader(hints[f.name])) for f in fields(cls)]
            cls._field_cache = cached
        return cached

    def to_json(self) -> dict:
        return {k: json_value(getattr(self, name)) for name, k, _ in self._fields()}

    @classmethod
    def from_json(cls, doc: Any):
        if isinstance(doc, cls):
            return doc
        if not isinstance(doc, dict):
            raise RecordError(f"{cls.__name__}: expected an object, got {type(doc).__name__}")
        values = {name: load(doc[k]) for name, k, load in cls._fields() if k in doc}
        try:
            return cls(**values)
        except TypeError as exc:  # a required field is missing
            raise RecordError(f"{cls.__name__}: {exc}") from None

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


class Event(Record):
    """A record tagged with its kind, written as ``{"event": KIND, ...its fields}``: the minify
    worker's ``@@`` lines (:mod:`bot.minify.records`) and the environment hook's state-file lines
    (:mod:`bot.torch_adapter.hook`). A direct subclass of Event is a family of events; each of its
    events is a subclass that names its kind and declares its fields, and is made a dataclass here::

        class Compiling(HookEvent, kind="compile"):
            graph: int

    The family's :meth:`parse` reads any of its kinds back. ``STRICT`` (a family written by
    untrusted code): a value of the wrong type is refused (:class:`RecordError`), not taken as it is."""

    KIND: ClassVar[str] = ""
    STRICT: ClassVar[bool] = False
    _kinds: ClassVar[dict[str, type]]   # the family's events by kind

    def __init_subclass__(cls, kind: str = "", **kwargs):
        super().__init_subclass__(**kwargs)
        if Event in cls.__bases__:
            cls._kinds = {}
            return
        if kind:
            if cls._kinds.setdefault(kind, cls) is not cls:
                raise TypeError(f"{cls.__name__}: the event kind {kind!r} is taken")
            cls.KIND = kind
        dataclass(cls)

    def to_json(self) -> dict:
        return {"event": self.KIND, **super().to_json()}

    @classmethod
    def parse(cls, doc: Any) -> "Event | None":
        """The typed event of ``doc`` (parsed JSON); None for a kind this family does not know or
        a malformed event."""
        kind = doc.get("event") if isinstance(doc, dict) else None
        sub = cls._kinds.get(kind) if isinstance(kind, str) else None
        if sub is None:
            return None
        try:
            return sub.from_json(doc)
        except ValueError:
            return None

    @classmethod
    def from_json(cls, doc: Any):
        if cls.STRICT and isinstance(doc, dict):
            hints = cls.__dict__.get("_hint_cache") or typing.get_type_hints(cls)
            cls._hint_cache = hints
            for name, k, _ in cls._fields():
                if k in doc and not Event._fits(doc[k], hints[name]):
                    raise RecordError(f"{cls.__name__}: {k} is not {hints[name]}")
        return super().from_json(doc)

    @staticmethod
    def _fits(value: Any, hint: Any) -> bool:
        """Is ``value`` (parsed JSON) of the type ``hint`` (int, str, bool, None, unions, lists and
        string-keyed dicts of them)?"""
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            return any(Event._fits(value, h) for h in typing.get_args(hint))
        if origin is list:
            return isinstance(value, list) and all(Event._fits(v, typing.get_args(hint)[0]) for v in value)
        if origin is dict:
            _, arg = typing.get_args(hint)
            return isinstance(value, dict) and all(isinstance(k, str) and Event._fits(v, arg)
                                                   for k, v in value.items())
        if hint is int:
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, hint)   # str, NoneType


# --- the failure record (failures/<id>/failure.json) ----------------------------------------------


@dataclass
class GraphOp(Record):
    """One call node of the minimized graph (bot.torch_adapter.minifier.graph_ops): its op, and
    its inputs' dtypes and tensor ranks."""

    op: str
    dtypes: list[str | None] = field(default_factory=list)
    ranks: list[int | None] = field(default_factory=list)


@dataclass
class StageVerdict(Record):
    """localize: how the check fared with one debug backend (failure.json's ``ablation``)."""

    backend: str | None
    status: str | None


@dataclass
class Culprit(Record):
    """The op(s) that fail compiled alone (or the reduced graph's ops) and the bisector's answer."""

    ops: list[str] = field(default_factory=list)
    bisect: str | None = None
    method: str | None = None


@dataclass
class ReadoutNode(Record):
    """One op of the minimized graph in the numerics readout: its value compiled and eager, each
    against the graph run in float64 (max abs error, RMSE); ``diverges``: compiled fails the
    check's rule (torch's ``same``) where eager passes."""

    op: str
    name: str | None = None           # the FX node's name (the op may occur twice)
    shape: list[int] = field(default_factory=list)
    dtype: str | None = None
    max_abs_compiled: float | None = None   # None: no fp64 value, or not finite
    rmse_compiled: float | None = None
    max_abs_eager: float | None = None
    rmse_eager: float | None = None
    diverges: bool = False
    compiled_dtype: str | None = None       # set when the compiled value's dtype is not eager's
    compiled_shape: list[int] | None = None  # set when the compiled value's shape is not eager's
    # elements where eager and compiled are both zero with opposite signs (-0.0 vs +0.0): equal as
    # numbers, so no error shows them, but a later atan2, division or copysign does; None: none
    signed_zeros: int | None = None


@dataclass
class Readout(Record):
    """failure.json's ``readout`` (accuracy failures): which op of the minimized graph first
    diverges from the fp64 reference, by how much, and whether the compiled graph is deterministic
    (bot/minify/worker/readout.py). ``nodes`` holds at most 30 rows; empty with a ``note`` when it could
    not be made."""

    nodes: list[ReadoutNode] = field(default_factory=list)
    first_diverging: str | None = None
    deterministic: bool | None = None        # None: not checked
    max_nondeterminism: float | None = None  # the largest difference of two runs, when not deterministic
    note: str | None = None
    seconds: float = 0.0


@dataclass
class Verification(Record):
    """Fresh-process runs of the packaged repro and how many failed the same way."""

    runs: int
    failed_same_way: int
    random_inputs_reproduce: bool
    # set when only the plain repro failed the same way (its runs are the counts above): how many
    # of torch's launcher-format repro's runs did (its own judge missed the failure)
    launcher_failed_same_way: int | None = None


@dataclass
class Capture(Record):
    """How the failing graph was captured (repro-after point and level, or given by the user)."""

    repro_after: str | None = None
    repro_level: int | None = None
    method: str | None = None
    note: str | None = None
    graph: int | None = None       # which of a program's compiled graphs (1-based)
    graphs: int | None = None      # how many the capture run compiled
    role: str | None = None        # forward / backward / inference
    dynamic: bool | None = None

    def add_note(self, text: str | None) -> None:
        self.note = "; ".join(x for x in (self.note, text) if x) or None


@dataclass
class Reused(Record):
    """A known bug's repro verified again instead of minifying (bot/known.py)."""

    issue: int
    verify_seconds: float
    saved_seconds: float | None = None


@dataclass
class PlainRepro(Record):
    """``repro_plain.py``: the minimized graph as a plain function of aten ops, its inputs (inline
    when small) and eager vs ``torch.compile`` judged like the check, public torch APIs only;
    verified in fresh processes like the launcher-format repro."""

    path: str | None = None              # None: not written (``reason`` says why)
    reason: str | None = None
    inputs_inline: bool = False          # the inputs are in the file (else ``inputs_file``)
    inputs_random: bool = False          # ... the large ones made by seeded random calls, not carried
    inputs_file: str | None = None       # relative to the failure's directory
    inputs_sha256: str | None = None     # sha256 of the inputs' storages (raw bytes, in order of first use)
    inputs_bytes: int = 0                # the inputs' encoded (base64) size
    runs: int = 0                        # fresh-process runs ...
    failed_same_way: int = 0             # ... and how many failed the way the launcher-format repro does
    short_path: str | None = None        # repro_short.py: the same graph as a person writes it (None: not written)
    short_runs: int = 0                  # its fresh-process runs ...
    short_failed_same_way: int = 0       # ... and how many failed the same way

    @property
    def short_reproduces(self) -> bool:
        return bool(self.short_path) and self.short_runs > 0 and self.short_failed_same_way == self.short_runs

    @property
    def reproduces(self) -> bool:
        return bool(self.path) and self.failed_same_way > 0


@dataclass
class Repro(Record):
    """The minimized repro: status, where its files are, its numbers."""

    status: str = "none"   # minimized | partial | not_reproduced | none
    reason: str | None = None
    path: str | None = None
    standalone_path: str | None = None
    inputs_dir: str | None = None
    log: str | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    queries: int = 0
    seconds: float = 0.0
    graph: list[GraphOp] | None = None
    verification: Verification | None = None
    capture: Capture | None = None
    timings: dict[str, float] = field(default_factory=dict)
    reused: Reused | None = None
    plain: PlainRepro | None = None      # repro_plain.py, when minify wrote one

    def add_time(self, name: str, seconds: float) -> None:
        self.timings[name] = round(self.timings.get(name, 0) + seconds, 2)


@dataclass
class Trace(Record):
    """failure.json's ``trace``: the verified repro run once more with torch's structured trace on
    and the compiled-graph caches off (bot/minify/trace.py). Paths are relative to the failure's
    directory; None where that part is missing (``note`` says why)."""

    repro: str | None = None            # the repro that ran (repro_plain.py or repro.py)
    exit_code: int | None = None        # its exit status (-N: signal N; None: timed out)
    trace_dir: str | None = None        # "trace": torch's trace files (.log, or .log.gz when large)
    trace_bytes: int = 0                # what trace_dir holds
    trace_cut: bool = False             # the trace was cut at the size bound
    tlparse: str | None = None          # "tlparse.zip": tlparse's HTML report (None: no tlparse, or it failed)
    output_code: str | None = None      # "output_code.py": the modules inductor generated
    output_code_chars: int = 0          # their full length (the file is cut at a bound)
    output_code_modules: int = 0
    seconds: float = 0.0
    note: str | None = None


@dataclass
class ConfigSetting(Record):
    """One torch config setting a repro carries: its key (``inductor.cpp.x``) and value."""

    key: str
    value: Any = None


@dataclass
class ConfigEntry(Record):
    """A config setting that differs from torch's default (bot.minify.worker.configdiff.true_diff)."""

    key: str
    default: Any = None
    value: Any = None


@dataclass
class ConfigDiff(Record):
    """The non-default settings the graph was minimized under, and the minimal subset."""

    diff: list[ConfigEntry] = field(default_factory=list)
    minimal: list[ConfigEntry] | None = None


@dataclass
class KnownRecord(Record):
    """The failure record fields an open issue's verified repro restores when minify reuses it
    (known.json's ``record``, from the issue's state block; bot/known.py)."""

    failure_class: str | None = field(default=None, metadata=key("class"))
    stage: str | None = None
    culprit: Culprit | None = None
    config: ConfigDiff | None = None
    status: str | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    capture: Capture | None = None
    torch: str | None = None            # the version word of the build that minified it
    check_config: dict | None = None    # the check's own settings then


# --- the check row (one entry of results.json's "checks") -------------------------------------------


class SparseRecord(Record):
    """A record whose None fields are left out of its JSON (a row only names what its check
    found), but for the fields in ``WRITTEN``, which every row has (null when unknown); a field
    whose JSON key starts with ``_`` is this process's own and never written."""

    WRITTEN: ClassVar[frozenset[str]] = frozenset()

    def written(self) -> frozenset[str]:
        """The keys this record writes even when null."""
        return self.WRITTEN

    def to_json(self) -> dict:
        always = self.written()
        return {k: v for k, v in super().to_json().items()
                if not k.startswith("_") and (v is not None or k in always)}


@dataclass
class Spec(SparseRecord):
    """Where a check's model comes from: enough to build or rerun it (results.json's ``spec``).
    ``source`` names the source that answers for it (:func:`bot.suites.source_of`); each source
    sets its own fields. The field order is the order they are written in."""

    source: str | None = None
    file: str | None = None            # yaml: the model file
    pytorch: str | None = None         # harness: the pytorch checkout
    suite: str | None = None           # harness: torchbench / huggingface / timm_models
    command: str | None = None         # command(s): the program (never shown unless trusted)
    model: str | None = None
    factory: str | None = None         # yaml: module:function
    options: dict | None = None        # yaml: tolerance / training_tolerance / cosine
    cwd: str | None = None             # command(s): where the program runs
    batch_size: int | None = None      # harness, yaml: the batch size given
    patterns: dict | None = None       # program: --accuracy-pattern / --error-pattern
    record: dict | None = None         # csv: the harness CSV's record (the model list only, never a row)


@dataclass
class CheckError(SparseRecord):
    """A check's error: the exception (or what a program printed) and where."""

    type: str | None = None
    module: str | None = None          # a check built in-process: the exception's module ...
    wrapper: str | None = None         # ... and the wrapper it came in (null when none)
    message: str | None = None
    traceback: str | None = None
    frames: list | None = None
    signal: str | None = None          # the process died by this signal
    output_key: str | None = None      # the harness's accuracy check: the output that failed

    def written(self) -> frozenset[str]:
        keys = set()
        if self.module is not None:         # an exception's module comes with its wrapper (null: none)
            keys.add("wrapper")
        if self.type == "AccuracyCheck":    # the harness's accuracy check names its output (null: unknown)
            keys.add("output_key")
        return frozenset(keys)


@dataclass
class Accuracy(SparseRecord):
    """The accuracy figures of a compiled run (every one reaches the issue body)."""

    WRITTEN: ClassVar[frozenset[str]] = frozenset({"tolerance", "rmse_res", "rmse_ref"})

    tolerance: float | None = None
    cosine: bool | None = None         # judged by cosine similarity
    rmse_res: float | None = None      # compiled vs fp64
    rmse_ref: float | None = None      # eager vs fp64
    max_abs_diff: float | None = None


@dataclass
class HarnessFacts(Record):
    """What an issue needs to name a harness run (bot.suites.harness.harness_facts): the suite's
    script and the pytorch checkout's revision, the versions of the model packages installed beside
    it, and the CPU's vector ISA; each null when unknown."""

    suite: str | None = None
    script: str | None = None
    revision: str | None = None
    transformers: str | None = None
    timm: str | None = None
    torchbench: str | None = None
    cpu_isa: str | None = None


@dataclass
class Launcher(Record):
    """A minifier launcher torch wrote for a program's graph (kept by the environment hook)."""

    graph: int | None = None           # the k-th graph the program compiled
    path: str | None = None


@dataclass
class RerunCapture(Record):
    """What a failing program's rerun captured for minify (bot.check.sweep): its launchers at a
    repro level, and how many graphs that run compiled."""

    repro_after: str | None = None
    repro_level: int | None = None
    launchers: list[Launcher] = field(default_factory=list)
    graphs: int | None = None


@dataclass
class FirstAttempt(Record):
    """A flaky check's first attempt (it failed; a rerun passed)."""

    attempts: int                      # how many attempts it took to pass
    log: str | None                    # the first attempt's log
    status: str | None = None
    failure_class: str | None = None
    error: CheckError | None = None
    accuracy: Accuracy | None = None

    @classmethod
    def of(cls, row: CheckRow, attempts: int, log: str | None) -> "FirstAttempt":
        """What the first attempt (``row``, a failing result) saw."""
        return cls(attempts, log, row.status, row.failure_class, row.error, row.accuracy)


@dataclass
class Chosen(Record):
    """How a time-bounded fuzz campaign chose a program among its window of candidates
    (bot.fuzz.choose): its static features (from the generator), its novelty score then (unseen
    static features + its families whose latest program reached unseen generated code), how many
    lower-index candidates it was chosen before (0: it was the next in order), and what the choice
    cost."""

    features: list[str] = field(default_factory=list)
    novelty: int = 0
    unseen: int = 0
    hot: int = 0
    passed_over: int = 0
    choose_s: float = 0.0           # what choosing it cost (generating candidates, mostly)


CONFIGURATION_FIELDS = ("backend", "mode", "dtype", "device", "dynamic", "config")


@dataclass
class Configuration(SparseRecord):
    """What makes a check configuration (bot.check.settings.Settings without its timeout): a
    check row's settings, one entry of a settings matrix, and the first part of results.json's
    ``settings``. Shards of one configuration are merged into one sweep; shards of different ones
    side by side."""

    backend: str | None = None
    mode: str | None = None
    dtype: str | None = None
    device: str | None = None
    dynamic: bool | None = None
    config: dict | None = None

    def configuration(self) -> "Configuration":
        """Only the configuration's own fields (a :class:`RunSettings` drops the run's)."""
        return Configuration(**{k: getattr(self, k) for k in CONFIGURATION_FIELDS})

    def label(self) -> str:
        return f"{self.backend}, {self.mode}, {self.dtype}, {self.device}" + (", dynamic" if self.dynamic else "")


@dataclass
class _Named(SparseRecord):
    """What names a check: its id, its model and where the model comes from (a row's first keys)."""

    id: str | None = None
    model: str | None = None
    spec: Spec | None = None


@dataclass
class CheckRow(Configuration, _Named):
    """One check: what it ran (id, model, spec, settings) and what it found (results.json's
    ``checks``, schema bot/schemas/results.schema.json). A run that only judged a check (the judge,
    a program's run, a rerun) fills the result fields; the sweep adds the rest.

    Its JSON leaves out the fields its check did not set; ``WRITTEN`` are on every row (null when
    none); ``launchers`` (what the environment hook kept) stays in this process."""

    WRITTEN: ClassVar[frozenset[str]] = frozenset({"status", "failure_class", "error", "accuracy", "duration_s",
                                                   "log", "baseline"})

    status: str | None = None
    failure_class: str | None = None
    error: CheckError | None = None
    accuracy: Accuracy | None = None
    skipped: str | None = None          # why the check was not run
    classified_by: str | None = None    # a program: what decided its class
    exit_code: int | None = None        # a program: its non-zero exit status
    batch_size: int | None = None
    compile_s: float | None = None
    stats: dict | None = None           # dynamo's counters (the harness CSV's columns)
    check_s: float | None = None        # a check built in-process: the judge's own time
    phase: str | None = None            # a check whose process died: the phase it was in
    harness: HarnessFacts | None = None
    reproduce: str | None = None        # the harness: the plain harness command
    compiled_graphs: int | None = None  # a program: graphs dynamo produced
    compile_frames: int | None = None   # a program: frames dynamo started compiling
    duration_s: float | None = None
    program_s: float | None = None      # a program: its own run time (one run, the first), beside
                                        # duration_s, the check's with its reruns
    numerics: dict | None = None        # a program: numerics flags it set (bot.torch_adapter.numerics)
    compile_options: dict | None = None  # a program: inductor settings its torch.compile(mode=, options=) gave
    reruns: int | None = None           # failed every rerun: how many ran
    deterministic: bool | None = None   # a rerun failed the same way, to the number
    capture: RerunCapture | None = None
    flaky: FirstAttempt | None = None   # passed on a rerun: the first attempt
    chosen: Chosen | None = None        # a time-bounded fuzz campaign: why this program was next
    log: str | None = None
    baseline: str | None = None         # new / known / fixed against the baseline
    baseline_status: str | None = None
    launchers: list[Launcher] | None = field(default=None, metadata=key("_launchers"))

    @property
    def failing(self) -> bool:
        return self.failure_class is not None


# --- results.json: the document around the rows ------------------------------------------------------


@dataclass
class RunSettings(Configuration):
    """What a check run was asked for (results.json's ``settings``): its configuration, and what
    the run itself was given. A run over a settings matrix lists every configuration in ``matrix``
    (each row keeps its own settings); a merged matrix names no configuration of its own."""

    WRITTEN: ClassVar[frozenset[str]] = frozenset({"baseline"})

    source: str | None = None          # the model source (bot.suites)
    timeout: float | None = None       # seconds per check
    shard: str | None = None           # i/N of a sharded sweep
    baseline: str | None = None        # the baseline file the rows were marked against
    models: list[str] | None = None    # the models selected
    reruns: int | None = None          # reruns of a failing check
    retry: list[str] | None = None     # checks retried on request
    matrix: list[Configuration] | None = None

    def configurations(self) -> list[Configuration]:
        """The configurations the run swept: the matrix's, or its own."""
        return [c.configuration() for c in self.matrix] if self.matrix else [self.configuration()]


@dataclass
class ResultsDoc(Record):
    """results.json (schema bot/schemas/results.schema.json): the run's settings and versions,
    when it started and finished, whether every selected check has a row, and the rows. Written
    by the check stage after every check (bot.check.results.ResultsWriter) and by merge; read by
    every later stage through :func:`bot.rundir.read_results`."""

    settings: RunSettings = field(default_factory=RunSettings)
    versions: dict[str, Any] = field(default_factory=dict)   # python, os, torch, cuda, gpus, ...
    checks: list[CheckRow] = field(default_factory=list)
    tool_version: str | None = None
    started: str | None = None
    finished: str | None = None
    complete: bool = False

    @property
    def when(self) -> str | None:
        """When the run ended (or began, when it did not finish)."""
        return self.finished or self.started


# --- merge.json: what `merge` combined ---------------------------------------------------------------


@dataclass
class MergedShard(Record):
    """One shard a merge took (merge.json's ``shards``)."""

    shard: str
    dir: str
    configuration: str
    checks: int


@dataclass
class MergeRecord(Record):
    """merge.json: the shards a merge combined, what it left out and what the merged run holds."""

    merged_at: str
    shards: list[MergedShard] = field(default_factory=list)
    missing_shards: list[str] = field(default_factory=list)
    ignored_files: dict[str, list[str]] = field(default_factory=dict)   # shard directory -> files
    complete: bool = False
    checks: int = 0
    failures: int = 0

    def summary(self) -> str:
        return f"merged {len(self.shards)} shard(s), {self.checks} checks, {self.failures} failing"


# --- report.json: what `report` did ------------------------------------------------------------------


# a ReportAction's reason for a failure left unfiled because its source files only verified repros
# (Source.files_only_verified: a fuzzer's programs); the report writes it, a fuzz campaign counts it
NOT_VERIFIED = "no verified repro (a generated program's failure is filed only with a repro that fails on its own)"


@dataclass
class ReportAction(SparseRecord):
    """What report did about one bug, or about one issue whose checks passed (report.json's
    ``actions``): the action word, the issue, the checks it stands for and why."""

    WRITTEN: ClassVar[frozenset[str]] = frozenset({"issue", "url", "fingerprint", "checks", "reason"})

    action: str
    issue: int | None = None
    url: str | None = None
    fingerprint: str | None = None
    checks: list[str] = field(default_factory=list)
    reason: str = ""
    commented: bool | None = None
    labels: list[str] | None = None
    overflow: list | None = None       # affected checks left out of a body that hit GitHub's size limit
    survivor: int | None = None        # a duplicate's: the issue it was closed in favour of
    title: str | None = None           # the issue's title, as filed or found


@dataclass
class ReportDoc(SparseRecord):
    """report.json: the run it reported, where, what it did (schema bot/schemas/report.schema.json);
    written by `report`, read by the Action's summary, outputs and pull-request comment."""

    WRITTEN: ClassVar[frozenset[str]] = frozenset({"label", "run_url", "error"})

    run_id: str
    tracker: str
    dry_run: bool = False
    label: str | None = None
    run_url: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    actions: list[ReportAction] = field(default_factory=list)
    error: str | None = None
    warnings: list[str] | None = None  # hidden state that was malformed and ignored
    dashboard: DashboardRef | None = None


@dataclass
class DashboardRef(Record):
    """The dashboard issue a report kept (report.json's ``dashboard``)."""

    issue: int
    url: str | None = None
    action: str | None = None          # created | updated


# --- the bisectors' answers -----------------------------------------------------------------------


@dataclass
class BuildVerdict(SparseRecord):
    """One torch build's verdict on a repro (bot.bisect.Verdict): bad, good, skip or untested."""

    name: str
    verdict: str
    reason: str | None = None
    torch: str | None = None
    git: str | None = None
    runs: int | None = None
    failed_same_way: int | None = None
    seconds: float | None = None

    def written(self) -> frozenset[str]:
        """A build that was run names every figure (null when unknown); an untested one only itself."""
        return frozenset() if self.verdict == "untested" else frozenset(f.name for f in fields(self))


@dataclass
class BuildBoundary(Record):
    """Two neighbouring builds between which a bug was introduced or fixed (bot.bisect.Boundary)."""

    kind: str                          # introduced | fixed
    before: str
    after: str
    before_torch: str | None = None
    after_torch: str | None = None
    skipped_between: list[str] = field(default_factory=list)
    commits: dict[str, str] | None = None   # {"from", "to", "url", "log"} when both builds name a commit


@dataclass
class BuildsFound(Record):
    """`minify-bot bisect`'s answer over torch builds, oldest first (failure.json's ``builds``)."""

    builds: list[BuildVerdict] = field(default_factory=list)
    present_in: list[str] = field(default_factory=list)
    absent_in: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    boundaries: list[BuildBoundary] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)   # verdicts taken: anchor, before, after
    runs_per_verdict: int = 1
    need: int = 1
    bound_per_side: int | None = None


@dataclass
class GraphBisect(SparseRecord):
    """torch's CompilerBisector on a minimized graph (bot.torch_adapter.bisect): the subsystem and
    detail of the first bad step, or ``incomplete`` when its budget ran out (failure.json's
    ``bisect``)."""

    WRITTEN: ClassVar[frozenset[str]] = frozenset({"detail", "runs"})

    incomplete: bool | None = None
    backend: str | None = None
    subsystem: str | None = None
    bisect_number: int | None = None
    detail: str | None = None
    runs: int | None = None
