"""bot/tracker/local.py: issues as files in a directory (the default tracker and every dry run). What
the interface promises is tests/test_tracker_contract.py's; these are what is the local tracker's
own: the files a person reads, reporters in several processes at once, and damaged directories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.tracker.base import TrackerError
from bot.tracker.local import LocalTracker

ROOT = Path(__file__).resolve().parent.parent


def test_each_issue_is_a_json_record_and_a_page_a_person_can_read(tmp_path):
    t = LocalTracker(tmp_path / "issues")
    issue = t.create_issue("[minify-bot] inductor: relu", "**wrong results**\n<!-- m -->", ["minify-bot", "new"],
                           ["alice"], "sig")
    t.comment(issue.number, "still failing", "")
    t.edit_issue(issue.number, state="closed", state_reason="completed")
    rec = json.loads((tmp_path / "issues" / "1.json").read_text())
    assert (rec["number"], rec["title"], rec["state"], rec["assignees"]) == (1, issue.title, "closed", ["alice"])
    assert rec["closed_at"] and [c["body"] for c in rec["comments"]] == ["still failing"]
    page = (tmp_path / "issues" / "1.md").read_text()
    assert page.startswith("# #1 [minify-bot] inductor: relu\n\nstate: closed (completed)\nlabels: minify-bot, new\n")
    assert "**wrong results**" in page and page.rstrip().endswith("still failing")
    assert issue.url == (tmp_path / "issues" / "1.md").as_posix()


def test_another_tracker_on_the_same_directory_sees_the_same_issues(tmp_path):
    LocalTracker(tmp_path / "issues").create_issue("a", "b", ["minify-bot"], [], "s")
    again = LocalTracker(tmp_path / "issues")
    assert [(i.number, i.title) for i in again.list_issues("minify-bot")] == [(1, "a")]
    assert again.create_issue("c", "d", ["minify-bot"], [], "s").number == 2


def test_reporters_in_several_processes_at_once_lose_no_issue_and_share_no_number(tmp_path):
    script = ("import sys\nfrom bot.tracker.local import LocalTracker\nt = LocalTracker(sys.argv[1])\n"
              "for k in range(15):\n    t.create_issue(f'{sys.argv[2]}-{k}', 'b', ['minify-bot'], [], 's')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "issues"), f"p{p}"], env=env)
             for p in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    listed = LocalTracker(tmp_path / "issues").list_issues("minify-bot")
    assert [i.number for i in listed] == list(range(1, 61))
    assert sorted(i.title for i in listed) == sorted(f"p{p}-{k}" for p in range(4) for k in range(15))


def test_a_comment_whose_tag_is_already_there_is_not_written_again(tmp_path):
    t = LocalTracker(tmp_path / "issues")
    n = t.create_issue("a", "b", ["minify-bot"], [], "s").number
    first = t.comment(n, "closing <!-- c1 -->", "<!-- c1 -->")
    assert t.comment(n, "closing again <!-- c1 -->", "<!-- c1 -->") == first
    t.comment(n, "other <!-- c2 -->", "<!-- c2 -->")
    assert [(c["id"], c["body"]) for c in t.comments(n)] == [(1, "closing <!-- c1 -->"), (2, "other <!-- c2 -->")]


def test_files_that_are_not_issues_are_ignored(tmp_path):
    t = LocalTracker(tmp_path / "issues")
    t.create_issue("a", "b", ["minify-bot"], [], "s")
    (tmp_path / "issues" / "notes.json").write_text("{not json")
    (tmp_path / "issues" / ".1.json.tmp").write_text("{half")
    assert [i.number for i in t.list_issues("minify-bot")] == [1]
    assert t.create_issue("c", "d", ["minify-bot"], [], "s").number == 2


def test_a_damaged_issue_file_is_a_tracker_error_naming_it(tmp_path):
    t = LocalTracker(tmp_path / "issues")
    t.create_issue("a", "b", ["minify-bot"], [], "s")
    (tmp_path / "issues" / "1.json").write_text('{"number": 1, "title": ')
    with pytest.raises(TrackerError, match=r"1\.json is not valid JSON"):
        t.list_issues("minify-bot")
    with pytest.raises(TrackerError, match=r"1\.json is not valid JSON"):
        t.edit_issue(1, body="x")


def test_an_issues_directory_that_cannot_be_made_is_a_tracker_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(TrackerError, match="cannot create issues directory"):
        LocalTracker(tmp_path / "file" / "issues")
