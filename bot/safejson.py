"""JSON from untrusted places (event payloads, artifacts, requests) with bounds.

`json.loads` recurses once per nesting level (100k levels raise RecursionError, which is not a
ValueError) and turns a 5,000-digit integer into ValueError only after converting it. `loads` checks
the nesting depth with a linear scan before parsing and caps the digits of numbers, so malformed
input is always a `ValueError` with a one-line reason.
"""

from __future__ import annotations

import json

MAX_DEPTH = 64
MAX_DIGITS = 100


def nesting_depth(text: str) -> int:
    """The deepest [ / { nesting of a JSON text (brackets inside strings ignored)."""
    depth = deepest = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in "]}":
            depth -= 1
    return deepest


def _int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"a number with {len(s)} digits (at most {MAX_DIGITS})")
    return int(s)


def _float(s: str) -> float:
    if len(s) > MAX_DIGITS + 10:
        raise ValueError(f"a number of {len(s)} characters (at most {MAX_DIGITS + 10})")
    return float(s)


def loads(data: str | bytes, *, max_depth: int = MAX_DEPTH):
    """Parse JSON; raises ValueError (with a one-line reason) for anything malformed or out of bounds."""
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    depth = nesting_depth(data)
    if depth > max_depth:
        raise ValueError(f"nested {depth} levels deep (at most {max_depth})")
    try:
        return json.loads(data, parse_int=_int, parse_float=_float)  # NaN/Infinity: the checks write them
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise ValueError("nested too deeply") from None
