"""`minify-bot upstream`: a bot issue (or a run directory's failure) as a pytorch/pytorch bug report.

Prints the report (or writes it with --out); posts nothing anywhere. See docs/reporting.md, "The way
upstream"."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bot.errors import EXIT_OK, UsageError

HELP = "write a pytorch/pytorch-style bug report for an issue or a failure, with possibly related upstream issues"
DESCRIPTION = """\
Turn a bot issue (ISSUE, a number of the configured tracker) or a run directory's failure (--run-dir
DIR --check-id ID) into a bug report in the shape of PyTorch's torch.compile bug template ("Describe
the bug" with the minimal repro, "Error logs", "Versions" as collect_env prints them), after searching
the upstream repository's issues (GitHub's search API, at most 3 queries, anonymous without a token)
for up to five possibly related ones. The report goes to standard output (or --out FILE); nothing is
posted anywhere. A search that fails leaves one line saying why; it never fails the command."""

DEFAULT_SEARCH_API = "https://api.github.com"


def add_arguments(p) -> None:
    p.add_argument("issue", nargs="?", type=int, metavar="ISSUE", help="an issue number of the configured tracker")
    p.add_argument("--tracker", choices=("local", "github"), default="local",
                   help="where ISSUE lives (default: local)")
    p.add_argument("--issues-dir", metavar="DIR",
                   help="local tracker directory (default: RUN_DIR/issues, or minify-out/issues)")
    p.add_argument("--repo", metavar="OWNER/NAME", default=os.environ.get("GITHUB_REPOSITORY"),
                   help="the bot's GitHub repository (default: $GITHUB_REPOSITORY); never searched as upstream")
    p.add_argument("--token", help="GitHub token (default: $GITHUB_TOKEN); prefer the environment variable")
    p.add_argument("--api-url", default=None, help="the tracker's GitHub API URL (default: $GITHUB_API_URL "
                                                   "or api.github.com)")
    p.add_argument("--bot-login", help="login the bot's issues are authored by (default: the token's user)")
    p.add_argument("--run-dir", metavar="DIR", help="a run directory: the failure's record and repro "
                                                    "(with ISSUE: the failure of that issue, when the run has it)")
    p.add_argument("--check-id", metavar="ID", help="the failing check in --run-dir (default: its only failure)")
    p.add_argument("--upstream-repo", default="pytorch/pytorch", metavar="OWNER/NAME",
                   help="the repository searched for related issues (default: %(default)s)")
    p.add_argument("--search-api-url", default=None, metavar="URL",
                   help="the API the search goes to (default: $MINIFY_BOT_SEARCH_API_URL or api.github.com); "
                        "the token is sent only when it is the tracker's own API")
    p.add_argument("--no-search", action="store_true", help="do not search for related issues")
    p.add_argument("--related-only", action="store_true", help="print only the possibly related issues")
    p.add_argument("--out", metavar="FILE", help="write the report here instead of standard output")
    p.add_argument("--templates", metavar="DIR", help="directory of templates overriding templates/*.j2")


def _tracker(args):
    """The tracker ISSUE lives in; a local directory must already exist (nothing is created)."""
    if args.tracker == "local":
        from bot.tracker.local import LocalTracker

        directory = Path(args.issues_dir or Path(args.run_dir or "minify-out") / "issues")
        if not directory.is_dir():
            raise UsageError(f"no local issues directory {directory} (pass --issues-dir DIR)")
        return LocalTracker(directory)
    token = args.token or os.environ.get("GITHUB_TOKEN")
    if not token:
        raise UsageError("--tracker github needs a token: set GITHUB_TOKEN or pass --token")
    if not args.repo or "/" not in args.repo:
        raise UsageError("--tracker github needs --repo OWNER/NAME (or GITHUB_REPOSITORY)")
    from bot.tracker.github import GitHubTracker

    return GitHubTracker(args.repo, token, args.api_url or os.environ.get("GITHUB_API_URL"), login=args.bot_login)


def _failures(run_dir: str):
    from bot import rundir
    from bot.report import load_run

    if not (Path(run_dir) / rundir.RESULTS).exists():
        raise UsageError(f"{run_dir}/results.json not found: not a run directory")
    return load_run(run_dir)[1]


def _from_run(args):
    """The facts of --check-id's failure (or the run's only one)."""
    from bot.report import upstream

    failures = _failures(args.run_dir)
    if args.check_id:
        found = [f for f in failures if f.check.id == args.check_id]
        if not found:
            raise UsageError(f"{args.run_dir}: no failing check {args.check_id!r}")
    elif len(failures) == 1:
        found = failures
    else:
        ids = ", ".join(f.check.id for f in failures[:10]) or "none"
        raise UsageError(f"{args.run_dir} has {len(failures)} failures; pick one with --check-id ({ids})")
    return upstream.facts_from_failure(found[0])


def _from_issue(args, tracker):
    """The facts of ISSUE: from the run directory's failure of the same bug when --run-dir has it,
    else from the issue itself. Only an issue the bot wrote is read."""
    from bot.report import upstream
    from bot.report.state import read, repro_rank
    from bot.tracker.base import TrackerError

    try:
        issue = tracker.get_issue(args.issue)
    except TrackerError as exc:
        if "HTTP 404" in str(exc) or "does not exist" in str(exc):
            raise UsageError(f"issue #{args.issue} not found in the {tracker.name} tracker") from None
        raise
    me = tracker.bot_login()
    if issue.author != me:
        raise UsageError(f"issue #{issue.number} was not filed by the bot ({me}); nothing in it is read")
    state, why = read(issue.body)
    if state is None and why:
        print(f"warning: issue #{issue.number}: its hidden state is malformed and was ignored ({why})", file=sys.stderr)
    group = [f for f in _failures(args.run_dir) if state and f.fingerprint.primary in state.sigs] \
        if args.run_dir else []
    if group:
        facts = upstream.facts_from_failure(min(group, key=lambda f: repro_rank(f.failure)))
        facts.issue_url = issue.url
        return facts
    return upstream.facts_from_issue(issue.number, issue.title, issue.body, state, issue.url)


def _search(args):
    """The search client: the token only when the search goes to the tracker's own API."""
    if args.no_search:
        return None
    from bot.tracker.github import DEFAULT_API_URL, IssueSearch

    url = (args.search_api_url or os.environ.get("MINIFY_BOT_SEARCH_API_URL") or DEFAULT_SEARCH_API).rstrip("/")
    own = (args.api_url or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")
    token = (args.token or os.environ.get("GITHUB_TOKEN")) if url == own else None
    return IssueSearch(url, token)


def run(args) -> int:
    from bot.render import Renderer
    from bot.report import upstream

    if args.issue is None and not args.run_dir:
        raise UsageError("name an ISSUE, or a failure with --run-dir DIR [--check-id ID]")
    renderer = Renderer(args.templates)
    tracker = _tracker(args) if args.issue is not None else None
    search = None
    try:
        facts = _from_issue(args, tracker) if tracker is not None else _from_run(args)
        search = _search(args)
        rel = upstream.related(search, facts, args.upstream_repo, args.repo) if search is not None else \
            upstream.Related(repo=args.upstream_repo, skipped="--no-search")
        text = upstream.render(renderer, facts, rel, related_only=args.related_only)
    finally:
        for closable in (search, tracker):
            if closable is not None:
                closable.close()
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--out {args.out}: {exc.strerror}") from None
    else:
        sys.stdout.write(text)
    print(f"minify-bot upstream: {rel.line}", file=sys.stderr)
    return EXIT_OK
