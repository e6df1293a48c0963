"""GET /search/issues for the stand-in: GitHub's issue search, as its documentation describes it.

https://docs.github.com/rest/search/search#search-issues-and-pull-requests and "Searching issues and
pull requests" (the query syntax):

- ``q`` is required (422 "Validation Failed", code ``missing``); at most 256 characters (422 "The
  search is longer than 256 characters."); at most five ``AND``/``OR``/``NOT`` operators (422).
- qualifiers: ``repo:owner/name`` (a repository that does not exist: 422 "The listed users and
  repositories cannot be searched..."), ``is:issue|pr|open|closed``, ``type:issue|pr``,
  ``state:open|closed``, ``label:NAME``, ``author:LOGIN``, ``in:title,body`` (title and body are
  searched either way); terms are words or "quoted phrases", all of which must appear in the title
  or the body (case-insensitive); ``a OR b`` needs either; ``NOT word`` and ``-word`` exclude.
- ``sort`` (one of the documented values; anything else: 422) and ``order``; without ``sort``, best
  match: the most term occurrences first, title hits weighing double.
- ``per_page`` (at most 100) and ``page``; the answer is ``{total_count, incomplete_results, items,
  search_type}`` with each item an issue as GET issues shapes it, plus ``score``.
- the search rate limit: ``stub.search_limits`` requests per minute (30 authenticated, 10
  anonymous); over it, 403 "API rate limit exceeded for ..." with ``X-RateLimit-Remaining: 0``,
  ``X-RateLimit-Reset`` and ``X-RateLimit-Resource: search``; every answer carries the search
  resource's ``X-RateLimit-*`` headers.
"""

from __future__ import annotations

import re
import time

MAX_QUERY = 256
MAX_OPERATORS = 5
SORTS = ("comments", "reactions", "reactions-+1", "reactions--1", "reactions-smile", "reactions-thinking_face",
         "reactions-heart", "reactions-tada", "interactions", "created", "updated")
NOT_SEARCHABLE = ("The listed users and repositories cannot be searched either because the resources do not "
                  "exist or you do not have permission to view them.")
_TOKEN = re.compile(r'(-?)(?:([A-Za-z_-]+):("[^"]*"|\S+)|"([^"]*)"|(\S+))')


class QueryError(ValueError):
    """A query GitHub answers with 422; ``code`` and ``message`` go into the error's ``errors``."""

    def __init__(self, message: str, code: str = "invalid"):
        super().__init__(message)
        self.message = message
        self.code = code


def parse(q: str | None) -> dict:
    """The query as {"qualifiers": [(name, value, negated)], "groups": [[term, ...]], "exclude": [term]}:
    each group is satisfied by any of its terms (``a OR b``), every group must be."""
    if not q or not q.strip():
        raise QueryError("q is missing", "missing")
    if len(q) > MAX_QUERY:
        raise QueryError(f"The search is longer than {MAX_QUERY} characters.")
    out = {"qualifiers": [], "groups": [], "exclude": []}
    operators = 0
    pending_or = negate_next = False
    for m in _TOKEN.finditer(q):
        minus, name, value, phrase, word = m.groups()
        if word in ("AND", "OR", "NOT"):
            operators += 1
            pending_or, negate_next = word == "OR", word == "NOT"
            continue
        if name:
            out["qualifiers"].append((name.lower(), value.strip('"'), bool(minus)))
            continue
        term = (phrase if phrase is not None else word).lower()
        if minus or negate_next:
            out["exclude"].append(term)
        elif pending_or and out["groups"]:
            out["groups"][-1].append(term)
        else:
            out["groups"].append([term])
        pending_or = negate_next = False
    if operators > MAX_OPERATORS:
        raise QueryError(f"More than {MAX_OPERATORS} AND / OR / NOT operators were used.")
    return out


def _qualified(issue: dict, repo_name: str, quals: list, users_of) -> bool:
    for name, value, negated in quals:
        v = value.lower()
        if name == "repo":
            ok = repo_name.lower() == v
        elif name in ("is", "type"):
            kind = "pr" if issue.get("pull_request") else "issue"
            if v in ("open", "closed"):
                ok = issue["state"] == v
            else:
                ok = kind == ("issue" if v == "issue" else "pr")
        elif name == "state":
            ok = issue["state"] == v
        elif name == "label":
            ok = v in {x.lower() for x in issue["labels"]}
        elif name == "author":
            ok = users_of(issue) == v
        else:  # in:title,body and qualifiers the stand-in does not model
            ok = True
        if ok == negated:
            return False
    return True


def score(issue: dict, query: dict) -> float:
    """0 when the issue does not match the terms; else occurrences, a title hit counting double."""
    title, body = (issue["title"] or "").lower(), (issue["body"] or "").lower()
    if any(t in title or t in body for t in query["exclude"]):
        return 0.0
    total = 0.0
    for group in query["groups"]:
        hits = sum(2 * title.count(t) + body.count(t) for t in group)
        if not hits:
            return 0.0
        total += hits
    return total or 1.0


def search(stub, login: str | None, query: dict) -> tuple[list[tuple[dict, dict, float]], dict]:
    """The matching (repo, issue, score) triples, best first (or as ``sort``/``order`` ask), and the
    rate-limit headers of this answer. Raises the stand-in's HttpError for what GitHub refuses."""
    from tests.ghstub.server import HttpError

    headers = _rate(stub, login)
    try:
        parsed = parse(query.get("q"))
    except QueryError as exc:
        raise HttpError(422, "Validation Failed", [{"message": exc.message, "resource": "Search", "field": "q",
                                                    "code": exc.code}], headers) from None
    sort = query.get("sort")
    if sort is not None and sort not in SORTS:
        raise HttpError(422, "Validation Failed", [{"resource": "Search", "field": "sort", "code": "invalid"}],
                        headers)
    repos = [v for n, v, neg in parsed["qualifiers"] if n == "repo" and not neg]
    if any(r.lower() not in {k.lower() for k in stub.repos} for r in repos):
        raise HttpError(422, "Validation Failed", [{"message": NOT_SEARCHABLE, "resource": "Search", "field": "q",
                                                    "code": "invalid"}], headers)
    found = []
    for r in stub.repos.values():
        for i in r["issues"].values():
            s = score(i, parsed)
            if s and _qualified(i, r["full_name"], parsed["qualifiers"], lambda x: x["user"].lower()):
                found.append((r, i, s))
    found.sort(key=_sort_key(sort), reverse=query.get("order", "desc") != "asc" if sort else True)
    return found, headers


def _sort_key(sort: str | None):
    if sort in ("created", "updated"):
        return lambda t: (t[1][f"{sort}_at"], t[1]["number"])
    if sort == "comments":
        return lambda t: (t[1]["comments"], t[1]["number"])
    return lambda t: (t[2], t[1]["created_at"], t[1]["number"])  # best match; reactions are not modelled


def _rate(stub, login: str | None) -> dict:
    """Count this request against the search limit; the headers GitHub sends with it. Over the limit:
    the 403 GitHub answers (raised)."""
    from tests.ghstub.server import HttpError

    who = login or "anonymous"
    limit = stub.search_limits["authenticated" if login else "anonymous"]
    now = time.time()
    times = [t for t in stub._search_times.get(who, []) if now - t < 60]
    reset = int((times[0] if times else now) + 60)
    headers = {"X-RateLimit-Limit": str(limit), "X-RateLimit-Resource": "search",
               "X-RateLimit-Reset": str(reset)}
    if len(times) >= limit:
        stub._search_times[who] = times
        who_words = f"user ID {stub.users[login]['id']}" if login in stub.users else "127.0.0.1"
        raise HttpError(403, f"API rate limit exceeded for {who_words}.",
                        headers={**headers, "X-RateLimit-Remaining": "0", "X-RateLimit-Used": str(limit)})
    times.append(now)
    stub._search_times[who] = times
    return {**headers, "X-RateLimit-Remaining": str(limit - len(times)), "X-RateLimit-Used": str(len(times))}
