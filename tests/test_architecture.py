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


def _imports(path: Path, module: str) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)  # `from bot import rundir`
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
