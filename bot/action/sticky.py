"""The results comment on a pull request: one per pull request, updated in place
(templates/action_sticky.md.j2)."""

from __future__ import annotations

from bot import gha, slash
from bot.action import summary
from bot.action.context import Context, PRContext, http_reason, warn
from bot.action.pullrequest import pr_context
from bot.action.results import failing, issue_urls, report_entries
from bot.errors import BotError
from bot.records import ReportDoc, ResultsDoc


def requested_line(request: slash.MinifyRequest) -> str:
    cmd = request.command()
    return f"Requested by @{gha.md_escape(request.requested_by, 64)}: {gha.md_escape(cmd.describe(), 500)}"


def sticky_body(ctx: Context, *, requested: str | None, sha: str | None, results: ResultsDoc | None,
                report: ReportDoc | None, problem: str | None = None) -> str:
    from bot import pr

    return summary.render(
        "action_sticky.md.j2", marker=pr.STICKY_MARKER, requested=requested, sha=sha, run_url=gha.run_url(ctx.env),
        problem=problem, counts=summary.counts(results),
        rows=summary.table_rows(results, ctx.out / "failures", report),
        issues=summary.issues(report) if report is not None and report_entries(report) else None,
        only_here=bool(failing(results)) and not issue_urls(report))


def post(ctx: Context, prc: PRContext, request: slash.MinifyRequest | None, results, report,
         problem: str | None = None) -> None:
    """The results comment for a /minify request."""
    from bot import pr

    body = sticky_body(ctx, requested=requested_line(request) if request else None,
                       sha=request.sha if request else None, results=results, report=report, problem=problem)
    try:
        comment, how = pr.upsert_sticky(prc.issue, prc.login, body)
        ctx.answered = True
        ctx.output("comment-url", getattr(comment, "html_url", "") or "")
        ctx.notes.append(f"results comment {how}")
    except Exception as exc:  # noqa: BLE001
        warn(ctx, f"could not write the results comment ({http_reason(exc)})")


def event_pr_number(ctx: Context) -> int | None:
    number = ctx.event.obj("pull_request").get("number") or ctx.event.payload.get("number")
    return number if isinstance(number, int) and not isinstance(number, bool) and 0 < number < 2 ** 31 else None


def problem_for_event(ctx: Context, problem: str) -> None:
    """Say in the pull request's results comment why nothing ran (best effort: the token may be read-only)."""
    number = event_pr_number(ctx)
    if number is None or not ctx.inputs.token:
        return
    from bot import pr

    try:
        prc = pr_context(ctx, number, None)
        pr.upsert_sticky(prc.issue, prc.login, sticky_body(ctx, requested=None, sha=None, results=None,
                                                           report=None, problem=problem))
    except Exception as exc:  # noqa: BLE001
        warn(ctx, f"could not answer on the pull request ({http_reason(exc)})")


def post_for_event(ctx: Context, results, report) -> None:
    """The results comment of a pull_request sweep."""
    number = event_pr_number(ctx)
    if number is None or not ctx.inputs.token:
        return
    try:
        prc = pr_context(ctx, number, None)
    except BotError as exc:
        warn(ctx, f"could not answer on the pull request: {exc}")
        return
    sha = ctx.event.obj("pull_request", "head").get("sha")
    body = sticky_body(ctx, requested=None, sha=sha if isinstance(sha, str) else None, results=results, report=report)
    from bot import pr

    try:
        pr.upsert_sticky(prc.issue, prc.login, body)
    except Exception as exc:  # noqa: BLE001 - fork PRs get a read-only token
        warn(ctx, f"could not write the results comment ({http_reason(exc)}); see the job summary")
