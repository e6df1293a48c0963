"""bot/minify/worker/short.py: the short repro (repro_short.py), the failing graph as a person writes it.

Fast tier (nothing compiled): aten calls become public names only where eager values stay the same
bit for bit; inputs are written as torch.randn / zeros with their layout (memory_format, as_strided)
or, when small, their values; the file for a graph of three ops is at most 30 lines and names the
rule's numbers on one line. The slow tier of tests/test_plain_repro.py runs it from an issue, pasted
alone into an empty directory."""

from __future__ import annotations

import ast

import pytest

from bot.minify.worker import plain, short
from bot.records import ConfigEntry

torch = pytest.importorskip("torch")

FN = """def fn(arg0_1, arg1_1):
    slice_scatter = torch.ops.aten.slice_scatter.default(arg0_1, arg1_1, 1, 0, 2)
    amin = torch.ops.aten.amin.default(slice_scatter, [1])
    view = torch.ops.aten.view.default(amin, [2, 2])
    return (view,)
"""


def _args():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(4, 8, generator=g), torch.randn(4, 2, generator=g)]


def test_aten_calls_become_public_names_that_compute_the_equal_values():
    src = short.public_function(FN, _args())
    assert "torch.ops" not in src
    assert "torch.slice_scatter(arg0_1, arg1_1, 1, 0, 2)" in src and "torch.amin(slice_scatter, [1])" in src
    assert "amin.view([2, 2])" in src    # no torch.view: the tensor's method
    ns = {"torch": torch}
    exec(src, ns)  # noqa: S102 - the code under test
    ref = {"torch": torch}
    exec(FN, ref)  # noqa: S102
    assert torch.equal(ns["fn"](*_args())[0], ref["fn"](*_args())[0])


def test_a_call_without_a_public_name_keeps_its_aten_call_and_the_others_still_change():
    src = "def fn(x):\n    a = torch.ops.aten.slice.Tensor(x, 1, 0, 2)\n    b = torch.ops.aten.relu.default(a)\n" \
          "    return (b,)\n"
    out = short.public_function(src, [torch.randn(4, 4)])
    assert "torch.ops.aten.slice.Tensor(x, 1, 0, 2)" in out and "torch.relu(a)" in out


def test_a_public_spelling_that_computes_other_values_is_not_used(monkeypatch):
    src = "def fn(x):\n    a = torch.ops.aten.relu.default(x)\n    b = torch.ops.aten.neg.default(a)\n    return (b,)\n"
    monkeypatch.setattr(torch, "neg", lambda x: x * 2)   # a public name that is not the same op
    out = short.public_function(src, [torch.randn(4, 4)])
    assert "torch.relu(x)" in out and "torch.ops.aten.neg.default(a)" in out


def test_inputs_are_made_as_a_person_writes_them_with_their_layout():
    assert short.made_input((8, 64), (64, 1), torch.float32, "cpu", False) == "torch.randn(8, 64)"
    assert short.made_input((8, 64), (64, 1), torch.float16, "cuda", True) == \
        "torch.randn(8, 64, dtype=torch.float16, device='cuda').requires_grad_()"
    assert short.made_input((2, 3, 4, 5), (60, 1, 15, 3), torch.float32, "cpu", False) == \
        "torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)"
    assert short.made_input((4, 3), (1, 4), torch.float32, "cpu", False) == "torch.randn(12).as_strided((4, 3), (1, 4))"
    assert short.made_input((5,), (1,), torch.int64, "cpu", False) == "torch.zeros(5, dtype=torch.int64)"
    for text, (size, stride) in [("torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)",
                                  ((2, 3, 4, 5), (60, 1, 15, 3))),
                                 ("torch.randn(12).as_strided((4, 3), (1, 4))", ((4, 3), (1, 4)))]:
        t = eval(text, {"torch": torch})  # noqa: S307 - the code under test
        assert (tuple(t.shape), t.stride()) == (size, stride)


def test_small_inputs_are_written_out_and_large_saved_ones_refuse_the_short_form():
    ids = torch.tensor([2**31 - 1, 0, 5], dtype=torch.int32)
    assert short.input_lines([ids, 3, None], set()) == [
        "torch.tensor([2147483647, 0, 5], dtype=torch.int32)", "3", "None"]
    assert short.input_lines([torch.tensor([0.1, -2.5])], set()) == ["torch.tensor([0.10000000149011612, -2.5])"]
    assert eval(short.input_lines([torch.tensor([0.1, -2.5])], set())[0], {"torch": torch}).equal(  # noqa: S307
        torch.tensor([0.1, -2.5]))
    assert short.input_lines([torch.randn(100)], set()) == ["torch.randn(100)"]   # too many values: from the seed
    assert short.input_lines([torch.tensor([float("nan")])], set()) is None
    assert short.input_lines([torch.randn(100)], {0}) == ["torch.randn(100)"]


def test_a_graph_of_three_ops_is_a_file_of_at_most_30_lines_with_the_rule_on_one_line():
    fn = short.public_function(FN, _args())
    parts = plain.Parts(fn, "", True, "inductor", True, tolerance=1e-4,
                        config=[ConfigEntry("inductor.cpp.inject_relu_bug_TESTING_ONLY", None, "accuracy")])
    text = short.short_source(parts, ["torch.randn(4, 8)", "torch.randn(4, 2)"])
    assert len(text.splitlines()) <= 30, text
    first = text.splitlines()[0]
    assert first == ("# torch.compile(fn, backend='inductor') gives wrong results for torch.slice_scatter, "
                     "torch.amin, Tensor.view (minimized and verified by minify-bot)")
    ast.parse(text)
    assert "torch.manual_seed(0)" in text and "return [torch.randn(4, 8), torch.randn(4, 2)]" in text
    assert "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'" in text
    (rule,) = [line for line in text.splitlines() if line.strip().startswith("ok = ")]
    assert "0.0001" in rule and "rmse(c) <= m * rmse(e) + 1e-05" in rule
    err = short.short_source(plain.Parts(fn, "", True, "inductor", False), ["torch.randn(4, 8)", "torch.randn(4, 2)"])
    assert "AccuracyError" not in err and "torch.compile(fn, backend='inductor')(*make_inputs())  # raises" in err


def test_a_training_step_has_a_short_form_that_judges_the_gradients_too(tmp_path):
    """A graph judged by a training step (the check ran a backward): the short form runs forward and
    backward, the inputs that required grad (every floating one when none did) made with
    ``requires_grad_()``, and compares outputs and gradients. Under the eager backend it runs and
    passes; its one-op file is at most 30 lines."""
    import subprocess
    import sys

    fn = ("def fn(L_x_):\n    avg_pool2d = torch.nn.functional.avg_pool2d(L_x_, 3, stride=2, ceil_mode=True)\n"
          "    return (avg_pool2d,)\n")
    x, ids = torch.randn(2, 4, 10, 10), torch.tensor([1, 2])
    inputs = short.input_lines([x, ids], {0}, training=True)
    assert inputs == ["torch.randn(2, 4, 10, 10).requires_grad_()", "torch.tensor([1, 2])"]
    text = short.short_source(plain.Parts(fn, "", True, "eager", True, tolerance=1e-4, training=True), inputs[:1])
    assert len(text.splitlines()) <= 30, text
    assert text.splitlines()[0].startswith("# torch.compile(fn, backend='eager') gives wrong results for "
                                           "torch.nn.functional.avg_pool2d ")
    assert "torch.autograd.grad(loss, leaves" in text
    (tmp_path / "repro_short.py").write_text(text)
    p = subprocess.run([sys.executable, "repro_short.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "output 0: RMSE vs fp64" in p.stdout and "gradient 0: RMSE vs fp64" in p.stdout, p.stdout
    err = short.short_source(plain.Parts(fn, "", True, "eager", False, training=True), inputs[:1])
    assert "step(torch.compile(fn, backend='eager'), make_inputs())  # raises" in err
    ast.parse(err)


def test_dynamos_input_aliases_and_the_lines_that_free_values_are_left_out():
    src = ("def fn(L_x_, L_y_):\n    l_x_ = L_x_\n    l_y_ = L_y_\n    a = torch.relu(l_x_);  l_x_ = None\n"
           "    b = a + l_y_;  a = l_y_ = None\n    return (b,)\n")
    out = short.tidy(src)
    assert out == "def fn(L_x_, L_y_):\n    a = torch.relu(L_x_)\n    b = a + L_y_\n    return (b,)\n", out
    ns: dict = {"torch": torch}
    exec(out, ns)  # noqa: S102 - the code under test
    assert torch.equal(ns["fn"](torch.tensor([-1.0, 2.0]), torch.tensor([1.0, 1.0]))[0], torch.tensor([1.0, 3.0]))


def test_a_large_integer_input_is_drawn_from_a_seed_over_its_own_range():
    """Up to 64 ids are written out (wrapped; genuine int32 overflow bugs hang on their values); more
    keep their range, INT32_MAX included; one value is a ``torch.full``; a transposed one keeps its
    layout; an int64 at its maximum, a gapped view or a bool refuse (the plain repro stands)."""
    ids = torch.arange(2**31 - 64, 2**31, dtype=torch.int32)
    (line,) = short.input_lines([ids], set())
    assert line.startswith("torch.tensor([2147483584, ") and "\n            " in line, line
    assert torch.equal(eval(line, {"torch": torch}), ids)  # noqa: S307 - the line under test
    ids = torch.arange(2**31 - 100, 2**31 - 2, dtype=torch.int32)
    (line,) = short.input_lines([ids], set())
    assert line == "torch.randint(2147483548, 2147483646, (98,), dtype=torch.int32)", line
    made = eval(line, {"torch": torch})  # noqa: S307 - the line under test
    assert made.dtype == torch.int32 and made.min() >= 2**31 - 100 and made.shape == (98,)
    assert short.input_lines([torch.full((2, 40), 7)], set()) == ["torch.full((2, 40), 7, dtype=torch.int64)"]
    assert short.input_lines([torch.full((80,), 2**63 - 1)], set()) is None
    top = torch.tensor([2**31 - 1] * 50 + [2**31 - 9] * 50, dtype=torch.int32)   # ids up to INT32_MAX
    assert short.input_lines([top], set()) == ["torch.randint(2147483639, 2147483648, (100,), dtype=torch.int32)"]
    assert short.input_lines([torch.arange(80).view(8, 10).t()], set()) == [
        "torch.randint(0, 80, (8, 10), dtype=torch.int64).t()"]
    assert short.input_lines([torch.arange(160).view(8, 20)[:, ::2]], set()) is None
    assert short.input_lines([torch.ones(80, dtype=torch.bool)], set()) is None


def test_a_large_float_input_is_drawn_from_a_seed_at_its_own_mean_and_spread():
    """Values far from a standard normal's (a catalog of magnitudes near 12345, where a variance
    cancels) keep their scale; one value is a ``torch.full``; a transposed one keeps its layout; a
    gapped view or one holding an infinity refuses."""
    g = torch.Generator().manual_seed(0)
    (line,) = short.input_lines([torch.randn(128, 5, generator=g) * 0.3 + 12345.0], set())
    assert line.startswith("(torch.randn(128, 5) * 0.") and line.endswith(" + 12345)"), line
    made = eval(line, {"torch": torch})  # noqa: S307 - the line under test
    assert abs(made.mean().item() - 12345) < 1 and 0.2 < made.std().item() < 0.4
    assert short.input_lines([-torch.rand(64, dtype=torch.float64, generator=g) - 5], set())[0].startswith(
        "(torch.randn(64, dtype=torch.float64) * 0.")
    assert short.input_lines([torch.full((20,), 3.5)], set()) == ["torch.full((20,), 3.5)"]
    assert short.input_lines([torch.randn(8, 40).t()], set()) == ["torch.randn(8, 40).t()"]
    assert short.input_lines([torch.randn(8, 40)[:, ::2]], set()) is None
    assert short.input_lines([torch.tensor([float("inf")] * 20)], set()) is None


def test_small_transposed_and_broadcast_inputs_are_written_out_with_their_layout():
    """Fuzz findings read transposed, permuted and expanded (stride 0) inputs, and a layout is often
    what a bug hangs on (a transposed int32 ``sum`` to bool): the values are written out as the
    dense tensor the layout is made from, then ``.t()``, ``.permute(...)`` or ``.expand(...)``; the
    line makes the same values, sizes and strides."""
    cases = {torch.arange(10, dtype=torch.int32).view(5, 2).t(): ").t()",
             torch.tensor([3], dtype=torch.uint8).expand(4): ").expand(4)",
             torch.arange(24).view(2, 3, 4).permute(2, 0, 1): ").permute(2, 0, 1)",
             torch.tensor([[1.5], [2.5]]).expand(2, 3): ").expand(2, 3)",
             torch.arange(6, dtype=torch.int16).view(2, 3).t().unsqueeze(0).expand(2, 3, 2): ").expand(2, 3, 2)"}
    for t, tail in cases.items():
        (line,) = short.input_lines([t], set())
        assert line.startswith("torch.tensor(") and line.endswith(tail), line
        made = eval(line, {"torch": torch})  # noqa: S307 - the line under test
        assert torch.equal(made, t) and made.dtype == t.dtype
        assert all(n == 1 or a == b for n, a, b in zip(t.shape, made.stride(), t.stride())), (line, made.stride())
