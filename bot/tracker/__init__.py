"""Issue trackers: one interface (bot.tracker.base.Tracker), two implementations.

- bot.tracker.local.LocalTracker: issues as markdown + JSON files in a directory (no token, no network;
  the default, and what a dry run uses).
- bot.tracker.github.GitHubTracker: GitHub or GitHub Enterprise through PyGithub.
"""

from bot.tracker.base import Issue, Tracker, TrackerError  # noqa: F401
