"""The short repro, ``repro_short.py``: the failing graph as a person writes it in a bug report.

The plain repro (``bot/minify/worker/plain.py``) carries everything a failure could need: its inputs bit
for bit, a judge for every corner of torch's accuracy rule, a training step. Most minimized bugs
need none of that, and upstream's own reports of them are a few lines. This is that form:

- public names: ``torch.relu(x)``, ``x.view([2, 3])`` instead of ``torch.ops.aten.relu.default(x)``
  (:func:`public_calls`), each kept only where the function computes bit for bit the same values
  eagerly on the failure's inputs (:func:`equal_values`);
- inputs from a seed (``torch.manual_seed``, ``torch.randn(..., device=...)``, ``.as_strided`` or
  ``memory_format`` for a layout), a small input's values written out (``torch.tensor([...])``);
  none of it when an input is neither (the plain repro stands);
- a judge of a few lines: compiled vs eager vs fp64, torch's rule on one line; an error just raises.

It is written beside the plain repro and verified in fresh processes like it; the issue and the
upstream report show it when it fails the same way, the plain repro (the long form) stays in the
artifacts. Written by the plain repro's writer process (it has torch); this module imports no torch
when imported.
"""

from __future__ import annotations

import ast
import math

from bot.minify.worker.plaincode import PREAMBLE, NotPlain, free_names, literal

SMALL_VALUES = 16         # elements of an input whose values are written out when it is not made from a seed
INTEGER_VALUES = 64       # ... of an integer or bool input (ids, indices: the values a failure hangs on)
_CONTIGUOUS_DTYPE = "torch.float32"


def _aten_chain(node: ast.AST) -> tuple[str, str] | None:
    """(namespace, op) of ``torch.ops.<ns>.<op>.<overload>`` (or without the overload)."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    chain.reverse()
    if not (isinstance(node, ast.Name) and node.id == "torch") or len(chain) < 3 or chain[0] != "ops":
        return None
    return chain[1], chain[2]


def _public_call(call: ast.Call):
    """The public spelling of one aten call: ``torch.<op>(...)`` when torch has a function of that
    name, else ``<first arg>.<op>(...)`` when tensors have a method of it; None when neither."""
    import torch

    found = _aten_chain(call.func)
    if found is None or found[0] != "aten" or found[1].startswith("_"):
        return None
    name = found[1]
    if callable(getattr(torch, name, None)):
        return ast.Call(func=ast.Attribute(ast.Name("torch", ast.Load()), name, ast.Load()),
                        args=call.args, keywords=call.keywords)
    if callable(getattr(torch.Tensor, name, None)) and call.args:
        return ast.Call(func=ast.Attribute(call.args[0], name, ast.Load()), args=call.args[1:],
                        keywords=call.keywords)
    return None


def aten_calls(src: str) -> int:
    """How many aten calls the function's code makes."""
    return sum(1 for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call) and _aten_chain(n.func))


def public_calls(src: str, only: set[int] | None = None) -> str:
    """``src`` with its aten calls (the ``only`` ones, by their order in the code) spelled publicly."""
    tree = ast.parse(src)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _aten_chain(n.func)]
    order = {id(c): i for i, c in enumerate(calls)}

    class Rewrite(ast.NodeTransformer):
        def visit_Call(self, node):
            self.generic_visit(node)
            if id(node) in order and (only is None or order[id(node)] in only):
                return _public_call(node) or node
            return node

    tree = Rewrite().visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _run(src: str, args, fp64: bool):
    import torch

    ns = {"torch": torch, "math": math, "inf": math.inf, "nan": math.nan, "device": torch.device,
          "NoneType": type(None)}
    exec(compile(src, "<fn>", "exec"), ns)  # noqa: S102 - the graph's own code, as the repro runs it
    with torch.no_grad():
        return ns["fn"](*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])


def equal_values(a, b) -> bool:
    """Two eager results are the same: the same structure, dtypes, shapes and bits (NaN where NaN)."""
    import torch

    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b)
                and all(equal_values(x, y) for x, y in zip(a, b)))
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride() and bool(
            torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                  and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))))
    return type(a) is type(b) and a == b


def public_function(src: str, args, fp64: bool = False) -> str:
    """The function with every aten call spelled publicly where that computes the same values on
    ``args`` eagerly (all at once, else one call at a time); ``src`` itself when none does."""
    try:
        want = _run(src, args, fp64)
    except Exception:  # noqa: BLE001 - the graph does not run eagerly here: its code stays as it is
        return src
    n = aten_calls(src)

    def works(only) -> bool:
        try:
            return equal_values(_run(public_calls(src, only), args, fp64), want)
        except Exception:  # noqa: BLE001 - this spelling is not the same call
            return False

    if works(None):
        return public_calls(src)
    keep = {i for i in range(n) if works({i})} if n <= 40 else set()
    return public_calls(src, keep) if keep and works(keep) else src


# --- the inputs -------------------------------------------------------------------------------------


def _contiguous_strides(size) -> tuple:
    out, acc = [], 1
    for s in reversed(size):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def _dense(size, stride) -> bool:
    """Contiguous, whatever the strides of its dims of size 1 (they step over nothing)."""
    want = _contiguous_strides(size)
    return all(n == 1 or st == w for n, st, w in zip(size, stride, want))


def _channels_last(size) -> tuple | None:
    if len(size) != 4:
        return None
    n, c, h, w = (max(int(s), 1) for s in size)
    return (h * w * c, 1, w * c, c)


def _shape(size) -> str:
    """A size as a tuple literal: ``(128, 5)``, ``(38,)``, ``()``."""
    return "(" + ", ".join(map(str, size)) + ("," if len(size) == 1 else "") + ")"


def _kw(dtype, device: str) -> str:
    parts = ([f"dtype={dtype}"] if str(dtype) != _CONTIGUOUS_DTYPE else []) + (
        [f"device={device!r}"] if device != "cpu" else [])
    return "".join(", " + p for p in parts)


def made_input(size, stride, dtype, device: str, requires_grad: bool) -> str:
    """A tensor made from the seed as a person writes it: ``torch.randn(8, 64)`` (zeros of an
    integer or bool dtype), its layout through ``memory_format`` or ``as_strided``."""
    import torch

    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    dims = ", ".join(map(str, size)) if size else "()"
    floating = dtype.is_floating_point or dtype.is_complex
    if floating and dtype.itemsize == 1:   # fp8: randn has no kernel for it
        base = f"torch.randn({dims}{_kw(torch.float16, device)}).to({dtype})"
    elif floating:
        base = f"torch.randn({dims}{_kw(dtype, device)})"
    else:
        base = f"torch.zeros({dims}, dtype={dtype}{_kw(torch.float32, device)})"
    if all(size) and stride != _contiguous_strides(size):
        if stride == _channels_last(size):
            base += ".contiguous(memory_format=torch.channels_last)"
        else:
            n = 1 + sum((s - 1) * st for s, st in zip(size, stride))
            flat = base.replace(f"({dims}", f"({n}", 1) if size else base
            base = f"{flat}.as_strided({size!r}, {stride!r})"
    return base + (".requires_grad_()" if requires_grad else "")


def _values(t) -> str | None:
    """A small tensor's values written out: ``torch.tensor([1, 2, 3], dtype=torch.int32)``; None for
    one too large, strided, complex, fp8 or holding a NaN or infinity."""
    import torch

    limit = SMALL_VALUES if t.is_floating_point() or t.is_complex() else INTEGER_VALUES
    if t.numel() > limit or t.is_complex() or (t.is_floating_point() and t.dtype.itemsize == 1):
        return None
    laid = _layout(t)
    if laid is None:
        return None
    t, layout = laid
    values = t.detach().cpu().tolist()
    flat = values if isinstance(values, list) else [values]
    while flat and isinstance(flat[0], list):
        flat = [x for row in flat for x in row]
    if any(isinstance(v, float) and not math.isfinite(v) for v in flat):
        return None
    inferred = t.dtype in (torch.float32, torch.int64, torch.bool)   # what torch.tensor makes of the values
    kw = (_kw(t.dtype, str(t.device)) if not inferred or str(t.device) != "cpu" else "")
    if not inferred:
        kw = kw if "dtype=" in kw else f", dtype={t.dtype}" + kw
    text = repr(values)
    if len(text) > 90:   # wrapped inside the brackets, where Python takes any indentation
        import textwrap

        text = "\n            ".join(textwrap.wrap(text, 90, break_long_words=False, break_on_hyphens=False))
    return f"torch.tensor({text}{kw}){layout}" + (".requires_grad_()" if t.requires_grad else "")


def _layout(t):
    """(the tensor a layout is made from, the calls that make it) for a tensor whose layout a person
    writes in a call or two: contiguous (``""``), a permutation of a dense one (a transpose:
    ``.t()``, ``.permute(2, 0, 1)``), broadcast along some dims (``.expand(2, 5)``) or both; None for
    any other (an overlapping or gapped view: the plain repro keeps it bit for bit)."""
    size, stride = tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride())
    suffix = ""
    if any(st == 0 and sz > 1 for sz, st in zip(size, stride)):
        t = t[tuple(slice(0, 1) if st == 0 and sz > 1 else slice(None) for sz, st in zip(size, stride))]
        suffix = f".expand({', '.join(map(str, size))})"
        size, stride = tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride())
    if _dense(size, stride):
        return t, suffix
    order = sorted(range(len(size)), key=lambda d: (-stride[d] if size[d] > 1 else 0, d))
    dense = t.permute(order)
    if not _dense(tuple(int(s) for s in dense.shape), tuple(int(s) for s in dense.stride())):
        return None
    back = tuple(order.index(d) for d in range(len(order)))
    return dense, (".t()" if back == (1, 0) else f".permute({', '.join(map(str, back))})") + suffix


def _int_range(t) -> str | None:
    """A large integer input as values drawn from a seed over its own range (an id near 2**31, a
    negative index): ``torch.randint(lo, hi + 1, size, dtype=...)`` with its layout, or
    ``torch.full`` for one value. Whether the failure hangs on more than the range is what the short
    repro's own verification decides (the plain repro stands when it does)."""
    import torch

    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool or t.numel() == 0:
        return None
    lo, hi = int(t.min()), int(t.max())
    if hi >= 2**63 - 1:   # randint's exclusive high past int64 (any narrower dtype's max + 1 is fine)
        return None
    kw = f", dtype={t.dtype}" + (f", device={str(t.device)!r}" if t.device.type != "cpu" else "")
    laid = _layout(t)
    if laid is None:
        return None
    size, layout = tuple(int(s) for s in laid[0].shape), laid[1]
    if lo == hi:
        return f"torch.full({_shape(size)}, {lo}{kw}){layout}"
    return f"torch.randint({lo}, {hi + 1}, {_shape(size)}{kw}){layout}"


def _float_scale(t, requires_grad: bool) -> str | None:
    """A large floating input as normal values from a seed at its own mean and spread (magnitudes
    far from 1, where cancellation bugs live): ``torch.randn(128, 5) * 0.25 + 1e+04``. Whether the
    failure hangs on more than that is what the short repro's own verification decides."""
    import torch

    if not t.is_floating_point() or t.numel() < 2 or t.dtype.itemsize == 1:
        return None
    laid = _layout(t)
    if laid is None:
        return None
    size, layout = tuple(int(s) for s in laid[0].shape), laid[1]
    v = t.detach().double()
    if not bool(torch.isfinite(v).all()):
        return None
    mean, spread = float(v.mean()), float(v.std())
    base = f"torch.randn({', '.join(map(str, size))}{_kw(t.dtype, str(t.device))})"
    if spread == 0.0:
        base = f"torch.full({_shape(size)}, {mean:.6g}{_kw(t.dtype, str(t.device))})"
    elif abs(mean) > 4 * spread / math.sqrt(v.numel()) or not 0.5 < spread < 2:   # not a standard normal's
        base = f"({base} * {spread:.3g} {'-' if mean < 0 else '+'} {abs(mean):.6g})"
    return base + layout + (".requires_grad_()" if requires_grad else "")


def input_lines(args, made_inputs: set[int], training: bool = False) -> list[str] | None:
    """Each input as a person writes it; None when one can be neither made nor written out. For a
    training step, the inputs that require grad are those that did in the program, or every floating
    one when none did (the plain repro's rule)."""
    import torch

    floats = {k for k, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()}
    grad = {k for k in floats if args[k].requires_grad} or floats if training else \
        {k for k, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad}


    out = []
    for k, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            try:
                out.append(literal(a))
            except NotPlain:
                return None
            continue
        if a.layout != torch.strided or a.is_quantized or a.is_conj() or a.is_neg():
            return None
        if k in made_inputs:
            out.append(made_input(a.shape, a.stride(), a.dtype, str(a.device), k in grad))
            continue
        text = _values(a.detach().requires_grad_(k in grad) if k in floats else a) or _int_range(a) \
            or _float_scale(a, k in grad)
        if text is None:
            return None
        out.append(text)
    return out


# --- the file ---------------------------------------------------------------------------------------


# a training step: the outputs, then the gradients of the inputs that require grad, for the loss
# that sums the floating outputs in float64 (as the plain repro's step; bot/minify/worker/plain.py)
_TRAINING_STEP = [
    "def step(f, inputs):  # forward and backward: {name: value} of the outputs and the inputs' gradients",
    "    outs, leaves = list(f(*inputs)), [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]",
    "    loss = sum(o.double().sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad)",
    "    grads = torch.autograd.grad(loss, leaves, allow_unused=True)",
    "    return {**{f'output {i}': o.detach() for i, o in enumerate(outs)},",
    "            **{f'gradient {k}': g if g is not None else torch.zeros_like(x)",
    "               for k, (x, g) in enumerate(zip(leaves, grads))}}",
    "",
]


def _judge(p, call: str) -> list[str]:
    """Compiled vs eager vs fp64, torch's accuracy rule (``torch._dynamo.utils.same`` as the check
    applies it) with its numbers on one line; exit 1 with ``AccuracyError`` when an output is wrong
    (or a gradient, for a training step)."""
    tol = float(p.tolerance)
    fp64 = ", fp64=True" if p.fp64 else ""
    mult = "3" if tol >= 2e-2 else "3 if r.numel() < 1000 or c.dtype in (torch.float16, torch.bfloat16) else 2"
    close = f"torch.allclose(e, c, {tol:g}, {tol:g}, equal_nan=True) or rmse(c) <= m * rmse(e) + {tol / 10:g}"
    rule = (f"(torch.equal(e, c) if not e.is_floating_point() else {close})" if p.compare_non_fp
            else f"(not e.is_floating_point() or {close})")
    wide = "[x.detach().double().requires_grad_(x.requires_grad) if x.is_floating_point() else x for x in " \
        "make_inputs()]" if p.training else "[x.double() if x.is_floating_point() else x for x in make_inputs()]"
    if p.training:
        head = [*_TRAINING_STEP, "eager = step(fn, make_inputs())", f"compiled = step({call}, make_inputs())",
                f"fp64 = step(fn, {wide}{fp64})",
                "for i, e, c, r in zip(eager, eager.values(), compiled.values(), fp64.values()):"]
        what, whose = "{i}", "{i} of the compiled training step"
    else:
        head = ["with torch.no_grad():", "    eager = fn(*make_inputs())", f"    compiled = {call}(*make_inputs())",
                f"    fp64 = fn(*{wide}{fp64})", "for i, (e, c, r) in enumerate(zip(eager, compiled, fp64)):"]
        what, whose = "output {i}", "output {i} of the compiled function"
    return [
        *head,
        "    rmse = lambda x: (x.double() - r.double()).square().mean().sqrt().item()",
        f"    # torch's rule (torch._dynamo.utils.same): tolerance {tol:g}, else RMSE vs fp64 at most m x eager's",
        f"    m = {mult}",
        f"    ok = e.dtype == c.dtype and {rule}",
        f'    print(f"{what}: RMSE vs fp64 {{rmse(c):.3g}} compiled, {{rmse(e):.3g}} eager")',
        "    if not ok:",
        f'        raise SystemExit(f"AccuracyError: {whose} is wrong")',
    ]


def tidy(src: str) -> str:
    """The graph's code without what a person would not write: dynamo's aliases of its inputs
    (``l_x_ = L_x_``, each use renamed) and the lines that free a value (``x = None``)."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    fn = tree.body[0] if len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef) else None
    if fn is None:
        return src
    alias: dict[str, str] = {}
    body = []
    for st in fn.body:
        if isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) for t in st.targets):
            value = st.value
            if isinstance(value, ast.Constant) and value.value is None:
                continue
            if len(st.targets) == 1 and isinstance(value, ast.Name) and st.targets[0].id not in alias:
                alias[st.targets[0].id] = alias.get(value.id, value.id)
                continue
        body.append(st)

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node):
            return ast.copy_location(ast.Name(alias.get(node.id, node.id), node.ctx), node)

    fn.body = [Rename().visit(st) for st in body] or [ast.Pass()]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def called(src: str) -> list[str]:
    """The functions, tensor methods and ops the function calls (``torch.amin``, ``Tensor.view``,
    ``aten.avg_pool2d_backward``), once each."""
    out = []
    for n in ast.walk(ast.parse(src)):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            continue
        op = _aten_chain(n.func)
        if op is not None:
            name = f"{op[0]}.{op[1]}"
        else:
            dotted = ast.unparse(n.func)
            name = dotted if dotted.startswith("torch.") and dotted.replace(".", "").replace("_", "").isalnum() \
                else f"Tensor.{n.func.attr}"
        if name not in out:
            out.append(name)
    return out


def short_source(p, inputs: list[str]) -> str | None:
    """The text of repro_short.py for the plain repro's parts ``p`` (bot.minify.worker.plain.Parts) and
    its inputs as written (:func:`input_lines`); None where the short form does not apply (a user's
    registered backend)."""
    from bot.torch_adapter import numerics
    from bot.torch_adapter.config import MODULES, config_line
    from bot.torch_adapter.repro import backend_lines

    if backend_lines(p.backend):
        return None
    words = "gives wrong results" if p.accuracy else "fails"
    dyn = ", dynamic=True" if p.dynamic else ""
    call = f"torch.compile(fn, backend={p.backend!r}{dyn})"
    names = called(p.fn)
    what = f" for {', '.join(names[:3])}" + (" and more" if len(names) > 3 else "") if names else ""
    lines = [f"# {call} {words}{what} (minimized and verified by minify-bot)", "import torch"]
    prefixes = list(dict.fromkeys(e.key.partition(".")[0] for e in p.config))
    lines += [f"import {MODULES[x]}" for x in MODULES if x in prefixes]
    settings = [config_line(e.key, e.value) for e in p.config] + numerics.lines(p.numerics)
    lines += [""] + settings if settings else []

    used = set(free_names(p.fn))
    pre = [PREAMBLE[n] for n in PREAMBLE if n in used and PREAMBLE[n]] + (["import math"] if "math" in used else []) \
        + (["import operator"] if "operator" in used else [])
    lines += [""] + pre if pre else []
    made = any(f"torch.{f}(" in x for x in inputs for f in ("randn", "zeros", "randint"))
    lines += ["", tidy(p.fn).rstrip("\n"), "", "def make_inputs():"] + (["    torch.manual_seed(0)"] if made else [])
    one = "    return [" + ", ".join(inputs) + "]"
    lines += [one] if len(one) <= 120 else ["    return ["] + [f"        {x}," for x in inputs] + ["    ]"]
    lines += [""]
    if p.accuracy:
        lines += _judge(p, call)
    else:
        gpu = any("cuda" in x for x in inputs) or "cuda" in p.fn
        if p.training:
            lines += [*_TRAINING_STEP, f"step({call}, make_inputs())  # raises"] + (
                ["torch.cuda.synchronize()"] if gpu else [])
        else:
            lines += ["with torch.no_grad():", f"    {call}(*make_inputs())  # raises"] + (
                ["    torch.cuda.synchronize()"] if gpu else [])
        lines += [f'print("the compiled {"training step" if p.training else "function"} ran without error: '
                  'the failure did not reproduce")']
    return "\n".join(lines) + "\n"
