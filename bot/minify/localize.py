"""Localize: rerun a failing check with eager, aot_eager, aot_eager_decomp_partition (in that
order, stopping at the first that fails) to find the first failing stage."""

from __future__ import annotations

import json
import os

from bot.minify import procs

STAGES = [("eager", "dynamo"), ("aot_eager", "aot_eager"),
          ("aot_eager_decomp_partition", "aot_eager_decomp_partition"), ("inductor", "inductor")]


def stage_backends(backend: str) -> list[str]:
    """The debug backends to try before ``backend``."""
    names = [b for b, _ in STAGES]
    if backend in names:
        return names[:names.index(backend)]
    return names[:3]  # a custom backend: still ask whether dynamo / aot_autograd alone fail


def localize(row: dict, settings: dict, workdir: str, log_path: str, timeout: float, on_event=None) -> dict:
    """Returns {"stage", "ablation": [{"backend", "status"}], "first_failing": backend|None}."""
    backends = stage_backends(row.get("backend") or settings.get("backend", "inductor"))
    os.makedirs(workdir, exist_ok=True)
    out = os.path.join(workdir, "localize.json")
    job = os.path.join(workdir, "localize_job.json")
    with open(job, "w") as fh:
        json.dump({"spec": row["spec"], "settings": settings, "backends": backends, "out": out}, fh)
    res = procs.run_logged([procs.python(), "-m", "bot.minify.worker", "localize", job], cwd=workdir,
                           log_path=log_path, timeout=timeout, env=procs.child_env(), on_event=on_event)
    rows = []
    if os.path.exists(out):
        with open(out) as fh:
            rows = json.load(fh)
    ablation = [{"backend": r["backend"], "status": r["status"]} for r in rows]
    first = next((r["backend"] for r in rows if r.get("failure_class")), None)
    if len(rows) < len(backends) and first is None:
        # the worker died during a stage: that stage crashed
        dead = backends[len(rows)]
        ablation.append({"backend": dead, "status": "crash" if not res.timed_out else "timeout"})
        first = dead
    ablation.append({"backend": row.get("backend"), "status": row.get("status")})
    stage = dict(STAGES).get(first, "inductor") if first else (
        "inductor" if row.get("backend") == "inductor" else dict(STAGES).get(row.get("backend"), row.get("backend")))
    return {"stage": stage, "ablation": ablation, "first_failing": first or row.get("backend")}
