"""CUDA facts that a process which forks its checks may ask for without poisoning the fork.

Every check, localize and capture run is a child *forked* from one warmed process. CUDA does not
survive a fork: once the parent has asked the CUDA runtime anything - even
``torch.cuda.is_available()`` or ``device_count()``, which register torch's fork handler - every
forked child fails its first CUDA call with "Cannot re-initialize CUDA in forked subprocess".
(Seen on an H100 runner: the whole zoo reported ``eager_fail_to_run`` before this module existed.)

So every minify-bot process sets ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` (bot/cli.py) - torch then
answers ``is_available()`` through NVML - and the parent asks NVML (through torch's NVML-based
count where this torch has it) or ``nvidia-smi``, never the CUDA runtime, and
:func:`assert_fork_safe` lets a forking stage say clearly when something else initialized CUDA first.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys

from bot import proc


def _nvidia_smi(query: str) -> list[str] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    out = proc.run([exe, f"--query-gpu={query}", "--format=csv,noheader"], timeout=30, capture=100_000)
    if out.returncode != 0:
        return None
    return [line.strip() for line in out.output.splitlines() if line.strip()]


def cuda_device_count() -> int:
    """Number of visible CUDA devices, found without initializing CUDA in this process.

    0 when this torch has no CUDA (a CPU build), or no device is visible."""
    import torch

    if not torch.backends.cuda.is_built():
        return 0
    nvml_count = getattr(torch.cuda, "_device_count_nvml", None)  # private: feature-detected
    if callable(nvml_count):
        try:
            n = int(nvml_count())
        except Exception:  # noqa: BLE001 - NVML missing or broken: fall back below
            n = -1
        if n >= 0:
            return n
    names = _nvidia_smi("name")
    if names is None:
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return min(len(names), len([v for v in visible.split(",") if v.strip()]))
    return len(names)


def no_nvidia_driver() -> bool:
    """No NVIDIA driver on this machine (neither ``nvidia-smi`` nor NVML's library): no GPU can be
    visible, whatever torch was built for, so a compile cannot initialize CUDA. Asked without
    importing torch (the minify command's own process does not)."""
    import ctypes.util

    return shutil.which("nvidia-smi") is None and ctypes.util.find_library("nvidia-ml") is None


def gpu_names() -> list[str]:
    """Names of the GPUs on this machine (nvidia-smi), without initializing CUDA here."""
    return _nvidia_smi("name") or []


def cudnn_version() -> str | None:
    """cuDNN's runtime version, asked in a short child process: asking it here
    (torch.backends.cudnn.version()) initializes CUDA and poisons later forks."""
    code = ("import torch; v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None; "
            "print(v or '')")
    out = proc.run([sys.executable, "-c", code], timeout=120, capture=100_000)
    value = out.output.strip().splitlines()[-1:] if out.returncode == 0 else []
    return value[0] if value and value[0] else None


def driver_version() -> str | None:
    out = _nvidia_smi("driver_version")
    return out[0] if out else None


def _fork_poisoned() -> bool:
    """Would a child forked now be in torch's "bad fork" state? (Asking the CUDA runtime anything,
    device_count() included, registers a fork handler that marks children so.) One tiny fork tells."""
    import torch

    in_bad_fork = getattr(torch._C, "_cuda_isInBadFork", None)  # private: feature-detected
    if not callable(in_bad_fork):
        return False
    res = proc.fork(lambda send: 3 if in_bad_fork() else 0, timeout=60)
    return res.returncode == 3


def autograd_threads_started() -> bool:
    """Whether torch's autograd engine started its device threads in this process. From then on a
    child forked from it cannot run a backward ("Unable to handle autograd's threading in
    combination with fork-based multiprocessing"). The engine starts them at the first backward that
    finds a non-CPU device: any backward where a GPU is visible, and - on a CUDA build of torch
    without one - a backward through a graph dynamo compiled. A child that would run a backward is
    started from a fresh interpreter instead (a training check, a minify worker's isolated query, the
    fuzzer's candidates).

    Read from the operating system: the engine names each of those threads ``pt_autograd_<device>``
    (torch's ``engine.cpp``); where threads cannot be listed (no ``/proc``), False."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return False
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().startswith("pt_autograd_"):
                    return True
        except OSError:   # a thread that just ended
            continue
    return False


def fork_hooks(name: str) -> dict:
    """bot.proc.fork's hooks for a child of a process that imported torch: refuse to fork once CUDA
    was initialized here (the child could not use it), and let the child forget the compile pools,
    multiprocessing locks and thread pool it inherited. ``name``: what the refusal calls the children."""
    from bot.forkserver import forget_inherited_state
    from bot.torch_adapter.prewarm import forget_compile_pools

    def child_setup() -> None:   # what a fork server's job forgets too (bot.forkserver.run_job), and the compile pools
        forget_inherited_state()
        forget_compile_pools()

    return {"guard": lambda: assert_fork_safe(name), "child_setup": child_setup}


@functools.lru_cache(maxsize=1)
def _gpu_visible() -> bool:
    """Whether this process sees a CUDA device (asked once: it does not change while it runs)."""
    return cuda_device_count() > 0


def cuda_initialized() -> bool:
    """True when this process has touched CUDA in a way that forked children cannot survive.

    Never where no GPU is visible: a CUDA build of torch on a machine without NVIDIA's driver has
    no NVML to ask, so ``torch.cuda.is_available()`` - which dynamo calls around every frame it
    compiles - falls back to the CUDA runtime's device count, and that registers torch's fork
    handler ("bad fork" in every child). With no device there is nothing a child could fail to
    use, and the check, localize and capture children run on the CPU as on a CPU build."""
    import torch

    if not torch.backends.cuda.is_built() or not _gpu_visible():
        return False
    try:
        if torch.cuda.is_initialized():
            return True
    except Exception:  # noqa: BLE001
        return False
    return _fork_poisoned()


def assert_fork_safe(what: str) -> None:
    """Raise when CUDA was initialized in this process before it forks ``what``."""
    from bot.errors import InfraError

    if cuda_initialized():
        raise InfraError(f"CUDA was initialized in the process that forks {what}; forked children could not use "
                         "the GPU (a bug in minify-bot: the parent must not touch CUDA)")
