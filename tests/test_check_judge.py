"""bot/check/judge.py: one check's verdict by the benchmark harness's rules. Small models from a
YAML model file and custom dynamo backends ('module:function') that are right, a little off, wrong,
fail to compile or fail at run time; nothing is compiled by inductor. The checks run in one child
process, as the sweep runs a check in a process of its own (the judge sets global torch state), and
each test reads the row its check produced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bot.check.judge import tolerance_for
from bot.check.settings import Settings
from bot.records import Spec

ROOT = Path(__file__).resolve().parent.parent

MODELS = '''
import torch

class Lin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.fc(x)) + 1.0


def lin(batch_size=None):
    return Lin(), (torch.randn(batch_size or 4, 8),)


class No64(Lin):
    def forward(self, x):
        if x.dtype == torch.float64:
            raise RuntimeError("this model does not run in float64")
        return super().forward(x)


def no64(batch_size=None):
    return No64(), (torch.randn(4, 8),)


class Broken(torch.nn.Module):
    def forward(self, x):
        raise ValueError("eager is broken: index 9 out of range")


def broken(batch_size=None):
    return Broken(), (torch.randn(4, 8),)


CALLS = [0]


class Drifts(torch.nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        return x * CALLS[0]


def drifts(batch_size=None):
    return Drifts(), (torch.randn(4, 8),)


def missing_package(batch_size=None):
    import no_such_model_library_xyz  # noqa: F401


def not_implemented(batch_size=None):
    raise NotImplementedError("no kernel for this device")


def _each(out, fn):
    return type(out)(fn(o) for o in out) if isinstance(out, (list, tuple)) else fn(out)


def off_by_a_bit(gm, example_inputs):
    return lambda *args: _each(gm(*args), lambda t: t + 1e-2)


def off_by_a_hair(gm, example_inputs):
    return lambda *args: _each(gm(*args), lambda t: t * (1 + 1e-7))


def gradients_off(gm, example_inputs):
    """The same forward values; the gradients through them are scaled by 1.5."""
    return lambda *args: _each(gm(*args), lambda t: t + (t - t.detach()) * 0.5)


def cannot_compile(gm, example_inputs):
    raise RuntimeError("lowering aten.relu failed")


def fails_at_run(gm, example_inputs):
    def run(*args):
        raise RuntimeError("kernel crashed at run time")
    return run
'''

YAML = '''
models:
  lin: {factory: "jmodels:lin"}
  lin_tolerant: {factory: "jmodels:lin", tolerance: 0.1}
  no64: {factory: "jmodels:no64"}
  broken: {factory: "jmodels:broken"}
  drifts: {factory: "jmodels:drifts"}
  missing_package: {factory: "jmodels:missing_package"}
  not_implemented: {factory: "jmodels:not_implemented"}
'''

# name: (model, settings)
CHECKS = {
    "right": ("lin", {"backend": "eager"}),
    "a_hair_off": ("lin", {"backend": "jmodels:off_by_a_hair"}),
    "off": ("lin", {"backend": "jmodels:off_by_a_bit"}),
    "off_tolerated": ("lin_tolerant", {"backend": "jmodels:off_by_a_bit"}),
    "gradients_off": ("lin", {"backend": "jmodels:gradients_off"}),
    "gradients_off_in_training": ("lin", {"backend": "jmodels:gradients_off", "mode": "training"}),
    "right_in_training": ("lin", {"backend": "aot_eager", "mode": "training"}),
    "right_in_bfloat16": ("lin", {"backend": "eager", "dtype": "bfloat16"}),
    "no_float64": ("no64", {"backend": "eager"}),
    "compile_fails": ("lin", {"backend": "jmodels:cannot_compile"}),
    "run_fails": ("lin", {"backend": "jmodels:fails_at_run"}),
    "eager_fails": ("broken", {"backend": "eager"}),
    "eager_drifts": ("drifts", {"backend": "eager"}),
    "missing_package": ("missing_package", {"backend": "eager"}),
    "not_implemented": ("not_implemented", {"backend": "eager"}),
    "on_the_gpu": ("lin", {"backend": "eager", "device": "cuda"}),   # no GPU here: it cannot load, but is set up
}

RUNNER = '''
import json, sys
from bot.check.judge import judge
from bot.check.settings import Settings
from bot.records import Spec
from bot.suites.model_file import yaml_models

specs = {m.name: m.spec for m in yaml_models(sys.argv[1])}
out = {}
for name, (model, settings) in json.loads(sys.argv[2]).items():
    phases = []
    row = judge(specs[model], Settings(**settings), phases.append)
    out[name] = dict(row.to_json(), phases=phases)
print("@@" + json.dumps(out, default=str))
'''


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    d = tmp_path_factory.mktemp("judge")
    (d / "jmodels.py").write_text(MODELS)
    (d / "models.yaml").write_text(YAML)
    cache = d / "inductor-cache"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(d)]), "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(RUNNER), str(d / "models.yaml"), json.dumps(CHECKS)],
                       env=env, capture_output=True, text=True, timeout=600, cwd=d)
    assert p.returncode == 0, p.stderr[-4000:]
    assert not [f for f in cache.rglob("*") if f.is_file()], "a judge test compiled with inductor"
    return json.loads(p.stdout.rpartition("@@")[2])


def test_a_model_whose_compiled_result_matches_passes_with_its_numbers(rows):
    row = rows["right"]
    assert (row["status"], row["failure_class"], row["error"]) == ("pass", None, None)
    acc = row["accuracy"]
    assert (acc["tolerance"], acc["cosine"]) == (1e-4, False)
    assert acc["rmse_res"] == pytest.approx(acc["rmse_ref"]) and row["batch_size"] == 4
    assert row["phases"] == ["load", "fp64", "eager_1st", "eager_2nd", "compile", "compare"]


def test_a_difference_within_the_tolerance_passes(rows):
    assert rows["a_hair_off"]["status"] == "pass"


def test_a_difference_beyond_the_tolerance_is_an_accuracy_failure(rows):
    row = rows["off"]
    assert (row["status"], row["failure_class"], row["error"]) == ("fail_accuracy", "accuracy", None)
    acc = row["accuracy"]
    assert acc["max_abs_diff"] == pytest.approx(1e-2, rel=1e-2) and acc["rmse_res"] > 10 * acc["rmse_ref"]


def test_a_model_files_tolerance_is_the_one_used(rows):
    row = rows["off_tolerated"]
    assert row["status"] == "pass" and row["accuracy"]["tolerance"] == 0.1


def test_training_compares_the_gradients_not_only_the_outputs(rows):
    assert rows["right_in_training"]["status"] == "pass"
    assert rows["gradients_off"]["status"] == "pass"                   # inference: the outputs agree
    row = rows["gradients_off_in_training"]
    assert (row["status"], row["failure_class"]) == ("fail_accuracy", "accuracy")


def test_bfloat16_is_judged_with_the_harness_s_looser_tolerance(rows):
    row = rows["right_in_bfloat16"]
    assert row["status"] == "pass" and row["accuracy"]["tolerance"] == 1e-2


def test_a_model_that_does_not_run_in_float64_is_judged_by_cosine_similarity(rows):
    row = rows["no_float64"]
    assert row["status"] == "pass" and row["accuracy"]["cosine"] is True


def test_a_backend_that_fails_to_compile_is_a_compile_error_with_its_cause(rows):
    row = rows["compile_fails"]
    assert (row["status"], row["failure_class"]) == ("fail_to_run", "compile_error")
    err = row["error"]
    assert err["wrapper"] == "BackendCompilerFailed" and err["type"] == "RuntimeError"
    assert "lowering aten.relu failed" in err["message"] and "Traceback" in err["traceback"]
    assert row["phases"][-1] == "compile" and "compile_s" in row


def test_compiled_code_that_fails_when_run_is_a_runtime_error(rows):
    row = rows["run_fails"]
    assert (row["status"], row["failure_class"]) == ("fail_to_run", "runtime_error")
    assert "kernel crashed at run time" in row["error"]["message"]


def test_a_model_that_fails_in_eager_is_an_eager_error_never_a_compiler_bug(rows):
    row = rows["eager_fails"]
    assert (row["status"], row["failure_class"]) == ("eager_1st_run_fail", "eager_error")
    assert (row["error"]["type"], row["error"]["message"]) == ("ValueError", "eager is broken: index 9 out of range")
    assert "compile" not in row["phases"]


def test_two_eager_runs_that_differ_are_an_eager_error(rows):
    row = rows["eager_drifts"]
    assert (row["status"], row["failure_class"], row["error"]["type"]) == \
        ("eager_two_runs_differ", "eager_error", "EagerNondeterminism")
    assert "compile" not in row["phases"]


def test_a_model_that_cannot_be_set_up_is_a_setup_failure(rows):
    row = rows["missing_package"]
    assert (row["status"], row["failure_class"], row["error"]["type"]) == \
        ("model_fail_to_load", "setup_error", "ModuleNotFoundError")
    assert row["phases"] == ["load"]


def test_a_model_not_implemented_here_fails_to_load_as_an_eager_error(rows):
    row = rows["not_implemented"]
    assert (row["status"], row["failure_class"], row["error"]["type"]) == \
        ("model_fail_to_load", "eager_error", "NotImplementedError")


@pytest.mark.parametrize("settings, options, expected", [
    (Settings(), {}, (1e-4, False)),
    (Settings(dtype="float16"), {}, (1e-3, False)),
    (Settings(dtype="amp"), {}, (1e-3, False)),
    (Settings(dtype="bfloat16"), {}, (1e-2, False)),
    (Settings(mode="training", device="cuda"), {}, (1e-3, False)),
    (Settings(mode="training"), {}, (1e-4, False)),
    (Settings(), {"tolerance": 0.05, "cosine": True}, (0.05, True)),
    (Settings(mode="training"), {"tolerance": 0.05, "training_tolerance": 0.2}, (0.2, False)),
    (Settings(), {"training_tolerance": 0.2}, (1e-4, False)),
])
def test_the_tolerance_follows_the_harness_and_the_models_own_options(settings, options, expected):
    assert tolerance_for(Spec(options=options), settings) == expected


def test_a_gpu_check_records_the_numerics_flags_the_harness_set_and_a_cpu_check_none(rows):
    """On a GPU, TF32 and cuDNN's flags change the numbers: a check there records what the harness's
    setup set, and the minify worker and the repros run the graph under it, as the check did."""
    flags = rows["on_the_gpu"]["numerics"]
    assert flags["deterministic_algorithms"] == "warn_only" and flags["torch.backends.cudnn.deterministic"] is True
    assert flags["torch.backends.cudnn.allow_tf32"] is False
    assert "numerics" not in rows["right"]


def test_a_long_messages_traceback_keeps_the_python_frames_and_the_message_keeps_all_of_it():
    """A compile error's message is the compiler's whole output; the traceback's kept tail must
    still show where in Python it was raised (a chain of two, as inductor wraps it)."""
    from bot.check.judge import MESSAGE_LINES, TRACEBACK_LINES, error_info

    output = "C++ compile error\n" + "\n".join(f"k.cpp:{i}:1: warning: unused variable" for i in range(300))

    def compile_kernel():
        raise RuntimeError(output)

    def lower_graph():
        try:
            compile_kernel()
        except RuntimeError as exc:
            raise ValueError("backend failed:\n" + output) from exc

    try:
        lower_graph()
    except ValueError as exc:
        err = error_info(exc)
    tb = err.traceback
    assert len(tb.splitlines()) <= TRACEBACK_LINES
    assert "in lower_graph" in tb and "in compile_kernel" in tb      # both exceptions' frames
    assert f"[... {301 - MESSAGE_LINES + 1} more lines of this message: see the full error message]" in tb
    assert "k.cpp:50:1" not in tb and "k.cpp:50:1" in err.message  # the output stays in the message
