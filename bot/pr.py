"""Pull-request side of `/minify`: who may run it, which commit, acknowledgements, the sticky comment.

- Authorization fails closed: the commenter's permission comes from the collaborator-permission
  API and must be `write` or `admin`; any error answering that question is a refusal.
  `author_association` is only a cheap pre-filter (it cannot grant anything).
- The head SHA is pinned at authorization time (or taken from `--sha`, which must be the head), so
  what runs is what was authorized, even if someone pushes afterwards.
- Results live in ONE comment per pull request, found by a hidden marker *and* the bot's login
  (other tools copy markers), edited in place, never duplicated.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import github
from github import Auth, GithubException, GithubRetry

STICKY_MARKER = "<!-- minify-action:pr-results -->"
COMMENT_LIMIT = 65_000  # GitHub rejects bodies over 65,536 characters
WRITE_PERMISSIONS = ("admin", "write")
# Associations that can never carry write permission: rejected without an API call.
PREFILTER_REJECT = ("NONE", "FIRST_TIMER", "FIRST_TIME_CONTRIBUTOR", "MANNEQUIN")
ACTIONS_BOT_LOGIN = "github-actions[bot]"

REACTION_RECEIVED = "eyes"
REACTION_SUCCESS = "rocket"
REACTION_REJECTED = "confused"


class Rejected(Exception):
    """A /minify request we refuse; the message is shown to the commenter."""


def client(token: str, base_url: str | None = None) -> github.Github:
    """A PyGithub client that never replays a POST (a replayed POST after a 5xx files duplicates)."""
    retry = GithubRetry(total=3, allowed_methods=frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}))
    pace = float(os.environ.get("MINIFY_BOT_WRITE_INTERVAL", "1.0"))
    return github.Github(
        auth=Auth.Token(token),
        base_url=(base_url or os.environ.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
        retry=retry,
        timeout=30,
        seconds_between_requests=min(pace, 0.25),
        seconds_between_writes=pace,
    )


def bot_login(gh: github.Github, override: str | None = None) -> str:
    """The login our comments are posted as: explicit, else GET /user, else the Actions bot.

    An Actions GITHUB_TOKEN cannot call GET /user; its comments are by `github-actions[bot]`.
    """
    if override:
        return override
    try:
        return gh.get_user().login
    except GithubException:
        return ACTIONS_BOT_LOGIN


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
    except Exception as exc:  # network errors, malformed answers: fail closed
        return Authorization(False, f"could not verify @{login}'s permission ({type(exc).__name__}); refusing to run")
    if permission in WRITE_PERMISSIONS:
        return Authorization(True, f"@{login} has {permission} permission", permission)
    return Authorization(False, f"/minify needs write or admin permission; @{login} has {permission or 'none'}", permission)


def pin_head(repo, pull, requested_sha: str | None) -> str:
    """The full head SHA to test. Raises Rejected when it cannot be pinned safely."""
    if pull.state != "open":
        raise Rejected(f"pull request #{pull.number} is {pull.state}")
    head = (pull.head.sha or "").lower()
    if len(head) != 40:
        raise Rejected("could not read the pull request's head commit")
    if requested_sha:
        if not head.startswith(requested_sha.lower()):
            raise Rejected(
                f"--sha {requested_sha} is not the pull request's head ({head[:12]}); "
                "new commits were pushed after the command, comment again with the current head")
        return head
    head_repo = getattr(pull.head, "repo", None)
    if head_repo is None or head_repo.full_name != repo.full_name:
        raise Rejected("this pull request comes from a fork: give the commit to test with --sha "
                       "(after reviewing it), so that nothing pushed later runs")
    return head


def verify_checkout(expected_sha: str, actual_sha: str) -> None:
    if expected_sha.lower() != (actual_sha or "").strip().lower():
        raise Rejected(f"the checked-out commit {actual_sha[:12] or '(none)'} is not the authorized {expected_sha[:12]}")


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
