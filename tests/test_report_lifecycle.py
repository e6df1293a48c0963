"""The issue lifecycle through `minify-bot report`, on the local tracker and on GitHub (real PyGithub
over HTTP to the GitHub stand-in): the same command, the same issues."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable

import pytest

from bot import fingerprint as fp
from bot.cli import main
from bot.tracker.base import Tracker
from bot.tracker.github import GitHubTracker
from bot.tracker.local import LocalTracker
from tests.ghstub.fixtures import BOT_TOKEN, REPO, seeded_stub
from tests.ghstub.rundir import check_row, failing_run, failure_record, passing_run, record_of, row_of, write_run


def report(run, issues, *extra) -> int:
    return main(["report", "--out", str(run), "--issues-dir", str(issues), *extra])


def records(issues):
    """The bug issues (the dashboard issue, also kept by `report`, is tested in test_dashboard.py)."""
    return [r for r in LocalTracker(issues).records() if "minify-bot-dashboard" not in r["labels"]]


@dataclasses.dataclass
class Where:
    """Where `minify-bot report` files: the command for a run directory, the bug issues it left (as
    the local tracker's records: title, body, state, labels, comments), a tracker onto the same
    issues, and everything stored (to see that nothing was written)."""
    report: Callable[..., int]
    records: Callable[[], list[dict]]
    tracker: Callable[[], Tracker]
    stored: Callable[[], object]


@pytest.fixture(params=["local", "github"])
def where(request, tmp_path, monkeypatch):
    if request.param == "local":
        issues = tmp_path / "issues"
        yield Where(lambda run, *extra: report(run, issues, *extra), lambda: records(issues),
                    lambda: LocalTracker(issues), lambda: LocalTracker(issues).records())
        return
    stub = seeded_stub()
    monkeypatch.setenv("GITHUB_TOKEN", BOT_TOKEN)

    def gh_records():
        return [{"number": i["number"], "title": i["title"], "body": i["body"], "state": i["state"],
                 "labels": [lb["name"] for lb in i["labels"]],
                 "comments": [{"body": c["body"]} for c in stub.comments(number=i["number"])]}
                for i in stub.issues() if "minify-bot-dashboard" not in {lb["name"] for lb in i["labels"]}]

    try:
        yield Where(lambda run, *extra: main(["report", "--out", str(run), "--tracker", "github", "--repo", REPO,
                                              "--api-url", stub.base_url, *extra]),
                    gh_records, lambda: GitHubTracker(REPO, BOT_TOKEN, stub.base_url),
                    lambda: (stub.issues(), stub.comments(), len(stub.writes())))
    finally:
        stub.stop()


def test_same_run_twice_creates_nothing_the_second_time(where, tmp_path):
    run = failing_run(tmp_path / "run")
    assert where.report(run) == 0
    first = json.loads((run / "report.json").read_text())
    assert first["counts"]["created"] == 1
    before = where.stored()
    assert where.report(run) == 0
    second = json.loads((run / "report.json").read_text())
    assert second["counts"]["created"] == 0 and second["counts"]["commented"] == 0
    assert where.stored() == before  # nothing was written at all


def test_file_update_close_after_two_passes_then_reopen(where, tmp_path):
    where.report(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"))
    [rec] = where.records()
    assert rec["state"] == "open"
    # a first sighting: labelled new, never regression (nothing says the check ever passed)
    assert {"minify-bot", "accuracy", "inductor", "new"} <= set(rec["labels"]) and "regression" not in rec["labels"]
    # the bug is still there: the body is updated, nobody is pinged (nothing new happened)
    where.report(failing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z"))
    [rec] = where.records()
    assert fp.parse_marker(rec["body"])["occurrences"] == 2 and rec["comments"] == []
    # two passing runs close it, with the evidence
    where.report(passing_run(tmp_path / "r3", started="2026-11-03T00:00:00Z"))
    assert where.records()[0]["state"] == "open"
    where.report(passing_run(tmp_path / "r4", started="2026-11-04T00:00:00Z"))
    [rec] = where.records()
    assert rec["state"] == "closed" and len(rec["comments"]) == 1
    assert "2 consecutive runs" in rec["comments"][0]["body"] and "mlp\\_relu" in rec["comments"][0]["body"]
    # the bug comes back: reopened with a comment, still one issue
    where.report(failing_run(tmp_path / "r5", started="2026-11-05T00:00:00Z"))
    [rec] = where.records()
    assert rec["state"] == "open" and len(rec["comments"]) == 2
    assert rec["comments"][1]["body"].startswith("Reopening")
    # its check passed in the runs before: now it is a regression, no longer new
    assert "regression" in rec["labels"] and "new" not in rec["labels"]


def test_a_passing_streak_is_broken_by_a_failure(where, tmp_path):
    where.report(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"))
    where.report(passing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z"))
    where.report(failing_run(tmp_path / "r3", started="2026-11-03T00:00:00Z"))
    where.report(passing_run(tmp_path / "r4", started="2026-11-04T00:00:00Z"))
    assert where.records()[0]["state"] == "open"


def test_new_model_and_new_torch_are_one_comment(where, tmp_path):
    where.report(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"))
    a, b = check_row("mlp_relu"), check_row("convnet")
    write_run(tmp_path / "r2", [a, b], {a["id"]: failure_record(a, torch="2.14.0"), b["id"]: failure_record(b)},
              started="2026-11-02T00:00:00Z")
    where.report(tmp_path / "r2")
    [rec] = where.records()
    assert len(rec["comments"]) == 1
    body = rec["comments"][0]["body"]
    assert "newly affected: convnet" in body and "new torch version: 2.14.0" in body
    assert {r["model"] for r in fp.parse_marker(rec["body"])["affected"]} == {"mlp_relu", "convnet"}


def test_flaky_failure_is_labelled_flaky_not_regression_and_never_auto_closed(where, tmp_path):
    where.report(failing_run(tmp_path / "r1", flaky=True, started="2026-11-01T00:00:00Z"))
    [rec] = where.records()
    assert "flaky" in rec["labels"] and "regression" not in rec["labels"]
    for k in range(3):
        where.report(passing_run(tmp_path / f"p{k}", started=f"2026-11-0{k + 2}T00:00:00Z"))
    assert where.records()[0]["state"] == "open"


def test_a_flaky_failure_is_not_filed_with_no_file_flaky(where, tmp_path):
    run = failing_run(tmp_path / "r9", flaky=True, started="2026-11-09T00:00:00Z")
    assert where.report(run, "--no-file-flaky") == 0
    assert where.records() == []
    assert json.loads((run / "report.json").read_text())["counts"]["created"] == 0


def _program_row(name: str, **facts) -> dict:
    exit_error = {"type": "ExitCode", "message": "command exited with code 1"}
    row = check_row(name, status="fail_to_run", failure_class="runtime_error", config={}, error=exit_error)
    return dict(row, spec={"source": "command", "command": f"python {name}.py", "cwd": "."}, **facts)


def test_a_model_that_cannot_be_set_up_or_fails_in_eager_is_not_filed_as_a_compiler_bug(where, tmp_path):
    """A missing package, a model that fails without the compiler, a program that fails with
    torch.compile taken out (localize's stage "eager") or that compiled nothing with it (a broken
    script, or one that compiles ahead of time) is no torch.compile bug: not filed (and never
    offered an upstream report); report.json says why. A compiler failure of the same run, a
    program's included, is filed as usual."""
    err = {"type": "ModuleNotFoundError", "message": "No module named 'timm'"}
    setup = check_row("timm_model", status="model_fail_to_load", failure_class="setup_error", error=err)
    eager = check_row("flaky_model", status="eager_two_runs_differ", failure_class="eager_error",
                      error={"type": "EagerNondeterminism", "message": "two eager runs differ"})
    without = _program_row("script_bug", compiled_graphs=2, compile_frames=2)
    nothing = _program_row("aoti_serve", compiled_graphs=0, compile_frames=0)
    compiled = _program_row("nightly", compiled_graphs=1, compile_frames=1)
    # an error raised in inductor before dynamo started a frame (or in a process the hook missed)
    uncounted = dict(_program_row("import_regression", compiled_graphs=0, compile_frames=0),
                     error={"type": "ImportError", "message": "cannot import name 'x'",
                            "traceback": '  File "/venv/torch/_inductor/compile_fx.py", line 3, in <module>'})
    bug = check_row("mlp_relu")
    run = write_run(tmp_path / "run", [setup, eager, without, nothing, compiled, uncounted, bug],
                    {bug["id"]: failure_record(bug), without["id"]: failure_record(without, stage="eager"),
                     nothing["id"]: failure_record(nothing, stage=None, repro_status="none"),
                     compiled["id"]: failure_record(compiled, repro_status="not_reproduced")})
    where.report(run)
    bodies = " ".join(r["body"] for r in where.records())
    assert "mlp\\_relu" in bodies and "nightly" in bodies and "import\\_regression" in bodies
    assert "timm" not in bodies and "aoti" not in bodies
    rep = json.loads((run / "report.json").read_text())
    skipped = {c: a["reason"] for a in rep["actions"] if a["action"] == "skipped" for c in a["checks"]}
    assert skipped == {setup["id"]: "the model or program could not be set up: not a torch.compile failure",
                       eager["id"]: "the model fails or varies in eager: not a torch.compile failure",
                       without["id"]: "the program fails without torch.compile: not a torch.compile failure",
                       nothing["id"]: "the program compiled no graph with torch.compile (an ahead-of-time compile is "
                                      "not captured): not a torch.compile failure"}, \
        rep["actions"]
    assert rep["counts"]["created"] == 3


def test_an_issue_filed_for_a_setup_failure_before_is_not_reopened_by_it(where, tmp_path, monkeypatch):
    """An issue an older version filed for a setup failure and that was closed since: the same
    failure does not reopen it (an open one would still be kept current)."""
    from bot.report import lifecycle

    err = {"type": "ModuleNotFoundError", "message": "No module named 'timm'"}
    setup = check_row("timm_model", status="model_fail_to_load", failure_class="setup_error", error=err)
    with monkeypatch.context() as m:   # as the older version did: filed
        m.setattr(lifecycle, "not_compiler", lambda group: None)
        where.report(write_run(tmp_path / "r1", [setup], {}, started="2026-11-01T00:00:00Z"))
    [rec] = where.records()
    where.tracker().edit_issue(rec["number"], state="closed")
    run = write_run(tmp_path / "r2", [setup], {}, started="2026-11-02T00:00:00Z")
    where.report(run)
    assert where.records()[0]["state"] == "closed"
    rep = json.loads((run / "report.json").read_text())
    assert [a["reason"] for a in rep["actions"] if a["checks"] == [setup["id"]]] == [
        "the model or program could not be set up: not a torch.compile failure; not reopened"], rep["actions"]


def test_cap_on_new_issues_lists_the_rest(where, tmp_path):
    checks = [check_row(f"m{k}") for k in range(4)]
    graphs = ["aten.relu.default", "aten.sigmoid.default", "aten.tanh.default", "aten.exp.default"]
    fails = {c["id"]: failure_record(c, graph=[{"op": g, "dtypes": ["float32"], "ranks": [2]}])
             for c, g in zip(checks, graphs)}
    run = write_run(tmp_path / "run", checks, fails)
    where.report(run, "--max-new", "2")
    assert len(where.records()) == 2
    rep = json.loads((run / "report.json").read_text())
    assert rep["counts"]["capped"] == 2
    summary = (run / "summary.md").read_text()
    assert "Not filed this run" in summary and "m3" in summary


def test_two_models_with_the_same_minimized_graph_share_one_issue(where, tmp_path):
    a, b = check_row("mlp_relu"), check_row("convnet")
    run = write_run(tmp_path / "run", [a, b], {a["id"]: failure_record(a), b["id"]: failure_record(b)})
    where.report(run)
    [rec] = where.records()
    assert "convnet" in rec["body"] and "mlp\\_relu" in rec["body"]


@pytest.mark.parametrize("breakage", ["not json", "wrong schema", "newer major", "checks not a list", "bad failure"])
def test_bad_input_exits_2_and_files_nothing(tmp_path, breakage, capsys):
    run = failing_run(tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    if breakage == "not json":
        (run / "results.json").write_text("{oops")
    elif breakage == "wrong schema":
        results["schema"] = "minify-action/failure/v1"
        (run / "results.json").write_text(json.dumps(results))
    elif breakage == "newer major":
        results["schema"] = "minify-action/results/v2"
        (run / "results.json").write_text(json.dumps(results))
    elif breakage == "checks not a list":
        results["checks"] = {"a": 1}
        (run / "results.json").write_text(json.dumps(results))
    else:
        next((run / "failures").glob("*/failure.json")).write_text('{"schema": "minify-action/failure/v9"}')
    assert report(run, tmp_path / "issues") == 2
    assert records(tmp_path / "issues") == []
    assert "error" in capsys.readouterr().err


def test_dry_run_uses_a_local_directory_and_needs_no_token(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    run = failing_run(tmp_path / "run")
    assert main(["report", "--out", str(run), "--tracker", "github", "--dry-run"]) == 0
    assert len(records(run / "issues-dry-run")) == 1
    assert json.loads((run / "report.json").read_text())["dry_run"] is True
    assert main(["report", "--out", str(run), "--tracker", "github"]) == 2  # no token: usage error


# --------------------------------------------------------------------------- one issue per bug (v2)

def _rank(model, rank, **kw):
    c = check_row(model)
    g = [{"op": "aten.view.default", "dtypes": ["float32"], "ranks": [rank]}] * (rank - 2) + \
        [{"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [rank]}]
    return c, failure_record(c, graph=g, **kw)


def test_one_bug_on_models_of_different_ranks_is_one_issue_listing_every_model(where, tmp_path):
    pairs = [_rank(m, r) for m, r in (("conv_bn", 4), ("resblock", 4), ("mlp_relu", 2), ("transformer", 3))]
    run = write_run(tmp_path / "run", [c for c, _ in pairs], {c["id"]: f for c, f in pairs})
    where.report(run)
    [rec] = where.records()
    for m in ("conv\\_bn", "resblock", "mlp\\_relu", "transformer"):
        assert m in rec["body"]
    counts = json.loads((run / "report.json").read_text())["counts"]
    assert counts["created"] == 1 and counts["unchanged"] == 0
    run2 = write_run(tmp_path / "run2", [c for c, _ in pairs], {c["id"]: f for c, f in pairs},
                     started="2026-11-23T03:00:00Z")
    where.report(run2)
    counts = json.loads((run2 / "report.json").read_text())["counts"]
    assert counts["created"] == 0 and counts["commented"] == 0 and counts["updated"] == 1


def test_groups_of_one_run_that_reach_one_issue_are_one_update(where, tmp_path):
    # an issue filed under v1 for relu on conv_bn; this run's relu failures on 3 models have one v2
    # primary, and a fourth failure (no repro, identified by its model) matches through the alternative
    c = check_row("conv_bn")
    v1 = fp.compute_v1(row_of(c), record_of(failure_record(c)))
    legacy_state = {"sig": v1.primary, "sigs": [v1.primary], "alt": v1.alternatives, "checks": [v1.check_key],
                    "runs": ["run-old"], "first_seen": "x", "last_seen": "x", "occurrences": 1,
                    "affected": [{"model": "conv_bn", "backend": "inductor", "mode": "inference", "dtype": "float32",
                                  "device": "cpu", "check_key": v1.check_key, "check_id": c["id"], "first_seen": "x",
                                  "last_seen": "x", "occurrences": 1}],
                    "torch": ["2.13.0+cpu"], "best_repro": [0, 0, 1], "flaky": False, "regression": True,
                    "passing_runs": []}
    tracker = where.tracker()
    tracker.create_issue("[minify-bot] old relu issue", "old body\n\n" + fp.make_marker(legacy_state)
                         .replace("minify-action:v2", "minify-action:v1") + "\n", ["minify-bot"], [], v1.primary)
    pairs = [(c, failure_record(c))] + [_rank(m, r) for m, r in (("mlp_relu", 2), ("transformer", 3))]
    run = write_run(tmp_path / "run", [x for x, _ in pairs], {x["id"]: f for x, f in pairs})
    where.report(run)
    [rec] = where.records()                        # migrated in place, not refiled
    data = json.loads((run / "report.json").read_text())
    assert data["counts"]["created"] == 0 and data["counts"]["updated"] == 1 and data["counts"]["unchanged"] == 0
    assert len(data["actions"][0]["checks"]) == 3
    state = fp.parse_marker(rec["body"])
    assert state["sig"].startswith("v2:") and v1.primary in state["sigs"]
    assert rec["body"].rstrip().endswith("-->") and "minify-action:v2 " in rec["body"]
    assert "transformer" in rec["body"] and "mlp\\_relu" in rec["body"]
    # the comment is for the two newly affected models only (no comment about the migration)
    assert len(rec["comments"]) == 1 and "migrat" not in rec["comments"][0]["body"].lower()


def test_a_different_bug_on_the_same_model_is_a_new_issue(where, tmp_path):
    # run 1: relu miscompiled (verified culprit relu); run 2: relu fixed, log1p miscompiled
    c = check_row("relu_log1p_net", config={})
    relu = failure_record(c, graph=[{"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [2]}])
    log1p = failure_record(c, graph=[{"op": "aten.log1p.default", "dtypes": ["float32"], "ranks": [2]}])
    where.report(write_run(tmp_path / "r1", [c], {c["id"]: relu}))
    where.report(write_run(tmp_path / "r2", [c], {c["id"]: log1p}, started="2026-11-23T03:00:00Z"))
    first, second = where.records()
    assert "relu" in first["title"] and "log1p" in second["title"]
    assert first["comments"] == [] and first["state"] == "open"
    # without repros on both sides the model/configuration is all there is: one issue
    c2 = check_row("other_net", config={})
    no1 = failure_record(c2, repro_status="not_reproduced")
    where.report(write_run(tmp_path / "r3", [c2], {c2["id"]: no1}))
    where.report(write_run(tmp_path / "r4", [c2], {c2["id"]: dict(no1, stage="aot_eager")},
                           started="2026-11-23T03:00:00Z"))
    assert len(where.records()) == 3
    # ... but a verified failure of that model is never folded into it: verified relu, it joins the
    # relu issue (#1), not the model's issue without a repro (#3)
    r5 = write_run(tmp_path / "r5", [c2], {c2["id"]: failure_record(c2)}, started="2026-11-24T03:00:00Z")
    where.report(r5)
    [action] = json.loads((r5 / "report.json").read_text())["actions"]
    assert (action["action"], action["issue"]) == ("updated", 1)
    assert "other\\_net" in where.records()[0]["body"]


def test_one_op_that_fails_to_compile_from_four_input_dtypes_is_one_issue_and_folds_the_issues_filed_per_dtype(
        where, tmp_path, monkeypatch):
    from tests.test_fingerprint import SUM_TO_BOOL, compile_error_with_culprit

    made = [compile_error_with_culprit(words, dtype, model=f"fuzz-s2026-i{n:06d}")
            for n, (dtype, words) in enumerate(SUM_TO_BOOL.items())]
    rows, fails = [c for c, _ in made], {c["id"]: f for c, f in made}
    run = write_run(tmp_path / "r1", rows, fails)
    where.report(run)
    [issue] = where.records()
    assert all(f"fuzz-s2026-i{n:06d}" in issue["body"] for n in range(4))
    assert where.report(write_run(tmp_path / "r2", rows, fails, started="2026-11-23T03:00:00Z")) == 0
    [again] = where.records()
    assert again["state"] == "open" and len(again["comments"]) == 0   # the same bug on the same checks: no news

    # a tracker filled before this rule: the compiler's words were the key, one issue per input dtype
    elsewhere = tmp_path / "elsewhere"
    with monkeypatch.context() as m:
        m.setattr(fp, "culprit_keyed", lambda sig: False)
        report(run, elsewhere)
    assert len(records(elsewhere)) == 4
    r3 = write_run(tmp_path / "r3", rows, fails, started="2026-11-24T03:00:00Z")
    report(r3, elsewhere)
    first, *rest = records(elsewhere)
    assert first["state"] == "open" and [r["state"] for r in rest] == ["closed"] * 3
    assert all("duplicate of #1" in r["comments"][-1]["body"] for r in rest)
    assert "differ only with the inputs' dtypes" in rest[0]["comments"][-1]["body"]
    actions = json.loads((r3 / "report.json").read_text())["actions"]
    assert sorted(a["action"] for a in actions) == ["duplicate_closed"] * 3 + ["updated"]
    # from now on the survivor is found by the bug's key: nothing new, nothing reopened
    report(write_run(tmp_path / "r4", rows, fails, started="2026-11-25T03:00:00Z"), elsewhere)
    assert [r["state"] for r in records(elsewhere)] == ["open", "closed", "closed", "closed"]


# ---------------------------------------------------------------- a bug on more checks than the state holds

def _many(tmp_path, name, n, started, **row):
    rows = [check_row(f"model_{i:04d}", **row) for i in range(n)]
    fails = {c["id"]: failure_record(c) for c in rows} if row.get("status", "fail_accuracy") != "pass" else {}
    return write_run(tmp_path / name, rows, fails, started=started)


def test_a_bug_on_over_a_thousand_checks_stays_one_issue_run_after_run(where, tmp_path):
    """The issue's hidden state holds what it can (a state the next run cannot read back is
    ignored, and the bug was filed again in every run): each run updates the one issue, its body
    stays within GitHub's limit, and nobody is told of "newly affected" models that the state
    merely could not keep."""
    for k in range(3):
        run = _many(tmp_path, f"r{k}", 1200, f"2026-11-0{k + 1}T00:00:00Z")
        assert where.report(run, "--no-dashboard") == 0
        doc = json.loads((run / "report.json").read_text())
        assert doc["counts"]["created"] == (k == 0) and doc["counts"]["updated"] == (k > 0)
        assert not doc.get("warnings")                            # no state was refused as malformed
    [rec] = where.records()
    assert len(rec["body"]) <= 65536 and rec["comments"] == []
    assert fp.parse_marker(rec["body"])["occurrences"] == 3600


def test_passing_runs_keep_a_full_body_within_githubs_limit_until_it_closes(where, tmp_path):
    """A body rendered up to its budget (here: a template that pads it) gets longer with each
    passing run the marker records; the state is compacted to fit, so every edit is accepted and
    the issue closes."""
    templates = tmp_path / "templates"
    templates.mkdir()
    stock = (Path(__file__).resolve().parents[1] / "templates" / "issue_body.md.j2").read_text()
    (templates / "issue_body.md.j2").write_text(stock + "\n" + "padding " * 10000 + "\n")
    assert where.report(_many(tmp_path, "r0", 1200, "2026-11-01T00:00:00Z"), "--no-dashboard",
                        "--templates", str(templates)) == 0
    for k in range(1, 4):
        run = _many(tmp_path, f"r{k}", 1200, f"2026-11-0{k + 1}T00:00:00Z", status="pass", failure_class=None)
        assert where.report(run, "--no-dashboard", "--close-after", "3") == 0
        [rec] = where.records()
        assert len(rec["body"]) <= 65536 and fp.parse_marker(rec["body"]) is not None
    assert rec["state"] == "closed" and len(fp.parse_marker(rec["body"])["passing_runs"]) == 3


def test_a_failure_filed_without_a_repro_is_updated_in_place_once_a_later_run_minimizes_it(where, tmp_path):
    """The minify stage crashed: the report filed the failing check without a repro. The next run
    minimizes the same failure: its issue is that one, now with the repro, not a second issue."""
    c = check_row("mlp_relu")
    crashed = write_run(tmp_path / "crashed", [c], {}, started="2026-11-22T03:00:00Z")
    assert where.report(crashed) == 0
    [first] = where.records()
    minimized = failing_run(tmp_path / "minimized", started="2026-11-23T03:00:00Z")
    assert where.report(minimized) == 0
    doc = json.loads((minimized / "report.json").read_text())
    assert doc["counts"]["created"] == 0 and doc["counts"]["updated"] == 1
    [issue] = where.records()
    assert issue["number"] == first["number"] and issue["state"] == "open"
    assert "aten.relu" in issue["body"]   # the body now shows the minimized repro
    # and a third run of the minimized bug finds the same issue again
    again = failing_run(tmp_path / "again", started="2026-11-24T03:00:00Z")
    assert where.report(again) == 0
    assert json.loads((again / "report.json").read_text())["counts"]["created"] == 0
    assert len(where.records()) == 1


def test_a_minimized_failure_does_not_take_an_issue_that_already_has_a_repro(where, tmp_path):
    """Two bugs on one check, each with its own repro, stay two issues: only an issue filed without a
    repro is taken over by the first minimized failure of its check."""
    assert where.report(failing_run(tmp_path / "relu")) == 0
    other = failing_run(tmp_path / "sigmoid", started="2026-11-23T03:00:00Z",
                        graph=[{"op": "aten.sigmoid.default", "dtypes": ["float32"], "ranks": [2]}])
    assert where.report(other) == 0
    assert len(where.records()) == 2


def test_bare_urls_from_an_artifact_are_not_links_in_the_issue(where, tmp_path):
    """Model code controls the error text of its check: a phishing URL in it must not become a link
    (GitHub links ``https://…`` and ``www.…`` without any markup)."""
    err = {"type": "RuntimeError", "message": "see https://evil.example/fix and www.evil.example/patch or "
                                              "HTTP://evil.example", "traceback": None}
    c = check_row("mlp_relu", status="fail_to_run", failure_class="runtime_error", error=err)
    run = write_run(tmp_path / "run", [c], {})
    assert where.report(run) == 0
    [issue] = where.records()
    body = issue["body"] + issue["title"]
    assert "evil.example" in body   # the text is shown ...
    for live in ("https://evil", "www.evil", "HTTP://evil"):
        assert live not in body     # ... but never as something GitHub links


def test_artifacts_that_say_a_check_passes_close_nothing_on_the_commit_and_build_it_failed_on(where, tmp_path,
                                                                                              monkeypatch):
    """Model code writes the check job's results: two nightlies on the commit and image the bug failed
    on whose artifacts say its check passes are not evidence of a fix (a deterministic bug cannot
    stop failing where nothing changed), and close nothing. Passing runs on a new commit (or a new
    image), which the report knows from its own environment, close it as before."""
    monkeypatch.setenv("GITHUB_SHA", "a" * 40)
    monkeypatch.setenv("MINIFY_BOT_BUILD", "ghcr.io/org/gpu@sha256:" + "1" * 64)
    assert where.report(failing_run(tmp_path / "fail")) == 0
    for k, day in enumerate(("23", "24", "25")):
        run = passing_run(tmp_path / f"same{k}", started=f"2026-11-{day}T03:00:00Z")
        assert where.report(run) == 0
        doc = json.loads((run / "report.json").read_text())
        assert doc["counts"]["closed"] == 0 and "not evidence of a fix" in json.dumps(doc["actions"])
    [issue] = where.records()
    assert issue["state"] == "open"
    monkeypatch.setenv("GITHUB_SHA", "b" * 40)   # a new commit: now passing runs count
    for day in ("26", "27"):
        assert where.report(passing_run(tmp_path / f"new{day}", started=f"2026-11-{day}T03:00:00Z")) == 0
    [issue] = where.records()
    assert issue["state"] == "closed"


def test_a_generated_programs_failure_without_a_verified_repro_is_not_filed(where, tmp_path):
    """A fuzz finding is filed only with a repro that failed the same way on its own: one whose
    captured graph passed alone (or whose repro never failed in a fresh process) is no issue, and
    report.json says why. A verified finding of the same campaign is filed, and so is a user's own
    model without a verified repro (its failure is theirs to see)."""
    fuzz = {"source": "fuzz", "model": ""}
    rows = {}
    for name in ("fuzz-s3-i000001", "fuzz-s3-i000002", "fuzz-s3-i000003"):
        rows[name] = dict(check_row(name), spec=dict(fuzz, model=name))
    users = check_row("mlp_relu")
    failed_never = failure_record(rows["fuzz-s3-i000003"], graph=[{"op": "aten.any.dim", "dtypes": ["uint8"],
                                                                   "ranks": [2]}])
    failed_never["repro"]["verification"] = {"runs": 3, "failed_same_way": 0, "random_inputs_reproduce": False}
    passed_alone = failure_record(rows["fuzz-s3-i000002"], graph=[], repro_status="not_reproduced")
    passed_alone["repro"]["verification"] = None
    run = write_run(tmp_path / "run", [*rows.values(), users],
                    {"fuzz-s3-i000001-inductor-inference-float32-cpu": failure_record(rows["fuzz-s3-i000001"]),
                     rows["fuzz-s3-i000002"]["id"]: passed_alone,
                     rows["fuzz-s3-i000003"]["id"]: failed_never,
                     users["id"]: failure_record(users, graph=[{"op": "aten.log1p.default", "dtypes": ["float32"],
                                                                "ranks": [2]}], repro_status="not_reproduced")})
    where.report(run)
    rep = json.loads((run / "report.json").read_text())
    skipped = {c: a["reason"] for a in rep["actions"] if a["action"] == "skipped" for c in a["checks"]}
    why = ("no verified repro (a generated program's failure is filed only with a repro that fails on its own); "
           "not filed")
    assert skipped == {rows["fuzz-s3-i000002"]["id"]: why, rows["fuzz-s3-i000003"]["id"]: why}, rep["actions"]
    filed = {c for a in rep["actions"] if a["action"] == "created" for c in a["checks"]}
    assert filed == {rows["fuzz-s3-i000001"]["id"], users["id"]}
