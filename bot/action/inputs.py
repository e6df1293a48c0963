"""The Action's inputs: INPUT_<NAME> variables (the runner's naming) read and checked once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot import gha
from bot.errors import UsageError

STAGES = ("all", "check", "report", "authorize")
FAIL_ON = ("regression", "failure", "never")


@dataclass
class Inputs:
    stage: str = "all"
    models: list[str] = field(default_factory=list)
    suite: str = ""
    config_file: str = ""
    command: str = ""
    pytorch_path: str = ""
    harness_suite: str = ""
    backend: str = ""
    mode: str = ""
    dtype: str = ""
    device: str = ""
    dynamic: bool = False
    repro_after: str = ""
    repro_level: str = ""
    config: list[str] = field(default_factory=list)
    timeout: str = ""
    minify: bool = True
    reminify: bool = False
    verification_runs: int | None = None
    minify_budget: str = ""
    builds: list[str] = field(default_factory=list)
    builds_file: str = ""
    baseline: str = ""
    shard: str = ""
    tracker: str = "github"
    dry_run: bool = False
    labels: list[str] = field(default_factory=list)
    max_new_issues: int | None = None
    token: str = ""
    fail_on: str = "regression"
    out: str = ""
    shards: list[str] = field(default_factory=list)
    request: str = ""
    expected_sha: str = ""
    check_result: str = ""
    bot_login: str = ""
    artifact_url: str = ""
    pr_issues: bool = False
    working_directory: str = ""

    @classmethod
    def read(cls, env) -> "Inputs":
        g = lambda name, default="": gha.get_input(name, default, env)  # noqa: E731
        i = cls(
            stage=g("stage", "all").lower() or "all",
            models=gha.get_list_input("models", env),
            suite=g("suite"),
            config_file=g("config-file"),
            command=g("command"),
            pytorch_path=g("pytorch-path"),
            harness_suite=g("harness-suite"),
            backend=g("backend"),
            mode=g("mode"),
            dtype=g("dtype"),
            device=g("device"),
            dynamic=gha.get_bool_input("dynamic", False, env),
            repro_after=g("repro-after"),
            repro_level=g("repro-level"),
            config=gha.get_lines_input("config", env),
            timeout=g("timeout"),
            minify=gha.get_bool_input("minify", True, env),
            reminify=gha.get_bool_input("reminify", False, env),
            verification_runs=gha.get_int_input("verification-runs", None, env, minimum=0),
            minify_budget=g("minify-budget"),
            builds=gha.get_lines_input("builds", env),
            builds_file=g("builds-file"),
            baseline=g("baseline"),
            shard=g("shard"),
            tracker=(g("tracker", "github") or "github").lower(),
            dry_run=gha.get_bool_input("dry-run", False, env),
            labels=gha.get_list_input("labels", env),
            max_new_issues=gha.get_int_input("max-new-issues", None, env, minimum=0),
            token=g("github-token"),
            fail_on=(g("fail-on", "regression") or "regression").lower(),
            out=g("out"),
            shards=gha.get_lines_input("shards", env),
            request=g("request"),
            expected_sha=g("expected-sha").lower(),
            check_result=g("check-result").lower(),
            bot_login=g("bot-login"),
            artifact_url=g("artifact-url"),
            pr_issues=gha.get_bool_input("pr-issues", False, env),
            working_directory=g("working-directory"),
        )
        if i.stage not in STAGES:
            raise UsageError(f"input 'stage' must be one of {', '.join(STAGES)}, got {i.stage!r}")
        if i.fail_on not in FAIL_ON:
            raise UsageError(f"input 'fail-on' must be one of {', '.join(FAIL_ON)}, got {i.fail_on!r}")
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



def number_input(name: str, text: str, kind=float):
    """A numeric input for a stage option: None when empty; a clear usage error when not a number."""
    if text in ("", None):
        return None
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise UsageError(f"input {name!r} must be {what}, got {str(text)[:40]!r}") from None
