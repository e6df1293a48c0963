"""The /minify grammar: what a commenter gets back for good and bad commands."""

from __future__ import annotations

import json

import pytest

from bot import slash


def test_a_full_command_parses():
    cmd = slash.parse("Looks odd, please check.\n/minify --models mlp_relu,conv_bn gru --backend inductor "
                      "--mode training --dtype bfloat16 --config inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy "
                      "dynamo.verbose=true --sha ABCDEF1234\nthanks")
    assert cmd.kind == "run"
    assert cmd.models == ["mlp_relu", "conv_bn", "gru"]
    assert (cmd.backend, cmd.mode, cmd.dtype, cmd.sha) == ("inductor", "training", "bfloat16", "abcdef1234")
    assert cmd.config == {"inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy", "dynamo.verbose": "true"}
    assert cmd.check_args() == [
        "--models", "mlp_relu,conv_bn,gru", "--backend", "inductor", "--mode", "training", "--dtype", "bfloat16",
        "--config", "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy", "--config", "dynamo.verbose=true"]


def test_bare_command_runs_with_defaults():
    cmd = slash.parse("/minify")
    assert cmd.kind == "run" and cmd.check_args() == [] and cmd.describe() == "the workflow's default settings"


@pytest.mark.parametrize("body", ["/minify help", "/minify -h", "/minify --help", "  /minify help  "])
def test_help(body):
    cmd = slash.parse(body)
    assert cmd.kind == "help"
    assert "--models" in cmd.usage and "--sha" in cmd.usage


@pytest.mark.parametrize("body", [
    "hello", "", "/minifyx", "> /minify --models a", "```\n/minify\n```", "please run /minify", None, 42,
])
def test_not_a_command(body):
    assert slash.parse(body) is None


@pytest.mark.parametrize("body,reason", [
    ("/minify --backend", "expected one argument"),
    ("/minify --backend nope", "invalid choice: 'nope'"),
    ("/minify --mode fast", "invalid choice"),
    ("/minify --dtype float64", "invalid choice"),
    ("/minify --models 'a;rm -rf /'", "invalid model name"),
    ("/minify --models $(id)", "invalid model name"),
    ("/minify --config os.system=1", "invalid config key"),
    ("/minify --config inductor.x=$(id)", "invalid value"),
    ("/minify --config novalue", "KEY=VALUE"),
    ("/minify --sha zzz", "hex digits"),
    ("/minify \"unterminated", "No closing quotation"),
    ("/minify --mod x", "unrecognized arguments"),
    ("/minify frobnicate", "unexpected argument 'frobnicate'"),
    ("/minify help --models a", "takes no other arguments"),
    ("/minify --config inductor.a=1 inductor.a=2", "given twice"),
    ("/minify --models " + "x" * 3000, "longer than"),
])
def test_bad_commands_get_a_reason_never_an_exception(body, reason):
    cmd = slash.parse(body)
    assert cmd.kind == "invalid"
    assert reason in cmd.error
    assert cmd.usage.startswith("/minify [--models")


def test_request_round_trip_and_revalidation():
    cmd = slash.parse("/minify --models mlp_relu --config inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy")
    req = slash.to_request(cmd, sha="a" * 40, pr=7, comment_id=99, requested_by="alice")
    back = slash.MinifyRequest.from_text(req.to_text())
    assert back == req and isinstance(back, slash.MinifyRequest)
    assert back.command().check_args() == cmd.check_args()
    assert (back.sha, back.pr, back.comment_id, back.requested_by) == ("a" * 40, 7, 99, "alice")


def test_the_request_step_output_keeps_its_keys_and_their_order():
    """Workflows read the authorize step's `request` output: the same JSON text as before the
    request was a record (all ten keys, sorted)."""
    cmd = slash.parse("/minify --models gru --dtype bfloat16 --config dynamo.verbose=true")
    text = slash.to_request(cmd, sha="c" * 40, pr=5, comment_id=None, requested_by="bob").to_text()
    assert text == ('{"backend": null, "comment_id": null, "config": {"dynamo.verbose": "true"}, "dtype": "bfloat16", '
                    '"mode": null, "models": ["gru"], "pr": 5, "requested_by": "bob", '
                    '"schema": "minify-action/request/v1", "sha": "' + "c" * 40 + '"}')
    assert list(json.loads(text)) == sorted(json.loads(text))


def test_a_request_without_models_or_config_runs_the_workflows_defaults():
    doc = json.loads(slash.to_request(slash.parse("/minify"), sha="d" * 40, pr=2, comment_id=1,
                                      requested_by="carol").to_text())
    for models, config in ((None, None), ([], {})):
        back = slash.MinifyRequest.from_text(json.dumps(dict(doc, models=models, config=config)))
        assert (back.models, back.config, back.command().check_args()) == ([], {}, [])
    del doc["backend"], doc["comment_id"]   # optional keys may be left out
    back = slash.MinifyRequest.from_text(json.dumps(doc))
    assert back.backend is None and back.comment_id is None and back.requested_by == "carol"


@pytest.mark.parametrize("text,reason", [
    ("{not json", "not JSON"),
    ("[]", "not a minify-action/request/v1"),
    ('"' + "x" * (64 * 1024) + '"', "larger than 64 KiB"),
    ('{"schema": "minify-action/request/v1", "sha": "' + "e" * 40 + '", "pr": 1}', "invalid requester"),
])
def test_text_that_is_not_a_request_is_refused(text, reason):
    with pytest.raises(slash.RequestError, match=reason):
        slash.MinifyRequest.from_text(text)


@pytest.mark.parametrize("mutate,reason", [
    (lambda r: r.update(models=["a b"]), "invalid models"),
    (lambda r: r.update(backend="evil"), "invalid backend"),
    (lambda r: r.update(config={"os.system": "x"}), "invalid config key"),
    (lambda r: r.update(sha="abc"), "full head SHA"),
    (lambda r: r.update(pr=True), "no pull request number"),
    (lambda r: r.update(comment_id="1"), "invalid comment id"),
    (lambda r: r.update(extra=1), "unknown request fields"),
    (lambda r: r.update(schema="other"), "not a minify-action/request/v1"),
    (lambda r: r.update(requested_by="a b"), "invalid requester"),
])
def test_tampered_requests_are_refused(mutate, reason):
    req = slash.to_request(slash.parse("/minify"), sha="b" * 40, pr=3, comment_id=1, requested_by="alice")
    doc = json.loads(req.to_text())
    mutate(doc)
    with pytest.raises(slash.RequestError, match=reason):
        slash.MinifyRequest.from_text(json.dumps(doc))


def test_only_a_run_command_becomes_a_request():
    with pytest.raises(ValueError, match="only a run command"):
        slash.to_request(slash.parse("/minify help"), sha="b" * 40, pr=3, comment_id=1, requested_by="alice")
