"""One issue per bug, on real failures: the grouping corpus and the README's injected-bug run.

The corpus (tests/data/corpus_models.py): 13 tiny user models, 5 distinct injected inductor bugs
(relu accuracy / compile_error / runtime_error, log1p accuracy / compile_error) on tensors of rank 2,
3 and 4. Each model's bug comes from its own code (its factory sets the injection), never from the
bot's --config, which is the same for every check and both runs, as in a nightly.

Run 1 checks and minifies all 13 (one `check`, one `minify`, real compiles, real subprocesses).
Run 2 checks and minifies the two `switch_*` models again after "relu was fixed and log1p broke":
their bug changes (relu accuracy -> log1p accuracy, relu compile error -> log1p compile error).
Every run is then reported twice (the second time under another run id: the same state seen
again), into one local issue tracker.

Cost (2 cores): the corpus ~2.5-3 min, the README run ~80 s. Minify verifies each repro in 1 fresh
process (--verify-runs 1; the grouping does not need 3) and skips the stage ablation in the corpus
(--no-localize), with the bisector on (the default, as a user runs it).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from bot import fingerprint as fp
from bot import rundir
from bot.tracker.local import LocalTracker

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data"

# The expected grouping, written down: bug -> the models it affects, per run.
RUN1 = {
    "relu/accuracy": {"acc_relu_mlp", "acc_relu_seq", "acc_relu_conv", "switch_acc"},
    "log1p/accuracy": {"acc_log1p_mlp", "acc_log1p_conv"},
    "relu/compile_error": {"ce_relu_mlp", "ce_relu_conv", "switch_ce"},
    "relu/runtime_error": {"rt_relu_mlp", "rt_relu_seq"},
    "log1p/compile_error": {"ce_log1p_mlp", "ce_log1p_seq"},
}
RUN2 = {"log1p/accuracy": {"switch_acc"}, "log1p/compile_error": {"switch_ce"}}
MODELS = sorted(set().union(*RUN1.values()))
MINIFY = ("--verify-runs", "1", "--budget", "120")
# the corpus skips the eager/aot_eager ablation too (the stage is then the check's backend, inductor)
CORPUS_MINIFY = (*MINIFY, "--no-localize")


def bug_of(model: str, run: int) -> str:
    table = RUN1 if run == 1 else RUN2
    return next(bug for bug, models in table.items() if model in models)


def _bug_records(issues_dir):
    """The bug issues of a local tracker (the dashboard issue, kept alongside them, is not a bug)."""
    from bot.report import dashboard

    return [r for r in LocalTracker(issues_dir).records() if dashboard.LABEL not in (r.get("labels") or [])]


def _report(bot, run, issues, *extra):
    p = bot("report", "--out", run, "--issues-dir", issues, *extra)
    assert p.returncode in (0, 1), p.stderr[-3000:]
    return rundir.read_report(run).to_json()


@pytest.fixture(scope="module")
def corpus(workdir, bot):
    shutil.copy(DATA / "corpus_models.py", workdir / "corpus_models.py")
    (workdir / "models.yaml").write_text(
        "models:\n" + "".join(f"  {m}: corpus_models:{m}\n" for m in MODELS))
    issues = workdir / "issues"
    timings, reports = {}, {}
    for run, models, phase in (("run1", MODELS, "1"), ("run2", ["switch_acc", "switch_ce"], "2")):
        out = workdir / run
        t = time.perf_counter()
        p = bot("check", "--suite", "yaml", "--model-file", workdir / "models.yaml", "--models", ",".join(models),
                "--out", out, "--timeout", "300", "--reruns", "0", env={"CORPUS_PHASE": phase})
        assert p.returncode == 1, p.stderr[-3000:]
        p = bot("minify", "--out", out, *CORPUS_MINIFY, env={"CORPUS_PHASE": phase})
        assert p.returncode == 1, p.stderr[-4000:]
        timings[run] = round(time.perf_counter() - t, 1)
        reports[run] = _report(bot, out, issues)
        reports[run + "-again"] = _report(bot, out, issues, "--run-id", f"{run}-seen-again")
        reports[run + "-issues"] = _bug_records(issues)
    print(f"\ncorpus timings (check + minify): {timings}")
    return workdir, reports


def _affected(issue) -> set[str]:
    return {row["model"] for row in fp.parse_marker(issue["body"])["affected"]}


def _bugs_of_issue(issue, runs=(1, 2)) -> set[str]:
    """The bugs of the failures an issue lists (a model listed after run 2 may carry either)."""
    out = set()
    for m in _affected(issue):
        out |= {bug_of(m, r) for r in runs if m in set().union(*(RUN1 if r == 1 else RUN2).values())}
    return out


def test_every_failure_was_minified_and_verified(corpus):
    workdir, _ = corpus
    for run, models in (("run1", MODELS), ("run2", ["switch_acc", "switch_ce"])):
        rows = rundir.read_results(workdir / run).checks
        assert sorted(row.model for row in rows) == sorted(models)   # every model checked, once
        for row in rows:
            assert row.failure_class, row
            rec = rundir.read_failure(workdir / run, row.id)
            assert rec.repro.status == "minimized", (row.id, rec.repro.reason)
            assert rec.signature.verified and rec.signature.failure_class == rec.failure_class
            assert row.config == {}  # the bug is the model's own, not the bot's --config
            # the verified signature and the rules for older records (no "signature") agree
            older = rec.replace(signature=None)
            assert fp.compute(row, rec).primary == fp.compute(row, older).primary, row.id


def test_run1_files_one_issue_per_bug_listing_every_affected_model(corpus):
    _, reports = corpus
    issues = reports["run1-issues"]
    assert len(issues) == len(RUN1) == 5
    assert reports["run1"]["counts"]["created"] == 5 and reports["run1"]["counts"]["unchanged"] == 0
    by_models = sorted(sorted(_affected(i)) for i in issues)
    assert by_models == sorted(sorted(ms) for ms in RUN1.values())
    for issue in issues:
        assert len(_bugs_of_issue(issue, runs=(1,))) == 1, (issue["title"], _affected(issue))


def test_relu_and_log1p_compile_errors_are_two_issues_with_their_own_words(corpus):
    _, reports = corpus
    ce = {bug_of(next(iter(_affected(i))), 1): i for i in reports["run1-issues"]
          if "compile_error" in bug_of(next(iter(_affected(i))), 1)}
    relu, log1p = ce["relu/compile_error"], ce["log1p/compile_error"]
    assert relu["number"] != log1p["number"]
    assert "compile error in aten.relu" in relu["title"] and "compile error in aten.log1p" in log1p["title"]
    relu_state, log1p_state = fp.parse_marker(relu["body"]), fp.parse_marker(log1p["body"])
    assert not set(relu_state["sigs"]) & set(log1p_state["sigs"])


def test_seeing_the_same_state_again_files_and_comments_nothing(corpus):
    _, reports = corpus
    for again in ("run1-again", "run2-again"):
        counts = reports[again]["counts"]
        assert counts["created"] == 0 and counts["commented"] == 0, (again, counts)
        assert counts["updated"] + counts["unchanged"] >= 1


def test_run2_a_changed_bug_joins_its_own_issue_and_never_the_old_one(corpus):
    _, reports = corpus
    issues = reports["run2-issues"]
    assert len(issues) == 5 and reports["run2"]["counts"]["created"] == 0
    touched = {a["issue"]: a for a in reports["run2"]["actions"] if a["issue"]}
    # an issue's bug: that of a model listed in it whose bug never changed
    by_bug = {bug_of(sorted(_affected(i) - set(RUN2["log1p/accuracy"] | RUN2["log1p/compile_error"]))[0], 1): i
              for i in issues}
    assert set(by_bug) == set(RUN1)
    # the log1p issues now list the switched models, each with one comment: "newly affected"
    for bug, model in (("log1p/accuracy", "switch_acc"), ("log1p/compile_error", "switch_ce")):
        issue = by_bug[bug]
        assert model in _affected(issue)
        assert touched[issue["number"]]["action"] == "updated" and touched[issue["number"]]["commented"]
        comment = issue["comments"][-1]["body"]
        assert "newly affected" in comment and (model in comment or model.replace("_", "\\_") in comment)
    # the relu issues were not touched by run 2 (their repro, title and state are relu's), and are
    # not counted as passing: the switched models still fail, with another bug
    for bug in ("relu/accuracy", "relu/compile_error"):
        issue = by_bug[bug]
        assert issue["number"] not in touched and issue["state"] == "open" and issue["comments"] == []
        assert "relu" in issue["body"] and "log1p" not in issue["title"]
    assert len(issues) == len(set(RUN1) | set(RUN2))  # issues == distinct bugs over both runs


# --------------------------------------------------------------------------- the README's run

ZOO_RELU = {"conv_bn", "resblock", "mlp_relu", "transformer"}


@pytest.fixture(scope="module")
def readme_run(workdir, bot):
    out = workdir / "readme"
    t = time.perf_counter()
    p = bot("run", "--out", out, "--config", "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy", *MINIFY,
            env={"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": ""})
    assert p.returncode == 1, p.stderr[-4000:]
    print(f"\nREADME run (check + minify + report): {time.perf_counter() - t:.1f} s")
    first = rundir.read_report(out).to_json()
    issues = _bug_records(out / "issues")
    again = _report(bot, out, out / "issues", "--run-id", "readme-seen-again")
    return out, first, issues, again, _bug_records(out / "issues")


def test_readme_injected_bug_run_files_one_issue_listing_all_four_relu_models(readme_run):
    out, first, issues, again, after = readme_run
    failing = {r.model for r in rundir.read_results(out).checks if r.failure_class}
    assert failing == ZOO_RELU
    assert len(issues) == 1 and first["counts"]["created"] == 1 and first["counts"]["unchanged"] == 0
    assert _affected(issues[0]) == ZOO_RELU
    assert again["counts"]["created"] == 0 and again["counts"]["commented"] == 0
    assert len(after) == 1 and after[0]["comments"] == []
