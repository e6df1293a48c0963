"""The Action's inputs: INPUT_<NAME> variables (the runner's naming) read and checked once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from bot import gha
from bot.errors import UsageError
from bot.options import fail_on_value

STAGES = ("all", "check", "report", "authorize", "known")
TOKEN_STAGES = ("report", "authorize", "known")   # the stages that run no model code and may hold a token


TEXT, LIST, LINES, BOOL, INT = "text", "list", "lines", "bool", "int"   # how an input is read (bot.gha)


def inp(default=None, kind: str = TEXT, *, name: str | None = None, lower: bool = False):
    """An Action input: ``name`` defaults to the field's name with dashes; ``kind`` how it is read."""
    meta = {"name": name, "kind": kind, "lower": lower}
    if kind in (LIST, LINES):
        return field(default_factory=list, metadata=meta)
    return field(default="" if default is None and kind == TEXT else default, metadata=meta)


@dataclass
class Inputs:
    """The Action's inputs (action.yml), each read once, as its kind says."""

    stage: str = inp("all")  # exactly as written: action.yml's steps compare it too (``_check_stage``)
    models: list[str] = inp(kind=LIST)
    suite: str = inp()
    model_file: str = inp()
    config_file: str = inp()      # the old spelling of model-file
    command: str = inp()
    pytorch_path: str = inp()
    harness_suite: str = inp()
    backend: str = inp()
    mode: str = inp()
    dtype: str = inp()
    device: str = inp()
    dynamic: bool = inp(False, BOOL)
    repro_after: str = inp()
    repro_level: str = inp()
    config: list[str] = inp(kind=LINES)
    timeout: str = inp()
    minify: bool = inp(True, BOOL)
    reminify: bool = inp(False, BOOL)
    trace: bool = inp(True, BOOL)
    verification_runs: int | None = inp(kind=INT)
    minify_budget: str = inp()
    builds: list[str] = inp(kind=LINES)
    builds_file: str = inp()
    baseline: str = inp()
    shard: str = inp()
    seed: str = inp()
    fuzz_count: str = inp()
    fuzz_time: str = inp()
    tracker: str = inp("github", lower=True)
    dry_run: bool = inp(False, BOOL)
    labels: list[str] = inp(kind=LIST)
    max_new_issues: int | None = inp(kind=INT)
    token: str = inp(name="github-token")
    fail_on: str = inp("regression", lower=True)
    out: str = inp()
    shards: list[str] = inp(kind=LINES)
    request: str = inp()
    expected_sha: str = inp(lower=True)
    check_result: str = inp(lower=True)
    bot_login: str = inp()
    artifact_url: str = inp()
    pr_issues: bool = inp(False, BOOL)
    working_directory: str = inp()
    requirements: str = inp()     # the checked code's pip requirements file, installed before the check
    setup: str = inp()            # a bash line run before the check (after requirements)
    known_file: str = inp()
    known_public_key: str = inp()
    signing_key: str = inp()

    @classmethod
    def read(cls, env) -> "Inputs":
        i = cls(**{f.name: _read(f, env) for f in fields(cls)})
        _check_stage(i.stage)
        try:
            i.fail_on = fail_on_value(i.fail_on)   # the CLI's words (any, new) are taken too
        except ValueError as exc:
            raise UsageError(f"input 'fail-on' {exc}") from None
        if i.tracker not in ("github", "local"):
            raise UsageError(f"input 'tracker' must be github or local, got {i.tracker!r}")
        for item in i.config:
            if "=" not in item:
                raise UsageError(f"input 'config': each line must be KEY=VALUE, got {item!r}")
        if i.expected_sha and not re.fullmatch(r"[0-9a-f]{40}", i.expected_sha):
            raise UsageError("input 'expected-sha' must be a full 40-hex commit id")
        if i.check_result and i.check_result not in ("success", "failure", "cancelled", "skipped"):
            raise UsageError("input 'check-result' must be success, failure, cancelled or skipped, "
                             f"got {i.check_result[:40]!r}")
        return i


def _check_stage(stage: str) -> None:
    """The stage must be one of STAGES exactly, in lowercase. action.yml's install step tells the
    token-holding stages (hash-pinned install) from the others in bash, which compares case by case,
    while its ``${{ }}`` expression that hands out the job's token compares ignoring case: ``Report``
    would get the token and an unpinned install. No other spelling is ever taken."""
    if stage not in STAGES:
        raise UsageError(f"input 'stage' must be one of {', '.join(STAGES)} (lowercase, exactly), "
                         f"got {stage[:40]!r}")


def input_name(f) -> str:
    """The action.yml name of an Inputs field."""
    return f.metadata["name"] or f.name.replace("_", "-")


def _read(f, env):
    meta = f.metadata
    name = input_name(f)
    kind = meta["kind"]
    if kind == LIST:
        return gha.get_list_input(name, env)
    if kind == LINES:
        return gha.get_lines_input(name, env)
    if kind == BOOL:
        return gha.get_bool_input(name, f.default, env)
    if kind == INT:
        return gha.get_int_input(name, None, env, minimum=0)
    value = gha.get_input(name, f.default, env) or f.default
    return value.lower() if meta["lower"] else value


def number_input(name: str, text: str, kind=float):
    """A numeric input for a stage option: None when empty; a clear usage error when not a number."""
    if text in ("", None):
        return None
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise UsageError(f"input {name!r} must be {what}, got {str(text)[:40]!r}") from None
