"""PR side of /minify against the local GitHub stand-in: permission, SHA pinning, acks, sticky comment."""

from __future__ import annotations

import pytest
from github import GithubException

from bot import pr
from bot.tracker.github import ACTIONS_BOT_LOGIN
from tests.ghstub.fixtures import BOT_LOGIN, REPO, make_client

HEAD = "c0ffee" + "0" * 34


@pytest.fixture
def env(ghstub):
    ghstub.add_user("walt", token="walt-token", permission="write")
    number = ghstub.add_pull(None, head_sha=HEAD, author="walt")
    gh = pr.client("bot-token", ghstub.base_url)
    repo = gh.get_repo(REPO)
    yield ghstub, gh, repo, number
    gh.close()


def permission_requests(stub):
    return [r for r in stub.requests if "/collaborators/" in r.path]


@pytest.mark.parametrize("login,assoc,allowed", [
    ("alice", "MEMBER", True),           # admin
    ("walt", "COLLABORATOR", True),      # write
    ("mallory", "CONTRIBUTOR", False),   # read
    ("mallory", "COLLABORATOR", False),  # a lying association grants nothing
])
def test_permission_comes_from_the_api(env, login, assoc, allowed):
    stub, gh, repo, _ = env
    auth = pr.authorize(repo, login, assoc)
    assert auth.allowed is allowed
    assert len(permission_requests(stub)) == 1
    if not allowed:
        assert "needs write or admin permission" in auth.reason and "read" in auth.reason


def test_association_prefilter_refuses_without_asking(env):
    stub, gh, repo, _ = env
    auth = pr.authorize(repo, "alice", "FIRST_TIME_CONTRIBUTOR")
    assert not auth.allowed and "not a collaborator" in auth.reason
    assert permission_requests(stub) == []


@pytest.mark.parametrize("status,message", [
    (403, "Must have push access to view collaborator permission."),
    (404, "Not Found"), (500, "Server Error"), (502, "Bad Gateway"),
])
def test_permission_errors_fail_closed(env, status, message):
    stub, gh, repo, _ = env
    stub.inject(method="GET", path=r"/collaborators/", status=status, message=message, times=10)
    auth = pr.authorize(repo, "alice", "MEMBER")
    assert not auth.allowed
    assert "refusing" in auth.reason


def test_unknown_user_is_refused(env):
    stub, gh, repo, _ = env
    assert not pr.authorize(repo, "ghost", "CONTRIBUTOR").allowed


def test_head_sha_is_pinned_and_checked(env):
    stub, gh, repo, number = env
    pull = repo.get_pull(number)
    assert pr.pin_head(repo, pull, None) == HEAD
    assert pr.pin_head(repo, pull, "C0FFEE0") == HEAD  # a prefix of the head, any case
    with pytest.raises(pr.Rejected, match="is not the pull request's head"):
        pr.pin_head(repo, pull, "deadbeef")
    closed = stub.add_pull(None, head_sha="1" * 40, author="walt", state="closed")
    with pytest.raises(pr.Rejected, match="closed"):
        pr.pin_head(repo, repo.get_pull(closed), None)


def test_checkout_verification():
    pr.verify_checkout(HEAD, HEAD + "\n")
    with pytest.raises(pr.Rejected, match="not the authorized"):
        pr.verify_checkout(HEAD, "1" * 40)


def test_reactions_are_idempotent_and_never_raise(env):
    stub, gh, repo, number = env
    alice = make_client(stub, "alice-token")
    comment_id = alice.get_repo(REPO).get_issue(number).create_comment("/minify").id
    comment = repo.get_issue(number).get_comment(comment_id)
    assert pr.react(comment, pr.REACTION_RECEIVED) is None
    assert pr.react(comment, pr.REACTION_RECEIVED) is None
    assert [(r["content"], r["user"]["login"]) for r in stub.reactions(comment_id=comment_id)] == [("eyes", BOT_LOGIN)]
    stub.inject(method="POST", path=r"/reactions$", status=500, times=5)
    assert "could not add the rocket reaction" in pr.react(comment, pr.REACTION_SUCCESS)


@pytest.mark.slow
def test_sticky_comment_is_edited_in_place_never_duplicated(env):
    stub, gh, repo, number = env
    issue = repo.get_issue(number)
    login = pr.bot_login(gh)
    assert login == BOT_LOGIN
    # another tool copied our marker: never touch its comment
    alice = make_client(stub, "alice-token")
    alice.get_repo(REPO).get_issue(number).create_comment(pr.STICKY_MARKER + "\nnot ours")
    for k in range(35):  # push the bot's comment past the first page
        alice.get_repo(REPO).get_issue(number).create_comment(f"chatter {k}")
    c1, how1 = pr.upsert_sticky(issue, login, "first results")
    c2, how2 = pr.upsert_sticky(issue, login, "second results")
    c3, how3 = pr.upsert_sticky(issue, login, "second results")
    assert (how1, how2, how3) == ("created", "updated", "unchanged")
    assert c1.id == c2.id == c3.id
    ours = [c for c in stub.comments(number=number)
            if pr.STICKY_MARKER in c["body"] and c["user"]["login"] == BOT_LOGIN]
    assert len(ours) == 1 and ours[0]["body"].endswith("second results")
    assert any(c["body"].endswith("not ours") for c in stub.comments(number=number))
    # more chatter after the sticky comment: still found
    for k in range(35):
        alice.get_repo(REPO).get_issue(number).create_comment(f"more {k}")
    _, how4 = pr.upsert_sticky(issue, login, "third")
    assert how4 == "updated"
    assert len([c for c in stub.comments(number=number) if c["user"]["login"] == BOT_LOGIN]) == 1


def test_sticky_comment_respects_the_body_limit(env):
    stub, gh, repo, number = env
    comment, how = pr.upsert_sticky(repo.get_issue(number), BOT_LOGIN, "x" * 100_000)
    assert how == "created"
    body = stub.comments(number=number)[0]["body"]
    assert len(body) <= pr.COMMENT_LIMIT and "truncated" in body


def test_bot_login_falls_back_to_the_actions_bot(env):
    stub, gh, repo, number = env
    stub.inject(method="GET", path=r"^/user$", status=403, message="Resource not accessible by integration")
    assert pr.bot_login(gh) == ACTIONS_BOT_LOGIN
    assert pr.bot_login(gh, "custom[bot]") == "custom[bot]"


def test_the_client_does_not_replay_posts(env):
    stub, gh, repo, number = env
    stub.inject(method="POST", path=r"/comments$", status=502, after_store=True)
    with pytest.raises(GithubException):
        repo.get_issue(number).create_comment("once")
    assert [c["body"] for c in stub.comments(number=number)] == ["once"]


def test_fork_pull_requests_need_the_full_sha(env):
    stub, gh, repo, number = env
    fork = stub.add_pull(None, head_sha=HEAD, author="mallory", head_repo="mallory/models")
    fork_pull = repo.get_pull(fork)
    assert fork_pull.head.repo.full_name == "mallory/models"
    with pytest.raises(pr.Rejected, match="comes from a fork"):
        pr.pin_head(repo, fork_pull, None)
    for prefix in (HEAD[:7], HEAD[:10], HEAD[:39]):  # 28 bits can be collided by the fork's author
        with pytest.raises(pr.Rejected, match="full 40-hex"):
            pr.pin_head(repo, fork_pull, prefix)
    assert pr.pin_head(repo, fork_pull, HEAD.upper()) == HEAD
    with pytest.raises(pr.Rejected, match="is not the pull request's head"):
        pr.pin_head(repo, fork_pull, "d" * 40)


def test_a_head_that_moved_after_the_comment_is_refused(env):
    stub, gh, repo, number = env
    issue = repo.get_issue(number)
    comment = issue.create_comment("/minify")
    pull = repo.get_pull(number)
    # nothing pushed since the comment: pinned
    assert pr.pin_head(repo, pull, None, commented_at=comment.created_at, timeline=issue.get_timeline()) == HEAD
    stub.push(number, "e" * 40, force=True, at="2099-01-01T00:00:00Z")
    pull = repo.get_pull(number)
    with pytest.raises(pr.Rejected, match="head changed after the comment"):
        pr.pin_head(repo, pull, None, commented_at=comment.created_at, timeline=issue.get_timeline())
    # naming the new head explicitly is fine
    assert pr.pin_head(repo, pull, "e" * 40, commented_at=comment.created_at, timeline=issue.get_timeline()) == "e" * 40


def test_head_moves_after_reads_pushes_and_force_pushes():
    since = "2026-01-01T10:00:00Z"
    assert pr.head_moves_after([{"event": "committed", "sha": "a" * 40, "committer": {"date": "2026-01-01T09:00:00Z"}},
                                {"event": "commented", "created_at": "2026-01-01T11:00:00Z"}], since) == []
    assert pr.head_moves_after([{"event": "committed", "sha": "b" * 40, "committer": {"date": "2026-01-01T10:00:01Z"}}],
                               since) == ["commit bbbbbbbbbbbb"]
    assert pr.head_moves_after([{"event": "head_ref_force_pushed", "commit_id": "c" * 40,
                                 "created_at": "2026-01-01T12:00:00Z"}], since) == ["force-push to cccccccccccc"]
    # undated: fail closed
    assert pr.head_moves_after([{"event": "committed", "sha": "d" * 40, "committer": {}}], since)
    with pytest.raises(pr.Rejected):
        pr.head_moves_after([], "not a date")
