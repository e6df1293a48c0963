"""bot.action.stages: the stages' command lines come from the typed options; the token policy."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot import gha, slash
from bot.action.context import Context
from bot.action.inputs import Inputs
from bot.action.stages import Runner, check_options, echo_line, guard_model_code, minify_options, report_options
from bot.errors import InfraError, UsageError
from bot.options import to_argv


def make_ctx(tmp_path: Path, event: str = "schedule", payload: dict | None = None, env: dict | None = None,
             **inputs) -> Context:
    """A Context as bot.action.main builds it, writing its log to a string."""
    return Context(env=dict(env or {}), inputs=Inputs(**inputs), event=gha.Event(event, payload or {}),
                   cmds=gha.Commands(io.StringIO()), workdir=tmp_path, out=tmp_path / "out")


def test_check_command_line_from_the_inputs(tmp_path):
    ctx = make_ctx(tmp_path, models=["mlp_relu", "gru"], backend="aot_eager", dynamic=True, timeout="90",
                   config=["inductor.x=1"], shard="1/2")
    assert to_argv(check_options(ctx)) == [
        "--out", str(tmp_path / "out"), "--models", "mlp_relu,gru", "--backend", "aot_eager", "--dynamic",
        "--timeout", "90", "--shard", "1/2", "--config", "inductor.x=1"]
    # a command or config-file input picks its source
    assert to_argv(check_options(make_ctx(tmp_path, command="python b.py")))[2:] == [
        "--suite", "command", "--command", "python b.py"]
    with pytest.raises(UsageError, match="input 'timeout'"):
        check_options(make_ctx(tmp_path, timeout="soon"))


def test_a_minify_request_overrides_the_workflows_settings_and_adds_config(tmp_path):
    ctx = make_ctx(tmp_path, models=["a"], backend="aot_eager", mode="training", config=["inductor.x=1"])
    req = slash.parse("/minify --models b --backend inductor --config dynamo.y=2")
    argv = to_argv(check_options(ctx, req))
    assert argv[2:] == ["--models", "b", "--backend", "inductor", "--mode", "training",
                        "--config", "inductor.x=1", "--config", "dynamo.y=2"]


def test_minify_command_line(tmp_path):
    ctx = make_ctx(tmp_path, repro_after="aot", repro_level="3", verification_runs=2, minify_budget="60")
    assert to_argv(minify_options(ctx)) == ["--out", str(tmp_path / "out"), "--repro-after", "aot",
                                            "--repro-level", "3", "--verify-runs", "2", "--budget", "60"]
    assert to_argv(minify_options(make_ctx(tmp_path))) == ["--out", str(tmp_path / "out")]
    assert to_argv(minify_options(make_ctx(tmp_path, trace=False))) == ["--out", str(tmp_path / "out"), "--no-trace"]


def test_report_command_line_local_and_github(tmp_path):
    env = {"GITHUB_REPOSITORY": "o/r", "GITHUB_SERVER_URL": "https://gh", "GITHUB_RUN_ID": "9"}
    ctx = make_ctx(tmp_path, env=env, labels=["bot", "extra"], max_new_issues=0, bot_login="me",
                   command="python b.py")
    local = to_argv(report_options(ctx, local=True, pr_run=True))
    assert "--dry-run" in local and "--pr-run" in local and "--repo" not in local and "--bot-login" not in local
    gh = to_argv(report_options(ctx, local=False, pr_run=False))
    assert gh[:8] == ["--out", str(tmp_path / "out"), "--tracker", "github", "--repo", "o/r", "--bot-login", "me"]
    assert ["--labels", "bot"] == gh[8:10] and ["--max-new-issues", "0"] == gh[10:12]
    assert "--run-url" in gh and ["--command", "python b.py"] == gh[-2:] and "--pr-run" not in gh


def test_echo_line_is_one_line_whatever_the_arguments():
    line = echo_line("check", ["--models", "a\n::error::x", "b c"])
    assert "\n" not in line and "\\x0a::error::x" in line and "'b c'" in line


def test_model_code_never_runs_in_a_job_that_holds_a_credential(tmp_path):
    """Whatever the event: no credential, the stage may run; the token input, a secret-like variable
    or a checkout's persisted token, it may not."""
    guard_model_code(make_ctx(tmp_path, event="issue_comment"))  # no token: fine
    for event in ("issue_comment", "schedule", "push"):
        with pytest.raises(UsageError, match="refusing to run model code .* holds a credential .*github-token input"):
            guard_model_code(make_ctx(tmp_path, event=event, token="ghp_x"))
    with pytest.raises(UsageError, match=r"\$MY_SECRET"):
        guard_model_code(make_ctx(tmp_path, event="push", env={"MY_SECRET": "s"}, stage="check"))


def test_runner_streams_a_real_stage_and_keeps_the_token_from_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    ctx = make_ctx(tmp_path, token="ghp_secret_value_1234")
    ctx.secrets = ["ghp_secret_value_1234"]
    rc = Runner(ctx)("report", ["--out", str(tmp_path / "nowhere"), "--repo", "ghp_secret_value_1234"])
    log = ctx.cmds.stream.getvalue()
    assert rc == 2 and "results.json not found" in log
    assert "ghp_secret_value_1234" not in log and "$ minify-bot report --out" in log
    with pytest.raises(InfraError, match="stopped at its time limit"):
        Runner(ctx)("check", ["--list"], timeout=0.01)


def test_bisect_command_line_from_the_builds_inputs(tmp_path):
    from bot.action.stages import bisect_options

    ctx = make_ctx(tmp_path, builds=["old=torch==2.13.0", "torch==2.15.0"], builds_file="builds.yml",
                   verification_runs=2)
    assert to_argv(bisect_options(ctx)) == ["--out", str(tmp_path / "out"), "--build", "old=torch==2.13.0",
                                            "--build", "torch==2.15.0", "--builds-file", "builds.yml",
                                            "--verify-runs", "2"]
    env = {"INPUT_BUILDS": "torch==2.13.0\n\ntorch==2.15.0\n", "INPUT_BUILDS-FILE": ""}
    assert Inputs.read(env).builds == ["torch==2.13.0", "torch==2.15.0"]
