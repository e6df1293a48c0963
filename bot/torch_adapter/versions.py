"""Version facts for failure.json: torch (+git hash), CUDA, cuDNN, triton, GPUs, driver, Python,
OS and the C++ compiler inductor uses. Every probe is best-effort: a missing piece is None."""

from __future__ import annotations

import os
import platform
import shutil


def _run(cmd: list[str]) -> str | None:
    from bot import proc

    p = proc.run(cmd, timeout=20, capture=100_000)
    out = p.output.strip()
    return out if p.returncode == 0 and out else None


def cxx_version(name: str | None) -> str | None:
    """The first line of ``--version`` of the C++ compiler ``name`` (inductor's choice, see
    :func:`bot.torch_adapter.facts.cxx_compiler_name`), or of the first one on PATH."""
    name = name or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not name:
        return None
    out = _run([name, "--version"])
    return out.splitlines()[0] if out else None


def torch_build() -> dict:
    """torch's version, git hash and CUDA version, without importing torch when this process has
    not (a command or harness check never compiles here): read from torch's own ``version.py``."""
    import sys

    keys = {"torch": "__version__", "torch_git": "git_version", "cuda": "cuda"}
    mod = sys.modules.get("torch.version")
    if mod is None:
        import ast
        import importlib.util

        try:
            spec = importlib.util.find_spec("torch")
            loc = list(spec.submodule_search_locations or []) if spec else []
            with open(os.path.join(loc[0], "version.py"), encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
        except (ImportError, OSError, IndexError, SyntaxError, ValueError):
            return dict.fromkeys(keys)
        found = {}
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and node.value is not None:
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    pass
        return {k: found.get(v) for k, v in keys.items()}
    return {k: getattr(mod, v, None) for k, v in keys.items()}


def collect(facts: dict | None = None) -> dict:
    """``facts``: :func:`bot.torch_adapter.facts.gather` as another process found it (then torch
    is not imported here); without them, gathered here."""
    info: dict = {"torch": None, "torch_git": None, "cuda": None, "cudnn": None, "triton": None, "gpus": [],
                  "driver": None, "python": platform.python_version(), "os": platform.platform(terse=False),
                  "cxx": None}
    info.update(torch_build())
    if info["torch"] is None:  # no torch
        info["cxx"] = cxx_version(None)
        return info
    if facts is None:
        from bot.torch_adapter.facts import gather

        facts = gather()
    info["cxx"] = cxx_version(facts.get("cxx"))
    info["cuda"] = info["cuda"] or facts.get("hip")
    info["triton"] = facts.get("triton")
    if info["cuda"]:
        from bot.torch_adapter.device import cudnn_version

        info["cudnn"] = cudnn_version()
    # nvidia-smi, not the CUDA runtime: minify forks its stages from this process afterwards
    from bot.torch_adapter.device import driver_version, gpu_names

    if info["cuda"]:
        info["gpus"] = gpu_names()
    info["driver"] = driver_version()
    return info
