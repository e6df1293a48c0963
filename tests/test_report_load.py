"""bot/report/load.py: what a report reads of a run directory (failing checks with their failure
record and repro, the passing ones), the report's options' defaults, the run's id and the commit
and build that count as evidence. Run directories written by the product's own writers."""

from __future__ import annotations

import json

import pytest

from bot import rundir
from bot.check.settings import Settings
from bot.errors import UsageError
from bot.report import load
from tests import rundirs


def test_failures_passing_and_the_rest(tmp_path):
    bad, ok, skipped = rundirs.check("mlp_relu"), rundirs.check("gru", status="pass", failure_class=None), \
        rundirs.check("conv_bn", status="pass_due_to_skip", failure_class=None)
    unminified = rundirs.check("resblock", failure_class="crash", status="fail_to_run")
    run = rundirs.write(tmp_path / "run", [bad, ok, skipped, unminified], [rundirs.failure(bad)])
    results, failures, passing = load.load_run(run)
    assert [c.model for c in passing] == ["gru"]  # a skip is no evidence of a pass
    assert [f.check.model for f in failures] == ["mlp_relu", "resblock"]
    minimized, crashed = failures
    assert minimized.failure.id == bad.id and minimized.repro_text == rundirs.REPRO
    assert minimized.dir == rundir.failure_dir(run, bad.id)
    assert crashed.failure is None and crashed.dir is None and crashed.repro_text is None
    assert minimized.fingerprint != crashed.fingerprint
    assert results.complete


def test_a_repro_path_outside_the_failure_directory_is_not_read(tmp_path):
    bad = rundirs.check("mlp_relu")
    rec = rundirs.failure(bad)
    rec = rec.replace(repro=rec.repro.replace(path="../outside.py"))
    run = rundirs.write(tmp_path / "run", [bad], [rec], repro_text=None)
    (run / rundir.FAILURES_DIR / "outside.py").write_text("not this failure's")
    _, failures, _ = load.load_run(run)
    assert failures[0].failure is not None and failures[0].repro_text is None


def test_a_directory_without_results_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        load.load_run(tmp_path)
    (tmp_path / rundir.RESULTS).write_text(json.dumps({"schema": "nope"}))
    with pytest.raises(UsageError):
        load.load_run(tmp_path)


def test_run_id_is_stable_and_tells_runs_apart(tmp_path):
    rows = [rundirs.check("mlp_relu"), rundirs.check("gru", status="pass", failure_class=None)]
    a = load.default_run_id(load.load_run(rundirs.write(tmp_path / "a", rows))[0])
    assert a == load.default_run_id(load.load_run(tmp_path / "a")[0]) and a.startswith("run-")
    other = rundirs.write(tmp_path / "b", rows, settings=Settings(dtype="bfloat16"))
    assert load.default_run_id(load.load_run(other)[0]) != a


def test_evidence_is_the_commit_and_build_of_this_environment():
    assert load.trusted_evidence({}) is None
    assert load.trusted_evidence({"MINIFY_BOT_BUILD": "img@sha256:1"}) is None  # no commit: a local run
    sha = "a" * 50
    assert load.trusted_evidence({"GITHUB_SHA": sha}) == "a" * 40
    assert load.trusted_evidence({"GITHUB_SHA": f" {sha} ", "MINIFY_BOT_BUILD": " img "}) == "a" * 40 + "@img"


def test_the_report_stage_has_one_options_type():
    import bot.report
    from bot.options import ReportOptions

    assert bot.report.ReportOptions is ReportOptions and not hasattr(load, "ReportOptions")
