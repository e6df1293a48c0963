"""bot/minify/worker/readout.py: the numerics readout of an accuracy failure's minimized graph (each op
compiled and eager against fp64, the first diverging op, determinism), its record in failure.json
and its table in the issue. The slow tests compile real graphs with inductor's injected relu bug."""

from __future__ import annotations

import json
import re
import sys

import pytest
import torch

from bot import rundir
from bot.errors import UsageError
from bot.failure import FailureRecord
from bot.minify.worker import readout as RO
from bot.options import ReportOptions
from bot.records import Readout, ReadoutNode
from bot.render import Renderer
from bot.report.context import issue_context
from bot.report.load import load_run
from bot.report.state import merge_state
from tests import rundirs

RELU_ROWS = [ReadoutNode("aten.mul.Tensor", "mul", [8, 16], "float32", 0.0, 0.0, 0.0, 0.0, False),
             ReadoutNode("aten.relu.default", "relu", [8, 16], "float32", 3.80962, 1.12429, 0.0, 0.0, True),
             ReadoutNode("aten.add.Tensor", "add", [8, 16], "float32", 3.80962, 1.12429, 2.4e-07, 5.2e-08, True)]
RELU_READOUT = Readout(nodes=RELU_ROWS, first_diverging="aten.relu.default", deterministic=True, seconds=2.5)


def _issue_body(tmp_path, readout: Readout | None, edit=None) -> str:
    row = rundirs.check()
    rec = rundirs.failure(row, readout=readout)
    run = rundirs.write(tmp_path / "run", [row], [rec])
    if edit:   # an artifact someone changed after minify wrote it
        path = run / "failures" / row.id / "failure.json"
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    group = load_run(run)[1]
    state, _ = merge_state(None, group, "run-1", "2026-11-01T00:00:00Z")
    return Renderer().body(issue_context(group, state, ReportOptions(), run), state.to_json())[0]


def _section(body: str, name: str) -> str | None:
    m = re.search(rf"^### {re.escape(name)}\n(.*?)(?=^### |\Z)", body, re.S | re.M)
    return m.group(1) if m else None


# --------------------------------------------------------------------------- record and issue (fast)

def test_the_readout_round_trips_through_failure_json_and_its_schema(tmp_path):
    row = rundirs.check()
    rec = rundirs.failure(row, readout=RELU_READOUT.replace(max_nondeterminism=None, note="a note"))
    doc = json.loads(json.dumps(rec.to_json()))
    rundir.validate(doc, "failure", rundir.FAILURE)
    back = FailureRecord.from_json(doc)
    assert back.readout == rec.readout and isinstance(back.readout.nodes[1], ReadoutNode)


def test_a_failure_without_a_readout_writes_no_readout_key():
    row = rundirs.check()
    assert "readout" not in rundirs.failure(row).to_json()


def test_the_schema_bounds_the_readout(tmp_path):
    row = rundirs.check()
    doc = rundirs.failure(row, readout=Readout(nodes=[RELU_ROWS[0]] * 31)).to_json()
    with pytest.raises(UsageError, match="readout/nodes"):
        rundir.validate(doc, "failure", rundir.FAILURE)


def test_the_issue_shows_the_table_after_the_culprit_with_the_first_diverging_op(tmp_path):
    body = _issue_body(tmp_path, RELU_READOUT)
    sec = _section(body, "Numerics readout")
    assert sec is not None
    assert body.index("### Numerics readout") < body.index("### Minimized repro")
    assert "| `aten.relu.default` | 3.80962 / 1.12429 | 0 / 0 | ✓ |" in sec
    assert "| `aten.mul.Tensor` | 0 / 0 | 0 / 0 | – |" in sec
    assert ("The first op whose compiled value fails the check's rule is `aten.relu.default`; "
            "the compiled graph is deterministic (two runs, bitwise equal outputs).") in sec


def test_a_nondeterministic_graph_and_missing_errors_are_said(tmp_path):
    rows = [RELU_ROWS[0].replace(max_abs_compiled=None, rmse_compiled=None)]
    body = _issue_body(tmp_path, Readout(nodes=rows, deterministic=False, max_nondeterminism=0.5))
    sec = _section(body, "Numerics readout")
    assert "| `aten.mul.Tensor` | n/a / n/a | 0 / 0 | – |" in sec
    assert "No single op fails the check's rule; the compiled graph is not deterministic: " \
           "two runs on the same inputs differ by up to 0.5." in sec


def test_no_rows_no_section(tmp_path):
    assert "### Numerics readout" not in _issue_body(tmp_path, Readout(note="not made: RuntimeError: boom"))
    assert "### Numerics readout" not in _issue_body(tmp_path, None)


def test_untrusted_readout_values_are_escaped(tmp_path):
    def edit(doc):
        r = doc["readout"]
        r["nodes"][0]["op"] = "aten.x | <b>@admin</b>"
        r["nodes"][1]["max_abs_compiled"] = "<script>|@root #1"
        r["first_diverging"] = "`rm -rf` @everyone"
        r["note"] = "see #12 @someone <!-- x --> | [link](http://e)"
        r["deterministic"] = "yes"
        return doc

    sec = _section(_issue_body(tmp_path, RELU_READOUT, edit=edit), "Numerics readout")
    assert "`unknown`" in sec and "<b>" not in sec and "@admin" not in sec
    assert "<script>" not in sec and "@root" not in sec and "\\|" in sec
    assert "@everyone" not in sec and "No single op fails" in sec
    assert "determinism was not checked" in sec
    assert "<!--" not in sec and "@someone" not in sec and "[link](" not in sec


def test_the_window_keeps_the_rows_up_to_the_first_diverging_op():
    rows = list(range(50))
    assert RO.window(rows, None) == rows[:30]
    assert RO.window(rows, 10) == rows[:30]
    assert RO.window(rows, 40) == rows[11:41]


class _Run:
    """The parts of a worker Run the step reads."""

    def __init__(self, failure_class="accuracy", status="minimized", isolate=False, deadline=None):
        from bot.minify.records import MinifyJob, WorkerResult

        self.job = MinifyJob(repro="", workdir="", failure_class=failure_class, budget=60, deadline=deadline)
        self.status, self.isolate, self.result = status, isolate, WorkerResult()

    def evaluator(self, budgeted=True):
        raise RuntimeError("no compiler here")


def test_the_step_never_fails_the_minify_and_skips_what_it_does_not_read():
    run = _Run()
    RO.step_readout(run)   # the evaluator raises: a note, no rows
    assert run.result.readout.nodes == [] and "RuntimeError: no compiler here" in run.result.readout.note
    for run in (_Run(failure_class="compile_error"), _Run(status="not_reproduced")):
        RO.step_readout(run)
        assert run.result.readout is None
    run = _Run(isolate=True)
    RO.step_readout(run)
    assert run.result.readout.note.startswith("not made: this minify ran every compile in a fresh process")
    run = _Run(deadline=0.0)
    RO.step_readout(run)
    assert "time budget ran out" in run.result.readout.note


def test_bitwise_difference_tells_nan_payloads_and_values():
    import torch

    a = torch.tensor([1.0, float("nan"), 0.0])
    assert RO.bitwise_difference(a, a.clone()) is None
    assert RO.bitwise_difference(a, torch.tensor([1.5, float("nan"), 0.0])) == 0.5
    assert RO.bitwise_difference(a, torch.tensor([1.0, float("nan"), -0.0])) == 0.0   # bits differ
    assert RO.errors(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0], dtype=torch.float64)) == (None, None)


# --------------------------------------------------------------------------- real compiles (slow)

def _relu_graph():
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    torch.manual_seed(0)
    x = torch.randn(8, 16)
    return make_fx(lambda x: (torch.relu(x * 2) + 1,))(x), [x]


def _readout(inject: bool) -> Readout:
    import torch

    from bot.minify.records import MinifyJob
    from bot.minify.worker.predicate import Evaluator

    gm, args = _relu_graph()
    job = MinifyJob(repro="", workdir="", failure_class="accuracy", budget=60)
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy" if inject else None}), \
            torch.no_grad():
        return RO.numerics_readout(Evaluator(job, "aot", None), gm, args)


@pytest.mark.slow
def test_with_the_relu_bug_the_readout_names_relu_first_and_nothing_before_it():
    r = _readout(inject=True)
    ops = [n.op for n in r.nodes]
    assert ops == ["aten.mul.Tensor", "aten.relu.default", "aten.add.Tensor"]
    assert r.first_diverging == "aten.relu.default"
    assert [n.diverges for n in r.nodes[:2]] == [False, True]
    mul, relu = r.nodes[0], r.nodes[1]
    assert mul.max_abs_compiled == 0.0 and relu.max_abs_compiled > 0.1 and relu.max_abs_eager < 1e-6
    assert relu.shape == [8, 16] and relu.dtype == "float32"
    assert r.deterministic is True and r.max_nondeterminism is None
    doc = json.loads(json.dumps(FailureRecord(id="x", readout=r).to_json()))
    assert FailureRecord.from_json(doc).readout == r


@pytest.mark.slow
def test_without_the_bug_nothing_diverges():
    r = _readout(inject=False)
    assert len(r.nodes) == 3 and not any(n.diverges for n in r.nodes)
    assert r.first_diverging is None and r.deterministic is True
    assert "no op diverges" in r.note


def _int32_overflow_graph():
    """The genuine int32 bug of benchmarks/genuine/ranker_int32.py (pytorch/pytorch#190764):
    ``ids + 16 > ids`` is signed overflow in the generated C++, folded to true by the compiler."""
    import torch
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    ids = torch.tensor([2**31 - 10, 5, 2**31 - 1, 0, 7, 2**31 - 3, 1, 2], dtype=torch.int32)
    w = torch.randn(8, generator=torch.Generator().manual_seed(0))

    def f(ids, w):
        return (torch.where(ids + 16 > ids, w, torch.zeros_like(w)) * 2,)

    return make_fx(f, decomposition_table=select_decomp_table())(ids, w), [ids, w]


@pytest.mark.slow
def test_a_genuine_integer_bug_that_only_a_fused_kernel_shows_is_found_by_prefixes():
    """Integer and bool ops are read too, exactly; materializing every op hides this bug (the add
    is stored, nothing is folded), so the readout searches the graph's prefixes compiled as the
    repro fuses them and names the op where the wrong values first appear."""
    import torch

    from bot.minify.records import MinifyJob
    from bot.minify.worker.predicate import Evaluator

    gm, args = _int32_overflow_graph()
    ev = Evaluator(MinifyJob(repro="", workdir="", failure_class="accuracy", budget=60), "aot", None)
    with torch.no_grad():
        if torch.equal(ev.compile(gm, args)(list(args))[0], gm(*args)[0]):
            pytest.skip(f"the int32 overflow bug is fixed in torch {torch.__version__}")
        r = RO.numerics_readout(ev, gm, args)
    by_op = {n.op: n for n in r.nodes}
    assert by_op["aten.add.Tensor"].dtype == "int32" and by_op["aten.gt.Tensor"].dtype == "bool"
    assert not by_op["aten.add.Tensor"].diverges
    assert r.first_diverging in ("aten.gt.Tensor", "aten.where.self"), r
    assert by_op[r.first_diverging].diverges and "prefix" in r.note


PROGRAM = """\
import torch
import torch._inductor.config as ic
torch.manual_seed(0)
ic.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
x = torch.randn(4, 8)
with torch.no_grad():
    torch.testing.assert_close(torch.compile(m)(x), m(x))
"""


@pytest.mark.slow
def test_a_program_with_the_relu_bug_gets_an_issue_with_the_readout(tmp_path, bot):
    (tmp_path / "prog.py").write_text(PROGRAM)
    p = bot("run", "--command", f"{sys.executable} prog.py", "--name", "readout", "--out", tmp_path / "out",
            "--issues-dir", tmp_path / "issues", "--verify-runs", "1", "--no-bisect", "--budget", "240",
            cwd=tmp_path, env={"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": ""})
    assert p.returncode == 1, p.stderr[-4000:]
    (fdir,) = [d for d in (tmp_path / "out" / "failures").iterdir() if d.is_dir()]
    rec = json.loads((fdir / "failure.json").read_text())
    assert rec["readout"]["first_diverging"] == "aten.relu.default", rec.get("readout")
    bodies = [f.read_text() for f in (tmp_path / "issues").rglob("*.md")]
    bodies += [json.loads(f.read_text()).get("body", "") for f in (tmp_path / "issues").rglob("*.json")]
    sec = next(s for s in (_section(b, "Numerics readout") for b in bodies if b) if s)
    assert "| `aten.relu.default` |" in sec and "✓" in sec
    assert "is `aten.relu.default`; the compiled graph is deterministic" in sec


class _ReluWrongGrad(torch.autograd.Function):
    """relu whose backward lets near-zero negative inputs through (its forward is right)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x)

    @staticmethod
    def backward(ctx, g):
        return g * (ctx.saved_tensors[0] >= -0.5)


def _relu_wrong_grad(x):
    return _ReluWrongGrad.apply(x)


def _wrong_grad_backend(gm, example_inputs):
    """A user's compiler whose relu has a wrong gradient."""
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is torch.relu:
            n.target = _relu_wrong_grad
    gm.recompile()
    return gm.forward


def test_a_training_failure_in_the_gradients_is_not_read_as_a_fused_kernel_bug(tmp_path):
    """The readout measures forward values: for a failure judged on a training step whose forward
    agrees it says so, instead of suggesting that a fused kernel hides the bug."""
    from bot.minify.records import MinifyJob
    from bot.minify.worker.predicate import Evaluator

    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2)
    job = MinifyJob(repro=str(tmp_path / "graph.py"), workdir=str(tmp_path), failure_class="accuracy",
                    budget=300.0, training=True, tolerance=1e-4)
    ev = Evaluator(job, "dynamo", None)
    ev.backend = _wrong_grad_backend
    args = [torch.randn(16, 16).requires_grad_(True)]
    assert ev.observe(gm, args) is not None      # the training step fails: the gradient is wrong
    readout = RO.numerics_readout(ev, gm, args, budget=30)
    assert readout.first_diverging is None
    assert "judged on a training step" in readout.note and "fusion" not in readout.note, readout.note


def test_a_row_whose_compiled_value_changed_dtype_or_shape_says_so():
    eager = torch.tensor([1, 0, 3], dtype=torch.uint8)
    row = RO.node_row("aten.gt.Scalar", "gt", eager, eager.bool(), eager.double(), 1e-4)
    assert (row.dtype, row.compiled_dtype, row.diverges) == ("uint8", "bool", True)
    same = RO.node_row("aten.gt.Scalar", "gt", eager, eager.clone(), eager.double(), 1e-4)
    assert same.compiled_dtype is None and not same.diverges
    x = torch.ones(2, 3)
    row = RO.node_row("aten.sum.dim_IntList", "sum", x, torch.ones(3), x.double(), 1e-4)
    assert (row.shape, row.compiled_shape, row.diverges) == ([2, 3], [3], True)


def test_a_row_whose_compiled_zeros_have_the_other_sign_says_so():
    """A fuzz finding: eager's remainder by a negative divisor gives -0.0 for an exact multiple,
    inductor's +0.0; equal as numbers (no error, no divergence), but the atan2 after it is off by
    2 pi. The row counts such elements and the issue's table names them."""
    from bot.report.context import _change

    eager = torch.tensor([-0.0, -0.0, 0.5, 0.0], dtype=torch.float16)
    compiled = torch.tensor([0.0, 0.0, 0.5, 0.0], dtype=torch.float16)
    row = RO.node_row("aten.remainder.Scalar", "remainder", eager, compiled, eager.double(), 1e-3)
    assert (row.signed_zeros, row.diverges, row.max_abs_compiled) == (2, False, 0.0)
    assert _change(row) == "sign of zero differs in 2 elements"
    same = RO.node_row("aten.remainder.Scalar", "remainder", eager, eager.clone(), eager.double(), 1e-3)
    assert same.signed_zeros is None and _change(same) is None
