"""What a model source is: the questions the sweep, minify and the report ask it.

A source is one module in bot/suites/ with one object implementing :class:`Source`, named in the
registry (``bot.suites.REGISTRY``, one line). Nothing else in the project compares a source's
name: it asks the source (``bot.suites.source_of(spec)``). A check's spec is a
:class:`bot.records.Spec` and its row a :class:`bot.records.CheckRow`.

- the sweep: its models (:meth:`Source.models`), in a time-bounded sweep which one to check next
  from what the checks so far found (:meth:`Source.chooser`), whether a check runs in a forked process that
  builds the model (:meth:`Source.build`) or as a program of its own (``program``, :meth:`Source.run`),
  or is imported, not run (``imported``);
- minify: for a program, what to call it in the log (:meth:`Source.describe`), where it runs
  (:meth:`Source.workdir`), and whether its localize reruns it with compilation off altogether
  (``localizes_without_compile``);
- the report: the "Reproduce locally" lines (:meth:`Source.reproduce`), built only from fields
  that pass strict patterns (a run directory may come from a pull request's job).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Sequence

from bot.errors import UsageError
from bot.records import CheckRow, Chosen, Spec


@dataclass
class Model:
    """A model a source offers, before it is built."""

    name: str
    spec: Spec
    description: str = ""
    batch_size: int | None = None
    skip: str | None = None  # reason, when the source says not to check it
    options: dict = field(default_factory=dict)
    # settings the source proposes for this model (``mode``, ``dynamic``), taken where the run keeps
    # that setting's default (bot.check.sweep.varied): a generated program names its own
    settings: dict = field(default_factory=dict)


@dataclass
class ListRequest:
    """What the command line says about where the models come from (`check --suite ...`)."""

    file: str | None = None          # --model-file, --command-file or --csv
    pytorch: str | None = None
    suite: str | None = None         # --harness-suite
    command: str | None = None
    name: str | None = None
    batch_size: int | None = None
    patterns: dict | None = None     # --accuracy-pattern / --error-pattern
    cwd: str | None = None
    device: str | None = None
    names: list[str] | None = None   # --models: a source may offer a model by name only when asked
    seed: int | None = None          # --seed (--suite fuzz)
    fuzz_count: int | None = None    # --fuzz-count (--suite fuzz)
    fuzz_time: float | None = None   # --fuzz-time (--suite fuzz)


class Chooser(Protocol):
    """Picks a time-bounded sweep's next check (:meth:`Source.chooser`)."""

    def pick(self, pending: Sequence[tuple[Model, Any]], checked: Sequence[CheckRow]) -> tuple[int, Chosen | None]:
        """The position in ``pending`` (the checks not yet run, in the source's order, each a model
        and the settings it is checked under) of the one to run next, and why (for its row), given
        the rows ``checked`` so far, in the order they ran."""
        ...


@dataclass
class Reproduce:
    """A source's part of "Reproduce locally": lines before the `minify-bot check` line, that
    line's source arguments, and notes after it."""

    lines: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Source:
    """A model source (see the module's docstring). Subclasses set ``name`` and answer what
    applies to them; the defaults are those of a source whose models are built in-process."""

    name: ClassVar[str] = ""
    program: ClassVar[bool] = False                    # run as a program of its own (a subprocess)
    imported: ClassVar[bool] = False                   # results imported from a file, never run
    localizes_without_compile: ClassVar[bool] = False  # localize also reruns it with no torch.compile at all
    # a failure is filed only with a repro that failed the same way on its own (verified): a program
    # nobody wrote (a fuzzer's) is worth no issue that cannot show its bug
    files_only_verified: ClassVar[bool] = False
    # compiler settings a check of this source starts from in its own process, before the run's
    # --config (which wins): how it compiles, never what it generates
    check_config: ClassVar[dict] = {}
    # the default float dtype while the check's fp64 reference runs: None keeps torch's (float32), as
    # PyTorch's harness does; "float64" for programs whose integer tensors meet Python floats (an
    # int32 tensor where a 2.5 is the default dtype), so that the reference has no float32 of its own
    reference_default_dtype: ClassVar[str | None] = None

    def models(self, req: ListRequest) -> list[Model]:
        raise NotImplementedError

    def chooser(self, models: list[Model]) -> Chooser | None:
        """What picks the next model of a time-bounded sweep (``--fuzz-time``) from the results so
        far, or None: the models run in the order :meth:`models` listed them."""
        return None

    def build(self, spec: Spec, batch_size: int | None) -> tuple[Any, tuple, int | None]:
        """(model, example inputs, batch size), in the check's own process."""
        raise UsageError(f"models from source {self.name!r} are not built in-process")

    def run(self, spec: Spec, settings, log_path: str, *, extra_env: dict | None = None,
            force_backend: str | None = None, launcher_dir: str | None = None) -> CheckRow:
        """One run of a program's check: its row, with the fields of its result."""
        raise UsageError(f"checks of source {self.name!r} are not programs")

    def describe(self, spec: Spec) -> str:
        return f"{self.name} {spec.model}"

    def discard(self, row: CheckRow) -> str | None:
        """Why a check's result is not a finding of this source (the sweep records it as skipped,
        with this reason), or None: a generated program that fails eagerly is not a compiler bug."""
        return None

    def workdir(self, spec: Spec) -> str | None:
        """Where the program runs (its own files may appear there), when the source knows."""
        return None

    def reproduce(self, check: CheckRow, spec: Spec, models: list[str], trusted_commands=()) -> Reproduce:
        """The source's part of "Reproduce locally"; ``models``: ``["--models", NAME]`` when the
        check's model name passed its pattern, else []."""
        return Reproduce(args=list(models))


class Library(Source):
    """Architectures of a model library (transformers, timm), built offline from tiny configs in
    the check's own process: ``library`` is the module with ``require()`` (a clear error when the
    library is missing), ``models()`` and ``build_model(name, batch_size)``."""

    library: ClassVar[str] = ""

    def _module(self):
        import importlib

        return importlib.import_module(self.library)

    def models(self, req: ListRequest) -> list[Model]:
        self._module().require()
        return self._module().models()

    def build(self, spec: Spec, batch_size: int | None):
        return self._module().build_model(spec.model, batch_size)
