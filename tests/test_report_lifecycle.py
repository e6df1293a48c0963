"""The issue lifecycle through `minify-bot report` with the local tracker (no network)."""

from __future__ import annotations

import json

import pytest

from bot import fingerprint as fp
from bot.cli import main
from bot.tracker.local import LocalTracker
from tests.ghstub.rundir import check_row, failing_run, failure_record, passing_run, write_run


def report(run, issues, *extra) -> int:
    return main(["report", "--out", str(run), "--issues-dir", str(issues), *extra])


def records(issues):
    """The bug issues (the dashboard issue, also kept by `report`, is tested in test_dashboard.py)."""
    return [r for r in LocalTracker(issues).records() if "minify-bot-dashboard" not in r["labels"]]


def test_same_run_twice_creates_nothing_the_second_time(tmp_path):
    run = failing_run(tmp_path / "run")
    assert report(run, tmp_path / "issues") == 0
    first = json.loads((run / "report.json").read_text())
    assert first["counts"]["created"] == 1
    before = records(tmp_path / "issues")
    assert report(run, tmp_path / "issues") == 0
    second = json.loads((run / "report.json").read_text())
    assert second["counts"]["created"] == 0 and second["counts"]["commented"] == 0
    assert records(tmp_path / "issues") == before  # nothing was written at all


def test_file_update_close_after_two_passes_then_reopen(tmp_path):
    issues = tmp_path / "issues"
    report(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"), issues)
    [rec] = records(issues)
    assert rec["state"] == "open"
    assert {"minify-bot", "accuracy", "inductor", "regression"} <= set(rec["labels"])
    # the bug is still there: the body is updated, nobody is pinged (nothing new happened)
    report(failing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z"), issues)
    [rec] = records(issues)
    assert fp.parse_marker(rec["body"])["occurrences"] == 2 and rec["comments"] == []
    # two passing runs close it, with the evidence
    report(passing_run(tmp_path / "r3", started="2026-11-03T00:00:00Z"), issues)
    assert records(issues)[0]["state"] == "open"
    report(passing_run(tmp_path / "r4", started="2026-11-04T00:00:00Z"), issues)
    [rec] = records(issues)
    assert rec["state"] == "closed" and len(rec["comments"]) == 1
    assert "2 consecutive runs" in rec["comments"][0]["body"] and "mlp\\_relu" in rec["comments"][0]["body"]
    # the bug comes back: reopened with a comment, still one issue
    report(failing_run(tmp_path / "r5", started="2026-11-05T00:00:00Z"), issues)
    [rec] = records(issues)
    assert rec["state"] == "open" and len(rec["comments"]) == 2
    assert rec["comments"][1]["body"].startswith("Reopening")


def test_a_passing_streak_is_broken_by_a_failure(tmp_path):
    issues = tmp_path / "issues"
    report(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"), issues)
    report(passing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z"), issues)
    report(failing_run(tmp_path / "r3", started="2026-11-03T00:00:00Z"), issues)
    report(passing_run(tmp_path / "r4", started="2026-11-04T00:00:00Z"), issues)
    assert records(issues)[0]["state"] == "open"


def test_new_model_and_new_torch_are_one_comment(tmp_path):
    issues = tmp_path / "issues"
    report(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"), issues)
    a, b = check_row("mlp_relu"), check_row("convnet")
    write_run(tmp_path / "r2", [a, b], {a["id"]: failure_record(a, torch="2.14.0"), b["id"]: failure_record(b)},
              started="2026-11-02T00:00:00Z")
    report(tmp_path / "r2", issues)
    [rec] = records(issues)
    assert len(rec["comments"]) == 1
    body = rec["comments"][0]["body"]
    assert "newly affected: convnet" in body and "new torch version: 2.14.0" in body
    assert {r["model"] for r in fp.parse_marker(rec["body"])["affected"]} == {"mlp_relu", "convnet"}


def test_flaky_failure_is_labelled_flaky_not_regression_and_never_auto_closed(tmp_path):
    issues = tmp_path / "issues"
    report(failing_run(tmp_path / "r1", flaky=True, started="2026-11-01T00:00:00Z"), issues)
    [rec] = records(issues)
    assert "flaky" in rec["labels"] and "regression" not in rec["labels"]
    for k in range(3):
        report(passing_run(tmp_path / f"p{k}", started=f"2026-11-0{k + 2}T00:00:00Z"), issues)
    assert records(issues)[0]["state"] == "open"
    run = failing_run(tmp_path / "r9", flaky=True, started="2026-11-09T00:00:00Z")
    main(["report", "--out", str(run), "--issues-dir", str(tmp_path / "other"), "--no-file-flaky"])
    assert records(tmp_path / "other") == []


def test_cap_on_new_issues_lists_the_rest(tmp_path):
    checks = [check_row(f"m{k}") for k in range(4)]
    graphs = ["aten.relu.default", "aten.sigmoid.default", "aten.tanh.default", "aten.exp.default"]
    fails = {c["id"]: failure_record(c, graph=[{"op": g, "dtypes": ["float32"], "ranks": [2]}])
             for c, g in zip(checks, graphs)}
    run = write_run(tmp_path / "run", checks, fails)
    report(run, tmp_path / "issues", "--max-new", "2")
    assert len(records(tmp_path / "issues")) == 2
    rep = json.loads((run / "report.json").read_text())
    assert rep["counts"]["capped"] == 2
    summary = (run / "summary.md").read_text()
    assert "Not filed this run" in summary and "m3" in summary


def test_two_models_with_the_same_minimized_graph_share_one_issue(tmp_path):
    a, b = check_row("mlp_relu"), check_row("convnet")
    run = write_run(tmp_path / "run", [a, b], {a["id"]: failure_record(a), b["id"]: failure_record(b)})
    report(run, tmp_path / "issues")
    [rec] = records(tmp_path / "issues")
    assert "convnet" in rec["body"] and "mlp\\_relu" in rec["body"]


@pytest.mark.parametrize("breakage", ["not json", "wrong schema", "newer major", "checks not a list", "bad failure"])
def test_bad_input_exits_2_and_files_nothing(tmp_path, breakage, capsys):
    run = failing_run(tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    if breakage == "not json":
        (run / "results.json").write_text("{oops")
    elif breakage == "wrong schema":
        results["schema"] = "minify-action/failure/v1"
        (run / "results.json").write_text(json.dumps(results))
    elif breakage == "newer major":
        results["schema"] = "minify-action/results/v2"
        (run / "results.json").write_text(json.dumps(results))
    elif breakage == "checks not a list":
        results["checks"] = {"a": 1}
        (run / "results.json").write_text(json.dumps(results))
    else:
        next((run / "failures").glob("*/failure.json")).write_text('{"schema": "minify-action/failure/v9"}')
    assert report(run, tmp_path / "issues") == 2
    assert records(tmp_path / "issues") == []
    assert "error" in capsys.readouterr().err


def test_dry_run_uses_a_local_directory_and_needs_no_token(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    run = failing_run(tmp_path / "run")
    assert main(["report", "--out", str(run), "--tracker", "github", "--dry-run"]) == 0
    assert len(records(run / "issues-dry-run")) == 1
    assert json.loads((run / "report.json").read_text())["dry_run"] is True
    assert main(["report", "--out", str(run), "--tracker", "github"]) == 2  # no token: usage error
