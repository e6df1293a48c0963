"""Verify: run the final repro in N fresh processes and count how many fail the same way; run it
once more with random inputs (``run --no-save-dir``) to learn whether the saved inputs matter."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time

from bot import proc
from bot.minify import procs
from bot.signature import Signature, stderr_matches


def _repro_env() -> dict:
    env = procs.child_env()
    env.pop("PYTHONPATH", None)  # a repro needs torch only
    return env


# what a packaged repro imports first (torch's repro format): a prestarted interpreter imports
# these before it gets the repro, which would import them itself anyway
REPRO_IMPORTS = ("torch", "torch.fx", "torch._dynamo", "torch._dynamo.testing", "torch._inductor.config",
                 "torch._inductor.inductor_prims", "torch._inductor.compile_fx", "torch._dynamo.repro.after_aot")


class Interpreters:
    """Fresh interpreters for verification runs, started ahead (while reduction runs) so that each
    has imported torch (:data:`REPRO_IMPORTS`) by the time the repro is ready. Each runs one repro and nothing
    else; a run that finds none left starts a cold one. Close it to stop the ones never used."""

    def __init__(self, n: int):
        self._free = []
        for _ in range(max(0, n)):
            cwd = tempfile.mkdtemp(prefix="minify-verify-")
            self._free.append(proc.prestart(preload=REPRO_IMPORTS, cwd=cwd, env=_repro_env()))
        self._lock = threading.Lock()

    def take(self) -> proc.Prestarted | None:
        with self._lock:
            return self._free.pop(0) if self._free else None

    def close(self) -> None:
        with self._lock:
            left, self._free = self._free, []
        for p in left:
            p.close()
            shutil.rmtree(p.cwd, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def run_repro(path: str, *, random_inputs: bool = False, timeout: float = 600,
              interpreters: Interpreters | None = None) -> tuple[int | None, str]:
    """One run of the repro in a fresh interpreter: (exit code, -signal, or None at the timeout; output)."""
    args = ["run", "--no-save-dir"] if random_inputs else []
    pre = interpreters.take() if interpreters is not None else None
    res = None
    if pre is not None:
        try:
            res = pre.run(os.path.abspath(path), args, timeout=timeout, capture=_CAPTURE)
        finally:
            shutil.rmtree(pre.cwd, ignore_errors=True)
        if res.error:  # it could not start or died before the repro: a cold one instead
            res = None
    if res is None:
        with tempfile.TemporaryDirectory(prefix="minify-verify-") as cwd:
            res = proc.run([procs.python(), os.path.abspath(path), *args], cwd=cwd, env=_repro_env(),
                           timeout=timeout, capture=_CAPTURE)
    if res.timed_out:
        return None, "timeout"
    if res.error:
        return None, res.error
    return res.returncode, res.output


_CAPTURE = 1_000_000


def fails_same_way(sig: Signature, rc: int | None, output: str) -> bool:
    if rc is None:
        return False
    if sig.failure_class == "crash":
        return rc < 0
    return rc != 0 and stderr_matches(sig, output)


def verify(path: str, sig: Signature, runs: int = 3, timeout: float = 600, log=None, jobs: int | None = None,
           random_known: bool | None = None, interpreters: Interpreters | None = None) -> dict:
    """``runs`` fresh-process runs with the saved inputs, ``jobs`` at a time (default: 2, or 1 on a
    one-core machine). Each run is its own interpreter: that is the point. Plus one run with random
    inputs, unless ``random_known`` already says whether random inputs reproduce. ``interpreters``:
    fresh interpreters started earlier (see :class:`Interpreters`), used first."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.time()
    jobs = jobs or max(1, min(2, os.cpu_count() or 1))
    plan = [False] * runs + ([True] if random_known is None else [])
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outs = list(pool.map(lambda rnd: run_repro(path, random_inputs=rnd, timeout=timeout,
                                                interpreters=interpreters), plan))
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
