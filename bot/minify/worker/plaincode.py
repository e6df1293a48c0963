"""What the plain repro's writer (:mod:`bot.minify.worker.plain`) and the short repro's
(:mod:`bot.minify.worker.short`) share: the globals FX's code for a graph may read and the line that
defines each (:data:`PREAMBLE`), the names a function reads that it does not define
(:func:`free_names`), a non-tensor input as Python source (:func:`literal`), and the refusal
(:class:`NotPlain`). This module imports no torch when imported."""

from __future__ import annotations

import ast
import builtins
import math

# globals FX's code for a graph may read, and the line that defines each (any other is refused)
PREAMBLE = {"torch": None, "math": None, "operator": None, "device": "from torch import device",
            "inf": "inf = float('inf')", "nan": "nan = float('nan')", "NoneType": "NoneType = type(None)"}


class NotPlain(Exception):
    """The graph or its inputs cannot be written as a plain program (the message says why)."""


def free_names(src: str) -> list[str]:
    """The names the function reads that it does not bind and Python does not define."""
    tree = ast.parse(src)
    fn = tree.body[0]
    bound = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    bound |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return sorted({n for n in read if n not in bound and not hasattr(builtins, n)})


def literal(value) -> str:
    """The source of a non-tensor input (an int of a symbolic size, a float, a dtype...)."""
    import torch

    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value) if isinstance(value, torch.dtype) else f"torch.device({str(value)!r})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v) for v in value) + ("," if isinstance(value, tuple) and len(value) == 1 else "")
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    raise NotPlain(f"an input is a {type(value).__name__}")
