"""A stateful stand-in for the parts of GitHub's REST API the bot uses.

A real HTTP server (stdlib ``http.server``, one thread per request) bound to 127.0.0.1 only.
See the package docstring (tests/ghstub/__init__.py) for the public API.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import itertools
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

BODY_LIMIT = 65536
SECONDARY_RATE_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID."
)
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
PERMISSIONS = ("admin", "maintain", "write", "triage", "read", "none")
_WRITE_PERMS = ("admin", "maintain", "write")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclasses.dataclass
class Fault:
    """One injected failure. Matching requests consume it until ``times`` is used up.

    method, path: request method and a regex searched in the request path (prefix stripped).
    status: HTTP status to answer with; ``message`` goes into the JSON error body.
    after_store: process the request normally (state changes are kept), then answer with
        ``status`` instead of the real response, like a proxy timing out after GitHub committed.
    retry_after: seconds, sent as a ``Retry-After`` header.
    delay: seconds to sleep before answering (a slow response); with status None the request
        is otherwise served normally.
    body: answer with this text as the body instead of a JSON error (garbage, HTML, a cut-off
        document): what a proxy or an overloaded GitHub sometimes sends.
    """

    method: str = "*"
    path: str = ".*"
    status: int | None = 502
    message: str = "Server Error"
    after_store: bool = False
    retry_after: int | None = None
    delay: float = 0.0
    times: int = 1
    headers: dict = dataclasses.field(default_factory=dict)
    body: str | None = None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (self.method in ("*", method)) and re.search(self.path, path) is not None


@dataclasses.dataclass
class RequestRecord:
    method: str
    path: str  # without the GHES prefix and without the query string
    query: dict
    headers: dict
    body: Any  # parsed JSON request body, or None
    status: int = 0
    response: Any = None  # parsed JSON response body (None for empty bodies)
    login: str | None = None  # authenticated user, None when anonymous
    started: float = 0.0
    finished: float = 0.0


class RawBody(str):
    """A response body sent as it is, not as JSON (Fault.body)."""


class HttpError(Exception):
    def __init__(self, status: int, message: str, errors: list | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}


class GitHubStub:
    """A stateful GitHub REST stand-in. Use as a context manager or call start()/stop()."""

    def __init__(self, prefix: str = "", host: str = "127.0.0.1", enforce_body_limit: bool = True):
        if prefix and not prefix.startswith("/"):
            raise ValueError("prefix must start with '/' (e.g. '/api/v3')")
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("the stand-in only binds to loopback addresses")
        self.prefix = prefix.rstrip("/")
        self.host = host
        self.enforce_body_limit = enforce_body_limit
        self.lock = threading.RLock()
        self._ids = itertools.count(1000)
        self.users: dict[str, dict] = {}  # login -> user record
        self.tokens: dict[str, str] = {}  # token -> login
        self.repos: dict[str, dict] = {}  # "owner/name" -> repo state
        self.requests: list[RequestRecord] = []
        self.faults: list[Fault] = []
        self.delay = 0.0  # seconds added to every response
        # GET /search/issues: GitHub's search rate limit, requests per minute (its documented
        # 30 authenticated, 10 anonymous); over it, 403 "API rate limit exceeded" with the
        # X-RateLimit-* headers of the search resource
        self.search_limits = {"authenticated": 30, "anonymous": 10}
        self._search_times: dict[str, list[float]] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> "GitHubStub":
        stub = self

        class Handler(_Handler):
            server_stub = stub

        self._httpd = ThreadingHTTPServer((self.host, 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="ghstub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "GitHubStub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd, "server not started"
        return self._httpd.server_address[1]

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as PyGithub's base_url (includes the GHES prefix if any)."""
        return self.origin + self.prefix

    @property
    def html_origin(self) -> str:
        return self.origin

    # ----------------------------------------------------------------- seeding
    def add_user(self, login: str, token: str | None = None, permission: str = "write",
                 repo: str | None = None, type: str = "User") -> dict:
        """Create a user; ``token`` authenticates as them; ``permission`` applies to ``repo``
        (default: every repo, including ones added later)."""
        if permission not in PERMISSIONS:
            raise ValueError(f"permission must be one of {PERMISSIONS}")
        with self.lock:
            user = self.users.get(login)
            if user is None:
                user = {"login": login, "id": next(self._ids), "type": type, "permissions": {},
                        "default_permission": None}
                self.users[login] = user
            if repo is None:
                user["default_permission"] = permission
            else:
                user["permissions"][repo] = permission
            if token is not None:
                self.tokens[token] = login
            return user

    def add_repo(self, full_name: str, has_issues: bool = True) -> dict:
        owner, _, name = full_name.partition("/")
        if not owner or not name:
            raise ValueError("repo must be owner/name")
        with self.lock:
            if full_name not in self.repos:
                if owner not in self.users:
                    self.add_user(owner, permission="admin", type="Organization")
                self.repos[full_name] = {
                    "full_name": full_name, "id": next(self._ids), "owner": owner, "name": name,
                    "has_issues": has_issues, "issues": {}, "comments": {}, "labels": {},
                    "pulls": {}, "next_number": 1,
                }
            return self.repos[full_name]

    def add_pull(self, number: int | None, head_sha: str, author: str, repo: str | None = None,
                 title: str = "A pull request", body: str = "", head_ref: str = "feature",
                 base_ref: str = "main", state: str = "open", head_repo: str | None = None,
                 committed_at: str | None = None) -> int:
        """Create a pull request (it is also an issue, sharing the number space). Returns its number.

        ``head_repo`` ("owner/name"): the pull request comes from that fork. ``committed_at``: the
        committer date of the head commit (ISO 8601; default now), shown in the PR's timeline."""
        with self.lock:
            r = self.repos[repo] if repo else self._only_repo()
            if author not in self.users:
                self.add_user(author, permission="read")
            if number is None:
                number = r["next_number"]
            if number in r["issues"]:
                raise ValueError(f"#{number} already exists")
            r["next_number"] = max(r["next_number"], number + 1)
            issue = self._new_issue(r, number, title, body, author, [], [])
            issue["pull_request"] = True
            issue["state"] = state
            r["issues"][number] = issue
            r["pulls"][number] = {"head_sha": head_sha, "head_ref": head_ref, "base_ref": base_ref,
                                  "head_repo": head_repo, "timeline": []}
            self._timeline_commit(r, number, head_sha, author, committed_at or _now())
            return number

    def add_issue(self, title: str, body: str = "", author: str = "minify-bot", labels: list | None = None,
                  repo: str | None = None) -> int:
        """Store an issue as if ``author`` had filed it (no request is logged). Returns its number."""
        with self.lock:
            r = self.repos[repo] if repo else self._only_repo()
            number = r["next_number"]
            r["next_number"] += 1
            r["issues"][number] = self._new_issue(r, number, title, body, author,
                                                  self._ensure_labels(r, labels or []), [])
            return number

    def push(self, number: int, head_sha: str, *, force: bool = False, actor: str | None = None,
             at: str | None = None, committed_at: str | None = None, repo: str | None = None) -> None:
        """Move a pull request's head: a push (a ``committed`` timeline event, dated by the commit's
        committer date) or, with ``force``, a force-push (a ``head_ref_force_pushed`` event dated
        ``at``, the server's time). Dates are ISO 8601 strings (default now)."""
        with self.lock:
            r = self.repos[repo] if repo else self._only_repo()
            p = r["pulls"][number]
            i = r["issues"][number]
            actor = actor or i["user"]
            when = at or _now()
            if force:
                p["timeline"].append({"kind": "head_ref_force_pushed", "id": next(self._ids), "actor": actor,
                                      "commit_id": head_sha, "created_at": when})
            self._timeline_commit(r, number, head_sha, actor, committed_at or when)
            p["head_sha"] = head_sha
            i["updated_at"] = when

    def _timeline_commit(self, r: dict, number: int, sha: str, author: str, date: str) -> None:
        r["pulls"][number]["timeline"].append({"kind": "committed", "sha": sha, "author": author, "date": date})

    def inject(self, fault: Fault | None = None, **kwargs) -> Fault:
        """Queue a fault: ``stub.inject(method="POST", path=r"/issues$", status=502, after_store=True)``."""
        fault = fault or Fault(**kwargs)
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    # ----------------------------------------------------------------- state for assertions
    def _only_repo(self) -> dict:
        if len(self.repos) != 1:
            raise ValueError("several repos: pass repo=")
        return next(iter(self.repos.values()))

    def issues(self, repo: str | None = None, include_pulls: bool = False) -> list[dict]:
        """Stored issues (API-shaped copies), oldest first."""
        with self.lock:
            r = self.repos[repo] if repo else self._only_repo()
            return [self._issue_json(r, i) for i in sorted(r["issues"].values(), key=lambda i: i["number"])
                    if include_pulls or not i.get("pull_request")]

    def comments(self, repo: str | None = None, number: int | None = None) -> list[dict]:
        with self.lock:
            r = self.repos[repo] if repo else self._only_repo()
            return [self._comment_json(r, c) for c in sorted(r["comments"].values(), key=lambda c: c["id"])
                    if number is None or c["issue"] == number]

    def reactions(self, repo: str | None = None, comment_id: int | None = None) -> list[dict]:
        with self.lock:
            r = self.repos[repo] if repo else self._only_repo()
            out = []
            for c in r["comments"].values():
                if comment_id is None or c["id"] == comment_id:
                    out.extend(self._reaction_json(x) for x in c["reactions"])
            return out

    def labels(self, repo: str | None = None) -> list[dict]:
        with self.lock:
            r = self.repos[repo] if repo else self._only_repo()
            return [self._label_json(r, label) for label in r["labels"].values()]

    def writes(self) -> list[RequestRecord]:
        """Requests that could change state (POST/PATCH/PUT/DELETE), in arrival order."""
        with self.lock:
            return [q for q in self.requests if q.method in ("POST", "PATCH", "PUT", "DELETE")]

    # ----------------------------------------------------------------- JSON shapes
    def _user_json(self, login: str) -> dict:
        u = self.users.get(login) or {"login": login, "id": 0, "type": "User"}
        o = self.html_origin
        api = self.base_url + "/users/" + login
        return {
            "login": login, "id": u["id"], "node_id": f"U_{u['id']}",
            "avatar_url": f"{o}/avatars/{login}", "gravatar_id": "",
            "url": api, "html_url": f"{o}/{login}",
            "followers_url": api + "/followers", "following_url": api + "/following{/other_user}",
            "gists_url": api + "/gists{/gist_id}", "starred_url": api + "/starred{/owner}{/repo}",
            "subscriptions_url": api + "/subscriptions", "organizations_url": api + "/orgs",
            "repos_url": api + "/repos", "events_url": api + "/events{/privacy}",
            "received_events_url": api + "/received_events", "type": u["type"],
            "site_admin": False, "user_view_type": "public",
        }

    def _private_user_json(self, login: str) -> dict:
        d = self._user_json(login)
        d.update({
            "user_view_type": "private", "name": login, "company": None, "blog": "", "location": None,
            "email": None, "hireable": None, "bio": None, "twitter_username": None,
            "public_repos": 0, "public_gists": 0, "followers": 0, "following": 0,
            "created_at": "2020-01-01T00:00:00Z", "updated_at": "2020-01-01T00:00:00Z",
            "private_gists": 0, "total_private_repos": 0, "owned_private_repos": 0, "disk_usage": 0,
            "collaborators": 0, "two_factor_authentication": True,
        })
        return d

    def _repo_api(self, r: dict) -> str:
        return f"{self.base_url}/repos/{r['full_name']}"

    def _repo_json(self, r: dict, login: str | None) -> dict:
        api = self._repo_api(r)
        html = f"{self.html_origin}/{r['full_name']}"
        urls = {k + "_url": api + "/" + v for k, v in {
            "archive": "{archive_format}{/ref}", "assignees": "assignees{/user}", "blobs": "git/blobs{/sha}",
            "branches": "branches{/branch}", "collaborators": "collaborators{/collaborator}",
            "comments": "comments{/number}", "commits": "commits{/sha}", "compare": "compare/{base}...{head}",
            "contents": "contents/{+path}", "contributors": "contributors", "deployments": "deployments",
            "downloads": "downloads", "events": "events", "forks": "forks", "git_commits": "git/commits{/sha}",
            "git_refs": "git/refs{/sha}", "git_tags": "git/tags{/sha}", "hooks": "hooks",
            "issue_comment": "issues/comments{/number}", "issue_events": "issues/events{/number}",
            "issues": "issues{/number}", "keys": "keys{/key_id}", "labels": "labels{/name}",
            "languages": "languages", "merges": "merges", "milestones": "milestones{/number}",
            "notifications": "notifications{?since,all,participating}", "pulls": "pulls{/number}",
            "releases": "releases{/id}", "stargazers": "stargazers", "statuses": "statuses/{sha}",
            "subscribers": "subscribers", "subscription": "subscription", "tags": "tags",
            "teams": "teams", "trees": "git/trees{/sha}",
        }.items()}
        open_count = sum(1 for i in r["issues"].values() if i["state"] == "open")
        perm = self._permission(login, r["full_name"]) if login else "none"
        d = {
            "id": r["id"], "node_id": f"R_{r['id']}", "name": r["name"], "full_name": r["full_name"],
            "owner": self._user_json(r["owner"]), "private": False, "html_url": html,
            "description": None, "fork": False, "url": api, **urls,
            "clone_url": html + ".git", "git_url": "git" + html[4:] + ".git",
            "ssh_url": f"git@localhost:{r['full_name']}.git",
            "svn_url": html, "mirror_url": None, "homepage": None, "language": "Python",
            "forks": 0, "forks_count": 0, "stargazers_count": 0, "watchers": 0, "watchers_count": 0,
            "size": 0, "default_branch": "main", "open_issues": open_count, "open_issues_count": open_count,
            "has_issues": r["has_issues"], "has_projects": False, "has_wiki": False, "has_pages": False,
            "has_discussions": False, "has_downloads": True, "archived": False, "disabled": False, "license": None,
            "pushed_at": "2020-01-01T00:00:00Z", "created_at": "2020-01-01T00:00:00Z",
            "updated_at": "2020-01-01T00:00:00Z", "network_count": 0, "subscribers_count": 0,
            "visibility": "public", "topics": [],
            "permissions": {"admin": perm == "admin", "maintain": perm in ("admin", "maintain"),
                            "push": perm in _WRITE_PERMS, "triage": perm in _WRITE_PERMS + ("triage",),
                            "pull": perm != "none"},
        }
        return d

    def _label_json(self, r: dict, label: dict) -> dict:
        return {
            "id": label["id"], "node_id": f"LA_{label['id']}",
            "url": f"{self._repo_api(r)}/labels/{quote(label['name'], safe='')}",
            "name": label["name"], "description": label["description"], "color": label["color"], "default": False,
        }

    def _new_issue(self, r, number, title, body, author, labels, assignees) -> dict:
        now = _now()
        return {
            "id": next(self._ids), "number": number, "title": title, "body": body, "user": author,
            "labels": list(labels), "assignees": list(assignees), "state": "open", "state_reason": None,
            "locked": False, "comments": 0, "created_at": now, "updated_at": now, "closed_at": None,
            "closed_by": None,
        }

    def _issue_json(self, r: dict, i: dict) -> dict:
        api = f"{self._repo_api(r)}/issues/{i['number']}"
        html_kind = "pull" if i.get("pull_request") else "issues"
        d = {
            "id": i["id"], "node_id": f"I_{i['id']}", "url": api,
            "repository_url": self._repo_api(r), "labels_url": api + "/labels{/name}",
            "comments_url": api + "/comments", "events_url": api + "/events",
            "html_url": f"{self.html_origin}/{r['full_name']}/{html_kind}/{i['number']}",
            "number": i["number"], "state": i["state"], "state_reason": i["state_reason"],
            "title": i["title"], "body": i["body"], "user": self._user_json(i["user"]),
            "labels": [self._label_json(r, r["labels"][n]) for n in i["labels"] if n in r["labels"]],
            "assignee": self._user_json(i["assignees"][0]) if i["assignees"] else None,
            "assignees": [self._user_json(a) for a in i["assignees"]],
            "milestone": None, "locked": i["locked"], "active_lock_reason": None,
            "comments": i["comments"], "created_at": i["created_at"], "updated_at": i["updated_at"],
            "closed_at": i["closed_at"], "author_association": self._association(i["user"], r["full_name"]),
            "closed_by": self._user_json(i["closed_by"]) if i["closed_by"] else None,
        }
        if i.get("pull_request"):
            d["pull_request"] = {
                "url": f"{self._repo_api(r)}/pulls/{i['number']}",
                "html_url": f"{self.html_origin}/{r['full_name']}/pull/{i['number']}",
                "diff_url": f"{self.html_origin}/{r['full_name']}/pull/{i['number']}.diff",
                "patch_url": f"{self.html_origin}/{r['full_name']}/pull/{i['number']}.patch",
                "merged_at": None,
            }
        return d

    def _comment_json(self, r: dict, c: dict) -> dict:
        api = f"{self._repo_api(r)}/issues/comments/{c['id']}"
        counts = {k: sum(1 for x in c["reactions"] if x["content"] == k) for k in REACTIONS}
        return {
            "id": c["id"], "node_id": f"IC_{c['id']}", "url": api,
            "html_url": f"{self.html_origin}/{r['full_name']}/issues/{c['issue']}#issuecomment-{c['id']}",
            "issue_url": f"{self._repo_api(r)}/issues/{c['issue']}", "body": c["body"],
            "user": self._user_json(c["user"]), "created_at": c["created_at"], "updated_at": c["updated_at"],
            "author_association": self._association(c["user"], r["full_name"]),
            "reactions": {"url": api + "/reactions", "total_count": len(c["reactions"]), **counts},
        }

    def _reaction_json(self, x: dict) -> dict:
        return {"id": x["id"], "node_id": f"REA_{x['id']}", "user": self._user_json(x["user"]),
                "content": x["content"], "created_at": x["created_at"]}

    def _timeline_json(self, r: dict, number: int) -> list[dict]:
        """GET /issues/{n}/timeline: committed and head_ref_force_pushed events of a pull request,
        and commented events, in time order (GitHub's shapes)."""
        events = []
        api = self._repo_api(r)
        for ev in (r["pulls"].get(number) or {}).get("timeline", []):
            if ev["kind"] == "committed":
                person = {"name": ev["author"], "email": f"{ev['author']}@users.noreply.localhost", "date": ev["date"]}
                events.append((ev["date"], {
                    "event": "committed", "sha": ev["sha"], "node_id": f"C_{ev['sha'][:12]}",
                    "url": f"{api}/git/commits/{ev['sha']}",
                    "html_url": f"{self.html_origin}/{r['full_name']}/commit/{ev['sha']}",
                    "author": person, "committer": person, "message": "a commit",
                    "tree": {"sha": "0" * 40, "url": f"{api}/git/trees/{'0' * 40}"}, "parents": [],
                    "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None,
                                     "verified_at": None}}))
            else:
                events.append((ev["created_at"], {
                    "id": ev["id"], "node_id": f"HRFPE_{ev['id']}", "url": f"{api}/issues/events/{ev['id']}",
                    "actor": self._user_json(ev["actor"]), "event": ev["kind"], "commit_id": ev["commit_id"],
                    "commit_url": f"{api}/commits/{ev['commit_id']}", "created_at": ev["created_at"],
                    "performed_via_github_app": None}))
        for c in r["comments"].values():
            if c["issue"] == number:
                d = self._comment_json(r, c)
                d.update(event="commented", actor=self._user_json(c["user"]))
                events.append((c["created_at"], d))
        return [e for _, e in sorted(events, key=lambda x: x[0])]

    def _pull_json(self, r: dict, number: int) -> dict:
        i = r["issues"][number]
        p = r["pulls"][number]
        api = f"{self._repo_api(r)}/pulls/{number}"
        html = f"{self.html_origin}/{r['full_name']}/pull/{number}"
        issue_api = f"{self._repo_api(r)}/issues/{number}"
        repo_min = self._repo_json(r, None)
        for k in ("network_count", "subscribers_count", "permissions"):
            repo_min.pop(k, None)
        def ref(name, sha, login, fork=None):
            repo = repo_min
            if fork:
                owner, _, rname = fork.partition("/")
                repo = json.loads(json.dumps(repo_min).replace(r["full_name"], fork))
                repo.update(full_name=fork, name=rname, owner=self._user_json(owner), fork=True,
                            id=repo_min["id"] + 1 + sum(map(ord, fork)), node_id=f"R_fork_{fork}")
                return {"label": f"{owner}:{name}", "ref": name, "sha": sha, "repo": repo,
                        "user": self._user_json(owner)}
            return {"label": f"{r['owner']}:{name}", "ref": name, "sha": sha, "repo": repo,
                    "user": self._user_json(login)}
        link = lambda h: {"href": h}  # noqa: E731
        return {
            "url": api, "id": i["id"], "node_id": f"PR_{i['id']}", "html_url": html,
            "diff_url": html + ".diff", "patch_url": html + ".patch", "issue_url": issue_api,
            "commits_url": api + "/commits", "review_comments_url": api + "/comments",
            "review_comment_url": f"{self._repo_api(r)}/pulls/comments{{/number}}",
            "comments_url": issue_api + "/comments",
            "statuses_url": f"{self._repo_api(r)}/statuses/{p['head_sha']}",
            "number": number, "state": i["state"], "locked": i["locked"], "title": i["title"],
            "user": self._user_json(i["user"]), "body": i["body"],
            "labels": [self._label_json(r, r["labels"][n]) for n in i["labels"] if n in r["labels"]],
            "milestone": None, "active_lock_reason": None, "created_at": i["created_at"],
            "updated_at": i["updated_at"], "closed_at": i["closed_at"], "merged_at": None,
            "merge_commit_sha": None, "assignee": None, "assignees": [], "requested_reviewers": [],
            "requested_teams": [],
            "head": ref(p["head_ref"], p["head_sha"], i["user"], p.get("head_repo")),
            "base": ref(p["base_ref"], "0" * 40, r["owner"]),
            "_links": {"self": link(api), "html": link(html), "issue": link(issue_api),
                       "comments": link(issue_api + "/comments"), "review_comments": link(api + "/comments"),
                       "review_comment": link(f"{self._repo_api(r)}/pulls/comments{{/number}}"),
                       "commits": link(api + "/commits"),
                       "statuses": link(f"{self._repo_api(r)}/statuses/{p['head_sha']}")},
            "author_association": self._association(i["user"], r["full_name"]), "auto_merge": None,
            "draft": False, "merged": False, "mergeable": True, "rebaseable": True, "mergeable_state": "clean",
            "merged_by": None, "comments": i["comments"], "review_comments": 0, "maintainer_can_modify": False,
            "commits": 1, "additions": 1, "deletions": 0, "changed_files": 1,
        }

    # ----------------------------------------------------------------- permissions
    def _permission(self, login: str, repo: str) -> str:
        u = self.users.get(login)
        if not u:
            return "none"
        if repo.split("/")[0] == login:
            return "admin"
        return u["permissions"].get(repo) or u["default_permission"] or "none"

    def _association(self, login: str, repo: str) -> str:
        perm = self._permission(login, repo)
        if repo.split("/")[0] == login:
            return "OWNER"
        return {"admin": "MEMBER", "maintain": "MEMBER", "write": "COLLABORATOR"}.get(perm, "CONTRIBUTOR")

    # ----------------------------------------------------------------- request handling
    def handle(self, method: str, raw_path: str, headers: dict, body: bytes) -> tuple[int, dict, Any, RequestRecord]:
        split = urlsplit(raw_path)
        path = unquote(split.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        rec = RequestRecord(method=method, path=path, query=query, headers=dict(headers), body=parsed,
                            started=time.monotonic())
        with self.lock:
            self.requests.append(rec)
            api_path = path[len(self.prefix):] if path.startswith(self.prefix) else path
            fault = next((f for f in self.faults if f.matches(method, api_path)), None)
            if fault:
                fault.hits += 1
                if fault.hits >= fault.times:
                    self.faults.remove(fault)
        delay = self.delay + (fault.delay if fault else 0.0)
        if delay:
            time.sleep(delay)
        out_headers: dict = {}
        if fault and fault.status is not None and not fault.after_store:
            status, payload, out_headers = self._fault_response(fault)
        else:
            try:
                status, payload, out_headers = self._dispatch(method, path, query, headers, parsed, rec)
            except HttpError as exc:
                status, out_headers = exc.status, exc.headers
                payload = {"message": exc.message,
                           "documentation_url": "https://docs.github.com/rest"}
                if exc.errors:
                    payload["errors"] = exc.errors
                    payload["status"] = str(exc.status)
            if fault and fault.status is not None and fault.after_store:
                status, payload, out_headers = self._fault_response(fault)
        rec.status = status
        rec.response = payload
        rec.finished = time.monotonic()
        return status, out_headers, payload, rec

    def _fault_response(self, fault: Fault) -> tuple[int, Any, dict]:
        h = dict(fault.headers)
        if fault.retry_after is not None:
            h["Retry-After"] = str(fault.retry_after)
        if fault.body is not None:
            return fault.status, RawBody(fault.body), h
        msg = fault.message
        if fault.status == 403 and msg == "Server Error":
            msg = SECONDARY_RATE_MESSAGE
        return fault.status, {"message": msg, "documentation_url": "https://docs.github.com/rest"}, h

    def _auth(self, headers: dict) -> str | None:
        auth = headers.get("authorization") or headers.get("Authorization") or ""
        parts = auth.split(None, 1)
        if len(parts) == 2 and parts[0].lower() in ("token", "bearer"):
            login = self.tokens.get(parts[1].strip())
            if login is None:
                raise HttpError(401, "Bad credentials")
            return login
        return None

    def _repo(self, owner: str, name: str) -> dict:
        r = self.repos.get(f"{owner}/{name}")
        if r is None:
            raise HttpError(404, "Not Found")
        return r

    def _need_write(self, login: str | None, r: dict) -> None:
        if login is None:
            raise HttpError(401, "Requires authentication")
        if self._permission(login, r["full_name"]) not in _WRITE_PERMS + ("triage",):
            raise HttpError(403, "Resource not accessible by integration")

    def _issue(self, r: dict, number: str) -> dict:
        i = r["issues"].get(int(number))
        if i is None:
            raise HttpError(404, "Not Found")
        return i

    def _check_body(self, body: Any, resource: str) -> None:
        if body is not None and not isinstance(body, str):
            raise HttpError(422, "Invalid request.", [{"resource": resource, "code": "invalid", "field": "body"}])
        if self.enforce_body_limit and body is not None and len(body) > BODY_LIMIT:
            raise HttpError(422, "Validation Failed", [{
                "resource": resource, "code": "custom", "field": "body",
                "message": f"body is too long (maximum is {BODY_LIMIT} characters)"}])

    def _ensure_labels(self, r: dict, names: list) -> list[str]:
        out = []
        for n in names:
            n = n["name"] if isinstance(n, dict) else str(n)
            if n not in r["labels"]:
                r["labels"][n] = {"id": next(self._ids), "name": n, "color": "ededed", "description": None}
            if n not in out:
                out.append(n)
        return out

    def _paginate(self, items: list, query: dict, path: str) -> tuple[list, dict]:
        try:
            per_page = max(1, min(100, int(query.get("per_page", 30))))
            page = max(1, int(query.get("page", 1)))
        except ValueError:
            raise HttpError(422, "Invalid pagination parameters") from None
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        def url(p):
            q = dict(query, per_page=str(per_page), page=str(p))
            return f"<{self.origin}{path}?{urlencode(q)}>"
        if page < last:
            links += [f'{url(page + 1)}; rel="next"', f'{url(last)}; rel="last"']
        if page > 1:
            links += [f'{url(1)}; rel="first"', f'{url(page - 1)}; rel="prev"']
        return chunk, ({"Link": ", ".join(links)} if links else {})

    def _dispatch(self, method: str, path: str, query: dict, headers: dict, body: Any, rec: RequestRecord):
        if self.prefix:
            if not path.startswith(self.prefix + "/"):
                raise HttpError(404, "Not Found")
            path = path[len(self.prefix):]
        login = self._auth(headers)
        rec.login = login
        with self.lock:
            for pattern, verb, fn in _ROUTES:
                m = re.fullmatch(pattern, path)
                if m and verb == method:
                    return fn(self, login, query, body, rec.path, *m.groups())
            if any(re.fullmatch(p, path) for p, _, _ in _ROUTES):
                raise HttpError(405, "Method Not Allowed")
            raise HttpError(404, "Not Found")

    # ----------------------------------------------------------------- endpoints
    def ep_user(self, login, query, body, full):
        if login is None:
            raise HttpError(401, "Requires authentication")
        return 200, self._private_user_json(login), {}

    def ep_repo(self, login, query, body, full, o, n):
        return 200, self._repo_json(self._repo(o, n), login), {}

    def ep_list_issues(self, login, query, body, full, o, n):
        r = self._repo(o, n)
        state = query.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise HttpError(422, "Validation Failed", [{"resource": "Issue", "field": "state", "code": "invalid"}])
        want = [x.strip() for x in query.get("labels", "").split(",") if x.strip()]
        items = [i for i in r["issues"].values()
                 if (state == "all" or i["state"] == state)
                 and all(w in i["labels"] for w in want)
                 and ("creator" not in query or i["user"] == query["creator"])]
        key = "updated_at" if query.get("sort") == "updated" else "created_at"
        items.sort(key=lambda i: (i[key], i["number"]), reverse=query.get("direction", "desc") != "asc")
        chunk, h = self._paginate(items, query, full)
        return 200, [self._issue_json(r, i) for i in chunk], h

    def ep_create_issue(self, login, query, body, full, o, n):
        r = self._repo(o, n)
        if login is None:
            raise HttpError(401, "Requires authentication")
        if not r["has_issues"]:
            raise HttpError(410, "Issues are disabled for this repo")
        if (not isinstance(body, dict) or not isinstance(body.get("title"), (str, int))
                or not str(body["title"]).strip()):
            raise HttpError(422, "Validation Failed",
                            [{"resource": "Issue", "code": "missing_field", "field": "title"}])
        self._check_body(body.get("body"), "Issue")
        can_push = self._permission(login, r["full_name"]) in _WRITE_PERMS
        assignees = list(body.get("assignees") or [])
        for a in assignees:
            if a not in self.users:
                raise HttpError(422, "Validation Failed",
                                [{"resource": "Issue", "code": "invalid", "field": "assignees", "value": a}])
        labels = self._ensure_labels(r, body.get("labels") or []) if can_push else []
        number = r["next_number"]
        r["next_number"] += 1
        issue = self._new_issue(r, number, str(body["title"]), body.get("body"), login, labels,
                                assignees if can_push else [])
        r["issues"][number] = issue
        return 201, self._issue_json(r, issue), {"Location": f"{self._repo_api(r)}/issues/{number}"}

    def ep_get_issue(self, login, query, body, full, o, n, num):
        r = self._repo(o, n)
        return 200, self._issue_json(r, self._issue(r, num)), {}

    def ep_edit_issue(self, login, query, body, full, o, n, num):
        r = self._repo(o, n)
        i = self._issue(r, num)
        if login is None:
            raise HttpError(401, "Requires authentication")
        if login != i["user"]:
            self._need_write(login, r)
        if not isinstance(body, dict):
            raise HttpError(400, "Problems parsing JSON")
        if "body" in body:
            self._check_body(body["body"], "Issue")
        if "title" in body:
            i["title"] = str(body["title"])
        if "body" in body:
            i["body"] = body["body"]
        if "state" in body:
            if body["state"] not in ("open", "closed"):
                raise HttpError(422, "Validation Failed", [{"resource": "Issue", "code": "invalid", "field": "state"}])
            if body["state"] != i["state"]:
                i["state"] = body["state"]
                i["closed_at"] = _now() if body["state"] == "closed" else None
                i["closed_by"] = login if body["state"] == "closed" else None
                i["state_reason"] = (body.get("state_reason")
                                     or ("completed" if body["state"] == "closed" else "reopened"))
        elif "state_reason" in body:
            i["state_reason"] = body["state_reason"]
        if "labels" in body:
            i["labels"] = self._ensure_labels(r, body["labels"] or [])
        if "assignees" in body:
            i["assignees"] = list(body["assignees"] or [])
        i["updated_at"] = _now()
        return 200, self._issue_json(r, i), {}

    def ep_list_comments(self, login, query, body, full, o, n, num):
        r = self._repo(o, n)
        self._issue(r, num)
        items = sorted((c for c in r["comments"].values() if c["issue"] == int(num)), key=lambda c: c["id"])
        chunk, h = self._paginate(items, query, full)
        return 200, [self._comment_json(r, c) for c in chunk], h

    def ep_create_comment(self, login, query, body, full, o, n, num):
        r = self._repo(o, n)
        i = self._issue(r, num)
        if login is None:
            raise HttpError(401, "Requires authentication")
        if not isinstance(body, dict) or not isinstance(body.get("body"), str):
            raise HttpError(422, "Validation Failed",
                            [{"resource": "IssueComment", "code": "missing_field", "field": "body"}])
        self._check_body(body["body"], "IssueComment")
        if i["locked"] and self._permission(login, r["full_name"]) not in _WRITE_PERMS:
            raise HttpError(403, "Unable to create comment because issue is locked.")
        now = _now()
        c = {"id": next(self._ids), "issue": i["number"], "body": body["body"], "user": login,
             "created_at": now, "updated_at": now, "reactions": []}
        r["comments"][c["id"]] = c
        i["comments"] += 1
        i["updated_at"] = now
        return 201, self._comment_json(r, c), {"Location": f"{self._repo_api(r)}/issues/comments/{c['id']}"}

    def _comment(self, r, cid) -> dict:
        c = r["comments"].get(int(cid))
        if c is None:
            raise HttpError(404, "Not Found")
        return c

    def ep_get_comment(self, login, query, body, full, o, n, cid):
        r = self._repo(o, n)
        return 200, self._comment_json(r, self._comment(r, cid)), {}

    def ep_edit_comment(self, login, query, body, full, o, n, cid):
        r = self._repo(o, n)
        c = self._comment(r, cid)
        if login is None:
            raise HttpError(401, "Requires authentication")
        if login != c["user"]:
            self._need_write(login, r)
        if not isinstance(body, dict) or not isinstance(body.get("body"), str):
            raise HttpError(422, "Validation Failed",
                            [{"resource": "IssueComment", "code": "missing_field", "field": "body"}])
        self._check_body(body["body"], "IssueComment")
        c["body"] = body["body"]
        c["updated_at"] = _now()
        return 200, self._comment_json(r, c), {}

    def ep_list_reactions(self, login, query, body, full, o, n, cid):
        r = self._repo(o, n)
        c = self._comment(r, cid)
        items = [x for x in c["reactions"] if "content" not in query or x["content"] == query["content"]]
        chunk, h = self._paginate(items, query, full)
        return 200, [self._reaction_json(x) for x in chunk], h

    def ep_create_reaction(self, login, query, body, full, o, n, cid):
        r = self._repo(o, n)
        c = self._comment(r, cid)
        if login is None:
            raise HttpError(401, "Requires authentication")
        content = body.get("content") if isinstance(body, dict) else None
        if content not in REACTIONS:
            raise HttpError(422, "Validation Failed", [{"resource": "Reaction", "code": "invalid", "field": "content"}])
        for x in c["reactions"]:
            if x["user"] == login and x["content"] == content:
                return 200, self._reaction_json(x), {}
        x = {"id": next(self._ids), "user": login, "content": content, "created_at": _now()}
        c["reactions"].append(x)
        return 201, self._reaction_json(x), {}

    def ep_list_labels(self, login, query, body, full, o, n):
        r = self._repo(o, n)
        chunk, h = self._paginate(list(r["labels"].values()), query, full)
        return 200, [self._label_json(r, label) for label in chunk], h

    def ep_create_label(self, login, query, body, full, o, n):
        r = self._repo(o, n)
        self._need_write(login, r)
        if not isinstance(body, dict) or not body.get("name"):
            raise HttpError(422, "Validation Failed", [{"resource": "Label", "code": "missing_field", "field": "name"}])
        name = str(body["name"])
        if any(k.lower() == name.lower() for k in r["labels"]):
            raise HttpError(422, "Validation Failed",
                            [{"resource": "Label", "code": "already_exists", "field": "name"}])
        color = str(body.get("color") or "ededed").lstrip("#")
        if not re.fullmatch(r"[0-9a-fA-F]{6}", color):
            raise HttpError(422, "Validation Failed", [{"resource": "Label", "code": "invalid", "field": "color"}])
        r["labels"][name] = {"id": next(self._ids), "name": name, "color": color.lower(),
                             "description": body.get("description")}
        return 201, self._label_json(r, r["labels"][name]), {}

    def ep_get_label(self, login, query, body, full, o, n, name):
        r = self._repo(o, n)
        for k, label in r["labels"].items():
            if k.lower() == name.lower():
                return 200, self._label_json(r, label), {}
        raise HttpError(404, "Not Found")

    def ep_add_labels(self, login, query, body, full, o, n, num):
        r = self._repo(o, n)
        i = self._issue(r, num)
        self._need_write(login, r)
        names = body.get("labels") if isinstance(body, dict) else body
        if not isinstance(names, list) or not names:
            raise HttpError(422, "Validation Failed",
                            [{"resource": "Label", "code": "missing_field", "field": "labels"}])
        for name in self._ensure_labels(r, names):
            if name not in i["labels"]:
                i["labels"].append(name)
        i["updated_at"] = _now()
        return 200, [self._label_json(r, r["labels"][x]) for x in i["labels"]], {}

    def ep_timeline(self, login, query, body, full, o, n, num):
        r = self._repo(o, n)
        self._issue(r, num)
        chunk, h = self._paginate(self._timeline_json(r, int(num)), query, full)
        return 200, chunk, h

    def ep_edit_label(self, login, query, body, full, o, n, name):
        r = self._repo(o, n)
        self._need_write(login, r)
        key = next((k for k in r["labels"] if k.lower() == name.lower()), None)
        if key is None:
            raise HttpError(404, "Not Found")
        if not isinstance(body, dict):
            raise HttpError(400, "Problems parsing JSON")
        label = r["labels"][key]
        if "color" in body:
            color = str(body["color"] or "").lstrip("#")
            if not re.fullmatch(r"[0-9a-fA-F]{6}", color):
                raise HttpError(422, "Validation Failed", [{"resource": "Label", "code": "invalid", "field": "color"}])
            label["color"] = color.lower()
        if "description" in body:
            label["description"] = body["description"]
        new = body.get("new_name")
        if new and new != key:
            if any(k.lower() == str(new).lower() for k in r["labels"] if k != key):
                raise HttpError(422, "Validation Failed",
                                [{"resource": "Label", "code": "already_exists", "field": "name"}])
            label["name"] = str(new)
            r["labels"][str(new)] = r["labels"].pop(key)
        return 200, self._label_json(r, label), {}

    def ep_get_pull(self, login, query, body, full, o, n, num):
        r = self._repo(o, n)
        if int(num) not in r["pulls"]:
            raise HttpError(404, "Not Found")
        return 200, self._pull_json(r, int(num)), {}

    def ep_permission(self, login, query, body, full, o, n, user):
        r = self._repo(o, n)
        if login is None:
            raise HttpError(401, "Requires authentication")
        if user not in self.users:
            raise HttpError(404, "Not Found")
        perm = self._permission(user, r["full_name"])
        legacy = {"maintain": "write", "triage": "read"}.get(perm, perm)
        u = self._user_json(user)
        u.pop("user_view_type", None)
        u["permissions"] = {"admin": perm == "admin", "maintain": perm in ("admin", "maintain"),
                            "push": perm in _WRITE_PERMS, "triage": perm in _WRITE_PERMS + ("triage",),
                            "pull": perm != "none"}
        u["role_name"] = perm
        return 200, {"permission": legacy, "role_name": perm, "user": u}, {}

    def ep_search_issues(self, login, query, body, full):
        """GET /search/issues (tests/ghstub/search.py has the rules)."""
        from tests.ghstub import search

        found, headers = search.search(self, login, query)
        chunk, links = self._paginate(found, query, full)
        items = [dict(self._issue_json(r, i), score=float(s)) for r, i, s in chunk]
        doc = {"total_count": len(found), "incomplete_results": False, "items": items, "search_type": "lexical"}
        return 200, doc, {**headers, **links}


_SEG = r"([^/]+)"
_ROUTES = [
    (r"/user", "GET", GitHubStub.ep_user),
    (r"/search/issues", "GET", GitHubStub.ep_search_issues),
    (rf"/repos/{_SEG}/{_SEG}", "GET", GitHubStub.ep_repo),
    (rf"/repos/{_SEG}/{_SEG}/issues", "GET", GitHubStub.ep_list_issues),
    (rf"/repos/{_SEG}/{_SEG}/issues", "POST", GitHubStub.ep_create_issue),
    (rf"/repos/{_SEG}/{_SEG}/issues/comments/(\d+)", "GET", GitHubStub.ep_get_comment),
    (rf"/repos/{_SEG}/{_SEG}/issues/comments/(\d+)", "PATCH", GitHubStub.ep_edit_comment),
    (rf"/repos/{_SEG}/{_SEG}/issues/comments/(\d+)/reactions", "GET", GitHubStub.ep_list_reactions),
    (rf"/repos/{_SEG}/{_SEG}/issues/comments/(\d+)/reactions", "POST", GitHubStub.ep_create_reaction),
    (rf"/repos/{_SEG}/{_SEG}/issues/(\d+)", "GET", GitHubStub.ep_get_issue),
    (rf"/repos/{_SEG}/{_SEG}/issues/(\d+)", "PATCH", GitHubStub.ep_edit_issue),
    (rf"/repos/{_SEG}/{_SEG}/issues/(\d+)/comments", "GET", GitHubStub.ep_list_comments),
    (rf"/repos/{_SEG}/{_SEG}/issues/(\d+)/comments", "POST", GitHubStub.ep_create_comment),
    (rf"/repos/{_SEG}/{_SEG}/issues/(\d+)/labels", "POST", GitHubStub.ep_add_labels),
    (rf"/repos/{_SEG}/{_SEG}/labels", "GET", GitHubStub.ep_list_labels),
    (rf"/repos/{_SEG}/{_SEG}/labels", "POST", GitHubStub.ep_create_label),
    (rf"/repos/{_SEG}/{_SEG}/labels/(.+)", "GET", GitHubStub.ep_get_label),
    (rf"/repos/{_SEG}/{_SEG}/labels/(.+)", "PATCH", GitHubStub.ep_edit_label),
    (rf"/repos/{_SEG}/{_SEG}/issues/(\d+)/timeline", "GET", GitHubStub.ep_timeline),
    (rf"/repos/{_SEG}/{_SEG}/pulls/(\d+)", "GET", GitHubStub.ep_get_pull),
    (rf"/repos/{_SEG}/{_SEG}/collaborators/{_SEG}/permission", "GET", GitHubStub.ep_permission),
]


class _Handler(BaseHTTPRequestHandler):
    server_stub: GitHubStub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, headers, payload, _ = self.server_stub.handle(self.command, self.path, self.headers, body)
        raw = isinstance(payload, RawBody)
        data = b"" if payload is None else payload.encode() if raw else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8" if raw else "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-GitHub-Media-Type", "github.v3; format=json")
        rate = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4999",
                "X-RateLimit-Reset": str(int(time.time()) + 3600), "X-RateLimit-Resource": "core"}
        own = {k.lower() for k in headers}
        for k, v in rate.items():  # a response's own rate-limit headers (search, a fault) replace these
            if k.lower() not in own:
                self.send_header(k, v)
        for k, v in headers.items():
            self.send_header(k, v)
        try:
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # the client gave up waiting (a test's slow search with a short timeout): GitHub does not
            # mind either, and a traceback from the server's thread would only be noise in the log
            self.close_connection = True

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = _serve

