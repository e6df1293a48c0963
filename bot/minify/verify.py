"""Verify: run the final repro in N fresh processes (forks of one interpreter that only imported
and warmed torch: :class:`bot.minify.procs.Interpreters`) and count how many fail the same way;
run it once more with random inputs (``run --no-save-dir``) to learn whether the saved inputs
matter.

The minify stage's verification of the worker's final repro is here too: :func:`verify_final` (the
pipeline's verify step) takes the verification begun while the worker's bisector runs
(:class:`EarlyVerify`) or announces its plan, packages and verifies repro.py (then the config
fallbacks) and the plain and short repros (:func:`plain_and_verify`); :func:`record` (the
pipeline's package step) records the outcome in the failure's record and writes the standalone repro."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from bot import proc, rundir
from bot.failure import FailureRecord
from bot.minify import package as pkg
from bot.minify import procs
from bot.minify.procs import Interpreters
from bot.minify.records import Final, WorkerResult
from bot.minify.worker import child
from bot.minify.worker import plain as plainmod
from bot.options import MinifyOptions
from bot.records import ConfigDiff, PlainRepro, Verification
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
            res = proc.run(build.command(cmd, cwd=cwd) if build else [child.python(), *cmd], cwd=cwd,
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


# --- the minify stage's verification of the worker's final repro -------------------------------------


@dataclass
class Target:
    """Where a failure's final repro is verified: its record (filled here), its files, the stage's
    options, its progress (``say``) and log (``log``) lines, and the fork server."""

    rec: FailureRecord
    fdir: str
    opts: MinifyOptions
    say: Callable[[str], None]
    log: Callable[[str], None]
    interps: Interpreters | None = None


@dataclass
class Verified:
    """What the verification of the worker's final repro hands on (:func:`verify_final` to
    :func:`record`): the runs that count, the config the repro was packaged with, the judge's lines."""

    runs: VerifyRuns
    config: list | None
    judge_lines: list | None


def verify_final(t: Target, result: WorkerResult, early: EarlyVerify | None, plain: plainmod.PlainJob) -> Verified:
    """Package the worker's final repro and verify it in fresh processes (taking the verification
    begun while the bisector ran when it verified this very repro); then the config fallbacks. The
    outcome is recorded by :func:`record`."""
    rec = t.rec
    sig, rnd_known = result.signature, result.random_inputs_reproduce
    judge_lines = (result.judge.config if result.judge else None) or None
    config = repro_config(rec.config.minimal, rec.config.diff)
    done = early.outcome(result.final, config, rnd_known, t.log, judge_lines) if early is not None else None
    if done is None:
        t.say(f"verify: {verify_plan(t.opts, rnd_known)}")
        done = package_and_verify(result.final, config, sig, rnd_known, t.opts, t.fdir, t.log, t.interps,
                                  judge_lines, plain)
    v = done
    rec.repro.timings["package"] = v.package_seconds
    rec.repro.timings["verify"] = v.seconds
    for fallback, why in config_fallbacks(rec.config, config):
        if v.failed_same_way or (v.plain is not None and v.plain.reproduces):
            break
        t.log(f"the repro did not reproduce with {why}; retrying with {config_words(fallback)}")
        v = package_and_verify(result.final, fallback, sig, rnd_known, t.opts, t.fdir, t.log, t.interps,
                               judge_lines, plain)
        rec.repro.add_time("verify", v.seconds)
        if v.failed_same_way or (v.plain is not None and v.plain.reproduces):
            config = fallback
            rec.config.minimal = None
    return Verified(v, config, judge_lines)


def record(t: Target, result: WorkerResult, verified: Verified) -> None:
    """The verification into the failure's record: verified (status, signature, standalone and plain
    repros), or not reproduced (the worker's unproven culprit and bisection dropped)."""
    rec, r = t.rec, t.rec.repro
    v, config, judge_lines = verified.runs, verified.config, verified.judge_lines
    r.verification = v.record
    r.path, r.inputs_dir = rundir.REPRO, rundir.INPUTS_DIR
    t.say(f"verify: {v.failed_same_way}/{v.runs} fresh runs fail the same way; random inputs "
          f"{'reproduce' if v.random_inputs_reproduce else 'do not reproduce'}")
    if v.failed_same_way == 0 and v.plain is not None and v.plain.reproduces:
        # torch's run_repro judged it passing (no fp64 reference, say) where the check's judge,
        # written out in the plain repro, sees the failure: the plain repro is the verified one
        t.say(f"verify: only the plain repro fails the same way ({v.plain.failed_same_way}/{v.plain.runs}): "
              "it is the verified repro")
        r.verification = Verification(v.plain.runs, v.plain.failed_same_way, bool(v.random_inputs_reproduce),
                                      launcher_failed_same_way=v.failed_same_way)
    elif v.failed_same_way == 0:
        # the worker's culprit and the bisector's answer are not proven: they stay in the log only
        named = ", ".join(rec.culprit.ops if rec.culprit else [])
        rec.culprit, rec.bisect = None, None
        r.reason = (f"the minimized repro did not fail the same way in {v.runs} fresh processes"
                    + (f" (the minify worker's candidate culprit, {named}, is not verified)" if named else ""))
        r.status = "not_reproduced"
        return
    r.status, r.reason = result.status, result.reason
    rec.signature = rec.verified_signature(result.signature)
    if v.random_inputs_reproduce and v.failed_same_way:
        pkg.write_standalone(t.fdir, config, result.final, judge_lines)
        r.standalone_path = rundir.STANDALONE
    r.plain = v.plain
    if v.plain is not None:
        r.timings["plain"] = v.plain_seconds
        t.say(f"verify: plain repro: {plain_words(v.plain)}")


def plain_words(p) -> str:
    if p.path is None:
        return f"not written ({p.reason})"
    return (f"{p.failed_same_way}/{p.runs} fresh runs fail the same way; inputs "
            + ("inline" if p.inputs_inline else f"in {p.inputs_file} (sha256 {p.inputs_sha256})")
            + (f"; short repro: {p.short_failed_same_way}/{p.short_runs}" if p.short_path else ""))


def repro_config(minimal: list | None, diff: list | None) -> list:
    """The config lines a packaged repro carries: the minimal config when it was found, else the
    whole diff of non-default settings (empty: none at all; torch's repro files carry every
    setting, hundreds of lines that say nothing about the failure)."""
    return list(minimal) if minimal is not None else list(diff or [])


def config_fallbacks(cfg: ConfigDiff, tried: list | None) -> list[tuple[list | None, str]]:
    """What a repro that did not reproduce with ``tried`` is packaged with next, in order: the
    whole diff, then every setting the captured file carried (None)."""
    out: list[tuple[list | None, str]] = []
    if tried is not None and cfg.diff and list(cfg.diff) != list(tried):
        out.append((list(cfg.diff), config_words(tried)))
    out.append((None, config_words(out[-1][0] if out else tried)))
    return out


def config_words(config: list | None) -> str:
    if config is None:
        return "every setting of the captured file"
    return f"{len(config)} non-default setting(s)" if config else "no settings"


def verify_plan(opts: MinifyOptions, random_known) -> str:
    n = opts.verify_runs + (random_known is None)
    at_once = side_by_side(n)
    return (f"{opts.verify_runs} fresh runs{' + 1 with random inputs' if random_known is None else ''}, "
            + ("all at once" if at_once >= n else f"{at_once} at a time"))


def package_and_verify(final: str, config, sig: Signature, random_known, opts: MinifyOptions, fdir: str, vlog,
                       interps, judge_lines=None, plain: plainmod.PlainJob | None = None) -> VerifyRuns:
    """Write failures/<id>/repro.py (+ inputs) from the worker's final repro and verify it in fresh
    processes; the packaging time in ``package_seconds``. When it reproduces and ``plain`` says how,
    repro_plain.py is written and verified the same way (``v.plain``)."""
    from bot.torch_adapter.repro import parse_repro_file

    t = time.time()
    path = pkg.write_repro(final, parse_repro_file(final).save_dir, fdir, config, judge_lines)
    package_seconds = round(time.time() - t, 2)
    v = verify(path, sig, opts.verify_runs, log=vlog, random_known=random_known, interpreters=interps)
    v.package_seconds = package_seconds
    if plain is not None:   # also where the launcher did not: its judge is torch's, the plain one the check's
        t = time.time()
        v.plain = plain_and_verify(plain.replace(final=final, config=config,
                                                 random_inputs=bool(v.random_inputs_reproduce)),
                                   sig, opts, fdir, vlog, interps)
        v.plain_seconds = round(time.time() - t, 2)
    return v


def plain_and_verify(job: plainmod.PlainJob, sig: Signature, opts: MinifyOptions, fdir: str, vlog, interps):
    """Write repro_plain.py beside repro.py and run it in fresh processes like repro.py: it counts
    only where it fails the same way (:class:`bot.records.PlainRepro`). Written with inputs made
    from a seed and not failing so, it is written again with the saved ones."""
    rec = plainmod.write_plain(job, interps)
    if rec.path is None:
        vlog(f"plain repro: not written: {rec.reason}")
        return rec
    # the plain and the short repro's runs go at once (the short form counts only where the plain
    # one failed the same way, which is decided after): each run is its own forked process
    from concurrent.futures import ThreadPoolExecutor

    def runs_of(rel: str, name: str) -> VerifyRuns:
        return verify(os.path.join(fdir, rel), sig, opts.verify_runs, log=lambda m: vlog(f"{name}: {m}"),
                      random_known=False, interpreters=interps)

    with ThreadPoolExecutor(max_workers=1) as pool:   # the short runs; the plain ones in this thread
        short = pool.submit(runs_of, rec.short_path, "short repro") if rec.short_path else None
        pv = runs_of(rec.path, "plain repro")
        sv = short.result() if short is not None else None
    rec.runs, rec.failed_same_way = pv.runs, pv.failed_same_way
    if rec.inputs_random and not rec.failed_same_way:
        vlog("plain repro: with its large inputs made from a seed it did not fail the same way; "
             "writing the saved inputs")
        return plain_and_verify(job.replace(make_inputs=False), sig, opts, fdir, vlog, interps)
    if sv is not None and rec.failed_same_way:   # the short form, as a person writes it: shown only when it fails so
        rec.short_runs, rec.short_failed_same_way = sv.runs, sv.failed_same_way
    return rec


def _digest(path: str) -> str | None:
    """The repro's identity (its inputs are named by content hash inside it)."""
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


class EarlyVerify:
    """Verification of the final repro the worker announced (event ``final``) before it ran the
    bisector: it runs in the background while the worker bisects. Its log lines are held until
    the outcome is taken, so that they do not interleave with the worker's."""

    def __init__(self, event: Final, sig: Signature, opts: MinifyOptions, fdir: str, interps,
                 plain: plainmod.PlainJob | None = None):
        self.event = event
        self.digest = _digest(event.path)  # the worker wrote it before it announced it
        self.fdir = fdir
        self.lines: list[str] = []
        self.config = config = repro_config(event.config_minimal, event.config_diff)
        self.judge_lines = judge_lines = (event.judge.config if event.judge else None) or None
        self.job = proc.background(lambda: package_and_verify(
            event.path, config, sig, event.random_inputs_reproduce, opts, fdir, self.lines.append,
            interps, judge_lines, plain), name="verify")

    def outcome(self, final: str, config, random_known, vlog, judge_lines=None) -> VerifyRuns | None:
        """The verification, when it verified this very repro; None (and what it wrote is gone)
        when the worker's result is another one (it died while bisecting; a checkpoint was kept)."""
        try:
            done = self.job.result()
        except Exception as exc:  # noqa: BLE001 - verified again the ordinary way
            vlog(f"verification during the bisection failed: {type(exc).__name__}: {exc}")
            self.discard()
            return None
        if not (os.path.realpath(final) == os.path.realpath(self.event.path) and _digest(final) == self.digest
                and config == self.config and random_known == self.event.random_inputs_reproduce
                and judge_lines == self.judge_lines):
            self.discard()
            return None
        for line in self.lines:
            vlog(line)
        return done

    def discard(self) -> None:
        """Wait for it and remove the repro it packaged."""
        self.job.wait()
        shutil.rmtree(os.path.join(self.fdir, rundir.INPUTS_DIR), ignore_errors=True)
        for name in (rundir.REPRO, rundir.PLAIN, rundir.SHORT):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.fdir, name))
