"""Artifact fields on their way to GitHub-visible text (issue 22), titles (issue 20), and the rules
of known-repro reuse. A run directory can come from a pull request's job: every field that reaches a
title, a label or the body goes through an allowlist or the escaping filters."""

from __future__ import annotations

import copy
import json
import re

from bot import known
from bot.records import CheckRow
from bot.report import ReportOptions, report_run
from bot.report.context import title_ops
from bot.tracker.local import LocalTracker
from tests.ghstub.rundir import REPRO, check_row, failure_record, record_of, row_of, write_run

ALLOWED_LABELS = {"minify-bot", "accuracy", "compile_error", "runtime_error", "crash", "timeout", "oom",
                  "eager_error", "setup_error", "eager", "aot_eager", "aot_eager_decomp_partition", "inductor",
                  "flaky", "regression", "new"}
HOSTILE = "@acme/maintainers <img src=x onerror=alert(1)> [x](javascript:alert(1)) #1"


def report(run, issues):
    return report_run(run, LocalTracker(issues), ReportOptions(dashboard=False))


def only_issue(issues):
    (rec,) = LocalTracker(issues).records()
    return rec


def test_hostile_stage_device_role_and_ops_reach_no_title_label_or_body(tmp_path):
    row = check_row()
    rec = failure_record(row)
    rec["stage"] = HOSTILE
    rec["signature"] = {"failure_class": "accuracy", "verified": True, "stage": HOSTILE, "device": HOSTILE,
                        "dtype": HOSTILE, "culprit_ops": ["aten.relu.default", HOSTILE]}
    rec["culprit"] = {"ops": ["aten.relu.default", HOSTILE], "bisect": HOSTILE, "method": "compiled-alone"}
    rec["repro"]["capture"]["role"] = "@acme/team"
    rec["repro"]["capture"]["graph"] = "<b>2</b>"
    rec["error"] = {"type": "<script>@acme", "message": HOSTILE, "traceback": HOSTILE}
    report(write_run(tmp_path / "r", [row], {row["id"]: rec}), tmp_path / "issues")
    issue = only_issue(tmp_path / "issues")
    assert set(issue["labels"]) <= ALLOWED_LABELS, issue["labels"]
    assert "@acme" not in issue["title"] and "<" not in issue["title"] and "javascript" not in issue["title"]
    assert "aten.relu.default" in issue["title"]
    body = issue["body"]
    assert "@acme" not in body  # every mention is broken, in code too
    prose = body.rstrip().rsplit("\n", 1)[0]  # the hidden marker (an HTML comment, its JSON escaped) aside
    prose = re.sub(r"(`{3,})[^\n]*\n.*?\n\1", "", prose, flags=re.S)  # fenced blocks: GitHub renders no HTML there
    prose = re.sub(r"(`+)[^`]*?\1", "", prose)  # nor in code spans
    assert "<img" not in prose and "<b>" not in prose and "<script" not in prose
    assert not re.search(r"(?<!\\)\]\(javascript", prose)  # the link syntax arrives escaped
    assert "(in the @" not in body  # the graph role is one of three words or nothing


def _row_and_failure(ops, bisect=None, method="graph", error=None):
    row = check_row()
    rec = failure_record(row, graph=[{"op": o, "dtypes": ["float32"], "ranks": [2]} for o in ops])
    rec["signature"] = {"failure_class": "accuracy", "verified": True, "culprit_ops": ops}
    rec["culprit"] = {"ops": ops, "bisect": bisect, "method": method}
    rec["error"] = error
    return row, rec


SIX = ["aten.bmm.default", "aten.clone.default", "aten.constant_pad_nd.default", "aten.expand.default",
       "aten.mul.Tensor", "aten.view.default"]


def test_a_title_names_at_most_three_ops_chosen_by_what_is_known(tmp_path):
    # the bisector's lowering first, then the rest; the body lists all six
    row, rec = _row_and_failure(SIX, bisect="lowerings: mul")
    names, more = title_ops({"ops": SIX, "bisect": "lowerings: mul"}, record_of(rec))
    assert names[0] == "aten.mul.Tensor" and len(names) == 3 and more == 3
    report(write_run(tmp_path / "r", [row], {row["id"]: rec}), tmp_path / "issues")
    issue = only_issue(tmp_path / "issues")
    title = issue["title"]
    assert title.count("aten.") == 3 and "aten.mul.Tensor" in title and "(+3 more ops)" in title
    assert all(op in issue["body"] for op in SIX)
    # the op of the crashing kernel (inductor's fused kernel name) comes before the others
    crash = {"type": "RuntimeError", "message": "error in cpp_fused_constant_pad_nd_expand_3", "traceback": ""}
    names, _ = title_ops({"ops": SIX}, record_of(_row_and_failure(SIX, error=crash)[1]))
    assert names[:2] == ["aten.constant_pad_nd.default", "aten.expand.default"]
    # a culprit proved by compiling it alone
    names, more = title_ops({"ops": ["aten.relu.default"]}, record_of(_row_and_failure(["aten.relu.default"],
                                                                                       method="compiled-alone")[1]))
    assert (names, more) == (["aten.relu.default"], 0)


# ---------------------------------------------------------------------------- known-repro reuse rules

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
LOG1P = "inductor.cpp.inject_log1p_bug_TESTING_ONLY"


def _entry(minimal, torch="2.13.0+cpu", check_config=None) -> known.KnownRepro:
    row = check_row(config={RELU: "accuracy"})
    rec = failure_record(row, torch=torch)
    rec["signature"] = {"failure_class": "accuracy", "verified": True, "culprit_ops": ["aten.relu.default"]}
    rec["config"] = {"diff": [{"key": RELU, "value": "accuracy"}], "minimal": minimal}
    block = known.block_of(record_of(rec), REPRO)
    if check_config is not None:
        block.check_config = check_config
    entry = known.from_state(5, block, [])
    return entry


def test_reuse_needs_the_known_bugs_minimal_configuration_in_the_checks():
    entry = _entry([{"key": RELU, "value": "accuracy"}])
    assert known.config_allows(entry, CheckRow(config={RELU: "accuracy"}))
    assert known.config_allows(entry, CheckRow(config={RELU: "accuracy", "inductor.max_autotune": True}))
    assert not known.config_allows(entry, CheckRow(config={LOG1P: "accuracy"}))  # bug B's check: minify afresh
    assert not known.config_allows(entry, CheckRow(config={}))
    assert not known.config_allows(entry, CheckRow(config={RELU: "compile_error"}))
    assert known.config_allows(_entry([]), CheckRow(config={LOG1P: "accuracy"}))  # a bug of the default config
    unknown = _entry(None)  # the minimal set was not found: only the configuration it was minified under
    assert known.config_allows(unknown, CheckRow(config={RELU: "accuracy"}))
    assert not known.config_allows(unknown, CheckRow(config={RELU: "accuracy", LOG1P: "accuracy"}))
    # and through match: the issue was seen on the check, but the configuration changed
    row = check_row(config={LOG1P: "accuracy"})
    from bot import fingerprint as fp

    entry.checks = [fp.check_key(row_of(row))]
    assert known.match([entry], row_of(row)) is None


def test_reuse_needs_the_same_or_a_newer_torch():
    entry = _entry([])
    assert known.torch_allows(entry, "2.13.0+cpu") and known.torch_allows(entry, "2.15.0+cu132")
    assert known.torch_allows(entry, "2.14.0.dev20261001+cpu")
    assert not known.torch_allows(entry, "2.12.1+cpu") and not known.torch_allows(entry, None)
    assert not known.torch_allows(_entry([], torch="2.16.0"), "2.16.0.dev20261120+cpu")  # a nightly before it


def test_an_artifacts_reused_claim_does_not_attach_another_failure_to_an_issue(tmp_path):
    issues = tmp_path / "issues"
    row, rec = _row_and_failure(["aten.relu.default"], method="compiled-alone")
    report(write_run(tmp_path / "r1", [row], {row["id"]: rec}, started="2026-11-01T00:00:00Z"), issues)
    (first,) = LocalTracker(issues).records()
    # the next run's artifact claims its (different: log1p) failure is issue 1's known repro, rerun
    row2, rec2 = _row_and_failure(["aten.log1p.default"], method="compiled-alone")
    rec2 = copy.deepcopy(rec2)
    rec2["repro"]["reused"] = {"issue": first["number"], "verify_seconds": 1.0, "saved_seconds": 10.0}
    report(write_run(tmp_path / "r2", [row2], {row2["id"]: rec2}, started="2026-11-02T00:00:00Z"), issues)
    recs = [r for r in LocalTracker(issues).records() if "minify-bot-dashboard" not in r["labels"]]
    assert len(recs) == 2
    doc = json.loads((tmp_path / "r2" / "report.json").read_text())
    assert [a["action"] for a in doc["actions"]] == ["created"]


def test_bidirectional_controls_never_reach_an_issue(tmp_path):
    """A right-to-left override in a model name, an error or a repro makes text read as something it
    is not ("trojan source"): dropped wherever artifact text is shown."""
    row = check_row(model="mlp\u202erelu")
    rec = failure_record(row)
    rec["error"] = {"type": "RuntimeError", "message": "bad \u2066value\u2069", "traceback": "x\u202ey"}
    write_run(tmp_path / "r", [row], {row["id"]: rec}, repro_text="x = 1  # \u202e admin only \u2066\n")
    report(tmp_path / "r", tmp_path / "issues")
    issue = only_issue(tmp_path / "issues")
    assert not re.search("[\u202a-\u202e\u2066-\u2069]", issue["title"] + issue["body"])
