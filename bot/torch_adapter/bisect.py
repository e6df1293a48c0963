"""torch's CompilerBisector (``torch._inductor.compiler_bisector``), driven in-process on a
minimized graph to narrow an inductor-stage failure to a subsystem or config, within a budget."""

from __future__ import annotations

import time
from typing import Any, Callable

from bot.records import GraphBisect


class _OutOfTime(Exception):
    pass


def available() -> bool:
    try:
        from torch._inductor.compiler_bisector import CompilerBisector
    except Exception:  # noqa: BLE001
        return False
    return hasattr(CompilerBisector, "do_bisect") and hasattr(CompilerBisector, "get_backend")


def bisect_graph(gm, args, good: Callable[[Any, list, str], bool], *, budget: float) -> GraphBisect | None:
    """Run the bisector with ``good(gm, args, backend)`` as its test (True = no failure).

    Returns its answer, or None when torch has no bisector or nothing fails; an answer marked
    ``incomplete`` when the budget ran out."""
    if not available():
        return None
    import contextlib
    import io

    from torch._inductor.compiler_bisector import CompilerBisector

    deadline = time.time() + budget
    runs = {"n": 0}

    def fn() -> bool:
        if time.time() > deadline:
            raise _OutOfTime()
        runs["n"] += 1
        backend = CompilerBisector.get_backend() or "inductor"
        return good(gm, args, backend)

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            res = CompilerBisector.do_bisect(fn)
    except _OutOfTime:
        return GraphBisect(incomplete=True, runs=runs["n"], detail=f"stopped after {budget:.0f} s")
    finally:
        try:
            import torch

            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass
    if res is None:
        return None
    return GraphBisect(backend=res.backend, subsystem=res.subsystem, bisect_number=res.bisect_number,
                       detail=res.debug_info, runs=runs["n"])
