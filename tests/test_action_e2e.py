"""End to end: the real `minify-bot action` as a subprocess, in a runner-like environment
(INPUT_* and GITHUB_* variables, an event payload file, output and summary files), against the
local GitHub stand-in over HTTP. The checks, minification and reports are real (CPU, inductor,
torch's test-only bug injection).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot import pr
from tests.ghstub.action import Result, assert_token_not_leaked, bot_comments, filed_issues, pr_comment, reactions
from tests.ghstub.fixtures import BOT_LOGIN, REPO

BUG = "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"


# ------------------------------------------------------------------ (a) schedule


def as_artifacts(run_dir: Path, dest: Path, name: str = "minify-shard-0") -> Path:
    """The check job's run directory as the report job downloads it (one artifact per shard)."""
    shutil.copytree(run_dir, dest / name)
    return dest


@pytest.mark.slow
def test_schedule_sweep_with_an_injected_bug_files_one_issue(runner, ghstub, tmp_path):
    """sweep.yml's layout: the check job (no token) checks and minifies, the report job files."""
    check = runner("schedule", {"schedule": "17 3 * * *"}, {
        "stage": "check", "models": "mlp_relu,gru", "config": BUG, "verification-runs": "1", "fail-on": "never"})
    assert check.rc == 0, check.stdout + check.stderr
    # the run directory is outside the workspace (no files left in it)
    assert not any((runner.tmp / "job1" / "workspace").iterdir())
    # log: grouped stages, an error annotation per failing check
    assert "::group::minify-bot check" in check.stdout and "::group::minify-bot minify" in check.stdout
    assert ("::error title=minify-bot%3A check failed::mlp_relu-inductor-inference-float32-cpu: fail_accuracy"
            in check.stdout)
    res = runner("schedule", {"schedule": "17 3 * * *"}, {
        "stage": "report", "shards": str(as_artifacts(check.run_dir, tmp_path / "artifacts"))})
    assert res.rc == 1, res.stdout + res.stderr  # fail-on: regression, and there is a new failure
    issues = filed_issues(ghstub)
    assert len(issues) == 1
    issue = issues[0]
    assert "minify-bot" in [label["name"] for label in issue["labels"]]
    assert "aten.relu" in issue["title"]
    # outputs
    o = res.outputs
    assert (o["failure-count"], o["regression-count"], o["exit-code"]) == ("1", "1", "1")
    assert o["issue-urls"] == issue["html_url"]
    results = json.loads(Path(o["results-path"]).read_text())
    assert {c["model"]: c["status"] for c in results["checks"]} == {"mlp_relu": "fail_accuracy", "gru": "pass"}
    assert Path(o["summary-path"]).read_text() in res.summary
    # summary: a results table and what was filed
    assert "| `mlp_relu` | inductor | inference | float32 | cpu | ❌ fail\\_accuracy |" in res.summary
    assert "| `gru` | inductor | inference | float32 | cpu | ✅ pass |" in res.summary
    assert "minimized (1/1 verified)" in res.summary
    assert f"**created** [\\#\u200b{issue['number']}]({issue['html_url']})" in res.summary
    assert "::group::minify-bot report" in res.stdout
    assert_token_not_leaked(res)


# ------------------------------------------------------------------ (b) /minify by a writer


def minify_jobs(runner, stub, payload, tmp: Path, check_inputs: dict) -> tuple[Result, Result, Result]:
    """The three jobs of minify-comment.yml: authorize (token), check (the PR at the pinned commit,
    no token), report (token, the downloaded artifact)."""
    ws = tmp / f"gpu-workspace-{payload['comment']['id']}"
    head = git_head(ws / "pr")
    stub.repos[REPO]["pulls"][payload["issue"]["number"]]["head_sha"] = head
    auth = runner("issue_comment", payload, {"stage": "authorize"})
    assert auth.rc == 0, auth.stdout + auth.stderr
    check = runner("issue_comment", payload, {
        "stage": "check", "working-directory": "pr", "request": auth.outputs["request"],
        "expected-sha": auth.outputs["sha"], "fail-on": "never", **check_inputs}, workspace=ws, token="")
    assert check.rc == 0, check.stdout + check.stderr
    shards = tmp / f"download-{payload['comment']['id']}"
    shutil.copytree(check.run_dir, shards / "minify-pr-1")
    report = runner("issue_comment", payload, {
        "stage": "report", "request": auth.outputs["request"], "shards": str(shards), "check-result": "success"})
    return auth, check, report


@pytest.mark.slow
def test_minify_comment_by_a_writer_answers_in_one_sticky_comment(runner, users, tmp_path):
    payload = pr_comment(users, "walt-token", f"/minify --models mlp_relu --config {BUG}")
    number = payload["issue"]["number"]
    auth, check, res = minify_jobs(runner, users, payload, tmp_path, {"verification-runs": "1"})
    assert res.rc == 1, res.stdout + res.stderr
    assert reactions(users, payload) == [(BOT_LOGIN, "eyes"), (BOT_LOGIN, "rocket")]
    sticky = bot_comments(users, number)
    assert len(sticky) == 1
    body = sticky[0]["body"]
    assert pr.STICKY_MARKER in body
    assert "Requested by @walt: models mlp\\_relu" in body and f"`{auth.outputs['sha'][:12]}`" in body
    assert "| `mlp_relu` |" in body and "fail\\_accuracy" in body and "minimized (1/1 verified)" in body
    assert filed_issues(users) == []  # PR results go to the PR, not the tracker
    o = res.outputs
    assert (o["failure-count"], auth.outputs["pr-number"]) == ("1", str(number))
    assert json.loads(auth.outputs["request"])["config"] == {"inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}
    assert "/minify results" in res.summary and "| `mlp_relu` |" in res.summary
    for r in (auth, check, res):
        assert_token_not_leaked(r)

    # a second command on the same PR edits the same comment
    payload2 = pr_comment(users, "walt-token", "/minify --models gru", number=number)
    _, _, res2 = minify_jobs(runner, users, payload2, tmp_path, {})
    assert res2.rc == 0, res2.stdout + res2.stderr
    assert reactions(users, payload2) == [(BOT_LOGIN, "eyes"), (BOT_LOGIN, "rocket")]
    sticky2 = bot_comments(users, number)
    assert [c["id"] for c in sticky2] == [sticky[0]["id"]]
    assert "| `gru` |" in sticky2[0]["body"] and "mlp\\_relu" not in sticky2[0]["body"]


# ------------------------------------------------------------------ (c) /minify by a read-only user


def test_minify_comment_by_a_read_only_user_runs_nothing(runner, users):
    payload = pr_comment(users, "mallory-token", f"/minify --models mlp_relu --config {BUG}")
    number = payload["issue"]["number"]
    res = runner("issue_comment", payload, {"stage": "authorize"})
    assert res.rc == 2
    assert reactions(users, payload) == [(BOT_LOGIN, "confused"), (BOT_LOGIN, "eyes")]
    replies = bot_comments(users, number)
    assert len(replies) == 1
    assert "needs write or admin permission" in replies[0]["body"] and "read" in replies[0]["body"]
    assert pr.STICKY_MARKER not in replies[0]["body"]
    # no check at all: nothing was started, nothing was written
    assert "minify-bot check" not in res.stdout
    assert not (res.run_dir / "results.json").exists()
    assert res.outputs["authorized"] == "false" and "failure-count" not in res.outputs
    assert filed_issues(users) == []
    assert "::error title=minify-bot%3A bad input::/minify refused" in res.stdout
    assert "Bad input" in res.summary
    assert_token_not_leaked(res)


# ------------------------------------------------------------------ (d) malformed /minify


def test_malformed_minify_comment_gets_usage_and_no_run(runner, users):
    payload = pr_comment(users, "walt-token", "/minify --backend")
    number = payload["issue"]["number"]
    res = runner("issue_comment", payload, {"stage": "authorize"})
    assert res.rc == 2
    assert reactions(users, payload) == [(BOT_LOGIN, "confused"), (BOT_LOGIN, "eyes")]
    replies = bot_comments(users, number)
    assert len(replies) == 1
    assert "argument --backend: expected one argument" in replies[0]["body"]
    assert "/minify [--models MODEL" in replies[0]["body"]  # the usage
    assert "minify-bot check" not in res.stdout and not (res.run_dir / "results.json").exists()
    assert not [r for r in users.requests if "/collaborators/" in r.path]  # rejected before any permission call
    assert "malformed /minify command" in res.stderr


def test_help_and_unrelated_comments(runner, users):
    payload = pr_comment(users, "mallory-token", "/minify help")
    res = runner("issue_comment", payload, {"stage": "authorize"})
    assert res.rc == 0
    assert reactions(users, payload) == [(BOT_LOGIN, "eyes")]
    assert "Usage of `/minify`" in bot_comments(users, payload["issue"]["number"])[0]["body"]
    chatter = pr_comment(users, "walt-token", "LGTM", number=payload["issue"]["number"])
    res2 = runner("issue_comment", chatter, {"stage": "authorize"})
    assert res2.rc == 0 and reactions(users, chatter) == []
    assert len(bot_comments(users, payload["issue"]["number"])) == 1


@pytest.mark.parametrize("payload,reason", [
    ("{not json", "is not valid JSON"),
    ("[]", "not a JSON object"),
    (json.dumps({"action": "created", "comment": "x"}), "has no comment or issue object"),
])
def test_malformed_event_payload_exits_2_without_leaking_the_token(runner, payload, reason):
    res = runner("issue_comment", payload, {"stage": "authorize"})
    assert res.rc == 2
    assert reason in res.stderr
    assert "Bad input" in res.summary
    assert res.outputs["exit-code"] == "2"
    assert_token_not_leaked(res)


def test_bad_inputs_exit_2(runner):
    res = runner("schedule", {}, {"fail-on": "sometimes"})
    assert res.rc == 2 and "fail-on" in res.stderr
    res = runner("schedule", {}, {"models": "mlp_relu", "backend": "no_such_backend", "dry-run": "true"})
    assert res.rc == 2, res.stdout + res.stderr
    assert "rejected its input" in res.stderr
    assert "no_such_backend" in res.stdout


# ------------------------------------------------------------------ the three-job /minify workflow


def git_head(path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    for cmd in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "pr head"]):
        subprocess.run(cmd, cwd=path, env=env, check=True, timeout=60)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True,
                          check=True, timeout=60).stdout.strip()


@pytest.mark.slow
def test_split_jobs_authorize_check_report(runner, users, tmp_path):
    ws = tmp_path / "gpu-workspace"
    head = git_head(ws / "pr")
    payload = pr_comment(users, "walt-token", f"/minify --models mlp_relu --config {BUG}", head_sha=head)
    number = payload["issue"]["number"]

    auth = runner("issue_comment", payload, {"stage": "authorize"})
    assert auth.rc == 0, auth.stdout + auth.stderr
    assert auth.outputs["authorized"] == "true" and auth.outputs["sha"] == head
    assert "minify-bot check" not in auth.stdout

    # the GPU job: no token at all, the PR checked out under pr/ at the pinned commit
    check = runner("issue_comment", payload, {
        "stage": "check", "working-directory": "pr", "request": auth.outputs["request"],
        "expected-sha": auth.outputs["sha"], "minify": "false", "fail-on": "never"}, workspace=ws, token="")
    assert check.rc == 0, check.stdout + check.stderr
    assert check.outputs["failure-count"] == "1"
    assert not [c for c in bot_comments(users, number) if pr.STICKY_MARKER in c["body"]]  # it cannot write

    # the artifact, downloaded by the report job
    shards = tmp_path / "download"
    shutil.copytree(check.run_dir, shards / "minify-pr-1")
    report = runner("issue_comment", payload, {
        "stage": "report", "request": auth.outputs["request"], "shards": str(shards),
        "check-result": "success", "fail-on": "never"})
    assert report.rc == 0, report.stdout + report.stderr
    assert reactions(users, payload) == [(BOT_LOGIN, "eyes"), (BOT_LOGIN, "rocket")]
    sticky = [c for c in bot_comments(users, number) if pr.STICKY_MARKER in c["body"]]
    assert len(sticky) == 1 and "| `mlp_relu` |" in sticky[0]["body"] and head[:12] in sticky[0]["body"]
    assert "::group::minify-bot merge" in report.stdout


def test_gpu_job_refuses_a_checkout_that_is_not_the_authorized_commit(runner, users, tmp_path):
    ws = tmp_path / "gpu-workspace"
    git_head(ws / "pr")
    payload = pr_comment(users, "walt-token", "/minify --models mlp_relu", head_sha="b" * 40)
    auth = runner("issue_comment", payload, {"stage": "authorize"})
    assert auth.rc == 0
    check = runner("issue_comment", payload, {
        "stage": "check", "working-directory": "pr", "request": auth.outputs["request"],
        "expected-sha": auth.outputs["sha"]}, workspace=ws, token="")
    assert check.rc == 2
    assert "is not the authorized bbbbbbbbbbbb" in check.stderr
    assert "minify-bot check" not in check.stdout


def test_report_job_rejects_a_tampered_artifact(runner, users, tmp_path):
    payload = pr_comment(users, "walt-token", "/minify --models mlp_relu")
    auth = runner("issue_comment", payload, {"stage": "authorize"})
    shard = tmp_path / "download" / "minify-pr-1"
    shard.mkdir(parents=True)
    (shard / "results.json").write_text(json.dumps({
        "schema": "minify-action/results/v1", "settings": {}, "complete": True,
        "checks": [{"id": "x", "model": "<img src=x onerror=alert(1)>", "backend": "inductor", "mode": "inference",
                    "dtype": "float32", "device": "cpu", "status": "pwned", "failure_class": None}]}))
    report = runner("issue_comment", payload, {
        "stage": "report", "request": auth.outputs["request"], "shards": str(tmp_path / "download"),
        "check-result": "success"})
    assert report.rc == 2
    assert reactions(users, payload) == [(BOT_LOGIN, "confused"), (BOT_LOGIN, "eyes")]
    sticky = [c for c in bot_comments(users, payload["issue"]["number"]) if pr.STICKY_MARKER in c["body"]]
    assert len(sticky) == 1 and "the results artifact was rejected" in sticky[0]["body"]
    assert "<img" not in sticky[0]["body"]


# ------------------------------------------------------------------ shards


@pytest.mark.slow
def test_two_shards_merged_and_reported_file_each_failure_once(runner, ghstub, tmp_path):
    models = "conv_bn,gru,mlp_relu,resblock"  # sorted: shard 1 = conv_bn, mlp_relu; shard 2 = gru, resblock
    download = tmp_path / "download"
    for i in (1, 2):
        res = runner("schedule", {}, {"stage": "check", "models": models, "config": BUG, "shard": f"{i}/2",
                                      "minify": "false", "fail-on": "never"}, token="")
        assert res.rc == 0, res.stdout + res.stderr
        assert "(shard " in res.summary
        shutil.copytree(res.run_dir, download / f"minify-shard-{i}")
    failing = set()
    for i in (1, 2):
        rows = json.loads((download / f"minify-shard-{i}" / "results.json").read_text())["checks"]
        failing |= {r["id"] for r in rows if r["failure_class"]}
    assert len(failing) == 3  # gru has no relu

    report = runner("schedule", {}, {"stage": "report", "shards": str(download)})
    assert report.rc == 1, report.stdout + report.stderr
    assert report.outputs["failure-count"] == "3"
    actions = json.loads((report.run_dir / "report.json").read_text())["actions"]
    created = [a for a in actions if a["action"] == "created"]
    fingerprints = [a["fingerprint"] for a in created]
    assert len(fingerprints) == len(set(fingerprints))  # no fingerprint filed twice
    covered = [cid for a in created for cid in a["checks"]]
    assert sorted(covered) == sorted(failing)  # every failure in exactly one issue
    issues = filed_issues(ghstub)
    assert len(issues) == len(created)
    assert sorted(report.outputs["issue-urls"].splitlines()) == sorted(i["html_url"] for i in issues)

    # the report job re-run (same artifacts): nothing new is filed
    again = runner("schedule", {}, {"stage": "report", "shards": str(download)})
    assert again.rc == 1, again.stdout + again.stderr
    assert len(filed_issues(ghstub)) == len(issues)
    actions = json.loads((again.run_dir / "report.json").read_text())["actions"]
    assert not [a for a in actions if a["action"] == "created"]


# ------------------------------------------------------------------ pull_request, file ownership


@pytest.mark.slow
def test_pull_request_event_answers_in_the_pull_request_not_the_tracker(runner, users, tmp_path):
    number = users.add_pull(None, head_sha="d" * 40, author="walt")
    payload = {"action": "synchronize", "number": number, "repository": {"full_name": REPO},
               "pull_request": {"number": number, "head": {"sha": "d" * 40, "repo": {"full_name": REPO}},
                                "base": {"repo": {"full_name": REPO}}}}  # not a fork
    check = runner("pull_request", payload, {"stage": "check", "models": "gru", "minify": "false"})
    assert check.rc == 0, check.stdout + check.stderr
    res = runner("pull_request", payload, {"stage": "report",
                                           "shards": str(as_artifacts(check.run_dir, tmp_path / "artifacts"))})
    assert res.rc == 0, res.stdout + res.stderr
    sticky = bot_comments(users, number)
    assert len(sticky) == 1 and pr.STICKY_MARKER in sticky[0]["body"] and "| `gru` |" in sticky[0]["body"]
    assert "`dddddddddddd`" in sticky[0]["body"]
    assert filed_issues(users) == []
    assert res.outputs["failure-count"] == "0" and res.outputs["issue-urls"] == ""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root, like a job container")
def test_files_written_as_root_are_handed_to_the_workspace_owner(runner, tmp_path):
    ws = tmp_path / "owned-workspace"
    ws.mkdir()
    os.chown(ws, 4321, 4321)  # the runner user on the host
    res = runner("schedule", {}, {"stage": "check", "models": "gru", "minify": "false"}, workspace=ws, token="")
    assert res.rc == 0, res.stdout + res.stderr
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [res.run_dir, *res.run_dir.rglob("*")]}
    assert owners == {(4321, 4321)}
    assert not any(ws.iterdir())
