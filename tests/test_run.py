"""`minify-bot run` and `selftest`: the whole pipeline with real torch, real files, local tracker."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"

INJECT = "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"


def _issues(d):
    """Bug issues (the dashboard issue is tested in test_dashboard.py)."""
    recs = [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))]
    return [r for r in recs if "minify-bot-dashboard" not in r["labels"]]


@pytest.mark.slow
def test_run_without_token_files_locally_and_follows_the_bug_lifecycle(tmp_path, bot):
    (tmp_path / "user_models.py").write_text((DATA / "user_models.py").read_text())
    (tmp_path / "models.yaml").write_text("models:\n  relunet: user_models:relu_under_buggy_compiler\n"
                                          "  tanhnet: user_models:good\n")
    out = tmp_path / "out"
    args = ("run", "--out", out, "--suite", "yaml", "--model-file", tmp_path / "models.yaml", "--no-minify")
    buggy = {"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": "", "MINIFY_TEST_COMPILER_BUG": "1"}
    fixed = {**buggy, "MINIFY_TEST_COMPILER_BUG": "0"}

    proc = bot(*args, env=buggy)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"local tracker in {out}/issues/" in proc.stderr
    issues = _issues(out / "issues")
    assert len(issues) == 1 and issues[0]["state"] == "open"
    assert "relunet" in (out / "issues" / f"{issues[0]['number']}.md").read_text()
    n = issues[0]["number"]
    assert f"filed #{n}: {issues[0]['title']} ({out}/issues/{n}.md)" in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.rstrip().splitlines()[-1].startswith(f"next: read {out}/issues/{n}.md; to file on GitHub")

    proc = bot(*args, env=buggy)                                               # still failing: updated
    assert f"updated #{n}: {issues[0]['title']}" in proc.stderr, proc.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["created"] == 0 and len(_issues(out / "issues")) == 1

    for k in range(2):                                                         # fixed twice: closed
        proc = bot(*args, env=fixed)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (issue,) = _issues(out / "issues")
        assert issue["state"] == ("open" if k == 0 else "closed")
    closing = issue["comments"][-1]["body"]
    assert "relunet" in closing and "reopen" in closing.lower()

    bot(*args, env=buggy)                                                      # back: reopened
    (issue,) = _issues(out / "issues")
    assert issue["state"] == "open"
    assert json.loads((out / "report.json").read_text())["counts"]["reopened"] == 1


@pytest.mark.slow
def test_selftest_passes(bot, tmp_path):
    proc = bot("selftest", "--keep", tmp_path)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "selftest: PASSED" in proc.stderr
    assert len(list((tmp_path / "issues").glob("*.json"))) == 1


def test_run_ends_with_what_it_filed_and_the_next_step(tmp_path):
    from bot import rundir
    from bot.commands.run import what_was_filed
    from bot.records import ReportAction, ReportDoc

    url = "https://github.com/o/r/issues/"
    rundir.write_report(tmp_path, ReportDoc("run-1", "github", actions=[
        ReportAction("created", 12, f"{url}12", title="[minify-bot] inductor: accuracy failure"),
        ReportAction("updated", 7, f"{url}7", title="[minify-bot] inductor: compile error"),
        ReportAction("unchanged", 3, f"{url}3", title="old")]))
    assert what_was_filed(str(tmp_path), "github") == [
        "filed #12: [minify-bot] inductor: accuracy failure (https://github.com/o/r/issues/12)",
        "updated #7: [minify-bot] inductor: compile error (https://github.com/o/r/issues/7)",
        f"next: read {url}12; the failure's repro, logs and inputs are in {tmp_path}/failures/"]
    rundir.write_report(tmp_path, ReportDoc("run-2", "local", actions=[]))
    assert what_was_filed(str(tmp_path), "local") == ["next: nothing to read; no bug issue was filed or updated"]


def test_the_checks_first_failure_starts_what_minify_needs_and_only_a_compiler_failure_does(tmp_path):
    """The sweep tells `run` of a check's first failing attempt (before its reruns), so that the
    minify stage's fork server starts while the check goes on; a program that fails eagerly is not
    a compiler failure and starts nothing. In-process, with programs that compile nothing."""
    from bot.check import sweep
    from bot.options import CheckOptions, call_stage

    (tmp_path / "bad.py").write_text("import sys\nprint('Accuracy failed: compiled differs')\nsys.exit(1)\n")
    (tmp_path / "good.py").write_text("print('ok')\n")
    seen = []
    sweep.ON_FIRST_FAILURE.append(lambda row: seen.append((row.status, row.reruns)))
    try:
        for name in ("good", "bad"):
            rc = call_stage(CheckOptions(command=f"{sys.executable} {tmp_path / name}.py", name=name,
                                         out=str(tmp_path / name), reruns=1))
            assert rc == (1 if name == "bad" else 0)
    finally:
        sweep.ON_FIRST_FAILURE.clear()
    assert seen == [("fail_accuracy", None)]   # once, for the failing program, before its rerun
