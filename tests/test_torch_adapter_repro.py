"""bot/torch_adapter/repro.py: torch-format repro files written from a real traced graph (torch's own
``save_graph_repro``, nothing compiled) and read back: kind, accuracy, config, inputs, the graph
traced again; files that are not repros are exit 2, a torch minify cannot use is exit 3."""

from __future__ import annotations

import pytest
import torch
import torch._inductor.config as inductor_config
from torch.fx.experimental.proxy_tensor import make_fx

from bot.errors import InfraError, UsageError
from bot.torch_adapter import repro as R


@pytest.fixture
def written(tmp_path):
    torch.manual_seed(0)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    gm = make_fx(lambda x, w: (torch.relu(x @ w) + 1,))(x, w)
    save_dir = tmp_path / "inputs"
    with inductor_config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        src = R.repro_source(gm, [x, w], kind="aot", accuracy="accuracy", save_dir=str(save_dir))
    path = tmp_path / "repro.py"
    path.write_text(src)
    return path, save_dir, (x, w)


def test_a_written_repro_reads_back(written):
    path, save_dir, (x, w) = written
    rf = R.parse_repro_file(str(path))
    assert (rf.kind, rf.accuracy, rf.save_dir) == ("aot", "accuracy", str(save_dir.resolve()))
    assert rf.config["inductor.cpp.inject_relu_bug_TESTING_ONLY"] == "accuracy"
    assert rf.storages and not rf.dynamic
    loaded = R.load_repro_file(rf)
    args = R.read_inputs(loaded, rf.save_dir)
    assert len(args) == 2 and torch.equal(args[0], x) and torch.equal(args[1], w)  # the real inputs, bit for bit


@pytest.mark.parametrize("text,words", [
    ("def f(:\n", "is not valid Python"),
    ("print('hello')\n", "is not a torch repro/minifier launcher"),
])
def test_files_that_are_not_repros_are_usage_errors(tmp_path, text, words):
    path = tmp_path / "repro.py"
    path.write_text(text)
    with pytest.raises(UsageError, match=words):
        R.parse_repro_file(str(path))
    with pytest.raises(UsageError, match="cannot read repro file"):
        R.parse_repro_file(str(tmp_path / "missing.py"))


def test_a_torch_minify_cannot_use_is_an_infra_error():
    assert R.version_tuple("2.13.0+cpu") == (2, 13) and R.version_tuple("2.5.0a0+git123") == (2, 5)
    R.check_repro_api("2.13.0", [])
    with pytest.raises(InfraError, match="torch is not installed"):
        R.check_repro_api(None, [])
    with pytest.raises(InfraError, match="too old for minify"):
        R.check_repro_api("2.4.1", [])
    with pytest.raises(InfraError, match="lacks the repro API minify needs: torch._dynamo.x"):
        R.check_repro_api("2.13.0", ["torch._dynamo.x"])
    R.require_repro_api()  # the dev pin has it all
