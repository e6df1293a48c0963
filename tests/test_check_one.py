"""bot/check/one.py: one check in a fresh interpreter (``python -m bot.check.one``), as minify's
capture and the sweep's retry run it. Its row is written when the check ran, whatever it found;
no row means the process died. Nothing is compiled by inductor here (eager and custom backends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from bot.check.one import CheckRequest, read_row
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
    request, out = tmp_path / "check.json", tmp_path / "row.json"
    CheckRequest(spec, settings).write(str(request))
    assert CheckRequest.read(str(request)) == CheckRequest(spec, settings)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    proc = subprocess.run([sys.executable, "-m", "bot.check.one", "--check", str(request), "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return proc, read_row(str(out))


def test_a_passing_check_writes_its_row(tmp_path):
    proc, row = _check(tmp_path, Spec(source="zoo", model="mlp_relu"), Settings(backend="eager"))
    assert proc.returncode == 0, proc.stderr
    assert row.status == "pass" and row.failure_class is None
    assert "[check] phase" in proc.stderr  # the phases it went through, for a death's report
    assert not (tmp_path / "row.json.tmp").exists()


def test_a_wrong_backend_is_an_accuracy_failure_and_still_exit_0(tmp_path):
    proc, row = _check(tmp_path, Spec(source="zoo", model="mlp_relu"),
                       Settings(backend="my_backends:off_by_one"))
    assert proc.returncode == 0, proc.stderr
    assert row.status == "fail_accuracy" and row.failure_class == "accuracy"


def test_a_process_that_dies_leaves_no_row(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text("aborts: {factory: 'user_models:aborts'}\n")
    spec = Spec(source="yaml", file=str(models), model="aborts", factory="user_models:aborts")
    (tmp_path / "user_models.py").write_text((ROOT / "tests" / "data" / "user_models.py").read_text())
    proc, row = _check(tmp_path, spec, Settings(backend="eager"))
    assert proc.returncode == -signal.SIGABRT, proc.stderr[-2000:]  # the model's os.abort(), not a bad request
    assert row is None
    assert read_row(str(tmp_path / "never-written.json")) is None
