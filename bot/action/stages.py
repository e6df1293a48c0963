"""The Action's stages: check (+ minify), merge and report, each in its own process.

Separate processes on purpose: `run` and `selftest` call the stages as functions, but the Action
runs `minify-bot check / minify / report` as child processes so that the token never reaches the
process that runs model code. `check` and `minify` get a scrubbed environment (no token, no
secret-like variables); only `report`, which runs no model code, is handed the token. A scrubbed
environment is still no boundary against code of the same user (it reads /proc/<pid>/environ of
its ancestors), which is why ``guard_model_code`` refuses to run model code at all while a token
is present on events whose code is untrusted.

The command lines come from the typed stage options (bot/options.py) and nothing else.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from bot import gha, proc, rundir, slash
from bot.action.context import Context, error, warn
from bot.action.inputs import number_input
from bot.action.results import failing, load, report_error
from bot.errors import EXIT_FAILURES, EXIT_OK, EXIT_USAGE, InfraError, UsageError
from bot.options import BisectOptions, CheckOptions, MinifyOptions, ReportStageOptions, to_argv
from bot.records import ReportDoc, ResultsDoc
from bot.report import known as known_bugs

STAGE_TIMEOUT = 6 * 3600.0
# `python -c` without the working directory on sys.path: the workspace (maybe a pull request's
# checkout) must never shadow the installed bot package.
LAUNCH = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
          "from bot.cli import main; sys.exit(main())")


def echo_line(command: str, argv: list[str]) -> str:
    """The `$ minify-bot ...` line the log shows: one line whatever the arguments hold (a line break
    in an argument would start a new log line, where `::error ...` is a live workflow command)."""
    text = f"$ minify-bot {command} {' '.join(shlex.quote(a) for a in argv)}"
    return re.sub(r"[\x00-\x1f\x7f\x85\u2028\u2029]", lambda m: f"\\x{ord(m.group(0)):02x}", text)


_STAGE_ERROR = re.compile(r"minify-bot [a-z-]+: ((?:internal )?error: .+)")


class Runner:
    """Runs `python -m bot <command>` with a timeout, its output fenced off from command processing."""

    def __init__(self, ctx: "Context"):
        self.ctx = ctx
        self.last_error: str | None = None  # the last `minify-bot <stage>: error: ...` line a stage printed

    def _line(self, line: str) -> None:
        m = _STAGE_ERROR.match(line.strip())
        if m:
            self.last_error = m.group(1)[:300]
        self.ctx.cmds.stream.write(gha.redact(line, self.ctx.secrets))

    def __call__(self, command: str, argv: list[str], *, with_token: bool = False,
                 timeout: float = STAGE_TIMEOUT) -> int:
        ctx = self.ctx
        env = dict(os.environ) if with_token else gha.scrubbed_env(os.environ)
        env.pop("GITHUB_OUTPUT", None)  # only this process writes outputs and the summary
        env.pop("GITHUB_STEP_SUMMARY", None)
        env["PYTHONUNBUFFERED"] = "1"
        if with_token and ctx.inputs.token:
            env["GITHUB_TOKEN"] = ctx.inputs.token
        # the token's process reads no bytecode that model code could have left in the tree, and no
        # user site-packages (bot/action/secrets.py)
        pycache = tempfile.mkdtemp(prefix="minify-bot-pycache-") if with_token else None
        isolated = ["-s", "-X", f"pycache_prefix={pycache}"] if pycache else []
        cmd = [sys.executable, *isolated, "-c", LAUNCH, command, *argv]
        ctx.cmds.stream.write(gha.redact(echo_line(command, argv), ctx.secrets) + "\n")
        with ctx.cmds.untrusted():  # model code and error messages must not issue workflow commands
            self.last_error = None
            res = proc.run(cmd, cwd=str(ctx.workdir), env=env, timeout=timeout, on_line=self._line)
            ctx.cmds.stream.flush()
        if pycache:
            shutil.rmtree(pycache, ignore_errors=True)
        if res.error:
            raise InfraError(f"minify-bot {command} could not start: {res.error}")
        if res.timed_out:
            raise InfraError(f"minify-bot {command} was stopped at its time limit ({int(timeout)} s)")
        rc = res.returncode
        if rc < 0:
            raise InfraError(f"minify-bot {command} was killed ({res.signal_name})")
        return rc


def run_stage(run: Runner, opts, *, with_token: bool = False) -> int:
    """One stage in its own process, its command line from its typed options."""
    return run(opts.STAGE, to_argv(opts), with_token=with_token)


# ---------------------------------------------------------------- who may run model code


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
        warn(ctx, f"stage check received a token ({what}); the model code in this job can read it "
                  "(/proc/<pid>/environ), so give the check job `github-token: ''` and no secrets",
             title="minify-bot: token in the check job")


def verify_checkout(ctx: Context, expected: str) -> None:
    from bot import pr

    res = proc.run(["git", "rev-parse", "HEAD"], cwd=str(ctx.workdir), timeout=60, capture=4096)
    if res.error or res.returncode != 0:
        raise UsageError(f"expected-sha is set but {ctx.workdir} is not a git checkout")
    head = res.output.strip()
    try:
        pr.verify_checkout(expected, head)
    except pr.Rejected as exc:
        raise UsageError(str(exc)) from None


# ---------------------------------------------------------------- the stages' options


def check_options(ctx: Context, request: slash.SlashCommand | None = None) -> CheckOptions:
    """The workflow's check options (its inputs), with a /minify request's settings over them."""
    i = ctx.inputs
    base = CheckOptions(
        out=str(ctx.out), models=list(i.models),
        suite=i.suite or ("yaml" if i.config_file else "command" if i.command else "") or None,
        model_file=i.config_file or None, command=i.command or None, pytorch=i.pytorch_path or None,
        harness_suite=i.harness_suite or None, backend=i.backend or None, mode=i.mode or None,
        dtype=i.dtype or None, device=i.device or None, dynamic=True if i.dynamic else None,
        timeout=number_input("timeout", i.timeout), shard=i.shard or None, baseline=i.baseline or None,
        config=list(i.config))
    return request.check_options(base) if request else base


def minify_options(ctx: Context) -> MinifyOptions:
    i = ctx.inputs
    return MinifyOptions(out=str(ctx.out), repro_after=i.repro_after or None,
                         repro_level=number_input("repro-level", i.repro_level, int),
                         verify_runs=i.verification_runs, budget=number_input("minify-budget", i.minify_budget),
                         reminify=i.reminify or None)


def _action_templates(ctx: Context) -> Path:
    return Path(ctx.env.get("GITHUB_ACTION_PATH") or "/nonexistent") / "templates"


def report_options(ctx: Context, *, local: bool, pr_run: bool) -> ReportStageOptions:
    i = ctx.inputs
    action_templates = _action_templates(ctx)
    return ReportStageOptions(
        out=str(ctx.out), dry_run=True if local else None, tracker=None if local else "github",
        repo=None if local else gha.repository(ctx.env), label=i.labels[0] if i.labels else None,
        max_new=i.max_new_issues, bot_login=(i.bot_login or None) if not local else None,
        artifact_url=i.artifact_url or None,
        # the action's own templates, whatever the install
        templates=str(action_templates) if action_templates.is_dir() else None,
        run_url=gha.run_url(ctx.env) or None,
        trusted_commands=[i.command] if i.command else [],  # the workflow's own command: shown verbatim in issues
        pr_run=True if pr_run else None)


# ---------------------------------------------------------------- the stages


def stage_check(ctx: Context, run, request: slash.SlashCommand | None = None) -> int:
    """check (and minify): returns check's exit code (0 or 1), raises on usage/infra errors. Whatever
    model code left running (a detached daemon) is stopped before this returns, so nothing of it
    is alive when the report stage, the only one given the token, starts."""
    from bot.action.secrets import record_code

    record_code([_action_templates(ctx)])  # what the report would load, before any model code runs
    try:
        return _check_and_minify(ctx, run, request)
    finally:
        from bot.action.secrets import reap_strays

        stopped = reap_strays()
        if stopped:
            warn(ctx, f"stopped {stopped} process(es) that the checked code left running after its stages ended")


def _check_and_minify(ctx: Context, run, request: slash.SlashCommand | None = None) -> int:
    opts = check_options(ctx, request)
    with ctx.cmds.group("minify-bot check"):
        rc = run_stage(run, opts)
    ctx.produced_results = True
    if rc == EXIT_USAGE:
        raise UsageError("`minify-bot check` rejected its input (see the log above)")
    if rc not in (EXIT_OK, EXIT_FAILURES):
        cause = getattr(run, "last_error", None)
        raise InfraError(f"`minify-bot check` failed with exit code {rc}"
                         + (f": {gha.redact(cause, ctx.secrets)}" if cause else ""))
    results = load(ctx.out / rundir.RESULTS)
    if results is None:
        raise InfraError(f"`minify-bot check` wrote no readable {ctx.out / rundir.RESULTS}")
    for row in failing(results)[:50]:  # results.json is written next to model code: bounded text
        error(ctx, f"{str(row.id)[:200]}: {str(row.status)[:40]} ({str(row.failure_class)[:40]})",
              title="minify-bot: check failed")

    if failing(results) and ctx.inputs.minify:
        # known.json: open issues' verified repros (the token stays here)
        known_bugs.for_action(ctx.out, ctx.inputs, ctx.env)
        mopts = minify_options(ctx)
        try:
            with ctx.cmds.group(f"minify-bot minify ({len(failing(results))} failing)"):
                mrc = run_stage(run, mopts)
        except InfraError as exc:
            warn(ctx, f"minification did not run ({exc}); failures are reported without minimized repros")
            return rc
        if mrc == EXIT_USAGE:
            raise UsageError("`minify-bot minify` rejected its input (see the log above)")
        if mrc not in (EXIT_OK, EXIT_FAILURES):
            warn(ctx, f"`minify-bot minify` failed (exit code {mrc}); failures are reported without minimized repros")
        elif ctx.inputs.builds or ctx.inputs.builds_file:
            _bisect_builds(ctx, run)
    elif failing(results):
        ctx.notes.append("minification is off (input `minify: false`)")
    return rc


def bisect_options(ctx: Context) -> BisectOptions:
    i = ctx.inputs
    return BisectOptions(out=str(ctx.out), build=list(i.builds), builds_file=i.builds_file or None,
                         verify_runs=i.verification_runs)


def _bisect_builds(ctx: Context, run) -> None:
    """Each verified repro over the workflow's builds: a tokenless stage like minify (it runs the
    repros); its answer goes into failure.json for the report. A failure here costs only the answer."""
    try:
        with ctx.cmds.group("minify-bot bisect"):
            brc = run_stage(run, bisect_options(ctx))
    except InfraError as exc:
        warn(ctx, f"bisect over the builds did not run ({exc}); issues will not say which build broke or fixed it")
        return
    if brc == EXIT_USAGE:
        raise UsageError("`minify-bot bisect` rejected its input (see the log above): check the builds inputs")
    if brc not in (EXIT_OK, EXIT_FAILURES):
        warn(ctx, f"`minify-bot bisect` failed (exit code {brc}); issues will not say which build broke or fixed it")


def stage_report(ctx: Context, run, *, file_issues: bool, pr_run: bool = False) -> ReportDoc | None:
    """report: returns report.json (or None). Raises on usage errors.

    `pr_run`: the results come from an unmerged pull request: report only creates issues or
    comments on them; it never counts them as passing runs, closes or reopens anything."""
    i = ctx.inputs
    local = i.tracker == "local" or i.dry_run or not file_issues
    if len(i.labels) > 1:
        warn(ctx, "input 'labels': only the first label (the bot's own) is used by this build's `report`")
    opts = report_options(ctx, local=local, pr_run=pr_run)
    if not local and not i.token:
        raise UsageError("filing issues needs the `github-token` input (or set `dry-run: true`)")
    try:
        (ctx.out / rundir.REPORT).unlink()  # never read a stale (or planted) report as this run's
    except OSError:
        pass
    if not local:
        from bot.action.secrets import code_changes

        touched = code_changes()
        if touched:
            raise InfraError(
                f"not filing: {len(touched)} file(s) the report stage would load changed while the checked code ran "
                f"({', '.join(touched[:3])}); the token is not handed to a process that could run them")
    with ctx.cmds.group("minify-bot report" + (" (dry run)" if local else "")):
        rc = run_stage(run, opts, with_token=not local)
    ctx.produced_results = True
    if rc == EXIT_USAGE:
        raise UsageError("`minify-bot report` rejected its input (see the log above)")
    if rc != EXIT_OK:  # report never finds failures: any other exit is a crash, never "failures found"
        cause = report_error(load(ctx.out / rundir.REPORT))
        raise InfraError("filing issues failed: "
                         + (cause or f"`minify-bot report` exited with code {rc} (see the log)"))
    return load(ctx.out / rundir.REPORT)


def merge_shards(ctx: Context) -> ResultsDoc | None:
    """Stage report: merge (and validate) shard artifacts into the run directory, if given."""
    from bot.merge import expand, merge

    if not ctx.inputs.shards:
        # the run directory may still come from another job: validate it all the same
        if (ctx.out / rundir.RESULTS).exists():
            rundir.load_untrusted(ctx.out)
        return load(ctx.out / rundir.RESULTS)
    with ctx.cmds.group("minify-bot merge"):
        record = merge(expand(ctx.inputs.shards), ctx.out)
        ctx.produced_results = True
        print(record.summary())
    if record.missing_shards:
        warn(ctx, f"shards missing from the merge: {', '.join(record.missing_shards)}; "
                  "the sweep is incomplete, so nothing is closed as fixed")
    return load(ctx.out / rundir.RESULTS)
