"""GitHub (or GitHub Enterprise) issues through PyGithub.

Safety rules (see docs/reporting.md):
- No Search API for the bot's own issues (its index lags): candidates come from listing issues by
  the bot's label. ``IssueSearch`` searches *other* repositories (possibly related upstream issues,
  bot/report/upstream.py), read-only; what it finds is only ever listed, never matched or written to.
- POSTs are never replayed blindly. PyGithub's retry is limited to idempotent methods; a create or
  comment whose reply was a 5xx or a timeout is followed by a re-list, and only repeated when the
  issue (matched by its marker) or the comment (matched by its hidden tag) is not there.
- Writes are paced (PyGithub's seconds_between_writes, default 1 s: under the 80/min secondary
  limit; :func:`pacing`) and 403/429 rate limits are waited out, honouring Retry-After, up to ``max_rate_wait``.
- The token never appears in an error message.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time

import github
from github import Auth, GithubException, GithubRetry

from bot.errors import UsageError
from bot.fingerprint import parse_marker
from bot.tracker.base import Issue, Tracker, TrackerError

DEFAULT_API_URL = "https://api.github.com"
ACTIONS_BOT_LOGIN = "github-actions[bot]"
_RATE_WORDS = ("rate limit", "abuse", "try again later", "please wait")
PACE_ENV = "MINIFY_BOT_WRITE_INTERVAL"


def pacing() -> tuple[float, float]:
    """Every GitHub client's pace: (seconds between requests, seconds between writes).

    PyGithub's defaults, 0.25 s and 1 s, keep writes under GitHub's secondary limit (80 a minute).
    ``MINIFY_BOT_WRITE_INTERVAL`` sets the write interval and caps the request interval: 0 for a
    GitHub that has no such limit (a local stand-in, an Enterprise server without rate limits)."""
    raw = os.environ.get(PACE_ENV, "").strip()
    try:
        writes = float(raw) if raw else 1.0
    except ValueError:
        writes = -1.0
    if not 0 <= writes <= 3600:   # nan and inf too: an endless wait before every write
        # its value is not repeated: whatever was set there by mistake may be a secret
        raise UsageError(f"{PACE_ENV} must be a number of seconds from 0 to 3600")
    return min(writes, 0.25), writes


LOGIN_ATTEMPTS = 2  # each one is up to 6 requests: the client retries 5xx on GETs with backoff
INTEGRATION_WORDS = "resource not accessible by integration"


def resolve_login(get_login, *, attempts: int = LOGIN_ATTEMPTS, sleep=time.sleep, mask=lambda t: t) -> str:
    """The bot's own login from GET /user (``get_login``), failing closed.

    - transient failures (5xx, timeouts, connection errors) are retried with backoff; still failing
      after ``attempts``: TrackerError (exit 3), never a guess. A guessed login would not recognise
      the bot's own issues and dashboard, and everything would be filed a second time;
    - 403 "Resource not accessible by integration" is GitHub's definite answer for an installation
      token (the Actions GITHUB_TOKEN): its issues and comments are by ``github-actions[bot]`` (another
      GitHub App sets the `bot-login` input / --bot-login);
    - any other error (401 bad credentials, 404, other 403s): TrackerError.
    """
    last: Exception | None = None
    for attempt in range(attempts):
        try:
            login = get_login()
        except GithubException as exc:
            msg = str(exc.data.get("message", "") if isinstance(exc.data, dict) else exc.data).lower()
            if exc.status == 403 and INTEGRATION_WORDS in msg:
                return ACTIONS_BOT_LOGIN
            if exc.status < 500:
                raise TrackerError(mask(f"GET /user failed (HTTP {exc.status}: {msg[:200]}); cannot tell which "
                                        "issues are the bot's own. Set the bot-login input (--bot-login)")) from None
            last = exc
        except Exception as exc:  # noqa: BLE001 - timeouts and connection errors: transient
            last = exc
        else:
            if isinstance(login, str) and login:
                return login
            last = ValueError("GET /user returned no login")
        if attempt + 1 < attempts:
            sleep(min(2.0 ** attempt, 10.0))
    what = f"HTTP {last.status}" if isinstance(last, GithubException) else type(last).__name__
    raise TrackerError(mask(f"GET /user failed {attempts} times ({what}); the bot's own login is unknown, so "
                            "nothing was filed (a guess would file every bug again). Set the bot-login input "
                            "(--bot-login) to skip this call"))


def _is_pull(gi) -> bool:
    """A pull request among the listed issues. Not ``gi.pull_request``: an issue's listing carries no
    such key, and reading it fetches the issue again, one request per listed issue."""
    return "/pull/" in (gi.html_url or "")


def _given(value: float | None, default: float) -> float:
    return default if value is None else value


class GitHubTracker(Tracker):
    name = "github"

    def __init__(self, repo: str, token: str, api_url: str | None = None, *, login: str | None = None,
                 seconds_between_requests: float | None = None, seconds_between_writes: float | None = None,
                 max_rate_wait: float = 300.0, create_attempts: int = 3, timeout: int = 15,
                 sleep=time.sleep, retry_backoff: float = 0.5):
        if not token:
            raise TrackerError("the github tracker needs a token (--token or GITHUB_TOKEN)")
        if "/" not in (repo or ""):
            raise TrackerError(f"--repo must be owner/name, got {repo!r}")
        self.repo_name = repo
        self._token = token
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self.max_rate_wait = max_rate_wait
        self.create_attempts = create_attempts
        self._sleep = sleep
        self._login = login
        # Retries for idempotent methods only: never POST (a replayed create files a duplicate).
        requests_pace, writes_pace = pacing()
        retry = GithubRetry(total=5, backoff_factor=retry_backoff, max_rate_limit_wait=max_rate_wait,
                            allowed_methods=frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"}))
        self.gh = github.Github(auth=Auth.Token(token), base_url=self.api_url, timeout=int(timeout), retry=retry,
                                per_page=100,
                                seconds_between_requests=_given(seconds_between_requests, requests_pace),
                                seconds_between_writes=_given(seconds_between_writes, writes_pace), lazy=True)
        self.repo = self.gh.get_repo(repo)

    # ------------------------------------------------------------------ helpers
    def _mask(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def _fail(self, what: str, exc: Exception) -> TrackerError:
        if isinstance(exc, GithubException):
            msg = exc.data.get("message") if isinstance(exc.data, dict) else str(exc.data)
            detail = f"HTTP {exc.status}: {msg}"
            if isinstance(exc.data, dict) and exc.data.get("errors"):
                detail += f" {exc.data['errors']}"
        else:
            detail = f"{type(exc).__name__}: {exc}"
        return TrackerError(self._mask(f"GitHub {what} failed ({self.api_url}, {self.repo_name}): {detail}"))

    def _rate_wait(self, exc: GithubException) -> float | None:
        """Seconds to wait if ``exc`` is a rate limit (403/429), else None."""
        if exc.status not in (403, 429):
            return None
        headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
        msg = str(exc.data.get("message", "") if isinstance(exc.data, dict) else exc.data).lower()
        if exc.status == 403 and "retry-after" not in headers and not any(w in msg for w in _RATE_WORDS) \
                and headers.get("x-ratelimit-remaining") != "0":
            return None  # a permission error, not a rate limit
        if "retry-after" in headers:
            try:
                return float(headers["retry-after"])
            except ValueError:
                pass
        if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
            return max(1.0, float(headers["x-ratelimit-reset"]) - time.time() + 1)
        return 60.0  # GitHub: wait at least a minute on a secondary limit without Retry-After

    def _call(self, what: str, fn):
        """Call ``fn``, waiting out 403/429 rate limits (they mean nothing was stored). Other
        GitHub errors propagate unchanged; a rate limit longer than ``max_rate_wait`` becomes a
        TrackerError."""
        waited = 0.0
        while True:
            try:
                return fn()
            except GithubException as exc:
                wait = self._rate_wait(exc)
                if wait is None:
                    raise
                if waited + wait > self.max_rate_wait:
                    raise self._fail(what + " (rate limited)", exc) from None
                self._sleep(wait)
                waited += wait

    def _with_rate_limit(self, what: str, fn):
        """Like _call, but any failure becomes a TrackerError with a clear, token-free message."""
        try:
            return self._call(what, fn)
        except TrackerError:
            raise
        except Exception as exc:  # noqa: BLE001 - GithubException, connection errors, timeouts
            raise self._fail(what, exc) from None

    @staticmethod
    def _outcome_unknown(exc: Exception) -> bool:
        if isinstance(exc, GithubException):
            return exc.status >= 500
        return isinstance(exc, (OSError, TimeoutError)) or "Timeout" in type(exc).__name__ \
            or "Connection" in type(exc).__name__

    def _to_issue(self, gi) -> Issue:
        return Issue(number=gi.number, title=gi.title, body=gi.body or "", state=gi.state,
                     labels=[lb.name for lb in gi.labels], author=gi.user.login if gi.user else "",
                     url=gi.html_url, state_reason=getattr(gi, "state_reason", None))

    # ------------------------------------------------------------------ Tracker
    def bot_login(self) -> str:
        """Who the bot's issues and comments are by: ``login`` when given, else GET /user (see
        ``resolve_login``: transient errors are retried, anything unclear fails closed)."""
        if self._login is None:
            self._login = resolve_login(lambda: self._call("GET /user", lambda: self.gh.get_user().login),
                                        sleep=self._sleep, mask=self._mask)
        return self._login

    def list_issues(self, label: str) -> list[Issue]:
        def go():
            return [self._to_issue(gi) for gi in self.repo.get_issues(state="all", labels=[label],
                                                                         sort="created", direction="asc")
                    if not _is_pull(gi)]
        return self._with_rate_limit("listing issues", go)

    def _find_by_marker(self, labels: list[str], sig: str) -> Issue | None:
        me = self.bot_login()
        for issue in self.list_issues(labels[0]):
            if issue.author != me or issue.state != "open":
                continue  # the author first: a marker on someone else's issue is never parsed
            state = parse_marker(issue.body)
            sigs = state.get("sigs") if state else None
            if isinstance(sigs, list) and sig in sigs:
                return issue
        return None

    def create_issue(self, title, body, labels, assignees, marker_sig) -> Issue:
        last: Exception | None = None
        for attempt in range(self.create_attempts):
            if attempt:
                # The previous create may have been stored: list again before creating again.
                found = self._find_by_marker(labels, marker_sig)
                if found:
                    return found
                self._sleep(min(2.0 ** attempt, 10.0))
            try:
                gi = self._call("creating an issue", lambda: self.repo.create_issue(
                    title=title, body=body, labels=labels, assignees=list(assignees)))
                return self._to_issue(gi)
            except TrackerError:
                raise
            except Exception as exc:  # noqa: BLE001
                if not self._outcome_unknown(exc):
                    raise self._fail("creating an issue", exc) from None
                last = exc
        found = self._find_by_marker(labels, marker_sig)
        if found:
            return found
        raise self._fail(f"creating an issue ({self.create_attempts} attempts)", last)

    def edit_issue(self, number, *, body=None, state=None, state_reason=None, labels=None) -> Issue:
        kwargs = {}
        if body is not None:
            kwargs["body"] = body
        if state is not None:
            kwargs["state"] = state
        if state_reason is not None:
            kwargs["state_reason"] = state_reason
        if labels is not None:
            kwargs["labels"] = list(labels)

        def go():
            gi = self.repo.get_issue(number)
            gi.edit(**kwargs)
            return self._to_issue(gi)
        return self._with_rate_limit(f"editing issue #{number}", go)

    def comment(self, number, body, tag) -> str:
        gi = self._with_rate_limit(f"reading issue #{number}", lambda: self.repo.get_issue(number))
        last: Exception | None = None
        for attempt in range(self.create_attempts):
            if attempt:
                for c in self._with_rate_limit("listing comments", lambda: list(gi.get_comments())):
                    if tag and tag in (c.body or ""):
                        return c.html_url
                self._sleep(min(2.0 ** attempt, 10.0))
            try:
                return self._call(f"commenting on #{number}", lambda: gi.create_comment(body)).html_url
            except TrackerError:
                raise
            except Exception as exc:  # noqa: BLE001
                if not self._outcome_unknown(exc):
                    raise self._fail(f"commenting on #{number}", exc) from None
                last = exc
        raise self._fail(f"commenting on #{number} ({self.create_attempts} attempts)", last)

    def get_issue(self, number) -> Issue:
        def go():
            return self._to_issue(self.repo.get_issue(int(number)))
        return self._with_rate_limit(f"reading issue #{number}", go)

    def upstream_search(self, api_url: str | None = None) -> "IssueSearch":
        """A read-only search of issues at ``api_url`` (default github.com's API), with this tracker's
        token only when that is this tracker's own API: a GitHub Enterprise token is never sent to
        github.com (that search is anonymous, with GitHub's lower anonymous limit)."""
        url = (api_url or DEFAULT_API_URL).rstrip("/")
        return IssueSearch(url, self._token if url == self.api_url else None)

    def ensure_label(self, name, color, description) -> None:
        """Create the label, or update its colour and description when they differ.

        The repository object is lazy, and so is what `get_label` returns: reading `color` is what
        sends the GET (a 404 there means the label does not exist)."""
        def read():
            label = self.repo.get_label(name)
            return label, label.color, label.description

        try:
            label, have_color, have_desc = self._with_rate_limit("reading a label", read)
        except TrackerError as exc:
            if "HTTP 404" not in str(exc):
                raise
        else:
            if (have_color or "").lower() != color.lower() or (have_desc or "") != description:
                self._with_rate_limit("updating a label", lambda: label.edit(label.name, color, description))
            return
        try:
            self._with_rate_limit("creating a label", lambda: self.repo.create_label(name, color, description))
        except TrackerError as exc:
            if "already_exists" not in str(exc):  # another reporter created it first
                raise

    def close(self) -> None:
        self.gh.close()


# ---------------------------------------------------------------------------- issue search

SEARCH_PAGE = 5  # results asked for per query


class SearchFailed(Exception):
    """A search that gave no usable answer. ``reason`` is a few words for a report line
    ("rate limited", "invalid query (HTTP 422)", "malformed answer", "timed out", ...)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclasses.dataclass
class FoundIssue:
    """One search result: an issue of ``repo`` (owner/name, from its URL)."""

    number: int
    title: str
    state: str  # open | closed
    url: str
    repo: str


_ISSUE_URL = re.compile(r"https?://[^/\s]+/([A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100})/issues/(\d{1,12})")


class IssueSearch:
    """``GET /search/issues`` through PyGithub's requester: read-only, anonymous without a token.

    The tracker's conventions, for a rate-limited endpoint (30 searches a minute with a token, 10
    without): GETs are retried on 5xx with backoff (never a read timeout: a slow search is slow
    again), 403/429 rate limits are waited out only when the wait (Retry-After, or the reset time)
    fits in ``max_rate_wait`` (default 10 s), and any answer that is not a search result raises
    ``SearchFailed`` with a short reason. Nothing is ever written."""

    def __init__(self, api_url: str | None = None, token: str | None = None, *, timeout: float = 10,
                 max_rate_wait: float = 10.0, sleep=time.sleep, retry_backoff: float = 0.5,
                 seconds_between_requests: float | None = None):
        from urllib3.util.retry import Retry

        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self.authenticated = bool(token)
        self.max_rate_wait = max_rate_wait
        self._sleep = sleep
        retry = Retry(total=2, read=0, backoff_factor=retry_backoff, status_forcelist=(500, 502, 503, 504),
                      allowed_methods=frozenset({"GET"}), raise_on_status=False, respect_retry_after_header=False)
        self.gh = github.Github(auth=Auth.Token(token) if token else None, base_url=self.api_url,
                                timeout=max(1, int(timeout)), retry=retry, per_page=SEARCH_PAGE,
                                seconds_between_requests=_given(seconds_between_requests, pacing()[0]), lazy=True)

    # the tracker's reading of a 403/429 (Retry-After, X-RateLimit-Reset, GitHub's wording); it uses no state
    _rate_wait = GitHubTracker._rate_wait

    def search(self, query: str, limit: int = SEARCH_PAGE) -> tuple[int, list[FoundIssue]]:
        """(total_count, the first ``limit`` results) for the query ``q`` (GitHub's search syntax)."""
        waited = 0.0
        while True:
            try:
                _, data = self.gh.requester.requestJsonAndCheck(
                    "GET", "/search/issues", parameters={"q": query, "per_page": max(1, min(100, limit))})
                return _search_answer(data, limit)
            except GithubException as exc:
                wait = self._rate_wait(exc)
                if wait is None:
                    raise SearchFailed(_search_error(exc)) from None
                if waited + wait > self.max_rate_wait:
                    raise SearchFailed("rate limited") from None
                self._sleep(wait)
                waited += wait
            except SearchFailed:
                raise
            except ValueError:  # a body that starts like JSON and is not
                raise SearchFailed("malformed answer") from None
            except Exception as exc:  # noqa: BLE001 - requests' timeouts and connection errors
                name = type(exc).__name__  # a read timeout the retry gave up on is a ConnectionError
                timed_out = "Timeout" in name or "timed out" in str(exc).lower()
                raise SearchFailed("timed out" if timed_out else f"unreachable ({name})") from None

    def close(self) -> None:
        self.gh.close()


def _search_error(exc: GithubException) -> str:
    if exc.status == 422:
        return "invalid query (HTTP 422)"
    if exc.status in (401, 403):
        return f"not allowed (HTTP {exc.status})"
    return f"HTTP {exc.status}"


def _search_answer(data, limit: int) -> tuple[int, list[FoundIssue]]:
    """A search document read strictly: ``total_count`` and ``items`` with number, title, state and
    an issue URL; an item that is not one is skipped, a document that is not one raises."""
    if not isinstance(data, dict) or not isinstance(data.get("items"), list) \
            or not isinstance(data.get("total_count"), int):
        raise SearchFailed("malformed answer")
    found = []
    for item in data["items"]:
        if not isinstance(item, dict):
            continue
        number, title, state, url = (item.get(k) for k in ("number", "title", "state", "html_url"))
        m = _ISSUE_URL.fullmatch(url) if isinstance(url, str) else None
        if isinstance(number, int) and isinstance(title, str) and state in ("open", "closed") and m \
                and int(m.group(2)) == number:
            found.append(FoundIssue(number, title[:300], state, url, m.group(1)))
    if data["items"] and not found:
        raise SearchFailed("malformed answer")
    return data["total_count"], found[:limit]
