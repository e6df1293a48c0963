"""bot/report/state.py: what the hidden marker at the end of a bug issue's body records, read back
exactly; a marker someone edited is refused with the reason, never a crash; and how one run's
failures of the bug change the state and the labels a maintainer sees."""

from __future__ import annotations

import json

import pytest

from bot import fingerprint as fp
from bot.records import Culprit
from bot.report import state as st
from bot.report.load import load_run
from bot.report.state import AffectedCheck, IssueState, PassingRun
from tests import rundirs
from tests.ghstub.rundir import check_row, failure_record, write_run  # many rows: JSON written at once

SIG = "v2:0123456789abcdef0123"


def full_state() -> IssueState:
    row = AffectedCheck("mlp_relu", "inductor", "inference", "float32", "cpu", "v1:aa",
                        "mlp_relu-inductor-inference-float32-cpu", "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", 2)
    return IssueState(sig=SIG, sigs=[SIG, "v1:old"], alt=["alt:1"], checks=["v1:aa"], runs=["run-1", "run-2"],
                      first_seen="2026-11-01T00:00:00Z", last_seen="2026-11-02T00:00:00Z", occurrences=2,
                      affected=[row], torch=["2.13.0+cpu"], best_repro=[0, 0, 1], flaky=False, regression=True,
                      passing_runs=[PassingRun("run-3", None, ["v1:aa"], "2.13.0")],
                      repro=True)


def body(marker: str, text: str = "## Wrong results\n\nsome text\n") -> str:
    return f"{text}\n{marker}\n"


def test_a_state_comes_back_from_an_issue_body_exactly():
    s = full_state()
    assert st.read(body(s.marker())) == (s, None)
    assert st.parse(body(s.marker())) == s


def test_fields_a_newer_version_wrote_are_kept_and_written_back():
    d = full_state().to_json() | {"future_field": {"kept": [1, 2]}}
    s = st.parse(body(fp.make_marker(d)))
    assert s.extra == {"future_field": {"kept": [1, 2]}}
    assert fp.parse_marker(s.marker())["future_field"] == {"kept": [1, 2]}


def test_text_that_would_end_the_html_comment_cannot_break_the_marker():
    s = full_state()
    s.affected[0].model = "evil --> @alice #1 <b>"
    text = body(s.marker())
    assert "-->" not in s.marker()[:-3] and "@alice" not in text and "#1" not in text
    assert st.parse(text).affected[0].model == "evil --> @alice #1 <b>"


def test_a_state_filed_before_repro_was_recorded_is_judged_by_its_best_repro_and_stays_without_it():
    d = {k: v for k, v in full_state().to_json().items() if k != "repro"}
    s = st.parse(body(fp.make_marker(d)))
    assert s.repro is None and s.has_repro                       # minimized, verified: [0, 0, n]
    assert "repro" not in fp.parse_marker(s.marker())
    d["best_repro"] = [2, 1, 10 ** 9]                           # not reproduced
    assert not st.parse(body(fp.make_marker(d))).has_repro


def test_a_body_without_a_marker_has_no_state_and_no_complaint():
    assert st.read("just text") == (None, None)
    assert st.read(None) == (None, None)
    assert st.read("") == (None, None)


def test_a_marker_that_is_not_the_last_line_is_not_read():
    """Only the last line counts: a marker quoted in a pasted log is not the issue's state."""
    text = body(full_state().marker()) + "\na comment someone added below\n"
    assert st.read(text) == (None, None)


def _edited(**changes) -> str:
    d = full_state().to_json()
    for k, v in changes.items():
        if v is KeyError:
            d.pop(k)
        else:
            d[k] = v
    return body(fp.make_marker(d))


@pytest.mark.parametrize("changes, field", [
    ({"sig": ""}, "sig"),
    ({"sig": KeyError}, "sig"),
    ({"sig": "x" * 201}, "sig"),
    ({"sigs": "v2:abc"}, "marker is not an object with a list of signatures"),
    ({"sigs": [SIG, 7]}, "sigs[1]"),
    ({"occurrences": -1}, "occurrences"),
    ({"occurrences": True}, "occurrences"),
    ({"occurrences": "2"}, "occurrences"),
    ({"affected": [{"model": "m"}]}, "affected[0]"),
    ({"affected": [["not", "an", "object"]]}, "affected[0]"),
    ({"best_repro": [0, 0]}, "best_repro"),
    ({"best_repro": [0, False, 1]}, "best_repro"),
    ({"flaky": "yes"}, "flaky"),
    ({"regression": 1}, "regression"),
    ({"repro": "true"}, "repro"),
    ({"first_seen": 20261101}, "first_seen"),
    ({"torch": ["x" * 5000]}, "torch[0]"),
    ({"runs": ["r"] * 1001}, "runs"),
    ({"passing_runs": [{"run": 3}]}, "passing_runs[0].run"),
])
def test_an_edited_state_is_refused_naming_the_field(changes, field):
    s, why = st.read(_edited(**changes))
    assert s is None and why and why.startswith(field)
    assert st.parse(_edited(**changes)) is None


@pytest.mark.parametrize("marker, why", [
    ("<!-- minify-action:v2 not json -->", "not in the form"),
    ("<!-- minify-action:v2 {\"sig\": -->", "not in the form"),
    ("<!-- minify-action:v2 {\"sig\":\"v2:a\"} -->", "list of signatures"),
    ("<!-- minify-action:v2 [1, 2] -->", "not in the form"),
    ("<!-- minify-action:v2 {\"sigs\":[],\"x\":" + "[" * 40 + "]" * 40 + "} -->", "marker is"),
    ("<!-- minify-action:v2 {\"sigs\":[],\"x\":\"" + "a" * 70000 + "\"} -->", "characters"),
])
def test_a_malformed_marker_is_refused_with_its_reason_never_a_crash(marker, why):
    s, reason = st.read(body(marker))
    assert s is None and why in reason


def test_unknown_fields_too_large_to_be_ours_are_dropped_and_the_state_kept():
    d = full_state().to_json() | {"blob": "z" * (st.MAX_EXTRA_CHARS + 10)}
    s, why = st.read(body(fp.make_marker(d)))
    assert why is None and s.extra == {} and s.sigs == full_state().sigs


def test_a_malformed_known_block_is_dropped_and_the_rest_of_the_state_stands():
    d = full_state().to_json() | {"known": {"repro": 42}}
    s, why = st.read(body(fp.make_marker(d)))
    assert why is None and s.known is None and s.occurrences == 2


# --------------------------------------------------------------------------- one run into the state

def _group(tmp_path, name, *rows_and_records):
    run = rundirs.write(tmp_path / name, [r for r, _ in rows_and_records], [f for _, f in rows_and_records if f])
    return load_run(run)[1]


def _failing(model, **kw):
    row = rundirs.check(model)
    return row, rundirs.failure(row, culprit=Culprit(ops=["aten.relu.default"], method="compiled-alone"), **kw)


def test_a_first_run_makes_a_new_state_with_one_affected_model_and_no_events(tmp_path):
    group = _group(tmp_path, "r1", _failing("mlp_relu"))
    s, events = st.merge_state(None, group, "run-1", "2026-11-01T00:00:00Z")
    assert events == []
    assert s.sig == group[0].fingerprint.primary and s.sigs == [s.sig]
    assert [r.model for r in s.affected] == ["mlp_relu"] and s.affected[0].occurrences == 1
    assert (s.first_seen, s.last_seen, s.occurrences, s.runs) == ("2026-11-01T00:00:00Z",) * 2 + (1, ["run-1"])
    assert s.torch == ["2.13.0+cpu"] and s.has_repro and not s.flaky and not s.regression
    assert st.parse(body(s.marker())) == s


def test_a_later_run_with_a_new_model_and_a_new_torch_says_so(tmp_path):
    s, _ = st.merge_state(None, _group(tmp_path, "r1", _failing("mlp_relu")), "run-1", "2026-11-01")
    later = _group(tmp_path, "r2", _failing("mlp_relu", torch="2.14.0"), _failing("convnet", torch="2.14.0"))
    s2, events = st.merge_state(s, later, "run-2", "2026-11-02")
    assert any(e.startswith("newly affected: convnet (inductor, inference, float32, cpu)") for e in events)
    assert "new torch version: 2.14.0 (still present in 2.14.0)" in events
    assert len([e for e in events if e.startswith("new torch")]) == 1           # once, not per model
    assert {r.model: r.occurrences for r in s2.affected} == {"mlp_relu": 2, "convnet": 1}
    assert s2.occurrences == 3 and s2.runs == ["run-1", "run-2"] and s2.first_seen == "2026-11-01"
    assert s.occurrences == 1                                                   # the old state is untouched


def test_the_same_run_seen_again_is_no_news(tmp_path):
    group = _group(tmp_path, "r1", _failing("mlp_relu"))
    s, _ = st.merge_state(None, group, "run-1", "2026-11-01")
    _, events = st.merge_state(s, group, "run-2", "2026-11-02")
    assert events == []


def test_only_the_last_runs_are_remembered(tmp_path):
    group = _group(tmp_path, "r1", _failing("mlp_relu"))
    s = None
    for k in range(st.MAX_RUNS + 5):
        s, _ = st.merge_state(s, group, f"run-{k}", f"t{k}")
    assert len(s.runs) == st.MAX_RUNS and s.runs[-1] == f"run-{st.MAX_RUNS + 4}"
    assert s.occurrences == st.MAX_RUNS + 5


def test_failing_again_after_passing_runs_is_a_regression(tmp_path):
    group = _group(tmp_path, "r1", _failing("mlp_relu"))
    s, _ = st.merge_state(None, group, "run-1", "t1")
    passed = st.with_passing_run(s, PassingRun("run-2", checks=[]))
    assert passed.passing_runs and not s.passing_runs
    back, _ = st.merge_state(passed, group, "run-3", "t3")
    assert back.regression and back.passing_runs == []


def test_a_flaky_failure_stays_flaky_only_while_every_sighting_is(tmp_path):
    flaky = _group(tmp_path, "r1", _failing("mlp_relu", flaky=True))
    solid = _group(tmp_path, "r2", _failing("mlp_relu"))
    s, _ = st.merge_state(None, flaky, "run-1", "t1")
    assert s.flaky
    s, _ = st.merge_state(s, solid, "run-2", "t2")
    assert not s.flaky


def test_labels_a_first_sighting_new_then_regression_and_keep_what_people_added(tmp_path):
    group = _group(tmp_path, "r1", _failing("mlp_relu"))
    s, _ = st.merge_state(None, group, "run-1", "t1")
    first = st.labels_for(s, group, [], "minify-bot")
    assert first == ["minify-bot", "accuracy", "inductor", "new"]
    s.regression = True
    later = st.labels_for(s, group, first + ["needs-triage"], "minify-bot")
    assert "regression" in later and "new" not in later and "needs-triage" in later
    s.flaky = True                                   # a flaky bug is never called a regression
    flaky = st.labels_for(s, group, later, "minify-bot")
    assert "flaky" in flaky and "regression" not in flaky and "needs-triage" in flaky


def test_a_class_or_stage_outside_the_known_words_never_becomes_a_label(tmp_path):
    row = rundirs.check("mlp_relu")
    rec = rundirs.failure(row, stage="inductor")
    run = rundirs.write(tmp_path / "r", [row], [rec])
    doc = json.loads((run / "failures" / row.id / "failure.json").read_text())
    doc["stage"] = "@everyone"
    (run / "failures" / row.id / "failure.json").write_text(json.dumps(doc))
    group = load_run(run)[1]
    s, _ = st.merge_state(None, group, "run-1", "t1")
    labels = st.labels_for(s, group, [], "minify-bot")
    assert "@everyone" not in labels and labels[:2] == ["minify-bot", "accuracy"]


# --------------------------------------------------------------------------- a bug on many checks

def test_a_bug_on_more_checks_than_a_state_may_list_is_read_back_on_the_next_run(tmp_path):
    """``validate`` refuses a list of over MAX_LIST entries, and a refused state is an issue the
    next run does not find (it files the bug again): the bot never writes one, and its marker
    leaves the body room under GitHub's limit."""
    rows = [check_row(f"m{i:04d}") for i in range(st.MAX_LIST + 200)]
    group = load_run(write_run(tmp_path / "r1", rows, {c["id"]: failure_record(c) for c in rows}))[1]
    assert len({f.fingerprint.primary for f in group}) == 1       # one bug
    s, _ = st.merge_state(None, group, "run-1", "2026-11-01")
    assert st.read(body(s.marker())) == (s, None)
    assert len(s.marker()) <= st.STATE_BUDGET and 100 <= len(s.checks) <= st.MAX_LIST
    assert s.sigs == [group[0].fingerprint.primary]
    assert group[-1].fingerprint.check_key in s.checks          # the most recently seen are kept
    again, events = st.merge_state(s, group, "run-2", "2026-11-02")
    assert st.read(body(again.marker())) == (again, None) and again.occurrences == 2 * len(group)
    assert events == []          # the checks it could not keep are not "newly affected" every run


def test_a_state_full_of_signatures_keeps_its_own_and_takes_the_new_one(tmp_path):
    """The issue is found by ``sigs``: trimmed, the list keeps the issue's own signature (first)
    and the one this run failed with, and drops the oldest others."""
    others = [f"v2:{i:020x}" for i in range(st.MAX_LIST - 1)]
    d = full_state().to_json() | {"sigs": [*others[:500], SIG, *others[500:]],
                                  "checks": [f"v1-check:{i:020x}" for i in range(st.MAX_LIST)]}
    old, why = st.read(body(fp.make_marker(d)))
    assert why is None
    group = _group(tmp_path, "r1", _failing("mlp_relu"))
    s, _ = st.merge_state(old, group, "run-9", "2026-11-09")
    assert st.read(body(s.marker())) == (s, None)
    assert s.sigs[0] == SIG and s.sigs[-1] == group[0].fingerprint.primary and len(s.sigs) <= st.MAX_LIST
    assert others[0] not in s.sigs and others[-1] in s.sigs
    assert s.checks[-1] == group[0].fingerprint.check_key and len(s.checks) <= st.MAX_LIST


def test_a_marker_too_large_for_the_body_is_compacted_oldest_first():
    """Long texts (affected rows of long model names) are cut before what matching needs."""
    s = full_state()
    s.affected = [AffectedCheck(f"model_{i}_" + "x" * 190, "inductor", "inference", "float32", "cpu", f"v1:{i}",
                                f"check-{i}", "2026-11-01", f"2026-11-{i % 28 + 1:02d}", 1) for i in range(50)]
    s.checks = [f"v1-check:{i:020x}" for i in range(st.MAX_LIST)]
    small = st.compact(s, 20000)
    assert len(small.marker()) <= 20000 and small.sigs == s.sigs and small.checks == s.checks[-len(small.checks):]
    assert {a.last_seen for a in small.affected} >= {"2026-11-28"}    # the latest seen rows stay
    assert st.compact(small, 20000) == small                          # nothing more to cut
