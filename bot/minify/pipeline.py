"""One failure end to end: localize -> capture -> reduce -> verify -> trace -> failure.json.

:func:`process` is the whole of it for one failing check (or one given launcher): it makes one
:class:`Failure` (the check, its options, where its files go, the typed
:class:`bot.failure.FailureRecord` being filled) and :func:`run` enters each step of :data:`STEPS`
on it, in order, until the failure is ``done`` (the steps of a capture pass, 5 to 10, once per pass):

1. :func:`given_launcher`: a launcher given is the one candidate (the runner goes on at ``reduce``);
2. :func:`screen`: a class minify does not reduce, a check it cannot rerun, a program that compiled
   no graph (done, the reason set);
3. :func:`reuse_known`: a known bug (an open issue's verified repro) is verified again instead;
4. :func:`localize`: which stage fails first (done when it is eager or dynamo);
5. :func:`capture`: the failing check (or program) rerun with this pass's capture setting: the
   level that fits the class first, then the next (:func:`capture_levels`), or after dynamo:
   ``f.candidates``;
6. :func:`reduce`: the worker (:mod:`reduce`) on each candidate until one reproduces, its findings in
   the record: ``f.reduced`` (its final repro's verification begins while the bisector runs);
7. :func:`verify`: that repro packaged and verified in fresh processes (:func:`bot.minify.verify.verify_final`):
   ``f.verified``;
8. :func:`package`: the verification into the record, the published repros written
   (:func:`bot.minify.verify.record`): ``f.packaged``;
9. :func:`trace`: the verified repro rerun with ``TORCH_TRACE``;
10. :func:`next_capture`: the end of a capture pass: done with a repro (or a failure that did not
    recur); else, when the pass's level was not the last, ``f.retry_capture(level)`` sends the runner
    back to :func:`capture` (level 4, then every graph at level 3);
11. :func:`localize_again`: a provisional stage (from a level-3 capture) is settled by localize when
    no graph failed on its own;
12. :func:`capture_after_dynamo`: a failure none of whose graphs captured after AOT fails on its own
    (a program's, or a built model's: inductor's joint-graph passes rewrite a graph before the AOT
    capture sees it) is captured after dynamo (``f.retry_capture(AFTER_DYNAMO)``: one more pass from
    :func:`capture`).

Steps hand each other what they made through typed fields of the :class:`Failure` (``candidates``,
``reduced``, ``verified``, ``packaged``); a step with nothing to work on returns at once. Only the
runner moves between steps: a step may name the step it goes on at (``f.go_to``, set by
:meth:`Failure.retry_capture`), and the runner records every step it enters, with its seconds, in the
``steps:`` log line, once per pass through it.

Steps never call one another (tests/test_minify_shape.py checks it); helpers (``_name``) are shared.
The stage and the backend graphs are captured and judged with are decided in one place,
:meth:`Failure.settle`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Callable

from bot import known as kn
from bot import rundir
from bot.check.settings import Settings
from bot.errors import InfraError
from bot.failure import FailureRecord
from bot.minify import capture as cap
from bot.minify import localize as loc
from bot.minify import procs, reuse
from bot.minify import reduce as red
from bot.minify import trace as tracemod
from bot.minify import verify as ver
from bot.minify.records import (
    CHECK_TOLERANCE,
    Checkpoint,
    Final,
    Judge,
    Loaded,
    Localized,
    MinifyJob,
    Pinned,
    WorkerResult,
)
from bot.minify.worker import plain as plainmod
from bot.options import MinifyOptions
from bot.records import Capture, CheckRow, ConfigDiff, Repro
from bot.signature import ABORT_TYPE, MINIFIABLE_CLASSES, Signature, short_type
from bot.suites import source_of
from bot.torch_adapter.hook import valid_options

NOT_MINIFIED = {
    "eager_error": "the model fails in eager mode: not a compiler bug, nothing to minify",
    "timeout": "the check timed out: graph minification needs a failure that finishes",
    "oom": "the check ran out of memory: graph minification does not apply",
    "setup_error": "the model or program could not be set up (a missing package, a download that failed, a bad "
                   "import): not a compiler failure, nothing to minify",
}
FAILS_WITHOUT_COMPILER = ("the program fails without the compiler: it fails the same with torch.compile turned "
                          "off, so this is not a compiler bug; nothing to minify")
COMPILED_NOTHING = ("the program compiled no graph with torch.compile (none was seen in any of its Python "
                    "processes): its failure is not a torch.compile failure; nothing to minify (a program that "
                    "compiles ahead of time, torch.export with AOTInductor, is not captured)")
IN_DYNAMO = ("the check already fails with the eager backend: the bug is in dynamo's tracing, before a graph "
             "reaches a compiler; graph minification does not apply")
NO_SPEC = ("the check row does not say how its model is built (it has no spec): minify cannot run the check "
           "again; nothing to minify")
CANDIDATES = {3: 16, None: 8}   # launchers tried per program capture: level 3 dumps every graph
BUILT_CANDIDATES = 4
CLEANED = ("minimized", "partial", "none", "not_reproduced")   # statuses whose work directory goes
KEEP = object()   # Failure.settle: the backend is left as it is
AFTER_DYNAMO = "dynamo"   # the capture setting of the after-dynamo pass (the dynamo graphs, before AOT)
MAX_ENTRIES = 64          # steps the runner enters for one failure at most (a retry that never ends is a bug)


@dataclass
class Candidates:
    """The capture step's output, the reduce step's input: the graphs to reduce (most likely first),
    the directory their work goes to, and the program capture that made them (which graph each is)."""

    paths: list[str]
    work: str
    capture: cap.Capture | None = None


@dataclass
class Reduced:
    """The reduce step's output, the verify step's input: the worker's result for the candidate that
    reproduced, its job, and the verification of its final repro begun while its bisector ran."""

    result: WorkerResult
    job: MinifyJob
    early: ver.EarlyVerify | None = None


@dataclass
class Failure:
    """One failure being minified: the check, the stage's options, where its files go, and the
    record the steps fill."""

    row: CheckRow
    settings: Settings          # the check's settings (its row's, else its run's)
    opts: MinifyOptions
    rec: FailureRecord
    fdir: str
    work: str
    say_: Callable[[str], None]
    interpreters: procs.Interpreters | None = None
    launcher: str | None = None
    known: list = field(default_factory=list)   # bot.known.KnownRepro: open issues' verified repros
    stage_backend: str = "inductor"            # the backend graphs are captured and judged with: see settle()
    provisional: bool = False                  # the stage came from a level-3 capture: localize again if need be
    done: bool = False                         # settled: the runner runs no further step
    go_to: str | None = None                   # the step the runner enters next (else the one after)
    step_seconds: list[tuple[str, float]] = field(default_factory=list)   # (step, seconds) of each step entered
    # the capture passes: the settings to try in order (levels; AFTER_DYNAMO), and this pass's
    levels: list = field(default_factory=list)
    setting: int | str | None = None
    after_aot: str | None = None               # why no graph captured after AOT failed (the after-dynamo pass)
    # what each step of a capture pass hands the next
    candidates: Candidates | None = None       # capture -> reduce
    reduced: Reduced | None = None             # reduce -> verify
    verified: ver.Verified | None = None       # verify -> package
    packaged: bool = False                     # package -> trace
    own_interpreters: bool = False             # the fork server is this failure's own (process() closes it)

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def failure_class(self) -> str | None:
        return self.row.failure_class

    @property
    def log_path(self) -> str:
        return os.path.join(self.fdir, rundir.MINIFIER_LOG)

    @property
    def program(self) -> bool:
        return self.launcher is None and source_of(self.row.spec).program

    @property
    def repro(self) -> Repro:
        return self.rec.repro

    def say(self, msg: str) -> None:
        self.say_(f"{self.id}: {msg}")

    def log(self, msg: str) -> None:
        with open(self.log_path, "a") as fh:
            fh.write(msg + "\n")

    def settle(self, stage: str, lz: Localized | None = None, *, backend=KEEP) -> None:
        """The one place the record's stage (and ablation, from ``lz``) and the backend the graphs are
        captured and judged with are decided (``backend`` left out: unchanged)."""
        self.rec.stage = stage
        if lz is not None:
            self.rec.ablation = lz.ablation
        if backend is not KEEP:
            self.stage_backend = backend

    def retry_capture(self, setting: int | str) -> None:
        """Capture again with ``setting`` (a level, or AFTER_DYNAMO): what the last pass handed on is
        dropped and the runner goes back to the capture step."""
        self.setting = setting
        self.candidates, self.reduced, self.verified, self.packaged = None, None, None, False
        self.go_to = capture.__name__

    def fork_server(self) -> procs.Interpreters:
        """The fork server the worker and each verification run are forked from: the caller's, else
        the failure's own, started now (and closed by :func:`process`)."""
        if self.interpreters is None:
            self.interpreters, self.own_interpreters = procs.Interpreters(self.opts.verify_runs), True
        return self.interpreters.start()

    def target(self) -> ver.Target:
        """Where verify.py verifies and records this failure's final repro."""
        return ver.Target(self.rec, self.fdir, self.opts, self.say, self.log, self.fork_server())

    def stop(self, reason: str, status: str | None = None) -> None:
        """The failure is not minified (further): ``reason`` says why."""
        self.repro.reason = reason
        if status is not None:
            self.repro.status = status


def process(row: CheckRow, settings: Settings, run_dir: str, opts: MinifyOptions, versions: dict,
            say: Callable[[str], None], launcher: str | None = None,
            interpreters: procs.Interpreters | None = None, known: list | None = None) -> FailureRecord:
    """Minify one failure; always returns (and writes) a failure record. ``opts``: the stage's
    options, resolved. ``interpreters``: the caller's fork server (shared by its failures; the
    caller closes it)."""
    fdir = os.path.join(run_dir, "failures", row.id)
    work = os.path.join(run_dir, rundir.WORK_DIR, row.id)
    for d in (fdir, work):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d, exist_ok=True)
    rec = FailureRecord.for_check(row)
    rec.versions = versions
    options = valid_options(row.compile_options)
    if options:   # the settings the program's torch.compile gave its graphs hold in every rerun, a forced
        # backend's too (the hook sets them as the program imports torch._dynamo)
        settings = settings.replace(config={**settings.config, **options})
    f = Failure(row, settings, opts, rec, fdir, work, say, interpreters, launcher, list(known or []))
    t0 = time.time()
    try:
        run(f, STEPS)
    except Exception as exc:  # noqa: BLE001 - one failure's crash must not stop the others
        import traceback

        rec.repro = Repro(reason=f"minify-bot internal error: {type(exc).__name__}: {exc}", log=rundir.MINIFIER_LOG,
                          timings=rec.repro.timings)
        f.log(traceback.format_exc().rstrip())
        f.say(f"internal error: {type(exc).__name__}: {exc}")
    finally:
        if f.own_interpreters:
            f.interpreters.close()
    if os.path.exists(f.log_path):
        rec.repro.log = rundir.MINIFIER_LOG
    f.say("steps: " + ", ".join(f"{k} {v:.1f} s" for k, v in f.step_seconds))
    timings = rec.repro.timings
    timings["total"] = round(time.time() - t0, 2)
    f.say("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    rundir.write_failure(fdir, rec)
    if rec.repro.status in CLEANED:
        shutil.rmtree(work, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(work))
    return rec


def given_launcher(f: Failure) -> None:
    """A launcher given (``--launcher``) is the one candidate, reduced and verified as it is: the runner
    goes on at :func:`reduce`."""
    if f.launcher is None:
        return
    f.settle("inductor")
    f.repro.capture = Capture(method="given")
    f.candidates = Candidates([f.launcher], f.work)
    f.go_to = reduce.__name__


def screen(f: Failure) -> None:
    """A class minify does not reduce, a check it cannot rerun, a program that compiled no graph: done."""
    f.done = _not_minified(f)


def reuse_known(f: Failure) -> None:
    """A known bug (an open issue's verified repro) is verified again instead (:mod:`reuse`)."""
    entry = kn.match(f.known, f.row)
    f.done = entry is not None and reuse.reuse(f.rec, entry, f.fdir, f.log_path, f.say)


def localize(f: Failure) -> None:
    """Which stage fails first (settled by the check's capture, or rerun with the debug backends);
    a failure without the compiler, or in dynamo, is done."""
    f.provisional = _first_stage(f)
    f.say(f"first failing stage: {f.rec.stage}")
    if f.rec.stage in ("eager", "dynamo"):
        f.stop(FAILS_WITHOUT_COMPILER if f.rec.stage == "eager" else IN_DYNAMO)
        f.done = True


def capture(f: Failure) -> None:
    """Rerun the check (or the program) with this pass's capture setting, the first of
    :func:`capture_levels` on the first pass: ``f.candidates`` (None, the reason set, when it saved no graph)."""
    if f.setting is None:
        f.levels = capture_levels(f.failure_class, f.opts)
        if f.program:
            f.levels = cap.shared_first(f.levels, f.row)
        f.setting = f.levels[0]
    if f.setting == AFTER_DYNAMO:
        wk = os.path.join(f.work, "dynamo")
        captured = _capture_program_dynamo(f, wk) if f.program else _capture_built(f, wk, None, after_dynamo=True)
    else:
        wk = f.work if f.setting == f.levels[0] else os.path.join(f.work, f"level{f.setting}")
        captured = _capture_program(f, wk, f.setting) if f.program else _capture_built(f, wk, f.setting)
    f.candidates = Candidates(captured[0], wk, captured[1]) if captured is not None else None


def reduce(f: Failure) -> None:
    """The worker on each candidate until one reproduces (:mod:`reduce`), its findings into the record:
    ``f.reduced`` when there is a repro to verify (else the reason is set)."""
    if f.candidates is None:
        return
    result, job, progress = _reduce(f, f.candidates, f.fork_server())
    if _take_result(f, result, job):
        f.reduced = Reduced(result, job, progress.early)
    elif progress.early is not None:
        progress.early.discard()


def verify(f: Failure) -> None:
    """The worker's final repro packaged and verified in fresh processes, then the config fallbacks
    (:func:`bot.minify.verify.verify_final`): ``f.verified``."""
    if f.reduced is None:
        return
    r = f.reduced
    f.verified = ver.verify_final(f.target(), r.result, r.early, _plain_job(f, r.result.judge, r.job.numerics))


def package(f: Failure) -> None:
    """The verification into the record: verified (status, signature, the standalone repro written
    when random inputs reproduce, the plain repro) or not reproduced (:func:`bot.minify.verify.record`)."""
    if f.verified is None:
        return
    ver.record(f.target(), f.reduced.result, f.verified)
    f.packaged = True


def trace(f: Failure) -> None:
    """The verified repro rerun, traced (:func:`bot.minify.trace.trace_verified`: a fork of the fork
    server where the trace can be turned on after import)."""
    if not f.packaged:
        return
    if f.opts.no_trace:
        f.say("trace: skipped (--no-trace)")
    else:
        tracemod.trace_verified(f.rec, f.fdir, f.say, interps=f.fork_server())   # a fork of the warm server


def next_capture(f: Failure) -> None:
    """The end of a capture pass: done with a repro, for a failure that did not recur, for a given
    launcher and after the after-dynamo pass; else, when torch's level-4 accuracy check gave no graph
    that fails on its own, every graph is captured at level 3 (``f.retry_capture``)."""
    _pass_notes(f)
    r = f.repro
    if (f.launcher is not None or f.setting == AFTER_DYNAMO or r.status not in ("none", "not_reproduced")
            or f.rec.flaky):
        f.done = True
        return
    i = f.levels.index(f.setting)
    if i < len(f.levels) - 1 and (r.capture or Capture()).repro_after == "aot":
        following = f.levels[i + 1]
        f.say(f"capture: no graph captured at level {f.setting} fails on its own; capturing at level "
              f"{following}" + (" (every graph)" if following == 3 else ""))
        f.retry_capture(following)


def localize_again(f: Failure) -> None:
    """A provisional stage (from a level-3 capture) is settled by localize when no graph failed."""
    if f.provisional:
        _localize_after(f)
        f.provisional = False


def capture_after_dynamo(f: Failure) -> None:
    """A failure whose graphs captured after AOT do not fail on their own (a bug across the forward and
    backward graphs, one only the whole dynamo graph shows, or one made by a pass that rewrites the
    joint graph before the AOT capture sees it: the captured graph then holds the rewrite, and eager
    runs it wrong too): one more pass from :func:`capture`, the dynamo graphs judged with the first
    failing backend (a training step when the check ran a backward)."""
    if not (f.rec.stage not in ("eager", "dynamo")
            and (f.repro.capture or Capture()).repro_after == "aot"):
        return
    f.after_aot = (f.repro.reason or "").rstrip(".")
    f.say(f"capture: no graph captured after AOT fails on its own ({f.after_aot}); capturing after dynamo")
    f.repro.status, f.repro.reason = None, None
    f.retry_capture(AFTER_DYNAMO)


STEPS: list[Callable[[Failure], None]] = [given_launcher, screen, reuse_known, localize, capture, reduce, verify,
                                          package, trace, next_capture, localize_again, capture_after_dynamo]


def run(f: Failure, steps: list[Callable[[Failure], None]]) -> None:
    """Each step in order until the failure is done; after a step that set ``f.go_to``, that step next
    (a capture retried). Each step entered, with its seconds, in ``f.step_seconds``."""
    names = [s.__name__ for s in steps]
    i = 0
    while i < len(steps) and not f.done:
        if len(f.step_seconds) >= MAX_ENTRIES:
            raise InfraError(f"the minify pipeline entered {MAX_ENTRIES} steps without settling the failure")
        step, t = steps[i], time.time()
        try:
            step(f)
        finally:
            f.step_seconds.append((step.__name__, round(time.time() - t, 2)))
        i, f.go_to = (names.index(f.go_to) if f.go_to else i + 1), None


def _pass_notes(f: Failure) -> None:
    """What a capture pass says of itself in the record's capture notes: every graph judged by the
    predicate at level 3; the after-dynamo pass's after-AOT reason (and, with no repro, both reasons)."""
    first = f.levels[0] if f.levels else None
    if f.rec.failure_class == "accuracy" and f.setting == 3 and f.repro.capture is not None:
        f.repro.capture.add_note(
            "every graph was captured at level 3 and judged by minify-bot's predicate (fp64 reference, the "
            "check's tolerance)" + (f", after torch's level-{first} accuracy check gave no graph that fails "
                                    "on its own" if first != 3 else ""))
    if f.setting == AFTER_DYNAMO:
        f.repro.capture.add_note(f"after-AOT capture first: {f.after_aot}")
        if f.repro.status in ("none", "not_reproduced"):   # what neither capture could do, and why
            f.repro.reason = f"after dynamo: {f.repro.reason}; after AOT: {f.after_aot}"


def _not_minified(f: Failure) -> bool:
    """A class minify does not reduce, or a program that compiled no graph: the reason is set."""
    fclass = f.failure_class
    if fclass in NOT_MINIFIED or fclass not in MINIFIABLE_CLASSES:
        f.stop(NOT_MINIFIED.get(fclass, f"failure class {fclass!r} is not minified"))
    elif f.row.spec is None:
        f.stop(NO_SPEC)
    elif f.program and (f.row.compile_frames if f.row.compile_frames is not None
                        else f.row.compiled_graphs) == 0:
        f.stop(COMPILED_NOTHING)
    else:
        return False
    f.say(f"skipped: {f.repro.reason}")
    return True


def _first_stage(f: Failure) -> bool:
    """Set the record's stage and the backend to capture with; True when the stage is provisional
    (taken from a level-3 capture: every graph, not the failing one)."""
    backend = f.row.backend or f.settings.backend
    if f.opts.no_localize:
        f.settle("inductor" if backend == "inductor" else backend, backend=backend)
        return False
    t = time.time()
    lz = loc.settled_by_capture(f.row) if f.program else None
    if lz is not None:
        f.say(f"localize: {lz.note}")
    else:
        lz = _localize(f, os.path.join(f.work, "localize"))
    f.settle(lz.stage, lz, backend=lz.first_failing)
    f.repro.timings["localize"] = round(time.time() - t, 2)
    return lz.provisional


def _localize(f: Failure, wdir: str) -> Localized:
    """Rerun the check (or the program) with the debug backends: the first failing stage."""
    stages = loc.stage_backends(f.row.backend or f.settings.backend)
    f.say(f"localize: rerunning {'the program ' if f.program else ''}with {' / '.join(stages) or 'no compile'}")
    said = lambda e: f.say(f"localize: {e.backend}: {e.status}")  # noqa: E731
    if f.program:
        return loc.localize_program(f.row, f.settings, wdir, f.log_path, f.opts.check_timeout, on_event=said)
    return loc.localize(f.row, f.settings, wdir, f.log_path, f.opts.check_timeout, on_event=said,
                        server=f.fork_server())


def _localize_after(f: Failure) -> None:
    """No graph inductor received fails on its own: which stage does the program fail at? (The
    stage was taken from the check's level-3 capture before minify; now the stages are rerun.)"""
    t = time.time()
    f.say("localize: no captured graph fails on its own")
    lz = _localize(f, os.path.join(f.work, "localize-after"))
    f.repro.add_time("localize", time.time() - t)
    # past inductor, the dynamo graphs are judged with the first failing backend
    f.settle(lz.stage, lz, **({} if lz.stage in ("eager", "dynamo", "inductor") else {"backend": lz.first_failing}))
    f.say(f"first failing stage: {f.rec.stage}")
    if f.rec.stage == "eager":
        f.stop(FAILS_WITHOUT_COMPILER, "none")
    elif f.rec.stage == "dynamo":
        f.stop(IN_DYNAMO, "none")


def capture_levels(fclass: str | None, opts: MinifyOptions) -> list[int | None]:
    """The repro levels a failure is captured at, in order: the user's, or the one that fits the
    class; an accuracy failure at level 4 falls back to level 3 (every graph with real inputs)."""
    if opts.repro_level is not None:
        return [opts.repro_level]
    level = cap.level_for(fclass)
    return [level, 3] if level == 4 else [level]


def _capture_program(f: Failure, work: str, level: int | None) -> tuple[list[str], cap.Capture] | None:
    """Capture a command / harness failure through the environment: (launchers, capture), or None
    (reason set) when there is no graph."""
    if f.rec.stage != "inductor" or f.stage_backend != "inductor" or f.opts.repro_after == "dynamo":
        # torch's repro-after aot wraps inductor only: a failure before inductor, after dynamo
        return _capture_program_dynamo(f, work)
    level = level or f.opts.repro_level or cap.level_for(f.failure_class)
    f.say(f"capture: rerunning the program with TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL={level}")
    t = time.time()
    c = cap.run_capture_program(f.row, f.settings, work, f.log_path, failure_class=f.failure_class, level=level,
                                timeout=f.opts.check_timeout)
    f.repro.add_time("capture", time.time() - t)
    f.repro.capture = Capture("aot", level, "environment", c.note, graphs=c.graphs)
    if c.launcher is None:
        _no_graph_captured(f, c.row, "program", _no_launcher_reason(c, level))
        return None
    f.say(f"capture: {len(c.candidates)} launcher(s) from {c.graphs if c.graphs is not None else '?'} "
          "compiled graph(s)")
    return c.candidates[:CANDIDATES.get(level, CANDIDATES[None])], c


def _capture_program_dynamo(f: Failure, work: str) -> tuple[list[str], cap.Capture] | None:
    """Capture a program's dynamo graphs (bot.minify.capture.run_capture_program_dynamo):
    (graphs, capture), or None (reason set) when the run saved none."""
    backend = f.stage_backend or "inductor"
    f.say(f"capture: rerunning the program with every compile's graph saved after dynamo (backend {backend})")
    t = time.time()
    c = cap.run_capture_program_dynamo(f.row, f.settings, work, f.log_path, failure_class=f.failure_class,
                                       backend=backend, timeout=f.opts.check_timeout)
    f.repro.add_time("capture", time.time() - t)
    f.settle(f.rec.stage, backend=backend)
    f.repro.capture = Capture("dynamo", None, "environment", c.note, graphs=c.graphs)
    if c.launcher is None:
        _no_graph_captured(f, c.row, "program", f"the capture run (status {c.row.status if c.row else None}) "
                           "saved no graph after dynamo: the program compiled none through the environment it was "
                           "given, or it failed before compiling")
        return None
    f.say(f"capture: {len(c.candidates)} graph(s) after dynamo")
    return c.candidates[:CANDIDATES[None]], c


def _no_launcher_reason(c: cap.Capture, level: int) -> str:
    """Why a program's capture run left no launcher, in what is known: torch's level-4 check found
    no compiled graph wrong; the program compiled graphs but torch wrote nothing for them; or no
    graph was compiled through the environment torch was given."""
    status = c.row.status if c.row is not None else None
    if c.graphs == 0:
        return (f"the capture run (status {status}) compiled no graph with inductor: the program does not "
                "pass torch's environment variables on to the process that compiles, or it failed before compiling")
    graphs = f"{c.graphs} graph(s)" if c.graphs is not None else "its graphs"
    if level == 4:
        return (f"torch's level-4 accuracy check passed each of the {graphs} the capture run compiled "
                f"(status {status}): the wrong result appears outside what inductor compiled, or only in how "
                "the program combines the graphs")
    return (f"torch wrote no launcher for the {graphs} the capture run compiled at level {level} (status {status})")


def _no_graph_captured(f: Failure, cap_row: CheckRow | None, rerun: str, no_graph_reason: str) -> None:
    """The capture rerun left no graph: the failure did not recur (flaky), or it did but nothing was saved."""
    if cap_row is not None and not cap_row.failure_class:
        f.rec.flaky = True
        f.stop(f"the failure did not recur when the {rerun} was rerun for capture (status {cap_row.status})",
               "not_reproduced")
    else:
        f.stop(no_graph_reason, "none")
    f.say(f.repro.reason)


def _capture_mode(f: Failure, work: str) -> tuple[str, str | None]:
    """Where a built model's graph is captured: (mode, note). After AOT autograd for inductor;
    after dynamo otherwise, by torch's own repro-after when it works here with this backend, else
    by minify-bot's dynamo-level capture backend ("project")."""
    mode = f.opts.repro_after or ("aot" if f.rec.stage == "inductor" and f.stage_backend == "inductor" else "dynamo")
    note = None
    if mode == "aot" and f.stage_backend != "inductor":
        mode = "dynamo"
        note = "repro_after=aot wraps inductor only; captured after dynamo instead"
    if mode == "dynamo" and ":" in (f.stage_backend or ""):
        # torch's launcher names its backend, and a user's 'module:function' is registered under no name
        note = ((note + "; ") if note else "") + (
            f"captured after dynamo by minify-bot's capture backend (torch's repro-after dynamo cannot name "
            f"the user's backend {f.stage_backend!r} in its launcher)")
        f.say(note)
        return "project", note
    if mode == "dynamo":
        reason = cap.probe_dynamo(f.stage_backend, work, f.log_path)
        if reason is None:
            return "dynamo-torch", note
        note = ((note + "; ") if note else "") + (
            f"torch's TORCHDYNAMO_REPRO_AFTER=dynamo could not be used with backend {f.stage_backend!r} here "
            f"({reason}); captured with minify-bot's own dynamo-level capture backend instead")
        f.say(note)
        return "project", note
    return mode, note


def _capture_built(f: Failure, work: str, level: int | None, *, after_dynamo: bool = False
                   ) -> tuple[list[str], None] | None:
    """Capture a model built in-process by rerunning its check with repro-after: (launchers, None).
    ``after_dynamo``: the after-dynamo pass, by minify-bot's dynamo-level capture backend (forward and
    backward stay one graph), the stage's backend compiling behind it."""
    mode, note = ("project", cap.after_dynamo_note(f.row, f.settings)) if after_dynamo else _capture_mode(f, work)
    level = level or f.opts.repro_level
    f.say(f"capture: repro_after={'dynamo' if mode != 'aot' else 'aot'}"
          f"{'' if mode == 'project' else ' level ' + str(level or cap.level_for(f.failure_class))}")
    t = time.time()
    c = cap.run_capture(f.row, f.settings, work, f.log_path, failure_class=f.failure_class,
                        stage_backend=f.stage_backend, repro_after=mode, level=level, timeout=f.opts.check_timeout,
                        probe_note=note, server=f.fork_server())
    f.repro.add_time("capture", time.time() - t)
    f.repro.capture = Capture(c.repro_after, c.repro_level, c.method, c.note)
    if c.launcher is None:
        _no_graph_captured(f, c.row, "check", "the capture run wrote no graph" + (
            f" (status {c.row.status})" if c.row else " (the capture process died)"))
        return None
    return c.candidates[:BUILT_CANDIDATES], None


# --- reduce -----------------------------------------------------------------------------------------


def numerics_of(f: Failure, candidate: str) -> dict:
    """The process state a candidate graph is judged under, and its repros set: the program's numerics
    flags, and for a graph captured after dynamo the autocast it ran under."""
    from bot.torch_adapter import numerics
    from bot.torch_adapter.repro import captured_state

    return {**numerics.validate(f.row.numerics or {}), **captured_state(candidate)}


def job_for(f: Failure, candidate: str, workdir: str) -> MinifyJob:
    """The worker's job for one candidate: every value from the stage's options or the check."""
    # a failure that aborted the check's process (a C++ exception thrown inside an OpenMP region)
    # would abort an in-process worker too: one forked process per query from the start
    error, accuracy = f.row.error, f.row.accuracy
    aborts = f.launcher is None and error is not None and short_type(error.type) == ABORT_TYPE
    given = f.launcher is not None
    return MinifyJob(
        repro=candidate, workdir=workdir, budget=f.opts.budget,
        failure_class=_class_of_launcher(candidate) if given else f.failure_class,
        class_uncertain=_class_of_launcher(candidate) != "accuracy" if given
        else f.row.classified_by == "exit status",
        original_error=error,
        tolerance=(accuracy.tolerance if accuracy is not None else None) or CHECK_TOLERANCE,
        strict_accuracy=f.opts.strict_accuracy, offload_to_disk=f.opts.offload_to_disk,
        isolate=f.opts.isolate or aborts, check_config=f.row.config or {}, numerics=numerics_of(f, candidate),
        compile_options=valid_options(f.row.compile_options),
        training=(f.row.mode or f.settings.mode) == "training",
        bisect=not f.opts.no_bisect and f.rec.stage == "inductor", backend=f.stage_backend or "inductor")


class _Progress:
    """The worker's events as progress lines; on its ``final`` event (the bisector runs next), the
    final repro's verification starts in the background."""

    def __init__(self, f: Failure, interps, numerics: dict):
        self.f, self.interps, self.numerics = f, interps, numerics
        self.last_nodes: int | None = None
        self.pinned: Signature | None = None
        self.early: ver.EarlyVerify | None = None

    def __call__(self, e) -> None:
        f = self.f
        if isinstance(e, Loaded):
            f.say(f"minify: {e.nodes} nodes")
        elif isinstance(e, Checkpoint) and e.nodes != self.last_nodes:
            self.last_nodes = e.nodes
            f.say(f"minify: -> {e.nodes} nodes")
        elif isinstance(e, Pinned):
            self.pinned = e.signature
        elif isinstance(e, Final) and e.bisects and self.early is None and self.pinned is not None:
            f.say(f"verify: {ver.verify_plan(f.opts, e.random_inputs_reproduce)} (while the bisector runs)")
            self.early = ver.EarlyVerify(e, self.pinned, f.opts, f.fdir, self.interps,
                                      _plain_job(f, e.judge, self.numerics))


def _reduce(f: Failure, cands: Candidates, interps):
    """The worker on each candidate in turn until one reproduces: (result, job, progress)."""
    work, c = cands.work, cands.capture
    for i, cand in enumerate(cands.paths):
        job = job_for(f, cand, os.path.join(work, f"minify{i}"))
        f.say(f"minify: {'isolated ' if job.isolate else ''}culprit search and reduction on "
              f"{os.path.relpath(cand, work) if cand.startswith(work) else os.path.basename(cand)}")
        progress = _Progress(f, interps, job.numerics)
        t = time.time()
        result = red.reduce(job, f.log_path, on_event=progress, interpreters=interps)
        f.repro.add_time("reduce_total", time.time() - t)
        for k, v in result.timings.items():
            f.repro.add_time(k, v)
        if c is not None and c.graph_of is not None:
            f.repro.capture.graph = c.graph_of.get(cand)
        if result.status != "not_reproduced" or i == len(cands.paths) - 1:
            return result, job, progress
    raise AssertionError("no candidate")


def _take_result(f: Failure, result: WorkerResult, job: MinifyJob) -> bool:
    """Copy the worker's findings into the record; True when there is a repro to verify."""
    rec, r = f.rec, f.repro
    if result.status == "error":   # the worker could not write its repro: an internal error, never a repro-less bug
        raise InfraError(result.reason or "the minify worker failed")
    if result.signature is not None and (f.launcher is not None or job.class_uncertain):
        rec.failure_class = result.signature.failure_class  # learned from the graph: the check could not tell
    rec.bisect, rec.culprit = result.bisect, result.culprit
    rec.readout = result.readout
    if result.graph_role:
        r.capture.role = result.graph_role
    if result.dynamic:
        r.capture.dynamic = True
    elif result.static_first:   # truthfully: captured dynamic, reported static because static fails too
        r.capture.dynamic = False
        r.capture.add_note("captured with dynamic shapes; the graph fails with its sizes set to the captured "
                           "values, so the repro is static")
    rec.config = ConfigDiff(result.config_diff or [], result.config_minimal)
    r.nodes_before, r.nodes_after, r.graph = result.nodes_before, result.nodes_after, result.graph
    r.queries, r.seconds = result.queries or 0, result.seconds or 0.0
    if result.note:
        r.capture.add_note(result.note)
    if result.status in ("minimized", "partial") and result.signature is not None:
        partial = f" (partial: {result.reason})" if result.status == "partial" else ""
        f.say(f"minify: {r.nodes_before} -> {r.nodes_after} nodes in {r.queries} queries, {r.seconds:.1f} s{partial}")
        return True
    f.stop(result.reason, result.status if result.status in ("not_reproduced", "none") else "none")
    if r.status == "not_reproduced" and f.row.classified_by == "exit status":
        r.reason = (f"{r.reason}; the check's failure class ({f.failure_class}) came from the program's exit "
                    "status alone: if the program reports a wrong result in its own words, say which with "
                    "--accuracy-pattern")
    f.say(f"no repro: {r.reason}")
    return False


# --- verify (bot/minify/verify.py) -----------------------------------------------------------------


def _plain_job(f: Failure, judge: Judge | None, numerics: dict) -> plainmod.PlainJob:
    """How the plain repro (repro_plain.py) is written: compiled with the failure's backend under the
    process state the worker judged in (``numerics``), judged as the worker learned to judge (``judge``)."""
    j = judge or Judge(f.failure_class or "accuracy")
    return plainmod.PlainJob(out_dir=f.fdir, failure_class=j.failure_class, backend=f.stage_backend or "inductor",
                             tolerance=j.tolerance or CHECK_TOLERANCE, compare_non_fp=bool(j.compare_non_fp),
                             numerics=numerics, training=(f.row.mode or f.settings.mode) == "training",
                             dynamic=bool(f.row.dynamic or f.settings.dynamic))



def _class_of_launcher(path: str) -> str:
    from bot.torch_adapter.repro import parse_repro_file

    rf = parse_repro_file(path)
    return "accuracy" if rf.accuracy else "error"
