"""The report: one issue per bug, filed, updated, reopened and closed.

Entry point for other commands (e.g. ``minify-bot run``)::

    from bot.report import ReportOptions, report_run
    from bot.tracker.local import LocalTracker
    result = report_run("minify-out", LocalTracker("minify-out/issues"), ReportOptions())
    result.counts        # {"created": 1, "updated": 0, ...}
    result.actions       # what was done, as written to report.json

``report_run`` validates every input file before it writes anything (bad input: UsageError, exit 2),
writes ``report.json`` after every action (so a GitHub failure half-way loses nothing: TrackerError,
exit 3) and ``summary.md`` at the end. Rules: docs/reporting.md.

Modules: ``load`` (options, the run directory's failures), ``state`` (the typed issue state in the
hidden marker, and merging a run into it), ``context`` (the issue body's template context),
``lifecycle`` (file / update-or-reopen / close against the Tracker interface; ``report_run``).
"""

from bot.options import ReportOptions
from bot.report.context import issue_context, reproduce_command
from bot.report.lifecycle import Lifecycle, ReportResult, count_actions, report_run, write_summary
from bot.report.load import Failure, default_run_id, load_run
from bot.report.state import IssueState, labels_for, merge_state

__all__ = ["Failure", "IssueState", "Lifecycle", "ReportOptions", "ReportResult", "count_actions",
           "default_run_id", "issue_context", "labels_for", "load_run", "merge_state", "report_run",
           "reproduce_command", "write_summary"]
