"""The plain repro, ``repro_plain.py``: the minimized graph as a plain Python function of aten ops,
its inputs, and eager against ``torch.compile(fn, backend=...)`` judged the way the check judges,
with public torch APIs only (``import torch``, ``torch.ops.*``, ``torch.compile``; the config
modules only for the settings the failure needs). It is what an upstream bug report holds; it runs
on torch builds whose private repro API differs (a bisection over builds); and when its inputs are
small (:data:`INLINE_LIMIT` characters, zlib-compressed and base64-encoded) it carries them
bit-exact, so that it runs from
a copy-paste of the issue. Larger inputs go to ``inputs/plain_inputs.pt`` (``torch.save`` of a
list), named by the sha256 of their storages, which the repro checks when it loads them.

The file is written in a process that has torch (``python -m bot.minify.worker.plain JOB``: a fork of
the minify command's fork server, :func:`write_plain` in the parent) from the worker's final
torch-format repro; the parent verifies it in fresh processes like ``repro.py``. Its parts:

- the graph (:func:`graph_function`): FX's own code for it, as ``def fn(<placeholders>)``; the
  graph's tensor constants become inputs; dtype arguments that torch's fp64 reference rewrites
  (``cast_dtype_args_to_fp64``) read ``torch.float64 if fp64 else <dtype>``, so the reference is
  the same function called with ``fp64=True``;
- the inputs (:func:`encode_inputs`, :func:`inline_inputs_source`): each distinct storage's raw
  bytes, and each input a ``torch.as_strided`` view of one (dtype, size, stride, storage offset,
  requires_grad as saved): shared storages, views larger than their data, nan / inf / -0.0 /
  denormals and integer edges come back bit for bit;
- the judge (:data:`ACCURACY_JUDGE`): torch's ``same()`` rule as the check applies it (allclose at
  the tolerance, else the RMSE against the fp64 reference within a multiple of eager's), a few
  lines of plain torch; an accuracy failure prints ``AccuracyError`` with the numbers and exits 1;
  an error just propagates from the compiled call.
"""

from __future__ import annotations

import ast
import base64
import json
import os
import sys
import zlib
from dataclasses import dataclass, field, replace
from string import Template

from bot import rundir
from bot.minify.worker.plaincode import PREAMBLE, NotPlain, free_names, literal
from bot.records import ConfigEntry, PlainRepro, Record

# characters of base64 (of the zlib-compressed storages) the inputs may take inline, together: with
# the code around them the file stays within what an issue body inlines (bot.report.context
# INLINE_REPRO_LIMIT, under GitHub's 65,536 characters); some 30 KB of random floats, far more of
# ids, masks or repeated values
INLINE_LIMIT = 40 * 1024
# inputs larger than this (characters, as INLINE_LIMIT) are made from a seed, not carried, when
# random inputs fail the same way: a maintainer reads ``_rand((2, 3, 32, 32), ...)``, not 30 KB of base64
RANDOM_OVER = 2 * 1024
B64_LINE = 100              # characters of base64 per source line


# --- what the generated file runs, as text: this module imports no torch when imported (the minify
#     command's own process never does); the writer runs the same text to hash what it encodes.
#     Each part is a string.Template ($name is filled in).

STORAGE_HELPERS = '''

def _storage(device, data):
    """One storage's raw bytes (zlib, base64) as a flat uint8 tensor on ``device``."""
    raw = bytearray(zlib.decompress(base64.b64decode(data)))
    flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    return flat.to(device)


def _view(storage, dtype, size, stride, offset, requires_grad=False):
    """An input as it was saved: a view of a storage's bytes with its dtype, size, stride and offset."""
    t = torch.as_strided(storage.view(dtype), size, stride, offset)
    return t.requires_grad_() if requires_grad else t
'''

SHA256_HELPER = '''

def _sha256(inputs):
    """sha256 of the inputs' storages: each distinct storage's raw bytes, in order of first use."""
    digest, seen = hashlib.sha256(), set()
    for t in inputs:
        if not isinstance(t, torch.Tensor):
            continue
        s = t.untyped_storage()
        key = (s.data_ptr(), s.nbytes(), str(s.device))
        if key in seen:
            continue
        seen.add(key)
        raw = bytearray(s.nbytes())
        if raw:
            flat = torch.empty(0, dtype=torch.uint8, device=s.device).set_(s)
            torch.frombuffer(raw, dtype=torch.uint8).copy_(flat.cpu())
        digest.update(raw)
    return digest.hexdigest()
'''

RANDOM_HELPER = '''

def _rand(size, stride, dtype, device, requires_grad=False):
    """A tensor of ``size`` over a buffer its ``stride`` fits, as torch's own repros make one:
    normal floats, zeros of other dtypes."""
    n = 1 + sum((s - 1) * st for s, st in zip(size, stride)) if all(size) else 0
    if dtype.is_floating_point or dtype.is_complex:
        buf = torch.randn(n, dtype=torch.float16 if dtype.itemsize == 1 else dtype, device=device).to(dtype)
    else:
        buf = torch.zeros(n, dtype=dtype, device=device)
    t = torch.as_strided(buf, size, stride)
    return t.requires_grad_() if requires_grad else t
'''

FILE_INPUTS = '''
INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "inputs", "$file")
INPUTS_SHA256 = "$sha"


def make_inputs():
    """A fresh copy of the saved inputs: inputs/$file from the failure's artifacts."""
    inputs = torch.load(INPUTS, weights_only=True)
    found = _sha256(inputs)
    if found != INPUTS_SHA256:
        print(f"{INPUTS}: its storages' sha256 is {found}, not {INPUTS_SHA256}: not this repro's inputs",
              file=sys.stderr)
        sys.exit(2)
    return inputs
''' + SHA256_HELPER

FORWARD_STEP = '''

def _flat(x):
    return [z for y in x for z in _flat(y)] if isinstance(x, (list, tuple)) else [x]


def step(f, inputs, **kw):
    """A forward, as the check ran it (no grad): {label: value} of every output."""
    with torch.no_grad():
        return {f"output {i}": v for i, v in enumerate(_flat(f(*inputs, **kw)))}
'''

TRAINING_STEP = '''

def _flat(x):
    return [z for y in x for z in _flat(y)] if isinstance(x, (list, tuple)) else [x]


def step(f, inputs, **kw):
    """A training step, as the check ran it: forward and backward together. {label: value} of
    every output, then the gradient of every input that required grad in the program (never a
    buffer; every floating-point input when none did) for the loss that sums the floating outputs
    (each in float64)."""
    floats = [isinstance(x, torch.Tensor) and x.is_floating_point() for x in inputs]
    wanted = [f and x.requires_grad for f, x in zip(floats, inputs)]
    wanted = wanted if any(wanted) else floats
    inputs = [x.detach().requires_grad_(w) if f else x for x, f, w in zip(inputs, floats, wanted)]
    leaves = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.requires_grad]
    outs = [o for o in _flat(f(*inputs, **kw)) if isinstance(o, torch.Tensor)]
    terms = [o.double().sum() for o in outs if o.is_floating_point() and o.requires_grad]
    grads = [None] * len(leaves)
    if terms and leaves:
        grads = torch.autograd.grad(torch.stack(terms).sum(), [inputs[i] for i in leaves], allow_unused=True)
    values = {f"output {i}": o.detach() for i, o in enumerate(outs)}
    for i, g in zip(leaves, grads):
        values[f"gradient of input {i}"] = torch.zeros_like(inputs[i]) if g is None else g.detach()
    return values
'''

ACCURACY_MAIN = '''

# judged like the check: torch's accuracy rule (torch._dynamo.utils.same, as the check applies it)
TOLERANCE = $tol
COMPARE_NON_FLOAT = $compare   # True: integer and bool outputs are compared too


def _rmse(reference, x):
    return torch.sqrt(torch.mean(torch.square(reference.double() - x.double()))).item()


def _wrong(expected, actual, reference):
    """The compiled output is wrong: not within the tolerance of eager's, and further from the fp64
    reference than a small multiple of eager's own error."""
    if not isinstance(expected, torch.Tensor):
        return COMPARE_NON_FLOAT and expected != actual
    if expected.dtype != actual.dtype:
        return True
    if expected.dtype == torch.bool:
        expected, actual = expected.to(torch.uint8), actual.to(torch.uint8)
        return COMPARE_NON_FLOAT and not torch.allclose(expected, actual, atol=TOLERANCE, rtol=TOLERANCE)
    if torch.allclose(expected, actual, atol=TOLERANCE, rtol=TOLERANCE, equal_nan=True):
        return False
    if reference.dtype != torch.float64:   # an integer output, or no fp64 reference
        return COMPARE_NON_FLOAT
    if (not reference.isnan().any() and not actual.isnan().any() and expected.isnan().any()
            and torch.allclose(reference.to(actual.dtype), actual, atol=0.04, rtol=0.04, equal_nan=True)):
        return False   # eager has nan where compiled and fp64 agree
    eager, compiled = _rmse(reference, expected), _rmse(reference, actual)
    small = reference.numel() < 1000 or (expected.ndim == 4 and expected.shape[-1] == expected.shape[-2] == 1)
    multiplier = 3.0 if small or TOLERANCE >= 2e-2 or actual.dtype in (torch.float16, torch.bfloat16) else 2.0
    return not (compiled <= multiplier * eager + TOLERANCE / 10 or (math.isnan(eager) and math.isnan(compiled)))


def _describe(label, expected, actual, reference):
    if not isinstance(expected, torch.Tensor) or expected.dtype != actual.dtype:
        return f"{label}: compiled {actual!r}, eager {expected!r}"
    diff = (actual.double() - expected.double()).abs()
    line = (f"{label} ({str(actual.dtype).replace('torch.', '')} {list(actual.shape)}): max abs error "
            f"{diff.max().item() if diff.numel() else 0.0:.6g} against eager")
    if reference.dtype == torch.float64 and actual.is_floating_point():
        line += f"; RMSE against fp64: compiled {_rmse(reference, actual):.6g}, eager {_rmse(reference, expected):.6g}"
    return line


def main():
    compiled = torch.compile(fn, backend=$backend$dynamic)
    expected = step(fn, make_inputs())
    try:   # the fp64 reference: floating inputs and dtype arguments in float64
        reference = step(fn, [x.detach().to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point()
                              else x for x in make_inputs()]$fp64)
    except Exception:   # an op without a float64 kernel: compared with eager directly
        reference = expected
    actual = step(compiled, make_inputs())
    if list(actual) != list(expected):
        print(f"AccuracyError: the compiled step gives {list(actual)}, eager {list(expected)}")
        sys.exit(1)
    wrong = [k for k in expected if _wrong(expected[k], actual[k], reference.get(k, expected[k]))]
    for k in wrong:
        print(_describe(k, expected[k], actual[k], reference.get(k, expected[k])))
    if wrong:
        print(f"AccuracyError: {len(wrong)} of {len(expected)} $what of torch.compile(fn, backend=$backend) "
              f"are wrong (tolerance {TOLERANCE}; RMSE against fp64 at most 2-3x eager's)")
        sys.exit(1)
    print("the compiled outputs agree with eager: the failure did not reproduce")
'''

ERROR_MAIN = '''

def main():
    compiled = torch.compile(fn, backend=$backend$dynamic)
    step(compiled, make_inputs())   # the failure: this raises (or the process dies)$sync
    print("the compiled $run ran without error: the failure did not reproduce")
'''

@dataclass
class PlainJob(Record):
    """What the writer needs (``python -m bot.minify.worker.plain JOB RESULT``): the worker's final repro,
    where to write, and how the failure is compiled and judged."""

    final: str = ""                   # the worker's final torch-format repro (its inputs beside it)
    out_dir: str = ""                 # failures/<id>/
    failure_class: str = "accuracy"
    backend: str = "inductor"         # a dynamo-level graph's backend (an after-AOT graph is inductor's)
    tolerance: float = 1e-4
    compare_non_fp: bool = False
    config: list[ConfigEntry] | None = None   # None: every setting the final repro's file carries
    numerics: dict = field(default_factory=dict)
    training: bool = False            # the check ran a backward (a dynamo-level graph is judged by a training step)
    random_inputs: bool = False       # random inputs fail the same way: every large input may be made
    make_inputs: bool = True          # large inputs may be made from a seed (else all carried or saved)
    dynamic: bool = False             # the check compiled with dynamic shapes
    inline_limit: int = INLINE_LIMIT


# --- the graph --------------------------------------------------------------------------------------


class _RefDtype:
    """A dtype argument torch's fp64 reference rewrites (``cast_dtype_args_to_fp64``), written so
    that the same function computes the reference: ``(torch.float64 if fp64 else torch.float16)``."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"(torch.float64 if fp64 else {self.dtype})"


def graph_function(gm) -> tuple[str, list, bool]:
    """``def fn(...)`` for an FX graph, from FX's own code for it: (source, the graph's tensor
    constants, now inputs after the placeholders, whether ``fn`` takes ``fp64``). Raises
    :class:`NotPlain` for a graph that calls submodules or anything but public torch APIs."""
    import copy

    gm = copy.deepcopy(gm)
    if any(n.op == "call_module" for n in gm.graph.nodes):
        raise NotPlain("the graph calls submodules")
    constants = _constants_as_inputs(gm)
    fp64 = _mark_reference_dtypes(gm.graph)
    _public_ops(gm.graph)
    gm.recompile()
    forward = next(n for n in ast.parse(gm.graph.python_code("self").src).body if isinstance(n, ast.FunctionDef))
    params = [a.arg for a in forward.args.args[1:]]   # as FX's code names them (dynamo's ``L_x_``)
    body = [ast.unparse(st) for st in forward.body if not _frees(st)]
    src = f"def fn({', '.join(params + (['*', 'fp64=False'] if fp64 else []))}):\n" + "".join(
        f"    {line}\n" for st in body for line in st.splitlines())
    problems = _not_public(src) + [f"reads {n!r}" for n in free_names(src) if n not in PREAMBLE]
    if problems:
        raise NotPlain("the graph's code is not public torch API only: " + "; ".join(problems[:5]))
    return src, constants, fp64


def _public_ops(g) -> None:
    """A dynamo-level graph calls torch's C bindings (``torch._C._nn.avg_pool2d`` for
    ``F.avg_pool2d``): each becomes the aten op it binds, ``torch.ops.aten.avg_pool2d``."""
    from bot.torch_adapter.minifier import public_op

    for n in g.nodes:
        if n.op == "call_function":
            op = public_op(n.target, n.kwargs)
            if op is not None:
                n.target = op


def _frees(st: ast.stmt) -> bool:
    """FX's ``x = y = None``: it frees values no later node reads (noise in a repro)."""
    return isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) and st.value.value is None


def _constants_as_inputs(gm) -> list:
    """The graph's ``get_attr`` tensors, each made an input (a placeholder after the others, named
    after it), in order; the values are returned."""
    import operator

    import torch

    g = gm.graph
    values = []
    for node in [n for n in g.nodes if n.op == "get_attr"]:
        value = operator.attrgetter(node.target)(gm)
        if not isinstance(value, torch.Tensor):
            raise NotPlain(f"the graph reads a {type(value).__name__} attribute")
        last = [n for n in g.nodes if n.op == "placeholder"]
        with (g.inserting_after(last[-1]) if last else g.inserting_before(next(iter(g.nodes)))):
            ph = g.placeholder("c_" + node.target.replace(".", "_").lstrip("_"))
        node.replace_all_uses_with(ph)
        g.erase_node(node)
        values.append(value.detach())
    return values


def _mark_reference_dtypes(g) -> bool:
    """Mark the dtype arguments torch's fp64 reference rewrites to float64: the dtype of a
    ``prims.convert_element_type`` and any floating ``dtype=`` keyword. True when there is one."""
    import torch

    def floating(d) -> bool:
        return isinstance(d, torch.dtype) and d.is_floating_point and d != torch.float64

    found = False
    for n in g.nodes:
        if n.op != "call_function":
            continue
        if n.target is torch.ops.prims.convert_element_type.default and len(n.args) == 2 and floating(n.args[1]):
            n.args, found = (n.args[0], _RefDtype(n.args[1])), True
        if floating(n.kwargs.get("dtype")):
            n.kwargs, found = {**n.kwargs, "dtype": _RefDtype(n.kwargs["dtype"])}, True
    return found


def _not_public(src: str) -> list[str]:
    """``torch._x`` in the code (``torch.ops.<namespace>.<op>`` is public, higher-order ops are not)."""
    found = []
    inner = set()
    for n in ast.walk(ast.parse(src)):
        if not isinstance(n, ast.Attribute) or id(n) in inner:
            continue
        chain, v = [n.attr], n.value
        while isinstance(v, ast.Attribute):
            inner.add(id(v))
            chain.append(v.attr)
            v = v.value
        chain.reverse()
        if not (isinstance(v, ast.Name) and v.id == "torch"):
            continue
        if chain[0] == "ops" and (len(chain) < 2 or chain[1] != "higher_order"):
            continue
        if chain[0] == "ops" or any(p.startswith("_") and not p.startswith("__") for p in chain):
            found.append("torch." + ".".join(chain))
    return sorted(set(found))


# --- the inputs -------------------------------------------------------------------------------------


@dataclass
class Encoded:
    """The inputs as the plain repro rebuilds them inline: each distinct storage (device, raw
    bytes), in order of first use, and each input's source (a ``_view`` of a storage, or a literal)."""

    storages: list[tuple[str, bytes]]
    items: list[str]
    refs: list = field(default_factory=list)    # per input: its storage's index (None: a literal)
    views: list = field(default_factory=list)   # per input: (size, stride, dtype, device, requires_grad) or None
    _packed: dict = field(default_factory=dict)

    def pack(self, i: int) -> str:
        """Storage ``i``'s bytes as written: zlib-compressed, base64."""
        if i not in self._packed:
            self._packed[i] = base64.b64encode(zlib.compress(self.storages[i][1], 9)).decode("ascii")
        return self._packed[i]

    def packed_len(self, i: int) -> int:
        """Characters of base64 storage ``i`` takes; for one far too large to be carried anyway, its
        raw size (not compressed: that costs seconds per 32 MB, and a GPU graph's inputs can be
        gigabytes), so it is among the first made from a seed."""
        raw = len(self.storages[i][1])
        return self.pack(i).__len__() if raw <= PACK_AT_MOST else raw

    @property
    def size(self) -> int:
        """Characters of base64 the storages take."""
        return sum(self.packed_len(i) for i in range(len(self.storages)))


PACK_AT_MOST = 4 << 20   # raw bytes: a storage over this is never compressed to see whether it fits inline


def storage_bytes(storage) -> bytes:
    """A storage's raw bytes (public API only; ``bytes(storage)`` reads one byte at a time)."""
    import torch

    raw = bytearray(storage.nbytes())
    if raw:
        flat = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
        torch.frombuffer(raw, dtype=torch.uint8).copy_(flat.cpu())
    return bytes(raw)


def encode_inputs(args) -> Encoded | None:
    """The inputs as inline data; None when a tensor is not a plain strided one (sparse, quantized,
    a conjugate or negative view: ``torch.save`` keeps those). Raises :class:`NotPlain` for an
    input that is neither a tensor nor a literal."""
    import torch

    storages: list[tuple[str, bytes]] = []
    index: dict[tuple, int] = {}
    items, refs, views = [], [], []
    for a in args:
        if not isinstance(a, torch.Tensor):
            items.append(literal(a))
            refs.append(None)
            views.append(None)
            continue
        if a.layout != torch.strided or a.is_quantized or a.is_conj() or a.is_neg() or a.device.type == "meta":
            return None
        s = a.untyped_storage()
        key = (s.data_ptr(), s.nbytes(), str(s.device))
        if key not in index:
            index[key] = len(storages)
            storages.append((str(s.device), storage_bytes(s)))
        grad = ", requires_grad=True" if a.requires_grad else ""
        items.append(f"_view(s{index[key]}, {a.dtype}, {tuple(a.shape)!r}, {tuple(a.stride())!r}, "
                     f"{a.storage_offset()}{grad})")
        refs.append(index[key])
        views.append((tuple(a.shape), tuple(a.stride()), a.dtype, str(a.device), a.requires_grad))
    return Encoded(storages, items, refs, views)


def inline_inputs_source(enc: Encoded, made: set[int] | None = None) -> str:
    """``make_inputs()`` over the inline storages, and the helpers it uses. ``made``: the storages
    whose inputs are made from a fixed seed instead (``_rand`` with their sizes, strides and
    dtypes), not carried."""
    made = made or set()
    doc = ("A fresh copy of the saved inputs, bit-exact: each storage's raw bytes (zlib, base64), viewed\n"
           "    with the saved dtype, size, stride and storage offset.")
    if made:
        doc = ("The inputs: the large ones made from a fixed seed with their captured sizes, strides and\n"
               "    dtypes (the failure does not hang on their values: the saved ones are in the artifacts), the\n"
               "    others bit-exact from their storages' raw bytes (zlib, base64).")
    if made and len(made) == len(enc.storages):
        doc = ("Inputs of the captured sizes, strides and dtypes, made from a fixed seed: the failure does\n"
               "    not hang on their values (the saved ones are in the artifacts).")
    lines = ["def make_inputs():", f'    """{doc}"""'] + (["    torch.manual_seed(0)"] if made else [])
    for i, (device, _) in enumerate(enc.storages):
        if i in made:
            continue
        data = enc.pack(i)
        chunks = [data[j:j + B64_LINE] for j in range(0, len(data), B64_LINE)] or [""]
        lines.append(f"    s{i} = _storage({device!r}," + (" " if len(chunks) == 1 else "\n        ")
                     + "\n        ".join(f'"{c}"' for c in chunks) + ")")
    items = [made_item(*enc.views[k]) if enc.refs[k] in made else item for k, item in enumerate(enc.items)]
    lines += ["    return [", *[f"        {item}," for item in items], "    ]"]
    helpers = (STORAGE_HELPERS if len(made) < len(enc.storages) else "") + (RANDOM_HELPER if made else "")
    return "\n".join(lines) + "\n" + helpers


def made_item(size, stride, dtype, device, requires_grad) -> str:
    grad = ", requires_grad=True" if requires_grad else ""
    return f"_rand({size!r}, {stride!r}, {dtype}, {device!r}{grad})"


def storages_to_make(enc: Encoded, *, everything_large: bool, limit: int) -> set[int]:
    """The storages to make from a seed rather than carry: every one over :data:`RANDOM_OVER`
    when random inputs fail the same way (``everything_large``); else, when the inputs do not fit
    ``limit``, the largest ones until the rest does. Empty when nothing is to be made."""
    sizes = [enc.packed_len(i) for i in range(len(enc.storages))]
    if everything_large:
        return {i for i, n in enumerate(sizes) if n > RANDOM_OVER}
    made: set[int] = set()
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        if sum(sizes) - sum(sizes[j] for j in made) <= limit:
            break
        made.add(i)
    return made


def inputs_sha256(args) -> str:
    """The inputs' content hash, by the very function the plain repro checks them with."""
    import hashlib

    import torch

    ns = {"torch": torch, "hashlib": hashlib}
    exec(SHA256_HELPER, ns)  # noqa: S102 - our own helper's text, defined once for both sides
    return ns["_sha256"](list(args))


# --- the file ---------------------------------------------------------------------------------------


@dataclass
class Parts:
    """What one plain repro is made of."""

    fn: str                                # def fn(...)
    inputs: str                            # def make_inputs() and its helpers
    inline: bool
    backend: str
    accuracy: bool
    tolerance: float = 1e-4
    compare_non_fp: bool = False
    dynamic: bool = False
    training: bool = False                 # judged by a training step: outputs and input gradients
    random_inputs: bool = False            # make_inputs() makes them from a seed
    fp64: bool = False                     # fn takes fp64= (dtype arguments of the reference)
    constants: int = 0                     # the graph's constants, the last inputs
    config: list[ConfigEntry] = field(default_factory=list)
    numerics: dict = field(default_factory=dict)


def plain_source(p: Parts) -> str:
    """The text of repro_plain.py."""
    from bot.torch_adapter import numerics
    from bot.torch_adapter.config import MODULES, config_line

    where = ("inline; the large ones made from a seed" if p.random_inputs else "inline" if p.inline
             else f"./{rundir.INPUTS_DIR}/{rundir.PLAIN_INPUTS} from the artifacts")
    run = "training step (forward and backward)" if p.training else "function"
    head = [f"# Minimized by minify-bot. Run: python {rundir.PLAIN}   (inputs: {where})"] + (
        [f"# The failing graph as a plain function, run eagerly and with torch.compile(backend={p.backend!r}),",
         f"# as a {run}, judged like the check: exit 1 when the compiled result is wrong. Public torch APIs only."]
        if p.accuracy
        else [f"# The failing graph as a plain function, compiled with torch.compile(backend={p.backend!r}) and",
              f"# run as a {run}: the error propagates, as in the check. Public torch APIs only."])
    used = set(free_names(p.fn))
    carried = p.inline and "_storage(" in p.inputs
    std = {"base64": carried, "zlib": carried, "hashlib": not p.inline, "math": p.accuracy or "math" in used,
           "operator": "operator" in used, "os": not p.inline, "sys": p.accuracy or not p.inline}
    lines = head + [f"import {m}" for m, needed in std.items() if needed] + ["", "import torch"]
    prefixes = list(dict.fromkeys(e.key.partition(".")[0] for e in p.config))
    lines += [f"import {MODULES[x]}" for x in MODULES if x in prefixes]
    if p.config:
        lines += ["", "# the settings the failure needs"] + [config_line(e.key, e.value) for e in p.config]
    from bot.torch_adapter.repro import backend_lines

    registered = backend_lines(p.backend)
    if registered:
        lines += ["", "# the compiler under test is a user's backend, registered under the name the check used"]
        lines += registered
    extra = numerics.lines(p.numerics)
    if extra:
        lines += ["# the program's numerics settings (process state, not part of the graph)"] + extra
    lines += [""] + [PREAMBLE[n] for n in PREAMBLE if n in used and PREAMBLE[n]]
    if p.constants:
        lines += [f"# the graph's {p.constants} tensor constant(s) are its last inputs"]
    values = {"backend": repr(p.backend), "dynamic": ", dynamic=True" if p.dynamic else "",
              "fp64": ", fp64=True" if p.fp64 else "", "tol": repr(float(p.tolerance)),
              "compare": repr(bool(p.compare_non_fp)), "run": "training step" if p.training else "function",
              "what": "outputs and gradients" if p.training else "outputs",
              # a GPU kernel's fault is reported at the next synchronizing call, not by the launch
              "sync": "\n    torch.cuda.synchronize()" if "cuda" in p.inputs or "cuda" in p.fn else ""}
    main = Template((TRAINING_STEP if p.training else FORWARD_STEP) + (ACCURACY_MAIN if p.accuracy else ERROR_MAIN)
                    ).substitute(values)
    text = "\n".join(lines).rstrip("\n") + "\n\n\n" + p.fn + "\n\n" + p.inputs.strip("\n") + "\n" + main
    return text + '\n\nif __name__ == "__main__":\n    main()\n'


def _config_of(job: PlainJob, rf) -> list[ConfigEntry]:
    """The settings to write: the job's, or (None) every setting the final repro's file carries."""
    from bot.torch_adapter import repro as R

    if job.config is not None:
        return list(job.config)
    return [ConfigEntry(k, None, v) for k, v in rf.config.items()
            if k not in R.CAPTURE_KEYS and not isinstance(v, R._Unparsed)]


def write(job: PlainJob, written=None) -> PlainRepro:
    """Write failures/<id>/repro_plain.py from the worker's final repro (and inputs/plain_inputs.pt
    when the inputs do not fit inline), then the short repro beside it. Runs in a process that has
    torch. ``written(rec)`` is called with the plain repro's record before the short one is tried
    (its eager runs of the graph could take the process down: the plain repro stands then)."""
    import torch

    from bot.minify.worker.predicate import load_graph

    rf, gm, args = load_graph(job.final)
    try:
        fn_src, constants, fp64 = graph_function(gm)
        args = [*args, *constants]
        enc = encode_inputs(args)
    except NotPlain as exc:
        return PlainRepro(reason=str(exc))
    rec = PlainRepro(path=rundir.PLAIN, inputs_sha256=inputs_sha256(args), inputs_bytes=enc.size if enc else 0)
    rec.inputs_inline = enc is not None and enc.size <= job.inline_limit
    made = storages_to_make(enc, everything_large=job.random_inputs, limit=job.inline_limit) \
        if enc is not None and job.make_inputs else set()
    if made:
        rec.inputs_inline = rec.inputs_random = True
        inputs_src = inline_inputs_source(enc, made)
    elif rec.inputs_inline:
        inputs_src = inline_inputs_source(enc)
    else:
        os.makedirs(os.path.join(job.out_dir, rundir.INPUTS_DIR), exist_ok=True)
        torch.save(list(args), os.path.join(job.out_dir, rundir.INPUTS_DIR, rundir.PLAIN_INPUTS))
        rec.inputs_file = f"{rundir.INPUTS_DIR}/{rundir.PLAIN_INPUTS}"
        inputs_src = Template(FILE_INPUTS).substitute(file=rundir.PLAIN_INPUTS, sha=rec.inputs_sha256)
    accuracy = job.failure_class == "accuracy"
    parts = Parts(fn_src, inputs_src, rec.inputs_inline, "inductor" if rf.kind == "aot" else job.backend, accuracy,
                  job.tolerance, job.compare_non_fp, dynamic=rf.dynamic if rf.kind == "aot" else job.dynamic,
                  training=job.training and rf.kind == "dynamo", random_inputs=rec.inputs_random, fp64=fp64,
                  constants=len(constants), config=_config_of(job, rf), numerics=job.numerics)
    from bot.errors import InfraError
    from bot.torch_adapter.repro import checked_source

    try:
        text = checked_source(plain_source(parts), "the plain repro")   # never used unchecked
    except InfraError as exc:
        return PlainRepro(reason=str(exc))
    with open(os.path.join(job.out_dir, rundir.PLAIN), "w", encoding="utf-8") as fh:
        fh.write(text)
    if written is not None:
        written(rec)
    try:
        rec.short_path = write_short(job, parts, args, enc, made)
    except Exception:  # noqa: BLE001 - no short form; the plain repro stands
        import traceback

        traceback.print_exc()
    return rec


def write_short(job: PlainJob, parts: Parts, args, enc: Encoded | None, made: set[int]) -> str | None:
    """Write failures/<id>/repro_short.py (bot/minify/worker/short.py) beside the plain repro: the inputs
    made from the seed where the plain repro makes them (every floating one when random inputs fail
    the same way), the others written out when small. Its file name; None when it does not apply."""
    import torch

    from bot.minify.worker import short

    stale = os.path.join(job.out_dir, rundir.SHORT)
    if os.path.exists(stale):   # an earlier attempt's (the plain repro written again with the saved inputs)
        os.remove(stale)
    if enc is None:
        return None
    seeded = job.random_inputs and job.make_inputs
    made_inputs = {k for k, a in enumerate(args) if isinstance(a, torch.Tensor) and (
        enc.refs[k] in made or (seeded and (a.is_floating_point() or a.numel() > short.SMALL_VALUES)))}
    inputs = short.input_lines(args, made_inputs, training=parts.training)
    if inputs is None:
        return None
    fn = short.public_function(parts.fn, args, parts.fp64)
    text = short.short_source(replace(parts, fn=fn), inputs)
    if text is None:
        return None
    with open(os.path.join(job.out_dir, rundir.SHORT), "w", encoding="utf-8") as fh:
        fh.write(text)
    return rundir.SHORT


# --- the writer's process ---------------------------------------------------------------------------


def write_plain(job: PlainJob, interpreters=None, timeout: float = 300) -> PlainRepro:
    """Write the plain repro in a process of its own: a fork of ``interpreters`` (the minify
    command's fork server, which imported torch) when given, else a fresh interpreter. Its record;
    one with a reason (and no path) when it could not be written."""
    import tempfile

    from bot.minify.worker import child

    with tempfile.TemporaryDirectory(prefix="minify-plain-") as tmp:
        job_path, result_path, log_path = (os.path.join(tmp, n) for n in ("job.json", "result.json", "writer.log"))
        with open(job_path, "w", encoding="utf-8") as fh:
            json.dump(job.to_json(), fh)
        args = [job_path, result_path]
        out = (interpreters.run_module(MODULE, args, cwd=tmp, log_path=log_path, timeout=timeout,
                                       env=child.child_env()) if interpreters is not None else None)
        if out is None:   # no server, or it is gone
            out = child.run_logged([child.python(), "-m", MODULE, *args], cwd=tmp, log_path=log_path, timeout=timeout)
        try:
            with open(result_path, encoding="utf-8") as fh:
                return PlainRepro.from_json(json.load(fh))
        except (OSError, ValueError):
            tail = " | ".join((out.output or out.tail or "").strip().splitlines()[-3:])[-1000:]
            return PlainRepro(reason=f"the plain repro's writer ended without a result "
                                     f"({'timed out' if out.timed_out else f'exit {out.returncode}'}): {tail}")


MODULE = "bot.minify.worker.plain"


def main(argv: list[str]) -> int:
    """``python -m bot.minify.worker.plain JOB RESULT``: write the plain repro; its record to RESULT."""
    import traceback

    job_path, result_path = argv
    with open(job_path, encoding="utf-8") as fh:
        job = PlainJob.from_json(json.load(fh))
    def save(rec: PlainRepro) -> None:
        with open(result_path + ".tmp", "w", encoding="utf-8") as fh:
            json.dump(rec.to_json(), fh)
        os.replace(result_path + ".tmp", result_path)

    try:
        rec = write(job, written=save)
    except Exception as exc:  # noqa: BLE001 - the launcher-format repro stands; the reason is recorded
        traceback.print_exc()
        rec = PlainRepro(reason=f"the plain repro could not be written: {type(exc).__name__}: {exc}"[:2000])
    save(rec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
