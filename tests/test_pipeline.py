"""bot/minify/pipeline.py: what one failure's minify decides before and around the worker: the
worker's job comes from the stage's options and the check (nothing defaulted again), the capture
levels, the config fallbacks, and the failures that are not minified (written with their reason,
no compile)."""

from __future__ import annotations

import json

import pytest

from bot import rundir
from bot.check.settings import Settings
from bot.failure import FailureRecord
from bot.minify import pipeline as pl
from bot.minify import verify as ver
from bot.options import MinifyOptions
from bot.records import Accuracy, CheckError, CheckRow, ConfigDiff, ConfigEntry, RunSettings, Spec
from tests.ghstub.rundir import check_row, row_of


def _row(model, **kw) -> CheckRow:
    return row_of(check_row(model, **kw))


def _failure(tmp_path, row=None, **opts) -> pl.Failure:
    row = row or _row("mlp_relu", status="fail_accuracy", failure_class="accuracy")
    return pl.Failure(row, Settings(), MinifyOptions(**opts).resolved(), FailureRecord.for_check(row),
                      str(tmp_path / "f"), str(tmp_path / "w"), lambda m: None)


def test_the_workers_job_takes_every_value_from_the_options_and_the_check(tmp_path):
    f = _failure(tmp_path, budget=42.0, strict_accuracy=True, offload_to_disk=True, no_bisect=True)
    f.row.accuracy = Accuracy(tolerance=0.02)
    f.row.config = {"inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}
    f.rec.stage, f.stage_backend = "inductor", "inductor"
    job = pl.job_for(f, "/w/launcher.py", "/w/minify0")
    assert (job.budget, job.strict_accuracy, job.offload_to_disk, job.bisect) == (42.0, True, True, False)
    assert job.tolerance == 0.02 and job.check_config == f.row.config and job.failure_class == "accuracy"
    assert job.deadline is None and not job.isolate   # the deadline starts when the worker does


def test_the_defaults_of_a_job_are_the_stages_defaults(tmp_path):
    f = _failure(tmp_path)
    f.rec.stage = "inductor"
    job = pl.job_for(f, "/w/launcher.py", "/w/minify0")
    assert job.budget == MinifyOptions.default_of("budget") and job.bisect
    assert job.tolerance == pl.CHECK_TOLERANCE   # the check's row named none


def test_a_check_that_aborted_its_process_is_minified_one_process_per_query(tmp_path):
    row = _row("m", status="fail_to_run", failure_class="runtime_error")
    row.error = CheckError(type="UncaughtCppException", message="terminate called", traceback="", frames=[])
    job = pl.job_for(_failure(tmp_path, row), "/w/l.py", "/w/m0")
    assert job.isolate


def test_a_program_judged_by_its_exit_status_alone_leaves_the_class_to_the_graph(tmp_path):
    row = _row("m", status="fail_to_run", failure_class="runtime_error")
    row.classified_by = "exit status"
    assert pl.job_for(_failure(tmp_path, row), "/w/l.py", "/w/m0").class_uncertain


def test_an_accuracy_failure_falls_back_from_level_4_to_every_graph_at_level_3():
    opts = MinifyOptions().resolved()
    assert pl.capture_levels("accuracy", opts) == [4, 3]
    assert pl.capture_levels("compile_error", opts) == [2]
    assert pl.capture_levels("accuracy", MinifyOptions(repro_level=2).resolved()) == [2]


def test_a_repro_that_does_not_reproduce_is_repackaged_with_more_settings_in_order():
    diff = [ConfigEntry("inductor.a", 0, 1), ConfigEntry("inductor.b", 0, 2)]
    cfg = ConfigDiff(diff, diff[:1])
    steps = ver.config_fallbacks(cfg, diff[:1])
    assert [c for c, _ in steps] == [diff, None]   # the whole diff, then every setting of the file
    assert [c for c, _ in ver.config_fallbacks(cfg, diff)] == [None]


def _process(tmp_path, row, known=None):
    run = tmp_path / "run"
    said = []
    rec = pl.process(row, Settings(), str(run), MinifyOptions().resolved(), {"torch": "2.13.0"}, said.append,
                     known=known)
    return rec, json.loads((run / "failures" / row.id / rundir.FAILURE).read_text()), said


def test_a_row_that_cannot_be_rerun_is_written_with_its_reason_not_blamed_on_a_stage(tmp_path):
    row = _row("m", status="fail_accuracy", failure_class="accuracy")
    row.spec = None
    rec, doc, said = _process(tmp_path, row)
    assert doc["repro"]["reason"] == pl.NO_SPEC and doc["stage"] is None and rec.repro.status == "none"
    # the runner stopped at the step that settled it, and said each step's seconds
    steps = next(line for line in said if line.startswith(f"{row.id}: steps: "))
    assert [part.split()[0] for part in steps.split(": ", 2)[2].split(", ")] == ["given_launcher", "screen"]


def test_an_internal_error_while_minifying_is_written_as_the_failures_reason(tmp_path):
    """The pipeline's own crash (here: a known-bug entry that is not one) still writes the record."""
    rec, doc, said = _process(tmp_path, _row("m", status="fail_accuracy", failure_class="accuracy"), known=[None])
    assert doc["repro"]["status"] == "none"
    assert doc["repro"]["reason"].startswith("minify-bot internal error: AttributeError")
    assert any("internal error" in line for line in said)


def test_an_eager_failure_is_written_with_its_reason_and_not_minified(tmp_path):
    rec, doc, said = _process(tmp_path, _row("m", status="eager_1st_run_fail", failure_class="eager_error"))
    assert doc["repro"]["status"] == "none" and "fails in eager mode" in doc["repro"]["reason"]
    assert doc["class"] == "eager_error" and doc["versions"] == {"torch": "2.13.0"}
    assert any("skipped" in line for line in said)
    assert not (tmp_path / "run" / rundir.WORK_DIR).exists()   # the scratch space is gone


def test_a_program_that_compiled_nothing_is_not_a_compiler_failure(tmp_path):
    row = _row("cmd", status="fail_to_run", failure_class="runtime_error")
    row.spec = Spec(source="command", command="python x.py", cwd=str(tmp_path), model="cmd")
    row.compiled_graphs = 0
    _, doc, _ = _process(tmp_path, row)
    assert doc["repro"]["reason"] == pl.COMPILED_NOTHING


@pytest.mark.parametrize("fclass", ["timeout", "oom", "setup_error"])
def test_a_failure_class_minify_does_not_reduce_is_written_with_its_own_reason(tmp_path, fclass):
    rec, doc, said = _process(tmp_path, _row("m", status="fail_to_run", failure_class=fclass))
    assert doc["repro"]["status"] == "none" and doc["repro"]["reason"] == pl.NOT_MINIFIED[fclass]
    assert doc["class"] == fclass and rec.stage is None and "localize" not in doc["repro"]["timings"]
    assert said[0] == f"{rec.id}: skipped: {pl.NOT_MINIFIED[fclass]}"


def test_a_class_minify_does_not_know_is_named_in_the_reason(tmp_path):
    _, doc, _ = _process(tmp_path, _row("m", status="fail_to_run", failure_class="mystery"))
    assert doc["repro"]["reason"] == "failure class 'mystery' is not minified"


def test_a_program_that_compiled_graphs_but_no_frame_is_judged_by_its_frames(tmp_path):
    row = _row("cmd", status="fail_to_run", failure_class="runtime_error")
    row.spec = Spec(source="command", command="python x.py", cwd=str(tmp_path), model="cmd")
    row.compiled_graphs, row.compile_frames = 3, 0
    _, doc, _ = _process(tmp_path, row)
    assert doc["repro"]["reason"] == pl.COMPILED_NOTHING


def test_the_isolate_option_runs_every_query_in_its_own_process(tmp_path):
    assert pl.job_for(_failure(tmp_path, isolate=True), "/w/l.py", "/w/m0").isolate


def test_the_bisector_runs_only_for_a_failure_in_inductor_and_with_the_stages_backend(tmp_path):
    f = _failure(tmp_path)
    f.rec.stage, f.stage_backend = "aot_eager_decomp_partition", "aot_eager_decomp_partition"
    job = pl.job_for(f, "/w/l.py", "/w/m0")
    assert not job.bisect and job.backend == "aot_eager_decomp_partition"
    f.stage_backend = None
    assert pl.job_for(f, "/w/l.py", "/w/m0").backend == "inductor"


def _launcher(path, accuracy: str) -> str:
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from bot.torch_adapter import repro as R

    x = torch.randn(4, 4)
    gm = make_fx(lambda x: (torch.relu(x),))(x)
    path.write_text(R.repro_source(gm, [x], kind="aot", accuracy=accuracy, save_dir=None))
    return str(path)


def test_a_given_launcher_says_its_own_class_and_an_error_launcher_leaves_the_class_to_the_graph(tmp_path):
    f = _failure(tmp_path)
    f.launcher, f.rec.stage = "given", "inductor"
    acc = pl.job_for(f, _launcher(tmp_path / "acc.py", "accuracy"), "/w/m0")
    assert (acc.failure_class, acc.class_uncertain) == ("accuracy", False)
    err = pl.job_for(f, _launcher(tmp_path / "err.py", ""), "/w/m0")
    assert (err.failure_class, err.class_uncertain) == ("error", True)


@pytest.mark.parametrize("row,run,expected", [
    # the row's own settings win, false and empty ones too
    (CheckRow(id="a", backend="aot_eager", dynamic=False, config={}),
     RunSettings(backend="inductor", dynamic=True, config={"a.b": 1}, timeout=9.0),
     Settings(backend="aot_eager", dynamic=False, config={}, timeout=9.0)),
    # what the row does not say comes from the run
    (CheckRow(id="a", mode="training"), RunSettings(backend="eager", dtype="bfloat16", timeout=5.0),
     Settings(backend="eager", mode="training", dtype="bfloat16", timeout=5.0)),
    # neither: the check stage's defaults (a merged matrix names no configuration of its own)
    (CheckRow(id="a"), RunSettings(), Settings()),
])
def test_a_failing_checks_settings_are_its_rows_then_its_runs_then_the_defaults(row, run, expected):
    from bot.commands.minify import _settings_of

    assert _settings_of(row, run) == expected
