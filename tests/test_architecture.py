"""The shape of the code: dependencies between the parts of `bot` point one way.

A part is a subpackage (bot.check, bot.minify, ...) or a top-level module (bot.report, bot.signature,
...). Every import counts, including the ones written inside functions to defer loading: a deferred
import is still a dependency, and a cycle through it is what made one package's fix need the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

BOT = Path(__file__).resolve().parent.parent / "bot"


def _part(module: str) -> str | None:
    """bot.check.judge -> bot.check; bot.report -> bot.report; anything outside bot -> None."""
    parts = module.split(".")
    if parts[0] != "bot" or len(parts) < 2:
        return None
    if (BOT / parts[1]).is_dir() or (BOT / f"{parts[1]}.py").is_file():
        return f"bot.{parts[1]}"
    return None


def _import_statements(tree: ast.AST, package: str):
    """Every import in ``tree``, at any depth (in functions too), as (what it imports from, the names
    it takes): ``import a.b`` is ("a.b", []); ``from .x import y`` in package ``bot.p`` is ("bot.p.x", ["y"])."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, [a.name for a in node.names]


def _imports(path: Path, module: str) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for target, names in _import_statements(ast.parse(path.read_text(encoding="utf-8"), str(path)), package):
        found.add(target)
        found.update(f"{target}.{name}" for name in names)  # `from bot import rundir`
    return found


def dependency_graph() -> dict[str, dict[str, set[str]]]:
    """part -> {part it imports: the modules that import it}."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(BOT.rglob("*.py")):
        module = ".".join(path.relative_to(BOT.parent).with_suffix("").parts).removesuffix(".__init__")
        src = _part(module)
        if src is None:
            continue
        graph.setdefault(src, {})
        for name in _imports(path, module):
            dst = _part(name)
            if dst and dst != src:
                graph[src].setdefault(dst, set()).add(module)
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle():
    graph = {"bot.a": {"bot.b": {"bot.a.x"}}, "bot.b": {"bot.c": {"bot.b"}}, "bot.c": {"bot.a": {"bot.c.y"}},
             "bot.d": {"bot.a": {"bot.d"}}}
    assert cycles(graph) == [["bot.a", "bot.b", "bot.c"]]


def test_no_import_cycle_between_the_parts_of_bot():
    graph = dependency_graph()
    assert {"bot.check", "bot.suites", "bot.minify", "bot.report", "bot.cli"} <= set(graph)
    lines = []
    for comp in cycles(graph):
        lines.append(" <-> ".join(comp))
        for a in comp:
            for b in comp:
                if b in graph[a]:
                    lines.append(f"    {a} -> {b}: imported by {', '.join(sorted(graph[a][b]))}")
    assert not lines, "import cycles:\n" + "\n".join(lines)


# --- cycles between modules, inside a part too -----------------------------------------------------
#
# The part-level check above drops the edges inside a part (bot.torch_adapter.device -> .runtime is
# "bot.torch_adapter -> bot.torch_adapter"), so a circle of modules within one subpackage passed it.
# This one is per module. An import names a module when it is one (``from bot.report import upstream``
# -> bot.report.upstream), else the longest module of bot its name starts with (a function or class
# of it). Importing a submodule runs its package's __init__ too; that is not counted as an edge (every
# submodule would then be in a circle with an __init__ that imports it), but naming the package
# (``from bot.report import Failure``) is.

# Circles not yet opened: (the modules, sorted) -> why. Empty is the goal; an entry is a debt.
MODULE_CYCLES_ALLOWED: dict[tuple[str, ...], str] = {}


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(BOT.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in sorted(BOT.rglob("*.py"))}


def _module_imports(tree: ast.AST, module: str, is_package: bool, known) -> set[str]:
    """The modules of bot that ``tree`` imports, at any depth (in functions too)."""
    def longest(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for target, names in _import_statements(tree, package):
        if not names:   # import a.b.c
            found.update(m for m in [longest(target)] if m)
        for name in names:
            sub = f"{target}.{name}"
            m = sub if sub in known else longest(target)
            if m:
                found.add(m)
    found.discard(module)
    return {m for m in found if m.split(".")[0] == "bot"}


def module_graph() -> dict[str, dict[str, set[str]]]:
    """module -> {module of bot it imports: {itself}} (the shape ``cycles`` takes)."""
    mods = _modules()
    graph: dict[str, dict[str, set[str]]] = {}
    for module, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[module] = {dst: {module} for dst in _module_imports(tree, module, path.name == "__init__.py", mods)}
    return graph


def test_the_module_checker_counts_imports_inside_functions_and_inside_a_part():
    known = {"bot.t.a", "bot.t.b", "bot.t", "bot.u"}
    tree = ast.parse("from bot.t import b\ndef f():\n    from .b import helper\n    from bot.u import x\n")
    assert _module_imports(tree, "bot.t.a", False, known) == {"bot.t.b", "bot.u"}
    tree = ast.parse("def g():\n    from bot.t.a import thing\n")
    graph = {"bot.t.a": {"bot.t.b": {"bot.t.a"}}, "bot.t.b": {m: {"bot.t.b"} for m in
                                                             _module_imports(tree, "bot.t.b", False, known)}}
    assert cycles(graph) == [["bot.t.a", "bot.t.b"]]


def test_no_import_cycle_between_the_modules_of_bot():
    graph = module_graph()
    assert {"bot.torch_adapter.fxutil", "bot.action.context", "bot.report.view"} <= set(graph)
    lines, allowed_seen = [], set()
    for comp in cycles(graph):
        if tuple(comp) in MODULE_CYCLES_ALLOWED:
            allowed_seen.add(tuple(comp))
            continue
        lines.append(" <-> ".join(comp))
        lines += [f"    {a} -> {b}" for a in comp for b in comp if b in graph[a]]
    assert not lines, "import cycles between modules (imports inside functions count):\n" + "\n".join(lines)
    assert allowed_seen == set(MODULE_CYCLES_ALLOWED), "an allowed cycle is gone: remove it from MODULE_CYCLES_ALLOWED"


# The report's extensions see the report as a bot.report.view.ReportView: nothing private of it.
REPORT_EXTENSIONS = ("bot/report/dashboard.py", "bot/report/upstream.py", "bot/commands/upstream.py")


def private_reads(rel: str, source: str) -> list[str]:
    """``x._name`` where ``x`` is a plain name other than self/cls (a private member of another object)."""
    return [f"{rel}:{n.lineno} {n.value.id}.{n.attr}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id not in ("self", "cls")
            and n.attr.startswith("_") and not n.attr.startswith("__")]


def test_the_private_read_checker_finds_a_private_member():
    assert private_reads("m.py", "def f(rep):\n    return rep._bot_issues(me), self._x, rep.bot_issues()\n") == [
        "m.py:2 rep._bot_issues"]


def test_the_reports_extensions_read_nothing_private_of_the_report():
    found = [f for rel, src in _sources(lambda rel: rel not in REPORT_EXTENSIONS) for f in private_reads(rel, src)]
    assert found == [], "the report's extensions reach into private members:\n" + "\n".join(found)


# --- "one place" claims of docs/architecture.md, checked on the source -------------------------------
#
# Each checker takes (path, source) and returns what it finds; each has a companion test that
# feeds it a small violation, so that a checker that stopped finding anything would fail.

def _docstring_ids(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body \
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant):
            out.add(id(n.body[0].value))
    return out


def _strings(tree: ast.AST):
    """(line, text) of every string constant that is not a docstring."""
    docs = _docstring_ids(tree)
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            yield n.lineno, n.value


def private_torch_uses(rel: str, source: str) -> list[str]:
    """``torch._x`` attribute chains and imports of ``torch._x`` modules (comments and docstrings
    do not count)."""
    found = []
    tree = ast.parse(source)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}   # a.b of a.b.c: only the whole
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and id(n) not in inner:
            chain, v = [n.attr], n.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id == "torch" and any(
                    p.startswith("_") and not p.startswith("__") for p in chain):
                found.append(f"{rel}:{n.lineno} torch.{'.'.join(reversed(chain))}")
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
            found += [f"{rel}:{n.lineno} import {m}" for m in names
                      if m.split(".")[0] == "torch" and any(p.startswith("_") for p in m.split(".")[1:])]
    return sorted(set(found))


def _sources(skip=lambda rel: False):
    for path in sorted(BOT.rglob("*.py")):
        rel = path.relative_to(BOT.parent).as_posix()
        if not skip(rel):
            yield rel, path.read_text(encoding="utf-8")


def test_the_private_torch_checker_finds_attribute_chains_and_imports():
    src = "import torch._dynamo.config\nimport torch\nx = torch._ops.OpOverload\ny = torch.nn.functional.relu\n"
    assert private_torch_uses("m.py", src) == ["m.py:1 import torch._dynamo.config", "m.py:3 torch._ops.OpOverload"]


def test_torch_private_api_is_used_only_in_the_torch_adapter():
    found = [f for rel, src in _sources(lambda rel: rel.startswith("bot/torch_adapter/"))
             for f in private_torch_uses(rel, src)]
    assert found == [], "torch's private API outside bot/torch_adapter/:\n" + "\n".join(found)


def run_dir_names_spelled(rel: str, source: str, names: set[str]) -> list[str]:
    return [f"{rel}:{line} {text!r}" for line, text in _strings(ast.parse(source)) if text in names]


def _run_dir_names() -> set[str]:
    from bot import rundir

    return {rundir.RESULTS, rundir.RESULTS_CSV, rundir.FAILURE, rundir.REPORT, rundir.MERGE, rundir.KNOWN,
            rundir.SUMMARY, rundir.ACTION_SUMMARY, rundir.ACTION_ERROR, rundir.WORK_DIR, rundir.REPRO,
            rundir.STANDALONE, rundir.MINIFIER_LOG}


def test_the_run_directory_name_checker_skips_docstrings_and_messages():
    src = '"""Writes results.json."""\np = d / "results.json"\nmsg = f"{d}/results.json not found"\n'
    assert run_dir_names_spelled("m.py", src, {"results.json"}) == ["m.py:2 'results.json'"]


def test_run_directory_file_names_are_spelled_only_in_rundir():
    names = _run_dir_names()
    found = [f for rel, src in _sources(lambda rel: rel == "bot/rundir.py")
             for f in run_dir_names_spelled(rel, src, names)]
    assert found == [], "run-directory file names spelled outside bot/rundir.py:\n" + "\n".join(found)


def config_modules_spelled(rel: str, source: str) -> list[str]:
    return [f"{rel}:{line} {text!r}" for line, text in _strings(ast.parse(source))
            if any(m in text for m in ("torch._inductor.config", "torch._dynamo.config", "torch._functorch.config",
                                        "torch.fx.experimental._config"))]


def test_the_config_module_checker_finds_a_second_table():
    assert config_modules_spelled("m.py", 'MODS = {"inductor": "torch._inductor.config"}\n') == [
        "m.py:1 'torch._inductor.config'"]


def test_torchs_config_modules_are_named_in_one_table():
    found = [f for rel, src in _sources(lambda rel: rel == "bot/torch_adapter/config.py")
             for f in config_modules_spelled(rel, src)]
    assert found == [], "torch config modules named outside bot/torch_adapter/config.py:\n" + "\n".join(found)


MAX_FUNCTION_LINES = 80


def long_functions(rel: str, source: str) -> list[str]:
    return [f"{rel}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]


def test_the_length_checker_finds_a_long_function():
    src = "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES + "\ndef g():\n    pass\n"
    assert long_functions("m.py", src) == [f"m.py:1 f ({MAX_FUNCTION_LINES + 1} lines)"]


def test_no_function_in_bot_is_longer_than_80_lines():
    found = [f for rel, src in _sources() for f in long_functions(rel, src)]
    assert found == [], "functions over 80 lines (split them into named steps):\n" + "\n".join(found)


SAMENESS_WORDS = ("same", "match", "consistent", "admit", "alike")


def sameness_rules(rel: str, source: str) -> list[str]:
    """Functions that, by their name, decide whether two failures are the same (outside the
    Signature, which is where that is decided). Matching a known bug to a check (known.match)
    and a lifecycle's issue lookup use Signature's rules; they are listed in ALLOWED."""
    return [f"{rel}:{n.lineno} {n.name}" for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and any(w in n.name for w in SAMENESS_WORDS) and f"{rel}:{n.name}" not in SAMENESS_ALLOWED]


SAMENESS_ALLOWED = {
    "bot/known.py:match",                   # which open issue's repro stands in: Signature.admits
    "bot/report/lifecycle.py:_match",       # which issue a group of failures belongs to: by fingerprint
    "bot/torch_adapter/runtime.py:same",    # torch's accuracy comparison of two results (numbers, not failures)
}


def test_the_sameness_checker_finds_a_second_rule():
    assert sameness_rules("bot/minify/verify.py", "def fails_same_way(sig, rc, out):\n    pass\n") == [
        "bot/minify/verify.py:1 fails_same_way"]


def test_the_same_failure_is_decided_only_by_signature():
    found = [f for rel, src in _sources(lambda rel: rel == "bot/signature.py") for f in sameness_rules(rel, src)]
    assert found == [], "a rule for 'the same failure' outside bot.signature.Signature:\n" + "\n".join(found)


# --- a test file for every module ------------------------------------------------------------------
# The convention (docs/architecture.md, "Tests"): bot/<package>/<module>.py is covered by
# tests/test_<module>.py or tests/test_<package>_<module>.py; a module covered by a file named for its
# topic is listed in TOPIC_TEST_FILES. Every module maps to one test file, or is exempt below.

TESTS = BOT.parent / "tests"

TOPIC_TEST_FILES = {
    "bot/action/context.py": "tests/test_action_stages.py",
    "bot/check/sweep.py": "tests/test_check_robust.py",
    "bot/commands/minify.py": "tests/test_minify_inputs.py",
    "bot/commands/selftest.py": "tests/test_selftest_device.py",
    "bot/forkserver.py": "tests/test_proc.py",
    "bot/fuzz/campaign.py": "tests/test_fuzz.py",
    "bot/fuzz/generate.py": "tests/test_fuzz.py",
    "bot/fuzz/program.py": "tests/test_fuzz.py",
    "bot/minify/worker/child.py": "tests/test_minify_procs.py",
    "bot/minify/worker/cleanup.py": "tests/test_passes.py",
    "bot/minify/worker/configdiff.py": "tests/test_minify_configdiff.py",
    "bot/minify/worker/graph.py": "tests/test_passes.py",
    "bot/minify/worker/hints.py": "tests/test_passes.py",
    "bot/minify/worker/main.py": "tests/test_worker.py",
    "bot/minify/worker/plain.py": "tests/test_plain_repro.py",
    "bot/minify/worker/plaincode.py": "tests/test_plain_repro.py",
    "bot/minify/worker/problem.py": "tests/test_minify_shape.py",
    "bot/minify/worker/search.py": "tests/test_passes.py",
    "bot/minify/worker/short.py": "tests/test_short_repro.py",
    "bot/suites/builtin.py": "tests/test_check_zoo.py",
    "bot/suites/command.py": "tests/test_command_source.py",
    "bot/suites/harness.py": "tests/test_harness_source.py",
    "bot/suites/hook/sitecustomize.py": "tests/test_hook.py",
    "bot/suites/huggingface.py": "tests/test_suites_models.py",
    "bot/suites/source.py": "tests/test_sources.py",
    "bot/suites/timm.py": "tests/test_suites_models.py",
    "bot/suites/zoo.py": "tests/test_check_zoo.py",
    "bot/torch_adapter/prewarm.py": "tests/test_proc.py",
    "bot/torch_adapter/traced.py": "tests/test_trace.py",
    "bot/tracker/base.py": "tests/test_tracker_contract.py",
}

# data only (pure tables): nothing of their own to test. Keep it small; each with its reason.
DATA_ONLY: dict[str, str] = {
    # its one check is test_the_reports_extensions_read_nothing_private_of_the_report, above
    "bot/report/view.py": "a typing Protocol: what the report hands its extensions, no behaviour of its own",
}

# debt: modules with no test file of their own yet (covered, if at all, end to end). Remove an entry
# when its test file is written; the test below fails while a listed module already has one.
NOT_YET_TESTED: set[str] = set()


def conventional_test_files(rel: str) -> list[str]:
    """The test files that cover ``rel`` (bot/.../<package>/<module>.py) by their name."""
    path = Path(rel)
    return [f"tests/test_{path.stem}.py", f"tests/test_{path.parent.name}_{path.stem}.py"]


def modules_without_test_file(modules: list[str], test_files: set[str], topic: dict[str, str],
                              exempt: set[str]) -> list[str]:
    """Each module (bot/... path) with neither a conventional test file nor a topic one, unless exempt."""
    missing = []
    for rel in modules:
        if rel in exempt or any(t in test_files for t in conventional_test_files(rel)):
            continue
        if topic.get(rel) not in test_files:
            missing.append(rel)
    return missing


def bot_modules() -> list[str]:
    return sorted(str(p.relative_to(BOT.parent)) for p in BOT.rglob("*.py")
                  if p.name not in ("__init__.py", "__main__.py"))


def existing_test_files() -> set[str]:
    return {f"tests/{p.name}" for p in TESTS.glob("test_*.py")}


def test_the_test_file_checker_finds_a_module_without_one():
    files = {"tests/test_judge.py", "tests/test_minify_plain.py", "tests/test_short_repro.py"}
    modules = ["bot/check/judge.py", "bot/minify/plain.py", "bot/minify/short.py", "bot/minify/new.py",
               "bot/tables.py"]
    topic = {"bot/minify/short.py": "tests/test_short_repro.py", "bot/minify/new.py": "tests/test_gone.py"}
    assert modules_without_test_file(modules, files, topic, {"bot/tables.py"}) == ["bot/minify/new.py"]


def test_every_module_of_bot_has_its_test_file():
    missing = modules_without_test_file(bot_modules(), existing_test_files(), TOPIC_TEST_FILES,
                                        set(DATA_ONLY) | NOT_YET_TESTED)
    assert not missing, ("modules without a test file (tests/test_<module>.py or tests/test_<package>_<module>.py, "
                         "or an entry in TOPIC_TEST_FILES):\n  " + "\n  ".join(missing))


def test_the_test_file_tables_are_current():
    modules, files = set(bot_modules()), existing_test_files()
    listed = set(TOPIC_TEST_FILES) | set(DATA_ONLY) | NOT_YET_TESTED
    assert not listed - modules, f"listed but no such module: {sorted(listed - modules)}"
    assert not (set(TOPIC_TEST_FILES) & (set(DATA_ONLY) | NOT_YET_TESTED))
    assert all(DATA_ONLY.values()), "each data-only module says why"
    stale = sorted(rel for rel in listed if any(t in files for t in conventional_test_files(rel)))
    assert not stale, f"these have a test file of their own now: take them out of the tables: {stale}"
    gone = sorted(f"{rel}: {t}" for rel, t in TOPIC_TEST_FILES.items() if t not in files)
    assert not gone, f"topic test files that do not exist: {gone}"
