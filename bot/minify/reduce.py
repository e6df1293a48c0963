"""Reduce: minify a captured graph within a time budget.

The fast path is one worker process that runs torch's fx minifier in-process with a pinned
predicate (clone inputs per query; ~0.2-1 s per query). If that worker crashes or hangs (a
runtime error that kills the process, a GPU fault), minification resumes from the worker's latest
checkpoint with one fresh process per query. On timeout the smallest checkpoint is kept and the
result is marked partial.
"""

from __future__ import annotations

import glob
import json
import os
import time

from bot.minify import procs

GRACE_S = 30.0


def latest_checkpoint(workdir: str) -> str | None:
    files = glob.glob(os.path.join(workdir, "checkpoints", "*.py"))
    files = [f for f in files if os.path.basename(f)[:-3].isdigit()]
    return min(files, key=lambda f: int(os.path.basename(f)[:-3])) if files else None


def _run_worker(job: dict, workdir: str, log_path: str, on_event, interpreters=None) -> procs.Outcome:
    path = os.path.join(workdir, "job.json" if not job.get("isolate") else "job_isolated.json")
    with open(path, "w") as fh:
        json.dump(job, fh)
    timeout = max(10.0, job["deadline"] - time.time()) + GRACE_S
    if interpreters is not None:
        # forked from the command's fork server, which imported and warmed torch while this
        # process did other work: as `python -m bot.minify.worker minify job.json` would run
        out = interpreters.run_module("bot.minify.worker", ["minify", path], cwd=workdir, log_path=log_path,
                                      timeout=timeout, env=procs.child_env(keep_hooks=True), on_event=on_event)
        if out is not None:
            return out
    # no server (or it is gone): forked from this process, warmed first
    from bot.minify import worker

    procs.warm_parent()
    return procs.fork_logged(lambda: worker.cmd_minify(path), name=f"minify worker {os.path.basename(path)}",
                             cwd=workdir, log_path=log_path, timeout=timeout, on_event=on_event)


def reduce(job: dict, log_path: str, on_event=None, interpreters=None) -> dict:
    """``job``: repro, workdir, class, original_error, tolerance, strict_accuracy, offload_to_disk,
    isolate, budget, check_config, bisect, backend. The worker runs in a fork of ``interpreters``
    (:class:`bot.minify.procs.Interpreters`) when given, else in a fork of this process. Returns
    the worker's result dict plus ``final`` (the repro file to package) and ``isolated`` / ``note``."""
    workdir = job["workdir"]
    os.makedirs(workdir, exist_ok=True)
    t0 = time.time()
    job = dict(job, deadline=t0 + float(job.get("budget") or 600))
    result_path = os.path.join(workdir, "result.json")
    out = _run_worker(job, workdir, log_path, on_event, interpreters)
    note = None
    isolated = bool(job.get("isolate"))
    if not os.path.exists(result_path) and not out.timed_out and time.time() < job["deadline"] and not isolated:
        # the in-process worker died: resume with per-query isolation
        ck = latest_checkpoint(workdir)
        nodes_before = _nodes_from_events(out.events)
        resumed_from = "from the " + os.path.basename(ck)[:-3] + "-node checkpoint " if ck else ""
        note = (f"the in-process minify worker died (exit {out.returncode}); resumed "
                f"{resumed_from}with one process per query")
        job2 = dict(job, repro=ck or job["repro"], isolate=True, nodes_before=nodes_before)
        out = _run_worker(job2, workdir, log_path, on_event, interpreters)
        isolated = True
    result: dict
    if os.path.exists(result_path):
        with open(result_path) as fh:
            result = json.load(fh)
    else:
        ck = latest_checkpoint(workdir)
        if ck is None:
            return {"status": "none", "reason": _why(out, job), "seconds": round(time.time() - t0, 2),
                    "queries": _queries(out.events), "isolated": isolated, "note": note}
        result = {"status": "partial", "reason": f"{_why(out, job)}; kept the smallest checkpoint",
                  "nodes_before": _nodes_from_events(out.events), "nodes_after": int(os.path.basename(ck)[:-3]),
                  "queries": _queries(out.events), "seconds": round(time.time() - t0, 2), "final": ck,
                  "config_minimal": None, "config_diff": None, "bisect": None, "graph": None}
    if result.get("status") in ("minimized", "partial") and "final" not in result:
        result["final"] = os.path.join(workdir, "final", "repro.py")
    if "signature" not in result and os.path.exists(os.path.join(workdir, "signature.json")):
        with open(os.path.join(workdir, "signature.json")) as fh:
            result["signature"] = json.load(fh)
    result["isolated"] = isolated
    result["note"] = note
    result["seconds"] = round(time.time() - t0, 2)
    return result


def _why(out: procs.Outcome, job: dict) -> str:
    if out.timed_out or time.time() >= job["deadline"]:
        return f"time budget of {job.get('budget')} s ran out"
    last_line = out.tail.strip().splitlines()[-1] if out.tail.strip() else ""
    return f"the minify worker failed (exit {out.returncode}): {last_line}"


def _queries(events) -> int:
    return sum(1 for e in events if e.get("event") == "query")


def _nodes_from_events(events) -> int | None:
    for e in events:
        if e.get("event") == "loaded":
            return e.get("nodes")
    return None
