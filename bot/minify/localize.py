"""Localize: rerun a failing check with the debug backends eager, aot_eager,
aot_eager_decomp_partition to find the first failing stage. A check built in this process asks
them in order (forked runs cost about a second each); a program (a command, the harness: a
full run each) asks the stage right before the failing backend first, which settles a compiler
bug in one run, and the earlier ones only when that one fails too."""

from __future__ import annotations

import os
import time
from dataclasses import replace

from bot.check.settings import Settings
from bot.minify import procs
from bot.minify.records import Localized, Stage
from bot.records import CheckRow, Spec, StageVerdict
from bot.suites import source_of

STAGES = [("eager", "dynamo"), ("aot_eager", "aot_eager"),
          ("aot_eager_decomp_partition", "aot_eager_decomp_partition"), ("inductor", "inductor")]


def stage_backends(backend: str) -> list[str]:
    """The debug backends to try before ``backend``."""
    names = [b for b, _ in STAGES]
    if backend in names:
        return names[:names.index(backend)]
    return names[:3]  # a custom backend: still ask whether dynamo / aot_autograd alone fail


def probe(backends: list[str], run) -> list[dict]:
    """Ask the stages in the order that settles the first failing one in the fewest runs: the
    stage right before the failing backend first (for a compiler bug it passes, and that one run
    settles it), then, when it fails too, the earlier stages in order, stopping at the first that
    fails. ``run(backend)`` -> a row (:class:`bot.records.CheckRow`); returns ``[{"backend", "status",
    "failure_class"}]`` in stage order."""
    if not backends:
        return []
    seen: dict[str, dict] = {}

    def ask(backend):
        r = run(backend)
        seen[backend] = {"backend": backend, "status": r.status, "failure_class": r.failure_class}
        return seen[backend]

    if not ask(backends[-1])["failure_class"]:
        return [seen[backends[-1]]]
    for backend in backends[:-1]:
        if ask(backend)["failure_class"]:
            break
    return [seen[b] for b in backends if b in seen]


def run_check_forked(spec: Spec, settings: Settings, log_path: str, workdir: str, name: str,
                     server: procs.Interpreters | None = None) -> CheckRow:
    """Run one check in a child forked from this process when it is warm already (`run`: its check
    warmed it; bot.check.isolate.ForkRunner, as the check forked its own), else from the command's
    fork server (``server``: as ``python -m bot.check.one`` would run there; it may still be
    importing torch), else from this process, warmed first. Its output is appended to ``log_path``.
    Always returns a row (deaths are classified)."""
    from bot.check.isolate import ForkRunner, run_fresh
    from bot.torch_adapter.runtime import warmed

    os.makedirs(workdir, exist_ok=True)
    own_log = os.path.join(workdir, f"{name}.log")
    t0 = time.time()
    forks = server.fork_server() if server is not None and not warmed() else None
    if forks is not None:   # this process need not import torch at all
        row = run_fresh(spec, settings, own_log, server=forks)
    else:
        procs.warm_parent()
        row = ForkRunner(warm=False).run(spec, settings, own_log)
    with open(log_path, "a", encoding="utf-8", errors="replace") as log, \
            open(own_log, encoding="utf-8", errors="replace") as fh:
        log.write(f"$ (forked check) {name}\n")
        log.write(fh.read())
        log.write(f"[{row.status}, {time.time() - t0:.1f} s]\n")
    return row


def localize(row: CheckRow, settings: Settings, workdir: str, log_path: str, timeout: float,
             on_event=None, server: procs.Interpreters | None = None) -> Localized:
    """Which stage fails first: the stage, each backend's verdict, the first failing backend (or None).

    Each stage is a check forked from the fork server (``server``) or this warmed process: no
    interpreter start per stage."""
    backends = stage_backends(row.backend or settings.backend)
    verdicts = []
    for backend in backends:
        r = run_check_forked(row.spec, replace(settings, backend=backend, timeout=timeout), log_path, workdir,
                             f"localize-{backend}", server=server)
        verdicts.append({"backend": backend, "status": r.status, "failure_class": r.failure_class})
        if on_event:
            on_event(Stage(backend, r.status))
        if r.failure_class:
            break
    ablation = [StageVerdict(v["backend"], v["status"]) for v in verdicts]
    first = next((v["backend"] for v in verdicts if v["failure_class"]), None)
    ablation.append(StageVerdict(row.backend, row.status))
    stage = dict(STAGES).get(first, "inductor") if first else (
        "inductor" if row.backend == "inductor" else dict(STAGES).get(row.backend, row.backend))
    return Localized(stage, ablation, first or row.backend)


SETTLED_BY = {("accuracy", 4), ("compile_error", 2)}  # (failure class, repro level of the capture)
# level 3 keeps every graph, not the failing one: the stage is inductor only if one of those graphs,
# run eagerly as inductor received it (decomposed), passes and fails compiled; minify finds out, and
# localize runs afterwards only when none does (to say which stage it is)
PROVISIONAL = {("accuracy", 3), ("runtime_error", 3), ("crash", 3)}


def settled_by_capture(row: CheckRow) -> Localized | None:
    """The first failing stage when the check's rerun already captured the failure after AOT
    autograd (bot.check.sweep): torch wrote a launcher at level 4 (the graph inductor received,
    already decomposed, differs from its own eager run) or at level 2 (inductor's compile of it
    raised), so the failure is in inductor and no localize run is needed. At level 3 (accuracy,
    runtime errors, crashes) the launchers are every graph, not the failing one: the answer is
    ``provisional`` (minify tries the graphs; localize runs after it if none fails on its own).
    None when the rerun captured nothing usable."""
    shared = row.capture
    key = (row.failure_class, shared.repro_level if shared is not None else None)
    if (row.backend != "inductor" or shared is None or key not in SETTLED_BY | PROVISIONAL
            or not shared.launchers or not any(os.path.isfile(str(x.path)) for x in shared.launchers)):
        return None
    provisional = key in PROVISIONAL
    return Localized("inductor", [StageVerdict("inductor", row.status)], "inductor", provisional,
                     f"settled by the check's rerun: torch's repro-after-aot level-{shared.repro_level} "
                     "capture wrote the graph inductor received" if not provisional else
                     "the check's rerun captured every graph inductor received (level 3): minifying them first; "
                     "the stages are rerun only if none fails on its own")


NO_COMPILE = "none"  # the hook's "do not compile at all" backend


def rerun_program(row: CheckRow, settings: Settings, workdir: str, log_path: str, name: str, timeout: float, *,
                  force_backend: str | None = None, extra_env: dict | None = None,
                  launcher_dir: str | None = None) -> CheckRow:
    """Rerun a command / harness check (not built in this process: the program runs again, with
    minify-bot's environment hook). Its output is appended to ``log_path``."""
    from bot.check.sweep import run_program

    os.makedirs(workdir, exist_ok=True)
    own_log = os.path.join(workdir, f"{name}.log")
    s = replace(settings, timeout=timeout)
    t0 = time.time()
    r = run_program(row.spec, s, own_log, extra_env=extra_env, force_backend=force_backend,
                    launcher_dir=launcher_dir)
    with open(log_path, "a", encoding="utf-8", errors="replace") as log, \
            open(own_log, encoding="utf-8", errors="replace") as fh:
        what = source_of(row.spec).describe(row.spec)
        extra = f" [backend forced to {force_backend}]" if force_backend else ""
        log.write(f"$ {what}{extra}\n")
        log.write(fh.read()[-100_000:])
        log.write(f"[{r.status}, {time.time() - t0:.1f} s]\n")
    return r


def localize_program(row: CheckRow, settings: Settings, workdir: str, log_path: str, timeout: float,
                     on_event=None) -> Localized:
    """Localize a program that minify-bot cannot build in-process: rerun it with the compile
    backend replaced (the harness: its own --backend; a command: the environment hook, which
    replaces the backend of every torch.compile / torch._dynamo.optimize call in the program).

    When the eager backend fails too, a command is run once more with compilation off
    altogether: if that fails as well, the program fails without the compiler (stage "eager")."""
    src = source_of(row.spec)
    backends = stage_backends(row.backend or settings.backend)

    def run(backend):
        r = rerun_program(row, settings, workdir, log_path, f"localize-{backend}", timeout, force_backend=backend)
        if on_event:
            on_event(Stage(backend, r.status))
        return r

    verdicts = probe(backends, run)
    first = next((v["backend"] for v in verdicts if v["failure_class"]), None)
    without = None
    # no stage before the backend: the program compiles with eager itself
    if (first == "eager" or not backends) and src.localizes_without_compile:
        r = rerun_program(row, settings, workdir, log_path, "localize-no-compile", timeout, force_backend=NO_COMPILE)
        without = r
        if on_event:
            on_event(Stage("no torch.compile", r.status))
    ablation = ([StageVerdict(NO_COMPILE, without.status)] if without else []) + \
        [StageVerdict(v["backend"], v["status"]) for v in verdicts]
    ablation.append(StageVerdict(row.backend, row.status))
    if without and without.failure_class and without.failure_class == row.failure_class:
        stage = "eager"   # it fails the same way with torch.compile taken out (a timeout there says nothing)
    elif first:
        stage = dict(STAGES).get(first, "inductor")
    else:
        stage = "inductor" if row.backend == "inductor" else dict(STAGES).get(row.backend, row.backend)
    return Localized(stage, ablation, first or row.backend)
