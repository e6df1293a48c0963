"""A new bug is never folded into an old issue when the configuration changes (issue 22, acceptance):
a nightly-like run with a config-carried bug A (relu miscompiled), then a run where A's setting is
off and a different config-carried bug B (log1p miscompiled) is on, on the same small model. The
known repro of A still fails (it carries A's config), so reusing it for the second run's failure
would report B as "seen again" on A's issue. Two issues, A's not updated by B."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from bot import fingerprint as fp
from bot import known
from bot.records import CheckRow
from bot.report.state import parse
from bot.tracker.local import LocalTracker

PROGRAM = """\
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 8))
x = torch.randn(4, 8)
def f(x):
    y = m(x)
    return torch.relu(y) + torch.log1p(y.abs())
with torch.no_grad():
    torch.testing.assert_close(torch.compile(f)(x), f(x))
"""
RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"
LOG1P = "inductor.cpp.inject_log1p_bug_TESTING_ONLY=accuracy"


def bug_issues(issues: Path) -> list[dict]:
    return [r for r in LocalTracker(issues).records() if "minify-bot-dashboard" not in r["labels"]]


@pytest.mark.slow
def test_bug_b_after_bug_a_on_the_same_model_is_a_second_issue(workdir, bot):
    (workdir / "prog.py").write_text(PROGRAM)
    issues = workdir / "issues"

    def run(name, config):
        t = time.time()
        p = bot("run", "--out", workdir / name, "--issues-dir", issues, "--command", f"{sys.executable} prog.py",
                "--name", "relu_log1p", "--config", config, "--verify-runs", "1", "--no-bisect", "--budget", "120",
                env={"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": ""}, cwd=workdir)
        assert p.returncode == 1, p.stderr[-4000:]
        (fdir,) = [d for d in (workdir / name / "failures").iterdir() if d.is_dir()]
        rec = json.loads((fdir / "failure.json").read_text())
        print(f"{name}: {time.time() - t:.1f} s, culprit {rec.get('culprit')}, reused {rec['repro']['reused']}")
        return rec, json.loads((workdir / name / "report.json").read_text())

    rec_a, rep_a = run("a", RELU)
    (issue_a,) = bug_issues(issues)
    assert "relu" in issue_a["title"]
    assert fp.parse_marker(issue_a["body"]).get("known")  # A's verified repro is kept for reuse

    rec_b, rep_b = run("b", LOG1P)
    assert rec_b["repro"]["reused"] is None  # A's known repro did not stand in for B
    issues_now = bug_issues(issues)
    assert len(issues_now) == 2
    issue_b = next(i for i in issues_now if i["number"] != issue_a["number"])
    assert "log1p" in issue_b["title"] and "relu" not in issue_b["title"]
    a_after = next(i for i in issues_now if i["number"] == issue_a["number"])
    assert a_after["body"] == issue_a["body"] and a_after["comments"] == []  # A not updated by B
    assert [a["action"] for a in rep_b["actions"] if a.get("issue") == issue_a["number"]] == []

    # the rule that decides it, on the real records: A's known repro would stand in for A's own check,
    # and not for B's, even where B's check is one A was seen on (a program that sets the config itself
    # has the same check key in both runs)
    state = parse(issue_a["body"])
    entry = known.from_state(issue_a["number"], state.known, state.checks)
    assert [d.key for d in entry.record.config.minimal] == [RELU.split("=")[0]]
    row_a, row_b = CheckRow.from_json(rec_a["check"]), CheckRow.from_json(rec_b["check"])
    assert known.match([entry], row_a) is entry
    entry.checks.append(fp.check_key(row_b))
    assert known.match([entry], row_b) is None
