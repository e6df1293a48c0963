"""bot/suites/yaml_entries.py: the YAML files users give are read one way, and every mistake is a
UsageError (exit 2) naming the file and the entry."""

from __future__ import annotations

import pytest

from bot.errors import UsageError
from bot.suites.yaml_entries import load_entries, valid_name

OPTS = {"command", "cwd", "timeout"}


def _load(path, **kw):
    base, entries = load_entries(str(path), what="command file", top="commands", kind="command", key="command",
                                 options=OPTS, short="a command line", **kw)
    return base, list(entries)


def test_short_and_long_entries_with_or_without_the_top_key(tmp_path):
    for text in ("a: python a.py\nb.c-d_e: {command: python b.py, timeout: 5}\n",
                 "commands:\n  a: python a.py\n  b.c-d_e: {command: python b.py, timeout: 5}\n"):
        f = tmp_path / "cmds.yaml"
        f.write_text(text)
        base, entries = _load(f)
        assert base == str(tmp_path)
        assert [(n, e) for n, e, _ in entries] == [("a", {"command": "python a.py"}),
                                                   ("b.c-d_e", {"command": "python b.py", "timeout": 5})]
        assert entries[0][2] == f"{f}: command 'a'"


@pytest.mark.parametrize("text,words", [
    ("a: [1, 2]\n", "command 'a': expected a command line or a mapping with a 'command' key"),
    ("a: {command: x, retries: 3}\n", "command 'a': unknown option(s) retries (known: command, cwd, timeout)"),
    ("'bad name': x\n", "invalid command name 'bad name'"),
    ("- a\n- b\n", "expected a mapping of command names to a command line (optionally under 'commands:')"),
    ("", "expected a mapping"),
    ("a: [unclosed\n", "malformed YAML in"),
])
def test_mistakes_name_the_file_and_the_entry(tmp_path, text, words):
    f = tmp_path / "cmds.yaml"
    f.write_text(text)
    with pytest.raises(UsageError) as info:
        _load(f)
    assert words in str(info.value) and str(f) in str(info.value)
    assert info.value.exit_code == 2


def test_malformed_yaml_says_where(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("a: x\nb: [1,\n  c: d: e\n")
    with pytest.raises(UsageError, match=r"at line \d+, column \d+"):
        _load(f)


def test_unreadable_file(tmp_path):
    with pytest.raises(UsageError, match="cannot read command file .*No such file"):
        _load(tmp_path / "missing.yaml")
    with pytest.raises(UsageError, match="cannot read command file"):
        _load(tmp_path)  # a directory


def test_top_key_beside_others_only_when_allowed(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("commands: {a: x}\nversion: 1\n")
    with pytest.raises(UsageError):  # 'commands' and 'version' read as two entries; the first is no command line
        _load(f)
    _, entries = _load(f, top_alone=False)
    assert [n for n, _, _ in entries] == ["a"]


def test_valid_names():
    assert all(map(valid_name, ("resnet18", "a-b_c.d", "X1")))
    assert not any(map(valid_name, ("", "a b", "a/b", "../x", None, 3, "a;rm")))
