"""bot/minify/package.py: what a maintainer downloads. A real torch-format repro (written by torch's
own ``save_graph_repro`` from a traced graph, nothing compiled) is packaged: its inputs are copied
by their hash next to it and read relative to the file, only the config the failure needs is set,
and nothing of this machine (cache directories, absolute paths, linecache glue) survives."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from bot import rundir
from bot.minify import package as pkg
from bot.records import ConfigEntry, ConfigSetting
from bot.torch_adapter.repro import STORAGE_LINE

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
RELU_LINE = "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"
THREADS_LINE = "torch._inductor.config.compile_threads = 1"


@pytest.fixture
def final(tmp_path) -> tuple[Path, Path]:
    """(the worker's final repro, its save dir): written by torch under a config with the bug's
    setting and a harmless one, as step_final writes it."""
    import torch
    import torch._inductor.config as inductor_config
    from torch.fx.experimental.proxy_tensor import make_fx

    from bot.torch_adapter import repro as R

    torch.manual_seed(0)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    gm = make_fx(lambda x, w: (torch.relu(x @ w) + 1,))(x, w)
    save_dir = tmp_path / "work" / "final" / "inputs"
    with inductor_config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy", "compile_threads": 1}):
        src = R.repro_source(gm, [x, w], kind="aot", accuracy="accuracy", save_dir=str(save_dir))
    path = tmp_path / "work" / "final" / rundir.REPRO
    path.write_text(src)
    return path, save_dir


def _hashes(source: str) -> list[str]:
    return [m.group(2) for m in STORAGE_LINE.finditer(source)]


def test_the_packaged_repro_reads_its_inputs_copied_by_hash_from_beside_it(final, tmp_path):
    path, save_dir = final
    out = tmp_path / "failure"
    written = Path(pkg.write_repro(str(path), str(save_dir), str(out), None))
    assert written == out / rundir.REPRO
    hashes = _hashes(path.read_text())
    assert len(hashes) == 2
    copied = sorted(p.name for p in (out / rundir.INPUTS_DIR / "storages").iterdir())
    assert copied == sorted(hashes)
    for h in hashes:
        assert (out / "inputs" / "storages" / h).read_bytes() == (save_dir / "storages" / h).read_bytes()
    text = written.read_text()
    assert text.startswith("# Minimized by minify-bot. Run: python repro.py   (inputs: ./inputs)\n")
    assert pkg.INPUTS_LINE + "\nmod = Repro()\n" in text
    assert "save_dir=_INPUTS" in text and str(save_dir) not in text
    compile(text, "repro.py", "exec")


def test_no_machine_specific_line_or_path_survives_packaging(final, tmp_path):
    path, save_dir = final
    source = path.read_text()
    assert "os.environ['TORCHINDUCTOR_CACHE_DIR']" in source and "__compile_source__" in source
    text = Path(pkg.write_repro(str(path), str(save_dir), str(tmp_path / "failure"), None)).read_text()
    assert "os.environ[" not in text                       # cache and debug directories
    assert "__compile_source__" not in text                 # torch's linecache glue for exec'd strings
    assert str(tmp_path) not in text and "/tmp/" not in text
    assert "\n\n\n" not in text                              # the removed lines leave no runs of blanks


def test_the_files_own_config_is_kept_when_no_minimal_config_is_known(final, tmp_path):
    path, save_dir = final
    text = Path(pkg.write_repro(str(path), str(save_dir), str(tmp_path / "failure"), None)).read_text()
    assert RELU_LINE in text and THREADS_LINE in text


def test_only_the_minimal_config_is_written_after_the_config_imports(final, tmp_path):
    path, save_dir = final
    minimal = [ConfigEntry(RELU, None, "accuracy")]
    text = Path(pkg.write_repro(str(path), str(save_dir), str(tmp_path / "failure"), minimal)).read_text()
    assert THREADS_LINE not in text
    assert text.count(RELU_LINE) == 1
    assert "import torch.fx.experimental._config\n" + RELU_LINE + "\n" in text
    assert text.index(RELU_LINE) < text.index("class Repro(")


def test_an_empty_minimal_config_sets_nothing(final, tmp_path):
    path, save_dir = final
    text = Path(pkg.write_repro(str(path), str(save_dir), str(tmp_path / "failure"), [])).read_text()
    assert RELU_LINE not in text and THREADS_LINE not in text


def test_the_judges_settings_follow_the_config_with_a_comment_saying_why(final, tmp_path):
    path, save_dir = final
    minimal = [ConfigEntry(RELU, value="accuracy")]
    judge = [ConfigSetting("dynamo.repro_tolerance", 0.01), ConfigSetting("dynamo.repro_ignore_non_fp", False)]
    text = Path(pkg.write_repro(str(path), str(save_dir), str(tmp_path / "failure"), minimal, judge)).read_text()
    lines = text.splitlines()
    i = lines.index(RELU_LINE)
    assert lines[i + 1] == "# judged like the check: repro_tolerance=0.01, repro_ignore_non_fp=False"
    assert lines[i + 2:i + 4] == ["torch._dynamo.config.repro_tolerance = 0.01",
                                  "torch._dynamo.config.repro_ignore_non_fp = False"]


def test_the_judge_holds_even_where_the_files_own_config_is_kept(final, tmp_path):
    path, save_dir = final
    judge = [ConfigSetting("dynamo.repro_tolerance", 0.01)]
    text = Path(pkg.write_repro(str(path), str(save_dir), str(tmp_path / "failure"), None, judge)).read_text()
    tolerance = text.index("torch._dynamo.config.repro_tolerance = 0.01")
    assert text.index(RELU_LINE) < tolerance < text.index("class Repro(")


def test_the_standalone_repro_uses_random_inputs_and_no_files(final, tmp_path):
    path, _ = final
    out = tmp_path / "failure"
    out.mkdir()
    written = Path(pkg.write_standalone(str(out), [ConfigEntry(RELU, value="accuracy")], str(path)))
    assert written == out / rundir.STANDALONE
    text = written.read_text()
    assert text.startswith("# Minimized by minify-bot. Run: python repro_standalone.py   (inputs: random)\n")
    assert "save_dir=None" in text and "_INPUTS" not in text and "save_dir='" not in text
    assert RELU_LINE in text and THREADS_LINE not in text
    assert not (out / rundir.INPUTS_DIR).exists()
    compile(text, rundir.STANDALONE, "exec")


def test_inputs_missing_from_the_save_dir_are_counted_not_invented(final, tmp_path):
    path, save_dir = final
    source = path.read_text()
    first, second = _hashes(source)
    os.remove(save_dir / "storages" / second)
    dest = tmp_path / "inputs"
    assert pkg.copy_inputs(source, str(save_dir), str(dest)) == (1, 1)
    assert [p.name for p in (dest / "storages").iterdir()] == [first]
    assert pkg.copy_inputs(source, None, str(tmp_path / "none")) == (0, 2)


def test_a_storage_read_twice_is_copied_once(tmp_path):
    h = "ab" * 20
    (tmp_path / "save" / "storages").mkdir(parents=True)
    (tmp_path / "save" / "storages" / h).write_bytes(b"1234")
    source = f"    buf0 = reader.storage('{h}', 4)\n    buf1 = reader.storage('{h}', 4)\n"
    assert pkg.copy_inputs(source, str(tmp_path / "save"), str(tmp_path / "dest")) == (1, 0)


def test_this_machines_own_home_and_temp_directories_are_machine_paths_wherever_they_are(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    rx = pkg.machine_comment(["/var/lib/builder", str(tmp_path / "link"), "/"])
    assert rx.match("# saved from /var/lib/builder/src/model.py")
    assert rx.match(f"# cache in {tmp_path}/real/x") and rx.match(f"# cache in {tmp_path}/link/x")
    assert rx.match("# saved from /home/someone/model.py")          # the usual ones stay
    assert not rx.match("# see https://github.com/pytorch/pytorch/issues/1")   # a root home is no sign


def test_a_comment_naming_a_home_or_temp_directory_is_dropped_and_other_comments_kept():
    source = ("import torch\n# saved from /home/builder/src/model.py\n# torch version: 2.13.0\n"
              "x = '/opt/data/weights/w.bin'\nclass Repro(torch.nn.Module):\n    pass\n"
              "mod = Repro()\n")
    text = pkg.clean_source(source, None, standalone=False, name="repro.py")
    assert "/home/builder" not in text and "# torch version: 2.13.0" in text
    assert "x = 'w.bin'" in text                            # an absolute path keeps its file name only
    assert re.search(r"(?m)^import os$", text)               # _INPUTS needs os, imported when missing


def test_a_dynamo_graph_holding_its_weights_keeps_their_values_in_its_repro_and_its_package(tmp_path):
    """Under ``inductor.freezing`` in an inference program dynamo keeps a model's parameters and
    buffers in the graph as attributes, and torch's after-dynamo ``Repro()`` makes each one
    ``torch.randn``: a BatchNorm's random running variance then makes every output NaN in eager and
    compiled alike, and the bug is gone. The repro saves their values beside its inputs; loaded as
    the worker loads it (and after packaging, relative to the file), the graph has the program's
    weights and only the real input is an input."""
    import torch

    from bot.torch_adapter import repro as R

    class Stem(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = torch.nn.Conv2d(1, 4, 2), torch.nn.BatchNorm2d(4)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

    torch.manual_seed(0)
    model = Stem().eval()
    model.bn.running_var.uniform_(0.5, 2.0)
    model.conv.weight.requires_grad_(False)
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(2, 1, 5, 5)
    save_dir = tmp_path / "capture" / "graph_0_inputs"
    src = R.repro_source(gm, [x], kind="dynamo", accuracy="", save_dir=str(save_dir), backend="eager")
    first = tmp_path / "capture" / "graph_0.py"
    first.write_text(src)
    packaged = pkg.write_repro(str(first), str(save_dir), str(tmp_path / "pkg"), None)

    for path in (first, Path(packaged)):
        rf = R.parse_repro_file(str(path))
        loaded = R.load_repro_file(rf)
        args = R.read_inputs(loaded, rf.save_dir)
        assert len(args) == 1 and torch.equal(args[0], x)
        got = dict(R.trace_dynamo_graph(loaded).state_dict())
        assert got.keys() == model.state_dict().keys()
        for name, value in model.state_dict().items():
            assert torch.equal(got[name], value), name
        weights = dict(loaded.mod.named_parameters())
        assert isinstance(weights["bn.weight"], torch.nn.Parameter) and not weights["conv.weight"].requires_grad
        assert torch.equal(loaded.mod.eval()(*args), model(x))   # torch writes submodules in training mode
    # with no saved inputs (repro_standalone.py, the random-input check) the weights are random too
    loaded = R.load_repro_file(R.parse_repro_file(str(first)))
    R.read_inputs(loaded, None)
    assert not torch.equal(dict(loaded.mod.named_parameters())["conv.weight"], model.conv.weight)
    # a weight past the budget stays random (the run directory must stay within what the report reads)
    big = torch.fx.symbolic_trace(Stem().eval())
    big.register_buffer("table", torch.ones(R.ATTR_TENSOR_BYTES // 4 + 1))
    text = R.repro_source(big, [x], kind="dynamo", accuracy="", save_dir=str(tmp_path / "big"), backend="eager")
    assert f"# table: {R.ATTR_TENSOR_BYTES + 4} bytes, not saved (past the repro's budget): random" in text
    assert "_minify_bot_attr(reader, 'conv.weight'" in text and "_minify_bot_attr(reader, 'table'" not in text
    # torch's own run_repro reads the file with a counting reader first: the file runs as it is
    import subprocess
    import sys

    p = subprocess.run([sys.executable, str(first)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert p.returncode == 0, p.stderr[-3000:]


def _no_input_graph():
    """An int64 ``arange`` times a constant, traced as AOTAutograd traces it: a graph that reads no
    input (torch's writer writes no ``load_args`` line for it)."""
    import torch
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(lambda: (torch.arange(16, dtype=torch.int64) * 3,), core_aten_decompositions())()


def test_a_graph_without_inputs_writes_a_repro_that_is_python_and_loads_back(tmp_path):
    import ast

    from bot.minify.worker.predicate import load_graph
    from bot.torch_adapter import repro as R

    src = R.repro_source(_no_input_graph(), [], kind="aot", accuracy="accuracy", save_dir=str(tmp_path / "in"))
    ast.parse(src)   # torch alone writes ``def load_args(reader):`` with nothing under it
    path = tmp_path / rundir.REPRO
    path.write_text(src)
    rf, gm, args = load_graph(str(path))
    assert args == [] and [n.op for n in gm.graph.nodes].count("placeholder") == 0
    assert [n.target._opname for n in gm.graph.nodes if n.op == "call_function"] == ["arange", "mul"]
    packaged = pkg.write_repro(str(path), rf.save_dir, str(tmp_path / "pkg"), [], None)
    ast.parse(Path(packaged).read_text())


def test_a_repro_that_is_not_python_is_an_internal_error_naming_the_line():
    from bot.errors import InfraError
    from bot.torch_adapter.repro import checked_source

    with pytest.raises(InfraError, match=r"not valid Python \(line 2: .*'x = \('"):
        checked_source("import torch\nx = (\n")
    assert checked_source("x = 1\n") == "x = 1\n"


@pytest.mark.slow  # runs torch's run_repro on the written file, which compiles the graph
def test_a_repro_of_a_graph_without_inputs_runs_as_written(tmp_path):
    import subprocess
    import sys

    from bot.torch_adapter import repro as R

    path = tmp_path / rundir.REPRO
    path.write_text(R.repro_source(_no_input_graph(), [], kind="aot", accuracy="accuracy",
                                   save_dir=str(tmp_path / "in")))
    out = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
