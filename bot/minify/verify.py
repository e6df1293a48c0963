"""Verify: run the final repro in N fresh processes (forks of one interpreter that only imported
and warmed torch: :class:`bot.minify.procs.Interpreters`) and count how many fail the same way;
run it once more with random inputs (``run --no-save-dir``) to learn whether the saved inputs
matter."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field

from bot import proc
from bot.minify import procs
from bot.minify.procs import Interpreters
from bot.records import PlainRepro, Verification
from bot.signature import Signature


def run_repro(path: str, *, random_inputs: bool = False, timeout: float = 600,
              interpreters: Interpreters | None = None, build=None) -> tuple[int | None, str]:
    """One run of the repro in a fresh process: (exit code, -signal, or None at the timeout; output).
    ``build``: a :class:`bot.builds.Prepared` whose Python (and environment) runs it instead of ours."""
    args = ["run", "--no-save-dir"] if random_inputs else []
    res = (interpreters.run_script(os.path.abspath(path), args, timeout=timeout)
           if interpreters is not None and build is None else None)   # a build runs its own torch
    if res is None:  # no server, or it is gone: a cold interpreter
        with tempfile.TemporaryDirectory(prefix="minify-verify-") as cwd:
            cmd = [os.path.abspath(path), *args]
            res = proc.run(build.command(cmd, cwd=cwd) if build else [procs.python(), *cmd], cwd=cwd,
                           env={**procs.repro_env(), **(build.env if build else {})},
                           timeout=timeout, capture=procs.REPRO_CAPTURE)
    if res.timed_out:
        return None, "timeout"
    if res.error:
        return None, res.error
    return res.returncode, res.output


@dataclass
class VerifyRuns:
    """What :func:`verify` saw: the failure record's :class:`bot.records.Verification` and more."""

    runs: int
    failed_same_way: int
    random_inputs_reproduce: bool
    seconds: float = 0.0
    exits: list = field(default_factory=list)   # each saved-input run's exit code (-signal, None: timeout)
    last_output_tail: str = ""
    package_seconds: float = 0.0                # set by the caller that packaged the repro first
    plain: PlainRepro | None = None             # repro_plain.py beside it, and its own runs (set by the caller)
    plain_seconds: float = 0.0

    @property
    def record(self) -> Verification:
        return Verification(self.runs, self.failed_same_way, self.random_inputs_reproduce)


def side_by_side(n: int) -> int:
    """How many of ``n`` verification runs go at once: all of them, but one at a time on a
    one-core machine. Each is one small compile and a run, forked from a warm server; they usually
    run beside the bisector, and a run that waits for a slot leaves a core idle (a compile error's
    runs each wait for the C++ compiler)."""
    return max(1, n if (os.cpu_count() or 1) > 1 else 1)


def verify(path: str, sig: Signature, runs: int = 3, timeout: float = 600, log=None, jobs: int | None = None,
           random_known: bool | None = None, interpreters: Interpreters | None = None, build=None) -> VerifyRuns:
    """``runs`` fresh-process runs with the saved inputs, ``jobs`` at a time (default:
    :func:`side_by_side`). Each run is its own process that ran nothing of the minifier: that is the
    point. Plus one run with random inputs, unless ``random_known`` already says whether random
    inputs reproduce. ``interpreters``: the fork server started earlier (see :class:`Interpreters`)."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.time()
    plan = [False] * runs + ([True] if random_known is None else [])
    jobs = jobs or side_by_side(len(plan))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outs = list(pool.map(lambda rnd: run_repro(path, random_inputs=rnd, timeout=timeout,
                                                interpreters=interpreters, build=build), plan))
    same = 0
    last_output = ""
    for i, (rc, out) in enumerate(outs[:runs]):
        ok = sig.fails_run(rc, out)
        same += ok
        last_output = out
        if log:
            log(f"verify run {i + 1}/{runs}: exit {rc}, {'fails the same way' if ok else 'does NOT fail the same way'}")
            if not ok:
                log(out[-3000:])
    if random_known is None:
        rc, out = outs[-1]
        rnd = sig.fails_run(rc, out)
        if log:
            log(f"verify with random inputs: exit {rc}, {'fails the same way' if rnd else 'does not reproduce'}")
    else:
        rnd = bool(random_known)
    return VerifyRuns(runs, same, rnd, round(time.time() - t0, 2), [rc for rc, _ in outs[:runs]],
                      last_output[-2000:])
