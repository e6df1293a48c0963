"""bot/minify/worker/plain.py: the plain repro (repro_plain.py), public torch APIs only.

Fast tier (nothing compiled): the inputs' inline encoding comes back bit for bit when the generated
code runs (integer edges, nan / inf / -0.0 / denormals, bf16, complex, views with offsets and
strides, two inputs over one storage); past the inline limit the inputs go to inputs/ under their
content hash, which the repro checks; the graph becomes a plain function whose code reads public
torch APIs only (its constants are inputs, its dtype arguments follow fp64=).

Slow tier: real failures end to end through `python -m bot run` (the injected relu accuracy bug on a
built-in model, and a genuine int32 bug whose random inputs do not reproduce): the issue's python
block, written alone into an empty directory, fails the same way, and so do repro.py and
repro_plain.py in the failure's directory."""

from __future__ import annotations

import ast
import base64
import json
import math
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from bot import rundir
from bot.minify.worker import plain, plaincode
from bot.records import ConfigEntry, PlainRepro

ROOT = Path(__file__).resolve().parent.parent


def _rebuild(args) -> list:
    """Encode ``args`` and run the generated make_inputs(): what the repro will feed."""
    import torch

    enc = plain.encode_inputs(args)
    assert enc is not None
    ns = {"torch": torch, "base64": base64, "zlib": zlib}
    exec(plain.inline_inputs_source(enc), ns)  # noqa: S102 - the code under test
    return ns["make_inputs"]()


def _bits(t) -> bytes:
    """A tensor's values as raw bytes in logical order (nan payloads and -0.0 included)."""
    c = t.detach().contiguous()
    start = c.storage_offset() * c.element_size()
    return plain.storage_bytes(c.untyped_storage())[start:start + c.numel() * c.element_size()]


def _edge_inputs():
    import torch

    ints = [torch.tensor([torch.iinfo(dt).min, -1, 0, 1, torch.iinfo(dt).max], dtype=dt)
            for dt in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)]
    special = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0]
    floats = [torch.tensor(special + [torch.finfo(dt).tiny / 4, torch.finfo(dt).max], dtype=dt)
              for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64)]
    payload = torch.tensor([0x7FC00123, 0xFFF00001 - 2**32], dtype=torch.int32).view(torch.float32)  # nan payloads
    return [*ints, *floats, payload, torch.tensor([True, False, True]),
            torch.tensor([1 + 2j, float("nan") - 0.0j], dtype=torch.complex64),
            torch.tensor(3.5), torch.empty(0, 4), 7, -2.5, float("nan"), None]


def test_the_inline_inputs_come_back_bit_for_bit():
    args = _edge_inputs()
    back = _rebuild(args)
    assert len(back) == len(args)
    for a, b in zip(args, back):
        if not hasattr(a, "dtype"):
            assert (math.isnan(a) and math.isnan(b)) if isinstance(a, float) and math.isnan(a) else a == b
            continue
        assert (b.dtype, b.shape, b.stride(), b.storage_offset()) == (a.dtype, a.shape, a.stride(), a.storage_offset())
        assert _bits(b) == _bits(a), a.dtype


def test_views_keep_their_offsets_strides_and_shared_storage():
    import torch

    base = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    view = base[1:, ::3].t()                      # offset 10, strides (3, 10): not contiguous
    other = base[4]                               # the same storage, another offset
    grad = torch.randn(3, 4).requires_grad_()
    back = _rebuild([view, other, grad])
    assert (back[0].shape, back[0].stride(), back[0].storage_offset()) == ((4, 5), (3, 10), 10)
    assert torch.equal(back[0], view) and torch.equal(back[1], other)
    assert back[1].storage_offset() == 40
    # one storage, as in the saved inputs: a write through one input shows in the other
    assert back[0].untyped_storage().data_ptr() == back[1].untyped_storage().data_ptr()
    assert back[0].untyped_storage().nbytes() == base.untyped_storage().nbytes() == 240
    back[1][0] = -1.0
    assert back[0][0, 3].item() == -1.0           # base[4, 0] is view[0, 3]
    assert back[2].requires_grad and back[2].is_leaf and torch.equal(back[2].detach(), grad.detach())
    assert not back[0].requires_grad


def test_the_inputs_hash_is_the_same_before_and_after_and_changes_with_one_bit():
    import torch

    args = _edge_inputs()
    assert plain.inputs_sha256(_rebuild(args)) == plain.inputs_sha256(args)
    flipped = [a.clone() if hasattr(a, "clone") else a for a in args]
    flipped[2].view(torch.uint8)[0] ^= 1
    assert plain.inputs_sha256(flipped) != plain.inputs_sha256(args)


def test_an_input_that_is_no_tensor_and_no_literal_is_refused():
    import torch

    with pytest.raises(plaincode.NotPlain, match="Generator"):
        plain.encode_inputs([torch.Generator()])
    assert plaincode.literal([1, (2,), float("-inf"), torch.float16]) == "[1, (2,), float('-inf'), torch.float16]"


def _final_repro(tmp_path: Path, fn, args, *, config: dict | None = None) -> str:
    """A torch-format repro of ``fn`` traced on ``args``, as the minify worker writes its final one."""
    import torch._inductor.config as inductor_config
    from torch.fx.experimental.proxy_tensor import make_fx

    from bot.torch_adapter import repro as R

    gm = make_fx(fn)(*args)
    final = tmp_path / "work" / "final"
    final.mkdir(parents=True)
    with inductor_config.patch(config or {}):
        src = R.repro_source(gm, list(args), kind="aot", accuracy="accuracy", save_dir=str(final / "inputs"))
    (final / rundir.REPRO).write_text(src)
    return str(final / rundir.REPRO)


def _write(tmp_path: Path, final: str, **kw) -> tuple[PlainRepro, str]:
    out = tmp_path / "failure"
    out.mkdir(exist_ok=True)
    job = plain.PlainJob(final=final, out_dir=str(out), failure_class="accuracy", **kw)
    rec = plain.write(job)
    return rec, (out / rundir.PLAIN).read_text() if rec.path else ""


def _make_inputs(text: str, path: Path):
    """The make_inputs() of a written repro, run as the file would run it (its main not called)."""
    ns = {"__file__": str(path), "__name__": "plain_repro"}
    exec(compile(text, str(path), "exec"), ns)  # noqa: S102 - the code under test
    return ns["make_inputs"]


def test_inputs_past_the_inline_limit_go_to_the_artifacts_named_by_their_hash(tmp_path):
    import torch

    big = torch.randn(128, 129)[:, 1:]             # 64 KiB of values over a larger storage
    ids = torch.tensor([2**31 - 1, -2**31], dtype=torch.int32)
    final = _final_repro(tmp_path, lambda x, i: (x.relu() + 1, i + 16), [big, ids])
    # first choice: the large input made from a seed, the small one exact (verification decides)
    rec, text = _write(tmp_path, final)
    assert rec.inputs_inline and rec.inputs_random and "_rand((128, 128), (129, 1), torch.float32, 'cpu')" in text
    back = _make_inputs(text, tmp_path / "failure" / rundir.PLAIN)()
    assert torch.equal(back[1], ids) and back[0].shape == big.shape and not torch.equal(back[0], big)
    # when that does not fail the same way: the saved inputs, in the artifacts
    rec, text = _write(tmp_path, final, make_inputs=False)
    assert not rec.inputs_inline and rec.inputs_bytes > plain.INLINE_LIMIT == 40 * 1024
    assert rec.inputs_file == f"{rundir.INPUTS_DIR}/{rundir.PLAIN_INPUTS}"
    assert re.fullmatch(r"[0-9a-f]{64}", rec.inputs_sha256)
    assert f'INPUTS_SHA256 = "{rec.inputs_sha256}"' in text and "_storage('" not in text
    assert len(text) < 8000
    loaded = _make_inputs(text, tmp_path / "failure" / rundir.PLAIN)()
    assert torch.equal(loaded[0], big) and loaded[0].stride() == big.stride() and torch.equal(loaded[1], ids)
    # another file under the same name is refused before anything runs
    torch.save([torch.zeros(128, 128)[:, 1:], ids], tmp_path / "failure" / rec.inputs_file)
    with pytest.raises(SystemExit) as exit_:
        _make_inputs(text, tmp_path / "failure" / rundir.PLAIN)()
    assert exit_.value.code == 2


def test_64_kb_of_ids_and_masks_are_compressed_inline_within_what_an_issue_inlines(tmp_path):
    """What a ranker or a masked model feeds (ids, a mask, a few floats) compresses: 64 KB of it
    stays inline, and the file is short enough for the issue to inline it."""
    import torch

    from bot.report.context import INLINE_REPRO_LIMIT

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 1000, (4096,), generator=g, dtype=torch.int64)     # 32 KB
    mask = torch.rand(16384, generator=g) > 0.5                                 # 16 KB
    w = torch.randn(64, 64, generator=g)                                        # 16 KB
    final = _final_repro(tmp_path, lambda i, m, w: (w[i % 64].sum(-1) * m[:4096],), [ids, mask, w])
    rec, text = _write(tmp_path, final)
    assert rec.inputs_inline and rec.inputs_file is None, rec
    assert len(text) < INLINE_REPRO_LIMIT, len(text)
    back = _make_inputs(text, tmp_path / "failure" / rundir.PLAIN)()
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(back, [ids, mask, w]))


def test_when_random_inputs_fail_the_same_way_large_inputs_are_made_from_a_seed_not_carried(tmp_path):
    import torch

    big = torch.randn(32, 65)[:, 1:]                     # 8 KB of floats over a larger storage
    ids = torch.tensor([3, 1], dtype=torch.int64)
    final = _final_repro(tmp_path, lambda x, i: (x.relu() + i.sum(),), [big, ids])
    rec, text = _write(tmp_path, final, random_inputs=True)
    assert rec.inputs_random and rec.inputs_inline and rec.inputs_file is None, rec
    assert "made from a seed" in text and "_rand((32, 64), (65, 1), torch.float32, 'cpu')" in text
    made = _make_inputs(text, tmp_path / "failure" / rundir.PLAIN)
    a, b = made(), made()
    assert (a[0].shape, a[0].stride(), a[0].dtype) == (big.shape, big.stride(), big.dtype)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], big)      # seeded: the same on every call
    assert torch.equal(a[1], ids)                                       # small inputs stay exact
    # all of them made: integers are zeros, as in torch's own repros
    text = plain.inline_inputs_source(plain.encode_inputs([big, ids]), {0, 1})
    assert "_rand((2,), (1,), torch.int64, 'cpu')" in text and "base64" not in text
    # small inputs are carried exactly even so: they cost less than the lines that make them
    final = _final_repro(tmp_path / "small", lambda x: (x.relu(),), [torch.randn(4, 8)])
    rec, text = _write(tmp_path / "small", final, random_inputs=True)
    assert not rec.inputs_random and rec.inputs_inline and "_rand(" not in text


def test_the_inline_limit_is_on_the_encoded_size(tmp_path):
    import torch

    x = torch.randn(48, 8)
    final = _final_repro(tmp_path, lambda x: (x.relu(),), [x])
    size = len(base64.b64encode(zlib.compress(x.numpy().tobytes(), 9)))
    rec, text = _write(tmp_path, final, inline_limit=size)
    assert rec.inputs_inline and rec.inputs_bytes == size and rec.inputs_file is None
    assert torch.equal(_make_inputs(text, tmp_path / "failure" / rundir.PLAIN)()[0], x)
    rec, text = _write(tmp_path, final, inline_limit=size - 1, make_inputs=False)
    assert not rec.inputs_inline and rec.inputs_file and "base64" not in text


def _private_uses(text: str) -> list[str]:
    """``torch._x`` attribute chains (whole ones) outside ``torch.ops``, and imports of private torch modules."""
    tree = ast.parse(text)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and id(n) not in inner:
            chain, v = [n.attr], n.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            chain.reverse()
            if isinstance(v, ast.Name) and v.id == "torch" and chain[0] != "ops" and any(
                    p.startswith("_") for p in chain):
                found.append("torch." + ".".join(chain))
        elif isinstance(n, ast.Import):
            found += ["import " + a.name for a in n.names if any(p.startswith("_") for p in a.name.split("."))]
    return found


def test_the_graph_is_a_plain_function_of_public_apis_with_its_constants_and_dtypes(tmp_path):
    import torch

    def f(x):
        half = x.to(torch.float16) * 2
        full = torch.full((2,), float("-inf"), dtype=torch.float16)
        return half.max(dim=1)[0], full, torch.tensor([1.0, float("inf")]) + x[0, :2]

    final = _final_repro(tmp_path, f, [torch.randn(4, 8)],
                         config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
    rec, text = _write(tmp_path, final, config=[ConfigEntry("inductor.cpp.inject_relu_bug_TESTING_ONLY", None,
                                                            "accuracy")],
                       numerics={"float32_matmul_precision": "high"})
    assert rec.path == rundir.PLAIN and rec.inputs_inline, rec.reason
    assert "\ndef fn(arg0_1, c_tensor_constant0, *, fp64=False):\n" in text   # the constant is an input
    assert "dtype=torch.float64 if fp64 else torch.float16" in text     # the fp64 reference's dtypes
    assert "= None" not in text.split("def fn(", 1)[1].split("def make_inputs", 1)[0]   # FX's dead-value lines
    assert "torch.set_float32_matmul_precision('high')" in text
    assert "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'" in text
    assert "from torch import device" in text and "inf = float('inf')" in text
    config_lines = {"import torch._inductor.config", "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY"}
    assert set(_private_uses(text)) <= config_lines, _private_uses(text)
    assert "run_repro" not in text and "rand_strided" not in text
    compile(text, rundir.PLAIN, "exec")
    # the function computes what the graph computes, and in float64 with fp64=True
    ns = {"__file__": str(tmp_path / "failure" / rundir.PLAIN), "__name__": "plain_repro"}
    exec(compile(text, rundir.PLAIN, "exec"), ns)  # noqa: S102
    inputs = ns["make_inputs"]()
    out = ns["fn"](*inputs)
    assert out[0].dtype == torch.float16 and torch.equal(out[0], f(inputs[0])[0])
    ref = ns["fn"](*[t.double() for t in inputs], fp64=True)
    assert [t.dtype for t in ref] == [torch.float64] * 3


def test_a_graph_that_calls_private_or_unknown_code_is_not_written_as_a_plain_repro():
    import torch
    import torch.fx as fx

    g = fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_function(torch.nn.functional.relu, (x,)),))
    assert plain.graph_function(fx.GraphModule(torch.nn.Module(), g))[0].startswith("def fn(x):")
    mine = fx.Graph()
    y = mine.placeholder("x")
    mine.output((mine.call_function(_private_uses, (y,)),))   # a function of its own module: not torch
    with pytest.raises(plaincode.NotPlain, match="not public torch API only"):
        plain.graph_function(fx.GraphModule(torch.nn.Module(), mine))
    assert plain._not_public("def fn(x):\n    return torch._C._nn.gelu(torch.ops.higher_order.foo(x))\n") == [
        "torch._C._nn.gelu", "torch.ops.higher_order.foo"]
    assert plain._not_public("def fn(x):\n    return torch.ops.aten._to_copy.default(x)\n") == []


def test_a_failure_record_with_a_plain_repro_follows_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    from bot.failure import FailureRecord
    from tests import rundirs

    rec = rundirs.failure(rundirs.check())
    rec.repro.plain = PlainRepro(path=rundir.PLAIN, inputs_inline=False, inputs_file="inputs/plain_inputs.pt",
                                 inputs_sha256="0" * 64, inputs_bytes=70000, runs=3, failed_same_way=3)
    doc = {**rec.to_json(), "schema": "minify-action/failure/v1"}
    schema = json.loads((ROOT / "bot" / "schemas" / "failure.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert FailureRecord.from_json(doc).repro.plain.reproduces
    doc["repro"]["plain"]["inputs_sha256"] = "not a hash"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


# --- slow: real failures end to end ------------------------------------------------------------------

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
RANKER = ROOT / "benchmarks" / "genuine" / "ranker_int32.py"   # int32 ids near 2**31: random ones pass
CASES = {
    "relu-accuracy": ["--models", "mlp_relu", "--config", f"{RELU}=accuracy"],
    "relu-compile_error": ["--models", "mlp_relu", "--config", f"{RELU}=compile_error"],
    "genuine-ranker-int32": ["--command", f"{sys.executable} {RANKER}"],
}


@pytest.fixture(scope="module", params=list(CASES))
def filed(request, workdir, bot):
    """One `minify-bot run` (check, minify, report to a local tracker): (case, failure directory,
    failure.json, the bug issue's body)."""
    name = request.param
    out, issues = workdir / name / "out", workdir / name / "issues"
    p = bot("run", *CASES[name], "--out", out, "--issues-dir", issues, "--no-bisect")
    assert p.returncode == 1, p.stderr[-4000:]
    (fdir,) = (out / "failures").iterdir()
    rec = json.loads((fdir / rundir.FAILURE).read_text())
    assert rec["repro"]["status"] == "minimized", (rec["repro"]["reason"], p.stderr[-3000:])
    (body,) = [t for t in (f.read_text() for f in sorted(issues.glob("*.md"))) if "### Minimized repro" in t]
    return name, fdir, rec, body


def _python_block(body: str) -> str:
    m = re.search(r"### Minimized repro\n.*?^(`{3,})python\n(.*?)\n\1$", body, re.S | re.M)
    assert m, body[:3000]
    return m.group(2) + "\n"


def _run(path: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``python <path>`` in ``cwd``, as a maintainer runs it (without minify-bot on the path)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(path)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _fails_like(rec: dict, p: subprocess.CompletedProcess) -> None:
    out = p.stdout + p.stderr
    assert p.returncode == 1, out[-3000:]
    if rec["class"] == "accuracy":
        assert re.search(r"AccuracyError: 1 of 1 outputs of torch.compile\(fn, backend='inductor'\) are wrong "
                         r"\(tolerance 0.0001", out), out[-3000:]
        assert re.search(r"output 0 \(float32 \[[0-9, ]+\]\): max abs error [0-9.e+-]+ against eager; RMSE against "
                         r"fp64: compiled [0-9.e+-]+, eager [0-9.e+-]+", out), out[-3000:]
    else:
        assert rec["signature"]["exc_type"] in out, out[-3000:]


@pytest.mark.slow
def test_the_issue_inlines_the_short_or_plain_repro_and_a_copy_paste_of_it_fails_alone(filed, tmp_path):
    name, fdir, rec, body = filed
    section = body.split("### Minimized repro", 1)[1].split("\n### ", 1)[0]
    plain_rec = rec["repro"]["plain"]
    short = bool(plain_rec.get("short_path")) and plain_rec["short_failed_same_way"] == plain_rec["short_runs"] > 0
    code = _python_block(body)
    paste = tmp_path / "paste"
    paste.mkdir()
    if short:   # the repro as a person writes it: public names, seeded inputs, a judge of a few lines
        assert "Save as `repro_short.py` and run `python repro_short.py`." in section, section[:2000]
        assert "Paste it into an empty directory and run it: it needs no other file" in section
        assert code == (fdir / rundir.SHORT).read_text()
        ops = [op for op in rec["repro"]["graph"] if op["op"] not in ("output",)]
        assert len(code.splitlines()) <= (30 if len(ops) <= 3 else 60), code
        assert "torch.ops.aten" not in code and "_storage(" not in code and "base64" not in code, code
        assert "AccuracyError" in code if rec["class"] == "accuracy" else "raises" in code
        (paste / rundir.SHORT).write_text(code)
        p = _run(paste / rundir.SHORT, paste)
        out = p.stdout + p.stderr
        assert p.returncode == 1, out[-3000:]
        assert ("AccuracyError: output 0 of the compiled function is wrong" if rec["class"] == "accuracy"
                else rec["signature"]["exc_type"]) in out, out[-3000:]
        assert sorted(x.name for x in paste.iterdir()) == [rundir.SHORT]
        return
    made = ", the large ones made from a seed (the failure does not hang on their values, as its runs showed; " \
           "the saved ones are in the artifacts)" if plain_rec.get("inputs_random") else ""
    assert f"Save as `repro_plain.py` and run `python repro_plain.py`: its inputs are inline{made}, it needs no " \
           "other file." in section and "This is the plain repro" in section, section[:2000]
    assert code == (fdir / rundir.PLAIN).read_text()
    assert "def fn(" in code and "torch.compile(fn, backend='inductor')" in code
    assert "run_repro" not in code and "rand_strided" not in code and "reader.storage" not in code
    assert set(_private_uses(code)) <= {f"import {m}" for m in ("torch._inductor.config",)} | {
        f"torch._inductor.config.{RELU.split('.', 1)[1]}"}, _private_uses(code)
    (paste / rundir.PLAIN).write_text(code)
    _fails_like(rec, _run(paste / rundir.PLAIN, paste))
    assert sorted(p.name for p in paste.iterdir()) == [rundir.PLAIN]   # it needed, and wrote, nothing else
    if name == "genuine-ranker-int32":   # the saved values matter: random inputs do not reproduce it
        assert rec["repro"]["verification"]["random_inputs_reproduce"] is False
        assert "torch.int32" in code


@pytest.mark.slow
def test_the_launcher_and_the_plain_repro_both_reproduce(filed, tmp_path):
    _, fdir, rec, _ = filed
    r = rec["repro"]
    assert r["verification"]["failed_same_way"] == r["verification"]["runs"] == 3
    assert r["plain"] == {**r["plain"], "path": rundir.PLAIN, "inputs_inline": True, "inputs_file": None,
                          "runs": 3, "failed_same_way": 3, "reason": None}
    if r["plain"].get("short_path"):   # the short form is verified the same way
        assert r["plain"]["short_runs"] == 3, r["plain"]
    assert re.fullmatch(r"[0-9a-f]{64}", r["plain"]["inputs_sha256"]) and 0 < r["plain"]["inputs_bytes"] <= 65536
    assert r["timings"]["plain"] > 0
    launcher = _run(fdir / rundir.REPRO, tmp_path)
    out = launcher.stdout + launcher.stderr
    assert launcher.returncode != 0 and ("AccuracyError" if rec["class"] == "accuracy"
                                         else rec["signature"]["exc_type"]) in out, out[-3000:]
    _fails_like(rec, _run(fdir / rundir.PLAIN, tmp_path))


@pytest.mark.slow
def test_a_dynamo_graph_judged_by_a_training_step_gets_a_plain_repro_that_fails_on_a_gradient(tmp_path):
    """A dynamo-level graph of a check that ran a backward (the genuine avg_pool2d ``ceil_mode``
    backward bug of benchmarks/genuine/cnn_train_avgpool.py, pytorch/pytorch#198119: the forward
    agrees, the gradient does not): the plain repro runs forward and backward together, eager,
    fp64 and compiled, and names the wrong gradient; the forward alone would pass."""
    import torch
    import torch.nn.functional as F

    from bot.torch_adapter import repro as R

    graphs = []

    def keep(gm, example_inputs):   # the graph as dynamo hands it to a backend
        graphs.append(gm)
        return gm.forward

    x = torch.randn(2, 4, 10, 10, generator=torch.Generator().manual_seed(0))
    torch._dynamo.reset()
    torch.compile(lambda x: F.avg_pool2d(x, 3, stride=2, ceil_mode=True), backend=keep)(x)
    gm = graphs[0]
    final = tmp_path / "work" / "final"
    final.mkdir(parents=True)
    (final / rundir.REPRO).write_text(R.repro_source(gm, [x], kind="dynamo", accuracy="accuracy",
                                                     save_dir=str(final / "inputs"), backend="inductor"))
    rec, text = _write(tmp_path, str(final / rundir.REPRO), training=True, config=[])
    assert rec.path == rundir.PLAIN and rec.inputs_inline, rec
    assert "as a training step (forward and backward)" in text and "torch.autograd.grad" in text
    assert not _private_uses(text), _private_uses(text)
    p = _run(tmp_path / "failure" / rundir.PLAIN, tmp_path / "failure")
    out = p.stdout + p.stderr
    if p.returncode == 0 and "did not reproduce" in out:
        pytest.skip(f"the avg_pool2d ceil_mode backward bug is fixed in torch {torch.__version__}")
    assert p.returncode == 1, out[-3000:]
    assert re.search(r"gradient of input 0 \(float32 \[2, 4, 10, 10\]\): max abs error", out), out[-3000:]
    assert "output 0 (" not in out, out[-3000:]   # the forward agrees: only the backward is wrong
    assert "AccuracyError: 1 of 2 outputs and gradients of torch.compile(fn, backend='inductor')" in out, out[-3000:]
    # the same graph judged by its forward alone passes
    rec, text = _write(tmp_path, str(final / rundir.REPRO), training=False, config=[])
    p = _run(tmp_path / "failure" / rundir.PLAIN, tmp_path / "failure")
    assert p.returncode == 0 and "did not reproduce" in p.stdout, (p.stdout + p.stderr)[-3000:]


def test_an_error_repro_of_a_gpu_graph_waits_for_the_device_before_it_says_nothing_failed():
    """A CUDA kernel's fault (an illegal address, a device-side assert) is reported at the next
    synchronizing call: the repro of an error on the GPU synchronizes before it concludes that the
    compiled run passed; a CPU repro carries no such line."""
    from bot.minify.worker.plain import Parts, plain_source

    fn = "def fn(arg0_1):\n    relu = torch.ops.aten.relu.default(arg0_1)\n    return (relu,)"
    gpu = "def make_inputs():\n    return [_rand((4,), (1,), torch.float32, 'cuda:0')]"
    cpu = gpu.replace("'cuda:0'", "'cpu'")
    for inputs, synced in ((gpu, True), (cpu, False)):
        text = plain_source(Parts(fn=fn, inputs=inputs, inline=True, backend="inductor", accuracy=False))
        main = text[text.index("def main():"):]
        assert ("torch.cuda.synchronize()" in main) is synced, main
        if synced:
            where = [main.index(x) for x in ("step(compiled", "torch.cuda.synchronize()", "did not reproduce")]
            assert where == sorted(where)
        compile(text, "repro_plain.py", "exec")


@pytest.mark.slow
def test_no_runner_path_in_the_issue_or_the_upstream_report_which_carries_the_same_block(filed, bot, tmp_path):
    """What GitHub would see (the issue, the upstream report of the same failure) names no path of this
    machine: not the venv, the checkout, the home or temp directories, the run directory."""
    import tempfile

    _, fdir, rec, body = filed
    out = fdir.parent.parent
    p = bot("upstream", "--run-dir", out, "--no-search", "--out", tmp_path / "upstream.md")
    assert p.returncode == 0, p.stderr[-3000:]
    upstream = (tmp_path / "upstream.md").read_text()
    for text in (body, upstream):
        for path in (sys.prefix, str(ROOT), os.path.expanduser("~") + "/", tempfile.gettempdir() + "/", str(out)):
            assert path not in text, (path, text[:3000])
    assert _python_block(body) in upstream
