"""One contract for every tracker (bot/tracker/base.py): the same tests against the local tracker
and against the GitHub tracker (real PyGithub over HTTP to the GitHub stand-in). A new tracker is
added to ``tracker`` below and must pass them all.

What a test reads back beyond the interface (a comment's stored text) it reads from where the
tracker keeps it: the local tracker's files, the stand-in's stored state."""

from __future__ import annotations

import dataclasses
from typing import Callable

import pytest

from bot.report import ReportOptions, report_run
from bot.report.state import IssueState, parse
from bot.tracker.base import Issue, Tracker, TrackerError
from bot.tracker.github import GitHubTracker
from bot.tracker.local import LocalTracker
from tests.ghstub.fixtures import BOT_TOKEN, REPO, seeded_stub
from tests.ghstub.rundir import failing_run, passing_run

SIG = "v2:0123456789abcdef"
STATE = IssueState(sig=SIG, sigs=[SIG], first_seen="2026-11-01T00:00:00Z", occurrences=1)
MARK = STATE.marker()


@dataclasses.dataclass
class Backend:
    """A tracker under test and what the test needs to see behind it."""
    tracker: Tracker
    comments: Callable[[int], list[str]]          # the stored comments' bodies, oldest first
    lose_next_reply: Callable[[str], None]        # the next write of this method is stored, its reply lost
    seed: Callable[[str, str], int]               # an issue by the bot under its label (title, body), quickly


@pytest.fixture(params=["local", "github"])
def backend(request, tmp_path):
    if request.param == "local":
        t = LocalTracker(tmp_path / "issues")
        # a file write has no reply to lose
        yield Backend(t, lambda n: [c["body"] for c in t.comments(n)], lambda method: None,
                      lambda title, body: t.create_issue(title, body, ["minify-bot"], [], SIG).number)
        t.close()
        return
    stub = seeded_stub()
    t = GitHubTracker(REPO, BOT_TOKEN, stub.base_url, seconds_between_requests=0, seconds_between_writes=0,
                      sleep=lambda s: None)
    try:
        yield Backend(t, lambda n: [c["body"] for c in stub.comments(number=n)],
                      lambda method: stub.inject(method=method, status=502, after_store=True),
                      lambda title, body: stub.add_issue(title, body, labels=["minify-bot"]))
    finally:
        t.close()
        stub.stop()


@pytest.fixture
def tracker(backend):
    return backend.tracker


def _file(t: Tracker, title: str = "accuracy: aten.relu", label: str = "minify-bot", body: str | None = None) -> Issue:
    return t.create_issue(title, body if body is not None else f"body\n{MARK}", [label, "new"], [], SIG)


def test_a_filed_issue_is_open_authored_by_the_bot_and_listed_under_its_label(tracker):
    issue = _file(tracker)
    assert issue.state == "open" and issue.author == tracker.bot_login()
    assert {"minify-bot", "new"} <= set(issue.labels) and issue.title == "accuracy: aten.relu"
    listed = tracker.list_issues("minify-bot")
    assert [(i.number, i.title, i.body) for i in listed] == [(issue.number, issue.title, issue.body)]
    assert tracker.list_issues("another-label") == []


def test_the_hidden_marker_comes_back_byte_for_byte_and_finds_its_issue(tracker):
    """The report finds a bug's issue by the state in its marker: the body a tracker returns must be
    the body it was given, the marker line last and intact (markdown, unicode, HTML comments)."""
    body = "## Wrong results ✗ in `aten.relu`\n\n<details><summary>log</summary>\n\n```\nx <!-- y -->\n```\n" \
           f"</details>\n\n{MARK}"
    other = _file(tracker, "another bug", body=f"other\n{IssueState(sig='v2:ffff', sigs=['v2:ffff']).marker()}")
    issue = _file(tracker, body=body)
    listed = {i.number: i for i in tracker.list_issues("minify-bot")}
    assert listed[issue.number].body == body
    found = [i.number for i in listed.values() if (s := parse(i.body)) is not None and SIG in s.sigs]
    assert found == [issue.number] and other.number in listed
    assert parse(listed[issue.number].body) == STATE


def test_issues_are_listed_oldest_first_closed_ones_included(tracker):
    first, second = _file(tracker, "first"), _file(tracker, "second")
    tracker.edit_issue(first.number, state="closed", state_reason="completed")
    listed = tracker.list_issues("minify-bot")
    assert [(i.number, i.state) for i in listed] == [(first.number, "closed"), (second.number, "open")]


def test_every_issue_is_listed_past_one_page(backend):
    """GitHub answers 100 issues a page: the 101st and later ones must be listed too."""
    filed = [backend.seed(f"bug {k}", f"b\n{MARK}") for k in range(230)]
    listed = backend.tracker.list_issues("minify-bot")
    assert [(i.number, i.title) for i in listed] == [(n, f"bug {k}") for k, n in enumerate(filed)]


def test_only_issues_under_the_label_are_listed(tracker):
    mine = _file(tracker)
    tracker.create_issue("someone else's", "text", ["bug"], [], "")
    assert [i.number for i in tracker.list_issues("minify-bot")] == [mine.number]
    assert [i.title for i in tracker.list_issues("bug")] == ["someone else's"]


def test_an_edit_changes_only_the_fields_given(tracker):
    issue = _file(tracker)
    edited = tracker.edit_issue(issue.number, body=f"new body\n{MARK}")
    assert (edited.body, edited.title, edited.state) == (f"new body\n{MARK}", issue.title, "open")
    assert set(edited.labels) == set(issue.labels)
    relabelled = tracker.edit_issue(issue.number, labels=["minify-bot", "regression"])
    assert set(relabelled.labels) == {"minify-bot", "regression"} and relabelled.body == edited.body
    [listed] = tracker.list_issues("minify-bot")   # what the next run reads back
    assert (listed.body, set(listed.labels), listed.state) == (edited.body, {"minify-bot", "regression"}, "open")
    assert tracker.list_issues("new") == []         # a label taken off no longer lists the issue


def test_a_label_given_twice_is_one_label(tracker):
    issue = tracker.create_issue("t", f"b\n{MARK}", ["minify-bot", "new", "minify-bot"], [], SIG)
    assert sorted(issue.labels) == ["minify-bot", "new"]
    assert sorted(tracker.edit_issue(issue.number, labels=["flaky", "flaky"]).labels) == ["flaky"]


def test_closing_and_reopening_keep_the_reason(tracker):
    issue = _file(tracker)
    closed = tracker.edit_issue(issue.number, state="closed", state_reason="completed")
    assert closed.state == "closed" and closed.state_reason == "completed"
    reopened = tracker.edit_issue(issue.number, state="open", state_reason="reopened")
    assert (reopened.state, reopened.state_reason) == ("open", "reopened")
    assert [i.state for i in tracker.list_issues("minify-bot")] == ["open"]
    not_planned = tracker.edit_issue(issue.number, state="closed", state_reason="not_planned")
    assert (not_planned.state, not_planned.state_reason) == ("closed", "not_planned")


def test_closing_without_a_reason_closes_it_as_completed(tracker):
    issue = _file(tracker)
    closed = tracker.edit_issue(issue.number, state="closed")
    assert (closed.state, closed.state_reason) == ("closed", "completed")
    assert tracker.edit_issue(issue.number, state="open").state_reason == "reopened"


def test_a_comment_is_stored_on_its_issue_and_says_where_it_was_written(backend):
    t = backend.tracker
    issue, other = _file(t), _file(t, "other")
    url = t.comment(issue.number, "still failing <!-- tag-1 -->", "<!-- tag-1 -->")
    assert isinstance(url, str) and str(issue.number) in url
    t.comment(issue.number, "and again <!-- tag-2 -->", "<!-- tag-2 -->")
    assert backend.comments(issue.number) == ["still failing <!-- tag-1 -->", "and again <!-- tag-2 -->"]
    assert backend.comments(other.number) == []


def test_a_create_whose_reply_was_lost_files_one_issue(backend):
    """The hazard the interface names: the issue was stored, the reply never came. The tracker
    finds it by its marker instead of filing it again."""
    backend.lose_next_reply("POST")
    issue = _file(backend.tracker)
    listed = backend.tracker.list_issues("minify-bot")
    assert [i.number for i in listed] == [issue.number] and parse(listed[0].body).sigs == [SIG]


def test_a_comment_whose_reply_was_lost_is_written_once(backend):
    issue = _file(backend.tracker)
    backend.lose_next_reply("POST")
    url = backend.tracker.comment(issue.number, "closing <!-- tag-9 -->", "<!-- tag-9 -->")
    assert str(issue.number) in url
    assert backend.comments(issue.number) == ["closing <!-- tag-9 -->"]


@pytest.mark.parametrize("call", ["edit", "comment"])
def test_an_issue_that_does_not_exist_is_a_tracker_error_naming_it(tracker, call):
    with pytest.raises(TrackerError, match="#999999"):
        if call == "edit":
            tracker.edit_issue(999_999, body="x")
        else:
            tracker.comment(999_999, "x <!-- t -->", "<!-- t -->")


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
