"""One contract for every tracker (bot/tracker/base.py): the same tests against the local tracker
and against the GitHub tracker (real PyGithub over HTTP to the GitHub stand-in). A new tracker is
added to ``tracker`` below and must pass them all."""

from __future__ import annotations

import pytest

from bot.report import ReportOptions, report_run
from bot.tracker.base import Issue, Tracker
from bot.tracker.github import GitHubTracker
from bot.tracker.local import LocalTracker
from tests.ghstub.fixtures import BOT_TOKEN, REPO, seeded_stub
from tests.ghstub.rundir import failing_run, passing_run

MARK = "<!-- minify-action:test sig-1 -->"


@pytest.fixture(params=["local", "github"])
def tracker(request, tmp_path):
    if request.param == "local":
        t = LocalTracker(tmp_path / "issues")
        yield t
        t.close()
        return
    stub = seeded_stub()
    t = GitHubTracker(REPO, BOT_TOKEN, stub.base_url, seconds_between_requests=0, seconds_between_writes=0,
                      sleep=lambda s: None)
    try:
        yield t
    finally:
        t.close()
        stub.stop()


def _file(t: Tracker, title: str = "accuracy: aten.relu", label: str = "minify-bot") -> Issue:
    return t.create_issue(title, f"body\n{MARK}", [label, "new"], [], "sig-1")


def test_a_filed_issue_is_open_authored_by_the_bot_and_listed_under_its_label(tracker):
    issue = _file(tracker)
    assert issue.state == "open" and issue.author == tracker.bot_login()
    assert {"minify-bot", "new"} <= set(issue.labels) and issue.title == "accuracy: aten.relu"
    listed = tracker.list_issues("minify-bot")
    assert [(i.number, i.title, i.body) for i in listed] == [(issue.number, issue.title, issue.body)]
    assert tracker.list_issues("another-label") == []


def test_issues_are_listed_oldest_first_closed_ones_included(tracker):
    first, second = _file(tracker, "first"), _file(tracker, "second")
    tracker.edit_issue(first.number, state="closed", state_reason="completed")
    listed = tracker.list_issues("minify-bot")
    assert [(i.number, i.state) for i in listed] == [(first.number, "closed"), (second.number, "open")]


def test_an_edit_changes_only_the_fields_given(tracker):
    issue = _file(tracker)
    edited = tracker.edit_issue(issue.number, body=f"new body\n{MARK}")
    assert (edited.body, edited.title, edited.state) == (f"new body\n{MARK}", issue.title, "open")
    assert set(edited.labels) == set(issue.labels)
    relabelled = tracker.edit_issue(issue.number, labels=["minify-bot", "regression"])
    assert set(relabelled.labels) == {"minify-bot", "regression"} and relabelled.body == edited.body


def test_closing_and_reopening_keep_the_reason(tracker):
    issue = _file(tracker)
    closed = tracker.edit_issue(issue.number, state="closed", state_reason="completed")
    assert closed.state == "closed" and closed.state_reason == "completed"
    reopened = tracker.edit_issue(issue.number, state="open", state_reason="reopened")
    assert reopened.state == "open"
    assert [i.state for i in tracker.list_issues("minify-bot")] == ["open"]


def test_a_comment_says_where_it_was_written(tracker):
    issue = _file(tracker)
    url = tracker.comment(issue.number, "still failing <!-- tag-1 -->", "<!-- tag-1 -->")
    assert isinstance(url, str) and str(issue.number) in url


def test_editing_an_issue_that_does_not_exist_is_a_tracker_error(tracker):
    from bot.tracker.base import TrackerError

    with pytest.raises(TrackerError):
        tracker.edit_issue(999_999, body="x")


def test_the_report_lifecycle_is_the_same_on_every_tracker(tracker, tmp_path):
    """File, update, close after two passing runs, reopen: the issue states a maintainer sees."""
    opts = ReportOptions(dashboard=False)
    report_run(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"), tracker, opts)
    [issue] = tracker.list_issues("minify-bot")
    assert issue.state == "open"
    report_run(failing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z"), tracker, opts)
    assert [i.number for i in tracker.list_issues("minify-bot")] == [issue.number]   # one issue per bug
    report_run(passing_run(tmp_path / "r3", started="2026-11-03T00:00:00Z"), tracker, opts)
    report_run(passing_run(tmp_path / "r4", started="2026-11-04T00:00:00Z"), tracker, opts)
    assert [i.state for i in tracker.list_issues("minify-bot")] == ["closed"]
    report_run(failing_run(tmp_path / "r5", started="2026-11-05T00:00:00Z"), tracker, opts)
    [again] = tracker.list_issues("minify-bot")
    assert again.number == issue.number and again.state == "open"
