"""What the Action reads back from the run directory: results.json, report.json and the failure records (as `check`,
`minify` and `report` write them, bot/schemas/), through bot.rundir's readers."""

from __future__ import annotations

from pathlib import Path

from bot.failure import FailureRecord
from bot.records import CheckRow, ReportAction, ReportDoc, ResultsDoc


def load(path: Path) -> ResultsDoc | ReportDoc | None:
    """results.json (a ResultsDoc) or report.json (a ReportDoc); None when it is missing or not one."""
    from bot import rundir

    return rundir.read_optional(path)


def failure_of(run_dir: Path, check_id: str) -> FailureRecord | None:
    """A check's failure record, or None when minify wrote none or it is not one this version reads."""
    from bot import rundir
    from bot.errors import UsageError

    try:
        return rundir.read_failure(run_dir, check_id)
    except UsageError:
        return None


def rows(results: ResultsDoc | None) -> list[CheckRow]:
    """The check rows of a results document ``load`` read (none when there is none)."""
    return results.checks if results is not None else []


def failing(results: ResultsDoc | None) -> list[CheckRow]:
    return [r for r in rows(results) if r.failure_class]


def regressions(results: ResultsDoc | None) -> list[CheckRow]:
    # without a baseline every failure is new; with one, only rows the baseline calls new
    return [r for r in failing(results) if r.baseline in (None, "new")]


def report_entries(report: ReportDoc | None) -> list[ReportAction]:
    """The per-bug entries of report.json (its `actions` list)."""
    return list(report.actions) if report is not None else []


def entry_url(e: ReportAction) -> str | None:
    url = e.url
    return url if isinstance(url, str) and url.startswith(("http://", "https://")) else None


def issue_urls(report: ReportDoc | None) -> list[str]:
    urls: list[str] = []
    for e in report_entries(report):
        url = entry_url(e)
        if url and url not in urls:
            urls.append(url)
    return urls


def report_error(report: ReportDoc | None) -> str | None:
    """Why report stopped: report.json's `error` (e.g. "... HTTP 403: Resource not accessible")."""
    err = report.error if report is not None else None
    return str(err)[:500] if err else None
