"""Config diffs: the true diff (each option against its real default) and the minimal diff
(the non-default keys actually needed to reproduce, by delta debugging over the keys).

Values come from the run's overrides and the repro file's config lines; defaults and the
value comparison are :mod:`bot.torch_adapter.config`'s (the same ones ``check`` uses).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from bot.errors import UsageError
from bot.records import ConfigEntry


def ddmin(items: Sequence[str], fails: Callable[[list[str]], bool]) -> list[str]:
    """Zeller's ddmin: a 1-minimal subset of ``items`` for which ``fails`` holds.

    Precondition: ``fails(list(items))`` is True. Order of ``items`` is preserved."""
    cur = list(items)
    n = 2
    while len(cur) >= 2:
        chunk = max(1, len(cur) // n)
        subsets = [cur[i:i + chunk] for i in range(0, len(cur), chunk)]
        reduced = False
        for sub in subsets:
            if fails(sub):
                cur, n, reduced = sub, 2, True
                break
        if not reduced:
            for sub in subsets:
                comp = [x for x in cur if x not in sub]
                if comp and fails(comp):
                    cur, n, reduced = comp, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(cur):
                break
            n = min(len(cur), n * 2)
    return cur


def true_diff(values: dict[str, Any], default_of: Callable[[str], Any] | None = None,
              ignore: set[str] = frozenset()) -> list[ConfigEntry]:
    """The entry of every key whose value differs from its real default
    (``default_of``: :func:`bot.torch_adapter.config.default_of` unless given)."""
    from bot.torch_adapter import config as tconfig

    default_of = default_of or tconfig.default_of
    out = []
    for key in sorted(values):
        if key in ignore:
            continue
        try:
            default = default_of(key)
        except (KeyError, UsageError):
            default = None
        value = values[key]
        if not tconfig._differs(value, default):
            continue
        out.append(ConfigEntry(key, tconfig._jsonable(default), tconfig._jsonable(value)))
    return out
