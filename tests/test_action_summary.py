"""bot.action.summary: outputs, the job summary's results section (a template) and the exit code."""

from __future__ import annotations

import re

import pytest

from bot import rundir
from bot.action import summary
from bot.errors import EXIT_FAILURES, EXIT_OK
from bot.records import ResultsDoc
from tests.ghstub.rundir import check_row, failure_record, report_of, write_run
from tests.test_action_stages import make_ctx


def _run(tmp_path):
    bad = check_row("mlp_relu")
    known = check_row("conv|`@x", baseline="known")
    ok = check_row("gru", status="pass", failure_class=None)
    write_run(tmp_path / "out", [ok, known, bad], {bad["id"]: failure_record(bad)})
    return rundir.read_results(tmp_path / "out"), bad, known


def test_results_section_lists_failures_first_with_repro_and_issue(tmp_path):
    results, bad, known = _run(tmp_path)
    report = report_of({"actions": [{"action": "created", "issue": 7, "url": "https://gh/o/r/issues/7",
                                     "checks": [bad["id"]], "reason": "new fingerprint"}], "error": None,
                        "dry_run": False})
    ctx = make_ctx(tmp_path)
    summary.summary_results(ctx, results, report, "minify-bot results")
    text = "\n".join(ctx.summary)
    lines = text.splitlines()
    assert lines[0] == "## minify-bot results"
    assert "**3** checks, **2** failing, **1** new" in text
    assert "Settings: backend inductor, mode inference, dtype float32, device cpu, shard 1/1" in text
    rows = [line for line in lines if line.startswith("| `")]
    assert rows[0].startswith("| `conv\\|'@x` |")  # failing first (by id), escaped; passing last
    assert rows[1].startswith("| `mlp_relu` |") and rows[2].startswith("| `gru` |")
    assert "minimized (3/3 verified)" in rows[1] and "[created](https://gh/o/r/issues/7)" in rows[1]
    assert "not minified" in rows[0] and "✅ pass" in rows[2]
    # the link's label is escaped like any text: a zero-width space keeps "#7" from being a reference
    assert "- **created** [\\#\u200b7](https://gh/o/r/issues/7) `" + bad["id"] + "` — new fingerprint" in text


@pytest.mark.parametrize("runs,failed,shown", [
    (float("inf"), float("inf"), "minimized"),          # no count: no claim that it was verified
    (float("nan"), 1, "minimized"),
    ({"a": 1}, [1], "minimized"),
    (2.5, 2, "minimized"),
    (3, float("inf"), "minimized (?/3 verified)"),      # runs counted, the failed ones not a count
    (3.0, 2, "minimized (2/3 verified)"),
])
def test_verification_counts_that_are_not_counts_never_stop_the_summary(tmp_path, runs, failed, shown):
    """failure.json comes from the job that ran model code, and JSON allows Infinity and NaN: the
    results table says what it can, and the summary is written (no internal error, exit 3)."""
    bad = check_row("mlp_relu")
    rec = failure_record(bad)
    rec["repro"]["verification"] = {"runs": runs, "failed_same_way": failed, "random_inputs_reproduce": True}
    write_run(tmp_path / "out", [bad], {bad["id"]: rec})
    ctx = make_ctx(tmp_path)
    summary.summary_results(ctx, rundir.read_results(tmp_path / "out"), None, "T")
    [row] = [line for line in "\n".join(ctx.summary).splitlines() if line.startswith("| `mlp_relu` |")]
    assert row.split(" | ")[7] == shown  # the repro column


def test_an_issue_link_cannot_end_its_table_cell(tmp_path):
    """The issue column's link target is percent-encoded: a pipe, a parenthesis or an angle bracket
    in report.json's URL ends neither the link nor the cell."""
    results, bad, _ = _run(tmp_path)
    url = "https://gh/o/r/issues/7|<img src=https://evil.example/x.png>) [x](https://evil.example)"
    report = report_of({"actions": [{"action": "created", "issue": 7, "url": url, "checks": [bad["id"]],
                                     "reason": "new fingerprint"}]})
    ctx = make_ctx(tmp_path)
    summary.summary_results(ctx, results, report, "T")
    text = "\n".join(ctx.summary)
    [row] = [line for line in text.splitlines() if line.startswith("| `mlp_relu` |")]
    assert len(re.split(r"(?<!\\)\|", row)) == 11  # nine cells
    assert "[created](https://gh/o/r/issues/7%7C%3Cimg%20src=https://evil.example/x.png%3E%29%20%5Bx%5D" in row
    assert "<img" not in text and "](https://evil.example)" not in text


def test_results_section_without_results_or_report(tmp_path):
    ctx = make_ctx(tmp_path, stage="check")
    summary.summary_results(ctx, None, None, "T")
    assert ctx.summary == ["## T\n\n_No results._\n"]
    ctx = make_ctx(tmp_path, stage="report")
    summary.summary_results(ctx, ResultsDoc(), None, "T")
    text = ctx.summary[0]
    assert "_No checks ran._" in text and "the sweep is incomplete" in text
    assert "_Nothing was reported (no report.json)._" in text


def test_filing_errors_and_dry_runs_are_said(tmp_path):
    results, bad, _ = _run(tmp_path)
    ctx = make_ctx(tmp_path)
    summary.summary_results(ctx, results, report_of({"actions": [], "error": "HTTP 403: <no>", "dry_run": False}), "T")
    assert "❌ **Filing failed:** HTTP 403: &lt;no&gt;; nothing was filed" in ctx.summary[0]
    ctx = make_ctx(tmp_path)
    entries = [{"action": "capped", "issue": None, "url": None, "checks": [f"c{i}" for i in range(7)], "reason": "cap"}]
    summary.summary_results(ctx, results, report_of({"actions": entries, "error": None, "dry_run": True}), "T")
    assert "- **capped** `c0`, `c1`, `c2`, `c3`, `c4` … — cap" in ctx.summary[0]
    assert ctx.summary[0].rstrip().endswith("_Dry run: nothing was filed on GitHub._")


def test_outputs_and_exit_code_follow_fail_on(tmp_path):
    results, bad, _ = _run(tmp_path)
    report = report_of({"actions": [{"action": "created", "url": "https://gh/i/1"},
                                    {"action": "x", "url": "javascript:1"}]})
    ctx = make_ctx(tmp_path)
    summary.result_outputs(ctx, results, report)
    assert ctx.outputs["failure-count"] == "2" and ctx.outputs["regression-count"] == "1"
    assert ctx.outputs["issue-urls"] == "https://gh/i/1"
    assert summary.exit_for(make_ctx(tmp_path, fail_on="regression"), results) == EXIT_FAILURES
    assert summary.exit_for(make_ctx(tmp_path, fail_on="never"), results) == EXIT_OK
    only_known = results.replace(checks=[r for r in results.checks if r.baseline != "new"])
    assert summary.exit_for(make_ctx(tmp_path, fail_on="regression"), only_known) == EXIT_OK
    assert summary.exit_for(make_ctx(tmp_path, fail_on="failure"), only_known) == EXIT_FAILURES


def test_finish_writes_outputs_summary_file_and_masks_secrets(tmp_path):
    out_file, summary_file = tmp_path / "gh_out", tmp_path / "gh_summary"
    env = {"GITHUB_OUTPUT": str(out_file), "GITHUB_STEP_SUMMARY": str(summary_file)}
    ctx = make_ctx(tmp_path)
    ctx.secrets = ["s3cr3t-value"]
    ctx.summary += ["## hello s3cr3t-value"]
    ctx.notes.append("a note")
    summary.finish(ctx, env, 0, started=0.0)
    text = summary_file.read_text()
    assert "s3cr3t-value" not in text and "## hello" in text and "- a note" in text
    assert (ctx.out / "action-summary.md").read_text() == text
    assert "exit-code" in out_file.read_text()
