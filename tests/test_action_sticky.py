"""bot.action.sticky: the pull request's results comment (templates/action_sticky.md.j2)."""

from __future__ import annotations

from bot import pr, rundir, slash
from bot.action import sticky
from tests.ghstub.rundir import failing_run, report_of
from tests.test_action_stages import make_ctx


def test_results_comment_names_request_commit_and_failures(tmp_path):
    failing_run(tmp_path / "out")
    results = rundir.read_results(tmp_path / "out")
    env = {"GITHUB_SERVER_URL": "https://gh", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "5"}
    ctx = make_ctx(tmp_path, env=env)
    request = slash.MinifyRequest(sha="b" * 40, pr=1, requested_by="alice", models=["mlp_relu"])
    body = sticky.sticky_body(ctx, requested=sticky.requested_line(request), sha=request.sha, results=results,
                              report=report_of({"actions": [], "error": None, "dry_run": True}))
    lines = body.splitlines()
    assert lines[0] == pr.STICKY_MARKER and lines[1] == "### minify-bot results"
    assert "Requested by @alice: models mlp\\_relu" in body
    assert f"Commit: `{'b' * 12}` · [workflow run](https://gh/o/r/actions/runs/5)" in body
    assert "**1** checks, **1** failing, **1** new" in body and "| `mlp_relu` |" in body
    assert "reported here only; no issues were filed" in body
    assert "**Issues**" not in body  # no report entries: no issues section
    assert lines[-1].startswith("<sub>Updated in place by minify-bot")


def test_a_problem_is_escaped_and_shown_without_results(tmp_path):
    body = sticky.sticky_body(make_ctx(tmp_path), requested=None, sha=None, results=None, report=None,
                              problem="the check job ended with `failure` <script> @all")
    assert "⚠️ the check job ended with \\`failure\\` &lt;script&gt; @\u200ball" in body
    assert "checks," not in body and "Commit:" not in body


def test_issue_links_replace_the_reported_here_only_note(tmp_path):
    failing_run(tmp_path / "out")
    results = rundir.read_results(tmp_path / "out")
    cid = results.checks[0].id
    report = report_of({"actions": [{"action": "created", "issue": 3, "url": "https://gh/o/r/issues/3",
                                     "checks": [cid], "reason": "new fingerprint"}], "error": None, "dry_run": False})
    body = sticky.sticky_body(make_ctx(tmp_path), requested=None, sha=None, results=results, report=report)
    assert "**Issues**" in body and "[\\#\u200b3](https://gh/o/r/issues/3)" in body
    assert "reported here only" not in body


def test_the_pull_request_number_of_an_event_is_checked(tmp_path):
    assert sticky.event_pr_number(make_ctx(tmp_path, "pull_request", {"pull_request": {"number": 4}})) == 4
    for bad in (True, -1, "4", 2 ** 40):
        assert sticky.event_pr_number(make_ctx(tmp_path, "pull_request", {"pull_request": {"number": bad}})) is None
