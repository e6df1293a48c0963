"""Stage options, defined once: what `check`, `minify` and `report` take, as typed records.

Each stage has one dataclass here. Its field names are the stage's argparse destinations, so
``from_args`` reads a parsed command line and ``to_argv`` writes one back; nothing else in the
project builds a stage's command line or copies its options by hand:

    opts = CheckOptions(models=["mlp_relu"], config=["inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"])
    to_argv(opts)      # ["--models", "mlp_relu", "--config", "inductor...=accuracy"]
    call_stage(opts)   # run `check` in this process (what `run` and `selftest` do)

A field left at None (or an empty list, or False) is "not given": ``to_argv`` leaves it out and
the stage's default applies. The defaults themselves live here too (each field's ``default``
metadata) and the commands' argparse definitions read them (``default_of``); ``resolved()`` fills
them in for a stage called as a function.

Who uses what: `run` and `selftest` call the stages as functions (``call_stage``); the Action turns
options into a command line for a separate process on purpose (see bot/action/stages.py: the
process that runs model code never holds the token); `/minify` comments overlay their settings on
the workflow's check options (bot/slash.py).
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field, fields
from typing import Any

CSV, APPEND, NARGS = "csv", "append", "nargs"  # how a list travels on the command line

# When a run fails (exit 1), in the words the CLI, the Action and the docs share: on any failing
# check, only on a regression (a failure the baseline or history does not know), or never. The
# CLI's first spellings stay accepted.
FAIL_ON = ("failure", "regression", "never")
FAIL_ON_ALIASES = {"any": "failure", "new": "regression"}


def fail_on_value(text: str) -> str:
    """A --fail-on / fail-on value in the shared words; ValueError for anything else."""
    word = (text or "").strip().lower()
    word = FAIL_ON_ALIASES.get(word, word)
    if word not in FAIL_ON:
        raise ValueError(f"must be one of {', '.join(FAIL_ON)}, got {text[:40]!r}")
    return word


def first_label(text: str) -> str:
    """--labels (the Action's ``labels``): a comma-separated list whose first label is the bot's own."""
    labels = [x.strip() for x in (text or "").split(",") if x.strip()]
    if not labels:
        raise ValueError("needs a label")
    return labels[0]


def opt(default: Any = None, *, flag: str | None = None, off: str | None = None, kind: str | None = None,
        list_field: bool = False):
    """A stage option. ``default`` is the stage's default (applied when the option is not given);
    ``flag`` the option string (default: --field-name); ``off`` the option string that sets a
    boolean to False; ``kind`` how a list is written (CSV, APPEND or NARGS)."""
    meta = {"default": default, "flag": flag, "off": off, "kind": kind}
    if list_field or kind is not None:
        return field(default_factory=list, metadata=meta)
    return field(default=None, metadata=meta)


@dataclass
class _Options:
    """What every stage takes (its run directory, the first option), and how options travel."""

    STAGE = ""

    out: str | None = opt("minify-out")

    @classmethod
    def default_of(cls, name: str) -> Any:
        """The stage's default for option ``name`` (what argparse and ``resolved`` use)."""
        return cls.__dataclass_fields__[name].metadata["default"]

    @classmethod
    def from_args(cls, ns) -> "_Options":
        """Options from a parsed command line (an argparse namespace or any object with the
        destinations as attributes); a destination the namespace lacks is not given."""
        values = {}
        for f in fields(cls):
            v = getattr(ns, f.name, None)
            if f.metadata["kind"] == CSV and isinstance(v, str):
                v = [x.strip() for x in v.split(",") if x.strip()]
            if f.metadata["kind"] is not None:
                v = list(v or [])
            values[f.name] = v
        return cls(**values)

    def resolved(self) -> "_Options":
        """A copy with every option that was not given set to the stage's default."""
        changes = {}
        for f in fields(self):
            if getattr(self, f.name) is None and f.metadata["default"] is not None:
                changes[f.name] = f.metadata["default"]
        return dataclasses.replace(self, **changes)


def _text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def to_argv(opts: _Options) -> list[str]:
    """The command line of ``opts`` for `minify-bot <stage>` (an argv list, never shell text):
    every option that is given, in field order."""
    argv: list[str] = []
    for f in fields(opts):
        value, meta = getattr(opts, f.name), f.metadata
        flag = meta["flag"] or "--" + f.name.replace("_", "-")
        if value is None:
            continue
        if meta["kind"] == CSV:
            if value:
                argv += [flag, ",".join(value)]
        elif meta["kind"] == APPEND:
            for item in value:
                argv += [flag, _text(item)]
        elif meta["kind"] == NARGS:
            if value:
                argv += [flag, *map(_text, value)]
        elif value is True:
            if meta["flag"] or not meta["off"]:  # a default-on switch may have no option for "on"
                argv.append(flag)
        elif value is False:
            if meta["off"]:
                argv.append(meta["off"])
        else:
            argv += [flag, _text(value)]
    return argv


@dataclass
class CheckOptions(_Options):
    """`minify-bot check` (and the check half of `run`)."""

    STAGE = "check"

    models: list[str] = opt(kind=CSV)
    suite: str | None = opt()
    list: bool | None = opt(False)
    model_file: str | None = opt()
    command: str | None = opt()
    name: str | None = opt()
    command_file: str | None = opt()
    pytorch: str | None = opt()
    harness_suite: str | None = opt()
    batch_size: int | None = opt()
    csv: str | None = opt()
    seed: int | None = opt()
    fuzz_count: int | None = opt()
    fuzz_time: float | None = opt()
    accuracy_pattern: list[str] = opt(kind=APPEND)
    error_pattern: list[str] = opt(kind=APPEND)
    backend: str | None = opt("inductor")
    mode: str | None = opt("inference")
    dtype: str | None = opt("float32")
    device: str | None = opt("cpu")
    dynamic: bool | None = opt(False)
    timeout: float | None = opt(600.0)
    memory_limit_mb: int | None = opt()
    shard: str | None = opt()
    config: list[str] = opt(kind=APPEND)
    matrix: list[str] = opt(kind=APPEND)
    baseline: str | None = opt()
    fail_on: str | None = opt("failure")   # failure, regression (against the baseline) or never: FAIL_ON
    reruns: int | None = opt(1)
    retry: list[str] = opt(kind=APPEND)


@dataclass
class MinifyOptions(_Options):
    """`minify-bot minify` (and the minify half of `run`)."""

    STAGE = "minify"

    launcher: str | None = opt()
    repro: str | None = opt()
    only: str | None = opt()
    repro_after: str | None = opt()
    repro_level: int | None = opt()
    strict_accuracy: bool | None = opt(False)
    offload_to_disk: bool | None = opt(False)
    isolate: bool | None = opt(False)
    verify_runs: int | None = opt(3)
    budget: float | None = opt(600.0)
    no_localize: bool | None = opt(False)
    no_bisect: bool | None = opt(False)
    no_trace: bool | None = opt(False)     # no TORCH_TRACE rerun of the verified repro (no tlparse, no kernels)
    reminify: bool | None = opt(False)
    check_timeout: float | None = opt(900.0)
    jobs: int | None = opt()   # failures minimized at once (None or 0: one per GPU, or per 4 cores)
    known_public_key: str | None = opt()   # verifies known repros' signatures (else $MINIFY_BOT_PUBLIC_KEY)


@dataclass
class ReportOptions(_Options):
    """`minify-bot report` (and the report half of `run`); also what the reporter itself reads
    (``bot.report.report_run``, resolved there): one record from the command line to the lifecycle."""

    STAGE = "report"

    tracker: str | None = opt("local")
    issues_dir: str | None = opt()
    repo: str | None = opt()
    token: str | None = opt()
    api_url: str | None = opt()
    bot_login: str | None = opt()
    label: str | None = opt("minify-bot", flag="--labels")  # what a new issue gets: label, assignees, body templates
    assignees: list[str] = opt(kind=NARGS)
    templates: str | None = opt()
    max_new: int | None = opt(10, flag="--max-new-issues")
    close_after: int | None = opt(2)
    dry_run: bool | None = opt(False)
    run_url: str | None = opt()
    artifact_url: str | None = opt()
    run_id: str | None = opt()
    pr_run: bool | None = opt(False)
    trusted_commands: list[str] = opt(kind=APPEND, flag="--command")
    file_flaky: bool | None = opt(True, off="--no-file-flaky")
    dashboard: bool | None = opt(True, flag="--dashboard", off="--no-dashboard")


@dataclass
class BisectOptions(_Options):
    """`minify-bot bisect` (and the bisect step of `run --build ...`)."""

    STAGE = "bisect"

    failure: list[str] = opt(kind=APPEND)
    build: list[str] = opt(kind=APPEND)
    builds_file: str | None = opt()
    verify_runs: int | None = opt(3)
    need: int | None = opt()
    timeout: float | None = opt(600.0)
    cache_dir: str | None = opt()
    no_write: bool | None = opt(False)


STAGE_OPTIONS = {cls.STAGE: cls for cls in (CheckOptions, MinifyOptions, ReportOptions)}


def call_stage(opts: _Options) -> int:
    """Run a stage in this process, as `minify-bot <stage>` would with ``to_argv(opts)``: its exit
    code, and a usage/infra error as one `error:` line and its exit code (see bot.cli)."""
    from bot.cli import COMMANDS, guarded, running

    module = importlib.import_module(COMMANDS[opts.STAGE])
    return guarded(running(opts.STAGE), module.execute, opts.resolved())
