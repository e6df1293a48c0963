"""Localize: rerun a failing check with eager, aot_eager, aot_eager_decomp_partition (in that
order, stopping at the first that fails) to find the first failing stage."""

from __future__ import annotations

import os
import time

from bot.minify import procs

STAGES = [("eager", "dynamo"), ("aot_eager", "aot_eager"),
          ("aot_eager_decomp_partition", "aot_eager_decomp_partition"), ("inductor", "inductor")]


def stage_backends(backend: str) -> list[str]:
    """The debug backends to try before ``backend``."""
    names = [b for b, _ in STAGES]
    if backend in names:
        return names[:names.index(backend)]
    return names[:3]  # a custom backend: still ask whether dynamo / aot_autograd alone fail


def run_check_forked(spec: dict, settings: dict, log_path: str, workdir: str, name: str) -> dict:
    """Run one check in a child forked from this warmed process (bot.check.isolate.ForkRunner);
    its output is appended to ``log_path``. Always returns a row (deaths are classified)."""
    from bot.check.isolate import ForkRunner
    from bot.check.settings import Settings

    procs.warm_parent()
    os.makedirs(workdir, exist_ok=True)
    own_log = os.path.join(workdir, f"{name}.log")
    t0 = time.time()
    row = ForkRunner(warm=False).run(spec, Settings.from_dict(settings), own_log)
    with open(log_path, "a", encoding="utf-8", errors="replace") as log, \
            open(own_log, encoding="utf-8", errors="replace") as fh:
        log.write(f"$ (forked check) {name}\n")
        log.write(fh.read())
        log.write(f"[{row.get('status')}, {time.time() - t0:.1f} s]\n")
    return row


def localize(row: dict, settings: dict, workdir: str, log_path: str, timeout: float, on_event=None) -> dict:
    """Returns {"stage", "ablation": [{"backend", "status"}], "first_failing": backend|None}.

    Each stage is a check forked from this (warmed) process: no interpreter start per stage."""
    backends = stage_backends(row.get("backend") or settings.get("backend", "inductor"))
    rows = []
    for backend in backends:
        r = run_check_forked(row["spec"], dict(settings, backend=backend, timeout=timeout), log_path, workdir,
                             f"localize-{backend}")
        rows.append({"backend": backend, "status": r.get("status"), "failure_class": r.get("failure_class")})
        if on_event:
            on_event({"event": "stage", "backend": backend, "status": r.get("status")})
        if r.get("failure_class"):
            break
    ablation = [{"backend": r["backend"], "status": r["status"]} for r in rows]
    first = next((r["backend"] for r in rows if r.get("failure_class")), None)
    ablation.append({"backend": row.get("backend"), "status": row.get("status")})
    stage = dict(STAGES).get(first, "inductor") if first else (
        "inductor" if row.get("backend") == "inductor" else dict(STAGES).get(row.get("backend"), row.get("backend")))
    return {"stage": stage, "ablation": ablation, "first_failing": first or row.get("backend")}
