"""Reduce: minify a captured graph within a time budget.

The fast path is one worker process that runs torch's fx minifier in-process with a pinned
predicate (clone inputs per query; ~0.2-1 s per query). If that worker crashes or hangs (a
runtime error that kills the process, a GPU fault), minification resumes from the worker's latest
checkpoint with one fresh process per query. On timeout the smallest checkpoint is kept and the
result is marked partial.
"""

from __future__ import annotations

import glob
import os
import time

from bot import rundir
from bot.minify import procs
from bot.minify.records import EXIT_POISONED, Event, Loaded, MinifyJob, Query, WorkerResult, parse_event
from bot.minify.worker import child
from bot.signature import Signature

GRACE_S = 30.0


def latest_checkpoint(workdir: str) -> str | None:
    files = glob.glob(os.path.join(workdir, "checkpoints", "*.py"))
    files = [f for f in files if os.path.basename(f)[:-3].isdigit()]
    return min(files, key=lambda f: int(os.path.basename(f)[:-3])) if files else None


def _typed(on_event):
    """The worker's ``@@`` events as typed records for ``on_event``."""
    def handle(doc: dict) -> None:
        event = parse_event(doc)
        if event is not None and on_event is not None:
            on_event(event)
    return handle


def _events(out: procs.Outcome) -> list[Event]:
    return [e for e in map(parse_event, out.events) if e is not None]


def _run_worker(job: MinifyJob, workdir: str, log_path: str, on_event, interpreters=None) -> procs.Outcome:
    path = os.path.join(workdir, "job.json" if not job.isolate else "job_isolated.json")
    job.write(path)
    timeout = max(10.0, job.deadline - time.time()) + GRACE_S
    on_event = _typed(on_event)
    if interpreters is not None:
        # forked from the command's fork server, which imported and warmed torch while this
        # process did other work: as `python -m bot.minify.worker minify job.json` would run
        out = interpreters.run_module("bot.minify.worker", ["minify", path], cwd=workdir, log_path=log_path,
                                      timeout=timeout, env=child.child_env(keep_hooks=True), on_event=on_event)
        if out is not None:
            return out
    # no server (or it is gone): forked from this process, warmed first
    from bot.minify.worker import main as worker

    procs.warm_parent()
    return procs.fork_logged(lambda: worker.cmd_minify(path), name=f"minify worker {os.path.basename(path)}",
                             cwd=workdir, log_path=log_path, timeout=timeout, on_event=on_event)


def reduce(job: MinifyJob, log_path: str, on_event=None, interpreters=None) -> WorkerResult:
    """Run the worker on ``job`` (its deadline starts now). The worker runs in a fork of
    ``interpreters`` (:class:`bot.minify.procs.Interpreters`) when given, else in a fork of this
    process; ``on_event`` gets its typed events. Returns the worker's result with ``final`` (the
    repro file to package), ``isolated`` and ``note`` set."""
    workdir = job.workdir
    os.makedirs(workdir, exist_ok=True)
    t0 = time.time()
    job = job.replace(deadline=t0 + job.budget)
    result_path = os.path.join(workdir, "result.json")
    out = _run_worker(job, workdir, log_path, on_event, interpreters)
    note = None
    if not os.path.exists(result_path) and not out.timed_out and time.time() < job.deadline and not job.isolate:
        # the in-process worker died: resume with per-query isolation
        ck = latest_checkpoint(workdir)
        resumed_from = "from the " + os.path.basename(ck)[:-3] + "-node checkpoint " if ck else ""
        why = ("left after a run made the device unusable in its process" if out.returncode == EXIT_POISONED
               else f"died (exit {out.returncode})")
        note = f"the in-process minify worker {why}; resumed {resumed_from}with one process per query"
        job = job.replace(repro=ck or job.repro, isolate=True, nodes_before=job.nodes_before or _nodes_before(out))
        out = _run_worker(job, workdir, log_path, on_event, interpreters)
    if os.path.exists(result_path):
        result = WorkerResult.read(result_path)
    else:
        result = _without_result(out, job)
    if result.status in ("minimized", "partial") and result.final is None:
        result.final = os.path.join(workdir, "final", rundir.REPRO)
    if result.signature is None and os.path.exists(os.path.join(workdir, "signature.json")):
        result.signature = Signature.from_json(_read_json(os.path.join(workdir, "signature.json")))
    result.isolated, result.note, result.seconds = job.isolate, note, round(time.time() - t0, 2)
    return result


def _without_result(out: procs.Outcome, job: MinifyJob) -> WorkerResult:
    """The worker wrote no result (it died or ran out of time): the smallest checkpoint, if any."""
    events = _events(out)
    queries = sum(isinstance(e, Query) for e in events)
    ck = latest_checkpoint(job.workdir)
    if ck is None:
        return WorkerResult(status="none", reason=_why(out, job), queries=queries)
    return WorkerResult(status="partial", reason=f"{_why(out, job)}; kept the smallest checkpoint",
                        nodes_before=job.nodes_before or _nodes_before(out),
                        nodes_after=int(os.path.basename(ck)[:-3]),
                        queries=queries, final=ck)


def _read_json(path: str):
    import json

    with open(path) as fh:
        return json.load(fh)


def _why(out: procs.Outcome, job: MinifyJob) -> str:
    if out.timed_out or time.time() >= job.deadline:
        return f"time budget of {job.budget} s ran out"
    last_line = out.tail.strip().splitlines()[-1] if out.tail.strip() else ""
    return f"the minify worker failed (exit {out.returncode}): {last_line}"


def _nodes_before(out: procs.Outcome) -> int | None:
    """The graph's size as the worker loaded it (its first ``loaded`` event)."""
    return next((e.nodes for e in _events(out) if isinstance(e, Loaded)), None)
