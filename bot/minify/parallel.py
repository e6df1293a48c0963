"""Several failures minimized at once: one `minify-bot minify --only CHECK_ID` process per failure,
at most ``jobs`` at a time, each with the same options and a device of its own on a GPU runner.

A failure's minification is a process tree of its own already (program reruns, the fork server,
the worker, verification runs): running several trees side by side needs nothing shared but the
run directory, where each writes only ``failures/<its id>/``. The processes are started with
:func:`bot.proc.run` (exec, not fork: this process forks nothing while its threads wait), their
output goes to the terminal line by line, prefixed with the check's id, and to
``checks/<id>.minify.log`` (:func:`bot.rundir.minify_log`).

How many at once (``--jobs``; 0 or none: decided here): one per visible GPU when a failure ran on
CUDA (each process sees one device, ``CUDA_VISIBLE_DEVICES``; a graph captured on ``cuda:0`` runs
on that process's device), else one per :data:`CORES_PER_FAILURE` cores.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from bot import proc, rundir
from bot.records import CheckRow

CORES_PER_FAILURE = 4   # a worker's queries, its verification runs beside it, the program's reruns


def jobs_for(rows: list[CheckRow], asked: int | None) -> int:
    """How many failures to minimize at once."""
    if len(rows) < 2:
        return 1
    if asked:
        return max(1, min(asked, len(rows)))
    if any(str(r.device or "").startswith("cuda") for r in rows):
        return max(1, min(len(rows), len(_gpus())))
    return max(1, min(len(rows), (os.cpu_count() or 1) // CORES_PER_FAILURE))


def _gpus() -> list[str]:
    """The visible GPUs, as CUDA_VISIBLE_DEVICES entries (asked without initializing CUDA here)."""
    from bot.torch_adapter.device import cuda_device_count

    n = cuda_device_count()
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return (visible or [str(i) for i in range(n)])[:n]


def minify_all(argv_of, rows: list[CheckRow], run_dir: str, jobs: int, say) -> list[int]:
    """Run ``minify-bot minify`` with ``argv_of(row)`` for every row, ``jobs`` at a time; returns
    their exit codes in the rows' order (``None`` for one that could not start: 3)."""
    gpus = _gpus() if any(str(r.device or "").startswith("cuda") for r in rows) else []
    slots: queue.Queue[int] = queue.Queue()
    for k in range(jobs):
        slots.put(k)
    lock = threading.Lock()

    def one(row: CheckRow) -> int:
        slot = slots.get()
        try:
            env = dict(os.environ)
            if gpus:
                env["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
            log = rundir.minify_log(run_dir, str(row.id))
            log.parent.mkdir(parents=True, exist_ok=True)

            def line(text: str) -> None:
                with lock:
                    print(f"[{row.id}] {text.rstrip()}", file=sys.stderr, flush=True)

            where = f" on GPU {env['CUDA_VISIBLE_DEVICES']}" if gpus else ""
            say(f"{row.id}: minifying in a process of its own{where}")
            res = proc.run([sys.executable, "-m", "bot", *argv_of(row)], timeout=_TIMEOUT, env=env,
                           log_path=str(log), log_mode="w", on_line=line)
            return 3 if res.returncode is None else res.returncode
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="minify") as pool:
        return list(pool.map(one, rows))


_TIMEOUT = 24 * 3600.0   # each process keeps its own budgets and time limits; this only bounds a hang
