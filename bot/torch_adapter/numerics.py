"""A program's global numerics state: the process-wide flags that change what a compiled graph
computes (TF32 and float32 matmul precision, cuDNN's flags, deterministic algorithms, the default
dtype) but are not part of the graph, nor of torch's config modules, so torch's repro launchers do
not carry them.

The environment hook reads them inside the program as each graph is compiled (:func:`read`: only
what differs from torch's defaults); the minify worker sets them before it loads the captured graph
(:func:`apply`), and the packaged repro carries them as the few lines that set them (:func:`lines`).
Names and values are checked against the table below (:func:`validate`): they come from the
program's process, and they become code in a repro.

Every flag is read and set feature-detected: a torch without it, or one that refuses the read (a
program that mixed TF32's legacy and new APIs), only leaves that flag out.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable

_PRECISIONS = ("highest", "high", "medium")
_FP32 = ("none", "ieee", "tf32")
_DTYPES = ("float32", "float64", "float16", "bfloat16")
_DETERMINISTIC = ("off", "on", "warn_only")


@dataclass(frozen=True)
class Flag:
    name: str                     # how the repro and the record name it
    default: Any                  # torch's default: a flag at its default is not recorded
    values: tuple                 # the values a record may hold
    get: Callable[[Any], Any]     # torch -> value
    set: Callable[[Any, Any], None]
    line: Callable[[Any], str]    # value -> the repro's line


def _attr(path: str, default: Any, values: tuple = (True, False)) -> Flag:
    """A flag that is an attribute, e.g. ``torch.backends.cudnn.allow_tf32``."""
    owner, _, attr = path.rpartition(".")

    def _owner(torch):
        obj = torch
        for part in owner.split(".")[1:]:
            obj = getattr(obj, part)
        return obj

    return Flag(path, default, values, lambda torch: getattr(_owner(torch), attr),
                lambda torch, v: setattr(_owner(torch), attr, v), lambda v: f"{path} = {v!r}")


def _set_deterministic(torch, v: str) -> None:
    torch.use_deterministic_algorithms(v != "off", warn_only=v == "warn_only")


def _get_deterministic(torch) -> str:
    if not torch.are_deterministic_algorithms_enabled():
        return "off"
    return "warn_only" if torch.is_deterministic_algorithms_warn_only_enabled() else "on"


def _deterministic_line(v: str) -> str:
    return "torch.use_deterministic_algorithms(" + ("False)" if v == "off" else
                                                     "True, warn_only=True)" if v == "warn_only" else "True)")


FLAGS: tuple[Flag, ...] = (
    # TF32: the legacy switches first; a program that used the new per-backend API is read there
    _attr("torch.backends.cuda.matmul.allow_tf32", False),
    _attr("torch.backends.cudnn.allow_tf32", True),
    _attr("torch.backends.cuda.matmul.fp32_precision", "none", _FP32),
    _attr("torch.backends.cudnn.fp32_precision", "none", _FP32),
    Flag("float32_matmul_precision", "highest", _PRECISIONS,
         lambda torch: torch.get_float32_matmul_precision(),
         lambda torch, v: torch.set_float32_matmul_precision(v),
         lambda v: f"torch.set_float32_matmul_precision({v!r})"),
    _attr("torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction", True),
    _attr("torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction", True),
    _attr("torch.backends.cudnn.enabled", True),
    _attr("torch.backends.cudnn.deterministic", False),
    _attr("torch.backends.cudnn.benchmark", False),
    Flag("deterministic_algorithms", "off", _DETERMINISTIC, _get_deterministic, _set_deterministic,
         _deterministic_line),
    Flag("default_dtype", "float32", _DTYPES,
         lambda torch: str(torch.get_default_dtype()).removeprefix("torch."),
         lambda torch, v: torch.set_default_dtype(getattr(torch, v)),
         lambda v: f"torch.set_default_dtype(torch.{v})"),
)
_BY_NAME = {f.name: f for f in FLAGS}
# TF32's new per-backend API is read only where its legacy switch cannot be (the two are one state
# in torch; a repro that set both would mix the APIs, which torch refuses)
_LEGACY = {"torch.backends.cuda.matmul.fp32_precision": "torch.backends.cuda.matmul.allow_tf32",
           "torch.backends.cudnn.fp32_precision": "torch.backends.cudnn.allow_tf32"}


def read() -> dict[str, Any]:
    """The flags of this process that differ from torch's defaults."""
    import torch

    out: dict[str, Any] = {}
    readable: set[str] = set()
    for flag in FLAGS:
        if _LEGACY.get(flag.name) in readable:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = flag.get(torch)
        except Exception:  # noqa: BLE001 - feature-detected: an unknown or refused flag is left out
            continue
        readable.add(flag.name)
        if value != flag.default and value in flag.values:
            out[flag.name] = value
    return out


def validate(state: Any) -> dict[str, Any]:
    """Only known flags with values they can take (a record from a program is untrusted)."""
    if not isinstance(state, dict):
        return {}
    return {k: v for k, v in state.items()
            if k in _BY_NAME and any(v == ok and type(v) is type(ok) for ok in _BY_NAME[k].values)}


def apply(state: dict[str, Any]) -> list[str]:
    """Set the flags of ``state`` in this process; returns the names that could not be set."""
    import torch

    failed = []
    for name, value in validate(state).items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _BY_NAME[name].set(torch, value)
        except Exception:  # noqa: BLE001 - feature-detected: this torch lacks or refuses the flag
            failed.append(name)
    return failed


def lines(state: dict[str, Any]) -> list[str]:
    """The repro's lines that set ``state`` (in the table's order)."""
    ok = validate(state)
    return [f.line(ok[f.name]) for f in FLAGS if f.name in ok]


def with_lines(source: str, state: dict[str, Any]) -> str:
    """A repro's source with the lines that set ``state``, right after its ``import torch``."""
    extra = lines(state)
    if not extra:
        return source
    block = "# the program's numerics settings (process state, not part of the graph)\n" + "\n".join(extra) + "\n"
    anchor = "import torch\n"
    i = source.find(anchor)
    if i == 0 or (i > 0 and source[i - 1] == "\n"):
        return source[:i + len(anchor)] + block + source[i + len(anchor):]
    return anchor + block + source
