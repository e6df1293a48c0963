"""bot/bisect.py and `minify-bot bisect`: which torch build introduced or fixed a bug.

The search is checked over every boundary position and skip pattern (its verdicts come from a
table); the command end to end runs a real repro in real builds: the project's own interpreter, the
same interpreter whose build environment injects inductor's relu bug (a sitecustomize on the
build's PYTHONPATH), and an interpreter without torch, which must be skipped."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bot.bisect import BAD, GOOD, SKIP, Answer, Boundary, Verdict, bound, search, summary_lines
from bot.builds import Build
from tests.ghstub.rundir import failing_run


def _table(verdicts: str):
    """verdict_of over builds named b0..bn-1 whose verdicts are the letters of ``verdicts``
    (g, b, s), counting how often each build is asked."""
    asked: list[int] = []
    words = {"g": GOOD, "b": BAD, "s": SKIP}

    def verdict_of(i):
        asked.append(i)
        return Verdict(Build("python", f"/b{i}", f"b{i}"), words[verdicts[i]], git=f"{i:07x}")

    return verdict_of, asked


def _cases(n):
    """Every monotone history of n builds: introduced at k (good before, bad from k) and fixed at k."""
    for k in range(1, n):
        yield "g" * k + "b" * (n - k), (k - 1, k)
        yield "b" * k + "g" * (n - k), (k - 1, k)


@pytest.mark.parametrize("n", [3, 4, 5, 8, 9, 16, 33])
@pytest.mark.parametrize("anchor", ["newest", "matched"])
def test_the_boundary_is_found_within_log2_plus_one_verdicts_per_side(n, anchor):
    for history, want in _cases(n):
        verdict_of, asked = _table(history)
        a = None
        if anchor == "matched":  # the build the failure was seen on
            a = max(i for i, c in enumerate(history) if c == "b")
        seen, found_anchor, pairs, runs = search(n, verdict_of, a)
        assert [(lo, hi) for lo, hi, _ in pairs] == [want], history
        assert runs["anchor"] == 1 and len(asked) == len(set(asked)), history
        assert runs["before"] <= bound(n) and runs["after"] <= bound(n), (history, runs)
        assert bound(n) == math.ceil(math.log2(n)) + 1


def test_a_history_that_changes_on_both_sides_of_the_anchor_gives_both_boundaries():
    verdict_of, _ = _table("ggbbbgg")  # introduced between b1 and b2, fixed between b4 and b5
    seen, a, pairs, runs = search(7, verdict_of, anchor=3)
    assert [(lo, hi) for lo, hi, _ in pairs] == [(1, 2), (4, 5)]
    assert runs["before"] <= bound(7) and runs["after"] <= bound(7)


def test_builds_that_cannot_run_are_skipped_not_judged():
    verdict_of, asked = _table("gssbb")
    seen, a, pairs, _ = search(5, verdict_of)
    assert [(lo, hi) for lo, hi, _ in pairs] == [(0, 3)]  # the two unrunnable builds lie between
    assert {i for i, v in seen.items() if v.verdict == SKIP} == {1, 2}


def test_an_unrunnable_newest_build_moves_the_anchor_inward():
    verdict_of, _ = _table("gbbs")
    seen, a, pairs, _ = search(4, verdict_of)
    assert a == 2 and [(lo, hi) for lo, hi, _ in pairs] == [(0, 1)]


def test_no_boundary_when_every_runnable_build_agrees():
    verdict_of, _ = _table("bsbb")
    seen, a, pairs, runs = search(4, verdict_of)
    assert pairs == [] and runs["before"] == 1  # the far end alone settles the side
    builds = [seen.get(i, Verdict(Build("python", f"/b{i}", f"b{i}"), SKIP)).build for i in range(4)]
    answer = Answer(builds, seen, a, [], runs)
    # b1 was never run: between two bad builds of one side it counts as bad, like git bisect
    assert 1 not in seen and answer.present_in() == ["b0", "b1", "b2", "b3"] and answer.absent_in() == []
    assert any("present in all of b0, b1, b2, b3" in line for line in summary_lines(answer))


def test_nightlies_name_the_commit_range_between_the_two_builds():
    before = Verdict(Build("pip", "torch==2.16.0.dev20261119", "nightly-1119"), GOOD, git="1" * 40)
    after = Verdict(Build("pip", "torch==2.16.0.dev20261120", "nightly-1120"), BAD, git="2" * 40)
    words = Boundary("introduced", before, after).words()
    assert "nightly-1119 (last good) and nightly-1120 (first bad)" in words
    assert f"https://github.com/pytorch/pytorch/compare/{'1' * 40}...{'2' * 40}" in words


# ---------------------------------------------------------------------------- end to end

SITECUSTOMIZE = """import torch._inductor.config as _config
_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
"""

# a repro as minify writes it (torch's run_repro, accuracy mode), without the injected config: the
# build's own environment decides whether relu is miscompiled
REPRO = """import torch
from torch._dynamo.repro.after_aot import run_repro


class Repro(torch.nn.Module):
    def forward(self, arg0_1):
        relu = torch.ops.aten.relu.default(arg0_1)
        return (relu,)


def load_args(reader):
    buf0 = reader.storage(None, 2048)
    reader.tensor(buf0, (8, 64), is_leaf=True)
load_args._version = 0

if __name__ == '__main__':
    with torch.no_grad():
        run_repro(Repro(), load_args, accuracy='accuracy', command='run', save_dir=None, tracing_mode='real',
                  check_str=None, is_inference=False)
"""


def _no_torch_python(root: Path) -> str:
    """An interpreter without torch: a bare venv of the base Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    return str(root / "bin" / "python")


@pytest.mark.slow
def test_bisect_over_local_builds_finds_where_the_bug_came_in_and_the_issue_says_so(tmp_path, bot):
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(SITECUSTOMIZE)
    run = failing_run(tmp_path / "run")
    fdir = next((run / "failures").iterdir())
    (fdir / "repro.py").write_text(REPRO)
    rec = json.loads((fdir / "failure.json").read_text())
    rec["signature"] = {"failure_class": "accuracy", "stage": "inductor", "device": "cpu", "dtype": "float32",
                        "culprit_ops": ["aten.relu.default"], "verified": True}  # as minify writes it
    (fdir / "failure.json").write_text(json.dumps(rec))
    builds = [{"name": "clean", "python": sys.executable},
              {"name": "no-torch", "python": _no_torch_python(tmp_path / "bare")},
              {"name": "bug-1", "python": sys.executable, "env": {"PYTHONPATH": str(inject)}},
              {"name": "bug-2", "python": sys.executable, "env": {"PYTHONPATH": str(inject)}}]
    (tmp_path / "builds.yaml").write_text(json.dumps(builds))
    res = bot("bisect", run, "--builds-file", tmp_path / "builds.yaml", "--verify-runs", "1", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "introduced between clean (last good) and bug-1 (first bad)" in res.stdout, res.stdout
    assert "no-torch: skip" in res.stdout
    rec = json.loads((fdir / "failure.json").read_text())["builds"]
    assert rec["present_in"] == ["bug-1", "bug-2"] and rec["absent_in"] == ["clean"]
    assert rec["skipped"] == ["no-torch"]
    assert rec["runs"]["before"] <= bound(4) and rec["runs"]["after"] <= bound(4)
    # the answer reaches the issue
    res = bot("report", "--out", run, "--issues-dir", tmp_path / "issues", "--no-dashboard")
    assert res.returncode in (0, 1), res.stderr[-2000:]
    [body] = [p.read_text().replace("\\", "") for p in (tmp_path / "issues").glob("*.md")]
    assert "### Torch builds" in body
    import torch

    v = torch.__version__
    assert (f"Present in: torch 2.13.0+cpu, bug-1 (torch {v}), bug-2 (torch {v}) · not present in: clean (torch {v})"
            " · could not run in: no-torch") in body
    assert "introduced between clean and bug-1" in body


def test_the_search_starts_at_the_build_the_failure_was_seen_on():
    from bot.bisect import _local_anchor
    from bot.builds import parse_build

    builds = [parse_build(t) for t in ("torch==2.13.0", "torch==2.14.0", "torch==2.15.0")]
    assert _local_anchor(builds, {"torch": "2.14.0+cpu"}) == 1
    assert _local_anchor(builds, {"torch": "2.16.0.dev20261120+cpu"}) is None


def test_the_issue_lists_a_build_once_and_names_its_torch_when_the_name_does_not():
    from bot.failure import FailureRecord
    from bot.report.context import builds_context
    from bot.report.state import IssueState

    rows = [{"name": "2.13.0", "verdict": "bad", "torch": "2.13.0+cpu"},
            {"name": "2.14.0", "verdict": "good", "torch": "2.14.0+cu130"},
            {"name": "patched", "verdict": "bad", "torch": "2.13.0+cpu"}]
    failure = FailureRecord.from_json({"id": "x", "builds": {
                          "builds": rows, "present_in": ["2.13.0", "patched"], "absent_in": ["2.14.0"],
                          "boundaries": [{"kind": "fixed", "before": "patched", "after": "2.14.0",
                                          "commits": {"from": "a" * 40, "to": "b" * 40}},
                                         {"kind": "fixed", "before": "<img>", "after": "2.14.0"}]}})
    ctx = builds_context(IssueState(sig="s", torch=["2.13.0+cpu"]), failure)
    assert ctx["present"] == ["torch 2.13.0+cpu", "patched (torch 2.13.0+cpu)"] and ctx["absent"] == ["2.14.0"]
    assert [b["commits"] for b in ctx["boundaries"]] == [f"{'a' * 40}..{'b' * 40}"]  # the hostile name is left out
