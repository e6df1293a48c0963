"""Version facts for failure.json: torch (+git hash), CUDA, cuDNN, triton, GPUs, driver, Python,
OS and the C++ compiler inductor uses. Every probe is best-effort: a missing piece is None."""

from __future__ import annotations

import platform
import shutil


def _run(cmd: list[str]) -> str | None:
    from bot import proc

    p = proc.run(cmd, timeout=20, capture=100_000)
    out = p.output.strip()
    return out if p.returncode == 0 and out else None


def cxx_compiler() -> str | None:
    name = None
    try:
        from torch._inductor import cpp_builder

        if hasattr(cpp_builder, "get_cpp_compiler"):
            name = cpp_builder.get_cpp_compiler()
    except Exception:  # noqa: BLE001
        name = None
    name = name or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not name:
        return None
    out = _run([name, "--version"])
    return out.splitlines()[0] if out else None


def collect() -> dict:
    info: dict = {"torch": None, "torch_git": None, "cuda": None, "cudnn": None, "triton": None, "gpus": [],
                  "driver": None, "python": platform.python_version(), "os": platform.platform(terse=False),
                  "cxx": cxx_compiler()}
    try:
        import torch
    except ImportError:
        return info
    info["torch"] = torch.__version__
    info["torch_git"] = getattr(torch.version, "git_version", None)
    info["cuda"] = getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None)
    if info["cuda"]:
        from bot.torch_adapter.device import cudnn_version

        info["cudnn"] = cudnn_version()
    try:
        import triton  # noqa: F401

        info["triton"] = getattr(triton, "__version__", None)
    except Exception:  # noqa: BLE001
        pass
    # nvidia-smi, not the CUDA runtime: minify forks its stages from this process afterwards
    from bot.torch_adapter.device import driver_version, gpu_names

    if info["cuda"]:
        info["gpus"] = gpu_names()
    info["driver"] = driver_version()
    return info
