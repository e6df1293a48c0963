"""bot.action.authorize: what the /minify flow does before it needs GitHub (the rest: test_action_e2e.py)."""

from __future__ import annotations

import json

import pytest

from bot import slash
from bot.action import authorize
from bot.errors import UsageError
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
    assert authorize.request_input(make_ctx(tmp_path, request=json.dumps(req)))["pr"] == 3
    assert authorize.request_input(make_ctx(tmp_path)) is None
    with pytest.raises(UsageError, match="input 'request'"):
        authorize.request_input(make_ctx(tmp_path, request=json.dumps(dict(req, models=["a;b"]))))


def test_usage_block_cannot_close_its_fence():
    block = authorize.usage_block()
    assert block.startswith("```\n/minify [--models") and block.count("```") == 2
