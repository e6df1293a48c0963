"""The Action's stages: check (+ minify), merge and report, each in its own process.

The token and model code never share a job: the stages that run model code (check, minify,
bisect, known repros) run in a job that holds no credential at all, and ``guard_model_code``
refuses to start them while this step has one (the `github-token` input, a secret-like
variable, or the job token that ``actions/checkout`` keeps in ``.git/config``). Code of the same
user reads whatever a job holds (``/proc/<pid>/environ`` of its ancestors, the runner's files), so
only a job without a token is a boundary; the report stage, which runs no model code, holds the
token in a job of its own and reads the check job's run directory as untrusted data. The
reusable workflow (.github/workflows/sweep.yml) is that layout in one `uses:` line.

Every stage runs as a child process whose environment carries none of the runner's file
commands (GITHUB_ENV, GITHUB_PATH, GITHUB_STATE, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY): outputs and
the summary are written by this process alone.

The command lines come from the typed stage options (bot/options.py) and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import sys
import tempfile
import time
from pathlib import Path

from bot import gha, proc, rundir, slash
from bot.action import harden
from bot.action.context import Context, error, warn
from bot.action.inputs import number_input
from bot.action.results import failing, load, report_error
from bot.errors import EXIT_FAILURES, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, InfraError, Interrupted, UsageError
from bot.options import BisectOptions, CheckOptions, MinifyOptions, ReportOptions, to_argv
from bot.records import ReportDoc, ResultsDoc

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
        proc.adopt_orphans()   # what a stage's children detach is re-parented here, and ended with the stage
        self.last_error: str | None = None  # the last `minify-bot <stage>: error: ...` line a stage printed
        self._user: harden.ModelUser | None | bool = False   # resolved at the first model-code stage
        self.ran_model_code = False
        # the interpreter of the model-code stages: the dependency venv's once the checked code's own
        # dependencies were installed (install_dependencies), else this one
        self.python = sys.executable

    def model_user(self) -> harden.ModelUser | None:
        """The unprivileged user model code runs as (bot/action/harden.py), once per step; None on a
        bare runner, or (with a warning) where that user cannot run this Python."""
        if self._user is False:
            self._user = harden.model_user(self.ctx.env, self.ctx.workdir)
            if self._user is not None and not harden.runnable_by(self._user, sys.executable, self.ctx.out,
                                                                 self.ctx.workdir):
                warn(self.ctx, f"the checked code runs as root: {self._user.name} cannot run {sys.executable} "
                               "or reach the workspace and the run directory (install the bot where every user "
                               "can run it, as the image does)")
                self._user = None
        return self._user

    def _line(self, line: str) -> None:
        m = _STAGE_ERROR.match(line.strip())
        if m:
            self.last_error = m.group(1)[:300]
        self.ctx.cmds.stream.write(gha.redact(line, self.ctx.secrets))

    def __call__(self, command: str, argv: list[str], *, with_token: bool = False,
                 timeout: float = STAGE_TIMEOUT, env_extra: dict | None = None) -> int:
        model_code = command in harden.MODEL_STAGES
        env = gha.stage_env(os.environ, env_extra)
        if with_token and self.ctx.inputs.token:
            env["GITHUB_TOKEN"] = self.ctx.inputs.token
        python = self.python if model_code else sys.executable
        return self.program([python, "-c", LAUNCH, command, *argv], f"minify-bot {command}",
                            echo_line(command, argv), env=env, timeout=timeout, model_code=model_code)

    def program(self, cmd: list[str], name: str, echo: str, *, env: dict, timeout: float = STAGE_TIMEOUT,
                model_code: bool = False) -> int:
        """Run ``cmd`` as a stage runs (fenced output, the step's file commands kept, what it leaves
        behind ended; model code as the unprivileged user, its run directory reclaimed after): its exit
        code; InfraError when it could not start, timed out or was killed."""
        ctx = self.ctx
        self.ran_model_code = self.ran_model_code or model_code
        user = self.model_user() if model_code else None
        if user is not None:   # the run directory and a home of its own, for the stage
            env = {**env, **harden.hand_over(ctx.out, user)}
        ctx.cmds.stream.write(gha.redact(echo, ctx.secrets) + "\n")
        with ctx.cmds.untrusted(), _kept_file_commands(ctx.env):  # model code must not issue workflow commands
            self.last_error = None
            try:
                res = proc.run(cmd, cwd=str(ctx.workdir), env=env, timeout=timeout, on_line=self._line,
                               user=(user.uid, user.gid) if user is not None else None)
            finally:
                ctx.cmds.stream.flush()
                stray = proc.end_descendants()
                if model_code:   # no link, device or FIFO it left stays; the files are this process's again
                    harden.reclaim(ctx.out)
        if stray:
            warn(ctx, f"{name} left {stray} process(es) running after it ended (something the "
                      "checked code started and detached): they were killed, so none lives on into the job's "
                      "later steps")
        if res.error:
            raise InfraError(f"{name} could not start: {res.error}")
        if res.timed_out:
            raise InfraError(f"{name} was stopped at its time limit ({int(timeout)} s)")
        rc = res.returncode
        if rc == EXIT_INTERRUPTED or rc == -signal.SIGINT:
            raise Interrupted(f"{name} was interrupted; nothing more runs and nothing is reported (what was "
                              "finished is kept in the run directory)")
        if rc < 0:
            raise InfraError(f"{name} was killed ({res.signal_name})")
        return rc


@contextlib.contextmanager
def _kept_file_commands(env):
    """The runner's file commands of this step (GITHUB_ENV, GITHUB_PATH, GITHUB_STATE, GITHUB_OUTPUT,
    GITHUB_STEP_SUMMARY) as they were before a stage ran, put back after it: a stage's environment
    does not name them, but code of the same user can find them (the runner keeps them in
    $RUNNER_TEMP/_runner_file_commands/), and a line in GITHUB_ENV (LD_PRELOAD, BASH_ENV) would run
    in every later step of the job, the ones that hold tokens included."""
    kept = {}
    for name in gha.FILE_COMMANDS:
        path = env.get(name)
        if path:
            try:
                kept[path] = Path(path).read_bytes()
            except OSError:
                kept[path] = None
    try:
        yield
    finally:
        for path, data in kept.items():
            try:
                now = Path(path).read_bytes()
            except OSError:
                now = None
            if now != data or Path(path).is_symlink():
                Path(path).unlink(missing_ok=True)   # a link planted there is removed, not written through
                if data is not None:
                    Path(path).write_bytes(data)


def run_stage(run: Runner, opts, *, with_token: bool = False, env_extra: dict | None = None) -> int:
    """One stage in its own process, its command line from its typed options."""
    return run(opts.STAGE, to_argv(opts), with_token=with_token, env_extra=env_extra)


# ---------------------------------------------------------------- who may run model code


def tokens_present(ctx: Context) -> list[str]:
    """What this step holds that is a credential: the `github-token` input, secret-like variables
    (by name or by value), and the job token a checkout kept in ``.git/config``. Model code started
    from here can read all of it."""
    names = ["the github-token input"] if ctx.inputs.token else []
    for key in gha.secret_like_env(ctx.env):
        if key.upper().replace("-", "_") != "INPUT_GITHUB_TOKEN":
            names.append(f"${key}")
    return names + persisted_credentials(ctx.workdir, Path(ctx.env.get("GITHUB_WORKSPACE") or ctx.workdir))


_GIT_CREDENTIAL_KEYS = r"^(http\..*\.extraheader|remote\..*\.url|url\..*\.insteadof)$"
_CREDENTIAL_VALUE = re.compile(r"(?i)\bauthorization\s*:|://[^/\s@]+:[^/\s@]+@")


def persisted_credentials(*dirs: Path) -> list[str]:
    """Where a git checkout among ``dirs`` keeps a credential in its configuration (with the files it
    includes): ``actions/checkout`` without ``persist-credentials: false`` leaves the job token as an
    ``extraheader``; a remote URL can carry one too."""
    found = []
    for d in dict.fromkeys(Path(x) for x in dirs):
        if not (d / ".git").exists():
            continue
        res = proc.run(["git", "-C", str(d), "config", "--includes", "--get-regexp", _GIT_CREDENTIAL_KEYS],
                       timeout=60, capture=1 << 16)
        if res.returncode == 0 and any(_CREDENTIAL_VALUE.search(line) for line in res.output.splitlines()):
            found.append(f"the git credentials persisted in {d}/.git/config (actions/checkout: "
                         "set `persist-credentials: false`)")
    return found


def guard_model_code(ctx: Context) -> None:
    """Before a stage runs model code: refuse while this job holds any credential. Scrubbing the
    child's environment protects nothing: code of the same user reads the token from
    /proc/<pid>/environ of this process and of the runner, and from the checkout's files."""
    present = tokens_present(ctx)
    if present:
        raise UsageError(
            f"refusing to run model code (stage {ctx.inputs.stage}) in a job that holds a credential "
            f"({', '.join(present)}): the checked code could read it. Run check in a job with no token "
            "(`github-token: ''`, no secrets, `persist-credentials: false`) and file from a separate job "
            "(stage report): the reusable workflow .github/workflows/sweep.yml does both (docs/action.md)")


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
        suite=i.suite or ("yaml" if i.model_file or i.config_file else "command" if i.command else "") or None,
        model_file=i.model_file or i.config_file or None, command=i.command or None, pytorch=i.pytorch_path or None,
        harness_suite=i.harness_suite or None, backend=i.backend or None, mode=i.mode or None,
        dtype=i.dtype or None, device=i.device or None, dynamic=True if i.dynamic else None,
        timeout=number_input("timeout", i.timeout), shard=i.shard or None, baseline=i.baseline or None,
        config=list(i.config), seed=number_input("seed", i.seed, int),
        fuzz_count=number_input("fuzz-count", i.fuzz_count, int), fuzz_time=number_input("fuzz-time", i.fuzz_time))
    return request.check_options(base) if request else base


def minify_options(ctx: Context) -> MinifyOptions:
    i = ctx.inputs
    return MinifyOptions(out=str(ctx.out), repro_after=i.repro_after or None,
                         repro_level=number_input("repro-level", i.repro_level, int),
                         verify_runs=i.verification_runs, budget=number_input("minify-budget", i.minify_budget),
                         reminify=i.reminify or None, no_trace=None if i.trace else True)


def report_options(ctx: Context, *, local: bool, pr_run: bool) -> ReportOptions:
    i = ctx.inputs
    return ReportOptions(
        out=str(ctx.out), dry_run=True if local else None, tracker=None if local else "github",
        repo=None if local else gha.repository(ctx.env), label=i.labels[0] if i.labels else None,
        max_new=i.max_new_issues, bot_login=(i.bot_login or None) if not local else None,
        artifact_url=i.artifact_url or None,
        run_url=gha.run_url(ctx.env) or None,
        trusted_commands=[i.command] if i.command else [],  # the workflow's own command: shown verbatim in issues
        pr_run=True if pr_run else None)


# ---------------------------------------------------------------- the stages


def install_dependencies(ctx: Context, run: Runner) -> None:
    """The checked code's own dependencies, before the check, in its working directory: input
    ``requirements`` (a pip requirements file), then input ``setup`` (a bash line), installed into a
    venv of their own layered on the bot's interpreter (``harden.dependency_venv``: pip sees what is
    installed and adds only what is missing; its ``bin`` is first on PATH, so ``pip`` and ``python``
    are that venv's). Installing runs the checked code's packaging (setup.py, build hooks), so it is
    model code: it runs as the model code's user, after ``guard_model_code``, in the job that holds no
    credential, fenced like a stage, and cannot write the installed bot. The model-code stages then
    run with that venv's interpreter. A failing install is an input error (exit 2)."""
    i = ctx.inputs
    if not (i.requirements or i.setup):
        return
    base = Path(ctx.env.get("RUNNER_TEMP") or tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    venv = harden.dependency_venv(base, run.model_user())
    python = str(venv / "bin" / "python")
    env = gha.stage_env(os.environ, None)
    env.update({"PATH": os.pathsep.join([str(venv / "bin"), env.get("PATH") or os.defpath]), "VIRTUAL_ENV": str(venv)})
    steps = []
    if i.requirements:
        steps.append(([python, "-m", "pip", "install", "--disable-pip-version-check", "-r", i.requirements],
                      f"pip install -r {i.requirements}"))
    if i.setup:
        steps.append((["bash", "-c", i.setup], i.setup))
    for argv, what in steps:
        shown = re.sub(r"[\x00-\x1f\x7f]", " ", what)[:200]
        with ctx.cmds.group(f"dependencies: {shown}"):
            rc = run.program(argv, "the dependencies' install", f"$ {shown}", env=env, model_code=True)
        if rc != 0:
            raise UsageError(f"installing the checked code's dependencies failed ({shown}: exit {rc})")
    run.python = python


def stage_check(ctx: Context, run, request: slash.SlashCommand | None = None) -> int:
    """check (and minify): returns check's exit code (0 or 1), raises on usage/infra errors. Runs in
    a job without any credential (``guard_model_code`` has refused otherwise)."""
    install_dependencies(ctx, run)
    opts = check_options(ctx, request)
    started = time.time()
    with ctx.cmds.group("minify-bot check"):
        rc = run_stage(run, opts)
    ctx.produced_results = True
    # a program that never ran is bad input, but the sweep's other checks are results: they are
    # minified and reported as usual, and the stage ends with exit 2 after that
    never = rc == EXIT_USAGE and _never_ran(ctx, started)
    if rc == EXIT_USAGE and not never:
        raise UsageError("`minify-bot check` rejected its input (see the log above)")
    rc = _minify_failures(ctx, run, EXIT_FAILURES if never else rc)
    if never:
        raise UsageError("a program of the sweep never ran (see the log above; its row is in results.json, "
                         "not filed); the other checks were minified as usual")
    return rc


def _never_ran(ctx: Context, since: float) -> bool:
    """Whether the results the check just wrote (not an earlier run's) hold a program that never ran."""
    from bot.suites.classify import is_never_ran

    path = ctx.out / rundir.RESULTS
    if not path.exists() or path.stat().st_mtime < since:
        return False
    results = load(path)
    return results is not None and any(is_never_ran(r) for r in results.checks)


def _minify_failures(ctx: Context, run, rc: int) -> int:
    """After the check (exit code ``rc``): annotate the failures, minify them (and bisect); a
    program that never ran has nothing to minify."""
    from bot.suites.classify import is_never_ran

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

    to_minify = [r for r in failing(results) if not is_never_ran(r)]
    if to_minify and ctx.inputs.minify:
        # known.json: open issues' verified repros, read by the known job (which holds a read token)
        _known_for_minify(ctx)
        mopts = minify_options(ctx)
        key = {"MINIFY_BOT_PUBLIC_KEY": ctx.inputs.known_public_key} if ctx.inputs.known_public_key else {}
        try:
            with ctx.cmds.group(f"minify-bot minify ({len(to_minify)} failing)"):
                mrc = run_stage(run, mopts, env_extra=key)
        except InfraError as exc:
            warn(ctx, f"minification did not run ({exc}); failures are reported without minimized repros")
            return rc
        if mrc == EXIT_USAGE:
            raise UsageError("`minify-bot minify` rejected its input (see the log above)")
        if mrc not in (EXIT_OK, EXIT_FAILURES):
            warn(ctx, f"`minify-bot minify` failed (exit code {mrc}); failures are reported without minimized repros")
        elif ctx.inputs.builds or ctx.inputs.builds_file:
            _bisect_builds(ctx, run)
    elif to_minify:
        ctx.notes.append("minification is off (input `minify: false`)")
    return rc


def _known_for_minify(ctx: Context) -> None:
    """known.json for the minify stage: the file the known job wrote (input `known-file`, from its
    artifact), else none (every failure is minified). It is untrusted data either way: minify reads
    it bounded and runs only repros whose signature verifies (`known-public-key`)."""
    from bot import known

    src = ctx.inputs.known_file
    if src and not ctx.inputs.reminify:
        path = Path(src) / rundir.KNOWN if Path(src).is_dir() else Path(src)
        if path.is_file() and path.stat().st_size <= rundir.MAX_KNOWN_BYTES:
            (ctx.out / rundir.KNOWN).write_bytes(path.read_bytes())
            return
        warn(ctx, f"input 'known-file': {src} is not a readable known.json; every failure is minified")
    known.write(ctx.out, [])


def stage_known(ctx: Context) -> int:
    """The known job (a read token, no model code): the open bot issues' verified repros into
    known.json, for the check job to take as an artifact (input `known-file`)."""
    from bot.report import known as known_bugs
    from bot.tracker.github import GitHubTracker

    i = ctx.inputs
    if not i.token:
        raise UsageError("stage known reads the bot's issues: it needs a token (issues: read)")
    ctx.out.mkdir(parents=True, exist_ok=True)
    labels = list(i.labels or []) or ["minify-bot"]
    tracker = GitHubTracker(gha.repository(ctx.env), i.token, ctx.env.get("GITHUB_API_URL"),
                            login=i.bot_login or None)
    try:
        with ctx.cmds.group("known bugs"):
            n = known_bugs.prepare(ctx.out, tracker, labels[0], reminify=i.reminify)
    finally:
        tracker.close()
    ctx.output("known-count", str(n))
    ctx.summary += ["## minify-bot: known bugs", "", f"{n} open issue(s) with a verified repro", ""]
    return EXIT_OK


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
    # stage all ran model code in this job: it holds no token, and files into the run directory
    local = i.stage == "all" or i.tracker == "local" or i.dry_run or not file_issues
    if len(i.labels) > 1:
        warn(ctx, "input 'labels': only the first label (the bot's own) is used by this build's `report`")
    opts = report_options(ctx, local=local, pr_run=pr_run)
    if not local and not i.token:
        raise UsageError("filing issues needs the `github-token` input (or set `dry-run: true`)")
    try:
        (ctx.out / rundir.REPORT).unlink()  # never read a stale (or planted) report as this run's
    except OSError:
        pass
    # the signing key (a repository secret) signs the known repros written into issues
    signing = {"MINIFY_BOT_SIGNING_KEY": i.signing_key} if i.signing_key and not local else {}
    with ctx.cmds.group("minify-bot report" + (" (dry run)" if local else "")):
        rc = run_stage(run, opts, with_token=not local, env_extra=signing)
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
