"""bot.torch_adapter.numerics: a program's process-wide numerics flags, read where the program
compiled, set again where its graph is minified, and written into the repro as the lines that set
them (the repro is code a maintainer runs: only flags and values of the table get there)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

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


def test_autocast_is_read_for_a_graphs_devices_only_and_its_lines_turn_it_on(tmp_path):
    """Autocast as the capture backend reads it inside the program (not by :func:`numerics.read`,
    which every graph's record takes: an after-AOT graph holds autocast's casts already); the
    repro's line turns it on with the dtype, and a captured graph's state file is validated."""
    code = ("import json, torch; from bot.torch_adapter import numerics as n\n"
            "with torch.autocast('cpu', dtype=torch.bfloat16):\n"
            "    print(json.dumps([n.read_autocast({'cpu'}), n.read_autocast({'cuda'}), n.read()]))")
    on_cpu, on_cuda, flags = json.loads(_python(code))
    assert on_cpu == {"autocast.cpu": "bfloat16"} and on_cuda == {} and flags == {}
    line = numerics.lines(on_cpu)
    assert line == ["torch.set_autocast_enabled('cpu', True); torch.set_autocast_dtype('cpu', torch.bfloat16)"]
    code = (f"import torch\n{line[0]}\n"
            "print((torch.randn(2, 2) @ torch.randn(2, 2)).dtype, (torch.randn(2, 2, dtype=torch.float64) @ "
            "torch.randn(2, 2, dtype=torch.float64)).dtype)")
    assert _python(code) == "torch.bfloat16 torch.float64"   # a float64 reference is never cast
    from bot.torch_adapter.repro import captured_state

    graph = tmp_path / "graph_0.py"
    (tmp_path / "graph_0.state.json").write_text(json.dumps({"autocast": {
        "autocast.cuda": "float16", "autocast.cpu": "bfloat16; import os", "default_dtype": "float64"}}))
    assert captured_state(str(graph)) == {"autocast.cuda": "float16"}
    for bad in ("[not json", "[" * 40000 + "]" * 40000):   # a program wrote it: malformed, or nested to crash a parser
        (tmp_path / "graph_0.state.json").write_text(bad)
        assert captured_state(str(graph)) == {}
    assert captured_state(str(tmp_path / "graph_1.py")) == {}
    # a check row's record never carries autocast (an after-AOT graph holds the casts already)
    assert numerics.validate({"autocast.cpu": "bfloat16", "default_dtype": "float64"}) == {"default_dtype": "float64"}


def test_torchs_dynamo_repro_keeps_the_autocast_it_is_given_for_its_graphs_device(tmp_path):
    """torch's run_repro wraps the graph in autocast(device, enabled=autocast) for the device type of
    its first non-CPU input: told True only when the state turns autocast on for that device."""
    from bot.torch_adapter.repro import repro_source

    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    args = [torch.randn(2, 2)]

    def source(state):
        return repro_source(gm, args, kind="dynamo", accuracy="accuracy", save_dir=str(tmp_path / "s"),
                            backend="inductor", state=state)

    on_cpu = source({"autocast.cpu": "bfloat16"})
    assert "autocast=True" in on_cpu and "torch.set_autocast_dtype('cpu', torch.bfloat16)" in on_cpu
    assert "autocast=False" in source({"autocast.cuda": "float16"})   # a CPU graph: cuda's autocast is not its
    assert "autocast=False" in source({})


def test_tf32s_new_api_is_recorded_alone_and_sets_again():
    """A program that used TF32's per-backend API: recorded as that (not beside the legacy switch,
    which torch refuses to mix with it), and set again without error."""
    code = ("import json, torch; from bot.torch_adapter import numerics as n; "
            "torch.backends.cuda.matmul.fp32_precision = 'tf32'; s = n.read(); "
            "print(json.dumps([s, n.apply(s)]))")
    state, failed = json.loads(_python(code))
    assert state == {"torch.backends.cuda.matmul.fp32_precision": "tf32"} and failed == []


# what each of the CUDA numerics flags reads in a process, "refused" where torch refuses the read (a
# program that mixed TF32's legacy and new APIs): the program's, the worker's and the repro's must agree
_READINGS = """
import json, warnings
import torch
def readings():
    b, m = torch.backends, torch.backends.cuda.matmul
    out = {}
    for name in ("b.fp32_precision", "b.cudnn.fp32_precision", "m.fp32_precision", "b.cudnn.conv.fp32_precision",
                 "b.cudnn.rnn.fp32_precision", "m.allow_tf32", "b.cudnn.allow_tf32",
                 "torch.get_float32_matmul_precision()", "m.allow_fp16_reduced_precision_reduction",
                 "m.allow_fp16_reduced_precision_reduction_split_k", "m.allow_bf16_reduced_precision_reduction",
                 "m.allow_bf16_reduced_precision_reduction_split_k", "m.allow_fp16_accumulation",
                 "torch.get_default_dtype()", "b.cudnn.benchmark"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out[name] = str(eval(name))
            except RuntimeError:
                out[name] = "refused"
    return out
"""

CUDA_PROGRAMS = {
    # the new API on cuDNN conv alone: the legacy cuDNN switch refuses to read; the rest still records
    "conv_ieee": ("torch.backends.cudnn.conv.fp32_precision = 'ieee'\ntorch.set_default_dtype(torch.float64)\n"
                  "torch.backends.cudnn.benchmark = True",
                  {"torch.backends.cudnn.conv.fp32_precision": "ieee", "default_dtype": "float64",
                   "torch.backends.cudnn.benchmark": True}),
    # the root set, then conv set apart from it: every node as it reads, the root first
    "root_then_conv": ("torch.backends.fp32_precision = 'ieee'\ntorch.backends.cudnn.conv.fp32_precision = 'tf32'",
                       {"torch.backends.fp32_precision": "ieee", "torch.backends.cudnn.fp32_precision": "ieee",
                        "torch.backends.cuda.matmul.fp32_precision": "ieee",
                        "torch.backends.cudnn.conv.fp32_precision": "tf32",
                        "torch.backends.cudnn.rnn.fp32_precision": "ieee"}),
    # cuDNN by its legacy switch, cuBLAS by the new API: each backend recorded in the API it reads in
    "legacy_cudnn_new_matmul": ("torch.backends.cudnn.allow_tf32 = False\n"
                                "torch.backends.cuda.matmul.fp32_precision = 'tf32'",
                                {"torch.backends.cudnn.allow_tf32": False,
                                 "torch.backends.cuda.matmul.fp32_precision": "tf32"}),
    # cuBLAS's reduced-precision reductions (split-K only with its switch off) and fp16 accumulation
    "cublas_reductions": ("m = torch.backends.cuda.matmul\nm.allow_fp16_reduced_precision_reduction = (False, False)\n"
                          "m.allow_bf16_reduced_precision_reduction = False\nm.allow_fp16_accumulation = True\n"
                          "torch.backends.cudnn.rnn.fp32_precision = 'ieee'",
                          {"torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": False,
                           "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction_split_k": False,
                           "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": False,
                           "torch.backends.cuda.matmul.allow_fp16_accumulation": True,
                           "torch.backends.cudnn.rnn.fp32_precision": "ieee"}),
}


@pytest.mark.parametrize("program", sorted(CUDA_PROGRAMS))
def test_cuda_numerics_flags_are_recorded_and_set_again_by_the_worker_and_the_repro(program, tmp_path):
    """A program that set CUDA's numerics flags (they are process state on a CPU-only torch too):
    the record names them, and the minify worker (``apply``) and the repro's lines each give a fresh
    process the program's readings, refused reads included."""
    setup, expected = CUDA_PROGRAMS[program]
    seen, state = json.loads(_python(_READINGS + setup + "\nfrom bot.torch_adapter import numerics as n\n"
                                     "print(json.dumps([readings(), n.read()]))"))
    assert state == expected
    worker, failed = json.loads(_python(_READINGS + "from bot.torch_adapter import numerics as n\n"
                                        f"state = json.loads({json.dumps(list(reversed(state.items())))!r})\n"
                                        "f = n.apply(dict(state))\nprint(json.dumps([readings(), f]))"))
    assert failed == [] and worker == seen     # applied in the table's order, whatever the record's
    repro = numerics.with_lines("import torch\n", state)
    (tmp_path / "repro.py").write_text(repro + _READINGS + "print(json.dumps(readings()))\n")
    out = subprocess.run([sys.executable, str(tmp_path / "repro.py")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == seen
