"""`minify-bot run` and `selftest`: the whole pipeline with real torch, real files, local tracker."""

from __future__ import annotations

import json

INJECT = "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"


def _issues(d):
    return [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))]


def test_run_without_token_files_locally_and_follows_the_bug_lifecycle(tmp_path, bot):
    out = tmp_path / "out"
    env = {"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": ""}
    models = ("--models", "mlp_relu,mlp_gelu", "--no-minify")

    proc = bot("run", "--out", out, *models, "--config", INJECT, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"local tracker in {out}/issues/" in proc.stderr
    issues = _issues(out / "issues")
    assert len(issues) == 1 and issues[0]["state"] == "open"
    assert "mlp_relu" in (out / "issues" / f"{issues[0]['number']}.md").read_text()

    proc = bot("run", "--out", out, *models, "--config", INJECT, env=env)       # still failing: updated
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["created"] == 0 and len(_issues(out / "issues")) == 1

    for _ in range(2):                                                         # fixed twice: closed
        proc = bot("run", "--out", out, *models, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
    (issue,) = _issues(out / "issues")
    assert issue["state"] == "closed"
    assert any("pass" in c["body"].lower() for c in issue.get("comments", [])), issue.get("comments")

    proc = bot("run", "--out", out, *models, "--config", INJECT, env=env)       # back: reopened
    (issue,) = _issues(out / "issues")
    assert issue["state"] == "open"
    assert json.loads((out / "report.json").read_text())["counts"]["reopened"] == 1


def test_selftest_passes(bot, tmp_path):
    proc = bot("selftest", "--keep", tmp_path)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "selftest: PASSED" in proc.stderr
    assert len(list((tmp_path / "issues").glob("*.json"))) == 1
