"""What the report hands its extensions (the dashboard, the upstream report on a ticked box): a
typed view of one report in progress. :class:`bot.report.lifecycle.Lifecycle` is one; an extension
reads and records through this and nothing else of the report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from bot.options import ReportOptions
    from bot.records import DashboardRef, ReportAction
    from bot.render import Renderer
    from bot.report.load import Failure
    from bot.report.state import IssueState
    from bot.tracker.base import Issue, Tracker


class ReportView(Protocol):
    """One report of one run, as an extension sees it."""

    run_id: str
    opts: ReportOptions          # the report's options, every one resolved
    tracker: Tracker
    renderer: Renderer
    actions: list[ReportAction]       # what the report did so far (report.json's actions)
    dashboard: DashboardRef | None    # the dashboard issue, set by the dashboard once kept

    def bot_issues(self) -> list[tuple[Issue, IssueState]]:
        """The bot's own issues (the author checked before the hidden state is read) and their states."""
        ...

    def record(self, action: str, group: list[Failure] | None, issue: Issue | None, reason: str,
               **extra) -> ReportAction:
        """Add one action to report.json (written at once)."""
        ...

    def write_report(self, error: str | None = None) -> None:
        """Write report.json as it stands."""
        ...
