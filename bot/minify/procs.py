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


class _Lines:
    """Routes a child's output: ``@@ {json}`` lines are events, the rest goes to the log (and a tail)."""

    def __init__(self, log, on_event):
        self.log, self.on_event = log, on_event
        self.events: list = []
        self.tail: list[str] = []

    def feed(self, line: str) -> None:
        if line.startswith("@@ "):
            try:
                ev = json.loads(line[3:])
            except ValueError:
                ev = None
            if ev is not None:
                self.events.append(ev)
                if self.on_event:
                    try:
                        self.on_event(ev)
                    except Exception:  # noqa: BLE001 - progress must not kill the run
                        pass
                if ev.get("event") == "query":
                    return
        self.log.write(line)
        self.tail.append(line)
        del self.tail[:-40]


def run_logged(cmd: list[str], *, cwd: str, log_path: str, timeout: float, env: dict | None = None,
               on_event: Callable[[dict], None] | None = None) -> Outcome:
    """Run ``cmd``; stdout+stderr appended to ``log_path``; lines ``@@ {json}`` are events."""
    os.makedirs(cwd, exist_ok=True)
    t0 = time.time()
    with open(log_path, "a", encoding="utf-8", errors="replace") as log:
        log.write(f"$ {' '.join(os.path.basename(c) if os.path.isabs(c) else c for c in cmd)}\n")
        log.flush()
        sink = _Lines(log, on_event)
        p = subprocess.Popen(cmd, cwd=cwd, env=env if env is not None else child_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)

        def pump():
            for line in p.stdout:
                sink.feed(line)

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
    return Outcome(None if timed_out else p.returncode, time.time() - t0, sink.events, timed_out, "".join(sink.tail))


def fork_logged(fn: Callable[[], int], *, name: str, cwd: str, log_path: str, timeout: float,
                on_event: Callable[[dict], None] | None = None) -> Outcome:
    """Like :func:`run_logged`, but ``fn()`` runs in a child *forked* from this process (which has
    imported and warmed torch once), in its own process group and working directory. The exit
    code is ``fn``'s return value, 70 for an exception, ``-signal`` when the child was killed.

    Only fork from a process that has not started OpenMP or compile-worker pools (see
    :func:`bot.torch_adapter.runtime.warm_up`); the child forgets inherited pools."""
    import select
    import signal

    os.makedirs(cwd, exist_ok=True)
    t0 = time.time()
    with open(log_path, "a", encoding="utf-8", errors="replace") as log:
        log.write(f"$ (forked) {name}\n")
        log.flush()
        sink = _Lines(log, on_event)
        from bot.torch_adapter.device import assert_fork_safe

        assert_fork_safe(name)
        r_fd, w_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # --- child
            code = 70
            try:
                os.setpgid(0, 0)
                os.close(r_fd)
                os.dup2(w_fd, 1)
                os.dup2(w_fd, 2)
                os.close(w_fd)
                sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
                sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
                os.chdir(cwd)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                from bot.torch_adapter.runtime import after_fork

                after_fork()
                code = int(fn() or 0)
            except BaseException:  # noqa: BLE001
                try:
                    import traceback

                    traceback.print_exc()
                except BaseException:  # noqa: BLE001
                    pass
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        # --- parent
        os.close(w_fd)
        deadline = t0 + max(1.0, timeout)
        buf = b""
        timed_out = False
        status = None
        try:
            while True:
                remaining = deadline - time.time()
                if remaining <= 0:
                    timed_out = True
                    break
                ready, _, _ = select.select([r_fd], [], [], min(remaining, 0.5))
                if ready:
                    chunk = os.read(r_fd, 65536)
                    if not chunk:
                        break
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        sink.feed(line.decode("utf-8", "replace") + "\n")
                    continue
                wpid, st = os.waitpid(pid, os.WNOHANG)
                if wpid:
                    status = st
                    break
        finally:
            os.close(r_fd)
            try:
                os.killpg(pid, signal.SIGKILL)  # on timeout; else stragglers (compilers, pools)
            except (ProcessLookupError, PermissionError):
                pass
            if status is None:
                _, status = os.waitpid(pid, 0)
        if buf:
            sink.feed(buf.decode("utf-8", "replace") + "\n")
        rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        log.write(f"[exit {rc}{' (killed at the time limit)' if timed_out else ''}, {time.time() - t0:.1f} s]\n")
    return Outcome(None if timed_out else rc, time.time() - t0, sink.events, timed_out, "".join(sink.tail))


_WARM = {"done": False}


def warm_parent() -> None:
    """Import and warm torch once in this process, so children forked from it start fast."""
    if not _WARM["done"]:
        from bot.torch_adapter.runtime import warm_up

        warm_up("cpu")
        _WARM["done"] = True


def _kill(p: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(p.pid, signal.SIGKILL)  # the child and its compile workers, nobody else
    except (ProcessLookupError, PermissionError):
        p.kill()
    p.wait()


def python() -> str:
    return sys.executable
