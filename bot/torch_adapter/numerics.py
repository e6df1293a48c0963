"""A program's global numerics state: the process-wide flags that change what a compiled graph
computes (TF32 and float32 matmul precision, cuDNN's flags, deterministic algorithms, the default
dtype) but are not part of the graph, nor of torch's config modules, so torch's repro launchers do
not carry them.

The environment hook reads them inside the program as each graph is compiled (:func:`read`: only
what differs from torch's defaults); the minify worker sets them before it loads the captured graph
(:func:`apply`), and the packaged repro carries them as the few lines that set them (:func:`lines`).
Names and values are checked against the table below (:func:`validate`): they come from the
program's process, and they become code in a repro.

Autocast is process state too (per device type: on, with a dtype), but only a graph captured after
dynamo runs under it (:data:`AUTOCAST`, read by the capture backend with :func:`read_autocast`):
an after-AOT graph already holds autocast's casts.

Every flag is read and set feature-detected: a torch without it, or one that refuses the read (a
program that mixed TF32's legacy and new APIs), only leaves that flag out, never the rest.

TF32 has two APIs that torch refuses to see mixed: the legacy switches (``allow_tf32``) and the
per-backend ``fp32_precision`` tree (``torch.backends`` > ``cudnn`` (all of CUDA) > matmul, cuDNN
conv, cuDNN rnn; setting a node also sets the nodes under it). Per backend, the record holds one of
them: the legacy switch when it reads and says what the new API reads, else the new API's nodes.
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


def _split_k(base: str, default: Any = True) -> Flag:
    """cuBLAS's split-K half of a reduced-precision reduction switch (``..._split_k``): it is read on
    its own but set only with its switch, as ``(switch, split_k)`` (torch refuses split-K off while
    the switch is on: the switch is set first, in the table's order)."""
    flag = _attr(base, default)
    return Flag(base + "_split_k", default, (True, False), _attr(base + "_split_k", default).get,
                lambda torch, v: flag.set(torch, (flag.get(torch), v)),
                lambda v: f"{base} = ({base}, {v!r})")


def _set_deterministic(torch, v: str) -> None:
    torch.use_deterministic_algorithms(v != "off", warn_only=v == "warn_only")


def _get_deterministic(torch) -> str:
    if not torch.are_deterministic_algorithms_enabled():
        return "off"
    return "warn_only" if torch.is_deterministic_algorithms_warn_only_enabled() else "on"


def _deterministic_line(v: str) -> str:
    return "torch.use_deterministic_algorithms(" + ("False)" if v == "off" else
                                                     "True, warn_only=True)" if v == "warn_only" else "True)")


_MATMUL = "torch.backends.cuda.matmul"
FLAGS: tuple[Flag, ...] = (
    # TF32's legacy switches, then float32 matmul precision (which the cuBLAS switch also sets), then
    # the new API's tree, each node before the nodes it sets (the record is applied in this order)
    _attr(f"{_MATMUL}.allow_tf32", False),
    _attr("torch.backends.cudnn.allow_tf32", True),
    Flag("float32_matmul_precision", "highest", _PRECISIONS,
         lambda torch: torch.get_float32_matmul_precision(),
         lambda torch, v: torch.set_float32_matmul_precision(v),
         lambda v: f"torch.set_float32_matmul_precision({v!r})"),
    _attr("torch.backends.fp32_precision", "none", _FP32),
    _attr("torch.backends.cudnn.fp32_precision", "none", _FP32),
    _attr(f"{_MATMUL}.fp32_precision", "none", _FP32),
    _attr("torch.backends.cudnn.conv.fp32_precision", "tf32", _FP32),
    _attr("torch.backends.cudnn.rnn.fp32_precision", "tf32", _FP32),
    # cuBLAS's reduced-precision reductions and accumulation
    _attr(f"{_MATMUL}.allow_fp16_reduced_precision_reduction", True),
    _split_k(f"{_MATMUL}.allow_fp16_reduced_precision_reduction"),
    _attr(f"{_MATMUL}.allow_bf16_reduced_precision_reduction", True),
    _split_k(f"{_MATMUL}.allow_bf16_reduced_precision_reduction"),
    _attr(f"{_MATMUL}.allow_fp16_accumulation", False),
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


def _autocast(device: str) -> Flag:
    """Autocast for one device type, on with a dtype (not recorded when off). Only a graph captured
    after dynamo carries it: its ops are the program's own, which autocast cast as they ran (a graph
    captured after AOTAutograd has the casts in it). Set, it leaves autocast's weight cache off: a
    process that runs many candidates would otherwise keep a cast copy of every candidate's weights
    (the cache empties only when the outermost ``torch.autocast`` block exits)."""
    def get(torch):
        return str(torch.get_autocast_dtype(device)).removeprefix("torch.") if torch.is_autocast_enabled(device) \
            else None

    def put(torch, v):
        torch.set_autocast_enabled(device, v is not None)
        if v is not None:
            torch.set_autocast_dtype(device, getattr(torch, v))
            torch.set_autocast_cache_enabled(False)

    def line(v):
        return f"torch.set_autocast_enabled({device!r}, True); torch.set_autocast_dtype({device!r}, torch.{v})"

    return Flag(f"autocast.{device}", None, ("float16", "bfloat16"), get, put, line)


AUTOCAST: tuple[Flag, ...] = tuple(_autocast(d) for d in ("cpu", "cuda", "xpu", "mps", "hpu"))
_ALL = FLAGS + AUTOCAST
_BY_NAME = {f.name: f for f in _ALL}
# TF32's new API: the nodes that set every backend's precision (the tree's root and CUDA's), and per
# legacy switch the nodes it stands for (a switch on reads "tf32" there, off "none")
_TF32_ROOTS = ("torch.backends.fp32_precision", "torch.backends.cudnn.fp32_precision")
_TF32_LEGACY = {f"{_MATMUL}.allow_tf32": (f"{_MATMUL}.fp32_precision",),
                "torch.backends.cudnn.allow_tf32": ("torch.backends.cudnn.conv.fp32_precision",
                                                    "torch.backends.cudnn.rnn.fp32_precision")}


def _read_each(torch) -> dict[str, Any]:
    """Every flag this torch reads (one it lacks or refuses to read is left out, alone)."""
    values: dict[str, Any] = {}
    for flag in FLAGS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values[flag.name] = flag.get(torch)
        except Exception:  # noqa: BLE001 - feature-detected: an unknown or refused flag is left out
            continue
    return values


def _tf32_left_out(values: dict[str, Any]) -> set[str]:
    """TF32's flags that the record must not hold, so that it never mixes the two APIs: per backend
    the new API's nodes while the legacy switch reads and agrees with them (the switch carries
    them), else the switch. A root set (it sets every backend) takes every backend to the new API."""
    roots = any(values.get(r, "none") != "none" for r in _TF32_ROOTS)
    out: set[str] = set()
    for legacy, nodes in _TF32_LEGACY.items():
        said = "tf32" if values.get(legacy) else "none"
        if not roots and legacy in values and all(values.get(n, said) == said for n in nodes):
            out.update(nodes)
        else:
            out.add(legacy)
    if not roots:
        out.update(_TF32_ROOTS)
    return out


def read() -> dict[str, Any]:
    """The flags of this process that differ from torch's defaults. Under a TF32 node that is
    recorded, every node is recorded as it reads (setting the node sets them; a node set apart from
    it must be set again after it)."""
    import torch

    values = _read_each(torch)
    left_out = _tf32_left_out(values)
    out: dict[str, Any] = {}
    for flag in FLAGS:   # the roots come first: ``out`` holds those recorded when the nodes are read
        if flag.name not in values or flag.name in left_out:
            continue
        value = values[flag.name]
        under_root = flag.name.endswith("fp32_precision") and any(r in out for r in _TF32_ROOTS)
        if (value != flag.default or under_root) and value in flag.values:
            out[flag.name] = value
    return out


def read_autocast(device_types) -> dict[str, str]:
    """The autocast flags on in this process for ``device_types`` (a graph's devices: "cuda"); not
    part of :func:`read`, which every graph's record takes."""
    import torch

    out: dict[str, str] = {}
    for flag in AUTOCAST:
        if flag.name.partition(".")[2] not in device_types:
            continue
        try:
            value = flag.get(torch)
        except Exception:  # noqa: BLE001 - feature-detected: a torch without per-device autocast
            continue
        if value in flag.values:
            out[flag.name] = value
    return out


def validate(state: Any, *, autocast: bool = False) -> dict[str, Any]:
    """Only known flags with values they can take (a record from a program is untrusted), and
    autocast's only where asked (a dynamo-level graph's state: never a check row's record, which an
    after-AOT graph is judged under too)."""
    if not isinstance(state, dict):
        return {}
    return {k: v for k, v in state.items()
            if k in _BY_NAME and (autocast or not k.startswith("autocast."))
            and any(v == ok and type(v) is type(ok) for ok in _BY_NAME[k].values)}


def apply(state: dict[str, Any]) -> list[str]:
    """Set the flags of ``state`` in this process, in the table's order (a record read back from JSON
    may come in any); returns the names that could not be set."""
    import torch

    failed = []
    ok = validate(state, autocast=True)
    for flag in _ALL:   # the table's order: a node before the nodes it sets
        if flag.name not in ok:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                flag.set(torch, ok[flag.name])
        except Exception:  # noqa: BLE001 - feature-detected: this torch lacks or refuses the flag
            failed.append(flag.name)
    return failed


def lines(state: dict[str, Any]) -> list[str]:
    """The repro's lines that set ``state`` (in the table's order)."""
    ok = validate(state, autocast=True)
    return [f.line(ok[f.name]) for f in _ALL if f.name in ok]


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
