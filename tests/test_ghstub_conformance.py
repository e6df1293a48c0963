"""The GitHub stand-in speaks GitHub's documented REST shapes, and its faults behave like GitHub's.

Every exchange a real PyGithub client makes with the stand-in is validated against GitHub's published
OpenAPI description (npm @octokit/openapi, cached under ~/.cache/minify-action).
"""

from __future__ import annotations

import time

import github
import pytest

from tests.ghstub import Fault, GitHubStub
from tests.ghstub.fixtures import REPO, make_client
from tests.ghstub.openapi import OpenAPIChecker, SpecUnavailable, load_spec


@pytest.fixture(scope="module")
def checker():
    try:
        spec = load_spec()
    except SpecUnavailable as exc:
        pytest.skip(f"GitHub OpenAPI description unavailable: {exc}")
    return OpenAPIChecker(spec)


def exercise(stub: GitHubStub) -> None:
    """Drive every endpoint the bot and the /minify workflow use, through real PyGithub."""
    gh = make_client(stub)
    me = gh.get_user()
    assert me.login == "minify-bot"
    repo = gh.get_repo(REPO)
    assert repo.full_name == REPO
    label = repo.create_label("minify-bot", "5319e7", "Filed by minify-bot")
    assert repo.get_label("minify-bot").name == label.name
    issue = repo.create_issue("inductor miscompiles relu", body="body <!-- m -->", labels=["minify-bot", "accuracy"],
                              assignees=["alice"])
    issue.edit(body="new body")
    issue.add_to_labels("regression")
    c = issue.create_comment("first")
    c.edit("edited")
    c.create_reaction("+1")
    c.create_reaction("+1")  # idempotent: 200
    assert [r.content for r in c.get_reactions()] == ["+1"]
    assert repo.get_issue(issue.number).get_comment(c.id).body == "edited"
    assert [x.body for x in issue.get_comments()] == ["edited"]
    issue.edit(state="closed", state_reason="completed")
    assert [i.number for i in repo.get_issues(state="all", labels=[label])] == [issue.number]
    assert list(repo.get_issues(state="open", labels=[label])) == []
    n = stub.add_pull(None, head_sha="c0ffee" * 6 + "abcd", author="mallory")
    pr = repo.get_pull(n)
    assert pr.head.sha == "c0ffee" * 6 + "abcd" and pr.user.login == "mallory"
    assert repo.get_collaborator_permission("mallory") == "read"
    assert repo.get_collaborator_permission("alice") == "admin"
    assert [lb.name for lb in repo.get_labels()]
    label.edit("minify-bot", "112233", "updated")
    assert (repo.get_label("minify-bot").color, repo.get_label("minify-bot").description) == ("112233", "updated")
    fork = stub.add_pull(None, head_sha="1" * 40, author="mallory", head_repo="mallory/models")
    assert repo.get_pull(fork).head.repo.full_name == "mallory/models"
    repo.get_issue(fork).create_comment("/minify")
    stub.push(fork, "2" * 40, force=True, at="2099-01-01T00:00:00Z")
    assert [e.event for e in repo.get_issue(fork).get_timeline()] == ["committed", "commented",
                                                                        "head_ref_force_pushed", "committed"]
    gh.close()


def test_every_exchange_matches_githubs_openapi_description(ghstub, checker):
    exercise(ghstub)
    problems = [p for rec in ghstub.requests for p in checker.check(rec)]
    assert problems == []
    assert len(ghstub.requests) >= 18


def test_ghes_prefix_serves_the_same_api(ghstub_ghes, checker):
    exercise(ghstub_ghes)
    assert all(r.path.startswith("/api/v3/") for r in ghstub_ghes.requests)
    problems = [p for rec in ghstub_ghes.requests for p in checker.check(rec, prefix="/api/v3")]
    assert problems == []


def test_error_responses_are_documented_statuses(ghstub, checker):
    gh = make_client(ghstub, retry=None)
    repo = gh.get_repo(REPO)
    with pytest.raises(github.GithubException) as exc:
        repo.create_issue("big", body="x" * 65537)
    assert exc.value.status == 422 and "too long" in str(exc.value.data)
    with pytest.raises(github.UnknownObjectException):
        repo.get_label("nope")
    repo.create_label("dup", "ffffff")
    with pytest.raises(github.GithubException) as exc:
        repo.create_label("dup", "ffffff")
    assert exc.value.data["errors"][0]["code"] == "already_exists"
    as_reader = make_client(ghstub, token="mallory-token", retry=None).get_repo(REPO)
    with pytest.raises(github.GithubException) as exc:
        as_reader.create_label("mine", "ffffff")
    assert exc.value.status == 403
    # a reader may open an issue, but GitHub silently drops the labels they ask for
    assert as_reader.create_issue("x", labels=["dup"]).labels == []
    problems = [p for rec in ghstub.requests for p in checker.check(rec)]
    assert problems == []


def test_checker_catches_a_malformed_response(ghstub, checker):
    """The conformance check can fail: a response missing required fields is reported."""
    exercise(ghstub)
    rec = next(r for r in ghstub.requests if r.method == "POST" and r.path.endswith("/issues"))
    broken = dict(rec.response)
    del broken["node_id"]
    broken["labels_url"] = 5
    rec.response = broken
    problems = checker.check(rec)
    assert any("node_id" in p for p in problems) and any("labels_url" in p for p in problems)


def test_unknown_token_is_rejected_and_anonymous_cannot_write(ghstub):
    bad = make_client(ghstub, token="wrong", retry=None)
    with pytest.raises(github.BadCredentialsException):
        _ = bad.get_user().login  # the lazy user is fetched on first attribute access
    anon = github.Github(base_url=ghstub.base_url, retry=None, seconds_between_requests=0, seconds_between_writes=0)
    with pytest.raises(github.GithubException) as exc:
        anon.get_repo(REPO).create_issue("anon")
    assert exc.value.status == 401
    assert ghstub.issues() == []


def test_pagination_walks_every_page_with_link_headers(ghstub):
    gh = make_client(ghstub, per_page=7)
    repo = gh.get_repo(REPO)
    for k in range(23):
        repo.create_issue(f"issue {k}", labels=["minify-bot"])
    titles = [i.title for i in repo.get_issues(state="all", labels=[repo.get_label("minify-bot")])]
    assert sorted(titles) == sorted(f"issue {k}" for k in range(23))
    pages = [r for r in ghstub.requests if r.method == "GET" and r.path.endswith("/issues")]
    assert len(pages) == 4  # 7 + 7 + 7 + 2


def test_store_then_5xx_fault_keeps_the_issue(ghstub):
    ghstub.inject(method="POST", path=r"/issues$", status=502, after_store=True)
    gh = make_client(ghstub, retry=None)
    with pytest.raises(github.GithubException) as exc:
        gh.get_repo(REPO).create_issue("stored anyway")
    assert exc.value.status == 502
    assert [i["title"] for i in ghstub.issues()] == ["stored anyway"]


def test_default_pygithub_retry_duplicates_a_stored_create(ghstub):
    """Why the bot must not retry POSTs: PyGithub's default retry replays the create after a 502."""
    ghstub.inject(method="POST", path=r"/issues$", status=502, after_store=True)
    gh = make_client(ghstub, retry=github.GithubRetry(total=2, backoff_factor=0))
    gh.get_repo(REPO).create_issue("replayed")
    assert [i["title"] for i in ghstub.issues()] == ["replayed", "replayed"]


def test_secondary_rate_limit_403_with_retry_after(ghstub):
    f = ghstub.inject(method="POST", status=403, retry_after=1)
    gh = make_client(ghstub, retry=None)
    with pytest.raises(github.GithubException) as exc:
        gh.get_repo(REPO).create_issue("limited")
    assert exc.value.status == 403 and "secondary rate limit" in exc.value.data["message"]
    assert exc.value.headers.get("retry-after") == "1"
    assert f.hits == 1 and ghstub.issues() == []
    gh.get_repo(REPO).create_issue("after the wait")  # fault consumed
    assert len(ghstub.issues()) == 1


def test_429_and_slow_responses(ghstub):
    ghstub.inject(Fault(method="GET", path=r"/issues$", status=429, retry_after=2, times=2))
    ghstub.inject(status=None, method="GET", path=r"/labels$", delay=0.3)
    gh = make_client(ghstub, retry=None)
    repo = gh.get_repo(REPO)
    for _ in range(2):
        with pytest.raises(github.GithubException) as exc:
            list(repo.get_issues())
        assert exc.value.status == 429
    assert list(repo.get_issues()) == []
    t = time.monotonic()
    list(repo.get_labels())
    assert time.monotonic() - t >= 0.3  # the injected delay happened (a lower bound, not a speed target)
