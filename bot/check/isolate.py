"""Crash isolation without paying a fresh interpreter per check.

The sweep process imports torch once and warms it up (lazy imports, CPU ISA detection, the
first C++ compile) without starting thread pools or touching CUDA; then every check runs in a
child *forked* from it, in its own process group and working directory, with its output
captured to a log. A child that segfaults, aborts, exits without a result, is OOM-killed or
runs past its timeout is classified (crash / oom / timeout) from the phase it last reported,
and the sweep goes on.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback

from bot.signature import ABORT_OUTPUT, ABORT_TYPE

# phase the child last reported -> harness status word for a death in that phase
PHASE_STATUS = {
    None: "eager_fail_to_run",
    "load": "eager_fail_to_run",
    "fp64": "eager_1st_run_fail",
    "eager_1st": "eager_1st_run_fail",
    "eager_2nd": "eager_2nd_run_fail",
    "compile": "fail_to_run",
    "compare": "fail_to_run",
}
OOM_PHASE_STATUS = {"eager_1st": "eager_1st_run_OOM", "eager_2nd": "eager_2nd_run_OOM", "compile": "OOM",
                    "compare": "OOM"}


class ForkRunner:
    def __init__(self, device: str = "cpu", warm: bool = True, memory_limit_mb: int | None = None,
                 log=lambda msg: None):
        self.device = device
        self.memory_limit_mb = memory_limit_mb
        self.log = log
        self.warm_seconds = 0.0
        t = time.perf_counter()
        import torch  # noqa: F401  (imported once, shared by every forked check)

        if warm:
            from bot.torch_adapter.runtime import warm_up

            warm_up("cpu")
        self.warm_seconds = time.perf_counter() - t

    def run(self, spec: dict, settings, log_path: str) -> dict:
        """Run one check in a forked child; always returns a row (never raises for the child's sake)."""
        from bot.check.judge import judge
        from bot.torch_adapter.device import assert_fork_safe

        assert_fork_safe("its checks")
        workdir = tempfile.mkdtemp(prefix="minify-check-")
        row_path = os.path.join(workdir, "row.json")
        r_fd, w_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # --- child
            code = 70
            try:
                os.setpgid(0, 0)
                os.close(r_fd)
                fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.close(fd)
                os.chdir(workdir)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                if self.memory_limit_mb:
                    import resource

                    lim = self.memory_limit_mb * 1024 * 1024
                    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

                def phase(p):
                    os.write(w_fd, (p + "\n").encode())
                    print(f"[check] phase {p}", flush=True)

                from bot.torch_adapter.runtime import after_fork

                after_fork()
                row = judge(spec, settings, phase=phase)
                with open(row_path + ".tmp", "w", encoding="utf-8") as fh:
                    json.dump(row, fh, default=str)
                os.replace(row_path + ".tmp", row_path)
                code = 0
            except BaseException:
                try:
                    traceback.print_exc()
                    sys.stderr.flush()
                except BaseException:
                    pass
            finally:
                os._exit(code)
        # --- parent
        os.close(w_fd)
        deadline = t0 + settings.timeout
        phases: list[str] = []
        buf = b""
        status = None
        timed_out = False
        try:
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    timed_out = True
                    _kill_group(pid)
                    _, status = os.waitpid(pid, 0)
                    break
                ready, _, _ = select.select([r_fd], [], [], min(remaining, 0.5))
                if ready:
                    chunk = os.read(r_fd, 4096)
                    if chunk:
                        buf += chunk
                        *done, buf = buf.split(b"\n")
                        phases.extend(p.decode() for p in done if p)
                        continue
                    # EOF: the child closed its end (it exited); reap it
                    _, status = os.waitpid(pid, 0)
                    break
                wpid, st = os.waitpid(pid, os.WNOHANG)
                if wpid:
                    status = st
                    break
        finally:
            os.close(r_fd)
            _kill_group(pid)  # stragglers the child started (compilers, worker pools)
        elapsed = time.perf_counter() - t0
        last_phase = phases[-1] if phases else None
        try:
            row = _interpret(status, timed_out, last_phase, row_path, settings.timeout, log_path)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        row["duration_s"] = round(elapsed, 3)
        return row


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _log_tail(path: str, n: int = 30) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-n:])


def _interpret(status, timed_out, last_phase, row_path, timeout, log_path) -> dict:
    if timed_out:
        return {"status": "timeout", "failure_class": "timeout",
                "error": {"type": "Timeout", "message": f"check did not finish within {timeout:g} s "
                          f"(last phase: {last_phase or 'start'})", "traceback": _log_tail(log_path), "frames": []},
                "accuracy": None, "phase": last_phase}
    if status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and os.path.exists(row_path):
        with open(row_path, encoding="utf-8") as fh:
            return json.load(fh)
    tail = _log_tail(log_path)
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGKILL:  # not us: the kernel's OOM killer is the usual sender
            return {"status": OOM_PHASE_STATUS.get(last_phase, "OOM"), "failure_class": "oom",
                    "error": {"type": "Killed", "message": f"process killed by {name} (out of memory?) "
                              f"during {last_phase or 'start'}", "traceback": tail, "frames": []},
                    "accuracy": None, "phase": last_phase}
        thrown = ABORT_OUTPUT.search(tail)
        if thrown and sig == signal.SIGABRT and last_phase in ("compile", "compare"):
            # Compiled code threw a C++ exception. Inside an OpenMP parallel region it cannot
            # propagate, so the runtime calls std::terminate: by nature a runtime error of the
            # generated code, which happened to take the process down.
            return {"status": "fail_to_run", "failure_class": "runtime_error",
                    "error": {"type": ABORT_TYPE,
                              "message": f"compiled code threw a C++ exception ({thrown.group(0)}); "
                                         f"the process aborted with {name}",
                              "traceback": tail, "frames": [], "signal": name},
                    "accuracy": None, "phase": last_phase}
        return {"status": PHASE_STATUS.get(last_phase, "fail_to_run"), "failure_class": "crash",
                "error": {"type": name, "message": f"process died with {name} during {last_phase or 'start'}",
                          "traceback": tail, "frames": [], "signal": name},
                "accuracy": None, "phase": last_phase}
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    if "MemoryError" in tail or "out of memory" in tail.lower():
        return {"status": OOM_PHASE_STATUS.get(last_phase, "OOM"), "failure_class": "oom",
                "error": {"type": "MemoryError", "message": f"out of memory during {last_phase or 'start'}",
                          "traceback": tail, "frames": []}, "accuracy": None, "phase": last_phase}
    return {"status": PHASE_STATUS.get(last_phase, "fail_to_run"), "failure_class": "crash",
            "error": {"type": "ProcessExit", "message": f"process exited with code {code} without a result "
                      f"during {last_phase or 'start'}", "traceback": tail, "frames": []},
            "accuracy": None, "phase": last_phase}
