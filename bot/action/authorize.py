"""The `/minify` comment flow: parse the comment, check the commenter's permission, pin the pull
request's head commit and acknowledge; the request it hands on (a :class:`bot.slash.MinifyRequest`)
crosses job boundaries (authorize -> check -> report), so it is re-validated wherever it is read
(``request_input``)."""

from __future__ import annotations

import re

from bot import gha, slash
from bot.action.context import Context, PRContext, http_reason
from bot.action.pullrequest import pr_context, react, reply
from bot.errors import InfraError, UsageError


def usage_block() -> str:
    return "```\n" + slash.USAGE.replace("```", "'''") + "```\n"


def handle_comment(ctx: Context) -> tuple[slash.SlashCommand | None, slash.MinifyRequest | None, PRContext | None]:
    """The authorize step of a /minify comment. Returns (command, request, pr context); the
    request is None when nothing should run (not a command, help, or refused)."""
    from bot import pr

    got = _command_of(ctx)
    if got is None:
        return None, None, None
    cmd, comment, issue = got
    if not issue.get("pull_request"):
        ctx.notes.append("ignored: /minify works on pull requests only")
        return cmd, None, None
    number, comment_id = issue.get("number"), comment.get("id")
    if (not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 2 ** 31
            or not isinstance(comment_id, int) or isinstance(comment_id, bool) or not 0 < comment_id < 2 ** 63):
        raise UsageError("the issue_comment payload lacks a valid issue number or comment id")
    prc = pr_context(ctx, number, comment_id)
    ctx.prc = prc  # from here on, whatever goes wrong is answered in the pull request
    login, assoc = _author(ctx, prc, comment)
    if login is None:
        return None, None, None
    ctx.output("pr-number", str(number))
    ctx.output("comment-id", str(comment_id))
    react(ctx, prc, pr.REACTION_RECEIVED)

    if cmd.kind == "help":
        reply(ctx, prc, "Usage of `/minify`:\n\n" + usage_block())
        ctx.notes.append("answered /minify help")
        return cmd, None, prc
    if cmd.kind == "invalid":
        react(ctx, prc, pr.REACTION_REJECTED)
        reply(ctx, prc, f"@{login} I could not run that command: {gha.md_escape(cmd.error, 300)}\n\n" + usage_block())
        raise UsageError(f"malformed /minify command: {cmd.error}")

    auth = pr.authorize(prc.repo, login, assoc)
    if not auth.allowed:
        _refuse(ctx, prc, login, gha.md_escape(auth.reason, 300))
        raise UsageError(f"/minify refused: {auth.reason}")
    try:
        pull = prc.repo.get_pull(number)
        sha = pr.pin_head(prc.repo, pull, cmd.sha, commented_at=comment_time(prc),
                          timeline=prc.issue.get_timeline())
    except pr.Rejected as exc:
        _refuse(ctx, prc, login, gha.md_escape(str(exc), 300))
        raise UsageError(f"/minify refused: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - fail closed
        _refuse(ctx, prc, login, "could not read the pull request's head commit")
        raise InfraError(f"cannot read pull request #{number}: {http_reason(exc)}") from None
    request = slash.to_request(cmd, sha=sha, pr=number, comment_id=comment_id, requested_by=login)
    ctx.output("authorized", "true")
    ctx.output("sha", sha)
    ctx.output("request", request.to_text())
    ctx.notes.append(f"authorized /minify by @{login} ({auth.permission}) on #{number} at {sha[:12]}")
    return cmd, request, prc


def _command_of(ctx: Context) -> tuple[slash.SlashCommand, dict, dict] | None:
    """(command, comment, issue) of a new comment's payload; None (noted) when it holds none."""
    payload = ctx.event.payload
    comment = payload.get("comment")
    issue = payload.get("issue")
    if not isinstance(comment, dict) or not isinstance(issue, dict):
        raise UsageError("the issue_comment payload has no comment or issue object")
    if payload.get("action") not in (None, "created"):
        if not isinstance(payload.get("action"), str):
            raise UsageError("the issue_comment payload's action is not a string")
        ctx.notes.append(f"ignored: the comment was {payload.get('action')[:40]}, only new comments are commands")
        return None
    if not isinstance(comment.get("body"), (str, type(None))):
        raise UsageError("the issue_comment payload's comment body is not a string")
    cmd = slash.parse(comment.get("body"))
    if cmd is None:
        ctx.notes.append("ignored: the comment holds no /minify command")
        return None
    return cmd, comment, issue


def _author(ctx: Context, prc: PRContext, comment: dict) -> tuple[str | None, str | None]:
    """(login, author association) of the comment's author; (None, None) for a bot (never answered)."""
    user = comment.get("user")
    if not isinstance(user, dict):
        raise UsageError("the issue_comment payload's comment.user is not an object")
    login, assoc = user.get("login"), comment.get("author_association")
    if not isinstance(login, str) or not re.fullmatch(r"[A-Za-z0-9\[\]_.-]{1,64}", login):
        raise UsageError("the issue_comment payload lacks a valid author login")
    if assoc is not None and not isinstance(assoc, str):
        raise UsageError("the issue_comment payload's author_association is not a string")
    ctx.requester = login
    if login == prc.login or user.get("type") == "Bot":
        ctx.prc = None  # never answer a bot
        ctx.notes.append("ignored: the comment was written by a bot")
        return None, None
    return login, assoc


def _refuse(ctx: Context, prc: PRContext, login: str, why: str) -> None:
    from bot import pr

    react(ctx, prc, pr.REACTION_REJECTED)
    reply(ctx, prc, f"@{login} I did not run `/minify`: {why}.")
    ctx.output("authorized", "false")


def comment_time(prc: PRContext):
    """When the comment was written: GitHub's answer for the comment (not the payload's copy)."""
    created = getattr(prc.comment, "created_at", None) if prc.comment is not None else None
    if created is None:
        raise RuntimeError("the comment has no creation time")
    return created


def request_input(ctx: Context) -> slash.MinifyRequest | None:
    """The `request` input (from the authorize job), re-validated."""
    if not ctx.inputs.request:
        return None
    try:
        return slash.MinifyRequest.from_text(ctx.inputs.request)
    except slash.RequestError as exc:
        raise UsageError(f"input 'request': {exc}") from None


def answer_failure(ctx: Context | None, reason: str) -> None:
    """On /minify, the commenter always hears back: a confused reaction and a one-line reply,
    unless a reply or results comment already said what happened."""
    if ctx is None or ctx.prc is None or ctx.answered:
        return
    from bot import pr

    try:
        react(ctx, ctx.prc, pr.REACTION_REJECTED)
        who = f"@{ctx.requester} " if ctx.requester else ""
        reply(ctx, ctx.prc, f"{who}`/minify` did not finish: {gha.md_escape(reason, 300)}.")
    except Exception:  # noqa: BLE001 - answering must not hide the original error
        pass
