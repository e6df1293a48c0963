"""The known repro as the report renders it: from the failure's graph and inputs, validated by parsing,
never the check job's file as it came.

A known bug's repro is signed by the report and run by later nightlies (bot/known.py). The check job
that wrote the failure's ``repro.py`` ran model code: anything in that file may be the model's. So the
report reads only two parts of it, each parsed with :mod:`ast` and checked node by node:

- the graph, ``Repro.forward``: statements ``name = torch.ops.<aten|prims>.<op>.<overload>(...)``,
  ``name = other[<int>]`` and ``name = None``, ending in ``return (<names>)``; arguments are the
  graph's own names, numbers, strings, booleans, None, lists and tuples of them, ``torch.<dtype>``,
  ``torch.<memory format>`` and ``device('<type>', <index>)``;
- the inputs, ``load_args(reader)``: ``bufN = reader.storage(...)`` and ``reader.tensor(bufN, ...)``
  with literal arguments (the storages' hashes are not looked up: a known repro runs on random inputs);

and the config lines ``torch.<config module>.<key> = <literal>`` of the modules the bot sets
(bot/torch_adapter/config.py) and the numerics switches (``torch.backends…`` = true/false); a setting
that names a directory, a program or a file, or whose value is not a plain one, is left out.
Everything else of the file is left out; the rest of the repro is this
module's own text. A file with anything else in those parts (an import, an attribute of ``self``, a
call of anything but a torch op) renders nothing: its failure is minified afresh next time. This module
imports no torch: the report job has none.
"""

from __future__ import annotations

import ast
import re

from bot.torch_adapter.config import MODULES

MAX_SOURCE = 200_000
MAX_STATEMENTS = 5_000
OP_NAMESPACES = ("aten", "prims")
DTYPES = frozenset({"float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
                    "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "float", "double", "half", "long",
                    "int", "uint16", "uint32", "uint64"})
TORCH_CONSTANTS = DTYPES | {"contiguous_format", "preserve_format", "channels_last", "channels_last_3d", "strided",
                            "sparse_coo", "inf", "nan"}
IO_OPS = ("file", "load", "save", "print")   # ops that touch files or the console: no part of a compiler bug
# settings that name a program, a directory or a file (the compiler inductor runs, its include paths):
# a repro sets numbers, switches and names of algorithms, never those
UNSAFE_KEY = re.compile(r"cxx|dir|path|cmd|command|compiler|cache|bin|lib|include|script|ld_|env|file|exec",
                        re.IGNORECASE)
DEVICE_TYPES = ("cpu", "cuda", "xpu", "mps", "meta")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_RUN_KWARGS = {"accuracy": ("accuracy", True, False, ""), "tracing_mode": ("real", "symbolic")}

HEAD = """\
# Known-bug repro of minify-bot, rendered by the report from the failure's verified graph (random inputs)
import os
os.environ.pop('TORCHDYNAMO_REPRO_AFTER', None)
os.environ.pop('TORCHDYNAMO_REPRO_LEVEL', None)

import torch
from torch import tensor, device
from math import inf, nan
"""
TAIL = """\
load_args._version = 0
mod = Repro()
if __name__ == '__main__':
    from torch._dynamo.repro.after_aot import run_repro
{body}
"""


class NotRenderable(ValueError):
    """The file's graph, inputs or config are not only what this module accepts."""


def render(source: str) -> str | None:
    """The known repro rendered from ``source`` (the failure's ``repro.py``), or None when its graph,
    inputs or config are anything but torch ops on tensors and literals."""
    try:
        return _render(source)
    except (NotRenderable, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _render(source: str) -> str:
    if not isinstance(source, str) or len(source) > MAX_SOURCE:
        raise NotRenderable("not a repro of a size the bot writes")
    tree = ast.parse(source)
    config, forward, load_args, run = [], None, None, None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Repro":
            forward = _forward_of(node)
        elif isinstance(node, ast.FunctionDef) and node.name == "load_args":
            load_args = _load_args(node)
        elif isinstance(node, ast.Assign) and _config_target(node):
            try:
                config.append(_config(node))
            except (NotRenderable, ValueError):
                continue   # a setting of another kind (a directory, a program, a file): left out, never run
        elif isinstance(node, ast.If):
            run = _run_call(node)
    if forward is None or load_args is None or run is None:
        raise NotRenderable("no Repro.forward, load_args or run_repro call")
    no_grad, kwargs = run
    call = f"run_repro(mod, load_args, {kwargs}, command='run', save_dir=None, check_str=None)"
    body = "    with torch.no_grad():\n        " + call if no_grad else "    " + call
    imports = [f"import {m}" for m in MODULES.values()]
    return "\n".join([HEAD, *imports, "", *config, "", "", "class Repro(torch.nn.Module):", _indent(forward, 1), "", "",
                      load_args, TAIL.format(body=body)])


def _indent(text: str, levels: int) -> str:
    return "\n".join(("    " * levels + line) if line else line for line in text.splitlines())


# ------------------------------------------------------------------------------------------ the graph

def _forward_of(cls: ast.ClassDef) -> str:
    if cls.decorator_list or cls.keywords or [ast.unparse(b) for b in cls.bases] != ["torch.nn.Module"]:
        raise NotRenderable("Repro is not a plain torch.nn.Module")
    forward = None
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == "forward":
            forward = item
        elif isinstance(item, ast.FunctionDef) and item.name == "__init__" and _plain_init(item):
            continue
        elif not (isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant)):
            raise NotRenderable("Repro holds more than forward")
    if forward is None:
        raise NotRenderable("Repro has no forward")
    return ast.unparse(_graph(forward))


def _plain_init(fn: ast.FunctionDef) -> bool:
    return [ast.unparse(s) for s in fn.body] == ["super().__init__()"]


def _graph(fn: ast.FunctionDef) -> ast.FunctionDef:
    a = fn.args
    if fn.decorator_list or a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs or fn.returns:
        raise NotRenderable("forward has more than positional inputs")
    params = [p.arg for p in a.args]
    if not params or params[0] != "self" or any(p.annotation for p in a.args):
        raise NotRenderable("forward is not forward(self, inputs...)")
    names = set(params[1:])
    for p in params[1:]:
        _name(p)
    body = fn.body
    if len(body) > MAX_STATEMENTS or not body or not isinstance(body[-1], ast.Return):
        raise NotRenderable("forward does not end in a return")
    for st in body[:-1]:
        if not (isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) for t in st.targets)
                and (len(st.targets) == 1 or _is_none(st.value))):   # `a = b = None`: values freed
            raise NotRenderable(f"line {st.lineno}: not `name = <torch op>`")
        _value(st.value, names)
        names.update(_name(t.id) for t in st.targets)
    ret = body[-1].value
    if ret is not None:
        _arg(ret, names)
    return fn


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _name(name: str) -> str:
    if not _NAME.fullmatch(name) or name.startswith("__") or name in ("self", "torch", "device", "tensor"):
        raise NotRenderable(f"{name[:40]!r} is not a graph value's name")
    return name


def _value(node: ast.expr, names: set[str]) -> None:
    """The right-hand side of a graph statement: a torch op call, an item of a graph value, or None."""
    if isinstance(node, ast.Constant) and node.value is None:
        return
    if isinstance(node, ast.Subscript):
        if not (isinstance(node.value, ast.Name) and node.value.id in names and isinstance(node.slice, ast.Constant)
                and type(node.slice.value) is int):
            raise NotRenderable("an item that is not value[<int>]")
        return
    if not isinstance(node, ast.Call) or not _torch_op(node.func):
        raise NotRenderable(f"line {getattr(node, 'lineno', '?')}: a call of something other than a torch op")
    for a in node.args:
        _arg(a, names)
    for k in node.keywords:
        if k.arg is None:
            raise NotRenderable("**kwargs in a graph")
        _arg(k.value, names)


def _torch_op(func: ast.expr) -> bool:
    parts = _dotted(func)
    return (parts is not None and len(parts) == 5 and parts[:2] == ["torch", "ops"] and parts[2] in OP_NAMESPACES
            and all(_NAME.fullmatch(p) and not p.startswith("__") for p in parts[3:])
            and not any(w in parts[3] for w in IO_OPS))


def _dotted(node: ast.expr) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _arg(node: ast.expr, names: set[str]) -> None:
    """An argument: a graph value, a literal, a list/tuple of them, a torch constant or a device."""
    if isinstance(node, ast.Name):
        if node.id not in names and node.id not in ("inf", "nan"):
            raise NotRenderable(f"{node.id[:40]!r} is not a graph value")
        return
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, (int, float, bool, str, type(None))) or (
                isinstance(node.value, str) and len(node.value) > 200):
            raise NotRenderable("a literal of another kind")
        return
    if isinstance(node, (ast.List, ast.Tuple)):
        for e in node.elts:
            _arg(e, names)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _arg(node.operand, set())   # a negative number (or -inf)
        return
    if isinstance(node, ast.Attribute):
        parts = _dotted(node)
        if parts is not None and len(parts) == 2 and parts[0] == "torch" and parts[1] in TORCH_CONSTANTS:
            return
        raise NotRenderable(f"{ast.unparse(node)[:60]!r} is not a torch constant")
    if isinstance(node, ast.Call) and _device(node):
        return
    raise NotRenderable(f"{ast.unparse(node)[:60]!r} is not an argument of a torch op")


def _device(node: ast.Call) -> bool:
    """``device(type='cuda', index=0)`` / ``device('cpu')``: torch's own repr of a device."""
    if not (isinstance(node.func, ast.Name) and node.func.id == "device"):
        return False
    vals = [*node.args, *(k.value for k in node.keywords)]
    if any(k.arg not in ("type", "index") for k in node.keywords) or not 1 <= len(vals) <= 2:
        return False
    kind, *index = vals
    return (isinstance(kind, ast.Constant) and kind.value in DEVICE_TYPES
            and all(isinstance(i, ast.Constant) and type(i.value) is int for i in index))


# ------------------------------------------------------------------------------------------ the inputs

_STORAGE_KW = {"device", "dtype_hint"}
_TENSOR_KW = {"storage_offset", "dtype", "requires_grad", "is_leaf", "device"}


def _load_args(fn: ast.FunctionDef) -> str:
    if fn.decorator_list or [a.arg for a in fn.args.args] != ["reader"] or fn.args.vararg or fn.args.kwarg \
            or fn.args.kwonlyargs or fn.args.defaults:
        raise NotRenderable("load_args is not load_args(reader)")
    bufs: set[str] = set()
    if len(fn.body) > MAX_STATEMENTS:
        raise NotRenderable("too many inputs")
    for st in fn.body:
        if isinstance(st, ast.Pass):   # a graph that reads no input
            continue
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                and _reader_call(st.value, "storage"):
            _literals(st.value, _STORAGE_KW, set())
            bufs.add(_name(st.targets[0].id))
        elif isinstance(st, ast.Expr) and _reader_call(st.value, "tensor"):
            call = st.value
            if not call.args or not (isinstance(call.args[0], ast.Name) and call.args[0].id in bufs):
                raise NotRenderable("a tensor of no storage")
            _literals(call, _TENSOR_KW, {call.args[0]})
        else:
            raise NotRenderable(f"load_args line {st.lineno}: not a storage or a tensor")
    return ast.unparse(fn)


def _reader_call(node: ast.expr, what: str) -> bool:
    return isinstance(node, ast.Call) and _dotted(node.func) == ["reader", what]


def _literals(call: ast.Call, keywords: set[str], given: set) -> None:
    for a in call.args:
        if a not in given:
            _arg(a, set())
    for k in call.keywords:
        if k.arg not in keywords:
            raise NotRenderable(f"reader argument {k.arg!r}")
        _arg(k.value, set())


# ------------------------------------------------------------------------------------------ config, run

def _config_target(node: ast.Assign) -> bool:
    parts = _dotted(node.targets[0]) if len(node.targets) == 1 else None
    return parts is not None and parts[0] == "torch"


# the process's numerics switches a repro sets (bot/torch_adapter/numerics.py): true or false only
NUMERICS = frozenset({"torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
                      "torch.backends.cudnn.deterministic", "torch.backends.cudnn.benchmark",
                      "torch.backends.cudnn.enabled",
                      "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
                      "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction"})


def _config(node: ast.Assign) -> str:
    dotted = ".".join(_dotted(node.targets[0]) or [])
    if dotted in NUMERICS:
        value = ast.literal_eval(node.value)
        if type(value) is not bool:
            raise NotRenderable(f"{dotted}: not true or false")
        return f"{dotted} = {value!r}"
    module = next((m for m in MODULES.values() if dotted.startswith(m + ".")), None)
    key = dotted[len(module) + 1:] if module else ""
    if not module or not all(_NAME.fullmatch(p) and not p.startswith("_") for p in key.split(".")) \
            or UNSAFE_KEY.search(key):
        raise NotRenderable(f"{dotted[:80]!r} is not a setting a repro may make")
    value = ast.literal_eval(node.value)   # ValueError for anything but a literal
    if not isinstance(value, (int, float, bool, str, type(None))) or len(repr(value)) > 400 or (
            isinstance(value, str) and not re.fullmatch(r"[A-Za-z0-9_.,:+-]*", value)):
        raise NotRenderable(f"{dotted[:80]!r}: not a plain value")
    return f"{module}.{key} = {value!r}"


def _run_call(node: ast.If) -> tuple[bool, str] | None:
    """``if __name__ == '__main__':`` … ``run_repro(mod, load_args, accuracy=…, tracing_mode=…)``: whether
    it runs under no_grad, and its two settings (checked against the values torch writes)."""
    if ast.unparse(node.test) not in ("__name__ == '__main__'", '__name__ == "__main__"'):
        return None
    no_grad, call = False, None
    for st in ast.walk(node):
        if isinstance(st, ast.With) and [ast.unparse(i.context_expr) for i in st.items] == ["torch.no_grad()"]:
            no_grad = True
        if isinstance(st, ast.Call) and isinstance(st.func, ast.Name) and st.func.id == "run_repro" and call is None:
            call = st
    if call is None:
        raise NotRenderable("no run_repro call")
    kw = {k.arg: k.value for k in call.keywords if k.arg in _RUN_KWARGS}
    out = []
    for name, allowed in _RUN_KWARGS.items():
        value = kw.get(name)
        lit = value.value if isinstance(value, ast.Constant) else (allowed[0] if value is None else object())
        if lit not in allowed or type(lit) not in {type(a) for a in allowed}:
            raise NotRenderable(f"run_repro's {name} is not one torch writes")
        out.append(f"{name}={lit!r}")
    return no_grad, ", ".join(out)
