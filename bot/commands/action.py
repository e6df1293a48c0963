"""`minify-bot action`: the GitHub Actions entry point (what action.yml runs).

Reads the event (GITHUB_EVENT_NAME, GITHUB_EVENT_PATH) and the action's inputs (INPUT_*), runs the
stages as `minify-bot check / minify / report` subprocesses, and answers through the runner:
GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, grouped logs and annotations.

Stages (input `stage`), so one workflow can split privileges over several jobs:
  all        check -> minify -> report in this job (default)
  check      check -> minify only: for a GPU job with a read-only token; upload the run directory
  report     (merge shard run directories, then) report: for a job with issues: write and no GPU
  authorize  for `/minify` comments: parse, check permission, pin the head SHA, acknowledge

Events: schedule, workflow_dispatch and push sweep and file issues; pull_request sweeps and answers
in the pull request; issue_comment handles `/minify` comments.

Model code never runs next to a token where the code is untrusted (issue_comment,
pull_request_target, fork pull_request): scrubbing a child's environment is no boundary, since code
of the same user reads /proc/<pid>/environ of its ancestors. Whatever goes wrong ends with exit 2
(bad input) or 3 (internal/infrastructure), outputs and a summary, and on /minify an answer in the
pull request; exit 1 only ever means "failures found".
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot import gha, slash
from bot.errors import EXIT_FAILURES, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, BotError, InfraError, UsageError

HELP = "run as a GitHub Action step: read the event and inputs, check/minify/report, write outputs and summary"
DESCRIPTION = HELP + """.

Inputs come from INPUT_<NAME> environment variables (the runner's naming; `INPUT_DRY_RUN` is
accepted for `dry-run`), the event from GITHUB_EVENT_NAME / GITHUB_EVENT_PATH. See docs/action.md."""

STAGES = ("all", "check", "report", "authorize")
FAIL_ON = ("regression", "failure", "never")
SWEEP_EVENTS = ("schedule", "workflow_dispatch", "push", "pull_request", "pull_request_target", "repository_dispatch")
STAGE_TIMEOUT = 6 * 3600.0
# `python -c` without the working directory on sys.path: the workspace (maybe a pull request's
# checkout) must never shadow the installed bot package.
LAUNCH = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; from bot.cli import main; sys.exit(main())"


def add_arguments(parser) -> None:
    parser.add_argument("--stage", choices=STAGES, help="overrides the `stage` input")
    parser.add_argument("--dry-run", action="store_true", default=None,
                        help="file nothing on GitHub (overrides the `dry-run` input)")


# ---------------------------------------------------------------- inputs


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
    verification_runs: int | None = None
    minify_budget: str = ""
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
            verification_runs=gha.get_int_input("verification-runs", None, env, minimum=0),
            minify_budget=g("minify-budget"),
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
            raise UsageError(f"input 'check-result' must be success, failure, cancelled or skipped, got {i.check_result[:40]!r}")
        return i


# ---------------------------------------------------------------- running the stages


def _command_flags(command: str) -> set[str] | None:
    """The option strings a stage command accepts, or None when the command is not built."""
    if importlib.util.find_spec(f"bot.commands.{command}") is None:
        return None
    from bot.cli import build_parser

    parser = build_parser()
    for action in parser._actions:  # the subparsers action
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and command in choices:
            return {s for a in choices[command]._actions for s in a.option_strings}
    return None


def echo_line(command: str, argv: list[str]) -> str:
    """The `$ minify-bot ...` line the log shows: one line whatever the arguments hold (a line break
    in an argument would start a new log line, where `::error ...` is a live workflow command)."""
    text = f"$ minify-bot {command} {' '.join(shlex.quote(a) for a in argv)}"
    return re.sub(r"[\x00-\x1f\x7f\x85\u2028\u2029]", lambda m: f"\\x{ord(m.group(0)):02x}", text)


class Runner:
    """Runs `python -m bot <command>` with a timeout, its output fenced off from command processing."""

    def __init__(self, ctx: "Context"):
        self.ctx = ctx

    def __call__(self, command: str, argv: list[str], *, with_token: bool = False,
                 timeout: float = STAGE_TIMEOUT) -> int:
        ctx = self.ctx
        if _command_flags(command) is None:
            raise InfraError(f"this installation has no `minify-bot {command}` command")
        env = dict(os.environ) if with_token else gha.scrubbed_env(os.environ)
        env.pop("GITHUB_OUTPUT", None)  # only this process writes outputs and the summary
        env.pop("GITHUB_STEP_SUMMARY", None)
        env["PYTHONUNBUFFERED"] = "1"
        if with_token and ctx.inputs.token:
            env["GITHUB_TOKEN"] = ctx.inputs.token
        cmd = [sys.executable, "-c", LAUNCH, command, *argv]
        ctx.cmds.stream.write(gha.redact(echo_line(command, argv), ctx.secrets) + "\n")
        from bot import proc

        with ctx.cmds.untrusted():  # model code and error messages must not issue workflow commands
            res = proc.run(cmd, cwd=str(ctx.workdir), env=env, timeout=timeout,
                           on_line=lambda line: ctx.cmds.stream.write(gha.redact(line, ctx.secrets)))
            ctx.cmds.stream.flush()
        if res.error:
            raise InfraError(f"minify-bot {command} could not start: {res.error}")
        if res.timed_out:
            raise InfraError(f"minify-bot {command} was stopped at its time limit ({int(timeout)} s)")
        rc = res.returncode
        if rc < 0:
            raise InfraError(f"minify-bot {command} was killed ({res.signal_name})")
        return rc


# ---------------------------------------------------------------- context


@dataclass
class Context:
    env: dict
    inputs: Inputs
    event: gha.Event
    cmds: gha.Commands
    workdir: Path
    out: Path
    secrets: list[str] = field(default_factory=list)
    outputs: dict = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    produced_results: bool = False  # this process ran check or merge
    prc: "PRContext | None" = None  # the pull request a /minify comment was made on, once read
    requester: str = ""  # the commenter's login
    answered: bool = False  # a reply or results comment was posted on it

    def output(self, name: str, value) -> None:
        self.outputs[name] = value


def _default_out(env) -> Path:
    base = env.get("RUNNER_TEMP") or ""
    return Path(base) / "minify-out" if base else Path("minify-out")


# ---------------------------------------------------------------- reading the run directory


def _load(path: Path) -> dict | None:
    from bot import rundir

    return rundir.read_optional(path)


def _failing(results: dict | None) -> list[dict]:
    if not results:
        return []
    return [r for r in results.get("checks") or [] if isinstance(r, dict) and r.get("failure_class")]


def _regressions(results: dict | None) -> list[dict]:
    # without a baseline every failure is new; with one, only rows the baseline calls new
    return [r for r in _failing(results) if r.get("baseline") in (None, "new")]


def _report_entries(report: dict | None) -> list[dict]:
    """The per-bug entries of report.json, whatever list the report writer used."""
    if not report:
        return []
    for key in ("actions", "issues", "entries", "bugs"):
        value = report.get(key)
        if isinstance(value, list):
            return [e for e in value if isinstance(e, dict)]
    return []


def _entry_url(e: dict) -> str | None:
    url = e.get("url") or e.get("html_url")
    if not url and isinstance(e.get("issue"), dict):
        url = e["issue"].get("url") or e["issue"].get("html_url")
    return url if isinstance(url, str) and url.startswith(("http://", "https://")) else None


def _issue_urls(report: dict | None) -> list[str]:
    urls: list[str] = []
    for e in _report_entries(report):
        url = _entry_url(e)
        if url and url not in urls:
            urls.append(url)
    return urls


# ---------------------------------------------------------------- markdown


def results_table(results: dict | None, failures_dir: Path | None, entries: list[dict]) -> str:
    rows = (results or {}).get("checks") or []
    if not rows:
        return "_No checks ran._\n"
    by_id: dict[str, dict] = {}
    for e in entries:
        for key in ("check_ids", "checks"):
            for cid in e.get(key) or []:
                if isinstance(cid, str):
                    by_id.setdefault(cid, e)
        cid = e.get("check_id") or e.get("id")
        if isinstance(cid, str):
            by_id.setdefault(cid, e)
    ordered = sorted(rows, key=lambda r: (not r.get("failure_class"), str(r.get("id"))))
    lines = ["| model | backend | mode | dtype | device | status | baseline | repro | issue |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in ordered:
        status = str(r.get("status"))
        icon = "❌" if r.get("failure_class") else "✅"
        repro = "—"
        if r.get("failure_class") and failures_dir is not None:
            doc = _load(failures_dir / str(r.get("id")) / "failure.json")
            if doc:
                rs = (doc.get("repro") or {})
                ver = rs.get("verification") or {}
                repro = gha.md_escape(rs.get("status", "?"), 40)
                if ver.get("runs"):
                    repro += f" ({int(ver.get('failed_same_way') or 0)}/{int(ver['runs'])} verified)"
            else:
                repro = "not minified"
        e = by_id.get(str(r.get("id")))
        issue = "—"
        if e:
            url, action = _entry_url(e), e.get("action") or e.get("kind") or ""
            issue = gha.md_escape(action, 30) or "—"
            if url:
                issue = f"[{issue or 'issue'}]({url.replace(')', '%29')})"
        lines.append("| " + " | ".join([
            gha.md_code(r.get("model"), 80), gha.md_escape(r.get("backend"), 40), gha.md_escape(r.get("mode"), 20),
            gha.md_escape(r.get("dtype"), 20), gha.md_escape(r.get("device"), 20), f"{icon} {gha.md_escape(status, 40)}",
            gha.md_escape(r.get("baseline") or "—", 20), repro, issue]) + " |")
    return "\n".join(lines) + "\n"


def actions_list(report: dict | None) -> str:
    """What report did, one line per action, with the reason (also for what was NOT filed)."""
    entries = _report_entries(report)
    if report is None:
        return "_Nothing was reported (no report.json)._\n"
    out = []
    error = _report_error(report)
    if error:
        out.append(f"❌ **Filing failed:** {gha.md_escape(error, 500)}"
                   + ("; the failures below were not all filed" if entries else "; nothing was filed") + "\n")
    if not entries:
        if error:
            return "\n".join(out) + "\n"
        return "_Nothing to file: no failures, and no open issue changed state._\n"
    for e in entries:
        action = gha.md_escape(e.get("action") or e.get("kind") or "?", 30)
        url = _entry_url(e)
        number = e.get("issue") if isinstance(e.get("issue"), int) else e.get("number")
        label = gha.md_escape(f"#{number}" if isinstance(number, int) else "issue", 20)
        ref = f" [{label}]({url.replace(')', '%29')})" if url else (f" {label}" if isinstance(number, int) else "")
        checks = [c for c in e.get("checks") or [] if isinstance(c, str)]
        what = (" " + ", ".join(gha.md_code(c, 120) for c in checks[:5]) + (" …" if len(checks) > 5 else "")) if checks else ""
        reason = e.get("reason") or e.get("why")
        why = f" — {gha.md_escape(reason, 300)}" if reason else ""
        out.append(f"- **{action}**{ref}{what}{why}")
    if report.get("dry_run"):
        out.append("\n_Dry run: nothing was filed on GitHub._")
    return "\n".join(out) + "\n"


def counts_line(results: dict | None) -> str:
    rows = (results or {}).get("checks") or []
    failing = _failing(results)
    text = f"**{len(rows)}** checks, **{len(failing)}** failing, **{len(_regressions(results))}** new"
    if results is not None and not results.get("complete", True):
        text += " — ⚠️ the sweep is incomplete (interrupted, or shards missing)"
    return text


# ---------------------------------------------------------------- the stages


# Events whose check job runs code an outsider controls (a pull request's head).
UNTRUSTED_CODE_EVENTS = ("issue_comment", "pull_request_target")


def tokens_present(ctx: Context) -> list[str]:
    """What in this process's environment is a credential (by name): the `github-token` input and
    secret-like variables. Model code started from here can read all of it."""
    names = ["the github-token input"] if ctx.inputs.token else []
    for key in gha.secret_like_env(ctx.env):
        if key.upper().replace("-", "_") != "INPUT_GITHUB_TOKEN":
            names.append(f"${key}")
    return names


def pr_from_fork(ctx: Context) -> bool:
    """A pull_request event whose head is not this repository (unknown counts as a fork)."""
    ev = ctx.event
    head = ev.obj("pull_request", "head", "repo").get("full_name")
    base = (ev.obj("pull_request", "base", "repo").get("full_name") or ev.obj("repository").get("full_name")
            or ctx.env.get("GITHUB_REPOSITORY"))
    return not (isinstance(head, str) and isinstance(base, str) and head == base)


def untrusted_code_event(ctx: Context) -> bool:
    name = ctx.event.name
    return name in UNTRUSTED_CODE_EVENTS or (name == "pull_request" and pr_from_fork(ctx))


def guard_model_code(ctx: Context) -> None:
    """Before check runs model code: refuse with a token on events whose code is untrusted; warn
    whenever stage check has one. Scrubbing the child's environment does not protect a token: code
    of the same user reads it from /proc/<pid>/environ of this process and of the runner."""
    present = tokens_present(ctx)
    if not present:
        return
    what = ", ".join(present)
    if untrusted_code_event(ctx):
        raise UsageError(
            f"refusing to run model code on a {ctx.event.name} event while a token is present ({what}): "
            "the pull request's code could read it from /proc/<pid>/environ. Run the checks in a job "
            "with `github-token: ''` and no secrets (stage check), and file from a separate job (stage report)")
    if ctx.inputs.stage == "check":
        gha_warn(ctx, f"stage check received a token ({what}); the model code in this job can read it "
                      "(/proc/<pid>/environ), so give the check job `github-token: ''` and no secrets",
                 title="minify-bot: token in the check job")


def stage_check(ctx: Context, run, request: slash.SlashCommand | None = None) -> int:
    """check (and minify): returns check's exit code (0 or 1), raises on usage/infra errors."""
    i = ctx.inputs
    argv = ["--out", str(ctx.out)]
    flags = _command_flags("check") or set()

    def add(flag: str, value, input_name: str, default_empty=("",)) -> None:
        if value in default_empty or value is None:
            return
        if flag not in flags:
            gha_warn(ctx, f"input {input_name!r} is not supported by this build's `check`; ignored")
            return
        argv.extend([flag, str(value)] if value is not True else [flag])

    models = list(request.models) if request and request.models else i.models
    if models:
        add("--models", ",".join(models), "models")
    suite = i.suite or ("yaml" if i.config_file else "command" if i.command else "")
    add("--suite", suite, "suite")
    add("--model-file", i.config_file, "config-file")
    add("--command", i.command, "command")
    add("--pytorch", i.pytorch_path, "pytorch-path")
    add("--harness-suite", i.harness_suite, "harness-suite")
    add("--backend", (request.backend if request and request.backend else i.backend), "backend")
    add("--mode", (request.mode if request and request.mode else i.mode), "mode")
    add("--dtype", (request.dtype if request and request.dtype else i.dtype), "dtype")
    add("--device", i.device, "device")
    add("--dynamic", True if i.dynamic else "", "dynamic")
    add("--timeout", i.timeout, "timeout")
    add("--shard", i.shard, "shard")
    add("--baseline", i.baseline, "baseline")
    overrides = list(i.config) + ([f"{k}={v}" for k, v in request.config.items()] if request else [])
    for item in overrides:
        add("--config", item, "config")

    with ctx.cmds.group("minify-bot check"):
        rc = run("check", argv)
    ctx.produced_results = True
    if rc == EXIT_USAGE:
        raise UsageError("`minify-bot check` rejected its input (see the log above)")
    if rc not in (EXIT_OK, EXIT_FAILURES):
        raise InfraError(f"`minify-bot check` failed with exit code {rc}")
    results = _load(ctx.out / "results.json")
    if results is None:
        raise InfraError(f"`minify-bot check` wrote no readable {ctx.out / 'results.json'}")
    for row in _failing(results):
        gha_error(ctx, f"{row.get('id')}: {row.get('status')} ({row.get('failure_class')})", title="minify-bot: check failed")

    if _failing(results) and i.minify:
        mflags = _command_flags("minify") or set()
        margv = ["--out", str(ctx.out)]
        for flag, value, name in (("--repro-after", i.repro_after, "repro-after"),
                                  ("--repro-level", i.repro_level, "repro-level"),
                                  ("--verification-runs", i.verification_runs, "verification-runs"),
                                  ("--budget", i.minify_budget, "minify-budget")):
            if value in ("", None):
                continue
            alt = {"--verification-runs": "--verify-runs"}.get(flag)
            use = flag if flag in mflags else alt if alt in mflags else None
            if use is None:
                gha_warn(ctx, f"input {name!r} is not supported by this build's `minify`; ignored")
                continue
            margv += [use, str(value)]
        try:
            with ctx.cmds.group(f"minify-bot minify ({len(_failing(results))} failing)"):
                mrc = run("minify", margv)
        except InfraError as exc:
            gha_warn(ctx, f"minification did not run ({exc}); failures are reported without minimized repros")
            return rc
        if mrc == EXIT_USAGE:
            raise UsageError("`minify-bot minify` rejected its input (see the log above)")
        if mrc not in (EXIT_OK, EXIT_FAILURES):
            gha_warn(ctx, f"`minify-bot minify` failed (exit code {mrc}); failures are reported without minimized repros")
    elif _failing(results):
        ctx.notes.append("minification is off (input `minify: false`)")
    return rc


def stage_report(ctx: Context, run, *, file_issues: bool, pr_run: bool = False) -> dict | None:
    """report: returns report.json (or None). Raises on usage errors.

    `pr_run`: the results come from an unmerged pull request: report only creates issues or
    comments on them; it never counts them as passing runs, closes or reopens anything."""
    i = ctx.inputs
    flags = _command_flags("report") or set()
    argv = ["--out", str(ctx.out)] if "--out" in flags else [str(ctx.out)]
    local = i.tracker == "local" or i.dry_run or not file_issues
    if local:
        if "--dry-run" in flags:
            argv.append("--dry-run")
        elif "--tracker" in flags:
            argv += ["--tracker", "local"]
    elif "--tracker" in flags:
        argv += ["--tracker", "github"]
    if not local and "--repo" in flags:
        argv += ["--repo", gha.repository(ctx.env)]
    if i.labels:
        if "--label" in flags:
            argv += ["--label", i.labels[0]]
        if len(i.labels) > 1:
            gha_warn(ctx, "input 'labels': only the first label (the bot's own) is used by this build's `report`")
    if i.max_new_issues is not None:
        if "--max-new" in flags:
            argv += ["--max-new", str(i.max_new_issues)]
        elif "--max-new-issues" in flags:
            argv += ["--max-new-issues", str(i.max_new_issues)]
    if not local and i.bot_login and "--bot-login" in flags:
        argv += ["--bot-login", i.bot_login]
    if i.artifact_url and "--artifact-url" in flags:
        argv += ["--artifact-url", i.artifact_url]
    action_templates = Path(ctx.env.get("GITHUB_ACTION_PATH") or "/nonexistent") / "templates"
    if "--templates" in flags and action_templates.is_dir():
        argv += ["--templates", str(action_templates)]  # the action's own templates, whatever the install
    if "--run-url" in flags and gha.run_url(ctx.env):
        argv += ["--run-url", gha.run_url(ctx.env)]
    if i.command and "--command" in flags:
        argv += ["--command", i.command]  # the workflow's own command: shown verbatim in issues
    if pr_run:
        if "--pr-run" not in flags:
            raise InfraError("this build's `report` cannot report pull-request runs safely (no --pr-run)")
        argv.append("--pr-run")
    if not local and not i.token:
        raise UsageError("filing issues needs the `github-token` input (or set `dry-run: true`)")
    try:
        (ctx.out / "report.json").unlink()  # never read a stale (or planted) report as this run's
    except OSError:
        pass
    with ctx.cmds.group("minify-bot report" + (" (dry run)" if local else "")):
        rc = run("report", argv, with_token=not local)
    ctx.produced_results = True
    if rc == EXIT_USAGE:
        raise UsageError("`minify-bot report` rejected its input (see the log above)")
    if rc not in (EXIT_OK, EXIT_FAILURES):
        cause = _report_error(_load(ctx.out / "report.json"))
        raise InfraError("filing issues failed: " + (cause or f"`minify-bot report` exited with code {rc} (see the log)"))
    return _load(ctx.out / "report.json")


def _report_error(report: dict | None) -> str | None:
    """Why report stopped: report.json's `error` (e.g. "... HTTP 403: Resource not accessible")."""
    err = (report or {}).get("error")
    return str(err)[:500] if err else None


def gha_warn(ctx: Context, message: str, title: str | None = None) -> None:
    ctx.cmds.warning(gha.redact(message, ctx.secrets), title=title)
    ctx.notes.append(message)


def gha_error(ctx: Context, message: str, title: str | None = None) -> None:
    ctx.cmds.error(gha.redact(message, ctx.secrets), title=title)


# ---------------------------------------------------------------- pull requests


@dataclass
class PRContext:
    gh: object
    repo: object
    issue: object
    comment: object | None
    login: str


def _pr_context(ctx: Context, number: int, comment_id: int | None) -> PRContext:
    from bot import pr

    if not ctx.inputs.token:
        raise UsageError("answering on a pull request needs the `github-token` input")
    gh = pr.client(ctx.inputs.token, ctx.env.get("GITHUB_API_URL"))
    try:
        repo = gh.get_repo(gha.repository(ctx.env), lazy=True)
        issue = repo.get_issue(number)
        comment = issue.get_comment(comment_id) if comment_id else None
    except Exception as exc:  # noqa: BLE001 - GitHub unreachable or the objects are gone
        raise InfraError(f"cannot read pull request #{number}: {_http_reason(exc)}") from None
    return PRContext(gh, repo, issue, comment, pr.bot_login(gh, ctx.inputs.bot_login or None))


def _http_reason(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    return f"HTTP {status}" if status else type(exc).__name__


def _react(ctx: Context, prc: PRContext, content: str) -> None:
    from bot import pr

    if prc.comment is None:
        return
    err = pr.react(prc.comment, content)
    if err:
        gha_warn(ctx, err)


def _reply(ctx: Context, prc: PRContext, text: str) -> None:
    from bot import pr

    try:
        pr.reply(prc.issue, text)
        ctx.answered = True
    except Exception as exc:  # noqa: BLE001
        gha_warn(ctx, f"could not reply on the pull request ({_http_reason(exc)})")


def _usage_block() -> str:
    return "```\n" + slash.USAGE.replace("```", "'''") + "```\n"


def sticky_body(ctx: Context, *, requested: str | None, sha: str | None, results: dict | None,
                report: dict | None, problem: str | None = None) -> str:
    from bot import pr

    lines = [pr.STICKY_MARKER, "### minify-bot results", ""]
    if requested:
        lines.append(requested)
    if sha:
        lines.append(f"Commit: `{sha[:12]}`" + (f" · [workflow run]({gha.run_url(ctx.env)})" if gha.run_url(ctx.env) else ""))
    lines.append("")
    if problem:
        lines += [f"⚠️ {gha.md_escape(problem, 500)}", ""]
    if results is not None:
        lines += [counts_line(results), "", results_table(results, ctx.out / "failures", _report_entries(report))]
        if report is not None and _report_entries(report):
            lines += ["**Issues**", "", actions_list(report)]
        if _failing(results) and not _issue_urls(report):
            lines.append("_Failures found on a pull request are reported here only; no issues were filed._\n")
    lines.append("<sub>Updated in place by minify-bot. Comment `/minify help` for the command syntax.</sub>")
    return "\n".join(lines) + "\n"


def handle_comment(ctx: Context) -> tuple[slash.SlashCommand | None, dict | None, PRContext | None]:
    """The authorize step of a /minify comment. Returns (command, request, pr context); the
    request is None when nothing should run (not a command, help, or refused)."""
    from bot import pr

    payload = ctx.event.payload
    comment = payload.get("comment")
    issue = payload.get("issue")
    if not isinstance(comment, dict) or not isinstance(issue, dict):
        raise UsageError("the issue_comment payload has no comment or issue object")
    if payload.get("action") not in (None, "created"):
        if not isinstance(payload.get("action"), str):
            raise UsageError("the issue_comment payload's action is not a string")
        ctx.notes.append(f"ignored: the comment was {payload.get('action')[:40]}, only new comments are commands")
        return None, None, None
    if not isinstance(comment.get("body"), (str, type(None))):
        raise UsageError("the issue_comment payload's comment body is not a string")
    cmd = slash.parse(comment.get("body"))
    if cmd is None:
        ctx.notes.append("ignored: the comment holds no /minify command")
        return None, None, None
    if not issue.get("pull_request"):
        ctx.notes.append("ignored: /minify works on pull requests only")
        return cmd, None, None
    number, comment_id = issue.get("number"), comment.get("id")
    if (not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 2 ** 31
            or not isinstance(comment_id, int) or isinstance(comment_id, bool) or not 0 < comment_id < 2 ** 63):
        raise UsageError("the issue_comment payload lacks a valid issue number or comment id")
    prc = _pr_context(ctx, number, comment_id)
    ctx.prc = prc  # from here on, whatever goes wrong is answered in the pull request
    user = comment.get("user")
    if not isinstance(user, dict):
        raise UsageError("the issue_comment payload's comment.user is not an object")
    login, assoc = user.get("login"), comment.get("author_association")
    if not isinstance(login, str) or not re.fullmatch(r"[A-Za-z0-9\[\]_.-]{1,64}", login):
        raise UsageError("the issue_comment payload lacks a valid author login")
    if assoc is not None and not isinstance(assoc, str):
        raise UsageError("the issue_comment payload's author_association is not a string")
    if login == prc.login or user.get("type") == "Bot":
        ctx.prc = None  # never answer a bot
    ctx.requester = login
    if login == prc.login or user.get("type") == "Bot":
        ctx.notes.append("ignored: the comment was written by a bot")
        return None, None, None
    ctx.output("pr-number", str(number))
    ctx.output("comment-id", str(comment_id))
    _react(ctx, prc, pr.REACTION_RECEIVED)

    if cmd.kind == "help":
        _reply(ctx, prc, "Usage of `/minify`:\n\n" + _usage_block())
        ctx.notes.append("answered /minify help")
        return cmd, None, prc
    if cmd.kind == "invalid":
        _react(ctx, prc, pr.REACTION_REJECTED)
        _reply(ctx, prc, f"@{login} I could not run that command: {gha.md_escape(cmd.error, 300)}\n\n" + _usage_block())
        raise UsageError(f"malformed /minify command: {cmd.error}")

    auth = pr.authorize(prc.repo, login, assoc)
    if not auth.allowed:
        _react(ctx, prc, pr.REACTION_REJECTED)
        _reply(ctx, prc, f"@{login} I did not run `/minify`: {gha.md_escape(auth.reason, 300)}.")
        ctx.output("authorized", "false")
        raise UsageError(f"/minify refused: {auth.reason}")
    try:
        pull = prc.repo.get_pull(number)
        sha = pr.pin_head(prc.repo, pull, cmd.sha, commented_at=_comment_time(prc),
                          timeline=prc.issue.get_timeline())
    except pr.Rejected as exc:
        _react(ctx, prc, pr.REACTION_REJECTED)
        _reply(ctx, prc, f"@{login} I did not run `/minify`: {gha.md_escape(str(exc), 300)}.")
        ctx.output("authorized", "false")
        raise UsageError(f"/minify refused: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - fail closed
        _react(ctx, prc, pr.REACTION_REJECTED)
        _reply(ctx, prc, f"@{login} I did not run `/minify`: could not read the pull request's head commit.")
        ctx.output("authorized", "false")
        raise InfraError(f"cannot read pull request #{number}: {_http_reason(exc)}") from None
    request = slash.to_request(cmd, sha=sha, pr=number, comment_id=comment_id, requested_by=login)
    ctx.output("authorized", "true")
    ctx.output("sha", sha)
    ctx.output("request", json.dumps(request, sort_keys=True))
    ctx.notes.append(f"authorized /minify by @{login} ({auth.permission}) on #{number} at {sha[:12]}")
    return cmd, request, prc


def _comment_time(prc: PRContext):
    """When the comment was written: GitHub's answer for the comment (not the payload's copy)."""
    created = getattr(prc.comment, "created_at", None) if prc.comment is not None else None
    if created is None:
        raise RuntimeError("the comment has no creation time")
    return created


def _requested_line(request: dict) -> str:
    cmd = slash.command_from_request(request)
    return f"Requested by @{gha.md_escape(request['requested_by'], 64)}: {gha.md_escape(cmd.describe(), 500)}"


def _verify_checkout(ctx: Context, expected: str) -> None:
    from bot import pr

    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ctx.workdir, capture_output=True, text=True,
                              timeout=60, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        raise UsageError(f"expected-sha is set but {ctx.workdir} is not a git checkout") from None
    try:
        pr.verify_checkout(expected, head)
    except pr.Rejected as exc:
        raise UsageError(str(exc)) from None


# ---------------------------------------------------------------- orchestration


def _exit_for(ctx: Context, results: dict | None) -> int:
    failing, regressions = _failing(results), _regressions(results)
    if ctx.inputs.fail_on == "failure" and failing:
        return EXIT_FAILURES
    if ctx.inputs.fail_on == "regression" and regressions:
        return EXIT_FAILURES
    return EXIT_OK


def _result_outputs(ctx: Context, results: dict | None, report: dict | None) -> None:
    ctx.output("failure-count", str(len(_failing(results))))
    ctx.output("regression-count", str(len(_regressions(results))))
    ctx.output("issue-urls", "\n".join(_issue_urls(report)))
    ctx.output("run-dir", str(ctx.out))
    ctx.output("results-path", str(ctx.out / "results.json") if results is not None else "")


def _summary_results(ctx: Context, results: dict | None, report: dict | None, title: str) -> None:
    ctx.summary += [f"## {title}", ""]
    if results is None:
        ctx.summary += ["_No results._", ""]
        return
    s = results.get("settings") or {}
    ctx.summary += [counts_line(results), "",
                    "Settings: " + ", ".join(gha.md_escape(f"{k} {s.get(k)}", 80) for k in ("backend", "mode", "dtype", "device", "shard") if s.get(k)), "",
                    results_table(results, ctx.out / "failures", _report_entries(report))]
    if report is not None or ctx.inputs.stage in ("all", "report"):
        ctx.summary += ["### Issues", "", actions_list(report)]


def execute(ctx: Context) -> int:
    i, ev = ctx.inputs, ctx.event
    run = Runner(ctx)
    results = report = None
    stage = i.stage

    if ev.name == "issue_comment":
        if stage in ("all", "authorize"):
            cmd, request, prc = handle_comment(ctx)
            ctx.summary += ["## minify-bot: /minify", ""]
            if request is None:
                ctx.summary += [f"- {gha.md_escape(n, 300)}" for n in ctx.notes] or ["_Nothing to do._"]
                ctx.output("authorized", ctx.outputs.get("authorized", "false"))
                return EXIT_OK
            ctx.summary.append(f"- {_requested_line(request)} at `{request['sha'][:12]}`")
            if stage == "authorize":
                return EXIT_OK
            try:
                guard_model_code(ctx)
            except UsageError as exc:
                from bot import pr

                ctx.output("authorized", "false")
                _react(ctx, prc, pr.REACTION_REJECTED)
                _reply(ctx, prc, f"@{ctx.requester} I did not run `/minify`: this workflow would run the pull "
                                 "request's code in the job that holds the token (stage `all`). It needs the "
                                 "split authorize / check / report jobs (see docs/action.md).")
                raise exc
            return _comment_run(ctx, run, request, prc)
        if stage == "check":
            guard_model_code(ctx)
            request = _request_input(ctx)
            if i.expected_sha or request:
                _verify_checkout(ctx, i.expected_sha or request["sha"])
            with ctx.cmds.group("settings"):
                print(f"/minify request: {slash.command_from_request(request).describe()}" if request else "no request")
            rc = stage_check(ctx, run, slash.command_from_request(request) if request else None)
            results = _load(ctx.out / "results.json")
            _result_outputs(ctx, results, None)
            _summary_results(ctx, results, None, "minify-bot: checks of the pull request")
            return _exit_for(ctx, results) if rc in (EXIT_OK, EXIT_FAILURES) else rc
        # stage == report
        request = _request_input(ctx)
        if request is None:
            raise UsageError("stage `report` on a /minify comment needs the `request` input from the authorize step")
        prc = _pr_context(ctx, request["pr"], request.get("comment_id"))
        ctx.prc, ctx.requester = prc, request["requested_by"]
        return _comment_report(ctx, run, request, prc)

    if ev.name not in SWEEP_EVENTS:
        ctx.notes.append(f"event {ev.name!r} is not handled; nothing to do")
        ctx.summary += ["## minify-bot", "", f"_Nothing to do for a {gha.md_escape(ev.name, 50)} event._", ""]
        return EXIT_OK
    if stage == "authorize":
        raise UsageError("stage `authorize` is for issue_comment events")
    is_pr = ev.name in ("pull_request", "pull_request_target")
    if stage in ("all", "check"):
        try:
            guard_model_code(ctx)
        except UsageError as exc:
            if is_pr and stage == "all":
                _pr_problem_for_event(ctx, str(exc))
            raise
        if i.expected_sha:
            _verify_checkout(ctx, i.expected_sha)
        stage_check(ctx, run)
        results = _load(ctx.out / "results.json")
    if stage in ("all", "report"):
        if stage == "report":
            results = _merge_shards(ctx)
        report = stage_report(ctx, run, file_issues=not is_pr, pr_run=is_pr)
        results = _load(ctx.out / "results.json")
        if is_pr:
            _pr_sticky_for_event(ctx, results, report)
    _result_outputs(ctx, results, report)
    _summary_results(ctx, results, report, "minify-bot results" + (f" (shard {i.shard})" if i.shard else ""))
    return _exit_for(ctx, results)


def _request_input(ctx: Context) -> dict | None:
    if not ctx.inputs.request:
        return None
    try:
        return slash.request_from_json(ctx.inputs.request)
    except slash.RequestError as exc:
        raise UsageError(f"input 'request': {exc}") from None


def _merge_shards(ctx: Context) -> dict | None:
    """Stage report: merge (and validate) shard artifacts into the run directory, if given."""
    from bot.commands.merge import expand, merge

    if not ctx.inputs.shards:
        from bot import rundir

        # the run directory may still come from another job: validate it all the same
        if (ctx.out / "results.json").exists():
            rundir.load_untrusted(ctx.out)
        return _load(ctx.out / "results.json")
    with ctx.cmds.group("minify-bot merge"):
        record = merge(expand(ctx.inputs.shards), ctx.out)
        ctx.produced_results = True
        print(f"merged {len(record['shards'])} shard(s): {record['checks']} checks, {record['failures']} failing")
    if record["missing_shards"]:
        gha_warn(ctx, f"shards missing from the merge: {', '.join(record['missing_shards'])}; "
                      "the sweep is incomplete, so nothing is closed as fixed")
    return _load(ctx.out / "results.json")


def _comment_run(ctx: Context, run, request: dict, prc: PRContext) -> int:
    """Stage all on a /minify comment: check (+minify) then report in this job."""
    from bot import pr

    try:
        stage_check(ctx, run, slash.command_from_request(request))
    except BotError as exc:
        _react(ctx, prc, pr.REACTION_REJECTED)
        _sticky(ctx, prc, request, None, None, problem=f"the checks could not run: {exc}")
        raise
    return _comment_report(ctx, run, request, prc)


def _comment_report(ctx: Context, run, request: dict, prc: PRContext) -> int:
    from bot import pr

    if ctx.inputs.stage == "report":
        if ctx.inputs.check_result and ctx.inputs.check_result != "success" and not ctx.inputs.shards:
            _react(ctx, prc, pr.REACTION_REJECTED)
            _sticky(ctx, prc, request, None, None, problem=f"the check job ended with `{ctx.inputs.check_result}`; no results")
            raise InfraError(f"the check job ended with {ctx.inputs.check_result}")
        try:
            results = _merge_shards(ctx)
        except UsageError as exc:
            _react(ctx, prc, pr.REACTION_REJECTED)
            _sticky(ctx, prc, request, None, None, problem=f"the results artifact was rejected: {exc}")
            raise
        if results is None:
            _react(ctx, prc, pr.REACTION_REJECTED)
            _sticky(ctx, prc, request, None, None, problem="the check job produced no results")
            raise InfraError("no results to report")
    report = stage_report(ctx, run, file_issues=ctx.inputs.pr_issues, pr_run=True)
    results = _load(ctx.out / "results.json")
    _sticky(ctx, prc, request, results, report)
    _react(ctx, prc, pr.REACTION_SUCCESS)
    _result_outputs(ctx, results, report)
    _summary_results(ctx, results, report, "minify-bot: /minify results")
    return _exit_for(ctx, results)


def _sticky(ctx: Context, prc: PRContext, request: dict | None, results, report, problem: str | None = None) -> None:
    from bot import pr

    body = sticky_body(ctx, requested=_requested_line(request) if request else None,
                       sha=request["sha"] if request else None, results=results, report=report, problem=problem)
    try:
        comment, how = pr.upsert_sticky(prc.issue, prc.login, body)
        ctx.answered = True
        ctx.output("comment-url", getattr(comment, "html_url", "") or "")
        ctx.notes.append(f"results comment {how}")
    except Exception as exc:  # noqa: BLE001
        gha_warn(ctx, f"could not write the results comment ({_http_reason(exc)})")


def _event_pr_number(ctx: Context) -> int | None:
    number = ctx.event.obj("pull_request").get("number") or ctx.event.payload.get("number")
    return number if isinstance(number, int) and not isinstance(number, bool) and 0 < number < 2 ** 31 else None


def _pr_problem_for_event(ctx: Context, problem: str) -> None:
    """Say in the pull request's results comment why nothing ran (best effort: the token may be read-only)."""
    number = _event_pr_number(ctx)
    if number is None or not ctx.inputs.token:
        return
    from bot import pr

    try:
        prc = _pr_context(ctx, number, None)
        pr.upsert_sticky(prc.issue, prc.login, sticky_body(ctx, requested=None, sha=None, results=None,
                                                           report=None, problem=problem))
    except Exception as exc:  # noqa: BLE001
        gha_warn(ctx, f"could not answer on the pull request ({_http_reason(exc)})")


def _pr_sticky_for_event(ctx: Context, results, report) -> None:
    number = _event_pr_number(ctx)
    if number is None or not ctx.inputs.token:
        return
    try:
        prc = _pr_context(ctx, number, None)
    except BotError as exc:
        gha_warn(ctx, f"could not answer on the pull request: {exc}")
        return
    sha = ctx.event.obj("pull_request", "head").get("sha")
    body = sticky_body(ctx, requested=None, sha=sha if isinstance(sha, str) else None, results=results, report=report)
    from bot import pr

    try:
        pr.upsert_sticky(prc.issue, prc.login, body)
    except Exception as exc:  # noqa: BLE001 - fork PRs get a read-only token
        gha_warn(ctx, f"could not write the results comment ({_http_reason(exc)}); see the job summary")


# ---------------------------------------------------------------- entry point


def _fix_ownership(ctx: Context) -> None:
    """Running as root in a job container: hand what we wrote back to the workspace's owner, so
    the runner (a normal user on the host) can clean it up."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    ws = ctx.env.get("GITHUB_WORKSPACE")
    if not ws or not os.path.isdir(ws) or not ctx.out.exists():
        return
    st = os.stat(ws)
    if st.st_uid == 0:
        return
    for dirpath, dirnames, filenames in os.walk(ctx.out):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            try:
                os.chown(name, st.st_uid, st.st_gid, follow_symlinks=False)
            except OSError:
                pass


def run(args) -> int:
    env = dict(os.environ)
    cmds = gha.Commands()
    started = time.monotonic()
    ctx: Context | None = None
    code = EXIT_INTERNAL
    try:
        inputs = Inputs.read(env)
        if args.stage:
            inputs.stage = args.stage
        if args.dry_run:
            inputs.dry_run = True
        # short values are not secrets worth masking: masking `1` would turn outputs into `***`
        secrets = [s for s in dict.fromkeys([inputs.token, *gha.secret_like_env(env).values()]) if gha.is_maskable(s)]
        for s in secrets:
            cmds.add_mask(s)
        event = gha.read_event(env)
        workdir = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
        if inputs.working_directory:
            workdir = workdir / inputs.working_directory
            if not workdir.is_dir():
                raise UsageError(f"input 'working-directory': {inputs.working_directory} is not a directory")
        out = Path(inputs.out) if inputs.out else _default_out(env)
        if not out.is_absolute():
            out = workdir / out
        ctx = Context(env=env, inputs=inputs, event=event, cmds=cmds, workdir=workdir, out=out, secrets=secrets)
        ctx.output("run-dir", str(out))
        code = execute(ctx)
    except BotError as exc:
        usage = isinstance(exc, UsageError)
        reason = gha.redact(str(exc), ctx.secrets if ctx else [])
        cmds.error(reason, title="minify-bot: bad input" if usage else "minify-bot: error")
        code = exc.exit_code
        label = "Bad input" if usage else "Error"
        _summarize_failure(ctx, env, f"❌ **{label}:** {gha.md_escape(reason, 1000)}")
        _answer_failure(ctx, reason)
        _finish(ctx, env, code, started)
        raise
    except Exception as exc:  # noqa: BLE001 - a bug or input nobody foresaw: exit 3, never a traceback
        reason = gha.redact(f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500],
                            ctx.secrets if ctx else [])
        cmds.error(reason, title="minify-bot: internal error")
        code = EXIT_INTERNAL
        _save_traceback(ctx)
        _summarize_failure(ctx, env, f"❌ **Internal error:** {gha.md_escape(reason, 1000)} "
                                     "(details in action-error.txt in the run directory)")
        _answer_failure(ctx, "an internal error stopped it")
        _finish(ctx, env, code, started)
        raise InfraError(reason) from None
    _finish(ctx, env, code, started)
    return code


def _summarize_failure(ctx: Context | None, env: dict, line: str) -> None:
    if ctx is not None:
        ctx.summary += ["", line, ""]
    else:
        gha.append_summary(f"## minify-bot\n\n{line}\n", env)


def _save_traceback(ctx: Context | None) -> None:
    """The traceback of an unexpected error goes into the run directory, not the log."""
    import traceback

    if ctx is None:
        return
    try:
        ctx.out.mkdir(parents=True, exist_ok=True)
        (ctx.out / "action-error.txt").write_text(gha.redact(traceback.format_exc(), ctx.secrets), encoding="utf-8")
    except Exception:  # noqa: BLE001
        pass


def _answer_failure(ctx: Context | None, reason: str) -> None:
    """On /minify, the commenter always hears back: a confused reaction and a one-line reply,
    unless a reply or results comment already said what happened."""
    if ctx is None or ctx.prc is None or ctx.answered:
        return
    from bot import pr

    try:
        _react(ctx, ctx.prc, pr.REACTION_REJECTED)
        who = f"@{ctx.requester} " if ctx.requester else ""
        _reply(ctx, ctx.prc, f"{who}`/minify` did not finish: {gha.md_escape(reason, 300)}.")
    except Exception:  # noqa: BLE001 - answering must not hide the original error
        pass


def _finish(ctx: Context | None, env: dict, code: int, started: float) -> None:
    try:
        _write_finish(ctx, env, code, started)
    except Exception as exc:  # noqa: BLE001 - the runner's files are gone or unwritable
        print(f"minify-bot action: error: could not write the outputs or summary ({type(exc).__name__})",
              file=sys.stderr)


def _write_finish(ctx: Context | None, env: dict, code: int, started: float) -> None:
    if ctx is None:
        gha.set_output("exit-code", str(code), env)
        return
    ctx.output("exit-code", str(code))
    if "failure-count" not in ctx.outputs and ctx.produced_results:
        # an error after the checks ran: still say what was found
        results = _load(ctx.out / "results.json")
        if results is not None:
            report = _load(ctx.out / "report.json")
            _result_outputs(ctx, results, report)
            _summary_results(ctx, results, report, "minify-bot results (incomplete run)")
    summary = "\n".join(ctx.summary).rstrip() + "\n"
    if ctx.notes:
        summary += "\n<details><summary>Notes</summary>\n\n" + "\n".join(
            f"- {gha.md_escape(n, 500)}" for n in dict.fromkeys(ctx.notes)) + "\n\n</details>\n"
    summary += f"\n<sub>minify-bot {ctx.inputs.stage} stage, {ctx.event.name} event, {time.monotonic() - started:.0f} s</sub>\n"
    summary = gha.redact(summary, ctx.secrets)
    try:
        ctx.out.mkdir(parents=True, exist_ok=True)
        path = ctx.out / "action-summary.md"
        path.write_text(summary, encoding="utf-8")
        ctx.output("summary-path", str(path))
    except OSError:
        ctx.output("summary-path", "")
    gha.append_summary(summary, env)
    for name, value in ctx.outputs.items():
        gha.set_output(name, gha.redact(str(value), ctx.secrets), env)
    _fix_ownership(ctx)
