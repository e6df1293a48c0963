"""Compiler config overrides: ``--config inductor.<key>=<value>`` / ``dynamo.<key>=<value>``.

Keys are validated against the real torch config modules (``_config`` entries with their
declared ``value_type`` and real ``default``), so a typo or a wrong type is a usage error
before any model runs.
"""

from __future__ import annotations

import importlib
import re
import types
import typing
from typing import Any

from bot.errors import InfraError, UsageError

# The one table of torch's config modules: a key's prefix -> the module. The setter
# (:func:`set_config`), the line a repro carries (:func:`config_line`), the pattern that reads
# such a line back (:data:`CONFIG_LINE`) and the prefixes `/minify` accepts all come from it.
MODULES = {
    "inductor": "torch._inductor.config",
    "dynamo": "torch._dynamo.config",
    "functorch": "torch._functorch.config",
    "fx": "torch.fx.experimental._config",
}
PREFIXES = tuple(MODULES)
PREFIX_OF = {module: prefix for prefix, module in MODULES.items()}
CONFIG_LINE = re.compile(r"^(" + "|".join(re.escape(m) for m in MODULES.values()) + r")\.([A-Za-z_][\w.]*) = (.+)$")


def config_line(key: str, value) -> str:
    """The line that sets ``key`` in a repro file: ``torch._inductor.config.cpp.x = 'accuracy'``."""
    prefix, _, name = key.partition(".")
    return f"{MODULES[prefix]}.{name} = {value!r}"


def key_of_line(line: str) -> tuple[str, str] | None:
    """(key, value text) of a config line of a repro file; None for any other line."""
    m = CONFIG_LINE.match(line.strip())
    return (f"{PREFIX_OF[m.group(1)]}.{m.group(2)}", m.group(3)) if m else None


def set_config(key: str, value: Any) -> None:
    """Set one option (nested options such as cpp.x are flat, dotted keys of the ConfigModule)."""
    prefix, name = split_key(key)
    setattr(_module(prefix), name, value)

# Options whose values are a closed set that the declared type (str) does not express.
KNOWN_CHOICES = {
    "inductor.cpp.inject_relu_bug_TESTING_ONLY": {None, "compile_error", "runtime_error", "accuracy"},
    "inductor.triton.inject_relu_bug_TESTING_ONLY": {None, "compile_error", "runtime_error", "accuracy"},
    "inductor.cpp.inject_log1p_bug_TESTING_ONLY": {None, "accuracy"},
}



def _module(prefix: str):
    try:
        return importlib.import_module(MODULES[prefix])
    except ImportError as exc:  # pragma: no cover - depends on the torch build
        raise InfraError(f"this torch has no {MODULES[prefix]} ({exc})") from exc


def _entries(mod) -> dict:
    entries = getattr(mod, "_config", None)
    if not isinstance(entries, dict):
        raise InfraError(f"{mod.__name__} is not a torch ConfigModule this version of minify-bot understands")
    return entries


def split_key(key: str) -> tuple[str, str]:
    prefix, _, name = key.partition(".")
    if prefix not in MODULES or not name:
        raise UsageError(
            f"invalid config key {key!r}: expected {', '.join(p + '.<key>' for p in MODULES)}"
        )
    return prefix, name


def _entry(key: str):
    prefix, name = split_key(key)
    entries = _entries(_module(prefix))
    if name not in entries:
        import difflib

        close = difflib.get_close_matches(name, list(entries), n=1)
        hint = f" (did you mean {prefix}.{close[0]}?)" if close else ""
        raise UsageError(f"unknown config key {key!r}{hint}")
    return entries[name]


def _allowed_types(entry) -> tuple[list[type], bool]:
    """The concrete types a value may have, and whether None is allowed."""
    vt = getattr(entry, "value_type", None)
    if vt is None:
        default = entry.default
        return ([type(default)] if default is not None else [object]), default is None
    origin = typing.get_origin(vt)
    if origin in (typing.Union, types.UnionType):
        args = list(typing.get_args(vt))
    else:
        args = [vt]
    allow_none = type(None) in args
    concrete = []
    for a in args:
        if a is type(None):
            continue
        o = typing.get_origin(a)
        if o is typing.Literal:
            concrete.append(a)
        else:
            concrete.append(o or a)
    return concrete, allow_none


def _parse_scalar(text: str, typ) -> Any:
    if typing.get_origin(typ) is typing.Literal:
        for lit in typing.get_args(typ):
            if str(lit) == text:
                return lit
        raise ValueError(f"one of {', '.join(map(str, typing.get_args(typ)))}")
    if typ is bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValueError("true or false")
    if typ is int:
        return int(text, 0)
    if typ is float:
        return float(text)
    if typ is str:
        return text
    if typ in (list, dict, tuple, set):
        import yaml

        val = yaml.safe_load(text)
        if not isinstance(val, typ if typ is not tuple else (list, tuple)):
            raise ValueError(f"a {typ.__name__}")
        return typ(val) if typ in (tuple, set) else val
    raise ValueError(f"a {getattr(typ, '__name__', typ)} (not settable from the command line)")


def parse_value(key: str, text: str) -> Any:
    """Parse and validate the textual value of a --config override; raise UsageError."""
    entry = _entry(key)
    concrete, allow_none = _allowed_types(entry)
    if text.strip().lower() in ("none", "null") and allow_none:
        value: Any = None
    else:
        value, reasons = _NOTHING, []
        # try the stricter types first so "1" on an int|str option becomes 1
        order = sorted(concrete, key=lambda t: {bool: 0, int: 1, float: 2}.get(t, 3))
        for typ in order:
            try:
                value = _parse_scalar(text, typ)
                break
            except ValueError as exc:
                reasons.append(str(exc))
        if value is _NOTHING:
            want = " or ".join(r for r in reasons if r) or "a valid value"
            raise UsageError(f"invalid value {text!r} for config {key}: expected {want}")
    choices = KNOWN_CHOICES.get(key)
    if choices is not None and value not in choices:
        shown = ", ".join(sorted(str(c) for c in choices if c is not None))
        raise UsageError(f"invalid value {text!r} for config {key}: expected one of {shown} (or none)")
    return value


_NOTHING = object()


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """['inductor.x=1', ...] -> {'inductor.x': 1}; raises UsageError with a one-line reason."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"invalid --config {item!r}: expected KEY=VALUE, e.g. inductor.max_autotune=true")
        out[key] = parse_value(key, text)
    return out


def validate_overrides(config: dict[str, Any]) -> dict[str, Any]:
    """Re-validate already-parsed overrides (from a results.json or YAML); values may be text."""
    out = {}
    for key, value in (config or {}).items():
        out[key] = parse_value(key, value if isinstance(value, str) else _to_text(value))
    return out


def _to_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict, tuple, set)):
        import json

        return json.dumps(list(value) if isinstance(value, (tuple, set)) else value)
    return str(value)


def apply_overrides(config: dict[str, Any]) -> None:
    """Set the overrides on the live config modules of this process."""
    for key, value in (config or {}).items():
        set_config(key, value)


def default_of(key: str) -> Any:
    return _entry(key).default


def _differs(a, b) -> bool:
    try:
        return bool(a != b)
    except Exception:  # noqa: BLE001 - a value's own __ne__/__bool__ may raise anything (tensors)
        return a is not b


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return repr(v)

