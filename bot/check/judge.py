"""One accuracy check, judged the way PyTorch's benchmark harness judges it.

Runs in the check's own process (a forked or fresh child): build the model, an fp64 reference,
two eager runs that must agree, then the compiled run compared with the harness's `same()`,
per-dtype tolerance and cosine fallback. Training mode compares the loss and the gradients too.
Returns the fields of a results.json row.
"""

from __future__ import annotations

import copy
import time
import traceback
from typing import Callable

from bot.check.settings import Settings

TRACEBACK_LINES = 40


def tolerance_for(spec: dict, s: Settings) -> tuple[float, bool]:
    """The harness's tolerance rules (torchbench flavour) plus per-model overrides."""
    opts = spec.get("options") or {}
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


def error_info(exc: BaseException) -> dict:
    from bot.signature import unwrap

    inner = unwrap(exc)
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(tb)
    lines = text.rstrip("\n").splitlines()
    frames = [
        {"file": f.filename, "line": f.lineno, "function": f.name}
        for f in traceback.extract_tb(exc.__traceback__)
    ][-50:]
    message = str(inner).strip()
    return {
        "type": type(inner).__name__,
        "module": type(inner).__module__,
        "wrapper": type(exc).__name__ if inner is not exc else None,
        "message": message[:4000],
        "traceback": "\n".join(lines[-TRACEBACK_LINES:]),
        "frames": frames,
    }


def is_setup_failure(exc: BaseException) -> bool:
    """A model that could not be set up: a missing package, a download that failed offline."""
    from bot.suites.classify import SETUP

    if isinstance(exc, ImportError):
        return True
    return isinstance(exc, (OSError, ValueError, RuntimeError)) and bool(SETUP.search(f"{type(exc).__name__}: {exc}"))


def _result(status, failure_class=None, error=None, accuracy=None, **extra):
    row = {"status": status, "failure_class": failure_class, "error": error, "accuracy": accuracy}
    row.update(extra)
    return row


def judge(spec: dict, s: Settings, phase: Callable[[str], None] = lambda p: None) -> dict:
    import torch

    from bot.suites import build
    from bot.torch_adapter import config as tconfig
    from bot.torch_adapter import runtime as rt

    rt.setup_determinism(s.device)
    tconfig.apply_overrides(s.config)
    training = s.mode == "training"
    t0 = time.perf_counter()

    phase("load")
    try:
        rt.reseed()
        model, inputs, batch_size = build(spec, spec.get("batch_size"))
        model = model.to(s.device)
        inputs = tuple(x.to(s.device) if isinstance(x, torch.Tensor) else x for x in inputs)
        if s.dtype in ("float16", "bfloat16"):
            model, inputs = rt.cast_to(getattr(torch, s.dtype), model, inputs)
        model.train(training)
    except NotImplementedError as exc:
        return _result("model_fail_to_load", "eager_error", error_info(exc))
    except Exception as exc:  # noqa: BLE001 - any failure to load the model is the check's result
        if rt.is_oom(exc):
            return _result("eager_fail_to_run", "oom", error_info(exc))
        if is_setup_failure(exc):
            return _result("model_fail_to_load", "setup_error", error_info(exc))
        return _result("eager_fail_to_run", "eager_error", error_info(exc))

    autocast = rt.autocast_context(s.device) if s.dtype == "amp" else None
    tolerance, cosine = tolerance_for(spec, s)
    extra = {"batch_size": batch_size}

    phase("fp64")
    fp64 = None
    try:
        m64, in64 = rt.cast_to(torch.float64, copy.deepcopy(model), inputs)
        fp64 = rt.run_iteration(m64, in64, training)
    except Exception:  # noqa: BLE001 - any fp64 failure only changes the comparison
        cosine = True  # the harness falls back to cosine similarity when fp64 fails

    refs = []
    for nth in ("1st", "2nd"):  # two eager runs with the same seed must agree
        phase(f"eager_{nth}")
        try:
            refs.append(rt.run_iteration(copy.deepcopy(model), inputs, training, autocast))
        except Exception as exc:  # noqa: BLE001 - any eager failure is the check's result
            oom = rt.is_oom(exc)
            return _result(f"eager_{nth}_run_OOM" if oom else f"eager_{nth}_run_fail",
                           "oom" if oom else "eager_error", error_info(exc), **extra)
    ref, ref2 = refs
    if not rt.same(ref, ref2, None, tol=0.0, cosine=False):
        return _result("eager_two_runs_differ", "eager_error",
                       {"type": "EagerNondeterminism", "message": "two eager runs with the same seed differ",
                        "traceback": "", "frames": []}, **extra)

    phase("compile")
    rt.reset()
    compiled_model = copy.deepcopy(model)
    t1 = time.perf_counter()
    try:
        opt = rt.compile_model(compiled_model, s.backend, s.dynamic)
        new = rt.run_iteration(opt, inputs, training, autocast)
    except Exception as exc:  # noqa: BLE001 - any compile or run failure is the check's result
        extra["compile_s"] = round(time.perf_counter() - t1, 3)
        extra["stats"] = rt.dynamo_stats()
        if rt.is_oom(exc):
            return _result("OOM", "oom", error_info(exc), **extra)
        cls = "compile_error" if rt.is_compile_exception(exc) else "runtime_error"
        return _result("fail_to_run", cls, error_info(exc), **extra)
    extra["compile_s"] = round(time.perf_counter() - t1, 3)
    extra["stats"] = rt.dynamo_stats()

    phase("compare")
    ok = rt.same(ref, new, fp64, tol=tolerance, cosine=cosine)
    accuracy = {"tolerance": tolerance, "cosine": cosine, **rt.rmse_summary(ref, new, fp64)}
    extra["check_s"] = round(time.perf_counter() - t0, 3)
    if not ok:
        return _result("fail_accuracy", "accuracy", None, accuracy, **extra)
    return _result("pass", None, None, accuracy, **extra)
