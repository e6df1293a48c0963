"""The reduction passes (bot/minify/worker/passes.py) on real fx graphs of real torch models.

The fast tests use a predicate that is a plain function of the graph ("still computes a relu"):
they check the search and the passes themselves (query counts, 1-minimality, dead impure nodes)
without compiling; the slow test runs the real predicate (inductor with the injected relu bug)."""

from __future__ import annotations

import math
import operator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from bot.minify.records import MinifyJob
from bot.minify.worker import cleanup as C
from bot.minify.worker import graph as G
from bot.minify.worker import hints as H
from bot.minify.worker import problem as PR
from bot.minify.worker import search as S
from bot.minify.worker.main import query_bound
from bot.signature import bisect_words
from bot.torch_adapter import fxutil


def _job(failure_class: str = "accuracy", **kw) -> MinifyJob:
    return MinifyJob(**{"repro": "repro.py", "workdir": ".", "failure_class": failure_class, "budget": 600.0, **kw})


def _trace(model, *inputs):
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    with torch.no_grad():
        return make_fx(lambda *a: (model(*a),), decomposition_table=select_decomp_table())(*inputs)


def _deep(layers: int, relu_at: int):
    torch.manual_seed(0)

    class Deep(nn.Module):
        def __init__(self):
            super().__init__()
            self.ls = nn.ModuleList([nn.Linear(16, 16) for _ in range(layers)])
            self.norms = nn.ModuleList([nn.LayerNorm(16) for _ in range(layers)])

        def forward(self, x):
            for i, (lin, norm) in enumerate(zip(self.ls, self.norms)):
                x = norm(lin(x))
                x = torch.relu(x) if i == relu_at else torch.tanh(x)
            return x

    x = torch.randn(2, 16)
    return G.State(_trace(Deep().eval(), x), [x])


def _computes_relu(gm, args) -> bool:
    return any(n.op == "call_function" and n.target is torch.ops.aten.relu.default for n in gm.graph.nodes)


def _tanh_then_relu(gm, args) -> bool:
    """A bug that shows only when the relu and a tanh before it are compiled together."""
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    if torch.ops.aten.relu.default not in targets:
        return False
    return torch.ops.aten.tanh.default in targets[:targets.index(torch.ops.aten.relu.default)]


@pytest.mark.parametrize("relu_at", [3, 98])
def test_the_culprit_of_a_1000_node_graph_is_found_in_about_log2_n_queries(relu_at):
    st = _deep(100, relu_at)
    n = len(st.gm.graph.nodes)
    assert n >= 1000
    oracle = PR.Oracle(_computes_relu)
    st2, culprit = S.find_culprit(st, oracle)
    assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"
    assert oracle.asked <= 2 * math.ceil(math.log2(n)) + 4, oracle.asked
    # exactly the culprit: its input placeholder(s), the op, the output
    assert [x.op for x in st2.gm.graph.nodes] == ["placeholder", "call_function", "output"]
    # fed the real intermediate value, so the op computes what it computed in the big graph
    assert torch.equal(st2.gm(*st2.args)[0], torch.relu(st2.args[0]))


def test_the_search_compiles_graphs_that_shrink_with_every_query():
    """Each query after the first compiles only the half still in question (the compile cost of
    a query is about its size), not a prefix that stays near the whole graph."""
    st = _deep(100, 92)
    sizes = []
    oracle = PR.Oracle(lambda g, a: sizes.append(len(G.call_nodes(g))) or _computes_relu(g, a))
    _, culprit = S.find_culprit(st, oracle)
    assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"
    n = len(G.call_nodes(st.gm))
    assert sizes[0] <= n // 2 + 1 and sizes[-1] == 1, sizes
    assert sum(sizes) < 1.2 * n, (sum(sizes), n, sizes)   # prefixes would compile about n/2 * log2(n)


def test_a_failure_that_needs_its_surroundings_is_found_by_the_prefix_search():
    """A bug that shows only when the relu and the tanh before it are compiled together: no node
    fails alone, so the window search's answer does not count and the prefix search decides."""
    st = _deep(30, 20)

    oracle = PR.Oracle(_tanh_then_relu)
    found, culprit = S.find_culprit(st, oracle)
    assert culprit.method == "graph" and culprit.ops == ["aten.relu.default"]
    assert _tanh_then_relu(found.gm, found.args)
    n = len(G.call_nodes(st.gm))
    assert oracle.asked <= 2 * math.ceil(math.log2(n)) + 4, oracle.asked


def test_no_candidate_is_asked_twice():
    st = _deep(10, 4)
    seen = []
    oracle = PR.Oracle(lambda g, a: seen.append(G.fingerprint(G.State(g, a))) or _computes_relu(g, a))
    st2, _ = S.find_culprit(st, oracle)
    asked = oracle.asked
    assert oracle(st2) is True  # the culprit graph was asked during the search: answered from the cache
    C.cleanup(st2, oracle)
    assert oracle.hits >= 1 and oracle.asked == asked == len(seen) == len(set(seen))


class _Attn(nn.Module):
    """Attention whose result is discarded next to a relu that is returned."""

    def forward(self, q, x):
        F.scaled_dot_product_attention(q, q, q)
        return torch.relu(x) * 2


def test_dead_attention_calls_fx_keeps_are_removed_and_the_result_is_1_minimal():
    q, x = torch.randn(1, 2, 4, 8), torch.randn(4, 8)
    gm = _trace(_Attn(), q, x)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    names = [G.op_name(n) for n in G.call_nodes(gm)]
    assert any("attention" in s for s in names), names  # FX keeps it: it looks impure
    oracle = PR.Oracle(_computes_relu)
    st = C.cleanup(G.State(gm, [q, x]), oracle)
    assert G.culprit_ops(st) == ["aten.relu.default"]
    assert [n.op for n in st.gm.graph.nodes] == ["placeholder", "call_function", "output"]
    assert len(st.args) == 1 and st.args[0] is x  # the unused input is gone
    assert C.is_one_minimal(st, oracle)


@pytest.mark.slow
def test_with_the_real_injected_bug_the_search_names_relu_and_the_bisector_agrees():
    from bot.minify.worker.predicate import Evaluator
    from bot.minify.worker.predicate import bisect_probe as _bisect_probe
    from bot.torch_adapter import bisect as B

    st = _deep(12, 9)
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        ev = Evaluator(_job(), "aot", None)
        ev.pinned = ev.observe(st.gm, st.args)
        assert ev.pinned is not None
        oracle = PR.Oracle(ev)
        alone, culprit = S.find_culprit(st, oracle)
        assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"
        assert oracle.asked <= 2 * math.ceil(math.log2(len(st.gm.graph.nodes))) + 4
        answers = {}
        for kind in ("backend", "dynamo"):  # the worker's way (each backend on the aten graph), and dynamo's
            ev2 = Evaluator(_job(), kind, ev.pinned)
            answers[kind] = B.bisect_graph(alone.gm, alone.args, lambda g, a, b, ev2=ev2: _bisect_probe(ev2, g, a, b),
                                           budget=120)
    res = answers["backend"]
    assert res is not None and not res.incomplete, res
    assert (res.backend, res.subsystem, res.detail) == ("inductor", "lowerings", "relu"), res
    assert PR.agrees_with_bisect(culprit.ops, res) is True and bisect_words(res) == "lowerings: relu"
    # skipping the tracing changes nothing
    assert answers["dynamo"].replace(runs=None) == res.replace(runs=None), answers


# ------------------------------------------------------------------------------------------
# dynamic shapes: a symbolically traced graph stays symbolic through every pass
# ------------------------------------------------------------------------------------------


class _DynMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, n, x):
        h = torch.relu(self.a(x).tanh().view(n, -1)).view(x.shape[0], x.shape[1], -1)
        return self.b(h).sum(1)


def _symbolic_state():
    """The graph AOTAutograd hands inductor for a dynamic=True compile, the way a launcher captured
    with dynamic shapes is traced (make_fx, tracing_mode='symbolic'): a SymInt input, weights as
    inputs, every size symbolic."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    torch.manual_seed(0)
    m = _DynMLP().eval()
    names, weights = zip(*[(k, v.detach()) for k, v in m.named_parameters()])

    def f(n, x, *w):
        return (torch.func.functional_call(m, dict(zip(names, w)), (n, x)),)

    x = torch.randn(4, 5, 8)
    with torch.no_grad():
        gm = make_fx(f, decomposition_table=select_decomp_table(), tracing_mode="symbolic")(4, x, *weights)
    return G.State(gm, [4, x, *weights])


def _relu_with_symbolic_sizes(gm, args) -> bool:
    from bot.torch_adapter.fxutil import symbolic_placeholders

    return symbolic_placeholders(gm) and _computes_relu(gm, args)


def test_a_symbolic_graph_is_reduced_to_the_culprit_with_its_size_input_kept(tmp_path):
    from bot.torch_adapter import repro as R

    st = _symbolic_state()
    assert R.symint_placeholders(st.gm) and fxutil.symbolic_placeholders(st.gm)
    oracle = PR.Oracle(_relu_with_symbolic_sizes)
    alone, culprit = S.find_culprit(st, oracle)
    assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"
    final = C.cleanup(alone, oracle)
    assert G.culprit_ops(final) == ["aten.relu.default"]
    # the batch size is still an input (a SymInt the relu's input size is made of), not a constant
    phs = [n for n in final.gm.graph.nodes if n.op == "placeholder"]
    assert len(phs) == 2 and isinstance(phs[0].meta["val"], torch.SymInt) and final.args[0] == 4
    assert fxutil.free_symbols_of(phs[1].meta["val"]) >= fxutil.free_symbols_of(phs[0].meta["val"])
    assert torch.equal(final.gm(*final.args)[0], torch.relu(final.args[1]))
    # written for torch's run_repro: traced symbolically, the size read as a SymInt input
    src = R.repro_source(final.gm, final.args, kind="aot", accuracy="accuracy", save_dir=str(tmp_path / "in"))
    assert "tracing_mode='symbolic'" in src and "reader.symint(4)" in src
    path = tmp_path / "repro.py"
    path.write_text(src)
    rf = R.parse_repro_file(str(path))
    assert rf.tracing_mode == "symbolic" and rf.dynamic
    loaded = R.load_repro_file(rf)
    gm2, _ = R.trace_aot_graph(loaded, R.read_inputs(loaded, rf.save_dir))
    assert R.symint_placeholders(gm2) and _computes_relu(gm2, None)
    # torch dumps accuracy and runtime failures (levels 3, 4) with real inputs and
    # tracing_mode='real'; their SymInt inputs still say the graph was compiled dynamically
    path.write_text(src.replace("tracing_mode='symbolic'", "tracing_mode='real'"))
    rf = R.parse_repro_file(str(path))
    assert rf.tracing_mode == "real" and rf.dynamic
    loaded = R.load_repro_file(rf)
    assert R.symint_placeholders(R.trace_aot_graph(loaded, R.read_inputs(loaded, rf.save_dir))[0])


def test_a_dynamic_capture_loads_static_with_its_captured_sizes_for_the_static_first_try(tmp_path):
    from bot.minify.worker.predicate import load_graph
    from bot.torch_adapter import repro as R

    st = _symbolic_state()
    path = tmp_path / "launcher.py"
    src = R.repro_source(st.gm, st.args, kind="aot", accuracy="accuracy", save_dir=str(tmp_path / "in"))
    path.write_text(src.replace("tracing_mode='symbolic'", "tracing_mode='real'"))   # as a level-3 dump
    rf, gm, args = load_graph(str(path))
    assert rf.dynamic and R.symint_placeholders(gm) and args[0] == 4
    rf, gm, args = load_graph(str(path), static=True)
    assert not fxutil.symbolic_placeholders(gm) and not R.symint_placeholders(gm) and rf.tracing_mode == "real"
    assert all(isinstance(a, torch.Tensor) for a in args) and len(args) == len(st.args) - 1
    assert torch.allclose(gm(*args)[0], st.gm(*st.args)[0])
    static_src = R.repro_source(gm, args, kind="aot", accuracy="accuracy", save_dir=str(tmp_path / "in2"),
                                tracing_mode=rf.tracing_mode)
    assert "reader.symint(" not in static_src and "tracing_mode='real'" in static_src


def test_a_static_graph_is_written_for_real_tracing(tmp_path):
    from bot.torch_adapter import repro as R

    st = _deep(2, 1)
    assert not fxutil.symbolic_placeholders(st.gm)
    src = R.repro_source(st.gm, st.args, kind="aot", accuracy="accuracy", save_dir=str(tmp_path / "in"))
    assert "tracing_mode='real'" in src


@pytest.mark.slow
def test_a_failure_that_needs_symbolic_sizes_is_not_specialized_away(tmp_path):
    """torch 2.13's C++ backend has no injectable bug that only dynamic kernels get: the relu and
    log1p injections are emitted into static and symbolic kernels alike, and no test-only switch
    touches only symbolic code. So the dynamic-only bug is stood in for by the predicate: the
    injected relu bug counts only while the candidate still compiles with symbolic sizes (what a
    bug in inductor's handling of symbolic sizes looks like to the reducer). A reducer that
    re-traced with real shapes, froze a size into a constant or dropped the size input would lose
    the failure. The repro it writes must make torch's own launcher compile dynamically and fail."""
    import os
    import re
    import subprocess
    import sys

    from bot.minify.worker.predicate import Evaluator
    from bot.torch_adapter import repro as R

    st = _symbolic_state()
    relu_bug = {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}
    with torch._inductor.config.patch(relu_bug):
        ev = Evaluator(_job(workdir=str(tmp_path), dynamic=True),
                       "aot", None)
        ev.pinned = ev.observe(st.gm, st.args)
        assert ev.pinned is not None  # the symbolic graph compiles with dynamic shapes and fails
        oracle = PR.Oracle(lambda g, a: fxutil.symbolic_placeholders(g) and ev(g, a))
        alone, culprit = S.find_culprit(st, oracle)
        final = C.cleanup(alone, oracle)
        src = R.repro_source(final.gm, final.args, kind="aot", accuracy="accuracy", save_dir=str(tmp_path / "in"))
    assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"
    assert G.culprit_ops(final) == ["aten.relu.default"] and R.symint_placeholders(final.gm)
    path = tmp_path / "repro.py"
    path.write_text(src)
    # torch's launcher: minifier-query exits 1 when the graph fails; the kernel it compiled takes
    # the size as an argument (a symbolic-size kernel), not a constant
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, str(path), "minifier-query"], cwd=tmp_path,
                       env=dict(env, TORCH_LOGS="output_code"), capture_output=True, text=True, timeout=300,
                       check=False)
    assert p.returncode == 1, p.stderr[-3000:]
    # symbolic kernels and wrappers name sizes by their symbols (s12, ks0); static ones print numbers
    assert re.search(r"\bk?s\d+\b", p.stderr), p.stderr[-3000:]


# ------------------------------------------------------------------------------------------
# what is known before searching
# ------------------------------------------------------------------------------------------


def test_the_op_a_lowering_error_names_is_verified_with_one_query():
    st = _deep(100, 61)
    text = ("torch._inductor.exc.InductorError: LoweringException: RuntimeError: boom\n"
            "  target: aten.relu.default\n  args[0]: TensorBox(StorageBox(...))")
    hint = H.error_hint(st.gm, text)
    assert hint is not None and hint.source == "error"
    oracle = PR.Oracle(_computes_relu)
    alone, culprit = S.find_culprit(st, oracle, hint=hint)
    assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"
    assert oracle.asked == 1
    assert H.error_hint(st.gm, "CppCompileError: C++ compile error\n error: 'compile' was not declared") is None


def _perturbed_relu(st):
    """What a compiled graph with a wrong relu kernel computes: every intermediate from the relu on
    is off (the relu's output by +1, as the injected bug)."""
    vals, _ = G.eager_values(st.gm, st.args, lambda n: True)
    wrong = {}
    off = False
    for n in G.call_nodes(st.gm):
        v = vals.get(n.name)
        off = off or _computes_relu_node(n)
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            wrong[n.name] = v + 1 if off else v
    return wrong


def _computes_relu_node(n) -> bool:
    return n.op == "call_function" and n.target is torch.ops.aten.relu.default


def test_the_first_diverging_intermediate_narrows_the_search_to_a_few_queries():
    st = _deep(100, 61)
    n = len(st.gm.graph.nodes)
    hint = H.divergence_hint(st.gm, st.args, _perturbed_relu(st), tol=1e-4)
    calls = G.call_nodes(st.gm)
    relu_at = next(i for i, c in enumerate(calls) if _computes_relu_node(c))
    assert hint is not None and hint.lo <= relu_at < hint.hi
    oracle = PR.Oracle(_computes_relu)
    _, culprit = S.find_culprit(st, oracle, hint=hint)
    assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"
    assert oracle.asked <= 2
    plain = PR.Oracle(_computes_relu)
    S.find_culprit(st, plain)
    assert plain.asked >= math.ceil(math.log2(n)) - 2 > oracle.asked


def test_a_wrong_hint_costs_its_queries_and_the_whole_search_still_finds_the_culprit():
    st = _deep(30, 20)
    calls = G.call_nodes(st.gm)
    wrong = H.Hint("divergence", node=calls[3].name, lo=0, hi=10)
    oracle = PR.Oracle(_computes_relu)
    _, culprit = S.find_culprit(st, oracle, hint=wrong)
    assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"
    assert oracle.asked <= 1 + math.ceil(math.log2(10)) + 1 + math.ceil(math.log2(len(calls))) + 1


def test_the_analysis_graph_outputs_every_floating_point_intermediate():
    st = _deep(3, 1)
    probe, names = H.all_outputs_state(st)
    outs = probe.gm(*probe.args)
    vals, _ = G.eager_values(st.gm, st.args, lambda n: n.name in names)
    assert len(outs) == len(names) >= 3 * 3
    assert all(torch.allclose(o, vals[nm]) for o, nm in zip(outs, names))


@pytest.mark.slow
def test_with_the_real_injected_bug_the_fp64_divergence_points_at_the_relu(capsys):
    from bot.minify.worker.passes import known_hint
    from bot.minify.worker.predicate import Evaluator
    from bot.minify.worker.problem import Problem

    st = _deep(12, 9)
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        ev = Evaluator(_job(), "aot", None)
        ev.pinned = ev.observe(st.gm, st.args)
        hint = known_hint(Problem(st, PR.Oracle(ev), _job()))
        assert ev.queries == 1                       # the analysis compile counts as a query, through the oracle
        calls = G.call_nodes(st.gm)
        assert hint is not None and any(_computes_relu_node(c) for c in calls[hint.lo:hint.hi]), hint
        oracle = PR.Oracle(ev)
        _, culprit = S.find_culprit(st, oracle, hint=hint)
    assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"
    # the analysis compile plus the search in the hinted range, against ~log2(N) without it
    with capsys.disabled():
        print(f"\nfp64 divergence: {len(st.gm.graph.nodes)} nodes, range {hint.hi - hint.lo} call nodes, "
              f"{1 + oracle.asked} queries")
    assert 1 + oracle.asked <= 1 + math.ceil(math.log2(max(2, hint.hi - hint.lo))) + 1


def _feeds_in_graph(src, dst):
    """A predicate: the graph computes ``dst`` from ``src`` inside the graph (a path of call nodes
    from a ``src`` node to a ``dst`` node): a bug of several connected ops, lost when the path is
    cut at any node."""
    def fails(g, a) -> bool:
        for n in g.graph.nodes:
            if n.op != "call_function" or n.target is not dst:
                continue
            seen, stack = set(), list(n.all_input_nodes)
            while stack:
                m = stack.pop()
                if m in seen or m.op != "call_function":
                    continue
                if m.target is src:
                    return True
                seen.add(m)
                stack.extend(m.all_input_nodes)
        return False
    return fails


@pytest.mark.parametrize("layers,relu_at", [(30, 20), (100, 7), (100, 95)])
def test_a_culprit_of_several_connected_nodes_costs_log_n_twice_plus_its_size(layers, relu_at):
    """The failure needs the linear (addmm) whose result reaches the relu through the layer norm's
    ops: where it shows (the prefix search), how far back it reaches, then 1-minimal, within
    2*ceil(log2 N) + 2*(final nodes) + 4 queries, and no node of the chain is lost."""
    from bot.minify.worker.main import reduce_graph

    st = _deep(layers, relu_at)
    fails = _feeds_in_graph(torch.ops.aten.addmm.default, torch.ops.aten.relu.default)
    assert fails(st.gm, st.args)
    asked = []
    oracle_fails = lambda g, a: asked.append(1) or fails(g, a)  # noqa: E731

    class Ev:
        kind, deadline, queries = "aot", None, 0

        def __call__(self, g, a):
            return oracle_fails(g, a)

    gm, args, culprit = reduce_graph(_job("error", use_hints=False), st.gm, st.args, Ev(),
                                     lambda g, a: None, "/nonexistent")
    final_nodes = len(gm.graph.nodes)
    n = len(st.gm.graph.nodes)
    assert fails(gm, args)
    ops = G.culprit_ops(G.State(gm, args))
    assert "aten.addmm.default" in ops and "aten.relu.default" in ops, ops
    assert culprit.method == "graph"
    assert len(asked) <= query_bound(n, final_nodes), (len(asked), n, final_nodes)
    # 1-minimal: no single node can go
    assert C.is_one_minimal(G.State(gm, args), PR.Oracle(fails))


def test_the_cleanup_passes_run_as_a_list_to_a_fixed_point_and_say_what_each_did():
    q, x = torch.randn(1, 2, 4, 8), torch.randn(4, 8)
    gm = _trace(_Attn(), q, x)
    oracle = PR.Oracle(_computes_relu)
    stats = PR.PassStats()
    st = C.cleanup(G.State(gm, [q, x]), oracle, stats)
    assert G.culprit_ops(st) == ["aten.relu.default"]
    assert list(stats.queries) == ["remove_dead", "drop_outputs", "bypass_nodes", "remove_nodes", "drop_unused_inputs"]
    assert stats.removed["remove_dead"] >= 1                     # the dead attention call
    assert sum(stats.queries.values()) == oracle.asked          # every query is accounted to a pass
    assert sum(stats.removed.values()) == len(G.call_nodes(gm)) - len(G.call_nodes(st.gm))
    assert stats.rounds == 2                                     # the second round removed nothing


class _TwoBranches(nn.Module):
    """A reduction on one branch and a relu on another: nothing joins them until the end."""

    def __init__(self, layers: int = 12):
        super().__init__()
        self.a = nn.ModuleList([nn.Linear(16, 16) for _ in range(layers)])
        self.b = nn.ModuleList([nn.Linear(16, 16) for _ in range(layers)])

    def forward(self, x, y):
        for lin in self.a:
            x = torch.tanh(lin(x))
        s = x.exp().sum(-1, keepdim=True)
        for i, lin in enumerate(self.b):
            y = lin(y)
            y = torch.relu(y) if i == len(self.b) - 2 else torch.sigmoid(y)
        return s * y


def _has(g, target) -> bool:
    return any(n.op == "call_function" and n.target is target for n in g.graph.nodes)


@pytest.mark.parametrize("layers", [12, 40])
def test_a_compile_error_that_needs_an_unrelated_node_compiled_beside_it_stays_within_the_query_bound(layers):
    """A compile error of the kind a fused kernel raises (two reductions in one kernel): it needs
    the exp on one branch and the relu on the other in the same compiled graph, and neither is the
    other's ancestor, so the relu's own output does not show it. The window search finds where it
    shows and how far back it reaches without the prefix search or torch's delta debugging:
    within 2*ceil(log2 N) + 2*(final nodes) + 4 queries, 1-minimal."""
    from bot.minify.worker.main import reduce_graph

    torch.manual_seed(0)
    x, y = torch.randn(4, 16), torch.randn(4, 16)
    st = G.State(_trace(_TwoBranches(layers), x, y), [x, y])
    fails = lambda g, a: _has(g, torch.ops.aten.exp.default) and _has(g, torch.ops.aten.relu.default)  # noqa: E731
    asked = []

    class Ev:
        kind, deadline, queries = "aot", None, 0

        def __call__(self, g, a):
            asked.append(1)
            return fails(g, a)

    gm, args, culprit = reduce_graph(_job("error", use_hints=False), st.gm, st.args, Ev(),
                                     lambda g, a: None, "/nonexistent")
    n, final_nodes = len(st.gm.graph.nodes), len(gm.graph.nodes)
    assert fails(gm, args)
    assert sorted(G.culprit_ops(G.State(gm, args))) == ["aten.exp.default", "aten.relu.default"]
    assert len(asked) <= query_bound(n, final_nodes), (len(asked), n, final_nodes)
    assert C.is_one_minimal(G.State(gm, args), PR.Oracle(fails))


def test_drop_outputs_drops_one_output_after_another_when_no_single_output_shows_the_failure():
    """The failure needs two of three outputs (a fused kernel of both): each alone passes, so the
    outputs go one at a time, and every later trial still cuts from the graph it was given."""
    a, b, c = torch.randn(4), torch.randn(4), torch.randn(4)
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda a, b, c: (torch.tanh(c), torch.relu(a), torch.exp(b)))(a, b, c)
    fails = lambda g, _: _has(g, torch.ops.aten.relu.default) and _has(g, torch.ops.aten.exp.default)  # noqa: E731
    st = C.drop_outputs(G.State(gm, [a, b, c]), PR.Oracle(fails))
    assert sorted(G.culprit_ops(st)) == ["aten.exp.default", "aten.relu.default"]
    assert len(G.outputs_of(st.gm)) == 2


# ------------------------------------------------------------------------------------------
# control flow: a cond's branch and a nested compile region are inlined before the search
# ------------------------------------------------------------------------------------------


def _aot_graph(fn, *inputs):
    """The graph AOT autograd hands inductor for ``fn`` (what a launcher captured after AOT holds)."""
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs = []

    def backend(gm, example_inputs):
        def fw(g, _):
            graphs.append(g)
            return g.forward
        return aot_module_simplified(gm, example_inputs, fw_compiler=fw)

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=backend, fullgraph=True)(*inputs)
    torch._dynamo.reset()
    (gm,) = graphs
    return gm


def _relu_anywhere(gm, args) -> bool:
    """The failure as the real one behaves: a relu fails however deep in subgraphs it is compiled."""
    return any(n.op == "call_function" and n.target in (torch.ops.aten.relu.default, torch.relu)
               for m in gm.modules() if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes)


@pytest.mark.parametrize("take", [True, False])
def test_a_culprit_inside_a_cond_branch_and_a_nested_region_is_reduced_to_the_op_itself(take):
    @torch.compiler.nested_compile_region
    def layer(x, w):
        return torch.tanh(x @ w) + 1

    def f(x, w, p):
        y = layer(layer(x, w), w)
        return torch.cond(p, lambda a: torch.relu(a.sin() * 3) - 1, lambda a: a.cos() * 2, (y,))

    x, w, p = torch.randn(4, 4), torch.randn(4, 4), torch.tensor(take)
    gm = _aot_graph(f, x, w, p)
    st = G.State(gm, [x, w, p])
    targets = {str(n.target) for n in gm.graph.nodes}
    assert {"cond", "invoke_subgraph"} <= targets, targets   # what the search could not look inside
    logs = []
    oracle = PR.Oracle(_relu_anywhere)
    flat = S.inline_subgraphs(st, oracle, log=logs.append)
    if not take:   # the branch the predicate took has no relu: the graph fails only as called
        assert flat is st and "does not fail" in logs[-1]
        return
    assert oracle.asked == 1 and "inlined" in logs[-1]
    ops = {str(n.target) for n in flat.gm.graph.nodes if n.op == "call_function"}
    assert not ops & {"cond", "invoke_subgraph"} and "aten.cos.default" not in ops, ops
    assert ops >= {"aten.relu.default", "aten.tanh.default", "aten.sin.default"}, ops
    # the flat graph computes what the original did
    torch.testing.assert_close(flat.gm(*flat.args), gm(*st.args))
    alone, culprit = S.find_culprit(flat, oracle)
    assert culprit.ops == ["aten.relu.default"] and culprit.method == "compiled-alone"


def test_an_activation_checkpointed_region_captured_after_dynamo_loads_and_is_inlined(tmp_path, monkeypatch):
    """``torch.utils.checkpoint`` under torch.compile: dynamo's graph calls the region's body through
    ``tag_activation_checkpoint``. The capture writes it (inlined where this torch cannot write the
    body's module), the worker loads it (the call one node, not run on fx's proxies), and the search
    reaches the culprit inside."""
    from torch.utils.checkpoint import checkpoint

    from bot.minify.worker.predicate import load_graph
    from bot.torch_adapter import repro as R

    monkeypatch.setenv(R.CAPTURE_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(R.CAPTURE_INNER_ENV, "eager")

    def f(x, w):
        return checkpoint(lambda a, b: torch.relu(a @ b).sin() * 2, x, w, use_reentrant=False).sum()

    x, w = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    torch._dynamo.reset()
    try:
        torch.compile(f, backend=R.capture_backend)(x, w).backward()
    finally:
        torch._dynamo.reset()
    assert not list(tmp_path.glob("*.error")), [p.read_text() for p in tmp_path.glob("*.error")]
    _rf, gm, args = load_graph(str(tmp_path / "graph_0.py"))
    oracle = PR.Oracle(_relu_anywhere)
    flat = S.inline_subgraphs(G.State(gm, args), oracle)
    assert not any(fxutil.subgraph_call(n) for n in flat.gm.graph.nodes)
    torch.testing.assert_close(flat.gm(*args), gm(*args))
    alone, culprit = S.find_culprit(flat, oracle)
    assert culprit.ops == ["relu"] and culprit.method == "compiled-alone", culprit


def test_a_graph_that_cannot_run_on_its_captured_strides_is_loaded_with_contiguous_inputs(tmp_path):
    """A backward graph can receive a saved tensor in another layout than it was traced for
    (channels-last out of inductor's compiled forward): a view in it fails eagerly on those
    strides, so its inputs are made contiguous rather than the graph given up."""
    from bot.minify.worker.predicate import load_graph
    from bot.torch_adapter import repro as R

    gm = _trace(lambda a: torch.nn.functional.avg_pool2d(a, 3, 2, ceil_mode=True).view(4, -1), torch.randn(4, 16, 8, 8))
    x = torch.randn(4, 16, 8, 8).to(memory_format=torch.channels_last)
    with pytest.raises(Exception, match="view"):
        gm(x)
    path = tmp_path / "launcher.py"
    path.write_text(R.repro_source(gm, [x], kind="aot", accuracy="accuracy", save_dir=str(tmp_path / "in")))
    _rf, loaded_gm, args = load_graph(str(path))
    assert args[0].is_contiguous() and torch.equal(args[0], x)
    torch.testing.assert_close(loaded_gm(*args)[0], gm(x.contiguous())[0])


def test_a_subgraph_fed_a_module_attribute_is_inlined_and_one_that_calls_a_module_stays_called():
    """An operand read from the module (a constant tensor) is kept as it is; a subgraph that calls a
    module of its own cannot be inlined: the graph stays as called, nothing raises."""
    import torch.fx as fx

    invoke = torch.ops.higher_order.invoke_subgraph

    class Body(nn.Module):
        def forward(self, a, c):
            return (torch.relu(a) + c,)

    class WithModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, a, c):
            return (torch.relu(self.lin(a)) + c,)

    for body, inlined in ((Body(), True), (WithModule(), False)):
        root = nn.Module()
        root.body = fx.symbolic_trace(body)
        root.register_buffer("const", torch.randn(4))
        g = fx.Graph()
        x = g.placeholder("x")
        call = g.call_function(invoke, (g.get_attr("body"), "subgraph_0", x, g.get_attr("const")))
        g.output((g.call_function(operator.getitem, (call, 0)),))
        gm = fx.GraphModule(root, g)
        st = G.State(gm, [torch.randn(3, 4)])
        logs = []
        flat = S.inline_subgraphs(st, PR.Oracle(_relu_anywhere), log=logs.append)
        assert (flat is not st) == inlined, logs
        if inlined:
            assert not any(fxutil.subgraph_call(n) for n in flat.gm.graph.nodes)
            torch.testing.assert_close(flat.gm(*st.args), gm(*st.args))
            assert {n.name for n in flat.gm.graph.nodes} >= {"invoke_subgraph_relu"}   # named after the call


def test_a_dynamo_graphs_python_operators_are_named_as_torch_names_them():
    """A dynamo graph calls ``operator.mul`` for ``a * b``: the culprit, the graph's ops and so the title say
    ``mul`` and ``div``, never ``_operator.*``."""
    import torch.fx as fx

    from bot.torch_adapter.minifier import graph_ops

    def f(x, y):
        z = x * y / 2 - x // 3
        z += 1
        return F.conv2d(z[:, None], torch.ones(1, 1, 1, 1)), z @ y.T, torch.relu(z)

    gm = fx.symbolic_trace(f)
    names = [G.op_name(n) for n in G.call_nodes(gm)]
    assert names[:5] == ["mul", "div", "floor_divide", "sub", "add"]
    assert "getitem" in names and "conv2d" in names and "matmul" in names and "relu" in names
    assert [o.op for o in graph_ops(gm)] == names
    assert not any("operator" in n for n in G.culprit_ops(G.State(gm, [])))


def _stretch_graph():
    """benchmarks/genuine/uint8_image_stretch.py's contrast stretch: a uint8 ``amin`` feeding uint8
    arithmetic, then floats; beside it an ``argmax`` of floats (an integer computed from floats)."""
    def f(frames, w):
        lo = frames.amin(-1, keepdim=True)
        x = (frames - lo).clamp_min(1).float() / 255.0
        return x @ w, (x @ w).argmax(-1)

    torch.manual_seed(0)
    args = [torch.randint(16, 240, (4, 32), dtype=torch.uint8), torch.randn(32, 8)]
    return G.State(_trace(f, *args), args)


def test_a_wrong_integer_value_computed_from_integers_is_the_first_divergence_and_says_so():
    st = _stretch_graph()
    probe, names = H.all_outputs_state(st, integers=True)
    vals, _ = G.eager_values(st.gm, st.args, lambda n: n.name in names)
    calls = G.call_nodes(st.gm)
    amin = next(i for i, c in enumerate(calls) if "amin" in G.op_name(c))
    wrong = dict(vals)
    wrong[calls[amin].name] = torch.zeros_like(vals[calls[amin].name])   # the compiled uint8 amin's 0
    for c in calls[amin + 1:]:   # and everything computed from it
        if isinstance(wrong.get(c.name), torch.Tensor) and c.name in names:
            wrong[c.name] = wrong[c.name] + 1 if wrong[c.name].is_floating_point() else wrong[c.name] ^ 1
    hint = H.divergence_hint(st.gm, st.args, wrong, tol=1e-4)
    assert hint is not None and hint.integers and hint.lo <= amin < hint.hi == amin + 1
    only_argmax = dict(vals)
    arg = next(c for c in calls if "argmax" in G.op_name(c))
    only_argmax[arg.name] = vals[arg.name] + 1   # an integer computed from floats: ties may differ, not judged
    assert H.divergence_hint(st.gm, st.args, only_argmax, tol=1e-4) is None
    assert H.divergence_hint(st.gm, st.args, vals, tol=1e-4) is None


def test_ops_that_only_transform_the_culprits_output_are_removed_indexing_included():
    """A dynamo graph (``x - amin``, then ``[:, None]``: Python's operators, a tensor indexed with
    ``getitem``): the failure survives at the culprit's own output, so nothing after it stays; the
    indexing ``getitem`` is an op like any other, not the element of a tuple."""
    import torch.fx as fx

    def f(a, b):
        y = torch.atan2(a, b).amin(1)
        return (a.sum(1) - y)[:, None]

    gm = fx.symbolic_trace(f)
    torch.manual_seed(0)
    st = G.State(gm, [torch.randn(4, 8), torch.randn(4, 8)])
    oracle = PR.Oracle(lambda g, a: any("amin" in G.op_name(n) for n in G.call_nodes(g)))
    final = C.cleanup(st, oracle)
    assert G.culprit_ops(final) == ["amin"], G.culprit_ops(final)
    tup = fx.symbolic_trace(lambda x: torch.max(x, 1)[0])   # the element of a tuple goes with its op
    assert G.multi_output_source(next(n for n in tup.graph.nodes if n.target is operator.getitem)) is not None


def test_a_failure_at_the_last_node_that_needs_its_surroundings_is_reached_back_not_delta_debugged():
    """The culprit is the graph's last node and fails only with the tanh before it: every shorter
    prefix passes, so the smallest failing prefix is the whole graph. The search still names the
    last node, and reach-back finds the piece the failure needs, within the query bound, instead
    of handing the whole graph to torch's delta debugging (a fuzz finding took 46 queries that way,
    against a bound of 24)."""
    from bot.minify.worker.main import reduce_graph

    st = _deep(24, 23)

    calls = G.call_nodes(st.gm)
    assert calls[-1].target is torch.ops.aten.relu.default
    found, culprit = S.find_culprit(st, PR.Oracle(_tanh_then_relu), windows=False)
    assert culprit.method == "graph" and culprit.ops == ["aten.relu.default"] and found is st
    asked = []

    class Ev:
        kind, deadline, queries = "aot", None, 0

        def __call__(self, g, a):
            return asked.append(1) or _tanh_then_relu(g, a)

    gm, args, culprit = reduce_graph(_job("error", use_hints=False), st.gm, st.args, Ev(),
                                     lambda g, a: None, "/nonexistent")
    assert _tanh_then_relu(gm, args) and culprit.method == "graph"
    ops = G.culprit_ops(G.State(gm, args))
    assert "aten.tanh.default" in ops and "aten.relu.default" in ops and len(ops) < len(calls) // 4, ops
    assert len(asked) <= query_bound(len(st.gm.graph.nodes), len(gm.graph.nodes)), len(asked)


def _abs_reaches_argmax(gm, args) -> bool:
    """A bug that needs ``abs``'s code compiled before an ``argmax`` (int16 promoted to int on its
    way, as a fuzz finding on torch 2.15 had it), however many ops are between them."""
    for n in G.call_nodes(gm):
        if "argmax" in G.op_name(n):
            stack, seen = list(n.all_input_nodes), set()
            while stack:
                m = stack.pop()
                if m in seen or m.op == "placeholder":
                    continue
                seen.add(m)
                if "abs" in G.op_name(m):
                    return True
                stack.extend(m.all_input_nodes)
    return False


def test_an_op_between_the_two_the_failure_needs_is_bypassed_not_kept():
    """``argmax(div(abs(x), 3))`` fails because of ``abs`` feeding ``argmax``: cutting ``div``
    (its value as an input) loses the failure, so a cleanup of cuts alone keeps all three ops.
    Bypassing ``div`` (``argmax`` reads ``abs`` directly) keeps it: the repro is the two ops a
    person would write, and the pass says what it removed."""
    x = torch.tensor([[3, -7, 2], [5, 1, -9]], dtype=torch.int16)
    gm = _trace(lambda x: torch.argmax(torch.div(torch.abs(x), 3, rounding_mode="floor"), 0, True), x)
    st = G.State(gm, [x])
    assert _abs_reaches_argmax(gm, [x])
    cut_only = C.cleanup(st, PR.Oracle(_abs_reaches_argmax), passes=tuple(
        p for p in C.CLEANUP_PASSES if p is not C.bypass_nodes))
    assert len(G.culprit_ops(cut_only)) > 2, G.culprit_ops(cut_only)
    stats, oracle = PR.PassStats(), PR.Oracle(_abs_reaches_argmax)
    final = C.cleanup(st, oracle, stats)
    assert [op.rsplit(".", 2)[-2] if op.startswith("aten.") else op for op in G.culprit_ops(final)] == \
        ["abs", "argmax"], G.culprit_ops(final)
    assert stats.removed["bypass_nodes"] >= 1
    assert oracle.asked <= query_bound(len(gm.graph.nodes), len(final.gm.graph.nodes))
    assert torch.equal(final.gm(*final.args)[0], torch.argmax(torch.abs(x), 0, True))
