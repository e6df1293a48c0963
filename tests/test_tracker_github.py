"""The report lifecycle against GitHub: real PyGithub over HTTP to the stand-in on 127.0.0.1."""

from __future__ import annotations

import json

from bot import fingerprint as fp
from bot.cli import main
from bot.report import ReportOptions
from bot.report import report_run as _report_run
from bot.tracker.github import GitHubTracker
from tests.ghstub.fixtures import BOT_TOKEN, REPO, at_once
from tests.ghstub.rundir import failing_run, passing_run


def report_run(run, tracker, options: ReportOptions | None = None):
    """The issue lifecycle alone: these tests count the issues a report leaves (no dashboard issue)."""
    return _report_run(run, tracker, options or ReportOptions(dashboard=False))


def tracker(stub, **kw) -> GitHubTracker:
    kw.setdefault("seconds_between_requests", 0)
    kw.setdefault("seconds_between_writes", 0)
    kw.setdefault("sleep", lambda s: None)
    return GitHubTracker(REPO, BOT_TOKEN, stub.base_url, **kw)


def open_issues(stub):
    return [i for i in stub.issues() if i["state"] == "open"]


def test_full_lifecycle_on_github(ghstub, tmp_path):
    t = tracker(ghstub)
    report_run(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"), t)
    [issue] = ghstub.issues()
    assert issue["user"]["login"] == "minify-bot"
    # a first sighting: new, not a regression (nothing says the check ever passed)
    assert {lb["name"] for lb in issue["labels"]} >= {"minify-bot", "accuracy", "inductor", "new"}
    assert "regression" not in {lb["name"] for lb in issue["labels"]}
    report_run(failing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z"), t)
    assert len(ghstub.issues()) == 1 and ghstub.comments() == []
    report_run(passing_run(tmp_path / "r3", started="2026-11-03T00:00:00Z"), t)
    report_run(passing_run(tmp_path / "r4", started="2026-11-04T00:00:00Z"), t)
    [issue] = ghstub.issues()
    assert issue["state"] == "closed" and issue["state_reason"] == "completed"
    assert "consecutive runs" in ghstub.comments()[0]["body"]
    report_run(failing_run(tmp_path / "r5", started="2026-11-05T00:00:00Z"), t)
    [issue] = ghstub.issues()
    assert issue["state"] == "open" and len(ghstub.comments()) == 2
    assert "regression" in {lb["name"] for lb in issue["labels"]}  # it had passed: back is a regression


def test_reporting_the_same_run_twice_writes_nothing(ghstub, tmp_path):
    run = failing_run(tmp_path / "run")
    report_run(run, tracker(ghstub))
    n_writes = len(ghstub.writes())
    result = report_run(run, tracker(ghstub))
    assert result.counts["created"] == 0 and result.counts["commented"] == 0
    assert len(ghstub.writes()) == n_writes  # not even an edit
    assert len(ghstub.issues()) == 1


def test_5xx_after_a_stored_create_does_not_duplicate(ghstub, tmp_path):
    ghstub.inject(method="POST", path=r"/issues$", status=502, after_store=True)
    result = report_run(failing_run(tmp_path / "run"), tracker(ghstub))
    assert len(ghstub.issues()) == 1
    assert result.counts["created"] == 1
    creates = [r for r in ghstub.requests if r.method == "POST" and r.path.endswith("/issues")]
    assert len(creates) == 1  # it listed again and found the stored issue instead of re-posting


def test_5xx_before_storing_is_retried_once(ghstub, tmp_path):
    ghstub.inject(method="POST", path=r"/issues$", status=503)
    report_run(failing_run(tmp_path / "run"), tracker(ghstub))
    assert len(ghstub.issues()) == 1


def test_comment_5xx_after_store_does_not_double_comment(ghstub, tmp_path):
    t = tracker(ghstub)
    report_run(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"), t)
    ghstub.inject(method="POST", path=r"/comments$", status=500, after_store=True)
    report_run(failing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z", torch="2.14.0"), t)
    assert len(ghstub.comments()) == 1


def test_ten_concurrent_reporters_leave_one_open_issue(ghstub, tmp_path):
    ghstub.delay = 0.02  # widen the race window
    runs = [failing_run(tmp_path / f"r{k}", started=f"2026-11-01T00:00:{k:02d}Z") for k in range(10)]
    assert at_once(lambda run: report_run(run, tracker(ghstub)), runs) == []
    assert len(open_issues(ghstub)) == 1
    survivor = open_issues(ghstub)[0]["number"]
    for closed in (i for i in ghstub.issues() if i["state"] == "closed"):
        notes = ghstub.comments(number=closed["number"])
        assert any(f"#{survivor}" in c["body"] for c in notes)  # each duplicate links the survivor
    # the survivor is a valid bot issue (concurrent body edits can lose occurrence counts: GitHub
    # has no compare-and-swap; the workflow's concurrency group serializes reporters in production)
    state = fp.parse_marker(open_issues(ghstub)[0]["body"])
    assert state["occurrences"] >= 1


def test_secondary_rate_limit_is_waited_out_with_retry_after(ghstub, tmp_path):
    waits = []
    ghstub.inject(method="POST", path=r"/issues$", status=403, retry_after=7)
    ghstub.inject(method="POST", path=r"/issues$", status=429, retry_after=3)
    report_run(failing_run(tmp_path / "run"), tracker(ghstub, sleep=waits.append))
    assert len(ghstub.issues()) == 1
    assert waits[:2] == [7.0, 3.0]


def test_rate_limit_longer_than_the_budget_fails_clearly_and_keeps_the_record(ghstub, tmp_path, capsys, monkeypatch):
    run = failing_run(tmp_path / "run")
    ghstub.inject(method="POST", path=r"/issues$", status=403, retry_after=3600)
    monkeypatch.setenv("GITHUB_TOKEN", BOT_TOKEN)
    code = main(["report", "--out", str(run), "--tracker", "github", "--repo", REPO, "--api-url", ghstub.base_url])
    assert code == 3
    err = capsys.readouterr().err
    assert "rate limit" in err and BOT_TOKEN not in err
    rep = json.loads((run / "report.json").read_text())
    assert rep["error"] and BOT_TOKEN not in json.dumps(rep)
    assert ghstub.issues() == []


def test_writes_are_paced_as_the_write_interval_says_and_a_bad_interval_is_a_usage_error(
        ghstub, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("MINIFY_BOT_WRITE_INTERVAL", "0.4")
    run = failing_run(tmp_path / "run")
    argv = ["report", "--out", str(run), "--tracker", "github", "--repo", REPO, "--api-url", ghstub.base_url]
    assert main(argv) == 0   # filed
    writes = [r.started for r in ghstub.requests if r.method in ("POST", "PATCH", "PUT", "DELETE")]
    filed = ghstub.issues()
    assert len(writes) >= 2 and filed
    assert min(b - a for a, b in zip(writes, writes[1:])) >= 0.38   # PyGithub sleeps out the interval
    for bad in ("ghp_soon", "inf", "nan", "-1"):
        monkeypatch.setenv("MINIFY_BOT_WRITE_INTERVAL", bad)
        assert main(argv) == 2, bad
        err = capsys.readouterr().err
        assert "MINIFY_BOT_WRITE_INTERVAL must be a number of seconds" in err and "Traceback" not in err
        assert bad not in err   # what was set there by mistake may be a secret
    assert ghstub.issues() == filed


def test_token_is_masked_in_errors(ghstub):
    t = tracker(ghstub)
    t._token = "secret-xyz"
    err = t._fail("x", RuntimeError("failed with secret-xyz in it"))
    assert "secret-xyz" not in str(err) and "***" in str(err)


def test_bad_token_is_an_infra_error(ghstub, tmp_path, capsys):
    run = failing_run(tmp_path / "run")
    code = main(["report", "--out", str(run), "--tracker", "github", "--repo", REPO, "--api-url", ghstub.base_url,
                 "--token", "wrong-token"])
    assert code == 3
    assert "wrong-token" not in capsys.readouterr().err


def test_issues_by_others_and_fake_markers_are_ignored(ghstub, tmp_path):
    import github
    # mallory files an issue with the bot's label and a copied marker: the bot must not adopt it
    run = failing_run(tmp_path / "r1")
    report_run(run, tracker(ghstub))
    real = ghstub.issues()[0]
    gh = github.Github(auth=github.Auth.Token("alice-token"), base_url=ghstub.base_url,
                       seconds_between_requests=0, seconds_between_writes=0)
    gh.get_repo(REPO).create_issue("copy", body=real["body"], labels=["minify-bot"])
    ghstub.issues()  # two issues now
    report_run(failing_run(tmp_path / "r2", started="2026-11-30T00:00:00Z"), tracker(ghstub))
    alice_issue = [i for i in ghstub.issues() if i["user"]["login"] == "alice"][0]
    assert alice_issue["state"] == "open" and alice_issue["body"] == real["body"]
    assert ghstub.comments(number=alice_issue["number"]) == []


def test_ghes_prefix_and_assignees(ghstub_ghes, tmp_path):
    t = tracker(ghstub_ghes)
    report_run(failing_run(tmp_path / "run"), t,
               ReportOptions(assignees=["alice"], label="compiler-bot", dashboard=False))
    [issue] = ghstub_ghes.issues()
    assert [a["login"] for a in issue["assignees"]] == ["alice"]
    assert "compiler-bot" in [lb["name"] for lb in issue["labels"]]
    assert all(r.path.startswith("/api/v3/") for r in ghstub_ghes.requests)


def test_big_traceback_is_accepted_by_github(ghstub, tmp_path):
    from tests.ghstub.rundir import check_row, failure_record, write_run
    c = check_row(status="fail_to_run", failure_class="runtime_error")
    f = failure_record(c, error={"type": "RuntimeError", "message": "boom", "traceback": "x\n" * 100_000})
    run = write_run(tmp_path / "run", [c], {c["id"]: f})
    report_run(run, tracker(ghstub))
    [issue] = ghstub.issues()
    assert len(issue["body"]) < 65536


def test_listing_issues_costs_one_request_per_page_and_leaves_pull_requests_out(ghstub):
    """Listing is what every report run starts with: 150 issues are two pages, not 150 more
    requests (each counts against the rate limit and is paced). A pull request carrying the label
    is not an issue."""
    numbers = [ghstub.add_issue(f"bug {k}", "b", labels=["minify-bot"]) for k in range(150)]
    pull = ghstub.add_pull(None, head_sha="a" * 40, author="alice")
    ghstub.repos[REPO]["issues"][pull]["labels"].append("minify-bot")
    t = tracker(ghstub)
    before = len(ghstub.requests)
    listed = t.list_issues("minify-bot")
    assert [i.number for i in listed] == numbers
    gets = [r.path for r in ghstub.requests[before:] if r.path != f"/repos/{REPO}"]
    assert gets == [f"/repos/{REPO}/issues"] * 2
