"""bot/check/results.py: results.json kept current on disk row by row, harness CSVs read as rows,
and baselines that mark each failing row new or known and each recovered one fixed."""

from __future__ import annotations

import json

import pytest

from bot import rundir
from bot.check import results
from bot.check.settings import Settings
from bot.errors import UsageError
from bot.records import CheckRow, RunSettings


def _row(model, status):
    return CheckRow(id=f"{model}-inductor-inference-float32-cpu", model=model, status=status,
                    failure_class=rundir.STATUS_CLASS[status])


def test_every_row_is_on_disk_before_the_run_finishes(tmp_path):
    (tmp_path / rundir.FAILURES_DIR).mkdir()
    (tmp_path / rundir.FAILURES_DIR / "old.json").write_text("{}")
    (tmp_path / "keep.txt").write_text("mine")
    w = results.ResultsWriter(str(tmp_path), RunSettings(source="builtin"), versions={"torch": "x"})
    assert not (tmp_path / rundir.FAILURES_DIR).exists()  # an earlier run's outputs are gone
    assert (tmp_path / "keep.txt").read_text() == "mine"  # what is not a run output stays
    w.add(_row("a", "pass"))
    w.add(_row("b", "fail_accuracy"))
    doc = results.load(str(tmp_path))  # as an interrupted sweep would leave it
    assert [r.model for r in doc.checks] == ["a", "b"] and not doc.complete
    csv = rundir.read_csv(str(tmp_path / rundir.RESULTS_CSV))
    assert [(r["name"], r["accuracy"]) for r in csv] == [("a", "pass"), ("b", "fail_accuracy")]
    w.finish()
    doc = results.load(str(tmp_path))
    assert doc.complete and doc.finished and doc.versions == {"torch": "x"}


def test_basic_versions_name_python_and_torch():
    v = results.basic_versions()
    import torch
    assert v["torch"] == torch.__version__ and v["python"].count(".") == 2


def test_csv_rows_carry_status_class_stats_and_device():
    recs = [{"dev": "cuda", "name": "m1", "accuracy": "fail_accuracy", "batch_size": 4, "graph_breaks": 2,
             "compilation_latency": 1.5},
            {"dev": "", "name": "m2", "accuracy": "pass"}]
    rows = results.csv_to_rows(recs, Settings(dtype="amp"))
    assert [r.failure_class for r in rows] == ["accuracy", None]
    assert rows[0].device == "cuda" and rows[1].device == "cpu" and rows[0].dtype == "amp"
    assert rows[0].stats == {"graph_breaks": 2} and rows[0].batch_size == 4 and rows[0].compile_s == 1.5
    assert rows[0].id == "m1-inductor-inference-amp-cuda"
    with pytest.raises(UsageError, match="unknown status word.*'exploded'"):
        results.csv_to_rows([{"name": "m", "accuracy": "exploded"}], Settings())


def test_baseline_marks_new_known_and_fixed(tmp_path):
    w = results.ResultsWriter(str(tmp_path), RunSettings(), versions={})
    for model, status in (("old_bug", "fail_accuracy"), ("was_ok", "pass"), ("got_fixed", "fail_to_run")):
        w.add(_row(model, status))
    w.finish()
    baseline = results.load_baseline(str(tmp_path / rundir.RESULTS))
    now = {m: _row(m, s) for m, s in (("old_bug", "fail_accuracy"), ("was_ok", "fail_accuracy"),
                                      ("got_fixed", "pass"), ("brand_new", "fail_accuracy"))}
    for row in now.values():
        results.mark_baseline(row, baseline)
    assert {m: r.baseline for m, r in now.items()} == {"old_bug": "known", "was_ok": "new", "got_fixed": "fixed",
                                                       "brand_new": "new"}
    assert now["got_fixed"].baseline_status == "fail_to_run" and now["brand_new"].baseline_status is None
    row = _row("x", "fail_accuracy")
    results.mark_baseline(row, None)
    assert row.baseline is None


def test_csv_baseline_matches_by_model_name(tmp_path):
    csv = tmp_path / "expected.csv"
    csv.write_text("name,accuracy\nm1,fail_accuracy\nm2,pass\n")
    baseline = results.load_baseline(str(csv))
    assert baseline == {"name:m1": "fail_accuracy", "name:m2": "pass"}
    row = _row("m1", "fail_accuracy")
    results.mark_baseline(row, baseline)
    assert row.baseline == "known"


def test_unreadable_baselines_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        results.load_baseline(str(tmp_path / "missing.csv"))
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UsageError, match="not a text CSV"):
        results.load_baseline(str(binary))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(UsageError):
        results.load_baseline(str(bad))
