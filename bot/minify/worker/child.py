"""How the minify stage's children start, on both sides: the environment a child gets (:func:`child_env`:
the capture settings dropped, this checkout first on its path), the logged fresh-process run
(:func:`run_logged`) and the interpreter (:func:`python`). The worker starts children too (an
isolated query, the plain repro's writer), and the worker package imports nothing of the parent
side, so the one definition is here; the parent's :mod:`bot.minify.procs` builds on it."""

from __future__ import annotations

import os
import sys
from typing import Callable

from bot import proc

DROP_ENV = ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL", "TORCH_COMPILE_DEBUG_DIR",
            "MINIFY_BOT_CAPTURE_DIR", "MINIFY_BOT_CAPTURE_BACKEND")


def child_env(extra: dict | None = None, keep_hooks: bool = False) -> dict:
    env = proc.bot_env({k: v for k, v in os.environ.items() if k not in DROP_ENV})
    if not keep_hooks:
        env.pop("MINIFY_BOT_WORKER_CRASH_AFTER", None)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env


# the result of a minify child process (one record for every child: bot.proc.Result)
Outcome = proc.Result


def _shown(cmd: list[str]) -> str:
    return " ".join(os.path.basename(c) if os.path.isabs(c) else c for c in cmd)


def run_logged(cmd: list[str], *, cwd: str, log_path: str, timeout: float, env: dict | None = None,
               on_event: Callable[[dict], None] | None = None) -> Outcome:
    """Run ``cmd`` in a fresh process; stdout+stderr appended to ``log_path``; lines ``@@ {json}`` are events."""
    os.makedirs(cwd, exist_ok=True)
    out = proc.run(cmd, cwd=cwd, env=env if env is not None else child_env(), timeout=max(1.0, timeout),
                   log_path=log_path, announce=f"$ {_shown(cmd)}", events=True, on_event=on_event)
    if out.error:  # cannot start: as if it exited at once
        out.returncode, out.tail = 127, out.error
    return out


def python() -> str:
    return sys.executable
