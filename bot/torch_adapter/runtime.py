"""Running models the way PyTorch's benchmark harness does: determinism, compile, judge.

The accuracy judgement mirrors ``benchmarks/dynamo/common.py``: an fp64 reference, two eager
runs that must agree, then the compiled run compared with ``torch._dynamo.utils.same`` using
the harness's tolerance and its cosine fallback.
"""

from __future__ import annotations

import contextlib
import importlib
import random
import sys
from typing import Any, Callable

from bot.errors import UsageError
from bot.torch_adapter.fxutil import clone_inputs

SEED = 1337  # the harness patches torch.manual_seed to this

BUILTIN_BACKENDS = ("inductor", "aot_eager", "eager", "aot_eager_decomp_partition")


def setup_determinism(device: str) -> None:
    """Seeds and deterministic kernels, as the harness's setup_determinism() does."""
    import numpy as np
    import torch

    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if device == "cuda":
        import os

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch._inductor.config as inductor_config

    # the harness sets this so that compiled random ops match eager
    inductor_config.fallback_random = True


def reseed() -> None:
    import numpy as np
    import torch

    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)


def resolve_backend(name: str) -> str | Callable:
    """A dynamo backend name, or 'module:function' for a custom backend."""
    if ":" in name:
        modname, _, fn = name.partition(":")
        try:
            mod = importlib.import_module(modname)
            backend = getattr(mod, fn)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"cannot load custom backend {name!r}: {exc}") from exc
        if not callable(backend):
            raise UsageError(f"custom backend {name!r} is not callable")
        return backend
    return name


def known_backend_names() -> list[str]:
    import torch._dynamo

    try:
        return sorted(torch._dynamo.list_backends(exclude_tags=()))
    except TypeError:  # older signature
        return sorted(torch._dynamo.list_backends())


def validate_backend(name: str) -> None:
    if ":" in name:
        resolve_backend(name)
        return
    if name in BUILTIN_BACKENDS:  # always registered: no need to import dynamo to know
        return
    names = known_backend_names()
    if name not in names:
        raise UsageError(
            f"unknown backend {name!r}: expected one of {', '.join(BUILTIN_BACKENDS)}, "
            "another registered dynamo backend, or module:function"
        )


def reset() -> None:
    import torch._dynamo

    torch._dynamo.reset()
    try:
        from torch._inductor import metrics
    except ImportError:  # pragma: no cover - a torch without inductor
        return
    if callable(getattr(metrics, "reset", None)):
        metrics.reset()   # codegen_coverage() then counts this compile's kernels only


def compile_model(model, backend, dynamic: bool):
    import torch

    return torch.compile(model, backend=resolve_backend(backend) if isinstance(backend, str) else backend,
                         dynamic=True if dynamic else None)


def is_compile_exception(exc: BaseException) -> bool:
    """True when the exception was raised while compiling rather than running compiled code."""
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"BackendCompilerFailed", "InductorError", "CppCompileError", "Unsupported",
                "InternalTorchDynamoError", "TorchRuntimeError", "UserError", "LoweringException",
                "CompilationError", "TorchDynamoException"}:
        # TorchRuntimeError is raised while tracing with fake tensors
        return True
    return False


def synchronize() -> None:
    """Wait for the accelerator's queued work: a kernel that faults (an illegal address, a
    device-side assert) reports it asynchronously, at the next synchronizing call. Called right
    after a run, inside the ``try`` that judges it, so the fault is that run's error and not a
    mystery of whatever touched the device next. Nothing to do when CUDA was never initialized."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    if cuda is not None and cuda.is_initialized():
        cuda.synchronize()


# what a sticky accelerator error says: the process's CUDA context is unusable from here on
_POISONING = ("illegal memory access", "device-side assert", "unspecified launch failure", "misaligned address",
              "illegal instruction", "an illegal", "hardware stack error", "launch timed out")


def poisons_process(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it wraps) is a sticky accelerator fault: every later CUDA
    call of this process fails with it, so nothing more can be judged here (a fresh process can)."""
    seen = 0
    while exc is not None and seen < 20:
        names = {c.__name__ for c in type(exc).__mro__}
        text = str(exc)
        if ("AcceleratorError" in names or "CUDA error" in text or "HIP error" in text) and any(
                p in text for p in _POISONING):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def is_oom(exc: BaseException) -> bool:
    import torch

    if isinstance(exc, MemoryError):
        return True
    oom = getattr(torch, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    msg = str(exc).lower()
    return "out of memory" in msg or "cannot allocate memory" in msg


# --- accuracy -----------------------------------------------------------------------------------


@contextlib.contextmanager
def default_dtype(name: str | None):
    """torch's default float dtype set to ``name`` (``"float64"``) meanwhile; None leaves it."""
    import torch

    before = torch.get_default_dtype()
    if name:
        torch.set_default_dtype(getattr(torch, name))
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def cast_to(dtype, model, inputs):
    """Cast the model's floating parameters and the floating inputs (integers stay)."""
    import torch

    model = model.to(dtype)
    cast = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            y = x.detach().to(dtype)
            y.requires_grad_(x.requires_grad)
            cast.append(y)
        else:
            cast.append(x)
    return model, tuple(cast)


def reduce_to_scalar_loss(out):
    from torch._dynamo.testing import reduce_to_scalar_loss as r

    return r(out)


def collect_results(model, prediction, loss, inputs):
    from torch._dynamo.testing import collect_results as c

    return c(model, prediction, loss, inputs)


def run_iteration(model, inputs, training: bool, autocast: Any = None):
    """One forward (inference) or forward+backward (training); returns what the harness compares."""
    import contextlib

    import torch

    reseed()
    cloned = clone_inputs(inputs)
    ctx = autocast if autocast is not None else contextlib.nullcontext()
    if training:
        model.zero_grad(set_to_none=True)
        with ctx:
            pred = model(*cloned)
            loss = reduce_to_scalar_loss(pred)
        loss.backward()
        synchronize()
        return collect_results(model, pred, loss, cloned)
    with torch.no_grad(), ctx:
        out = model(*cloned)
    synchronize()
    return out


def same(ref, res, fp64_ref=None, *, tol: float, cosine: bool = False, equal_nan: bool = True) -> bool:
    from torch._dynamo.utils import same as _same

    return bool(
        _same(ref, res, fp64_ref=fp64_ref, cos_similarity=cosine, tol=tol, equal_nan=equal_nan,
              log_error=lambda *a, **k: None)
    )


def rmse_summary(ref, res, fp64_ref) -> dict:
    """RMSE of eager and compiled results against the fp64 reference, and the max abs diff."""
    import torch

    def flat(x):
        out = []
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            for y in x:
                out.extend(flat(y))
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                out.extend(flat(x[k]))
        elif hasattr(x, "to_tuple"):
            out.extend(flat(x.to_tuple()))
        return out

    a, b, c = flat(ref), flat(res), flat(fp64_ref) if fp64_ref is not None else []
    rmse_res = rmse_ref = max_abs = 0.0
    for i, (x, y) in enumerate(zip(a, b)):
        if not (x.is_floating_point() and y.is_floating_point()) or x.shape != y.shape:
            continue
        max_abs = max(max_abs, float((x.double() - y.double()).abs().max()) if x.numel() else 0.0)
        if i < len(c) and c[i].shape == x.shape:
            g = c[i].double()
            rmse_res = max(rmse_res, float(torch.sqrt(torch.mean((y.double() - g) ** 2))) if y.numel() else 0.0)
            rmse_ref = max(rmse_ref, float(torch.sqrt(torch.mean((x.double() - g) ** 2))) if x.numel() else 0.0)
    return {"rmse_res": rmse_res, "rmse_ref": rmse_ref, "max_abs_diff": max_abs}


def autocast_context(device: str):
    import torch

    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    return torch.autocast(device_type=device, dtype=dtype)


_ISA: dict = {}


def learn_cpu_isa_in_background() -> None:
    """Start inductor's CPU vector-ISA detection in a background thread, so that it overlaps the
    compiler's imports. Every new process that compiles for the CPU detects them once, by compiling
    and loading a probe library per ISA in child processes: about 1 s, mostly spent waiting. The
    result is cached in this process and in children forked from it (a fork waits for it:
    :func:`bot.proc.background`); :func:`warm_up` waits for it too. Not where a GPU is visible: a
    process there compiles nothing (see :func:`warm_up`)."""
    from bot.torch_adapter.device import cuda_device_count

    if "job" in _ISA or cuda_device_count() > 0:
        return
    from bot.torch_adapter import prewarm

    try:  # imported here, not in the thread
        for m in prewarm.CPU_ISA_IMPORTS:
            importlib.import_module(m)
    except ImportError:
        return

    def run():
        try:
            prewarm.learn_cpu_isa()
        except Exception:  # noqa: BLE001 - the compile that needs it detects again, and says why
            pass

    from bot import proc

    _ISA["job"] = proc.background(run, name="cpu-isa-detection")


_WARMED: set = set()


def warmed(device: str = "cpu") -> bool:
    """Whether this process warmed up for ``device`` already (:func:`warm_up`): a child forked from
    it starts as fast as one forked from a fork server that did."""
    return device in _WARMED


def warm_up(device: str = "cpu") -> None:
    """Pay the one-time costs (lazy imports, CPU ISA detection, first C++ compile) once, in a
    process that will fork the checks, without starting thread pools or touching CUDA. Once per
    process: `run`'s check warms the process its minify stage then forks from."""
    from bot.torch_adapter import prewarm
    from bot.torch_adapter.device import cuda_device_count

    if device in _WARMED:
        after_fork()
        return
    _WARMED.add(device)

    gpu = cuda_device_count() > 0
    learn_cpu_isa_in_background()
    try:
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401

        if gpu:
            # A compile here would initialize CUDA (dynamo saves the CUDA RNG state around every
            # compile when a GPU is visible), and CUDA does not survive a fork: every forked check
            # would fail with "Cannot re-initialize CUDA in forked subprocess". Imports, and the
            # hash of torch's sources (files only).
            prewarm.code_cache_key()
            return
        if "job" in _ISA:
            _ISA["job"].wait()
        prewarm.compile_once_on_cpu()
    finally:
        after_fork()


def after_fork() -> None:
    """Forget compile thread/process pools inherited from a parent: their threads did not survive
    the fork, and waiting on them deadlocks. Called in every forked check."""
    from bot.torch_adapter.prewarm import forget_compile_pools

    forget_compile_pools()


def dynamo_stats() -> dict:
    """The harness CSV's dynamo columns for the compiles in this process."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:  # pragma: no cover
        return {}
    stats = counters.get("stats", {})
    breaks = counters.get("graph_break", {})
    return {
        "calls_captured": int(stats.get("calls_captured", 0)),
        "unique_graphs": int(stats.get("unique_graphs", 0)),
        "graph_breaks": int(sum(breaks.values())),
        "unique_graph_breaks": len(breaks),
        "autograd_captures": int(counters.get("compiled_autograd", {}).get("captures", 0)),
        "autograd_compiles": int(counters.get("compiled_autograd", {}).get("compiles", 0)),
        "cudagraph_skips": int(counters.get("inductor", {}).get("cudagraph_skips", 0)),
        **({"codegen": cov} if (cov := codegen_coverage()) else {}),
    }


def codegen_coverage() -> dict[str, int]:
    """What inductor generated since :func:`reset`: its own metrics (kernels, vectorized C++ kernels,
    IR nodes before fusion, parallel and nested reductions, loop reorderings, ...), the non-zero
    ones by name; empty when this torch keeps none. The fuzzer's campaign sums them as coverage."""
    try:
        from torch._inductor import metrics
    except ImportError:  # pragma: no cover
        return {}
    out = {}
    for name, value in sorted(vars(metrics).items()):
        if not name.startswith("_") and type(value) is int and value > 0 and name.islower():
            out[name] = value
    return out
