"""`minify-bot run`: the main job, check -> minify -> report."""

from __future__ import annotations

import os
import sys

from bot.errors import EXIT_FAILURES, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE

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
    from bot.commands.check import add_common_check_arguments

    add_common_check_arguments(p)
    m = p.add_argument_group("minify")
    m.add_argument("--no-minify", action="store_true", help="report the failures without minifying them")
    m.add_argument("--budget", type=float, default=600.0, help="minify time budget per failure, seconds (default: 600)")
    m.add_argument("--verify-runs", type=int, default=3, help="fresh-process verification runs (default: 3)")
    m.add_argument("--repro-after", choices=["aot", "dynamo"], help="force the capture point")
    m.add_argument("--repro-level", type=int, choices=[1, 2, 3, 4], help="force TORCHDYNAMO_REPRO_LEVEL")
    m.add_argument("--no-bisect", action="store_true", help="skip torch's CompilerBisector")
    m.add_argument("--reminify", action="store_true",
                   help="minify every failure again, even those whose open issue has a verified repro")
    r = p.add_argument_group("report")
    r.add_argument("--tracker", choices=["local", "github"], default=None,
                   help="local (default without a token) or github (default with GITHUB_TOKEN and --repo)")
    r.add_argument("--issues-dir", help="local tracker directory (default: RUN_DIR/issues)")
    r.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY"), help="owner/name for --tracker github")
    r.add_argument("--api-url", default=None, help="GitHub API URL (default: $GITHUB_API_URL or api.github.com)")
    r.add_argument("--label", default="minify-bot", help="the bot's label (default: minify-bot)")
    r.add_argument("--max-new", type=int, default=10, help="new issues per run (default: 10)")
    r.add_argument("--close-after", type=int, default=2, help="close after K consecutive passing runs (default: 2)")
    r.add_argument("--templates", help="directory of templates overriding templates/*.j2")
    r.add_argument("--dry-run", action="store_true", help="report to a local dry-run tracker; touch no network")
    r.add_argument("--no-report", action="store_true", help="stop after check and minify")


def _flag(argv, name, value):
    if value is not None and value is not False:
        argv += [name] if value is True else [name, str(value)]


def _stage(title: str) -> None:
    print(f"== {title}", file=sys.stderr, flush=True)


def run(args) -> int:
    from bot.cli import main
    from bot.commands.check import resolve_source

    resolve_source(args)  # a flag of another source: exit 2 before anything runs
    out = args.out
    check_argv = ["check", "--out", out, "--suite", args.suite, "--backend", args.backend, "--mode", args.mode,
                  "--dtype", args.dtype, "--device", args.device, "--timeout", str(args.timeout),
                  "--fail-on", args.fail_on]
    for name, val in (("--models", args.models), ("--model-file", args.model_file), ("--command", args.command),
                      ("--name", args.name), ("--pytorch", args.pytorch), ("--csv", args.csv),
                      ("--shard", args.shard), ("--baseline", args.baseline),
                      ("--memory-limit-mb", args.memory_limit_mb), ("--dynamic", args.dynamic),
                      ("--list", args.list), ("--harness-suite", args.harness_suite),
                      ("--batch-size", args.batch_size)):
        _flag(check_argv, name, val)
    for p in args.accuracy_pattern:
        check_argv += ["--accuracy-pattern", p]
    for p in args.error_pattern:
        check_argv += ["--error-pattern", p]
    for c in args.config:
        check_argv += ["--config", c]
    for m in args.matrix:
        check_argv += ["--matrix", m]
    check_argv += ["--reruns", str(args.reruns)]
    tracker = args.tracker
    if tracker is None:
        tracker = "github" if (os.environ.get("GITHUB_TOKEN") and args.repo and not args.dry_run) else "local"
    retry = list(args.retry) + ([] if args.no_report or args.list else _dashboard_retry(args, tracker))
    for check_id in dict.fromkeys(retry):
        check_argv += ["--retry", check_id]
    _stage("check")
    rc_check = main(check_argv)
    if args.list or rc_check not in (EXIT_OK, EXIT_FAILURES):
        return rc_check

    rc_minify = EXIT_OK
    if not args.no_minify and _has_failures(out):
        _prepare_known(args, tracker)  # known.json: open issues' verified repros, read with the token here
        _stage("minify")
        minify_argv = ["minify", "--out", out, "--budget", str(args.budget), "--verify-runs", str(args.verify_runs)]
        _flag(minify_argv, "--reminify", args.reminify)
        _flag(minify_argv, "--repro-after", args.repro_after)
        _flag(minify_argv, "--repro-level", args.repro_level)
        _flag(minify_argv, "--no-bisect", args.no_bisect)
        rc_minify = main(minify_argv)
        from bot import known

        line = known.savings_of_run(out).line()
        if line:
            print(line, file=sys.stderr)
        if rc_minify not in (EXIT_OK, EXIT_FAILURES):
            print("minify failed; reporting the failures without repros", file=sys.stderr)

    if args.no_report:
        return rc_check
    _stage("report")
    report_argv = ["report", "--out", out, "--tracker", tracker, "--label", args.label,
                   "--max-new", str(args.max_new), "--close-after", str(args.close_after)]
    for name, val in (("--issues-dir", args.issues_dir), ("--repo", args.repo), ("--api-url", args.api_url),
                      ("--templates", args.templates), ("--dry-run", args.dry_run),
                      ("--command", args.command)):  # the sweep's own command: shown verbatim in issues
        _flag(report_argv, name, val)
    rc_report = main(report_argv)
    if tracker == "local" and rc_report in (EXIT_OK, EXIT_FAILURES):
        where = args.issues_dir or os.path.join(out, "issues-dry-run" if args.dry_run else "issues")
        print(f"issues written to the local tracker in {where}/ (no token: nothing was sent to GitHub)",
              file=sys.stderr)
    if rc_report == EXIT_USAGE or rc_report == EXIT_INTERNAL:
        return rc_report
    if rc_minify == EXIT_INTERNAL:
        return EXIT_INTERNAL
    return rc_check


def _with_tracker(args, tracker_kind: str, use, what: str):
    """``use(tracker)`` with the report's tracker; None (and a note) when it cannot be read."""
    import argparse

    from bot.commands.report import make_tracker
    from bot.errors import BotError

    ns = argparse.Namespace(out=args.out, dry_run=args.dry_run, tracker=tracker_kind, issues_dir=args.issues_dir,
                            repo=args.repo, token=None, api_url=args.api_url, bot_login=None)
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
    from bot import dashboard

    return _with_tracker(args, tracker_kind, lambda t: sorted(dashboard.requests_from(t).retry),
                         "dashboard not read (retry boxes ignored this run)") or []


def _prepare_known(args, tracker_kind: str) -> None:
    """known.json for minify (bot/known.py): this process holds the tracker, minify never does."""
    from bot import known

    if args.reminify or args.no_report:
        known.write(args.out, [])
        return
    if _with_tracker(args, tracker_kind, lambda t: known.prepare(args.out, t, args.label),
                     "known bugs not read (every failure is minified)") is None:
        known.write(args.out, [])


def _has_failures(out: str) -> bool:
    from bot import rundir

    return rundir.has_failures(out)
