"""Pull-request side of `/minify`: who may run it, which commit, acknowledgements, the sticky comment.

- Authorization fails closed: the commenter's permission comes from the collaborator-permission
  API and must be `write` or `admin`; any error answering that question is a refusal.
  `author_association` is only a cheap pre-filter (it cannot grant anything).
- The head SHA is pinned at authorization time (or taken from `--sha`, which must be the head), so
  what runs is what was authorized, even if someone pushes afterwards. Pull requests from forks need
  the full 40-hex `--sha` (a 7-hex prefix is 28 bits: a fork author can make a colliding commit).
  Without `--sha`, a head that moved after the comment was written (a push or force-push in the
  pull request's timeline) is refused: the commenter may not have seen what would run.
- Results live in ONE comment per pull request, found by a hidden marker *and* the bot's login
  (other tools copy markers), edited in place, never duplicated.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass

import github
from github import Auth, GithubException, GithubRetry

from bot.tracker.github import pacing

STICKY_MARKER = "<!-- minify-action:pr-results -->"
COMMENT_LIMIT = 65_000  # GitHub rejects bodies over 65,536 characters
WRITE_PERMISSIONS = ("admin", "write")
# Associations that can never carry write permission: rejected without an API call.
PREFILTER_REJECT = ("NONE", "FIRST_TIMER", "FIRST_TIME_CONTRIBUTOR", "MANNEQUIN")

REACTION_RECEIVED = "eyes"
REACTION_SUCCESS = "rocket"
REACTION_REJECTED = "confused"


class Rejected(Exception):
    """A /minify request we refuse; the message is shown to the commenter."""


def client(token: str, base_url: str | None = None) -> github.Github:
    """A PyGithub client that never replays a POST (a replayed POST after a 5xx files duplicates)."""
    retry = GithubRetry(total=3, allowed_methods=frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}))
    requests_pace, writes_pace = pacing()
    return github.Github(
        auth=Auth.Token(token),
        base_url=(base_url or os.environ.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
        retry=retry,
        timeout=30,
        seconds_between_requests=requests_pace,
        seconds_between_writes=writes_pace,
    )


def bot_login(gh: github.Github, override: str | None = None) -> str:
    """The login our comments are posted as: explicit, else GET /user, else the Actions bot.

    An Actions GITHUB_TOKEN cannot call GET /user; its comments are by `github-actions[bot]`.
    Transient errors are retried; anything else fails closed (bot.tracker.github.resolve_login).
    """
    if override:
        return override
    from bot.tracker.github import resolve_login

    return resolve_login(lambda: gh.get_user().login)


# ---------------------------------------------------------------- authorization


@dataclass
class Authorization:
    allowed: bool
    reason: str
    permission: str | None = None


def authorize(repo, login: str, association: str | None) -> Authorization:
    """May `login` run /minify on `repo`? Fails closed on any error."""
    if not login:
        return Authorization(False, "the comment has no author")
    assoc = (association or "NONE").upper()
    if assoc in PREFILTER_REJECT:
        return Authorization(False, f"@{login} is not a collaborator ({assoc.lower()}); /minify needs write access")
    try:
        permission = repo.get_collaborator_permission(login)
    except GithubException as exc:
        return Authorization(False, f"could not verify @{login}'s permission (HTTP {exc.status}); refusing to run")
    except Exception as exc:  # noqa: BLE001 - network errors, malformed answers: fail closed
        return Authorization(False, f"could not verify @{login}'s permission ({type(exc).__name__}); refusing to run")
    if permission in WRITE_PERMISSIONS:
        return Authorization(True, f"@{login} has {permission} permission", permission)
    return Authorization(False, f"/minify needs write or admin permission; @{login} has {permission or 'none'}",
                         permission)


FULL_SHA_RE = re.compile(r"[0-9a-f]{40}")


def _when(value) -> _dt.datetime | None:
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=_dt.timezone.utc)


def head_moves_after(events, since) -> list[str]:
    """Pushes and force-pushes in a pull request's timeline (GET /issues/{n}/timeline, raw event
    dicts) dated after `since`: the commits' committer dates and the force-push events' times."""
    since_dt = _when(since)
    if since_dt is None:
        raise Rejected("could not read when the comment was written")
    moves = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        kind = ev.get("event")
        if kind == "head_ref_force_pushed":
            at = _when(ev.get("created_at"))
            what = f"force-push to {str(ev.get('commit_id') or '?')[:12]}"
        elif kind == "committed":
            at = _when((ev.get("committer") or {}).get("date"))
            what = f"commit {str(ev.get('sha') or '?')[:12]}"
        else:
            continue
        if at is None or at > since_dt:
            moves.append(what)
    return moves


def pin_head(repo, pull, requested_sha: str | None, *, commented_at=None, timeline=None) -> str:
    """The full head SHA to test. Raises Rejected when it cannot be pinned safely.

    `commented_at` (the comment's creation time) and `timeline` (an iterable of the pull request's
    timeline events, raw dicts) let a command without --sha be refused when the head moved after
    the comment was written."""
    if pull.state != "open":
        raise Rejected(f"pull request #{pull.number} is {pull.state}")
    head = (pull.head.sha or "").lower()
    if not FULL_SHA_RE.fullmatch(head):
        raise Rejected("could not read the pull request's head commit")
    head_repo = getattr(pull.head, "repo", None)
    from_fork = head_repo is None or head_repo.full_name != repo.full_name
    if requested_sha:
        want = requested_sha.lower()
        if from_fork and not FULL_SHA_RE.fullmatch(want):
            raise Rejected(f"this pull request comes from a fork: --sha needs the full 40-hex commit id, "
                           f"not a prefix ({len(want)} digits)")
        if head != want if from_fork else not head.startswith(want):
            raise Rejected(
                f"--sha {want} is not the pull request's head ({head[:12]}); "
                "new commits were pushed after the command, comment again with the current head")
        return head
    if from_fork:
        raise Rejected("this pull request comes from a fork: give the full 40-hex commit to test with --sha "
                       "(after reviewing it), so that nothing pushed later runs")
    if commented_at is not None:
        try:
            events = [getattr(e, "raw_data", e) for e in (timeline or [])]
        except Exception as exc:  # noqa: BLE001 - fail closed
            raise Rejected(f"could not read the pull request's timeline ({type(exc).__name__})") from None
        moves = head_moves_after(events, commented_at)
        if moves:
            raise Rejected(f"the pull request's head changed after the comment was written ({', '.join(moves[:3])}); "
                           f"review the new head and comment again with --sha {head}")
    return head


def verify_checkout(expected_sha: str, actual_sha: str) -> None:
    if expected_sha.lower() != (actual_sha or "").strip().lower():
        raise Rejected(f"the checked-out commit {actual_sha[:12] or '(none)'} "
                       f"is not the authorized {expected_sha[:12]}")


# ---------------------------------------------------------------- acknowledgements


def react(comment, content: str) -> str | None:
    """Add a reaction; returns an error text instead of raising (acks must not break the run)."""
    try:
        comment.create_reaction(content)
        return None
    except GithubException as exc:
        return f"could not add the {content} reaction (HTTP {exc.status})"


def reply(issue, text: str):
    return issue.create_comment(text[:COMMENT_LIMIT])


# ---------------------------------------------------------------- the sticky comment


def find_sticky(issue, login: str):
    """The bot's results comment on this PR (marker AND author), oldest first if several."""
    for comment in issue.get_comments():  # PaginatedList: walks every page
        if STICKY_MARKER in (comment.body or "") and comment.user is not None and comment.user.login == login:
            return comment
    return None


def upsert_sticky(issue, login: str, body: str) -> tuple[object, str]:
    """Create or edit the results comment. Returns (comment, "created" | "updated" | "unchanged")."""
    if STICKY_MARKER not in body:
        body = STICKY_MARKER + "\n" + body
    if len(body) > COMMENT_LIMIT:
        note = "\n\n*(truncated: the full results are in the workflow run's artifacts)*\n"
        body = body[: COMMENT_LIMIT - len(note)] + note
    existing = find_sticky(issue, login)
    if existing is None:
        return issue.create_comment(body), "created"
    if existing.body == body:
        return existing, "unchanged"
    existing.edit(body)
    return existing, "updated"
