"""bot/commands/report.py: `minify-bot report` as a user runs it, on run directories written by the
product's own writers, with the local tracker (a directory of issues): one issue per bug, filed once,
--dry-run kept apart, and bad input exit 2 before anything is filed."""

from __future__ import annotations

import json

from bot import rundir
from tests import rundirs


def _issues(d):
    return sorted(json.loads(p.read_text())["title"] for p in d.glob("[0-9]*.json")) if d.is_dir() else []


def _run_dir(path):
    bad = rundirs.check("mlp_relu")
    ok = rundirs.check("gru", status="pass", failure_class=None)
    return rundirs.write(path, [bad, ok], [rundirs.failure(bad)])


def test_one_issue_per_bug_filed_once(bot, tmp_path):
    run = _run_dir(tmp_path / "run")
    first = bot("report", "--out", run, "--no-dashboard", timeout=300)
    assert first.returncode == 0, first.stderr
    assert "1 filed, 0 updated" in first.stderr
    titles = _issues(run / "issues")
    assert len(titles) == 1 and "aten.relu.default" in titles[0]
    assert (run / rundir.REPORT).is_file() and (run / rundir.SUMMARY).is_file()
    again = bot("report", "--out", run, "--no-dashboard", timeout=300)
    assert again.returncode == 0, again.stderr
    assert "0 filed" in again.stderr and _issues(run / "issues") == titles  # no duplicate


def test_dry_run_files_in_its_own_directory_and_summary_goes_to_the_step(bot, tmp_path):
    run = _run_dir(tmp_path / "run")
    step = tmp_path / "step_summary.md"
    proc = bot("report", "--out", run, "--dry-run", "--no-dashboard", env={"GITHUB_STEP_SUMMARY": str(step)},
               timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert len(_issues(run / "issues-dry-run")) == 1 and _issues(run / "issues") == []
    assert step.read_text() == (run / rundir.SUMMARY).read_text()
    assert str(tmp_path) not in step.read_text()  # no runner path in what GitHub shows


def test_bad_input_is_exit_2_and_files_nothing(bot, tmp_path):
    proc = bot("report", "--out", tmp_path / "empty", timeout=120)
    assert proc.returncode == 2 and "results.json not found" in proc.stderr
    run = _run_dir(tmp_path / "run")
    env = {"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": ""}
    proc = bot("report", "--out", run, "--tracker", "github", env=env, timeout=120)
    assert proc.returncode == 2 and "--tracker github needs a token" in proc.stderr
    proc = bot("report", "--out", run, "--tracker", "github", "--token", "x", env=env, timeout=120)
    assert proc.returncode == 2 and "needs --repo OWNER/NAME" in proc.stderr
    proc = bot("report", "--out", run, env={"MINIFY_BOT_SIGNING_KEY": "not-a-key"}, timeout=120)
    assert proc.returncode == 2 and "not-a-key" not in proc.stderr  # a secret's value is never printed
    assert _issues(run / "issues") == []
