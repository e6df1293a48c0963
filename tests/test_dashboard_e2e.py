"""The dashboard over real sweeps: real `check` runs (inductor's C++ backend, the test-only relu bug),
reported through real PyGithub to the GitHub stand-in, or through `minify-bot run` to the local tracker."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from bot.report import dashboard, report_run
from bot.tracker.local import LocalTracker
from tests.test_dashboard import ON, bugs, chart_points, dashboards, labels, section, tracker

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent / "data"
BUG = "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"


def check(bot, out, *extra, env=None):
    proc = bot("check", "--models", "mlp_relu,mlp_gelu", "--out", out, "--timeout", "120", *extra, env=env)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return out


def test_three_real_runs_without_baseline(ghstub, tmp_path, bot):
    t = tracker(ghstub)
    report_run(check(bot, tmp_path / "r1"), t, ON)
    assert bugs(ghstub) == []
    report_run(check(bot, tmp_path / "r2", "--config", BUG), t, ON)
    [bug] = bugs(ghstub)
    assert "regression" in labels(bug) and "mlp\\_relu" in bug["body"]
    [board] = dashboards(ghstub)
    row = next(ln for ln in board["body"].splitlines() if ln.startswith("| inductor |"))
    assert "1 of 2" in row and "-1" in row
    assert f"#{bug['number']}" in section(board["body"], "New failures")
    report_run(check(bot, tmp_path / "r3"), t, ON)
    [board] = dashboards(ghstub)
    row = next(ln for ln in board["body"].splitlines() if ln.startswith("| inductor |"))
    assert "2 of 2" in row and "+1" in row
    assert f"#{bug['number']}" in section(board["body"], "Fixed")
    assert chart_points(board["body"]) == [[2, 1, 2]]
    assert len(dashboards(ghstub)) == 1 and ghstub.comments() == []


def flaky_models(tmp_path) -> Path:
    (tmp_path / "user_models.py").write_text((DATA / "user_models.py").read_text())
    f = tmp_path / "models.yaml"
    f.write_text(textwrap.dedent("""
        models:
          flaky_relu: user_models:relu_fails_first_time
          steady: user_models:good
        """))
    (tmp_path / "flaky").mkdir()
    return f


def test_real_flaky_check_is_not_filed_and_listed_flaky(ghstub, tmp_path, bot):
    models = flaky_models(tmp_path)
    proc = bot("check", "--suite", "yaml", "--model-file", models, "--out", tmp_path / "run", "--timeout", "120",
               env={"MINIFY_TEST_FLAKY_DIR": str(tmp_path / "flaky")})
    assert proc.returncode == 0, proc.stderr[-3000:]  # it passed on rerun: nothing failing
    rows = {r["model"]: r for r in json.loads((tmp_path / "run" / "results.json").read_text())["checks"]}
    assert rows["flaky_relu"]["status"] == "pass" and rows["flaky_relu"]["flaky"]["status"] == "fail_accuracy"
    assert (tmp_path / "run" / "checks" / f"{rows['flaky_relu']['id']}.rerun1.log").exists()
    assert "flaky" not in rows["steady"]
    report_run(tmp_path / "run", tracker(ghstub), ON)
    assert bugs(ghstub) == []
    [board] = dashboards(ghstub)
    assert rows["flaky_relu"]["id"] in section(board["body"], "Flaky")
    assert f"<!-- minify-box:retry:{rows['flaky_relu']['id']} -->" in board["body"]


def test_ticked_retry_box_reaches_the_next_run(tmp_path, bot):
    models = flaky_models(tmp_path)
    env = {"MINIFY_TEST_FLAKY_DIR": str(tmp_path / "flaky"), "GITHUB_TOKEN": ""}
    out = tmp_path / "out"
    args = ["run", "--suite", "yaml", "--model-file", models, "--out", out, "--timeout", "120", "--no-minify"]
    proc = bot(*args, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    t = LocalTracker(out / "issues")
    [board] = [r for r in t.records() if dashboard.LABEL in r["labels"]]
    cid = json.loads((out / "results.json").read_text())["checks"][0]["id"]
    body, n = re.subn(rf"- \[ \] (<!-- minify-box:retry:{cid} -->)", r"- [x] \1", board["body"])
    assert n == 1
    t.edit_issue(board["number"], body=body)  # a person ticks the box
    proc = bot(*args, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "results.json").read_text())["settings"]["retry"] == [cid]
    [board] = [r for r in t.records() if dashboard.LABEL in r["labels"]]
    assert f"retried `{cid}`" in board["body"] and f"- [x] <!-- minify-box:retry:{cid}" not in board["body"]
    assert board["comments"] == []


def test_matrix_sweep_sharded_over_two_jobs_merges_and_reports_per_configuration(ghstub, tmp_path, bot):
    for i in (1, 2):
        check(bot, tmp_path / "dl" / f"shard-{i}", "--matrix", "backend=inductor,aot_eager", "--shard", f"{i}/2",
              "--config", BUG)
    proc = bot("merge", tmp_path / "dl", "--out", tmp_path / "merged")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert sorted((r["model"], r["backend"]) for r in results["checks"]) == [
        ("mlp_gelu", "aot_eager"), ("mlp_gelu", "inductor"), ("mlp_relu", "aot_eager"), ("mlp_relu", "inductor")]
    res = report_run(tmp_path / "merged", tracker(ghstub), ON)
    [bug] = bugs(ghstub)  # the relu bug is inductor's: aot_eager passes
    [filed] = [a for a in res.actions if a.action == "created"]
    assert filed.issue == bug["number"] and filed.checks == ["mlp_relu-inductor-inference-float32-cpu"]
    [board] = dashboards(ghstub)
    rows = {ln.split("|")[1].strip(): ln for ln in board["body"].splitlines() if ln.startswith("| ") and " of " in ln}
    assert "1 of 2" in rows["inductor"] and "2 of 2" in rows["aot\\_eager"]
    assert "| aot\\_eager | inference | float32 | cpu | no | 2 of 2 |" in res.summary_path.read_text()
