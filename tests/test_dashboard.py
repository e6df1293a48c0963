"""The dashboard issue: history without user files, the automatic baseline, per-configuration status,
flakes and checkbox requests. Real PyGithub over HTTP to the GitHub stand-in; hand-made run directories
(no torch)."""

from __future__ import annotations

import json
import re

import pytest

from bot import fingerprint as fp
from bot.check.sweep import run_with_reruns
from bot.records import Accuracy, CheckRow
from bot.render import BODY_LIMIT
from bot.report import ReportOptions, dashboard, report_run
from bot.tracker.github import GitHubTracker
from bot.tracker.local import LocalTracker
from tests.ghstub.fixtures import BOT_TOKEN, REPO, at_once, make_client
from tests.ghstub.rundir import check_row, failure_record, row_of, write_run

INJECT = {"inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}


ON = ReportOptions(dashboard=True)


def tracker(stub) -> GitHubTracker:
    return GitHubTracker(REPO, BOT_TOKEN, stub.base_url, seconds_between_requests=0, seconds_between_writes=0,
                         sleep=lambda s: None)


def sweep(run_dir, started, failing=(), flaky=(), models=("mlp_relu", "mlp_gelu"), backend="inductor",
          settings=None):
    """A run of ``models``: the ``failing`` ones fail accuracy, the ``flaky`` ones failed then passed."""
    checks, failures = [], {}
    for m in models:
        if m in failing:
            c = check_row(m, backend=backend, baseline=None)
            op = m.rsplit("_", 1)[-1]  # a different bug per model: mlp_relu -> aten.relu, mlp_gelu -> aten.gelu
            failures[c["id"]] = failure_record(c, graph=[{"op": f"aten.{op}.default", "dtypes": ["float32"],
                                                          "ranks": [2]}])
        else:
            c = check_row(m, status="pass", failure_class=None, backend=backend, config={})
            if m in flaky:
                c["flaky"] = {"status": "fail_accuracy", "failure_class": "accuracy", "error": None,
                              "accuracy": {"tolerance": 0.0001, "rmse_res": 0.2, "rmse_ref": 1e-8}, "attempts": 2,
                              "log": f"checks/{c['id']}.log"}
        checks.append(c)
    run = write_run(run_dir, checks, failures, started=started)
    if settings:
        doc = json.loads((run / "results.json").read_text())
        doc["settings"].update(settings)
        (run / "results.json").write_text(json.dumps(doc))
    return run


def dashboards(stub):
    return [i for i in stub.issues() if any(lb["name"] == dashboard.LABEL for lb in i["labels"])]


def bugs(stub):
    return [i for i in stub.issues() if any(lb["name"] == "minify-bot" for lb in i["labels"])]


def labels(issue) -> set[str]:
    return {lb["name"] for lb in issue["labels"]}


def dashboard_patches(stub, number):
    return [w for w in stub.writes() if w.method == "PATCH" and w.path.endswith(f"/issues/{number}")]


def section(body: str, title: str) -> str:
    m = re.search(rf"^### {re.escape(title)}.*?$(.*?)(?=^### |\Z)", body, re.M | re.S)
    assert m, f"no section {title!r} in\n{body}"
    return m.group(1)


def chart_points(body: str) -> list[list[int]]:
    return [[int(x) for x in m.split(",")] for m in re.findall(r"^\s*line \[([^\]]*)\]", body, re.M)]


def test_three_runs_regression_drop_and_recovery_on_github(ghstub, tmp_path):
    t = tracker(ghstub)
    report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z"), t, ON)
    [board] = dashboards(ghstub)
    assert board["title"].startswith("minify-bot dashboard") and bugs(ghstub) == []
    assert "2 of 2" in board["body"]

    r2 = report_run(sweep(tmp_path / "r2", "2026-11-21T03:00:00Z", failing=["mlp_relu"]), t, ON)
    [bug] = bugs(ghstub)
    assert "regression" in labels(bug)  # no --baseline: the history said it passed last time
    [board] = dashboards(ghstub)
    row = next(ln for ln in board["body"].splitlines() if ln.startswith("| inductor |"))
    assert "1 of 2" in row and "-1" in row
    new = section(board["body"], "New failures")
    assert "mlp_relu-inductor-inference-float32-cpu" in new and f"#{bug['number']}" in new
    assert [a for a in r2.actions if a.action == "created"][0].labels.count("regression") == 1

    report_run(sweep(tmp_path / "r3", "2026-11-22T03:00:00Z"), t, ON)
    [board] = dashboards(ghstub)
    row = next(ln for ln in board["body"].splitlines() if ln.startswith("| inductor |"))
    assert "2 of 2" in row and "+1" in row
    fixed = section(board["body"], "Fixed")
    assert "mlp_relu-inductor-inference-float32-cpu" in fixed and f"#{bug['number']}" in fixed
    assert "xychart-beta" in board["body"]
    assert chart_points(board["body"]) == [[2, 1, 2]]
    # one dashboard issue, created once, then edited in place; never commented on
    assert len(dashboards(ghstub)) == 1
    assert ghstub.comments(number=board["number"]) == []
    assert len(dashboard_patches(ghstub, board["number"])) == 2
    assert len(board["body"]) <= BODY_LIMIT


def test_known_and_still_failing_without_baseline(ghstub, tmp_path):
    t = tracker(ghstub)
    report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z", failing=["mlp_relu"]), t, ON)
    [bug] = bugs(ghstub)
    assert "regression" not in labels(bug)  # first run in the history: nothing to compare with
    report_run(sweep(tmp_path / "r2", "2026-11-21T03:00:00Z", failing=["mlp_relu", "mlp_gelu"]), t, ON)
    [board] = dashboards(ghstub)
    assert "mlp_relu" in section(board["body"], "Still failing")
    assert "mlp_gelu" in section(board["body"], "New failures")
    gelu = next(i for i in bugs(ghstub) if "mlp_gelu" in i["body"])
    assert "regression" in labels(gelu)


def test_user_baseline_overrides_the_history(ghstub, tmp_path):
    t = tracker(ghstub)
    report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z"), t, ON)
    run = sweep(tmp_path / "r2", "2026-11-21T03:00:00Z", failing=["mlp_relu"], settings={"baseline": "/b.csv"})
    doc = json.loads((run / "results.json").read_text())
    doc["checks"][1]["baseline"] = "known"  # what `check --baseline` wrote
    (run / "results.json").write_text(json.dumps(doc))
    report_run(run, t, ON)
    [bug] = bugs(ghstub)
    assert "regression" not in labels(bug)


def test_reporting_the_same_run_twice_does_not_edit_the_dashboard(ghstub, tmp_path):
    t = tracker(ghstub)
    report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z"), t, ON)
    run = sweep(tmp_path / "r2", "2026-11-21T03:00:00Z", failing=["mlp_relu"])
    report_run(run, t, ON)
    n = len(ghstub.writes())
    before = dashboards(ghstub)[0]["body"]
    report_run(run, t, ON)
    assert len(ghstub.writes()) == n
    assert dashboards(ghstub)[0]["body"] == before
    assert chart_points(before) == [[2, 1]]


def test_flaky_check_is_listed_not_filed_until_it_keeps_flipping(ghstub, tmp_path):
    t = tracker(ghstub)
    report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z", flaky=["mlp_relu"]), t, ON)
    assert bugs(ghstub) == []
    [board] = dashboards(ghstub)
    flaky = section(board["body"], "Flaky")
    assert "mlp_relu-inductor-inference-float32-cpu" in flaky and "not filed" in flaky
    assert "(1 flaky)" in board["body"]
    report_run(sweep(tmp_path / "r2", "2026-11-21T03:00:00Z", flaky=["mlp_relu"]), t, ON)
    [bug] = bugs(ghstub)  # flipped twice in the window: filed once, labelled flaky
    assert "flaky" in labels(bug) and "regression" not in labels(bug)
    report_run(sweep(tmp_path / "r3", "2026-11-22T03:00:00Z", flaky=["mlp_relu"]), t, ON)
    assert len(bugs(ghstub)) == 1 and bugs(ghstub)[0]["state"] == "open"


def tick(stub, number: int, kind: str, target) -> None:
    """A person ticks a box: edit the body through the API, as alice."""
    gh = make_client(stub, token="alice-token")
    issue = gh.get_repo(REPO).get_issue(number)
    body, n = re.subn(rf"- \[ \] (<!-- minify-box:{kind}:{re.escape(str(target))} -->)", r"- [x] \1", issue.body)
    assert n == 1, f"no {kind} box for {target}"
    issue.edit(body=body)
    gh.close()


def test_ticking_mute_stops_filing_and_updating(ghstub, tmp_path):
    t = tracker(ghstub)
    report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z", failing=["mlp_relu"]), t, ON)
    [bug] = bugs(ghstub)
    [board] = dashboards(ghstub)
    cid = "mlp_relu-inductor-inference-float32-cpu"
    tick(ghstub, board["number"], "mute", cid)
    bug_writes = len([w for w in ghstub.writes() if w.path.endswith(f"/issues/{bug['number']}")])
    res = report_run(sweep(tmp_path / "r2", "2026-11-21T03:00:00Z", failing=["mlp_relu", "mlp_gelu"]), t, ON)
    assert [w for w in ghstub.writes() if w.path.endswith(f"/issues/{bug['number']}")][bug_writes:] == []
    assert any(a.action == "skipped" and "muted" in a.reason and a.checks == [cid] for a in res.actions)
    [board] = dashboards(ghstub)
    assert cid in section(board["body"], "Muted")
    assert f"- [x] <!-- minify-box:mute:{cid} -->" in board["body"]  # stays ticked
    assert dashboard.requests_from(t).mute == {cid}
    assert len(bugs(ghstub)) == 2  # mlp_gelu is not muted: filed


def test_ticking_retry_is_passed_to_the_check_and_cleared_when_done(ghstub, tmp_path):
    t = tracker(ghstub)
    report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z", flaky=["mlp_relu"]), t, ON)
    [board] = dashboards(ghstub)
    cid = "mlp_relu-inductor-inference-float32-cpu"
    tick(ghstub, board["number"], "retry", cid)
    assert dashboard.requests_from(t).retry == {cid}  # what `minify-bot run` passes as --retry
    # a report whose check did not honour it keeps the box ticked
    report_run(sweep(tmp_path / "r2", "2026-11-21T03:00:00Z"), t, ON)
    assert dashboard.requests_from(t).retry == {cid}
    report_run(sweep(tmp_path / "r3", "2026-11-22T03:00:00Z", settings={"retry": [cid]}), t, ON)
    [board] = dashboards(ghstub)
    assert dashboard.requests_from(t).retry == set()
    assert "retried" in board["body"] and cid in board["body"]


def test_forged_boxes_and_markers_are_ignored():
    body = ("- [x] mute everything\n- [x] <!-- minify-box:mute:a--b --> x\n"
            "- [x] <!-- minify-box:reminify:12 --> re-minify\n- [X] <!-- minify-box:retry:m-x.y_z --> r\n"
            "- [ ] <!-- minify-box:mute:other --> m\n")
    req = dashboard.parse_requests(body)
    assert req.reminify == {12} and req.retry == {"m-x.y_z"} and req.mute == {"a--b"}  # untagged: ignored


def test_dashboard_on_the_local_tracker_is_a_file(tmp_path):
    t = LocalTracker(tmp_path / "issues")
    report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z"), t, ON)
    report_run(sweep(tmp_path / "r2", "2026-11-21T03:00:00Z", failing=["mlp_relu"]), t, ON)
    recs = t.records()
    [board] = [r for r in recs if dashboard.LABEL in r["labels"]]
    assert (tmp_path / "issues" / f"{board['number']}.md").read_text().count("minify-bot dashboard") == 1
    assert board["comments"] == []
    [bug] = [r for r in recs if "minify-bot" in r["labels"]]
    assert "regression" in bug["labels"]


def test_no_dashboard_option(ghstub, tmp_path):
    report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z", failing=["mlp_relu"]), tracker(ghstub),
               ReportOptions(dashboard=False))
    assert dashboards(ghstub) == [] and len(bugs(ghstub)) == 1


@pytest.mark.slow
def test_history_of_a_large_sweep_fits_the_body_limit(tmp_path):
    models = [f"model_{i:04d}_with_a_long_name" for i in range(3000)]
    t = LocalTracker(tmp_path / "issues")
    for k in range(3):
        failing = models[k * 7: k * 7 + 40]
        run = sweep(tmp_path / f"r{k}", f"2026-11-2{k}T03:00:00Z", failing=failing, models=models)
        report_run(run, t, ReportOptions(max_new=2, dashboard=True))
    [board] = [r for r in t.records() if dashboard.LABEL in r["labels"]]
    assert len(board["body"]) <= BODY_LIMIT
    state = dashboard.History.from_json(fp.parse_marker(board["body"]))
    assert len(state.runs) == 3
    # the compacted history still knows that a passing check passed (baseline for the next run)
    assert dashboard.previous_status(state, models[-1] + "-inductor-inference-float32-cpu") == "pass"
    assert dashboard.previous_status(state, models[14] + "-inductor-inference-float32-cpu") == "fail_accuracy"
    assert "2960 of 3000" in board["body"]


def test_older_runs_are_compacted():
    state = dashboard.History()
    row = row_of(check_row("m", status="pass", failure_class=None))
    for k in range(dashboard.MAX_RUNS + 5):
        state = dashboard.record_run(state, dashboard.HistoryRun(f"run-{k}", f"2026-11-01T00:{k:02d}:00Z"),
                                     [row], set(), {})
    assert len(state.runs) == dashboard.MAX_RUNS and state.older == dashboard.OlderRuns(5, "2026-11-01T00:00:00Z")
    assert state.checks[row.id].history == "P" * dashboard.MAX_RUNS
    assert dashboard.History.from_json(json.loads(json.dumps(state.to_json()))) == state   # as the marker keeps it


def test_rerun_turns_a_one_off_failure_into_a_flaky_pass(tmp_path):
    outcomes = iter([CheckRow(status="fail_accuracy", failure_class="accuracy", accuracy=Accuracy(tolerance=1e-4)),
                     CheckRow(status="pass")])
    logs = []
    row = run_with_reruns(lambda p: (logs.append(p), next(outcomes))[1], str(tmp_path / "c.log"), 1,
                          progress=lambda m: None)
    assert row.status == "pass" and row.flaky.status == "fail_accuracy" and row.flaky.attempts == 2
    assert logs == [str(tmp_path / "c.log"), str(tmp_path / "c.rerun1.log")]
    # the same failure twice (status and numbers) is deterministic: not run a third time
    fail = CheckRow(status="fail_accuracy", failure_class="accuracy", accuracy=Accuracy(rmse_res=0.5, rmse_ref=1e-6))
    logs.clear()
    row = run_with_reruns(lambda p: (logs.append(p), fail.replace())[1], str(tmp_path / "d.log"), 2,
                          progress=lambda m: None)
    assert row.failure_class == "accuracy" and row.reruns == 1 and row.deterministic and row.flaky is None
    assert len(logs) == 2
    # a failure whose numbers change between runs is rerun as often as asked
    rmse = iter([0.5, 0.7, 0.9])
    row = run_with_reruns(lambda p: fail.replace(accuracy=Accuracy(rmse_res=next(rmse), rmse_ref=1e-6)),
                          str(tmp_path / "e.log"), 2, progress=lambda m: None)
    assert row.reruns == 2 and row.deterministic is None and row.accuracy.rmse_res == 0.5


def test_concurrent_reporters_leave_one_open_dashboard(ghstub, tmp_path):
    ghstub.delay = 0.02  # widen the race window
    runs = [sweep(tmp_path / f"r{k}", f"2026-11-01T00:00:{k:02d}Z") for k in range(4)]
    assert at_once(lambda run: report_run(run, tracker(ghstub), ON), runs) == []
    assert len([i for i in dashboards(ghstub) if i["state"] == "open"]) == 1
    assert ghstub.comments() == []


def test_two_configurations_sharded_over_two_jobs_report_per_configuration(ghstub, tmp_path):
    from bot.merge import expand, merge

    for backend in ("inductor", "aot_eager"):
        sweep(tmp_path / "dl" / backend, "2026-11-20T03:00:00Z", backend=backend,
              failing=["mlp_relu"] if backend == "inductor" else (), settings={"backend": backend})
    merge(expand([str(tmp_path / "dl")]), tmp_path / "merged")
    res = report_run(tmp_path / "merged", tracker(ghstub), ON)
    [bug] = bugs(ghstub)
    assert "inductor" in labels(bug)
    [board] = dashboards(ghstub)
    rows = {ln.split("|")[1].strip(): ln for ln in board["body"].splitlines() if ln.startswith("| ") and " of " in ln}
    assert "1 of 2" in rows["inductor"] and "2 of 2" in rows["aot\\_eager"]
    summary = res.summary_path.read_text()
    assert "| inductor | inference | float32 | cpu | no | 1 of 2 |" in summary
    assert "| aot\\_eager | inference | float32 | cpu | no | 2 of 2 |" in summary


def test_matrix_flag_expands_to_the_product_and_rejects_bad_axes():
    import pytest

    from bot.commands.check import parse_matrix
    from bot.errors import UsageError

    combos = parse_matrix(["backend=inductor,aot_eager", "dynamic=false,true"])
    assert combos == [{"backend": "inductor", "dynamic": False}, {"backend": "inductor", "dynamic": True},
                      {"backend": "aot_eager", "dynamic": False}, {"backend": "aot_eager", "dynamic": True}]
    assert parse_matrix([]) == [{}]
    for bad in (["device=cpu,cuda"], ["backend"], ["dynamic=maybe"], ["backend=a", "backend=b"]):
        with pytest.raises(UsageError):
            parse_matrix(bad)


@pytest.mark.slow
def test_matrix_usage_errors_are_one_line_exit_2(tmp_path, bot):
    proc = bot("check", "--models", "mlp_relu", "--matrix", "speed=1,2", "--out", tmp_path / "o")
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "error: invalid --matrix" in proc.stderr
    proc = bot("check", "--models", "mlp_relu", "--reruns", "-1", "--out", tmp_path / "o")
    assert proc.returncode == 2 and "--reruns must be >= 0" in proc.stderr


def test_report_json_names_the_dashboard_apart_from_the_bug_issues(ghstub, tmp_path):
    res = report_run(sweep(tmp_path / "r1", "2026-11-20T03:00:00Z", failing=["mlp_relu"]), tracker(ghstub), ON)
    doc = json.loads(res.report_path.read_text())
    [board] = dashboards(ghstub)
    assert doc["dashboard"] == {"issue": board["number"], "url": board["html_url"], "action": "created"}
    assert [a["action"] for a in doc["actions"]] == ["created"]          # the bug's issue, and only it
    assert all(a.get("issue") != board["number"] for a in doc["actions"])
    assert f"dashboard #{board['number']}" in res.summary_path.read_text()


def test_a_history_in_the_markers_format_reads_and_writes_back_under_its_one_letter_keys():
    doc = {"kind": "dashboard", "sigs": [dashboard.SIG], "v": 1,
           "runs": [{"id": "run-1", "when": "2026-11-01T03:00:00Z", "url": None,
                     "configs": {"inductor|inference|float32|cpu|static": [1, 2, 0]}, "torch": "2.13.0+cpu"}],
           "older": {"runs": 4, "first": "2026-10-01T03:00:00Z"}, "passing": "0123abcd",
           "checks": {"m-inductor": {"h": "PF", "s": "fail_accuracy", "b": "pass", "c": "accuracy", "f": "v2:ab",
                                     "i": 7, "k": "inductor|inference|float32|cpu|static", "m": "m"}}}
    state = dashboard.History.from_json(json.loads(json.dumps(doc)))
    ent = state.checks["m-inductor"]
    assert (ent.history, ent.status, ent.before, ent.failure_class, ent.fingerprint, ent.issue, ent.model) == (
        "PF", "fail_accuracy", "pass", "accuracy", "v2:ab", 7, "m")
    assert state.runs[0].configs == {"inductor|inference|float32|cpu|static": [1, 2, 0]} and state.older.runs == 4
    assert state.to_json() == doc
    assert dashboard.previous_status(state, "m-inductor") == "fail_accuracy"
    assert dashboard.previous_status(state, "m-inductor", "run-1") == "pass"   # the same run again: the one before


def test_compact_forgets_always_passing_checks_then_shortens_then_drops_details_then_runs():
    state = dashboard.History()
    rows = [row_of(check_row(f"ok{i:03d}", status="pass", failure_class=None)) for i in range(60)]
    rows.append(row_of(check_row("bad")))
    for k in range(dashboard.MAX_RUNS):
        state = dashboard.record_run(state, dashboard.HistoryRun(f"run-{k}", f"2026-11-01T00:{k:02d}:00Z"),
                                     rows, set(), {"bad-inductor-inference-float32-cpu": "v2:" + "f" * 20})
    full = state.marker_size()
    bad = "bad-inductor-inference-float32-cpu"
    small = dashboard.compact(state, budget=full // 3)     # the passing checks go: only their hashes stay
    assert set(small.checks) == {bad} and len(small.passing) == 60 * dashboard.HASH_LEN
    assert small.checks[bad].history == "F" * dashboard.MAX_RUNS and small.checks[bad].fingerprint
    assert dashboard.previous_status(small, "ok000-inductor-inference-float32-cpu") == "pass"
    tiny = dashboard.compact(state, budget=small.marker_size() - 200)
    assert len(tiny.checks[bad].history) <= 10
    least = dashboard.compact(state, budget=1)             # nothing fits: the failing check and 3 runs stay
    assert set(least.checks) == {bad} and least.passing == "" and len(least.runs) == 3
    assert least.checks[bad].fingerprint is None and least.older.runs == dashboard.MAX_RUNS - 3
    assert state.marker_size() == full                      # the state given is untouched


def test_a_malformed_check_history_starts_the_dashboard_again(tmp_path):
    t = LocalTracker(tmp_path / "issues")
    doc = {**dashboard.History().to_json(), "checks": {"m": {"h": None, "s": "pass"}}}
    t.create_issue(dashboard.TITLE, "board\n\n" + fp.make_marker(doc) + "\n", [dashboard.LABEL], [], dashboard.SIG)
    said = []
    [(issue, state)] = dashboard.find_all(t, say=said.append)
    assert state == dashboard.History() and "checks['m'] is malformed" in said[0]
