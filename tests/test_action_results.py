"""bot/action/results.py: what the Action reads back from a run directory for its outputs, summary and
pull-request comment: failing rows, regressions against a baseline, issue links, report's error."""

from __future__ import annotations

from bot import rundir
from bot.action import results
from bot.records import CheckRow, ReportAction, ReportDoc, ResultsDoc


def _row(model, failure_class=None, baseline=None):
    return CheckRow(id=f"{model}-id", model=model, status="fail_accuracy" if failure_class else "pass",
                    failure_class=failure_class, baseline=baseline)


def test_failing_and_regressions_from_a_written_results_json(tmp_path):
    doc = ResultsDoc(checks=[_row("ok"), _row("new", "accuracy", "new"), _row("known", "crash", "known"),
                             _row("no_baseline", "runtime_error")], complete=True)
    rundir.write_results(tmp_path, doc)
    read = results.load(tmp_path / rundir.RESULTS)
    assert [r.model for r in results.rows(read)] == ["ok", "new", "known", "no_baseline"]
    assert [r.model for r in results.failing(read)] == ["new", "known", "no_baseline"]
    assert [r.model for r in results.regressions(read)] == ["new", "no_baseline"]  # a known failure is none


def test_missing_or_foreign_documents_read_as_nothing(tmp_path):
    assert results.load(tmp_path / rundir.RESULTS) is None
    (tmp_path / rundir.RESULTS).write_text('{"schema": "not-ours", "checks": []}')
    assert results.load(tmp_path / rundir.RESULTS) is None
    assert results.rows(None) == [] and results.failing(None) == [] and results.regressions(None) == []
    assert results.report_entries(None) == [] and results.issue_urls(None) == [] and results.report_error(None) is None


def test_failure_records_missing_or_unreadable_are_none(tmp_path):
    assert results.failure_of(tmp_path, "m-id") is None
    d = rundir.failure_dir(tmp_path, "m-id")
    d.mkdir(parents=True)
    (d / rundir.FAILURE).write_text('{"schema": "something else"}')
    assert results.failure_of(tmp_path, "m-id") is None


def test_issue_links_are_http_only_and_once_each(tmp_path):
    url = "https://github.com/o/r/issues/7"
    report = ReportDoc(run_id="1", tracker="github", actions=[
        ReportAction(action="filed", issue=7, url=url, checks=["a"]),
        ReportAction(action="updated", issue=7, url=url, checks=["b"]),
        ReportAction(action="filed", issue=8, url="javascript:alert(1)"),
        ReportAction(action="filed", issue=9, url="file:///srv/tracker/issues/9.md"),
        ReportAction(action="skipped")], error="x" * 2000)
    rundir.write_report(tmp_path, report)
    read = results.load(tmp_path / rundir.REPORT)
    assert isinstance(read, ReportDoc) and len(results.report_entries(read)) == 5
    assert results.issue_urls(read) == [url]
    assert len(results.report_error(read)) == 500
