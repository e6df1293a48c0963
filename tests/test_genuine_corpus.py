"""The genuine-bug corpus (benchmarks/genuine/) as a reader and the benchmark meet it: every program
is in the README's table with the public pytorch/pytorch issue it reproduces, every row names a
program that exists, and every program is a script that runs on its own and leaves torch's
capture settings to its environment (the bot captures through TORCHDYNAMO_REPRO_* variables).
Read only: nothing here imports torch or runs a program."""

from __future__ import annotations

import ast
import re
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "benchmarks" / "genuine"
ISSUE = re.compile(r"https://github\.com/pytorch/pytorch/issues/\d+")


def _rows() -> dict[str, str]:
    rows = {}
    for line in (CORPUS / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*`([\w.]+\.py)`\s*\|", line)
        if m:
            rows[m.group(1)] = line
    return rows


def _programs() -> list[Path]:
    programs = sorted(CORPUS.glob("*.py"))
    assert programs, f"no programs in {CORPUS}"   # a test over none of them would check nothing
    return programs


def test_every_program_is_listed_with_its_pytorch_issue_and_every_row_names_a_program():
    rows = _rows()
    names = {p.name for p in _programs()}
    assert len(names) >= 6
    assert set(rows) == names, f"README only: {set(rows) - names}; not in README: {names - set(rows)}"
    for name, line in rows.items():
        assert ISSUE.search(line), f"{name}: no pytorch/pytorch issue link in its README row"
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 6 and cells[5], f"{name}: the row does not say whether torch 2.15.0 fixed it"


def test_every_program_is_a_script_with_a_main_guard_that_exits_with_mains_status():
    for path in _programs():
        tree = ast.parse(path.read_text(), filename=str(path))
        assert ast.get_docstring(tree), f"{path.name}: no docstring saying which bug it reproduces"
        guards = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        assert guards and "sys.exit(main())" in ast.unparse(guards[0]), f"{path.name}: no `sys.exit(main())` guard"


def test_no_program_sets_torch_capture_settings_itself():
    for path in _programs():
        src = path.read_text()
        assert not re.search(r"TORCHDYNAMO_|TORCHINDUCTOR_|TORCH_COMPILE_DEBUG", src), path.name
        assert not re.search(r"torch\.(_dynamo|_inductor)\.config\.\w+\s*=", src), path.name
