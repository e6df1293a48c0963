"""`minify-bot run` and `selftest`: the whole pipeline with real torch, real files, local tracker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"

INJECT = "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"


def _issues(d):
    """Bug issues (the dashboard issue is tested in test_dashboard.py)."""
    recs = [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))]
    return [r for r in recs if "minify-bot-dashboard" not in r["labels"]]


@pytest.mark.slow
def test_run_without_token_files_locally_and_follows_the_bug_lifecycle(tmp_path, bot):
    (tmp_path / "user_models.py").write_text((DATA / "user_models.py").read_text())
    (tmp_path / "models.yaml").write_text("models:\n  relunet: user_models:relu_under_buggy_compiler\n"
                                          "  tanhnet: user_models:good\n")
    out = tmp_path / "out"
    args = ("run", "--out", out, "--suite", "yaml", "--model-file", tmp_path / "models.yaml", "--no-minify")
    buggy = {"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": "", "MINIFY_TEST_COMPILER_BUG": "1"}
    fixed = {**buggy, "MINIFY_TEST_COMPILER_BUG": "0"}

    proc = bot(*args, env=buggy)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"local tracker in {out}/issues/" in proc.stderr
    issues = _issues(out / "issues")
    assert len(issues) == 1 and issues[0]["state"] == "open"
    assert "relunet" in (out / "issues" / f"{issues[0]['number']}.md").read_text()

    bot(*args, env=buggy)                                                      # still failing: updated
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["created"] == 0 and len(_issues(out / "issues")) == 1

    for k in range(2):                                                         # fixed twice: closed
        proc = bot(*args, env=fixed)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (issue,) = _issues(out / "issues")
        assert issue["state"] == ("open" if k == 0 else "closed")
    closing = issue["comments"][-1]["body"]
    assert "relunet" in closing and "reopen" in closing.lower()

    bot(*args, env=buggy)                                                      # back: reopened
    (issue,) = _issues(out / "issues")
    assert issue["state"] == "open"
    assert json.loads((out / "report.json").read_text())["counts"]["reopened"] == 1


@pytest.mark.slow
def test_selftest_passes(bot, tmp_path):
    proc = bot("selftest", "--keep", tmp_path)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "selftest: PASSED" in proc.stderr
    assert len(list((tmp_path / "issues").glob("*.json"))) == 1


@pytest.mark.slow
def test_run_with_a_token_keeps_it_out_of_every_process_model_code_can_read(tmp_path, bot):
    """`minify-bot run --tracker github` with GITHUB_TOKEN: the checked program reads the environment
    block and command line of itself, every ancestor and every process of the run, and leaves a
    daemon that keeps looking while the report (with the token) runs: nothing finds the token, no
    daemon outlives the model-running stages, and the report still files with it."""
    import secrets
    import sys
    import time

    from tests.ghstub.action import probe
    from tests.ghstub.fixtures import REPO, seeded_stub

    token = "ghp_" + secrets.token_hex(18)
    mark = "MINIFY_PROBE_JOB_" + secrets.token_hex(6)
    stub = seeded_stub()
    try:
        stub.add_user("runner-bot", token=token, permission="write", type="Bot")
        out = tmp_path / "probe"
        out.mkdir()
        prog = tmp_path / "probe.py"
        prog.write_text(probe(out, "check", mark))
        proc = bot("run", "--command", f"{sys.executable} {prog}", "--no-minify", "--out", tmp_path / "out",
                   "--tracker", "github", "--repo", REPO, "--api-url", stub.base_url,
                   env={"GITHUB_TOKEN": token, mark: "1"}, timeout=300)
        assert proc.returncode == 1, proc.stderr[-3000:]
        reports = [json.loads(p.read_text()) for p in out.glob("check-*.json")]
        assert reports and all(r["found"] == [] and len(r["ancestors"]) >= 3 for r in reports), reports
        daemon = [json.loads(line) for line in (out / "daemon.jsonl").read_text().splitlines()]
        assert daemon and all(d["found"] == [] for d in daemon)
        time.sleep(0.5)
        assert not [d for d in {x["pid"] for x in daemon} if Path(f"/proc/{d}").exists()
                    and "Z" not in Path(f"/proc/{d}/stat").read_text().split(")")[-1][:3]]  # reaped before report
        assert token not in proc.stdout + proc.stderr
        assert [i["user"]["login"] for i in stub.issues() if "minify-bot-dashboard" not in
                [lb["name"] for lb in i["labels"]]] == ["runner-bot"]
    finally:
        stub.stop()
