"""ghstub: a local, stateful stand-in for GitHub's REST API, for tests.

A real HTTP server on 127.0.0.1 (an ephemeral port) that real clients (PyGithub, requests, curl)
talk to. Tests seed it, point the client at ``stub.base_url``, inject faults, then assert on the
stored state and the request log.

Quick start::

    from tests.ghstub import GitHubStub, Fault

    with GitHubStub() as stub:                      # or GitHubStub(prefix="/api/v3") for GHES
        stub.add_repo("acme/models")
        stub.add_user("minify-bot", token="bot-token", permission="write")
        stub.add_user("alice", token="alice-token", permission="admin")
        stub.add_pull(None, head_sha="a" * 40, author="mallory")   # -> PR number
        gh = github.Github(auth=github.Auth.Token("bot-token"), base_url=stub.base_url,
                           seconds_between_requests=0, seconds_between_writes=0)
        ...
        assert len(stub.issues()) == 1

Pytest fixtures live in ``tests/ghstub/fixtures.py`` (import them into a test module):
``ghstub`` (a started stub with repo ``acme/models``, bot user ``minify-bot``/token ``bot-token`` with write
access, ``alice``/``alice-token`` admin, ``mallory``/``mallory-token`` read) and ``ghstub_ghes`` (same under
``/api/v3``).

Seeding
    add_repo(full_name, has_issues=True)                          issues disabled -> POST issues is 410
    add_user(login, token=None, permission="write", repo=None, type="User")
        permission in admin|maintain|write|triage|read|none; repo=None means every repo. The repo
        owner is admin. A token authenticates as the user ("Authorization: token X" or "Bearer X");
        an unknown token gets 401. Users without push access cannot label or write (403
        "Resource not accessible by integration"), like GitHub.
    add_pull(number|None, head_sha, author, repo=None, title=, body=, head_ref=, base_ref=, state=)
        a PR is also an issue (shared numbering; listed by GET issues with a ``pull_request`` key).
        head_repo="owner/fork": the PR comes from a fork; committed_at=: the head commit's date.
    add_issue(title, body="", author="minify-bot", labels=None, repo=None)
        store an issue as if ``author`` had filed it (no request logged); returns its number.
    push(number, head_sha, force=False, actor=None, at=None, committed_at=None)
        move a PR's head: a ``committed`` timeline event (dated by the commit) and, with force, a
        ``head_ref_force_pushed`` event dated ``at`` (server time).

Endpoints (also under the ``prefix``, e.g. /api/v3, for GHES)
    GET  /user                                                    the token's user (login)
    GET  /repos/{o}/{r}
    GET  /repos/{o}/{r}/issues        state=open|closed|all, labels=a,b (all must match), creator,
                                      sort=created|updated, direction, per_page (<=100), page; Link header
    POST /repos/{o}/{r}/issues        title, body, labels (created on demand), assignees (must exist)
    GET/PATCH /repos/{o}/{r}/issues/{n}                           title, body, state, state_reason, labels, assignees
    GET/POST  /repos/{o}/{r}/issues/{n}/comments                  (GET paginated)
    GET/PATCH /repos/{o}/{r}/issues/comments/{id}
    GET/POST  /repos/{o}/{r}/issues/comments/{id}/reactions        201 new, 200 if the user already reacted so
    GET/POST  /repos/{o}/{r}/labels, GET/PATCH /repos/{o}/{r}/labels/{name}   422 already_exists on duplicates
    GET  /repos/{o}/{r}/issues/{n}/timeline                        committed, head_ref_force_pushed, commented
    POST /repos/{o}/{r}/issues/{n}/labels                          {"labels": [...]} or a bare list
    GET  /repos/{o}/{r}/pulls/{n}                                  head.sha, head.ref, user, state ...
    GET  /repos/{o}/{r}/collaborators/{user}/permission            permission (legacy), role_name
    GET  /search/issues               q (required; repo:, is:, state:, label:, author: qualifiers, words,
                                      "phrases", OR, NOT/-word), sort, order, per_page, page ->
                                      {total_count, incomplete_results, items (+ score), search_type};
                                      422 for a missing/over-256-character q, >5 operators, an unknown
                                      repo: or sort; the search rate limit (stub.search_limits, per
                                      minute: 30 authenticated, 10 anonymous) answers 403 "API rate
                                      limit exceeded" with X-RateLimit-Remaining: 0 (tests/ghstub/search.py)
    Bodies of issues and comments over 65,536 characters -> 422 "body is too long (maximum is 65536
    characters)" (``enforce_body_limit=False`` to disable).

Fault injection (``stub.inject(...)`` -> Fault; consumed in order, first match wins)
    inject(method="POST", path=r"/issues$", status=502, after_store=True)
        the create is stored, then the client gets a 502 (the duplicate-issue hazard).
    inject(method="POST", status=403, retry_after=1)            secondary rate limit with Retry-After
                                                                (default message is GitHub's secondary-limit text)
    inject(status=429, retry_after=1)                           too many requests
    inject(method="PATCH", status=422, message="body is too long (maximum is 65536 characters)")
    inject(status=None, delay=0.5)                              a slow (but otherwise normal) response
    inject(path=r"/search/issues", status=200, body="<html>")   a body that is not JSON (sent as it is)
    Fault fields: method ("*"), path (regex searched in the path without the prefix), status, message,
    after_store, retry_after, delay, times (how many matching requests it hits), headers (they replace
    the default X-RateLimit-* headers of the same name), body (raw text instead of the JSON error).
    stub.delay = seconds                                        slow every response
    stub.clear_faults()

State for assertions (API-shaped JSON copies)
    stub.issues(repo=None, include_pulls=False)   stub.comments(repo=None, number=None)
    stub.reactions(repo=None, comment_id=None)    stub.labels(repo=None)
    stub.requests: list[RequestRecord(method, path, query, headers, body, status, response, login,
                   started, finished)]   stub.writes(): the POST/PATCH/PUT/DELETE subset
    stub.base_url (for PyGithub, includes the prefix), stub.origin, stub.port

OpenAPI conformance: ``tests.ghstub.openapi`` (``load_spec()``, ``OpenAPIChecker(spec).check(record)``)
validates recorded request and response bodies against GitHub's published description
(npm ``@octokit/openapi``, fetched into ``~/.cache/minify-action`` on first use).
"""

from tests.ghstub.server import (  # noqa: F401
    BODY_LIMIT,
    SECONDARY_RATE_MESSAGE,
    Fault,
    GitHubStub,
    RequestRecord,
)

__all__ = ["GitHubStub", "Fault", "RequestRecord", "BODY_LIMIT", "SECONDARY_RATE_MESSAGE"]
