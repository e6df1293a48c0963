"""Ctrl-C stops `minify-bot run` at any stage: exit 130, nothing reported, what was finished kept.
And a minify stage that crashed, followed by a good run, ends in one issue.

Real `minify-bot run` processes, sent SIGINT as a terminal's Ctrl-C would (to the process the
user started), real torch compiling the relu model under the injected compiler bug."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.ghstub.fixtures import BOT_TOKEN, REPO, seeded_stub

DATA = Path(__file__).parent / "data"
MODELS = ("models:\n  first: user_models:good\n  relunet: user_models:relu_under_buggy_compiler\n"
          "  stuck: user_models:hangs\n")


def _as_in_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it: a suite started in the background by a non-interactive shell
    (`cmd &`) has SIGINT ignored, and a child would inherit that and never see the interrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Running:
    """A `minify-bot run` in the background, its stderr collected line by line."""

    def __init__(self, tmp_path: Path, *args, env: dict | None = None, models: str = MODELS):
        (tmp_path / "user_models.py").write_text((DATA / "user_models.py").read_text())
        (tmp_path / "models.yaml").write_text(models)
        self.out = tmp_path / "out"
        full = {**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_TOKEN": "", "GITHUB_REPOSITORY": "",
                "MINIFY_TEST_COMPILER_BUG": "1", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "run", "--out", str(self.out), "--suite", "yaml", "--model-file",
             str(tmp_path / "models.yaml"), "--timeout", "600", *args],
            cwd=tmp_path, env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            preexec_fn=_as_in_a_terminal)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout: float = 400) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.stderr:
            assert self.proc.poll() is None, f"ended before {text!r}:\n{self.stderr[-4000:]}"
            assert time.monotonic() < deadline, f"no {text!r} in {timeout} s:\n{self.stderr[-4000:]}"
            time.sleep(0.2)

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=120)
        self._reader.join(timeout=10)
        return rc


def _rows(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())["checks"]


def _local_issues(out: Path) -> list[Path]:
    """The bug issues of the local tracker (not the dashboard issue)."""
    found = sorted((out / "issues").glob("*.json")) if (out / "issues").is_dir() else []
    return [p for p in found if "minify-bot-dashboard" not in json.loads(p.read_text())["labels"]]


@pytest.mark.slow
def test_ctrl_c_during_the_check_stage_exits_130_keeps_the_finished_checks_and_files_nothing(tmp_path):
    run = Running(tmp_path)
    run.wait_for("stuck: checking")
    time.sleep(1.5)   # the hanging check runs now; two checks are recorded
    assert run.interrupt() == 130, run.stderr[-3000:]
    assert [r["model"] for r in _rows(run.out)] == ["first", "relunet"]
    assert _rows(run.out)[1]["failure_class"] == "accuracy"
    assert "== minify" not in run.stderr and "== report" not in run.stderr
    assert "nothing was reported" in run.stderr
    assert _local_issues(run.out) == [] and not (run.out / "report.json").exists()


@pytest.mark.slow
def test_ctrl_c_during_the_minify_stage_exits_130_and_files_nothing(tmp_path):
    run = Running(tmp_path, models="models:\n  relunet: user_models:relu_under_buggy_compiler\n")
    run.wait_for("== minify")
    time.sleep(3)   # the failure's minify is under way
    assert run.interrupt() == 130, run.stderr[-3000:]
    assert "reporting the failures without repros" not in run.stderr and "== report" not in run.stderr
    assert [r["model"] for r in _rows(run.out)] == ["relunet"]   # the check's result is kept
    assert _local_issues(run.out) == [] and not (run.out / "report.json").exists()


@pytest.mark.slow
def test_ctrl_c_during_the_report_stage_exits_130_and_files_nothing_on_github(tmp_path):
    stub = seeded_stub()
    try:
        stub.delay = 1.0   # a slow GitHub: the report is still reading the issues when Ctrl-C comes
        run = Running(tmp_path, "--no-minify", "--tracker", "github", "--repo", REPO, "--api-url", stub.base_url,
                      env={"GITHUB_TOKEN": BOT_TOKEN},
                      models="models:\n  relunet: user_models:relu_under_buggy_compiler\n")
        run.wait_for("== report")
        time.sleep(1.0)
        assert run.interrupt() == 130, run.stderr[-3000:]
        assert stub.issues() == []
        assert [r["model"] for r in _rows(run.out)] == ["relunet"]
    finally:
        stub.stop()


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


@pytest.mark.slow
def test_a_minify_crash_then_a_good_run_ends_in_one_issue(tmp_path):
    """The minify stage's process is killed (as the kernel's OOM killer would): the run files the
    failure without a repro. The next run minimizes it: the same issue now carries the repro, and
    no second issue is filed. (A secret-like variable makes `run` start each model-running stage as
    a process of its own, the process killed here.)"""
    models = "models:\n  relunet: user_models:relu_under_buggy_compiler\n"
    held = {"SOME_API_TOKEN": "not-a-real-token"}
    crashed = Running(tmp_path, "--budget", "120", "--verify-runs", "1", env=held, models=models)
    crashed.wait_for("== minify")
    time.sleep(2)
    [stage] = _children(crashed.proc.pid)
    os.kill(stage, signal.SIGKILL)
    assert crashed.proc.wait(timeout=600) == 3, crashed.stderr[-4000:]
    crashed._reader.join(timeout=10)
    assert "reporting the failures without repros" in crashed.stderr
    [filed] = _local_issues(crashed.out)
    assert json.loads(filed.read_text())["state"] == "open"

    good = Running(tmp_path, "--budget", "120", "--verify-runs", "1", "--no-trace", models=models)
    assert good.proc.wait(timeout=900) == 1, good.stderr[-4000:]
    good._reader.join(timeout=10)
    issues = _local_issues(good.out)
    assert [p.name for p in issues] == [filed.name], good.stderr[-3000:]
    assert json.loads((good.out / "report.json").read_text())["counts"]["created"] == 0
    body = (good.out / "issues" / (filed.stem + ".md")).read_text()
    assert "aten.relu" in body   # the minimized graph is in the issue filed without one


@pytest.mark.slow
def test_a_cancelled_action_run_exits_130_says_so_in_the_summary_and_files_nothing(tmp_path, ghstub):
    """The Action's process gets SIGINT when its workflow run is cancelled: the stage under way is
    interrupted, the action exits 130 with "Interrupted" in the job summary, files nothing, and keeps
    (and offers for upload) the checks that finished."""
    from tests.ghstub.action import Runner

    runner = Runner(tmp_path, ghstub)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "user_models.py").write_text((DATA / "user_models.py").read_text())
    (ws / "models.yaml").write_text(MODELS)
    argv, cwd, env, files, job = runner.job("workflow_dispatch", {}, {
        "stage": "all", "model-file": "models.yaml", "timeout": "600", "tracker": "local"}, workspace=ws,
        env={"MINIFY_TEST_COMPILER_BUG": "1"})
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=_as_in_a_terminal)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 400
    while "stuck: checking" not in "".join(lines):
        assert p.poll() is None and time.monotonic() < deadline, "".join(lines)[-4000:]
        time.sleep(0.2)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=120)
    reader.join(timeout=10)
    res = runner.result(rc, "".join(lines), "", files, job)
    assert rc == 130, res.stdout[-4000:]
    assert "Interrupted" in res.summary and "nothing is reported" in res.summary, res.summary
    assert [r["model"] for r in _rows(res.run_dir)] == ["first", "relunet"]
    assert _local_issues(res.run_dir) == [] and not (res.run_dir / "report.json").exists()
    assert ghstub.issues() == []
    assert res.outputs.get("upload-dir"), res.outputs
