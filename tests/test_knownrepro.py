"""The known repro the report renders from a failure's repro.py (bot/knownrepro.py): torch's own
format is taken apart by parsing and only its graph, inputs and plain settings come back; anything
the check job's model code could have put there to run later does not."""

from __future__ import annotations

import pytest

from bot import knownrepro
from tests.ghstub.rundir import REPRO

TORCH_FORMAT = REPRO.replace(
    "relu = torch.ops.aten.relu.default(arg0_1);  arg0_1 = None",
    "add = torch.ops.aten.add.Tensor(arg0_1, 16)\n"
    "        gt = torch.ops.aten.gt.Tensor(add, arg0_1);  add = arg0_1 = None\n"
    "        conv = torch.ops.prims.convert_element_type.default(gt, torch.int64);  gt = None\n"
    "        relu = torch.ops.aten.full.default([2, -3], -inf, dtype=torch.float32, device=device(type='cpu'))",
).replace("import torch._inductor.config\n", "import torch._inductor.config\ntorch.backends.cudnn.allow_tf32 = True\n")


def test_torchs_format_renders_with_its_graph_inputs_and_settings():
    out = knownrepro.render(TORCH_FORMAT)
    assert out is not None
    compile(out, "repro.py", "exec")
    for kept in ("torch.ops.prims.convert_element_type.default(gt, torch.int64)", "add = arg0_1 = None",
                 "reader.tensor(buf0, (4, 8), is_leaf=True)", "torch.backends.cudnn.allow_tf32 = True",
                 "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'", "save_dir=None"):
        assert kept in out, kept
    assert knownrepro.render(out) == out   # its own output renders to itself
    no_inputs = TORCH_FORMAT.replace("    buf0 = reader.storage(None, 128)\n    reader.tensor(buf0, (4, 8), "
                                     "is_leaf=True)  # arg0_1", "    pass  # the graph reads no input")
    assert "pass" in knownrepro.render(no_inputs)


@pytest.mark.parametrize("change", [
    ("relu = torch.ops.aten.relu.default(arg0_1)", "relu = self.evil(arg0_1)"),
    ("relu = torch.ops.aten.relu.default(arg0_1)", "relu = torch.ops.evil.run.default(arg0_1)"),
    ("relu = torch.ops.aten.relu.default(arg0_1)", "relu = torch.ops.aten.from_file.default('/etc/passwd')"),
    ("relu = torch.ops.aten.relu.default(arg0_1)", "relu = torch.ops.aten.relu.default(__import__('os'))"),
    ("relu = torch.ops.aten.relu.default(arg0_1)", "relu = torch.ops.aten.relu.default(**{'x': arg0_1})"),
    ("reader.tensor(buf0, (4, 8), is_leaf=True)", "reader.tensor(buf0, (4, 8), hook=print)"),
    ("buf0 = reader.storage(None, 128)", "buf0 = open('/etc/passwd')"),
    ("accuracy='accuracy'", "accuracy=__import__('os').system('id')"),
])
def test_anything_but_torch_ops_on_tensors_renders_nothing(change):
    old, new = change
    assert old in REPRO
    assert knownrepro.render(REPRO) is not None
    assert knownrepro.render(REPRO.replace(old, new)) is None, new
