"""Verify: run the final repro in N fresh processes and count how many fail the same way; run it
once more with random inputs (``run --no-save-dir``) to learn whether the saved inputs matter."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from bot.minify import procs
from bot.signature import Signature, stderr_matches


def run_repro(path: str, *, random_inputs: bool = False, timeout: float = 600) -> tuple[int | None, str]:
    cmd = [procs.python(), os.path.abspath(path)]
    if random_inputs:
        cmd += ["run", "--no-save-dir"]
    env = procs.child_env()
    env.pop("PYTHONPATH", None)  # a repro needs torch only
    with tempfile.TemporaryDirectory(prefix="minify-verify-") as cwd:
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, errors="replace",
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "timeout"
    return p.returncode, p.stdout + p.stderr


def fails_same_way(sig: Signature, rc: int | None, output: str) -> bool:
    if rc is None:
        return False
    if sig.failure_class == "crash":
        return rc < 0
    return rc != 0 and stderr_matches(sig, output)


def verify(path: str, sig: Signature, runs: int = 3, timeout: float = 600, log=None, jobs: int | None = None,
           random_known: bool | None = None) -> dict:
    """``runs`` fresh-process runs with the saved inputs, ``jobs`` at a time (default: 2, or 1 on a
    one-core machine). Each run is its own interpreter: that is the point. Plus one run with random
    inputs, unless ``random_known`` already says whether random inputs reproduce."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.time()
    jobs = jobs or max(1, min(2, os.cpu_count() or 1))
    plan = [False] * runs + ([True] if random_known is None else [])
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outs = list(pool.map(lambda rnd: run_repro(path, random_inputs=rnd, timeout=timeout), plan))
    same = 0
    last_output = ""
    for i, (rc, out) in enumerate(outs[:runs]):
        ok = fails_same_way(sig, rc, out)
        same += ok
        last_output = out
        if log:
            log(f"verify run {i + 1}/{runs}: exit {rc}, {'fails the same way' if ok else 'does NOT fail the same way'}")
            if not ok:
                log(out[-3000:])
    if random_known is None:
        rc, out = outs[-1]
        rnd = fails_same_way(sig, rc, out)
        if log:
            log(f"verify with random inputs: exit {rc}, {'fails the same way' if rnd else 'does not reproduce'}")
    else:
        rnd = bool(random_known)
    return {"runs": runs, "failed_same_way": same, "random_inputs_reproduce": rnd,
            "seconds": round(time.time() - t0, 2), "last_output_tail": last_output[-2000:]}
