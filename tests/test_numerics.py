"""bot.torch_adapter.numerics: a program's process-wide numerics flags, read where the program
compiled, set again where its graph is minified, and written into the repro as the lines that set
them (the repro is code a maintainer runs: only flags and values of the table get there)."""

from __future__ import annotations

import json
import subprocess
import sys

from bot.minify import package
from bot.torch_adapter import numerics

STATE = {"torch.backends.cuda.matmul.allow_tf32": True, "torch.backends.cudnn.allow_tf32": False,
         "float32_matmul_precision": "high", "torch.backends.cudnn.benchmark": True,
         "deterministic_algorithms": "warn_only", "default_dtype": "float64"}


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_a_fresh_process_reads_nothing_and_the_state_it_is_given_reads_back():
    code = ("import json, sys; from bot.torch_adapter import numerics as n; before = n.read(); "
            f"failed = n.apply({STATE!r}); print(json.dumps([before, failed, n.read()]))")
    before, failed, after = json.loads(_python(code))
    assert before == {} and failed == [] and after == STATE


def test_the_repro_lines_set_the_same_state_in_a_process_of_their_own(tmp_path):
    """The lines a repro carries, run as a file after ``import torch``, give the program's state."""
    launcher = "import torch\nfrom math import inf\nprint('graph')\n"
    text = numerics.with_lines(launcher, STATE)
    assert text.startswith("import torch\n# the program's numerics settings")
    assert text.endswith("from math import inf\nprint('graph')\n")
    repro = package.clean_source(text, None, standalone=True, name="repro.py")   # packaging keeps them
    assert all(line in repro for line in numerics.lines(STATE))
    (tmp_path / "repro.py").write_text(repro + "from bot.torch_adapter import numerics\n"
                                       "import json; print(json.dumps(numerics.read()))\n")
    out = subprocess.run([sys.executable, str(tmp_path / "repro.py")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == STATE


def test_only_known_flags_with_values_they_take_become_code():
    bad = {"os.system('id')": True, "default_dtype": "float64; import os", "torch.backends.cudnn.enabled": 0,
           "float32_matmul_precision": ["high"], "deterministic_algorithms": "on"}
    assert numerics.validate(bad) == {"deterministic_algorithms": "on"}
    assert numerics.lines(bad) == ["torch.use_deterministic_algorithms(True)"]
    assert numerics.validate("not a dict") == {} and numerics.with_lines("x = 1\n", {}) == "x = 1\n"


def test_tf32s_new_api_is_recorded_alone_and_sets_again():
    """A program that used TF32's per-backend API: recorded as that (not beside the legacy switch,
    which torch refuses to mix with it), and set again without error."""
    code = ("import json, torch; from bot.torch_adapter import numerics as n; "
            "torch.backends.cuda.matmul.fp32_precision = 'tf32'; s = n.read(); "
            "print(json.dumps([s, n.apply(s)]))")
    state, failed = json.loads(_python(code))
    assert state == {"torch.backends.cuda.matmul.fp32_precision": "tf32"} and failed == []
