"""Reuse a known bug's repro instead of minifying again (see bot/known.py): one fresh-process run of
the open issue's verified repro; when it still fails the same way, its record stands in."""

from __future__ import annotations

import dataclasses
import os
import time

from bot import rundir
from bot import signature as sg
from bot.failure import FailureRecord
from bot.known import REUSE_TIMEOUT, REUSE_VERIFY_RUNS, KnownRepro
from bot.minify import verify as ver
from bot.records import ConfigDiff, KnownRecord, Reused, Verification


def reuse(rec: FailureRecord, entry: KnownRepro, fdir: str, log_path: str, say) -> bool:
    """Run the known repro once in a fresh process; when it fails the same way, fill ``rec`` from the
    entry and return True. Otherwise the repro is removed and minify goes on as usual."""
    sig = dataclasses.replace(entry.signature)   # this failure's own (it is marked verified below)
    path = os.path.join(fdir, rundir.REPRO)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(entry.repro)
    t = time.time()
    same = 0
    with open(log_path, "a") as log:
        log.write(f"known bug: issue #{entry.issue} has a verified repro; running it "
                  f"{REUSE_VERIFY_RUNS} time(s) in a fresh process instead of minifying\n")
        for i in range(REUSE_VERIFY_RUNS):
            rc, out = ver.run_repro(path, random_inputs=True, timeout=REUSE_TIMEOUT)
            ok = sig.fails_run(rc, out)
            same += ok
            log.write(f"known repro run {i + 1}/{REUSE_VERIFY_RUNS}: exit {rc}, "
                      f"{'fails the same way' if ok else 'does NOT fail the same way'}\n")
            if not ok:
                log.write(out[-3000:] + "\n")
    seconds = round(time.time() - t, 2)
    if same == 0:
        os.remove(path)
        say(f"known repro of #{entry.issue} no longer fails the same way ({seconds:.1f} s): minifying again")
        rec.repro.timings["known_verify"] = seconds
        return False
    _restore(rec, entry.record)
    sig.verified = True
    rec.signature = sig
    saved = round(entry.minify_seconds - seconds, 2) if entry.minify_seconds is not None else None
    r = rec.repro
    r.reason, r.path, r.queries, r.seconds = None, rundir.REPRO, 0, 0.0
    r.verification = Verification(REUSE_VERIFY_RUNS, same, True)
    r.reused = Reused(entry.issue, seconds, saved)
    r.timings["known_verify"] = seconds
    say(f"known bug #{entry.issue}: its repro still fails the same way ({same}/{REUSE_VERIFY_RUNS} fresh run, "
        f"{seconds:.1f} s); not minified again"
        + (f" (saved about {saved:.0f} s)" if saved is not None else ""))
    return True


def _restore(rec: FailureRecord, known: KnownRecord) -> None:
    """The known record's fields (known.json, written by a trusted report run) onto ``rec``."""
    rec.failure_class = known.failure_class or rec.failure_class
    rec.stage, rec.culprit, rec.config = known.stage, known.culprit, known.config or ConfigDiff()
    r = rec.repro
    r.status = known.status if known.status in sg.VERIFIED_STATUSES else "minimized"
    r.nodes_before, r.nodes_after, r.capture = known.nodes_before, known.nodes_after, known.capture
