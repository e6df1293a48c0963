"""Reading the YAML files users give (model files, command files): one loader, one entry
validator, so both say the same things the same way (exit 2, naming the file and the entry)."""

from __future__ import annotations

import os

from bot.errors import UsageError


def _load_yaml(path: str, what: str):
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"malformed YAML in {path}{where}: {problem}") from exc


def valid_name(name) -> bool:
    return isinstance(name, str) and bool(name) and name.replace("_", "").replace("-", "").replace(".", "").isalnum()


def _entries(doc: dict, path: str, kind: str, key: str, options: set, short: str):
    """(name, entry, where) for each entry of a YAML mapping of names to ``short`` or to a mapping
    with ``key`` and some of ``options``; UsageError (exit 2) naming the file and the entry."""
    for name, entry in doc.items():
        if not valid_name(name):
            raise UsageError(f"{path}: invalid {kind} name {name!r} (letters, digits, '_', '-', '.')")
        where = f"{path}: {kind} {name!r}"
        if isinstance(entry, str):
            entry = {key: entry}
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: expected {short} or a mapping with a '{key}' key")
        unknown = set(entry) - options
        if unknown:
            raise UsageError(f"{where}: unknown option(s) {', '.join(sorted(map(str, unknown)))} "
                             f"(known: {', '.join(sorted(options))})")
        yield name, entry, where


def load_entries(path: str, *, what: str, top: str, kind: str, key: str, options: set, short: str,
                 top_alone: bool = True):
    """(the file's directory, its entries as ``_entries`` yields them) of a YAML file mapping
    names to entries, optionally under the top-level key ``top`` (its only key, if ``top_alone``)."""
    doc = _load_yaml(path, what)
    if isinstance(doc, dict) and top in doc and (set(doc) == {top} or not top_alone):
        doc = doc[top]
    if not isinstance(doc, dict) or not doc:
        raise UsageError(f"{path}: expected a mapping of {kind} names to {short} (optionally under '{top}:')")
    return os.path.dirname(os.path.abspath(path)), _entries(doc, path, kind, key, options, short)
