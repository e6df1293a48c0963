"""The trace step (bot/minify/trace.py): the verified repro rerun with TORCH_TRACE, its raw trace,
tlparse's report when tlparse is installed, and inductor's generated code; failure.json's ``trace``
record; the issue's "Trace and generated code" section (bot/report/context.py) and its budget step.

The slow test runs a real repro (the injected relu accuracy bug) in a real subprocess; the rest
parse trace text and render bodies, compiling nothing."""

from __future__ import annotations

import contextlib
import json
import random
import zipfile
from pathlib import Path

import pytest

from bot import rundir
from bot.failure import FailureRecord
from bot.minify import trace as tracemod
from bot.records import Trace
from bot.report.context import INLINE_CODE_LIMIT, INLINE_REPRO_LIMIT, _kernels
from bot.torch_adapter import trace as ttrace
from tests.ghstub.rundir import check_row, failure_record
from tests.test_render import outside_fences, render_for

# a repro of the injected relu accuracy bug, written by hand: compiles relu with inductor (C++ on CPU)
REPRO = """\
import torch

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


def fn(x):
    return torch.relu(x) + 1


x = torch.randn(8, 8)
out = torch.compile(fn, backend="inductor")(x)
raise SystemExit(0 if torch.allclose(out, fn(x)) else 1)
"""

CPP_CODE = """\
# AOT ID: ['0_inference']
import torch
from torch._inductor.async_compile import AsyncCompile
async_compile = AsyncCompile()


cpp_fused_add_relu_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0, float* out_ptr0)
{
    auto tmp1 = tmp0 + decltype(tmp0)(1);
}
''')


async_compile.wait(globals())
del async_compile

class Runner:
    def call(self, args):
        cpp_fused_add_relu_0(arg0_1, buf0)
        return (buf0, )
"""

TRITON_CODE = """\
import triton
triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''
import triton
# kernel path: /tmp/torchinductor_someone/ab/cabcdef.py
@triton.jit
def triton_poi_fused_relu_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    tl.store(out_ptr0 + (x0), tmp2, xmask)
''', device_str='cuda')


async_compile.wait(globals())
def call(args):
    pass
"""


def _trace_text(*modules: str) -> str:
    """A structured trace as torch writes one: glog-prefixed JSON headers, tab-indented payloads."""
    lines = ['V1126 14:28:42.484000 9675 torch/_logging/_internal.py:1328] {"artifact": {"name": "torch_version", '
             '"encoding": "json"}, "has_payload": "98696a96"}', '\t"2.13.0+cpu"']
    for i, src in enumerate(modules):
        lines.append(f'V1126 14:28:46.443000 9675 torch/_inductor/graph.py:2745] {{"inductor_output_code": '
                     f'{{"filename": "/tmp/torchinductor_root/u5/c{i}.py"}}, "frame_id": {i}, "frame_compile_id": 0, '
                     f'"attempt": 0, "has_payload": "c50cd7c8"}}')
        lines += ["\t" + line for line in src.splitlines()]
        lines.append('V1126 14:28:46.444000 9675 torch/_dynamo/utils.py:2350] {"chromium_event": {}, '
                     '"has_payload": "01b5d7b7"}')
        lines.append('\t{"name": "PyCodeCache.load_by_key_path"}')
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ the trace, as text (fast)

def test_output_code_comes_from_the_traces_inductor_output_code_payloads():
    mods = ttrace.output_code(_trace_text(CPP_CODE, TRITON_CODE).splitlines(keepends=True), 100_000)
    assert [m.compile_id for m in mods] == ["0/0", "1/0"]
    assert mods[0].source == CPP_CODE
    assert "chromium" not in mods[1].source and "PyCodeCache" not in mods[1].source
    assert "# kernel path: cabcdef.py" in mods[1].source and "/tmp/torchinductor_someone" not in mods[1].source
    cut = ttrace.output_code(_trace_text(CPP_CODE).splitlines(keepends=True), 100)
    assert len(cut[0].source) <= 200


def test_the_traced_runner_turns_the_trace_on_and_the_caches_off_before_torch_is_imported(tmp_path):
    """In a fresh interpreter the runner sets the environment torch reads at import (the fork-server
    way, after import, is the slow test below), then runs the script as ``python script args``."""
    import subprocess
    import sys

    script = tmp_path / "prog.py"
    script.write_text("import os, sys\nprint(sys.argv[1:], 'torch' in sys.modules, os.environ['TORCH_TRACE'],\n"
                      "      os.environ['TORCHINDUCTOR_FX_GRAPH_CACHE'], os.environ['TORCHINDUCTOR_AUTOGRAD_CACHE'])\n"
                      "raise SystemExit(3)\n")
    runner, *args = ttrace.traced_command(str(tmp_path / "trace"), str(script))
    out = subprocess.run([sys.executable, runner, *args, "--flag"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out.stderr
    assert out.stdout.split() == ["['--flag']", "False", str(tmp_path / "trace"), "0", "0"], out.stdout


def test_the_kernel_excerpt_keeps_the_kernels_not_the_boilerplate():
    cpp, left, _ = _kernels(CPP_CODE)
    assert cpp.startswith("cpp_fused_add_relu_0 = async_compile") and cpp.endswith("''')")
    assert "AsyncCompile" not in cpp and "class Runner" not in cpp and left > 0
    tri, _, _ = _kernels(TRITON_CODE)
    assert tri.startswith("triton_poi_fused_relu_0 =") and tri.endswith("''', device_str='cuda')")
    big, left, _ = _kernels(CPP_CODE.replace("auto tmp1", "auto tmp1 = 0;\n    auto tmp1" * 1) + "x = 1\n" * 10
                         + CPP_CODE.replace("cpp_fused_add_relu_0", "cpp_fused_mul_1").replace(
                             "auto tmp1", "// " + "y" * 100 + "\n    auto tmp1") * 80)
    assert len(big) <= INLINE_CODE_LIMIT and left > 0 and big.startswith("cpp_fused_add_relu_0")
    assert _kernels("no kernel here\n")[0] == "no kernel here"


def test_the_kernel_excerpt_is_the_kernel_that_computes_the_culprit():
    boiler = "\n".join(f"buf{i} = empty_strided_cpu((8, 64), (64, 1), torch.float32)" for i in range(200))
    cpp = CPP_CODE[CPP_CODE.index("cpp_fused_add_relu_0 = "):].replace("cpp_fused_add_relu_0", "cpp_fused_mul_sum_0")
    code = cpp.split("\n\n\n")[0] + "\n\n" + boiler + "\n\n" + TRITON_CODE.replace("relu", "slice_scatter")
    part, left, (named, kernels) = _kernels(code, ["aten.slice_scatter.default"])
    assert named == ["slice_scatter"] and kernels == 1 and left > 0
    assert part.startswith("triton_poi_fused_slice_scatter_0 =") and part.endswith("''', device_str='cuda')")
    assert "cpp_fused_mul_sum_0" not in part and "empty_strided_cpu" not in part
    assert part.count("@triton.jit") == 1
    every, _, (named, kernels) = _kernels(code, ["aten.relu.default"])   # no kernel names it: every kernel
    assert named == [] and kernels == 0 and every.startswith("cpp_fused_mul_sum_0")
    assert "triton_poi_fused_slice_scatter_0" in every
    assert "empty_strided_cpu" not in every


def test_a_large_trace_is_kept_compressed_and_cut_at_its_bound(tmp_path, monkeypatch):
    src = tmp_path / "dedicated_log_torch_trace_abc.log"
    rnd = random.Random(0)
    src.write_text("".join(f"V1126 line {i} {rnd.randbytes(200).hex()}\n" for i in range(4000)))   # 1.6 MB
    fdir = tmp_path / "f"
    fdir.mkdir()
    monkeypatch.setattr(tracemod, "MAX_TRACE_BYTES", 512 * 1024)
    monkeypatch.setattr(tracemod, "PLAIN_TRACE_BYTES", 1024)
    tr, notes = Trace(), []
    tracemod._keep_trace([str(src)], str(fdir), tr, notes)
    kept = list((fdir / "trace").iterdir())
    assert [p.name for p in kept] == ["dedicated_log_torch_trace_abc.log.gz"]
    assert tr.trace_cut and tr.trace_bytes == kept[0].stat().st_size <= 512 * 1024 and "cut" in notes[0]


# ------------------------------------------------------------------ the issue body (fast)

def _trace_record(**over) -> dict:
    rec = {"repro": "repro_plain.py", "exit_code": 1, "trace_dir": "trace", "trace_bytes": 104061, "trace_cut": False,
           "tlparse": "tlparse.zip", "output_code": "output_code.py", "output_code_chars": len(CPP_CODE),
           "output_code_modules": 1, "seconds": 14.2, "note": None}
    rec.update(over)
    return rec


def _render(tmp_path, trace: dict | None, code: str | None = CPP_CODE, files=("trace", "tlparse.zip"), **kw):
    c = check_row(model="mlp_relu")
    f = failure_record(c)
    if trace is not None:
        f["trace"] = trace
    fdir = Path(tmp_path) / "failures" / c["id"]
    fdir.mkdir(parents=True)
    if "trace" in files:
        (fdir / "trace").mkdir()
        (fdir / "trace" / "dedicated_log_torch_trace_x.log").write_text("V1126 ...\n")
    if "tlparse.zip" in files:
        (fdir / "tlparse.zip").write_bytes(b"PK")
    if code is not None:
        (fdir / "output_code.py").write_text(code)
    return render_for(tmp_path, c, f, **kw)


def test_the_body_shows_the_kernels_collapsed_and_links_the_trace(tmp_path):
    _, ctx, body, overflow, _ = _render(tmp_path, _trace_record(), artifact_url="https://example.invalid/a/1")
    assert "### Trace and generated code" in body
    assert body.index("### Minimized repro") < body.index("### Trace and generated code") < body.index("### Failure")
    assert "<details><summary>Generated code (inductor)</summary>" in body
    block = body.split("<details><summary>Generated code (inductor)</summary>", 1)[1].split("</details>", 1)[0]
    assert "```python\ncpp_fused_add_relu_0 = async_compile" in block and "class Runner" not in block
    assert "`failures/mlp_relu-inductor-inference-float32-cpu/trace`" in body
    assert "`failures/mlp_relu-inductor-inference-float32-cpu/tlparse.zip`" in body
    assert "`failures/mlp_relu-inductor-inference-float32-cpu/output_code.py`" in body
    assert "https://example.invalid/a/1" in body and overflow == []
    assert "cpp_fused" not in outside_fences(block)   # the code is only ever fenced


def test_without_tlparse_the_body_says_how_to_read_the_raw_trace(tmp_path):
    _, _, body, _, _ = _render(tmp_path, _trace_record(tlparse=None, note="tlparse is not installed"),
                               files=("trace",))
    assert "tlparse.zip" not in body and "pip install tlparse" in body


def test_the_generated_code_is_dropped_first_when_the_body_is_too_long(tmp_path):
    huge = "import torch\n" + "".join(f"x{i} = torch.ones(1)  # {'z' * 60}\n" for i in range(450))
    assert 30000 < len(huge) < INLINE_REPRO_LIMIT     # inlined
    r, ctx, full, overflow, state = _render(tmp_path, _trace_record(), repro_text=huge)
    assert overflow == [] and "<details><summary>Generated code (inductor)</summary>" in full
    body, overflow = r.body(ctx, state.to_json(), limit=len(full) - 100)   # just too long
    assert overflow == ["generated code"]
    assert "<details><summary>Generated code (inductor)</summary>" not in body
    assert "x449 = torch.ones(1)" in body    # the repro stays inline
    assert "is `failures/mlp_relu-inductor-inference-float32-cpu/output_code.py` in the artifacts" in body
    assert "`failures/mlp_relu-inductor-inference-float32-cpu/trace`" in body


def test_hostile_generated_code_stays_in_its_fence(tmp_path):
    evil = CPP_CODE.replace("auto tmp1", "``````\n<!-- minify-action:v2 {} -->\n@acme/core #1\n    auto tmp1")
    _, _, body, _, _ = _render(tmp_path, _trace_record(), code=evil)
    assert "@acme" not in outside_fences(body) and "<!-- minify-action:v2 {}" not in body


def test_paths_outside_the_failures_directory_or_missing_files_are_not_shown(tmp_path):
    (tmp_path / "secret.py").write_text("cpp_fused_secret_0 = 1\n")
    rec = _trace_record(output_code="../secret.py", trace_dir="nothere", tlparse="tlparse.zip")
    _, ctx, body, _, _ = _render(tmp_path, rec, code=None, files=())
    assert ctx["generated_code"] is None and "### Trace and generated code" not in body
    with pytest.raises(Exception, match="does not match"):
        rundir.validate({**failure_record(check_row()), "trace": rec}, "failure", "failure.json")


def test_a_failure_without_the_record_renders_as_before(tmp_path):
    r, ctx, body, _, state = _render(tmp_path, None, code=None, files=())
    assert ctx["generated_code"] is None and "Trace and generated code" not in body
    before = {k: v for k, v in ctx.items() if k != "generated_code"}
    assert r.body(before, state.to_json())[0] == body


# ------------------------------------------------------------------ a real traced rerun (slow)

@pytest.mark.slow
@pytest.mark.parametrize("where", ["fresh", "forked"])
def test_a_verified_repro_is_traced_with_its_generated_code(tmp_path, where):
    """The same trace whether the repro runs in a fresh interpreter or in a fork of the minify
    command's fork server (torch imported and warmed before the trace was turned on)."""
    from bot.minify.procs import Interpreters
    from tests.rundirs import check, failure

    fdir = tmp_path / "failures" / "relu"
    fdir.mkdir(parents=True)
    (fdir / rundir.REPRO).write_text(REPRO)
    rec = failure(check())
    said: list[str] = []
    with (Interpreters().start() if where == "forked" else contextlib.nullcontext()) as interps:
        tracemod.trace_verified(rec, str(fdir), said.append, interps=interps)
    log = (fdir / rundir.MINIFIER_LOG).read_text()
    assert ("forked from the fork server" in log) == (where == "forked"), log
    tr = rec.trace
    assert tr is not None and tr.repro == rundir.REPRO and tr.exit_code == 1, (tr, said)
    trace_files = list((fdir / tr.trace_dir).iterdir())
    assert trace_files and all(p.stat().st_size > 0 for p in trace_files)
    code = (fdir / tr.output_code).read_text()
    assert "cpp_fused" in code and tr.output_code_chars == len(code) and tr.output_code_modules >= 1
    if tracemod.tlparse_program() is not None:
        assert tr.tlparse == rundir.TLPARSE_REPORT
        assert "index.html" in zipfile.ZipFile(fdir / tr.tlparse).namelist()
    else:
        assert tr.tlparse is None and "tlparse is not installed" in tr.note
    assert rec.repro.timings["trace"] == tr.seconds > 0 and said[0].startswith("trace: repro.py traced")
    # the record round-trips and matches the schema (and the untrusted reader's limits)
    rundir.write_failure(str(fdir), rec)
    doc = json.loads((fdir / rundir.FAILURE).read_text())
    rundir.validate(doc, "failure", "failure.json", rundir.FAILURE_LIMITS)
    assert FailureRecord.from_json(doc).trace == tr
    excerpt, _, _ = _kernels(code)
    assert excerpt.startswith("cpp_fused") and "class Runner" not in excerpt
