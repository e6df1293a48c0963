"""`minify-bot run`: the main job, check -> minify -> report."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from bot.errors import EXIT_FAILURES, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from bot.options import CheckOptions, MinifyOptions, ReportOptions, call_stage

HELP = "the main job: check, minify every failure, and file/update/close issues"
DESCRIPTION = """Run the whole pipeline: `check` sweeps the models, `minify` turns every failure into
a minimized, verified repro, and `report` files, updates, reopens or closes issues.

With no token and no --tracker, issues go to a local tracker (markdown + JSON files in
RUN_DIR/issues/), so the embedded default needs no network:

  minify-bot run                                   # built-in zoo, CPU, inductor, local issues
  minify-bot run --config inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy
  GITHUB_TOKEN=... minify-bot run --tracker github --repo org/name
"""


def add_arguments(p) -> None:
    from bot.commands.check import add_common_check_arguments, labels_arg

    add_common_check_arguments(p)
    dm, dr = MinifyOptions.default_of, ReportOptions.default_of
    m = p.add_argument_group("minify")
    m.add_argument("--no-minify", action="store_true", help="report the failures without minifying them")
    m.add_argument("--budget", "--minify-budget", dest="budget", type=float, default=dm("budget"),
                   help="minify time budget per failure, seconds (default: 600)")
    m.add_argument("--verify-runs", "--verification-runs", dest="verify_runs", type=int, default=dm("verify_runs"),
                   help="fresh-process verification runs (default: 3)")
    m.add_argument("--repro-after", choices=["aot", "dynamo"], help="force the capture point")
    m.add_argument("--repro-level", type=int, choices=[1, 2, 3, 4], help="force TORCHDYNAMO_REPRO_LEVEL")
    m.add_argument("--no-bisect", action="store_true", help="skip torch's CompilerBisector")
    m.add_argument("--no-trace", action="store_true",
                   help="skip the TORCH_TRACE rerun of each verified repro (no tlparse report, no generated code)")
    m.add_argument("--jobs", type=int, default=dm("jobs"), metavar="N",
                   help="failures minimized at once (default: one per GPU when a failure ran on CUDA, "
                        "else one per 4 cores)")
    m.add_argument("--reminify", action="store_true",
                   help="minify every failure again, even those whose open issue has a verified repro")
    b = p.add_argument_group("bisect (which torch build introduced or fixed each bug; see minify-bot bisect)")
    b.add_argument("--build", action="append", default=[], metavar="BUILD",
                   help="a torch build to run each verified repro in, oldest first (repeatable)")
    b.add_argument("--builds-file", metavar="FILE", help="a YAML list of builds, oldest first")
    r = p.add_argument_group("report")
    r.add_argument("--tracker", choices=["local", "github"], default=None,
                   help="local (default without a token) or github (default with GITHUB_TOKEN and --repo)")
    r.add_argument("--issues-dir", help="local tracker directory (default: RUN_DIR/issues)")
    r.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY"), help="owner/name for --tracker github")
    r.add_argument("--api-url", default=None, help="GitHub API URL (default: $GITHUB_API_URL or api.github.com)")
    r.add_argument("--labels", "--label", dest="label", type=labels_arg, default=dr("label"),
                   metavar="LABELS", help="the bot's own label, the first of a comma-separated list "
                                          "(default: minify-bot; --label is the old spelling)")
    r.add_argument("--max-new-issues", "--max-new", dest="max_new", type=int, default=dr("max_new"),
                   help="new issues per run (default: 10; --max-new is the old spelling)")
    r.add_argument("--close-after", type=int, default=dr("close_after"),
                   help="close after K consecutive passing runs (default: 2)")
    r.add_argument("--templates", help="directory of templates overriding templates/*.j2")
    r.add_argument("--dry-run", action="store_true", help="report to a local dry-run tracker; touch no network")
    r.add_argument("--no-report", action="store_true", help="stop after check and minify")


def _stage(title: str) -> None:
    print(f"== {title}", file=sys.stderr, flush=True)


def stage_options(args, tracker: str) -> tuple[CheckOptions, MinifyOptions, ReportOptions]:
    """The options of the three stages, from `run`'s own command line."""
    check = CheckOptions.from_args(args)
    minify = MinifyOptions(out=args.out, budget=args.budget, verify_runs=args.verify_runs,
                           repro_after=args.repro_after, repro_level=args.repro_level, no_bisect=args.no_bisect,
                           no_trace=args.no_trace, reminify=args.reminify, jobs=args.jobs)
    report = ReportOptions(out=args.out, tracker=tracker, issues_dir=args.issues_dir, repo=args.repo,
                                api_url=args.api_url, label=args.label, max_new=args.max_new,
                                close_after=args.close_after, templates=args.templates, dry_run=args.dry_run,
                                # the sweep's own command: shown verbatim in issues
                                trusted_commands=([args.command] if args.command else [])
                                + _file_commands(args))
    return check, minify, report


def _file_commands(args) -> list[str]:
    """The commands of a --command-file sweep: the user's own, shown verbatim in issues too."""
    if not getattr(args, "command_file", None):
        return []
    from bot.suites import commands_models

    return [m.spec.command for m in commands_models(args.command_file)]


def run(args) -> int:
    from bot.commands.check import resolve_source
    from bot.minify import procs

    resolve_source(args)  # a flag of another source: exit 2 before anything runs
    out = args.out
    from bot import render

    render.preload(args.templates)   # the report's templates, read before any model code runs
    token = os.environ.get("GITHUB_TOKEN")
    held = _says_what_it_trusts(args)
    tracker = args.tracker or ("github" if (token and args.repo and not args.dry_run) else "local")
    stage = call_stage if not held else _stage_without_secrets
    check, minify, report = stage_options(args, tracker)
    report.token = token if tracker == "github" else None
    args.token = report.token
    check.retry = _retries(args, tracker)
    _stage("check")
    started = time.time()
    with _minify_server_ahead(args, in_process=stage is call_stage, verify_runs=minify.verify_runs):
        rc_check = stage(check)
    if rc_check == EXIT_INTERRUPTED:
        return _interrupted(out, "check")
    # a program that never ran is bad input (exit 2 at the end); the sweep's other checks go on
    never = rc_check == EXIT_USAGE and not args.list and _never_ran(out, started)
    rc_check = EXIT_FAILURES if never else rc_check
    if args.list or rc_check not in (EXIT_OK, EXIT_FAILURES):
        return rc_check
    checked = time.monotonic()

    rc_minify = EXIT_OK
    if not args.no_minify and _has_failures(out):
        _prepare_known(args, tracker)  # known.json: open issues' verified repros, read with the token here
        _stage("minify")
        rc_minify = stage(minify)  # it says what known repros saved
        if rc_minify == EXIT_INTERRUPTED:
            return _interrupted(out, "minify")
        if rc_minify not in (EXIT_OK, EXIT_FAILURES):
            print("minify failed; reporting the failures without repros", file=sys.stderr)
    procs.close_ahead()   # a server started ahead that no minify stage took

    if (args.build or args.builds_file) and not args.no_minify and _has_failures(out):
        from bot.options import BisectOptions

        _stage("bisect")
        rc_bisect = stage(BisectOptions(out=out, build=list(args.build), builds_file=args.builds_file,
                                        verify_runs=args.verify_runs))
        if rc_bisect == EXIT_INTERRUPTED:
            return _interrupted(out, "bisect")
        if rc_bisect != EXIT_OK:
            print("bisect failed; reporting the failures without the builds' answer", file=sys.stderr)

    if args.no_report:
        return EXIT_USAGE if never else rc_check
    _stage("report")
    rc_report = call_stage(report)
    if rc_report == EXIT_INTERRUPTED:
        return _interrupted(out, "report")
    if args.suite == "fuzz" and rc_report in (EXIT_OK, EXIT_FAILURES):
        from bot import rundir
        from bot.fuzz.campaign import bugs

        print(bugs(rundir.read_report(out)), file=sys.stderr)
    if rc_check == EXIT_FAILURES:
        print(f"from the end of the check to the issues: {time.monotonic() - checked:.0f} s", file=sys.stderr)
    if tracker == "local" and rc_report in (EXIT_OK, EXIT_FAILURES):
        where = args.issues_dir or os.path.join(out, "issues-dry-run" if args.dry_run else "issues")
        print(f"issues written to the local tracker in {where}/ (no token: nothing was sent to GitHub)",
              file=sys.stderr)
    if rc_report in (EXIT_OK, EXIT_FAILURES):
        for line in what_was_filed(out, tracker):
            print(line, file=sys.stderr)
    if rc_report == EXIT_USAGE or rc_report == EXIT_INTERNAL:
        return rc_report
    if rc_minify == EXIT_INTERNAL:
        return EXIT_INTERNAL
    if never:
        print("exit 2: a program of the sweep never ran (the error above)", file=sys.stderr)
        return EXIT_USAGE
    return rc_check


def _retries(args, tracker: str) -> list[str]:
    """The checks to rerun more: --retry's, and the dashboard's ticked retry boxes."""
    retry = list(args.retry) + ([] if args.no_report or args.list else _dashboard_retry(args, tracker))
    return list(dict.fromkeys(retry))


@contextlib.contextmanager
def _minify_server_ahead(args, *, in_process: bool, verify_runs: int):
    """While the check runs in this process: at its first failure, start the minify stage's fork
    server (bot.minify.procs.start_ahead), so that its import of torch and warm-up overlap the rest
    of the check instead of following it. Not when the stages run in processes of their own (this
    one holds a secret), nor when nothing will be minified."""
    if not in_process or args.no_minify or args.list:
        yield
        return
    from bot.check import sweep
    from bot.minify import procs

    def hook(_row) -> None:
        procs.start_ahead(verify_runs)

    sweep.ON_FIRST_FAILURE.append(hook)
    try:
        yield
    finally:
        sweep.ON_FIRST_FAILURE.remove(hook)


def _never_ran(out: str, since: float) -> bool:
    """Whether the results this check wrote (not an earlier run's) hold a program that never ran
    (bot.suites.classify.never_ran)."""
    from bot import rundir
    from bot.errors import BotError
    from bot.suites.classify import is_never_ran

    try:
        if os.path.getmtime(rundir.results_path(out)) < since:
            return False
        return any(is_never_ran(r) for r in rundir.read_results(out).checks)
    except (BotError, OSError, ValueError):   # no readable results: the check's own usage error
        return False


_DONE_WORDS = {"created": "filed", "updated": "updated", "reopened": "reopened", "closed": "closed"}


def what_was_filed(out: str, tracker: str) -> list[str]:
    """The run's last lines: "filed #N: title" / "updated #M: title" per issue the report touched,
    then the next step."""
    from bot import rundir
    from bot.errors import BotError

    try:
        doc = rundir.read_report(out)
    except BotError:
        return []
    if doc is None:
        return []
    lines = []
    for a in doc.actions:
        if a.action in _DONE_WORDS and a.issue is not None:
            title = " ".join(str(a.title or "").split())[:200]
            lines.append(f"{_DONE_WORDS[a.action]} #{a.issue}: {title}" + (f" ({a.url})" if a.url else ""))
    filed = [a for a in doc.actions if a.action in ("created", "updated", "reopened") and a.issue is not None]
    if not filed:
        lines.append("next: nothing to read; no bug issue was filed or updated")
    elif tracker == "local":
        lines.append(f"next: read {filed[0].url or 'the issue'}; to file on GitHub, rerun with GITHUB_TOKEN set "
                     "and --tracker github --repo OWNER/NAME")
    else:
        lines.append(f"next: read {filed[0].url or f'issue #{filed[0].issue}'}; the failure's repro, logs and "
                     f"inputs are in {out}/failures/")
    return lines


def _interrupted(out: str, stage: str) -> int:
    """An interrupt stops the run where it is: nothing more runs and nothing is reported (a report of
    half a sweep, or of failures whose minify was cut short, would file issues the finished run would
    not). What the stages finished stays in the run directory."""
    print(f"minify-bot run: interrupted during {stage}; nothing was reported. What was finished is kept in "
          f"{out}/ (rerun to complete it)", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def _says_what_it_trusts(args) -> list[str]:
    """The secret-like variables this run holds (GITHUB_TOKEN, or any whose name or value looks like
    a credential). With any, the stages that run model code (check, minify, bisect) run as
    processes started without them, and the run says what that does not protect: code of the same
    user reads this process's environment (/proc/<pid>/environ) and anything else the user can. A
    token and code you did not write belong in separate jobs (the Action's reusable workflow)."""
    from bot import gha

    if args.list:
        return []
    held = sorted(gha.secret_like_env(os.environ))
    if held:
        print(f"minify-bot run: this process holds {', '.join(held)}. The checked code runs without them, "
              "but as your user it can read them from this process: run it only on code you trust; for "
              "anyone else's code, check and report in separate jobs (docs/action.md)", file=sys.stderr)
    return held


def _stage_without_secrets(opts) -> int:
    """One model-running stage in a fresh interpreter whose environment holds no secret and none of
    the runner's file commands, its output passed through; its exit code."""
    from bot import gha, proc
    from bot.action.stages import LAUNCH, STAGE_TIMEOUT
    from bot.options import to_argv

    res = proc.run([sys.executable, "-c", LAUNCH, opts.STAGE, *to_argv(opts)], env=gha.stage_env(os.environ),
                   timeout=STAGE_TIMEOUT, on_line=lambda line: (sys.stderr.write(line), sys.stderr.flush()))
    if res.returncode in (EXIT_INTERRUPTED, -signal.SIGINT):
        return EXIT_INTERRUPTED
    if res.error or res.timed_out or res.returncode is None or res.returncode < 0:
        print(f"minify-bot {opts.STAGE}: {res.error or 'stopped or killed'}", file=sys.stderr)
        return EXIT_INTERNAL
    return res.returncode


def _with_tracker(args, tracker_kind: str, use, what: str):
    """``use(tracker)`` with the report's tracker; None (and a note) when it cannot be read."""
    import argparse

    from bot.commands.report import make_tracker
    from bot.errors import BotError

    ns = argparse.Namespace(out=args.out, dry_run=args.dry_run, tracker=tracker_kind, issues_dir=args.issues_dir,
                            repo=args.repo, token=getattr(args, "token", None), api_url=args.api_url, bot_login=None)
    try:
        t = make_tracker(ns)
        try:
            return use(t)
        finally:
            t.close()
    except BotError as exc:
        print(f"{what}: {exc}", file=sys.stderr)
        return None


def _dashboard_retry(args, tracker_kind: str) -> list[str]:
    """The checks whose retry box is ticked on the dashboard (read with the report's tracker)."""
    from bot.report import dashboard

    return _with_tracker(args, tracker_kind, lambda t: sorted(dashboard.requests_from(t).retry),
                         "dashboard not read (retry boxes ignored this run)") or []


def _prepare_known(args, tracker_kind: str) -> None:
    """known.json for minify (bot/known.py): this process holds the tracker, minify never does."""
    from bot import known
    from bot.report.known import prepare

    if args.reminify or args.no_report:
        known.write(args.out, [])
        return
    if _with_tracker(args, tracker_kind, lambda t: prepare(args.out, t, args.label),
                     "known bugs not read (every failure is minified)") is None:
        known.write(args.out, [])


def _has_failures(out: str) -> bool:
    """Failures minify has work for: any but a program's that never ran (nothing to minify there)."""
    from bot import rundir
    from bot.errors import UsageError
    from bot.suites.classify import is_never_ran

    try:
        return any(r.failure_class and not is_never_ran(r) for r in rundir.read_results(out).checks)
    except UsageError:
        return False
