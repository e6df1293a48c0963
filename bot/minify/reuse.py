"""Reuse a known bug's repro instead of minifying again (see bot/known.py): one fresh-process run of
the open issue's verified repro; when it still fails the same way, its record stands in."""

from __future__ import annotations

import os
import time

from bot import signature as sg
from bot.known import REUSE_TIMEOUT, REUSE_VERIFY_RUNS, KnownRepro
from bot.minify import verify as ver


def reuse(rec: dict, entry: KnownRepro, fdir: str, log_path: str, say) -> bool:
    """Run the known repro once in a fresh process; when it fails the same way, fill ``rec`` from the
    entry and return True. Otherwise the repro is removed and minify goes on as usual."""
    sig = sg.Signature.from_json(entry.signature)
    path = os.path.join(fdir, "repro.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(entry.repro)
    t = time.time()
    same = 0
    with open(log_path, "a") as log:
        log.write(f"known bug: issue #{entry.issue} has a verified repro; running it "
                  f"{REUSE_VERIFY_RUNS} time(s) in a fresh process instead of minifying\n")
        for i in range(REUSE_VERIFY_RUNS):
            rc, out = ver.run_repro(path, random_inputs=True, timeout=REUSE_TIMEOUT)
            ok = ver.fails_same_way(sig, rc, out)
            same += ok
            log.write(f"known repro run {i + 1}/{REUSE_VERIFY_RUNS}: exit {rc}, "
                      f"{'fails the same way' if ok else 'does NOT fail the same way'}\n")
            if not ok:
                log.write(out[-3000:] + "\n")
    seconds = round(time.time() - t, 2)
    if same == 0:
        os.remove(path)
        say(f"known repro of #{entry.issue} no longer fails the same way ({seconds:.1f} s): minifying again")
        rec["repro"]["timings"]["known_verify"] = seconds
        return False
    r = entry.record
    rec["class"] = r.get("class") or rec["class"]
    rec["stage"] = r.get("stage")
    rec["culprit"] = r.get("culprit")
    rec["config"] = r.get("config") or {"diff": [], "minimal": None}
    sig.verified = True
    rec["signature"] = sig.to_json()
    saved = round(entry.minify_seconds - seconds, 2) if entry.minify_seconds is not None else None
    rec["repro"].update(
        status=r.get("status") if r.get("status") in sg.VERIFIED_STATUSES else "minimized",
        reason=None, path="repro.py", nodes_before=r.get("nodes_before"), nodes_after=r.get("nodes_after"),
        queries=0, seconds=0.0, capture=r.get("capture"),
        verification={"runs": REUSE_VERIFY_RUNS, "failed_same_way": same, "random_inputs_reproduce": True},
        reused={"issue": entry.issue, "verify_seconds": seconds, "saved_seconds": saved})
    rec["repro"]["timings"]["known_verify"] = seconds
    say(f"known bug #{entry.issue}: its repro still fails the same way ({same}/{REUSE_VERIFY_RUNS} fresh run, "
        f"{seconds:.1f} s); not minified again"
        + (f" (saved about {saved:.0f} s)" if saved is not None else ""))
    return True
