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
    back = slash.request_from_json(json.dumps(req))
    assert slash.command_from_request(back).check_args() == cmd.check_args()
    assert back["sha"] == "a" * 40 and back["pr"] == 7


@pytest.mark.parametrize("mutate,reason", [
    (lambda r: r.update(models=["a b"]), "invalid models"),
    (lambda r: r.update(backend="evil"), "invalid backend"),
    (lambda r: r.update(config={"os.system": "x"}), "invalid config key"),
    (lambda r: r.update(sha="abc"), "full head SHA"),
    (lambda r: r.update(extra=1), "unknown request fields"),
    (lambda r: r.update(schema="other"), "not a minify-action/request/v1"),
    (lambda r: r.update(requested_by="a b"), "invalid requester"),
])
def test_tampered_requests_are_refused(mutate, reason):
    req = slash.to_request(slash.parse("/minify"), sha="b" * 40, pr=3, comment_id=1, requested_by="alice")
    mutate(req)
    with pytest.raises(slash.RequestError, match=reason):
        slash.request_from_json(json.dumps(req))
