"""Crash isolation without paying a fresh interpreter per check.

The sweep process imports torch once and warms it up (lazy imports, CPU ISA detection, the
first C++ compile) without starting thread pools or touching CUDA; then every check runs in a
child *forked* from it, in its own session and working directory, with its output
captured to a log. A child that segfaults, aborts, exits without a result, is OOM-killed or
runs past its timeout is classified (crash / oom / timeout) from the phase it last reported,
and the sweep goes on.

A forked child inherits its parent's state (thread pools, locks, allocator arenas) and can die of
it where the same check alone lives: torch's own thread pool asserts "Invalid thread pool!" in a
child forked at the wrong moment. So a death (a crash, or an abort) in a forked child is not the
check's result until the check dies again in a fresh interpreter (``python -m bot.check.one``);
the fresh run's row is the result, and both runs are in the check's log.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time

from bot import proc
from bot.records import CheckError, CheckRow, Spec
from bot.signature import ABORT_TYPE, death_of
from bot.torch_adapter.device import autograd_threads_started, fork_hooks

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

    def run(self, spec: Spec, settings, log_path: str) -> CheckRow:
        """Run one check in a forked child; always returns a row (never raises for the child's sake)."""
        from bot.check.judge import judge

        if settings.mode == "training" and autograd_threads_started():
            return run_fresh(spec, settings, log_path, why="this process ran a backward where torch's autograd "
                             "threads do not survive a fork")
        workdir = tempfile.mkdtemp(prefix="minify-check-")

        def child(send):
            def phase(p):
                send({"phase": p})
                print(f"[check] phase {p}", flush=True)

            return {"row": judge(spec, settings, phase=phase).to_json()}   # crosses the fork as JSON

        try:
            res = proc.fork(child, cwd=workdir, timeout=settings.timeout, log_path=log_path, log_mode="w",
                            memory_limit_mb=self.memory_limit_mb, tail_lines=30, **fork_hooks("its checks"))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        phases = [m["phase"] for m in res.messages if isinstance(m, dict) and "phase" in m]
        row = _interpret(res, phases[-1] if phases else None, settings.timeout)
        row.duration_s = round(res.seconds, 3)
        return confirmed(row, spec, settings, log_path, "the forked check", self.log)


def died(row: CheckRow) -> bool:
    """Whether the check's process died (a signal, an abort, an exit without a result), as opposed
    to a result it reported, a time limit or running out of memory."""
    return row.failure_class == "crash" or (row.error is not None and row.error.type == ABORT_TYPE)


def run_fresh(spec: Spec, settings, log_path: str, why: str = "", server: proc.ForkServer | None = None) -> CheckRow:
    """Run one check in a fresh interpreter (``python -m bot.check.one``; a fork of ``server``, a
    fresh interpreter that imported torch, when given), its output appended to ``log_path`` after a
    line that says ``why``: its row, or the death it died, classified as a forked child's is. A fork
    of ``server`` is a forked child too: when it dies, the check runs again in a fresh interpreter,
    whose row is the result."""
    row = _run_fresh(spec, settings, log_path, why, server)
    return confirmed(row, spec, settings, log_path, "the check forked from the fork server") if server else row


def confirmed(row: CheckRow, spec: Spec, settings, log_path: str, what: str, log=lambda msg: None) -> CheckRow:
    """A forked child's row (``what`` ran it), or, when it died, the row of the same check run again in
    a fresh interpreter (the one rule for every forked check; both durations count)."""
    if not died(row):
        return row
    log(f"{what} died ({row.error.type}); checking again in a fresh interpreter")
    again = _run_fresh(spec, settings, log_path, f"{what} died ({row.error.type} during {row.phase or 'start'})", None)
    again.duration_s = round((row.duration_s or 0.0) + (again.duration_s or 0.0), 3)
    return again


def _run_fresh(spec: Spec, settings, log_path: str, why: str, server: proc.ForkServer | None) -> CheckRow:
    from bot.check.one import CheckRequest, launch

    workdir = tempfile.mkdtemp(prefix="minify-check-")
    where = "forked from the fork server" if server is not None else "in a fresh interpreter"
    try:
        env = proc.bot_env()
        row, res = launch(CheckRequest(spec, settings), cwd=workdir, log_path=log_path, timeout=settings.timeout,
                          env=env, announce=(f"{why}: " if why else "") + f"the same check {where}",
                          server=server, tail_lines=30, capture=1 << 20)
        if res.returncode != 0:   # a row from a process that then died is not the check's result
            row = None
        if row is None:
            phases = re.findall(r"\[check\] phase (\w+)", res.output)
            row = _interpret(res, phases[-1] if phases else None, settings.timeout)
        row.duration_s = round(res.seconds, 3)
        return row
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _interpret(res: proc.Result, last_phase: str | None, timeout: float) -> CheckRow:
    tail = res.tail.rstrip("\n")

    def died(status: str, failure_class: str, etype: str, message: str, signal: str | None = None) -> CheckRow:
        return CheckRow(status=status, failure_class=failure_class, phase=last_phase,
                        error=CheckError(type=etype, message=message, traceback=tail, frames=[], signal=signal))

    where = last_phase or "start"
    if res.timed_out:
        return died("timeout", "timeout", "Timeout", f"check did not finish within {timeout:g} s (last phase: {where})")
    if res.returncode == 0 and isinstance(res.value, dict) and isinstance(res.value.get("row"), dict):
        return CheckRow.from_json(res.value["row"])
    if res.signal is not None:
        death = death_of(res.signal, tail, compiled=last_phase in ("compile", "compare"))
        if death.kind == "oom":
            return died(OOM_PHASE_STATUS.get(last_phase, "OOM"), "oom", "Killed",
                        f"process killed by {death.signal} (out of memory?) during {where}")
        if death.kind == "abort":
            # Compiled code threw a C++ exception. Inside an OpenMP parallel region it cannot
            # propagate, so the runtime calls std::terminate: by nature a runtime error of the
            # generated code, which happened to take the process down.
            return died("fail_to_run", "runtime_error", ABORT_TYPE, death.describe(), death.signal)
        return died(PHASE_STATUS.get(last_phase, "fail_to_run"), "crash", death.signal,
                    f"process died with {death.signal} during {where}", death.signal)
    if res.oom:
        return died(OOM_PHASE_STATUS.get(last_phase, "OOM"), "oom", "MemoryError", f"out of memory during {where}")
    return died(PHASE_STATUS.get(last_phase, "fail_to_run"), "crash", "ProcessExit",
                f"process exited with code {res.returncode} without a result during {where}")
