"""The shape of the minify worker's reduction (bot/minify/worker/passes.py over bot/minify/worker/problem.py):
one ordered list of passes over one problem, every query through the one oracle, and a pass added as one
function plus one line; the worker package apart from the parent side; the parent side's one list of steps.

Fast: the graphs are torch.fx.symbolic_trace'd tiny functions judged by a plain Python predicate;
nothing is compiled."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch
import torch.fx

from bot.minify import pipeline as pl
from bot.minify.records import MinifyJob, PassStat, WorkerResult
from bot.minify.worker import graph as G
from bot.minify.worker import passes as P
from bot.minify.worker import problem as PR
from bot.minify.worker.main import reduce_graph
from tests.test_architecture import _import_statements

BOT = Path(__file__).resolve().parent.parent / "bot"
WORKER = BOT / "minify" / "worker"
SHARED = "bot.minify.records"        # the typed records both sides read and write


def _job(**kw) -> MinifyJob:
    return MinifyJob(**{"repro": "repro.py", "workdir": ".", "failure_class": "runtime_error", "budget": 60.0,
                        "use_hints": False, **kw})


def _tiny():
    def f(x, y):
        a = torch.sin(x) + y
        b = torch.relu(a) * 2
        return torch.cos(b) - torch.tanh(y)

    x, y = torch.randn(4, 8), torch.randn(4, 8)
    return torch.fx.symbolic_trace(f), [x, y]


def _calls_relu(gm, args) -> bool:
    return any(n.op == "call_function" and n.target is torch.relu for n in gm.graph.nodes)


class _Predicate:
    """The oracle's evaluator: a plain Python predicate over the graph (no compile), counting its calls."""

    kind, deadline, queries = "aot", None, 0

    def __call__(self, gm, args) -> bool:
        self.queries += 1
        return _calls_relu(gm, args)


def relu_alone(problem: PR.Problem) -> None:
    """A toy pass: the relu compiled alone, fed its real eager input, kept when it still fails."""
    node = next(n for n in G.call_nodes(problem.state.gm) if n.target is torch.relu)
    cand = G.alone_state(problem.state, node)
    if cand is not None and problem.oracle(cand):
        problem.state = cand


def test_a_new_pass_is_one_function_and_one_line_and_its_statistics_reach_the_log_and_the_result(capsys):
    gm, args = _tiny()
    n = len(G.call_nodes(gm))
    stats = PR.PassStats()
    steps = [relu_alone, P.cleanup]          # the one line: the toy pass in the list
    out, _, culprit = reduce_graph(_job(), gm, args, _Predicate(), lambda g, a: None, "/nonexistent", stats, steps)
    assert [n.target for n in G.call_nodes(out)] == [torch.relu]
    assert culprit.ops == ["relu"] and culprit.method == "graph"
    toy = next(s for s in stats.records() if s.name == "relu_alone")
    assert (toy.queries, toy.removed) == (1, n - 1) and toy.seconds >= 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("reduce: "))
    g0 = len(gm.graph.nodes)
    assert line.startswith(f"reduce: {n} -> 1 call nodes ({g0} -> {len(out.graph.nodes)} graph nodes) in 1 queries "
                           "(within the bound")
    assert f"relu_alone: 1 queries, {n - 1} nodes removed, " in line and "remove_nodes: 0 queries" in line
    # the worker's result.json carries it, typed
    result = WorkerResult.from_json(WorkerResult(passes=stats.records()).to_json())
    assert result.passes[0] == PassStat("relu_alone", 1, n - 1, toy.seconds)


def test_a_conditional_pass_is_skipped_and_gets_no_record():
    gm, args = _tiny()
    problem = PR.Problem(G.State(gm, args), PR.Oracle(_Predicate()), _job())
    P.run(problem, [P.inline_subgraphs, P.hint, relu_alone])      # no subgraph call; hints off
    assert [s.name for s in problem.stats.records()] == ["relu_alone"]


def test_the_reduction_runs_search_reach_back_and_fallback_only_where_they_apply():
    gm, args = _tiny()
    problem = PR.Problem(G.State(gm, args), PR.Oracle(_Predicate()), _job())
    P.run(problem, P.REDUCTION)
    names = [s.name for s in problem.stats.records()]
    # the relu fails compiled alone: the answer; no reach-back, no fx minifier
    assert names[0] == "culprit_search" and "reach_back" not in names and "fx_minifier" not in names, names
    assert problem.done and problem.culprit.method == "compiled-alone" and problem.culprit.ops == ["relu"]
    assert sum(s.queries for s in problem.stats.records()) == problem.oracle.asked


# ------------------------------------------------------------------------------------------
# fitness: only the oracle asks the evaluator; the worker package never imports the parent side
# ------------------------------------------------------------------------------------------

EVALUATOR_CALLS = {"compile", "observe", "fails", "compile_aot", "compile_dynamo", "compile_backend"}
EVALUATOR_NAMES = {"evaluator", "ev"}
# what judges a candidate outside the reduction, each with its reason; every other call in the worker
# package that asks an evaluator is in problem.py's Oracle
NOT_THE_REDUCTION = {
    # the evaluator itself: how a candidate is compiled and judged
    "bot/minify/worker/predicate.py": "*",
    # the worker's steps other than the reduction (the sanity run, the config diff, the final repro,
    # the bisector) judge the captured or the final graph with evaluators of their own
    "bot/minify/worker/main.py": frozenset({"Run", "step_sanity", "static_first", "_static_first_dynamo",
                                            "step_config", "step_final", "step_bisect"}),
    # the numerics readout compiles the final graph's prefixes after the reduction (no query of it)
    "bot/minify/worker/readout.py": frozenset({"numerics_readout", "fused_divergence", "determinism"}),
}


def worker_modules() -> dict[str, str]:
    """Every module of the worker package: {bot/... path: its source}."""
    return {p.relative_to(BOT.parent).as_posix(): p.read_text(encoding="utf-8") for p in sorted(WORKER.rglob("*.py"))}


def evaluator_calls(rel: str, source: str, skip: frozenset = frozenset()) -> list[str]:
    """Calls that ask an evaluator (``x.compile(...)``, ``x.observe(...)``, ``x.fails(...)``,
    ``evaluator(...)``) outside class ``Oracle`` and the top-level definitions named in ``skip``."""
    found = []
    for top in ast.parse(source).body:
        if getattr(top, "name", None) in {"Oracle", *skip}:
            continue
        for n in ast.walk(top):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            asks = (isinstance(f, ast.Attribute) and f.attr in EVALUATOR_CALLS
                    and not (isinstance(f.value, ast.Name) and f.value.id == "re")) or \
                (isinstance(f, ast.Name) and f.id in EVALUATOR_NAMES)
            if asks:
                found.append(f"{rel}:{n.lineno} {ast.unparse(f)}")
    return found


def test_the_evaluator_call_checker_finds_a_compile_outside_the_oracle():
    src = ("import re\nT = re.compile('x')\nclass Oracle:\n    def f(self, st):\n        return self.fails(st)\n"
           "def hint(problem, evaluator):\n    evaluator.compile(1, 2)\n    return evaluator(1, 2)\n")
    assert evaluator_calls("m.py", src) == ["m.py:7 evaluator.compile", "m.py:8 evaluator"]
    assert evaluator_calls("m.py", src, skip=frozenset({"hint"})) == []


def test_only_the_oracle_asks_the_evaluator_in_the_worker_package():
    modules = worker_modules()
    assert {f"bot/minify/worker/{m}.py" for m in ("problem", "passes", "search", "cleanup")} <= set(modules)
    assert set(NOT_THE_REDUCTION) <= set(modules), "an entry of NOT_THE_REDUCTION names no module"
    found = [f for rel, src in modules.items() if NOT_THE_REDUCTION.get(rel) != "*"
             for f in evaluator_calls(rel, src, skip=NOT_THE_REDUCTION.get(rel, frozenset()))]
    assert found == [], "the worker asks the evaluator only through problem.Oracle:\n" + "\n".join(found)
    # the oracle's own class does ask it: the checker would see it there
    problem = modules["bot/minify/worker/problem.py"].replace("class Oracle:", "class NotTheOracle:")
    assert evaluator_calls("bot/minify/worker/problem.py", problem)


def parent_imports(rel: str, source: str) -> list[str]:
    """The modules of the minify stage outside the worker package that ``rel`` (a module of the worker
    package) imports, at any depth, the shared records excepted."""
    module = rel.removesuffix(".py").replace("/", ".")
    package = module.removesuffix(".__init__") if rel.endswith("__init__.py") else module.rpartition(".")[0]
    names = set()
    for target, taken in _import_statements(ast.parse(source), package):
        names |= {target} | {f"{target}.{name}" for name in taken}   # `from bot.minify import procs`
    return sorted(f"{rel} imports {name}" for name in names
                  if name.startswith("bot.minify.") and not name.startswith(("bot.minify.worker", SHARED)))


def test_the_parent_import_checker_finds_the_parent_side():
    src = ("from bot.minify.records import Query\nfrom bot.minify.worker import graph\n"
           "def f():\n    from bot.minify import procs\n    from .. import verify\n")
    assert parent_imports("bot/minify/worker/x.py", src) == [
        "bot/minify/worker/x.py imports bot.minify.procs", "bot/minify/worker/x.py imports bot.minify.verify"]


def test_the_worker_package_never_imports_the_parent_side():
    modules = worker_modules()
    assert len(modules) >= 10
    found = [f for rel, src in modules.items() for f in parent_imports(rel, src)]
    assert found == [], "the worker package imports the parent side:\n" + "\n".join(found)


# ------------------------------------------------------------------------------------------
# fitness: the parent side is one ordered list of steps; only the runner calls a step
# ------------------------------------------------------------------------------------------


def step_calls(source: str) -> tuple[list[str], list[str]]:
    """(the names in the module's ``STEPS`` list, the calls of a step or of the runner
    (``run``/``process``) made from inside any top-level definition)."""
    tree = ast.parse(source)
    steps: list[str] = []
    for top in tree.body:
        target = top.target if isinstance(top, ast.AnnAssign) else (
            top.targets[0] if isinstance(top, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "STEPS":
            steps = [e.id for e in top.value.elts]
    reentry = {"run", "process"}
    found = []
    for top in tree.body:
        if not isinstance(top, (ast.FunctionDef, ast.ClassDef)):
            continue
        for n in ast.walk(top):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and (
                    n.func.id in steps or (n.func.id in reentry and top.name in steps)):
                found.append(f"{top.name}:{n.lineno} calls {n.func.id}")
    return steps, found


def test_the_step_call_checker_finds_a_step_calling_a_step_or_reentering():
    src = ("def a(f):\n    b(f)\ndef b(f):\n    run(f, STEPS)\ndef helper(f):\n    a(f)\n"
           "def run(f, steps):\n    for s in steps:\n        s(f)\nSTEPS = [a, b]\n")
    assert step_calls(src) == (["a", "b"], ["a:2 calls b", "b:4 calls run", "helper:6 calls a"])


def test_the_pipeline_is_one_list_of_steps_that_only_the_runner_calls():
    steps, found = step_calls((BOT / "minify" / "pipeline.py").read_text())
    assert steps == [s.__name__ for s in pl.STEPS] and len(steps) >= 5
    assert found == [], "a step is called only by pipeline.run:\n" + "\n".join(found)


def _entered(f) -> list[str]:
    return [name for name, seconds in f.step_seconds]


def test_a_step_that_retries_the_capture_sends_the_runner_back_and_each_entry_is_recorded(tmp_path):
    """The runner, on the pipeline's own Failure: a pass that found no failing graph at level 4 asks for
    level 3 (``f.retry_capture``); the runner goes back to ``capture``, and each step entered is
    recorded once per pass, what the first pass handed on dropped before the second."""
    from tests.test_pipeline import _failure

    seen = []

    def capture(f):
        seen.append(("capture", f.setting, f.candidates))
        f.candidates = pl.Candidates([f"launcher{f.setting}.py"], f.work)

    def reduce(f):
        seen.append(("reduce", f.setting, f.candidates.paths))

    def next_capture(f):
        if f.setting == 4:
            f.retry_capture(3)
        else:
            f.done = True

    def after(f):   # never entered: the failure is done
        raise AssertionError("entered after done")

    f = _failure(tmp_path)
    f.setting = 4
    pl.run(f, [capture, reduce, next_capture, after])
    assert _entered(f) == ["capture", "reduce", "next_capture"] * 2
    assert seen == [("capture", 4, None), ("reduce", 4, ["launcher4.py"]),
                    ("capture", 3, None), ("reduce", 3, ["launcher3.py"])]
    assert all(isinstance(s, float) and s >= 0 for _, s in f.step_seconds)


def test_a_step_that_never_settles_the_failure_is_stopped_by_the_runner(tmp_path):
    from bot.errors import InfraError
    from tests.test_pipeline import _failure

    def capture(f):
        f.retry_capture(3)   # a bug: every pass asks for another

    f = _failure(tmp_path)
    with pytest.raises(InfraError, match="without settling"):
        pl.run(f, [capture])
    assert len(f.step_seconds) == pl.MAX_ENTRIES


@pytest.mark.slow
def test_one_failure_followed_through_minify_enters_each_step_once(tmp_path):
    """A real failure (the zoo's mlp_relu, inductor's relu made wrong by torch's test-only injection)
    followed through minify: the runner enters every step of ``STEPS`` once, in order, each with its
    seconds in the ``steps:`` line, and the steps hand their results on through the Failure's fields."""
    from bot.check.settings import Settings
    from bot.options import MinifyOptions
    from tests.ghstub.rundir import check_row, row_of

    row = row_of(check_row("mlp_relu"))
    said: list[str] = []
    opts = MinifyOptions(no_localize=True, no_bisect=True, no_trace=True).resolved()
    rec = pl.process(row, Settings(config=dict(row.config)), str(tmp_path / "run"), opts,
                     {"torch": torch.__version__}, said.append)
    assert rec.repro.status == "minimized" and rec.repro.verification.failed_same_way == 3, rec.repro.reason
    line = next(ln for ln in said if ln.startswith(f"{row.id}: steps: "))
    entries = [part.rsplit(" ", 2) for part in line.split(": ", 2)[2].split(", ")]
    assert [name for name, _, _ in entries] == [s.__name__ for s in pl.STEPS[:pl.STEPS.index(pl.next_capture) + 1]]
    assert all(unit == "s" and float(seconds) >= 0 for _, seconds, unit in entries)
    # one capture pass at level 4 (torch's accuracy check finds the wrong relu), traced once: skipped
    assert rec.repro.capture.repro_level == 4 and [ln for ln in said if "trace:" in ln] == [
        f"{row.id}: trace: skipped (--no-trace)"]


def test_the_steps_hand_on_through_typed_fields_of_the_failure():
    """What a capture pass's steps hand each other are typed fields of the Failure, not return values."""
    import dataclasses
    import typing

    from bot.minify import verify as ver

    hints = typing.get_type_hints(pl.Failure)
    fields = {f.name for f in dataclasses.fields(pl.Failure)}
    assert {"candidates", "reduced", "verified", "packaged"} <= fields
    assert hints["candidates"] == pl.Candidates | None and hints["reduced"] == pl.Reduced | None
    assert hints["verified"] == ver.Verified | None
    for step in pl.STEPS:
        assert typing.get_type_hints(step)["return"] is type(None), f"{step.__name__} returns a value"


GIVEN = '''\
import torch
import torch._inductor.config

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'
isolate_fails_code_str = None

class Repro(torch.nn.Module):
    def forward(self, addmm_3):
        relu = torch.ops.aten.relu.default(addmm_3);  addmm_3 = None
        return (relu,)

def load_args(reader):
    buf0 = reader.storage(None, 256)
    reader.tensor(buf0, (4, 16), is_leaf=True)  # addmm_3
load_args._version = 0
mod = Repro()
if __name__ == '__main__':
    from torch._dynamo.repro.after_aot import run_repro
    with torch.no_grad():
        run_repro(mod, load_args, accuracy=True, command='minify', save_dir=None, tracing_mode='real', check_str=None)
'''


@pytest.mark.slow
def test_a_given_launcher_starts_at_reduce_and_is_one_pass(bot, tmp_path):
    """``minify --launcher FILE``: the launcher is the one candidate; the runner goes from
    given_launcher straight to reduce (no screen, localize or capture) and ends after that one pass."""
    launcher = tmp_path / "minifier_launcher.py"
    launcher.write_text(GIVEN)
    p = bot("minify", "--launcher", launcher, "--out", tmp_path / "out", "--no-trace", "--no-bisect",
            "--verify-runs", "1")
    assert p.returncode == 1, p.stderr[-3000:]
    (line,) = [ln for ln in p.stderr.splitlines() if ": steps: " in ln]
    names = [part.rsplit(" ", 2)[0] for part in line.split(": steps: ", 1)[1].split(", ")]
    assert names == ["given_launcher", "reduce", "verify", "package", "trace", "next_capture"], line
    (fdir,) = (tmp_path / "out" / "failures").iterdir()
    rec = json.loads((fdir / "failure.json").read_text())
    assert rec["repro"]["status"] == "minimized" and rec["repro"]["capture"]["method"] == "given", rec["repro"]
