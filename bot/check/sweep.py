"""The sweep: run every selected check in isolation, write results as they come, print a table."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import sys
import threading
import time
from typing import Callable

from bot import rundir
from bot.check.results import ResultsWriter, csv_to_rows, is_failure, mark_baseline
from bot.check.settings import Settings, check_id
from bot.records import CheckRow, Chosen, FirstAttempt, Launcher, RerunCapture, RunSettings, Spec
from bot.signature import NOT_COMPILER_CLASSES, Signature
from bot.suites import source_of
from bot.suites.classify import is_never_ran
from bot.suites.source import Chooser

RETRY_RERUNS = 3  # reruns for a check whose retry box is ticked on the dashboard


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


HEARTBEAT_S = 15.0   # a check that runs longer says so this often


@contextlib.contextmanager
def heartbeat(label: str, limit: float | None, every: float = HEARTBEAT_S):
    """While the block runs, a line every ``every`` seconds: "<label>: still running (30 s of its
    600 s limit)". Written by a thread straight to the standard error's file descriptor (no lock of
    Python's I/O that a child forked meanwhile could inherit held) and stopped when the block ends."""
    stop = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not stop.wait(every):
            limit_words = f" of its {limit:.0f} s limit" if limit else ""
            line = f"{label}: still running ({time.monotonic() - t0:.0f} s{limit_words})\n"
            try:
                os.write(2, line.encode("utf-8", "replace"))
            except OSError:
                return

    thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class _Terminated(KeyboardInterrupt):
    pass


def varied(m, settings: Settings) -> Settings:
    """``settings`` for model ``m``: the settings its source proposes for it (``Model.settings``)
    where the run keeps the default; a setting the run chose (``--mode training``, ``--dynamic``, a
    matrix value other than the default) applies to every model. Proposed ``config`` entries join
    the run's (a ``--config`` of the run wins), so the row, minify and the repro all carry them."""
    default = Settings()
    proposed = m.settings or {}
    keep = {k: v for k, v in proposed.items()
            if k in ("mode", "dynamic") and getattr(settings, k) == getattr(default, k)}
    if proposed.get("config"):
        keep["config"] = {**proposed["config"], **(settings.config or {})}
    return settings.replace(**keep) if keep else settings


def _on_term(signum, frame):
    raise _Terminated()


# Called with a check's first failing attempt, before its reruns and the checks after it: the `run`
# command starts what its minify stage will need then (bot.commands.run), so that it overlaps the rest
# of the check. Not for a failure that minify has nothing to do with.
ON_FIRST_FAILURE: list[Callable[[CheckRow], None]] = []


def run_sweep(models, settings: Settings | list[Settings], out_dir: str, *, run_settings: RunSettings, baseline=None,
              memory_limit_mb: int | None = None, warm: bool = True, progress=_say, reruns: int = 1,
              retry=frozenset(), deadline: float | None = None) -> ResultsWriter:
    """Run the checks; returns the writer (its rows are in results.json whatever happens). ``settings``
    may be a list (a settings matrix, one device): every model is checked under each. ``deadline``
    (``time.monotonic()``): no check but the first starts after it (a time-bounded campaign); the
    run is complete then, and its settings list the models it checked. In a time-bounded sweep the
    models' source may choose which check runs next from the rows so far (:meth:`Source.chooser`:
    the fuzzer prefers programs with unseen features); otherwise they run in the order given."""
    matrix = settings if isinstance(settings, list) else [settings]
    settings = matrix[0]
    plan = [(m, varied(m, s)) for s in matrix for m in models]
    writer = ResultsWriter(out_dir, run_settings)
    total = len(plan)
    if any(source_of(m.spec).imported for m in models):
        rows = csv_to_rows([m.spec.record for m in models], settings)
        for row in rows:
            mark_baseline(row, baseline)
            writer.add(row)
        writer.finish(True)
        return writer

    old = signal.signal(signal.SIGTERM, _on_term)
    runner = None
    complete = False
    try:
        if any(not source_of(m.spec).program for m in models) and total:
            progress(f"preparing: importing torch and warming up the compiler (once for all {total} checks)")
            from bot.check.isolate import ForkRunner

            runner = ForkRunner(settings.device, warm=warm, memory_limit_mb=memory_limit_mb)
            progress(f"ready in {runner.warm_seconds:.1f}s")
        given = [check_id(m.name, s) for m, s in plan]
        pending = list(range(total))   # positions in plan of the checks not yet run, in order
        chooser = source_of(models[0].spec).chooser(models) if deadline is not None and models else None
        for k in range(1, total + 1):
            if deadline is not None and k > 1 and time.monotonic() >= deadline:
                progress(f"time budget spent: {len(writer.rows)} of {total} checks run")
                writer.doc.settings.models = list(dict.fromkeys(r.model for r in writer.rows))
                break
            j, chosen = _next(pending, plan, chooser, writer.rows)
            m, settings = plan[j]
            say = functools.partial(_numbered, progress, f"[{k}/{total}] {m.name}")
            if chosen is not None and chosen.passed_over:
                say(f"chosen for novelty ({_why(chosen)}; {chosen.passed_over} lower-index candidates later)")
            taken = set(given[:j] + given[j + 1:]) | {r.id for r in writer.rows}
            with heartbeat(f"[{k}/{total}] {m.name}", settings.timeout):
                row = _check_one(m, settings, runner, out_dir, reruns=reruns, retry=retry, taken=taken, say=say)
            mark_baseline(row, baseline)
            writer.add(row.replace(chosen=chosen) if chosen is not None else row)
        complete = True
    except (_Terminated, KeyboardInterrupt):
        progress(f"interrupted: {len(writer.rows)} of {total} checks recorded in {out_dir}/results.json")
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
        writer.finish(complete)
    return writer


def _numbered(progress, label: str, msg: str) -> None:
    progress(f"{label}: {msg}")


def _next(pending: list[int], plan: list, chooser: Chooser | None, rows: list[CheckRow]) -> tuple[int, Chosen | None]:
    """The plan position of the next check (taken out of ``pending``), and why, when a source's
    chooser picked it (a time-bounded sweep); without one, the next in order."""
    if chooser is None:
        return pending.pop(0), None
    pos, chosen = chooser.pick([plan[j] for j in pending], rows)
    if not 0 <= pos < len(pending):
        raise ValueError(f"the source's chooser picked position {pos} of {len(pending)} pending checks")
    return pending.pop(pos), chosen


def _why(chosen: Chosen) -> str:
    return f"novelty {chosen.novelty}: {chosen.unseen} unseen features, {chosen.hot} productive families"


def _check_one(m, settings: Settings, runner, out_dir: str, *, reruns: int, retry, say,
               taken: set[str] = frozenset()) -> CheckRow:
    """One check with its reruns, as its row (``say``: its progress lines).

    A program's row names what it compiled (its graphs' backend, device, dtype and mode), not the
    settings it was given, and its id follows; that is known only once it ran. So a dashboard's
    retry request (which names the id a row had) is looked up after the first attempt, under both
    ids, and the check's logs, written under the settings' id while it ran, are then named by the
    row's id. An id that is ``taken`` (another check of the run has it, or was given it: a program
    that ignores what a matrix tells it compiles the same thing for every entry) is not: the row
    keeps the id of the settings it was given."""
    cid = check_id(m.name, settings)
    log_rel = os.path.join(rundir.CHECKS_DIR, f"{cid}.log")
    base = dict(id=cid, model=m.name, spec=m.spec, backend=settings.backend, mode=settings.mode,
                dtype=settings.dtype, device=settings.device, dynamic=settings.dynamic, config=dict(settings.config))
    if m.skip:
        say(f"skipped ({m.skip})")
        return CheckRow(**base, status="pass_due_to_skip", skipped=m.skip, duration_s=0.0)
    program = bool(source_of(m.spec).program)
    say("checking (" + ("backend, mode, dtype and device as the program compiles)" if program else
                        f"{settings.backend}, {settings.mode}, {settings.dtype}, {settings.device})"))
    t0 = time.perf_counter()

    def reruns_for(first: CheckRow) -> int:
        if first.failure_class and first.failure_class not in NOT_COMPILER_CLASSES:
            for hook in ON_FIRST_FAILURE:
                hook(first)
        retried = cid in retry or _final_id(m, settings, first) in retry
        return max(reruns, RETRY_RERUNS) if retried else reruns

    result = run_with_reruns(_first_then_capture(lambda path, capture: _run_one(runner, m, settings, path, out_dir,
                                                                                capture)),
                             os.path.join(out_dir, log_rel), reruns_for, progress=say)
    observed = _observed(result, m.spec)
    if observed:
        base.update(observed)
        final = _final_id(m, settings, result)
        base["id"] = cid if final in taken else final
        log_rel, result = _logs_renamed(out_dir, cid, base["id"], result)
    row = result.replace(**base, log=log_rel, launchers=None)  # a rerun's duration_s includes its reruns
    discarded = source_of(m.spec).discard(row)
    if discarded:
        row = row.replace(status="pass_due_to_skip", failure_class=None, skipped=discarded)
    if row.duration_s is None:
        row.duration_s = round(time.perf_counter() - t0, 3)
    seen = f" ({row.backend}, {row.mode}, {row.dtype}, {row.device})" if observed else ""
    say(f"{describe(row)}{seen} in {row.duration_s:.1f}s")
    return row


def _final_id(m, settings: Settings, row: CheckRow) -> str:
    """The check's id once it ran: a program's names what it compiled (:func:`_observed`)."""
    observed = _observed(row, m.spec)
    return check_id(m.name, settings.replace(**observed)) if observed else check_id(m.name, settings)


def _logs_renamed(out_dir: str, old_id: str, new_id: str, row: CheckRow) -> tuple[str, CheckRow]:
    """The check's log and its reruns' logs (``<id>.log``, ``<id>.rerun<k>.log``) named by its final
    id, so that the row's id finds its log (a run directory read back keeps only ``<row id>.log``);
    returns the log's path for the row, and the row with its first attempt's log path updated. A
    name another check's log already took is left alone. What a rerun captured stays where it is:
    the row refers to it by its absolute path."""
    old_rel = os.path.join(rundir.CHECKS_DIR, f"{old_id}.log")
    checks = os.path.join(out_dir, rundir.CHECKS_DIR)
    ours = re.compile(re.escape(old_id) + r"(\.rerun\d+)?\.log")
    moved = False
    for name in sorted(os.listdir(checks)) if new_id != old_id and os.path.isdir(checks) else []:
        dest = os.path.join(checks, new_id + name[len(old_id):])
        if ours.fullmatch(name) and not os.path.exists(dest):
            os.rename(os.path.join(checks, name), dest)
            moved = moved or name == f"{old_id}.log"
    if not moved:
        return old_rel, row
    new_rel = os.path.join(rundir.CHECKS_DIR, f"{new_id}.log")
    if row.flaky and row.flaky.log == old_rel:
        row = row.replace(flaky=row.flaky.replace(log=new_rel))
    return new_rel, row


def _observed(row: CheckRow, spec: Spec) -> dict[str, str]:
    """The device, dtype, mode and backend a program's run saw it compile (the environment hook's
    record, :meth:`bot.suites.command.Ran.note_in`); empty for a check the sweep built in-process."""
    if not source_of(spec).program:
        return {}
    return {k: v for k in ("device", "dtype", "mode", "backend") if isinstance(v := getattr(row, k), str) and v}


def run_with_reruns(run_once, log_path: str, reruns: int | Callable[[CheckRow], int], progress=_say) -> CheckRow:
    """Run a check; when it fails, run it again up to ``reruns`` times before it counts as failing
    (``reruns`` may be a function of the first attempt's row: what the check is shows only then).

    A check that passes on a rerun is the rerun's (passing) result with ``flaky`` set to what the first
    attempt saw; one that fails every time keeps its first failure, with ``reruns`` = how many were
    run. Rerun logs are ``<log>.rerun<k>.log`` next to the first attempt's."""
    t0 = time.perf_counter()
    result = run_once(log_path)
    if callable(reruns):
        reruns = reruns(result)
    # a timeout would cost its full time again; a program that never ran would never run again
    if result.failure_class in (None, "timeout") or reruns <= 0 or is_never_ran(result):
        return result
    base = log_path[:-4] if log_path.endswith(".log") else log_path
    for k in range(1, reruns + 1):
        progress(f"{result.status}; rerun {k} of {reruns}")
        again = run_once(f"{base}.rerun{k}.log")
        if again.failure_class is None:
            first = FirstAttempt.of(result, k + 1, os.path.join(rundir.CHECKS_DIR, os.path.basename(log_path)))
            return again.replace(flaky=first, duration_s=_elapsed(t0))
        if Signature.reruns_alike(result, again):
            # a deterministic failure (the same status and the same numbers twice) is not run again;
            # what the rerun captured for minify goes with it
            return result.replace(reruns=k, deterministic=True, duration_s=_elapsed(t0),
                                  capture=again.capture or result.capture)
    return result.replace(reruns=reruns, duration_s=_elapsed(t0))


def _elapsed(t0: float) -> float:
    """The check's time with its reruns (the table shows what the check cost)."""
    return round(time.perf_counter() - t0, 3)


def _first_then_capture(run):
    """``run(path, capture)`` as a rerun callback: the first run is the check; a rerun of a failing
    check is asked to capture what minify needs for that failure class (a program's rerun then
    doubles as minify's capture run instead of costing one more full run)."""
    first: list[CheckRow] = []

    def once(path):
        row = run(path, first[0].failure_class if first else None)
        first.append(row)
        return row

    return once


def _run_one(runner, m, settings, log_path, out_dir, capture_for: str | None = None) -> CheckRow:
    if not source_of(m.spec).program:   # built in a process forked from the runner
        return runner.run(m.spec, settings, log_path)
    extra_env = launchers = None
    level = _capture_level(capture_for, settings)
    if level:
        from bot.suites.command import capture_env

        capdir = os.path.abspath((log_path[:-4] if log_path.endswith(".log") else log_path) + ".capture")
        launchers = os.path.join(capdir, "launchers")
        extra_env = capture_env(level, os.path.join(capdir, "debug"))
    row = run_program(m.spec, settings, log_path, extra_env=extra_env, launcher_dir=launchers)
    out = row.replace(launchers=None)
    if level:
        kept = [Launcher(x.graph, os.path.abspath(x.path)) for x in row.launchers or []
                if x.path and os.path.exists(x.path)]
        out.capture = RerunCapture("aot", level, kept, row.compiled_graphs)
    return out


# the repro level a failing program's rerun captures at: one that leaves the program's behaviour
# as it was (level 4 raises AccuracyError in the program, so an accuracy failure's rerun keeps
# every graph at level 3, which minify's own predicate judges)
RERUN_LEVEL = {"accuracy": 3, "runtime_error": 3, "crash": 3, "compile_error": 2}


def _capture_level(failure_class: str | None, settings) -> int | None:
    """The repro level a program's rerun captures at for this failure class (torch's repro-after
    aot wraps inductor only); None when the rerun is a plain one."""
    if not failure_class or settings.backend != "inductor":
        return None
    return RERUN_LEVEL.get(failure_class)


def run_program(spec: Spec, settings, log_path: str, *, extra_env: dict | None = None,
                force_backend: str | None = None, launcher_dir: str | None = None) -> CheckRow:
    """Run a command / harness check once (the check itself, or a rerun by minify's localize and
    capture): returns its row, with ``launchers`` (what the hook kept) and ``compiled_graphs``."""
    return source_of(spec).run(spec, settings, log_path, extra_env=extra_env, force_backend=force_backend,
                               launcher_dir=launcher_dir)


def describe(row: CheckRow) -> str:
    status = row.status
    cls = row.failure_class
    text = status if not cls or cls == status else f"{status} ({cls})"
    if row.flaky:
        text += f" (flaky: {row.flaky.status} first, passed on rerun)"
    if row.baseline:
        text += f" [{row.baseline}]"
    return text


def detail(row: CheckRow) -> str:
    err, acc = row.error, row.accuracy
    if row.skipped:
        return f"skipped: {row.skipped}"
    if row.failure_class == "accuracy" and acc:
        res, ref = (x if x is not None else 0 for x in (acc.rmse_res, acc.rmse_ref))
        return f"rmse {res:.3g} vs eager {ref:.3g} (tol {acc.tolerance})"
    if err:
        msg = " ".join(str(err.message if err.message is not None else "").split())
        return f"{err.type}: {msg[:70]}"
    return ""


def table(rows: list[CheckRow]) -> str:
    headers = ["model", "status", "class", "baseline", "time", "detail"]
    data = [[r.model if r.model is not None else "", r.status if r.status is not None else "",
             r.failure_class or "-", r.baseline or "-", f"{(r.duration_s or 0):.1f}s", detail(r)] for r in rows]
    widths = [max(len(h), *(len(str(d[i])) for d in data)) if data else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for d in data:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(d, widths)).rstrip())
    fails = sum(1 for r in rows if is_failure(r))
    new = sum(1 for r in rows if is_failure(r) and r.baseline == "new")
    fixed = sum(1 for r in rows if r.baseline == "fixed")
    summary = f"{len(rows)} checks: {len(rows) - fails} passed, {fails} failed"
    if any(r.baseline for r in rows):
        summary += f" ({new} new, {fails - new} known, {fixed} fixed)"
    lines.append(summary)
    return "\n".join(lines)
