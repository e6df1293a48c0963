"""torch's fx minifier and the compile/accuracy primitives the minify predicates are built from.

Private API used (feature-detected in :func:`bot.torch_adapter.repro.require_repro_api`):
``torch._functorch.fx_minifier.minifier``, ``torch._inductor.compile_fx.compile_fx_inner``,
``torch._dynamo.utils.same``, ``torch._dynamo.debug_utils.cast_to_fp64``; for graphs traced with
dynamic shapes (skipped where missing) ``torch._guards.detect_fake_mode`` and
``torch.fx.passes.fake_tensor_prop.FakeTensorProp``.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Callable

from bot.errors import InfraError
from bot.records import GraphOp
from bot.torch_adapter.fxutil import clone_inputs, data_dependent, node_value, symbolic_placeholders


class SanityCheckFailed(Exception):
    """The input graph does not fail the predicate (torch: "Input graph did not fail the tester")."""


def compile_aot(gm, args) -> Callable[[list], Any]:
    """Compile an aten-level graph with inductor the way after_aot repros do; returns f(list)."""
    from torch._inductor.compile_fx import compile_fx_inner


    if symbolic_placeholders(gm) or data_dependent(gm):
        # traced with dynamic shapes: compile from the placeholders' symbolic example values so
        # inductor generates kernels over symbolic sizes (torch's after_aot._get_compile_args does
        # this only when a SymInt input is left; a reduced graph may keep only tensor inputs).
        # A graph that reads a tensor's value (item(), traced with fake tensors) too: compiled
        # from real inputs, inductor's own trace has no shape environment for the value and
        # raises DataDependentOutputException, which the program's compile never saw
        compile_args = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
        gm = _shallow_copy(gm)
        _propagate_fake(gm, compile_args)
        compiled = compile_fx_inner(gm, compile_args)
    else:
        compiled = compile_fx_inner(copy.deepcopy(gm), args)
    if getattr(compiled, "_boxed_call", False) or not callable(compiled):
        return lambda inputs: compiled(list(inputs))
    return lambda inputs: compiled(list(inputs))


def _shallow_copy(gm):
    """A new GraphModule over a copy of ``gm``'s graph whose nodes share ``gm``'s example values
    (inductor rewrites the graph it compiles; a deepcopy would copy symbolic values out of their
    shape environment)."""
    import torch.fx as fx

    g = fx.Graph()
    out = g.graph_copy(gm.graph, {})
    g.output(out)
    return fx.GraphModule(gm, g)


def _propagate_fake(gm, fake_args) -> None:
    """Recompute every node's example value from the inputs' (a cut-out graph's new inputs have
    fresh size symbols; the nodes after them still carry the values of the graph they came from)."""
    try:
        from torch._guards import detect_fake_mode
        from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    except ImportError:  # a torch without them: compile with the values the nodes carry
        return

    mode = detect_fake_mode(fake_args)
    if mode is not None:
        FakeTensorProp(gm, mode=mode).propagate_dont_convert_inputs(*fake_args)


def compile_dynamo(gm, backend: str, dynamic: bool = False) -> Callable[[list], Any]:
    """Compile a torch-level graph through dynamo with ``backend`` (``dynamic``: with dynamic
    shapes, as the failure was captured); returns f(list)."""
    import torch

    from bot.torch_adapter.runtime import resolve_backend

    torch._dynamo.reset()
    src = _shallow_copy(gm) if dynamic else copy.deepcopy(gm)
    # its forward, not the module: an error the compiled code raises unwinds through the module's
    # call wrapper, which dynamo would then trace, and under fullgraph the run's IndexError or device
    # fault came out as "Unsupported: Attempt to trace generator" (torch 2.13 - 2.15)
    opt = torch.compile(src.forward, backend=resolve_backend(backend) if isinstance(backend, str) else backend,
                        fullgraph=True, dynamic=True if dynamic else None)
    return lambda inputs: opt(*inputs)


def compile_backend(gm, args, backend: str) -> Callable[[list], Any]:
    """Hand a graph straight to a registered torch.compile backend (``eager``, ``aot_eager``,
    ``inductor``...), as dynamo would after tracing it, without the tracing: an aten-level graph
    traces to itself. About half the cost of :func:`compile_dynamo` on a small graph (the
    bisector compiles one graph some 16 times). Static shapes only; returns f(list)."""
    from torch._dynamo.backends.registry import lookup_backend

    from bot.torch_adapter.runtime import resolve_backend

    resolved = resolve_backend(backend) if isinstance(backend, str) else backend   # a user's module:function too
    compiled = lookup_backend(resolved)(copy.deepcopy(gm), list(args))
    return lambda inputs: compiled(*inputs)


def run_eager(gm, args):
    from bot.torch_adapter.runtime import synchronize

    out = gm(*clone_inputs(args))
    synchronize()   # a device fault is this run's error (CUDA reports it at the next synchronizing call)
    return out


def flat_outputs(out) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        res = []
        for o in out:
            res += flat_outputs(o)
        return res
    return []


def fp64_reference(gm, args):
    """Run ``gm`` in float64 (graph dtype arguments rewritten) — the check's reference."""
    import torch
    from torch._dynamo.debug_utils import cast_to_fp64

    try:
        g64, a64 = cast_to_fp64(copy.deepcopy(gm), clone_inputs(args))
        with torch.no_grad():
            return g64(*a64)
    except Exception:  # noqa: BLE001 - a graph that cannot run in float64 has no fp64 reference
        return None


def grad_mask(gm, args, frozen=None) -> list[bool]:
    """Which inputs of a dynamo-level graph a training step differentiates: those that required grad
    in the program (the captured input does, or the graph's example value of it did: a parameter),
    and the activations a minifier cut out of the graph (any input not named in ``frozen``, the
    program's floating inputs that did not require grad), never a buffer (a BatchNorm's running
    statistics, whose gradient eager refuses) or the program's data. A graph none of whose inputs
    qualifies (a capture that lost the flags) gets every floating-point input."""
    import torch

    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    floats = [isinstance(a, torch.Tensor) and a.is_floating_point() for a in args]

    def wanted(i: int, a) -> bool:
        if not floats[i]:
            return False
        v = node_value(phs[i]) if i < len(phs) else None
        if a.requires_grad or getattr(v, "requires_grad", False):
            return True
        return frozen is not None and i < len(phs) and phs[i].name not in frozen

    mask = [wanted(i, a) for i, a in enumerate(args)]
    return mask if any(mask) else floats


def train_step(fn, args, mask: list[bool] | None = None) -> list:
    """One training step of a graph (``fn`` takes the list of inputs): its outputs, then the
    gradients of the inputs ``mask`` picks (default: every floating-point input), for the loss that
    sums its floating outputs (each summed in float64). A bug that only a backward shows (a wrong or
    NaN gradient, a backward that recomputes an op another way than its forward) is in the second
    half. Inputs the graph does not differentiate get zeros, so candidates of a minifier compare
    position by position."""
    import torch

    if mask is None:
        mask = [isinstance(a, torch.Tensor) and a.is_floating_point() for a in args]
    inputs = [a.detach().requires_grad_(m) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
              for a, m in zip(clone_inputs(args), mask)]
    leaves = [a for a in inputs if isinstance(a, torch.Tensor) and a.requires_grad]
    with torch.enable_grad():
        outs = flat_outputs(fn(inputs))
        terms = [o.to(torch.float64).sum() for o in outs if o.is_floating_point() and o.requires_grad]
        grads: list = [None] * len(leaves)
        if terms and leaves:
            grads = list(torch.autograd.grad(torch.stack(terms).sum(), leaves, allow_unused=True))
    from bot.torch_adapter.runtime import synchronize

    synchronize()
    return [o.detach() for o in outs] + [torch.zeros_like(x) if g is None else g.detach()
                                         for g, x in zip(grads, leaves)]


def fp64_train_reference(gm, args, mask: list[bool] | None = None):
    """:func:`train_step` of ``gm`` in float64 (the check's reference for a training step)."""
    from torch._dynamo.debug_utils import cast_to_fp64

    try:
        g64, a64 = cast_to_fp64(copy.deepcopy(gm), clone_inputs(args))
        return train_step(lambda xs: g64(*xs), a64, mask)
    except Exception:  # noqa: BLE001 - a graph that cannot run in float64 has no fp64 reference
        return None


def fp64_values(gm, args, names: set) -> dict:
    """The values the nodes ``names`` take when ``gm`` runs in float64 (as :func:`fp64_reference`);
    {} when the graph cannot run in float64."""
    from torch._dynamo.debug_utils import cast_to_fp64

    try:
        g64, a64 = cast_to_fp64(copy.deepcopy(gm), clone_inputs(args))
    except Exception:  # noqa: BLE001 - no fp64 reference: the analysis gives no hint
        return {}
    return _node_values(g64, a64, names)


def eager_node_values(gm, args, names: set) -> dict:
    """The values the nodes ``names`` take when ``gm`` runs eagerly in its own dtypes (no grad),
    recorded as :func:`fp64_values` records them in float64; {} when the graph raises on its inputs."""
    return _node_values(gm, clone_inputs(args), names)


def _node_values(gm, args, names: set) -> dict:
    """Run ``gm`` on ``args`` (no grad) with an ``fx.Interpreter`` that keeps the values of the nodes
    ``names``; {} when it raises."""
    import torch
    import torch.fx as fx

    kept: dict = {}

    class _Rec(fx.Interpreter):
        def run_node(self, n):
            v = super().run_node(n)
            if n.name in names:
                kept[n.name] = v
            return v

    try:
        with torch.no_grad():
            _Rec(gm, garbage_collect_values=True).run(*args)
    except Exception:  # noqa: BLE001 - a graph that raises (or cannot run in float64) gives no values
        return {}
    return kept


def node_op_name(node) -> str:
    """A call node's op as :func:`graph_ops` names it (``aten.relu.default``, ``mul``)."""
    return op_label(node)


def accuracy_fails(ref, res, fp64_ref, *, tol: float, ignore_non_fp: bool) -> bool:
    """The check's criterion: ``same(ref, res, fp64_ref, tol)`` (fp64 RMSE), inverted."""
    from torch._dynamo.utils import same

    params = inspect.signature(same).parameters
    kwargs: dict[str, Any] = {"tol": tol, "equal_nan": True}
    if "ignore_non_fp" in params:
        kwargs["ignore_non_fp"] = ignore_non_fp
    if "log_error" in params:
        kwargs["log_error"] = lambda *a, **k: None
    return not same(ref, res, fp64_ref, **kwargs)


def fx_minify(gm, args, module_fails, dump_state, *, offload_to_disk: bool = False, save_dir: str | None = None,
              skip_sanity: bool = False):
    """Run torch's delta-debugging fx minifier in this process; returns (gm, inputs).

    ``skip_sanity``: the caller already established that the input graph fails."""
    try:
        from torch._functorch.fx_minifier import minifier
    except ImportError as exc:
        raise InfraError(f"this torch has no torch._functorch.fx_minifier.minifier ({exc})") from exc
    params = inspect.signature(minifier).parameters
    kwargs: dict[str, Any] = {}
    if offload_to_disk:
        if "offload_to_disk" not in params:
            raise InfraError("this torch's fx minifier has no offload_to_disk")
        kwargs.update(offload_to_disk=True, save_dir=save_dir)
    if skip_sanity and "skip_sanity" in params:
        kwargs["skip_sanity"] = True
    try:
        return minifier(gm, args, module_fails, dump_state=dump_state, **kwargs)
    except RuntimeError as exc:
        if "did not fail the tester" in str(exc):
            raise SanityCheckFailed(str(exc)) from exc
        raise


# Python's operators as torch names them (a dynamo graph calls ``operator.mul`` for ``a * b``): a culprit,
# a graph's ops and a title say ``div``, never ``_operator.truediv``
PYTHON_OPERATORS = {"truediv": "div", "floordiv": "floor_divide", "mod": "remainder", "and_": "bitwise_and",
                    "or_": "bitwise_or", "xor": "bitwise_xor", "invert": "bitwise_not", "inv": "bitwise_not",
                    "lshift": "bitwise_left_shift", "rshift": "bitwise_right_shift", "not_": "logical_not",
                    "pos": "positive", "abs": "abs", "neg": "neg", "pow": "pow", "matmul": "matmul"}


def op_label(node) -> str:
    """A call node's op as torch names it: ``aten.relu.default`` for an aten overload, ``mul`` / ``div``
    for Python's ``operator.mul`` / ``operator.truediv`` (in-place forms too), the function's name for
    a torch function (``conv2d``), the method's or module's name otherwise."""
    target = node.target
    if node.op != "call_function":
        return str(target)
    if is_op_overload(target):
        return f"aten.{target._opname}.{target._overloadname}" if target.namespace == "aten" else str(target)
    name = getattr(target, "__name__", str(target))
    if (getattr(target, "__module__", None) or "") in ("operator", "_operator"):
        base = name[1:] if name.startswith("i") and name[1:] in _OPERATOR_NAMES else name
        return PYTHON_OPERATORS.get(base, base)
    return name


_OPERATOR_NAMES = {"add", "sub", "mul", "truediv", "floordiv", "mod", "and_", "or_", "xor", "lshift", "rshift",
                   "pow", "matmul", "concat"}


def graph_ops(gm) -> list[GraphOp]:
    """The call nodes of a graph in order: each one's op (:func:`op_label`), its inputs' dtypes and ranks."""
    out = []
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        name = op_label(n)
        dtypes, ranks = [], []
        for a in n.all_input_nodes:
            v = a.meta.get("val", a.meta.get("tensor_meta"))
            dt = getattr(v, "dtype", None)
            sh = getattr(v, "shape", None)
            if dt is not None:
                dtypes.append(str(dt).replace("torch.", ""))
            if sh is not None:
                ranks.append(len(sh))
        out.append(GraphOp(name, dtypes, ranks))
    return out


CALL_OPS = ("call_function", "call_method", "call_module")


def has_compute(gm) -> bool:
    """Whether the graph computes anything (an empty graph never reproduces a compiler bug)."""
    return any(n.op in CALL_OPS for n in gm.graph.nodes)


def is_op_overload(target) -> bool:
    """Whether a call_function target is one of torch's operator overloads (aten.relu.default)."""
    import torch

    return isinstance(target, torch._ops.OpOverload)


# torch's C bindings that dynamo leaves in a graph (``F.avg_pool2d`` is ``torch._C._nn.avg_pool2d``),
# each the python binding of the aten op of the same name
_C_BINDING_MODULES = ("torch._C._nn", "torch._C._linalg", "torch._C._special", "torch._C._fft")


def public_op(target, kwargs: dict):
    """The public ``torch.ops.aten`` op packet that a private C binding in a graph calls
    (``torch._C._nn.avg_pool2d`` -> ``torch.ops.aten.avg_pool2d``), when one of its overloads takes
    the keyword arguments ``kwargs``; None for anything else."""
    import torch

    if getattr(target, "__module__", None) not in _C_BINDING_MODULES:
        return None
    packet = getattr(torch.ops.aten, getattr(target, "__name__", ""), None)
    if packet is None:
        return None
    for name in packet.overloads():
        if set(kwargs) <= {a.name for a in getattr(packet, name)._schema.arguments}:
            return packet
    return None
