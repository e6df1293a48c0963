"""Child processes: every one gets a timeout, its own working directory and a log file."""

from __future__ import annotations

import os
import sys
from typing import Callable

from bot import proc

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DROP_ENV = ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL", "TORCH_COMPILE_DEBUG_DIR",
            "MINIFY_BOT_CAPTURE_DIR", "MINIFY_BOT_CAPTURE_BACKEND")


def child_env(extra: dict | None = None, keep_hooks: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in DROP_ENV}
    if not keep_hooks:
        env.pop("MINIFY_BOT_WORKER_CRASH_AFTER", None)
    env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
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


def fork_logged(fn: Callable[[], int], *, name: str, cwd: str, log_path: str, timeout: float,
                on_event: Callable[[dict], None] | None = None) -> Outcome:
    """Like :func:`run_logged`, but ``fn()`` runs in a child *forked* from this process (which has
    imported and warmed torch once), in its own session and working directory. The exit
    code is ``fn``'s return value, 70 for an exception, ``-signal`` when the child was killed.

    Only fork from a process that has not started OpenMP or compile-worker pools (see
    :func:`bot.torch_adapter.runtime.warm_up`); the child forgets inherited pools."""
    from bot.torch_adapter.device import fork_hooks

    return proc.fork(lambda send: int(fn() or 0), cwd=cwd, timeout=max(1.0, timeout), log_path=log_path,
                     announce=f"$ (forked) {name}", events=True, on_event=on_event, **fork_hooks(name))


_WARM = {"done": False}


def warm_parent() -> None:
    """Import and warm torch once in this process, so children forked from it start fast."""
    if not _WARM["done"]:
        from bot.torch_adapter.runtime import warm_up

        warm_up("cpu")
        _WARM["done"] = True


def python() -> str:
    return sys.executable
