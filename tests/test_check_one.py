"""bot/check/one.py: one check in a fresh interpreter (``python -m bot.check.one``), started by
``launch`` as minify's capture and the sweep's retry start it. Its row is written when the check ran,
whatever it found; no row means the process died. Nothing is compiled by inductor here (eager and
custom backends)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from bot.check.one import CheckRequest, launch, read_row
from bot.check.settings import Settings
from bot.records import Spec

ROOT = Path(__file__).resolve().parent.parent

BACKENDS = '''
import torch

def off_by_one(gm, example_inputs):
    def run(*args):
        out = gm(*args)
        return type(out)(o + 1 for o in out) if isinstance(out, (list, tuple)) else out + 1
    return run
'''


def _check(tmp_path, spec, settings):
    (tmp_path / "my_backends.py").write_text(BACKENDS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    log = tmp_path / "check.log"
    row, res = launch(CheckRequest(spec, settings), cwd=str(tmp_path), log_path=str(log), timeout=300, env=env,
                      capture=1 << 20)
    # the request it was given is in its directory, as the child read it
    assert CheckRequest.read(str(tmp_path / "check.json")) == CheckRequest(spec, settings)
    assert log.read_text().startswith("$ ") and "-m bot.check.one --check check.json --out row.json" in log.read_text()
    return res, row


def test_a_passing_check_writes_its_row(tmp_path):
    res, row = _check(tmp_path, Spec(source="zoo", model="mlp_relu"), Settings(backend="eager"))
    assert res.returncode == 0, res.output
    assert row.status == "pass" and row.failure_class is None
    assert "[check] phase" in res.output  # the phases it went through, for a death's report
    assert not (tmp_path / "row.json.tmp").exists()


def test_a_wrong_backend_is_an_accuracy_failure_and_still_exit_0(tmp_path):
    res, row = _check(tmp_path, Spec(source="zoo", model="mlp_relu"),
                      Settings(backend="my_backends:off_by_one"))
    assert res.returncode == 0, res.output
    assert row.status == "fail_accuracy" and row.failure_class == "accuracy"


def test_a_process_that_dies_leaves_no_row(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text("aborts: {factory: 'user_models:aborts'}\n")
    spec = Spec(source="yaml", file=str(models), model="aborts", factory="user_models:aborts")
    (tmp_path / "user_models.py").write_text((ROOT / "tests" / "data" / "user_models.py").read_text())
    (tmp_path / "row.json").write_text('{"status": "pass"}')   # an earlier run's row is not this run's
    res, row = _check(tmp_path, spec, Settings(backend="eager"))
    assert res.signal == signal.SIGABRT, res.output[-2000:]  # the model's os.abort(), not a bad request
    assert row is None
    assert read_row(str(tmp_path / "never-written.json")) is None


def test_a_row_that_does_not_parse_is_no_row_and_a_missing_interpreter_is_an_error(tmp_path):
    """A child that writes something that is not a row (here an interpreter stand-in that only spoils
    the row file): ``launch`` gives no row, and the caller classifies the run by how it ended."""
    spoiler = tmp_path / "spoiler"
    spoiler.write_text('#!/bin/sh\neval out=\\${$#}\nprintf \'{"status": \' > "$out"\n')
    spoiler.chmod(0o755)
    request = CheckRequest(Spec(source="zoo", model="mlp_relu"), Settings(backend="eager"))
    row, res = launch(request, cwd=str(tmp_path / "a"), log_path=str(tmp_path / "a.log"), timeout=60,
                      env=dict(os.environ), python=str(spoiler))
    assert res.returncode == 0 and (tmp_path / "a" / "row.json").read_text() == '{"status": '
    assert row is None
    row, res = launch(request, cwd=str(tmp_path / "b"), log_path=str(tmp_path / "b.log"), timeout=60,
                      env=dict(os.environ), python=str(tmp_path / "no-such-python"))
    assert res.error and "cannot start" in res.error and row is None
