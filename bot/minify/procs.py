"""Child processes: every one gets a timeout, its own working directory and a log file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

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


@dataclass
class Outcome:
    returncode: int | None          # None: killed at the timeout
    seconds: float
    events: list = field(default_factory=list)
    timed_out: bool = False
    tail: str = ""


def run_logged(cmd: list[str], *, cwd: str, log_path: str, timeout: float, env: dict | None = None,
               on_event: Callable[[dict], None] | None = None) -> Outcome:
    """Run ``cmd``; stdout+stderr appended to ``log_path``; lines ``@@ {json}`` are events."""
    os.makedirs(cwd, exist_ok=True)
    t0 = time.time()
    events: list = []
    tail: list[str] = []
    with open(log_path, "a", encoding="utf-8", errors="replace") as log:
        log.write(f"$ {' '.join(os.path.basename(c) if os.path.isabs(c) else c for c in cmd)}\n")
        log.flush()
        p = subprocess.Popen(cmd, cwd=cwd, env=env if env is not None else child_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)

        def pump():
            for line in p.stdout:
                if line.startswith("@@ "):
                    try:
                        ev = json.loads(line[3:])
                    except ValueError:
                        ev = None
                    if ev is not None:
                        events.append(ev)
                        if on_event:
                            try:
                                on_event(ev)
                            except Exception:  # noqa: BLE001 - progress must not kill the run
                                pass
                        if ev.get("event") == "query":
                            continue
                log.write(line)
                tail.append(line)
                del tail[:-40]

        th = threading.Thread(target=pump, daemon=True)
        th.start()
        timed_out = False
        try:
            p.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(p)
        th.join(timeout=10)
        log.write(f"[exit {p.returncode}{' (killed at the time limit)' if timed_out else ''}, "
                  f"{time.time() - t0:.1f} s]\n")
    return Outcome(None if timed_out else p.returncode, time.time() - t0, events, timed_out, "".join(tail))


def _kill(p: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(p.pid, signal.SIGKILL)  # the child and its compile workers, nobody else
    except (ProcessLookupError, PermissionError):
        p.kill()
    p.wait()


def python() -> str:
    return sys.executable
