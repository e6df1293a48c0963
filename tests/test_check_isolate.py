"""bot/check/isolate.py: each check in a child forked from the sweep. A model that aborts or hangs
costs its own check only: it becomes a crash or timeout row (a death only after a fresh interpreter
saw it too, both runs in the check's log), and the runner goes on. Nothing compiled by inductor."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot import proc
from bot.check.isolate import ForkRunner, died, run_fresh
from bot.check.settings import Settings
from bot.records import Spec

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def runner():
    return ForkRunner(warm=False)  # warm=True would compile once


@pytest.fixture
def user_models(tmp_path):
    shutil.copy(DATA / "user_models.py", tmp_path / "user_models.py")
    (tmp_path / "models.yaml").write_text("x: user_models:good\n")

    def spec(name):
        return Spec(source="yaml", file=str(tmp_path / "models.yaml"), model=name, factory=f"user_models:{name}")
    return spec


def test_a_good_model_passes_and_its_log_is_written(runner, user_models, tmp_path):
    log = tmp_path / "good.log"
    row = runner.run(user_models("good"), Settings(backend="eager", timeout=120), str(log))
    assert row.status == "pass" and not died(row) and row.duration_s > 0
    assert "[check] phase" in log.read_text()


def test_a_training_check_of_a_process_that_cannot_fork_a_backward_runs_in_a_fresh_interpreter(
        runner, user_models, tmp_path, autograd_device_thread):
    log = tmp_path / "good.log"
    row = runner.run(user_models("good"), Settings(backend="eager", timeout=120, mode="training"), str(log))
    assert row.status == "pass" and not died(row)
    assert "autograd threads do not survive a fork: the same check in a fresh interpreter" in log.read_text()


def test_an_aborting_model_is_a_crash_seen_by_a_fresh_interpreter_too(runner, user_models, tmp_path):
    log = tmp_path / "aborts.log"
    messages = []
    runner.log = messages.append
    try:
        row = runner.run(user_models("aborts"), Settings(backend="eager", timeout=120), str(log))
    finally:
        runner.log = lambda msg: None
    assert row.failure_class == "crash" and died(row)
    assert row.status.startswith("eager_")  # it died before anything was compiled
    assert any("fresh interpreter" in m for m in messages)
    assert "fresh interpreter" in log.read_text()  # both runs in the check's log


def test_a_hanging_model_is_a_timeout_and_the_runner_goes_on(runner, user_models, tmp_path):
    row = runner.run(user_models("hangs"), Settings(backend="eager", timeout=3), str(tmp_path / "hangs.log"))
    assert row.failure_class == "timeout" and not died(row) and row.duration_s < 60
    after = runner.run(user_models("good"), Settings(backend="eager", timeout=120), str(tmp_path / "after.log"))
    assert after.status == "pass"


def test_a_check_that_dies_forked_from_the_fork_server_is_judged_by_a_fresh_interpreter(user_models, tmp_path):
    """A fork server's job is a forked child too (minify's localize runs its stages so): its death
    is not the check's result until a fresh interpreter dies as well."""
    log = tmp_path / "forked.log"
    with proc.forkserver(preload=("torch",), env=proc.bot_env()) as server:
        row = run_fresh(user_models("aborts_when_forked"), Settings(backend="eager", timeout=120), str(log),
                        server=server)
    assert row.status == "pass" and not died(row)
    text = log.read_text()
    assert "the same check forked from the fork server" in text
    assert "the check forked from the fork server died (SIGABRT during" in text
    assert text.index("forked from the fork server died") < text.index("the same check in a fresh interpreter")
