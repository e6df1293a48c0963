"""The pull request the Action answers on: a PyGithub handle, reactions and replies (best effort)."""

from __future__ import annotations

from bot import gha
from bot.action.context import Context, PRContext, http_reason, warn
from bot.errors import InfraError, UsageError


def pr_context(ctx: Context, number: int, comment_id: int | None) -> PRContext:
    from bot import pr

    if not ctx.inputs.token:
        raise UsageError("answering on a pull request needs the `github-token` input")
    gh = pr.client(ctx.inputs.token, ctx.env.get("GITHUB_API_URL"))
    try:
        repo = gh.get_repo(gha.repository(ctx.env), lazy=True)
        issue = repo.get_issue(number)
        comment = issue.get_comment(comment_id) if comment_id else None
    except Exception as exc:  # noqa: BLE001 - GitHub unreachable or the objects are gone
        raise InfraError(f"cannot read pull request #{number}: {http_reason(exc)}") from None
    return PRContext(gh, repo, issue, comment, pr.bot_login(gh, ctx.inputs.bot_login or None))


def react(ctx: Context, prc: PRContext, content: str) -> None:
    from bot import pr

    if prc.comment is None:
        return
    err = pr.react(prc.comment, content)
    if err:
        warn(ctx, err)


def reply(ctx: Context, prc: PRContext, text: str) -> None:
    from bot import pr

    try:
        pr.reply(prc.issue, text)
        ctx.answered = True
    except Exception as exc:  # noqa: BLE001
        warn(ctx, f"could not reply on the pull request ({http_reason(exc)})")
