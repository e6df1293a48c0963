"""The tracker interface the report lifecycle talks to."""

from __future__ import annotations

import abc
import dataclasses

from bot.errors import InfraError


class TrackerError(InfraError):
    """The tracker failed in a way retrying did not fix (exit 3). Messages never contain the token."""


@dataclasses.dataclass
class Issue:
    number: int
    title: str
    body: str
    state: str  # open | closed
    labels: list[str]
    author: str
    url: str
    state_reason: str | None = None


class Tracker(abc.ABC):
    """What the report lifecycle needs from an issue tracker.

    Implementations must make ``create_issue`` safe against "stored but the reply was lost": when the
    outcome of a create is unknown they look for an issue whose body carries ``marker_sig`` before
    creating again, and likewise ``comment`` looks for ``tag`` before commenting again.
    """

    name = "tracker"

    @abc.abstractmethod
    def bot_login(self) -> str:
        """The login the bot's own issues are authored by."""

    @abc.abstractmethod
    def list_issues(self, label: str) -> list[Issue]:
        """Every issue (open and closed) carrying ``label``, oldest first."""

    @abc.abstractmethod
    def create_issue(self, title: str, body: str, labels: list[str], assignees: list[str],
                     marker_sig: str) -> Issue:
        """File an issue. ``marker_sig`` is the primary signature recorded in ``body``'s marker."""

    @abc.abstractmethod
    def edit_issue(self, number: int, *, body: str | None = None, state: str | None = None,
                   state_reason: str | None = None, labels: list[str] | None = None) -> Issue:
        """Change an issue; only the given fields change."""

    @abc.abstractmethod
    def comment(self, number: int, body: str, tag: str) -> str:
        """Comment on an issue; ``tag`` is a hidden string contained in ``body``. Returns the comment URL."""

    def get_issue(self, number: int) -> Issue:
        """One issue (or pull request) by its number; TrackerError when there is none (its message says
        "does not exist" or "HTTP 404") or the tracker cannot say."""
        raise TrackerError(f"the {self.name} tracker cannot read one issue")

    def upstream_search(self, api_url: str | None = None):
        """The search of *other* repositories' issues this tracker can offer, at ``api_url`` (default
        github.com's API): a ``bot.tracker.github.IssueSearch``, or None when the tracker uses no
        network (bot/report/upstream.py: possibly related upstream issues)."""
        return None

    def ensure_label(self, name: str, color: str, description: str) -> None:  # noqa: B027
        """Make sure a label exists (optional: labels are also created when first used)."""

    def close(self) -> None:  # noqa: B027
        """Release connections."""
