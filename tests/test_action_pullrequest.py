"""bot/action/pullrequest.py: the pull request the Action answers on, read and answered through real
PyGithub over HTTP to the GitHub stand-in: a reaction on the command's comment, a reply on the pull
request, and clear errors (exit 2 without a token, exit 3 when GitHub cannot give it)."""

from __future__ import annotations

import io

import pytest

from bot import gha, pr
from bot.action.context import Context
from bot.action.inputs import Inputs
from bot.action.pullrequest import pr_context, react, reply
from bot.errors import UsageError
from tests.ghstub.fixtures import BOT_LOGIN, BOT_TOKEN, REPO


def _ctx(tmp_path, stub, **inputs):
    env = {"GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": stub.base_url}
    return Context(env=env, inputs=Inputs(**inputs), event=gha.Event("issue_comment", {}),
                   cmds=gha.Commands(io.StringIO()), workdir=tmp_path, out=tmp_path / "out")


@pytest.fixture
def pull(ghstub):
    number = ghstub.add_pull(None, head_sha="c0ffee" + "0" * 34, author="alice")
    gh = pr.client("alice-token", ghstub.base_url)
    comment = gh.get_repo(REPO).get_issue(number).create_comment("/minify")
    yield ghstub, number, comment.id
    gh.close()


def test_react_and_reply_on_the_pull_request(tmp_path, pull):
    stub, number, comment_id = pull
    ctx = _ctx(tmp_path, stub, token=BOT_TOKEN)
    prc = pr_context(ctx, number, comment_id)
    assert prc.login == BOT_LOGIN and prc.issue.number == number and prc.comment.id == comment_id
    react(ctx, prc, "eyes")
    assert [r["content"] for r in stub.reactions(comment_id=comment_id)] == ["eyes"]
    reply(ctx, prc, "minified: see the run")
    bodies = [c["body"] for c in stub.comments(number=number)]
    assert bodies[-1].startswith("minified: see the run") and ctx.answered


def test_without_a_comment_there_is_nothing_to_react_to(tmp_path, pull):
    stub, number, _ = pull
    ctx = _ctx(tmp_path, stub, token=BOT_TOKEN)
    prc = pr_context(ctx, number, None)
    before = len(stub.writes())
    react(ctx, prc, "eyes")
    assert prc.comment is None and len(stub.writes()) == before


def test_no_token_is_a_usage_error(tmp_path, pull):
    stub, number, _ = pull
    with pytest.raises(UsageError, match="needs the `github-token` input") as info:
        pr_context(_ctx(tmp_path, stub), number, None)
    assert info.value.exit_code == 2


def test_answers_are_best_effort_a_failure_is_a_warning(tmp_path, pull):
    stub, number, _ = pull
    ctx = _ctx(tmp_path, stub, token=BOT_TOKEN)
    prc = pr_context(ctx, number, 424242)  # a comment that is gone (deleted since)
    react(ctx, prc, "eyes")
    assert ctx.notes and "eyes" not in [r["content"] for r in stub.reactions()]
    gone = pr_context(ctx, 4242, None)  # a pull request that is not there
    reply(ctx, gone, "hello")
    assert not ctx.answered and "could not reply on the pull request (HTTP 404)" in ctx.notes[-1]
    assert "could not reply" in ctx.cmds.stream.getvalue() and BOT_TOKEN not in ctx.cmds.stream.getvalue()
