"""One accuracy check, judged the way PyTorch's benchmark harness judges it.

Runs in the check's own process (a forked or fresh child): build the model, an fp64 reference,
two eager runs that must agree, then the compiled run compared with the harness's `same()`,
per-dtype tolerance and cosine fallback. Training mode compares the loss and the gradients too.
Returns the check's row (:class:`bot.records.CheckRow`) with the fields of its result.
"""

from __future__ import annotations

import copy
import time
import traceback
from typing import Callable

from bot.check.settings import Settings
from bot.records import Accuracy, CheckError, CheckRow, Spec

TRACEBACK_LINES = 40   # the traceback's tail kept
MESSAGE_LINES = 12     # of each message in it (error_info)


def tolerance_for(spec: Spec, s: Settings) -> tuple[float, bool]:
    """The harness's tolerance rules (torchbench flavour) plus per-model overrides."""
    opts = spec.options or {}
    cosine = bool(opts.get("cosine", False))
    training = s.mode == "training"
    if training and "training_tolerance" in opts:
        return float(opts["training_tolerance"]), cosine
    if "tolerance" in opts:
        return float(opts["tolerance"]), cosine
    if s.dtype in ("float16", "amp"):
        return 1e-3, cosine
    if s.dtype == "bfloat16":
        return 1e-2, cosine
    if training and s.device == "cuda":
        return 1e-3, cosine
    return 1e-4, cosine


def _messages_cut(text: str, exc: BaseException) -> str:
    """``text`` (the formatted traceback) with each message of the exception's chain longer than
    :data:`MESSAGE_LINES` cut to its first lines: a compile error's message is the compiler's whole
    output, which would push every Python frame out of the kept tail. The error's own message keeps
    all of it."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        lines = str(e).splitlines()
        if len(lines) > MESSAGE_LINES:
            rest = len(lines) - MESSAGE_LINES
            text = text.replace(str(e), "\n".join(lines[:MESSAGE_LINES] + [
                f"[... {rest} more lines of this message: see the full error message]"]))
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return text


def error_info(exc: BaseException) -> CheckError:
    from bot.signature import unwrap

    inner = unwrap(exc)
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = _messages_cut("".join(tb), exc)
    lines = text.rstrip("\n").splitlines()
    frames = [
        {"file": f.filename, "line": f.lineno, "function": f.name}
        for f in traceback.extract_tb(exc.__traceback__)
    ][-50:]
    message = str(inner).strip()
    return CheckError(type=type(inner).__name__, module=type(inner).__module__,
                      wrapper=type(exc).__name__ if inner is not exc else None, message=message[:4000],
                      traceback="\n".join(lines[-TRACEBACK_LINES:]), frames=frames)


def is_setup_failure(exc: BaseException) -> bool:
    """A model that could not be set up: a missing package, a download that failed offline."""
    from bot.suites.classify import SETUP

    if isinstance(exc, ImportError):
        return True
    return isinstance(exc, (OSError, ValueError, RuntimeError)) and bool(SETUP.search(f"{type(exc).__name__}: {exc}"))


def _result(status, failure_class=None, error=None, accuracy=None, **extra) -> CheckRow:
    return CheckRow(status=status, failure_class=failure_class, error=error, accuracy=accuracy, **extra)


class _Verdict(Exception):
    """A step decided the check's result early (the model does not load, eager fails, ...)."""

    def __init__(self, row: CheckRow):
        super().__init__(row.status)
        self.row = row


def judge(spec: Spec, s: Settings, phase: Callable[[str], None] = lambda p: None) -> CheckRow:
    """One check by the harness's rules: load, fp64 reference, two eager runs that must agree,
    the compiled run, the comparison. The check's row (status, class, error, accuracy, extras).
    On a GPU the row records the numerics flags the harness's setup set (TF32 off, cuDNN
    deterministic, deterministic algorithms), as a program's row records its own: the minify worker
    and both repros run the graph under them, as the check did."""
    row = _judge(spec, s, phase)
    if s.device.startswith("cuda"):
        from bot.torch_adapter import numerics

        row.numerics = numerics.read() or None
    return row


def _judge(spec: Spec, s: Settings, phase: Callable[[str], None]) -> CheckRow:
    from bot.suites import source_of
    from bot.torch_adapter import config as tconfig
    from bot.torch_adapter import repro as R
    from bot.torch_adapter import runtime as rt

    rt.setup_determinism(s.device)
    try:
        source = source_of(spec)
        base, wide = source.check_config, source.reference_default_dtype
    except Exception:  # noqa: BLE001 - a spec no source takes is the load phase's result, reported there
        base, wide = {}, None
    tconfig.apply_overrides({**base, **s.config})
    R.keep_launchers(s.config)   # a capture run (minify): every graph torch dumps, not only the last
    t0 = time.perf_counter()
    try:
        phase("load")
        model, inputs, batch_size = _load(spec, s)
        extra = {"batch_size": batch_size}
        autocast = rt.autocast_context(s.device) if s.dtype == "amp" else None
        tolerance, cosine = tolerance_for(spec, s)
        phase("fp64")
        fp64 = fp64_reference(model, inputs, s, wide)
        cosine = cosine or fp64 is None  # the harness falls back to cosine similarity when fp64 fails
        ref = _eager_reference(model, inputs, s, autocast, phase, extra)
        phase("compile")
        new = _compiled_run(model, inputs, s, autocast, extra)
    except _Verdict as verdict:
        return verdict.row
    phase("compare")
    ok = rt.same(ref, new, fp64, tol=tolerance, cosine=cosine)
    accuracy = Accuracy(tolerance=tolerance, cosine=cosine, **rt.rmse_summary(ref, new, fp64))
    extra["check_s"] = round(time.perf_counter() - t0, 3)
    if not ok:
        return _result("fail_accuracy", "accuracy", None, accuracy, **extra)
    return _result("pass", None, None, accuracy, **extra)


def _load(spec: Spec, s: Settings):
    """The model and its inputs on the check's device and dtype, in the check's mode."""
    import torch

    from bot.suites import build
    from bot.torch_adapter import runtime as rt

    try:
        rt.reseed()
        model, inputs, batch_size = build(spec, spec.batch_size)
        model = model.to(s.device)
        inputs = tuple(x.to(s.device) if isinstance(x, torch.Tensor) else x for x in inputs)
        if s.dtype in ("float16", "bfloat16"):
            model, inputs = rt.cast_to(getattr(torch, s.dtype), model, inputs)
        model.train(s.mode == "training")
        return model, inputs, batch_size
    except NotImplementedError as exc:
        raise _Verdict(_result("model_fail_to_load", "eager_error", error_info(exc))) from None
    except Exception as exc:  # noqa: BLE001 - any failure to load the model is the check's result
        if rt.is_oom(exc):
            raise _Verdict(_result("eager_fail_to_run", "oom", error_info(exc))) from None
        if is_setup_failure(exc):
            raise _Verdict(_result("model_fail_to_load", "setup_error", error_info(exc))) from None
        raise _Verdict(_result("eager_fail_to_run", "eager_error", error_info(exc))) from None


def fp64_reference(model, inputs, s: Settings, default_dtype: str | None = None):
    """The model's result in float64, or None when it does not run in float64. ``default_dtype``
    (the source's :attr:`~bot.suites.source.Source.reference_default_dtype`) is torch's default float
    dtype meanwhile."""
    import torch

    from bot.torch_adapter import runtime as rt

    try:
        m64, in64 = rt.cast_to(torch.float64, copy.deepcopy(model), inputs)
        with rt.default_dtype(default_dtype):
            return rt.run_iteration(m64, in64, s.mode == "training")
    except Exception:  # noqa: BLE001 - any fp64 failure only changes the comparison
        return None


def _eager_reference(model, inputs, s: Settings, autocast, phase, extra: dict):
    """Two eager runs with the same seed, which must agree: the reference."""
    from bot.torch_adapter import runtime as rt

    refs = []
    for nth in ("1st", "2nd"):
        phase(f"eager_{nth}")
        try:
            refs.append(rt.run_iteration(copy.deepcopy(model), inputs, s.mode == "training", autocast))
        except Exception as exc:  # noqa: BLE001 - any eager failure is the check's result
            oom = rt.is_oom(exc)
            raise _Verdict(_result(f"eager_{nth}_run_OOM" if oom else f"eager_{nth}_run_fail",
                                   "oom" if oom else "eager_error", error_info(exc), **extra)) from None
    if not rt.same(refs[0], refs[1], None, tol=0.0, cosine=False):
        differ = CheckError(type="EagerNondeterminism", message="two eager runs with the same seed differ",
                            traceback="", frames=[])
        raise _Verdict(_result("eager_two_runs_differ", "eager_error", differ, **extra))
    return refs[0]


def _compiled_run(model, inputs, s: Settings, autocast, extra: dict):
    """The model compiled with the check's backend, run once; compile time and dynamo's counters
    go into ``extra``."""
    from bot.torch_adapter import runtime as rt

    rt.reset()
    compiled_model = copy.deepcopy(model)
    t1 = time.perf_counter()
    try:
        opt = rt.compile_model(compiled_model, s.backend, s.dynamic)
        new = rt.run_iteration(opt, inputs, s.mode == "training", autocast)
    except Exception as exc:  # noqa: BLE001 - any compile or run failure is the check's result
        extra.update(compile_s=round(time.perf_counter() - t1, 3), stats=rt.dynamo_stats())
        if rt.is_oom(exc):
            raise _Verdict(_result("OOM", "oom", error_info(exc), **extra)) from None
        cls = "compile_error" if rt.is_compile_exception(exc) else "runtime_error"
        raise _Verdict(_result("fail_to_run", cls, error_info(exc), **extra)) from None
    extra.update(compile_s=round(time.perf_counter() - t1, 3), stats=rt.dynamo_stats())
    return new
