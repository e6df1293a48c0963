"""The numerics readout of an accuracy failure's minimized graph (what torch's ``repro_analyze``
tells an engineer first): each op's value compiled and eager against the graph run in float64,
the first op whose compiled value fails the check's rule, and whether the compiled graph gives
bitwise the same outputs twice.

How compiled intermediates are observed: inductor fuses, so a node's compiled value exists only
where the compiled graph returns it. The graph is compiled **once** with every floating-point op
node as an extra output (:func:`bot.minify.worker.hints.all_outputs_state`, the culprit search's hint
uses the same probe). One compile rather than one per node (the graph with node k as an extra
output, for each k): on a CPU an inductor compile of even a small graph costs seconds (a C++
compile each), so 30 of them would take most of a minute, and each of them changes the fusion
around its node too. The price: materializing every node changes inductor's fusion, so a bug that
only a fused kernel shows may not show per node; the readout then says that no op diverges although
the graph fails, and the note says why. Determinism is judged on the minimized graph as compiled
for the repro (a second compile), run twice on the same inputs.

The readout never fails the minify: any error becomes its note. The worker's step is
:func:`step_readout`; :func:`numerics_readout` is the analysis over one graph.
"""

from __future__ import annotations

import math
import time
from typing import Any

from bot.records import Readout, ReadoutNode
from bot.torch_adapter import fxutil

MAX_ROWS = 30            # rows recorded (failure.json) and shown (the issue)
MAX_NODES = 200          # op nodes analyzed: a larger (partial) graph gets no readout
BUDGET = 60.0            # seconds, at most; less when the job's deadline is nearer
MIN_BUDGET = 5.0         # below this, no readout


def step_readout(run: Any) -> None:
    """The worker's step after the final repro (a :class:`bot.minify.worker.Run`): the readout of
    an accuracy failure's reduced graph into ``run.result.readout``; not for other classes, nor
    for isolated runs (every compile of those runs in a fresh process; this one would not)."""
    from bot.minify.worker.predicate import log

    if run.job.failure_class != "accuracy" or run.status not in ("minimized", "partial"):
        return
    t = time.time()
    if run.isolate:
        run.result.readout = Readout(note="not made: this minify ran every compile in a fresh process")
        return
    remaining = (run.job.deadline if run.job.deadline is not None else t + 2 * BUDGET) - t
    budget = min(BUDGET, remaining - 10)
    if budget < MIN_BUDGET:
        run.result.readout = Readout(note="not made: the minify's time budget ran out")
        return
    try:
        readout = numerics_readout(run.evaluator(budgeted=False), run.gm, run.args, budget=budget)
    except Exception as exc:  # noqa: BLE001 - the readout is optional: it never fails the minify
        readout = Readout(note=f"not made: {type(exc).__name__}: {exc}"[:300])
    readout.seconds = round(time.time() - t, 2)
    run.result.timings["readout"] = readout.seconds
    run.result.readout = readout
    log(f"readout: {len(readout.nodes)} ops, first diverging {readout.first_diverging or '-'}, "
        f"deterministic {readout.deterministic}, {readout.seconds:.1f} s"
        + (f"; {readout.note}" if readout.note else ""))


def numerics_readout(evaluator, gm, args, *, budget: float = BUDGET) -> Readout:
    """The readout of ``gm`` on ``args``, compiled as ``evaluator`` compiles a candidate (its kind
    and backend) and judged by its tolerance."""
    from bot.minify.worker.graph import State
    from bot.minify.worker.hints import all_outputs_state
    from bot.torch_adapter import minifier as M

    deadline = time.time() + budget
    probe, names = all_outputs_state(State(gm, list(args)), integers=True)
    if not names:
        return Readout(note="not made: the graph has no op with a tensor result")
    if len(names) > MAX_NODES:
        return Readout(note=f"not made: {len(names)} op nodes (the readout reads at most {MAX_NODES})")
    compiled_fn = evaluator.compile(probe.gm, probe.args)
    compiled = dict(zip(names, M.flat_outputs(compiled_fn(fxutil.clone_inputs(probe.args)))))
    eager = M.eager_node_values(gm, args, set(names))
    fp64 = M.fp64_values(gm, args, set(names))
    nodes = {n.name: n for n in gm.graph.nodes}
    rows = [node_row(M.node_op_name(nodes[k]), k, eager.get(k), compiled.get(k), fp64.get(k), evaluator.tol)
            for k in names]
    first = next((i for i, r in enumerate(rows) if r.diverges), None)
    notes = []
    if not fp64:
        notes.append("the graph does not run in float64: errors are not measured, divergence is against eager")
    training = bool(getattr(evaluator, "training", False))
    if first is None and training:
        notes.append("the forward's values agree: this failure is judged on a training step (forward and "
                     "backward together), and the readout measures no gradient")
    elif first is None and time.time() < deadline:
        fused = fused_divergence(evaluator, gm, args, eager, fp64, deadline)
        if fused is not None:
            first, rows[names.index(fused.name)] = names.index(fused.name), fused
            notes.append(f"no op diverges with every intermediate as an output (that changes inductor's fusion); "
                         f"{fused.op} is the last op of the shortest prefix of the graph that diverges compiled "
                         "as the repro fuses it, and its row is measured there")
    if first is None and not training:
        notes.append("no op diverges with every intermediate as an output (materializing them changes "
                     "inductor's fusion: a bug of a fused kernel may not show per op)")
    shown = window(rows, first)
    if len(shown) < len(rows):
        notes.append(f"ops {rows.index(shown[0]) + 1}-{rows.index(shown[0]) + len(shown)} of {len(rows)} shown")
    det, diff = None, None
    if time.time() < deadline:
        det, diff = determinism(evaluator, gm, args)
    else:
        notes.append("determinism not checked: the readout's time budget ran out")
    return Readout(nodes=shown, first_diverging=rows[first].op if first is not None else None,
                   deterministic=det, max_nondeterminism=diff, note="; ".join(notes) or None)


def fused_divergence(evaluator, gm, args, eager: dict, fp64: dict, deadline: float) -> ReadoutNode | None:
    """When no op diverges with every intermediate materialized: a binary search over the graph's
    prefixes, each compiled with only its frontier as outputs (the values later ops read, fused as
    they are in the repro), for the shortest that diverges; its last op's row, measured there.
    log2(ops) + 1 compiles; None when the whole graph does not diverge this way either or the time
    runs out."""
    from bot.minify.worker import graph as G
    from bot.minify.worker.search import bisect_cuts
    from bot.torch_adapter import minifier as M

    calls = G.call_nodes(gm)
    _, kinds = G.eager_values(gm, args, lambda n: False)
    nodes = {n.name: n for n in gm.graph.nodes}
    rows: dict[int, ReadoutNode] = {}

    def prefix(k: int):
        st = G.prefix_state(G.State(gm, list(args)), k, kinds)
        return None if st is None else (k, st)

    def diverges(cand) -> bool:
        """Compile the prefix; its row when one of its outputs diverges (its last op's first)."""
        k, st = cand
        if time.time() > deadline:
            return False
        outs = [a.name for a in next(n for n in st.gm.graph.nodes if n.op == "output").args[0]]
        values = M.flat_outputs(evaluator.compile(st.gm, st.args)(fxutil.clone_inputs(st.args)))
        found = [node_row(M.node_op_name(nodes[name]), name, eager[name], value, fp64.get(name), evaluator.tol)
                 for name, value in zip(outs, values) if name in nodes and name in eager]
        found = sorted((r for r in found if r.diverges), key=lambda r: r.name != calls[k - 1].name)
        if found:
            rows[k] = found[0]
        return bool(found)

    whole = prefix(len(calls)) if calls else None
    if whole is None or not diverges(whole):
        return None
    # the shortest diverging prefix: a diverging one moves the upper end down (the search the
    # culprit search uses; a cut that cannot be made is stepped over, not taken as passing)
    _, hi, _ = bisect_cuts(0, len(calls), prefix, diverges, fails_move="hi")
    return rows[hi]


def node_row(op: str, name: str, eager, compiled, ref, tol: float) -> ReadoutNode:
    """One op's row: its errors against the fp64 value ``ref`` and whether compiled diverges (the
    check's rule, ``same(eager, compiled, fp64, tol)``, fails; an integer or bool value diverges
    when it is not exactly eager's: a wrong index or mask has no tolerance)."""
    import torch

    from bot.torch_adapter.minifier import accuracy_fails

    row = ReadoutNode(op=op[:200], name=name[:100])
    if not isinstance(eager, torch.Tensor) or not isinstance(compiled, torch.Tensor):
        return row
    row.shape, row.dtype = [int(s) for s in eager.shape][:16], str(eager.dtype).replace("torch.", "")
    if compiled.dtype != eager.dtype:
        row.compiled_dtype = str(compiled.dtype).replace("torch.", "")
    if compiled.shape != eager.shape:
        row.compiled_shape = [int(s) for s in compiled.shape][:16]
        row.diverges = True
        return row
    if isinstance(ref, torch.Tensor) and ref.shape == eager.shape:
        row.max_abs_compiled, row.rmse_compiled = errors(compiled, ref)
        row.max_abs_eager, row.rmse_eager = errors(eager, ref)
    if not eager.is_floating_point() and not eager.is_complex():
        row.diverges = compiled.dtype != eager.dtype or not torch.equal(compiled, eager)
        return row
    if not eager.is_complex() and compiled.dtype == eager.dtype:
        zeros = (eager == 0) & (compiled == 0) & (torch.signbit(eager) != torch.signbit(compiled))
        row.signed_zeros = int(zeros.sum()) or None
    row.diverges = accuracy_fails(eager, compiled, ref if isinstance(ref, torch.Tensor) else None,
                                  tol=tol, ignore_non_fp=True)
    return row


def errors(value, ref) -> tuple[float | None, float | None]:
    """(max abs error, RMSE) of ``value`` against ``ref`` in float64; NaN where both are NaN counts
    as equal; None for a non-finite error (a NaN or inf where the reference has none)."""
    import torch

    v, r = value.detach().to(torch.float64), ref.detach().to(torch.float64)
    d = (v - r).abs()
    d = torch.where(v.isnan() & r.isnan(), torch.zeros_like(d), d)
    d = torch.where(d.isnan(), torch.full_like(d, math.inf), d)
    if d.numel() == 0:
        return 0.0, 0.0
    mx, rmse = float(d.max()), float(torch.sqrt(torch.mean(d * d)))
    return (mx if math.isfinite(mx) else None), (rmse if math.isfinite(rmse) else None)


def window(rows: list, first: int | None) -> list:
    """At most :data:`MAX_ROWS` rows: the first ones, or those that end at the first diverging op
    when it lies further."""
    if len(rows) <= MAX_ROWS or first is None or first < MAX_ROWS:
        return rows[:MAX_ROWS]
    return rows[first + 1 - MAX_ROWS:first + 1]


def determinism(evaluator, gm, args) -> tuple[bool, float | None]:
    """Compile ``gm`` once, run it twice on the same inputs: (bitwise equal outputs, the largest
    difference when not)."""
    from bot.torch_adapter import minifier as M

    fn = evaluator.compile(gm, args)
    first = M.flat_outputs(fn(fxutil.clone_inputs(args)))
    second = M.flat_outputs(fn(fxutil.clone_inputs(args)))
    diffs = [bitwise_difference(a, b) for a, b in zip(first, second)]
    if len(first) == len(second) and all(d is None for d in diffs):
        return True, None
    finite = [d for d in diffs if d is not None and math.isfinite(d)]
    return False, max(finite) if finite else None


def bitwise_difference(a, b) -> float | None:
    """None when ``a`` and ``b`` are bitwise equal; else their largest absolute difference (inf
    where shapes, dtypes or NaN positions differ)."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return math.inf
    x, y = a.detach().contiguous(), b.detach().contiguous()
    try:
        if torch.equal(x.view(torch.uint8), y.view(torch.uint8)):
            return None
    except RuntimeError:   # a dtype without a byte view: compared by value
        if torch.equal(x, y):
            return None
    if not x.is_floating_point() and not x.is_complex():
        return float((x.to(torch.float64) - y.to(torch.float64)).abs().max())
    d = (x - y).abs().to(torch.float64)
    d = torch.where(x.isnan() & y.isnan(), torch.zeros_like(d), d)
    return float(d.max()) if not d.isnan().any() else math.inf
