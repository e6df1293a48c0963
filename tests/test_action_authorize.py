"""bot.action.authorize: what the /minify flow does before it needs GitHub (the rest: test_action_e2e.py)."""

from __future__ import annotations

import json

import pytest

from bot import slash
from bot.action import authorize
from bot.errors import UsageError
from tests.ghstub.action import pr_comment
from tests.test_action_stages import make_ctx


@pytest.mark.parametrize("payload,note", [
    ({"action": "edited", "comment": {"body": "/minify"}, "issue": {}}, "only new comments are commands"),
    ({"action": "created", "comment": {"body": "nice"}, "issue": {}}, "holds no /minify command"),
    ({"action": "created", "comment": {"body": "/minify"}, "issue": {"number": 1}}, "works on pull requests only"),
])
def test_comments_that_ask_for_nothing_are_ignored_without_a_token(tmp_path, payload, note):
    ctx = make_ctx(tmp_path, "issue_comment", payload)
    cmd, request, prc = authorize.handle_comment(ctx)
    assert request is None and prc is None and ctx.prc is None
    assert any(note in n for n in ctx.notes)


@pytest.mark.parametrize("payload,reason", [
    ({"action": "created", "comment": "x", "issue": {}}, "has no comment or issue object"),
    ({"action": 3, "comment": {}, "issue": {}}, "action is not a string"),
    ({"action": "created", "comment": {"body": 5}, "issue": {}}, "body is not a string"),
    # a pull request comment with a bad id: rejected before any request to GitHub
    ({"action": "created", "comment": {"body": "/minify", "id": "x"},
      "issue": {"number": 1, "pull_request": {"url": "x"}}},
     "valid issue number or comment id"),
])
def test_malformed_payloads_are_usage_errors(tmp_path, payload, reason):
    with pytest.raises(UsageError, match=reason):
        authorize.handle_comment(make_ctx(tmp_path, "issue_comment", payload))


def test_the_request_input_is_revalidated(tmp_path):
    cmd = slash.parse("/minify --models mlp_relu")
    req = slash.to_request(cmd, sha="c" * 40, pr=3, comment_id=4, requested_by="bob")
    assert authorize.request_input(make_ctx(tmp_path, request=req.to_text())) == req
    assert authorize.request_input(make_ctx(tmp_path)) is None
    with pytest.raises(UsageError, match="input 'request'"):
        authorize.request_input(make_ctx(tmp_path, request=json.dumps(dict(req.to_json(), models=["a;b"]))))
    with pytest.raises(UsageError, match="input 'request': the request is not JSON"):
        authorize.request_input(make_ctx(tmp_path, request="{truncated"))


def test_the_authorize_steps_request_output_is_what_the_later_stages_read(runner, users, tmp_path):
    """The real writer (stage authorize's `request` step output) read by the real reader (the
    `request` input of stages check and report): the same request, in the JSON text workflows see."""
    payload = pr_comment(users, "walt-token", "/minify --models gru --dtype bfloat16 --config dynamo.verbose=true")
    auth = runner("issue_comment", payload, {"stage": "authorize"})
    assert auth.rc == 0, auth.stdout + auth.stderr
    text = auth.outputs["request"]
    assert list(json.loads(text)) == ["backend", "comment_id", "config", "dtype", "mode", "models", "pr",
                                      "requested_by", "schema", "sha"]
    got = authorize.request_input(make_ctx(tmp_path, request=text))
    assert got == slash.MinifyRequest(sha=auth.outputs["sha"], pr=payload["issue"]["number"], requested_by="walt",
                                      comment_id=payload["comment"]["id"], models=["gru"], dtype="bfloat16",
                                      config={"dynamo.verbose": "true"})
    assert got.to_text() == text
    assert got.command().check_args() == ["--models", "gru", "--dtype", "bfloat16", "--config", "dynamo.verbose=true"]


def test_usage_block_cannot_close_its_fence():
    block = authorize.usage_block()
    assert block.startswith("```\n/minify [--models") and block.count("```") == 2
