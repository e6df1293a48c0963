"""`minify-bot report`: file, update, reopen and close one issue per bug from a run directory."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from bot import rundir
from bot.errors import EXIT_OK, UsageError

HELP = "file or update one issue per bug found in a run directory (local directory or GitHub)"
DESCRIPTION = """\
Read results.json and failures/*/failure.json from the run directory, fingerprint every failure, and
file, update, reopen or close issues so that each bug has exactly one issue. Writes report.json and
summary.md into the run directory. The default tracker is a local directory (no token, no network);
--tracker github files on GitHub or GitHub Enterprise. --dry-run always uses a local directory.
See docs/reporting.md."""


def add_arguments(p) -> None:
    from bot.options import ReportOptions

    d = ReportOptions.default_of
    p.add_argument("--out", default=d("out"), metavar="RUN_DIR", help="run directory (default: %(default)s)")
    p.add_argument("--tracker", choices=("local", "github"), default=d("tracker"),
                   help="where issues live (default: local)")
    p.add_argument("--issues-dir", metavar="DIR", help="local tracker directory (default: RUN_DIR/issues)")
    p.add_argument("--repo", metavar="OWNER/NAME", default=os.environ.get("GITHUB_REPOSITORY"),
                   help="GitHub repository (default: $GITHUB_REPOSITORY)")
    p.add_argument("--token", help="GitHub token (default: $GITHUB_TOKEN); prefer the environment variable")
    p.add_argument("--api-url", default=None,
                   help="GitHub API URL, e.g. https://ghe.example.com/api/v3 "
                        "(default: $GITHUB_API_URL or api.github.com)")
    p.add_argument("--bot-login", help="login the bot's issues are authored by, when the token cannot read /user "
                                       "(default: the token's user; github-actions[bot] only when GitHub says the "
                                       "token is an Actions token; any other failure to read it exits 3)")
    from bot.commands.check import labels_arg

    p.add_argument("--labels", "--label", dest="label", type=labels_arg, default=d("label"), metavar="LABELS",
                   help="the bot's own label, the first of a comma-separated list "
                        "(default: %(default)s; --label is the old spelling)")
    p.add_argument("--max-new-issues", "--max-new", dest="max_new", type=int, default=d("max_new"),
                   help="new issues per run; the rest are listed (default: 10)")
    p.add_argument("--close-after", type=int, default=d("close_after"),
                   help="close after this many consecutive passing runs (default: 2)")
    p.add_argument("--assignees", nargs="*", default=[], metavar="LOGIN", help="assign new issues to these users")
    p.add_argument("--templates", metavar="DIR", help="directory of templates overriding templates/*.j2")
    p.add_argument("--dry-run", action="store_true",
                   help="use a local tracker in RUN_DIR/issues-dry-run; touch no network")
    p.add_argument("--run-url", default=None, help="link to the workflow run (default: from GITHUB_* variables)")
    p.add_argument("--artifact-url", default=None, help="link to the uploaded artifacts")
    p.add_argument("--run-id", default=None, help="identity of this run (default: derived from results.json)")
    p.add_argument("--pr-run", action="store_true",
                   help="the run is of an unmerged pull request: only create issues or comment on open ones; "
                        "never count it as a passing run, close, reopen or edit an issue")
    p.add_argument("--command", dest="trusted_commands", action="append", default=[], metavar="COMMAND",
                   help="a command this sweep was configured with (repeatable): a command check running exactly it "
                        "is shown verbatim in the issue's 'Reproduce locally'; any other command string from the "
                        "run directory is never shown as a command")
    p.add_argument("--no-file-flaky", dest="file_flaky", action="store_false",
                   help="do not file a failure that did not recur when minify reran it to capture its graph "
                        "(default: file it, labelled flaky); a check that passed on a rerun of `check --reruns` "
                        "is a passing check and never filed")
    p.add_argument("--dashboard", dest="dashboard", action="store_true", default=True,
                   help="keep the dashboard issue: history, automatic baseline, checkbox requests (default)")
    p.add_argument("--no-dashboard", dest="dashboard", action="store_false",
                   help="no dashboard issue and no history (regressions only from check --baseline)")


def _default_run_url() -> str | None:
    server, repo, run = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else None


def make_tracker(args):
    from bot.tracker.local import LocalTracker

    out = Path(args.out)
    if args.dry_run:
        return LocalTracker(args.issues_dir or out / "issues-dry-run")
    if args.tracker == "local":
        return LocalTracker(args.issues_dir or out / "issues")
    token = args.token or os.environ.get("GITHUB_TOKEN")
    if not token:
        raise UsageError("--tracker github needs a token: set GITHUB_TOKEN or pass --token")
    if not args.repo or "/" not in args.repo:
        raise UsageError("--tracker github needs --repo OWNER/NAME (or GITHUB_REPOSITORY)")
    from bot.tracker.github import GitHubTracker

    api_url = args.api_url or os.environ.get("GITHUB_API_URL")
    return GitHubTracker(args.repo, token, api_url, login=args.bot_login)


def run(args) -> int:
    from bot.options import ReportOptions

    return execute(ReportOptions.from_args(args))


def execute(args) -> int:
    """The report stage on typed options (bot.options.ReportOptions, every option resolved)."""
    from bot.report import report_run
    from bot.report.load import trusted_evidence

    if not (Path(args.out) / rundir.RESULTS).exists():
        raise UsageError(f"{args.out}/results.json not found (run `minify-bot check --out {args.out}` first)")
    from bot import signing

    signing.signer_from_env(os.environ)   # a malformed signing key stops here, before anything is filed
    # the stage's own options are the reporter's; the token stays with the tracker
    opts = dataclasses.replace(args, run_url=args.run_url or _default_run_url(), token=None)
    tracker = make_tracker(args)
    try:
        result = report_run(args.out, tracker, opts, evidence=trusted_evidence(os.environ))
    finally:
        tracker.close()
    c = result.counts
    print(f"minify-bot report: {c['created']} filed, {c['updated']} updated, {c['reopened']} reopened, "
          f"{c['closed']} closed, {c['skipped']} not filed; details in {result.report_path}", file=sys.stderr)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary and result.summary_path:
        try:
            with open(step_summary, "a", encoding="utf-8") as fh:
                fh.write(result.summary_path.read_text(encoding="utf-8"))
        except OSError:
            pass
    return EXIT_OK
