"""Capture: rerun the failing check in its own working/debug directory so the failing graph and
its real inputs are written to disk.

- inductor-stage failures: torch's ``TORCHDYNAMO_REPRO_AFTER=aot`` at the level that fits the class
  (4 accuracy, 2 compile error, 3 runtime error/crash: level 3 saves the real inputs);
- earlier stages (or ``--repro-after dynamo``): ``TORCHDYNAMO_REPRO_AFTER=dynamo`` only when a probe
  shows it works on a clean graph with this backend; otherwise (torch 2.13) this project's own
  dynamo-level capture backend (:func:`bot.torch_adapter.repro.capture_backend`).

The FX-graph and AOTAutograd caches are off in the capture run (a cache hit skips the repro
wrapper, so a warm machine would capture nothing); the C++ kernel cache stays warm.
"""

from __future__ import annotations

import contextlib
import filecmp
import glob
import os
import shutil
from dataclasses import dataclass, replace

from bot import rundir
from bot.check.one import CheckRequest, launch
from bot.check.settings import Settings
from bot.minify.worker import child
from bot.records import CheckRow, Launcher, RerunCapture
from bot.suites import source_of
from bot.suites.command import capture_env  # one definition, shared with the check's rerun

LEVEL_FOR_CLASS = {"accuracy": 4, "compile_error": 2, "runtime_error": 3, "crash": 3}
CAPTURE_BACKEND = "bot.torch_adapter.repro:capture_backend"


@dataclass
class Capture:
    launcher: str | None
    repro_after: str
    repro_level: int | None
    method: str            # "torch" | "project"
    note: str | None
    row: CheckRow | None   # the capture run's own row (None if the process died)
    candidates: list       # all graph files (dynamo-level capture can save several)
    graph_of: dict = None  # candidate path -> k (the k-th graph the program compiled), programs only
    graphs: int | None = None  # graphs the capture run compiled (None: unknown)


def trial_order(graphs: list[str], failure_class: str) -> list[str]:
    """Graphs in the order a capture wrote them, in the order minify tries them: an error's last
    first (the graph it stopped in), an accuracy failure's first first (a wrong forward shows in
    what every later graph is given)."""
    return list(graphs) if failure_class == "accuracy" else list(reversed(graphs))


def after_dynamo_note(row: CheckRow, settings: Settings) -> str:
    """What a capture after dynamo says of itself (a program's or a built model's)."""
    training = (row.mode or settings.mode) == "training"
    return "captured after dynamo" + (" (forward and backward together)" if training else "")


def level_for(failure_class: str) -> int:
    return LEVEL_FOR_CLASS.get(failure_class, 2)


def probe_dynamo(backend: str, workdir: str, log_path: str, timeout: float = 300) -> str | None:
    """None when TORCHDYNAMO_REPRO_AFTER=dynamo works on a clean graph here, else the reason."""
    res = child.run_logged([child.python(), "-m", "bot.minify.worker", "probe-dynamo", backend],
                           cwd=os.path.join(workdir, "probe"), log_path=log_path, timeout=timeout)
    from bot.minify.records import Probe, parse_event

    for ev in map(parse_event, res.events):
        if isinstance(ev, Probe):
            return ev.reason if ev.broken else None
    if res.timed_out:
        return f"the probe did not finish in {timeout:.0f} s"
    return f"the probe process failed (exit {res.returncode})"


def capture_config(level: int, debug_dir_root: str) -> dict:
    """Runtime config for an after-aot capture: torch's repro settings, and the AOTAutograd cache
    off (bot.torch_adapter.repro.CAPTURE_CACHE_CONFIG: its hit skips the repro wrapper)."""
    from bot.torch_adapter.repro import CAPTURE_CACHE_CONFIG

    return {"dynamo.repro_after": "aot", "dynamo.repro_level": level, "dynamo.debug_dir_root": debug_dir_root,
            **CAPTURE_CACHE_CONFIG}


def run_capture(row: CheckRow, settings: Settings, workdir: str, log_path: str, *, failure_class: str,
                stage_backend: str, repro_after: str, level: int | None, timeout: float,
                probe_note: str | None = None, server=None) -> Capture:
    from bot.torch_adapter.repro import CAPTURE_CACHE_ENV, launchers_dir

    capdir = os.path.join(workdir, "capture")
    os.makedirs(capdir, exist_ok=True)
    s = settings
    env_extra: dict = {}
    note = probe_note
    if repro_after == "aot":
        # forked from the fork server (``server``, a bot.minify.procs.Interpreters) or this warmed
        # process; the repro settings are patched at runtime (torch reads repro_after/repro_level/
        # debug_dir_root when it compiles, not at import)
        from bot.minify.localize import run_check_forked

        level = level or level_for(failure_class)
        debug = os.path.join(capdir, "torch_compile_debug")
        s = replace(s, config={**s.config, **capture_config(level, debug)}, timeout=timeout)
        cap_row = run_check_forked(row.spec, s, log_path, capdir, "capture", server=server)
        # every graph torch dumped (bot.torch_adapter.repro.keep_launchers), in the order written;
        # else torch's one launcher, the last graph's
        cands = trial_order(sorted(glob.glob(os.path.join(launchers_dir(debug), "launcher_*.py"))), failure_class)
        cands = cands or list(reversed(sorted(glob.glob(os.path.join(debug, "run_*", "minifier",
                                                                     "minifier_launcher.py")), key=os.path.getmtime)))
        if cap_row.failure_class == "timeout":
            note = ((note + "; ") if note else "") + f"the capture run hit its {timeout:.0f} s limit"
        return Capture(cands[0] if cands else None, "aot", level, "torch", note, cap_row, cands)
    elif repro_after == "dynamo-torch":
        level = level or (4 if failure_class == "accuracy" else 2)
        env_extra.update({"TORCHDYNAMO_REPRO_AFTER": "dynamo", "TORCHDYNAMO_REPRO_LEVEL": str(level),
                          "TORCH_COMPILE_DEBUG_DIR": capdir})
        s = replace(s, backend=stage_backend)
        method, repro_after = "torch", "dynamo"
    else:  # project's dynamo-level capture
        level = None
        s = replace(s, backend=CAPTURE_BACKEND)
        env_extra.update({"MINIFY_BOT_CAPTURE_DIR": os.path.join(capdir, "graphs"),
                          "MINIFY_BOT_CAPTURE_BACKEND": stage_backend})
        method, repro_after = "project", "dynamo"
    env_extra.update(CAPTURE_CACHE_ENV)
    cap_row, res = launch(CheckRequest(row.spec, s), cwd=capdir, log_path=log_path, timeout=max(1.0, timeout),
                          env=child.child_env(env_extra), python=child.python(), events=True)
    if method == "project":
        cands = sorted(glob.glob(os.path.join(capdir, "graphs", "graph_*.py")),
                       key=lambda p: int(os.path.basename(p)[6:-3]))
        cands = trial_order(cands, failure_class)
    else:
        cands = sorted(glob.glob(os.path.join(capdir, "torch_compile_debug", "run_*", "minifier",
                                              "minifier_launcher.py")), key=os.path.getmtime)
        cands = list(reversed(cands))
    if res.timed_out:
        note = ((note + "; ") if note else "") + f"the capture run hit its {timeout:.0f} s limit"
    return Capture(cands[0] if cands else None, repro_after, level, method, note, cap_row, cands)


def run_capture_program(row: CheckRow, settings: Settings, workdir: str, log_path: str, *, failure_class: str,
                        level: int | None, timeout: float) -> Capture:
    """Capture a command / harness failure: rerun the program with repro_after=aot through the
    environment. Every launcher torch writes is kept by the environment hook (torch overwrites
    its own minifier_launcher.py for each graph); each candidate remembers which graph it was
    ("graph k of n": k-th graph the program compiled, n graphs compiled in the run). Candidates
    come cheapest (smallest) first."""
    from bot.minify.localize import rerun_program

    capdir = os.path.join(workdir, "capture")
    os.makedirs(capdir, exist_ok=True)
    level = level or level_for(failure_class)
    debug = os.path.join(capdir, "debug")
    keep = os.path.join(capdir, "launchers")
    cap_row = shared_capture(row, level, log_path)
    shared = cap_row is not None
    if cap_row is None:
        with program_directory_kept(source_of(row.spec).workdir(row.spec), capdir):
            cap_row = rerun_program(row, settings, capdir, log_path, "capture", timeout,
                                    extra_env=capture_env(level, debug), launcher_dir=keep)
    kept = [x for x in cap_row.launchers or [] if x.path and os.path.exists(x.path)]
    if not kept:  # the hook could not keep copies: torch's own (last) launcher
        kept = [Launcher(None, p) for p in glob.glob(os.path.join(debug, "**", "minifier_launcher.py"), recursive=True)]
    kept.sort(key=lambda x: (os.path.getsize(x.path), x.path))
    graphs = cap_row.compiled_graphs
    note = "captured by the check's own rerun (it failed the same way)" if shared else None
    if cap_row.failure_class == "timeout":
        note = f"the capture run hit its {timeout:.0f} s limit"
    cap = Capture(kept[0].path if kept else None, "aot", level, "torch", note, cap_row.replace(launchers=None),
                  [x.path for x in kept])
    cap.graph_of = {x.path: x.graph for x in kept}
    cap.graphs = graphs
    return cap


@contextlib.contextmanager
def program_directory_kept(cwd: str | None, capdir: str):
    """While a program is rerun for capture: torch copies a graph it dumps at level 1 or 4 to
    ``./repro.py`` in the program's directory. Its copy is moved into the capture directory, and a
    ``repro.py`` of the user's own, which it would overwrite, comes back byte for byte (also when
    the rerun is killed)."""
    stray = os.path.join(cwd, rundir.REPRO) if cwd else None
    saved = os.path.join(capdir, "users_repro.py")
    own = bool(stray) and os.path.isfile(stray)
    if own:
        shutil.copy2(stray, saved)
    try:
        yield
    finally:
        try:
            if stray and os.path.isfile(stray) and not (own and filecmp.cmp(stray, saved, shallow=False)):
                shutil.move(stray, os.path.join(capdir, "repro_from_cwd.py"))
        finally:
            if own:
                if not os.path.exists(stray):
                    shutil.copy2(saved, stray)
                os.remove(saved)


def run_capture_program_dynamo(row: CheckRow, settings: Settings, workdir: str, log_path: str, *,
                               failure_class: str, backend: str, timeout: float) -> Capture:
    """Capture a command / harness failure after dynamo: rerun the program with the backend of
    every compile replaced (the environment hook) by minify-bot's capture backend, which saves each
    graph dynamo traced with its real inputs (forward and backward stay one graph: what the program
    differentiates is in its inputs' ``requires_grad``), before it hands the graph to ``backend``, so
    a failure in AOTAutograd or a decomposition (a compile error) still leaves it. Candidates: for an
    error the graph compiled last first (the one it stopped in), for accuracy the smallest first."""
    from bot.minify.localize import rerun_program
    from bot.torch_adapter.repro import CAPTURE_CACHE_ENV, CAPTURE_DIR_ENV, CAPTURE_INNER_ENV

    capdir = os.path.join(workdir, "capture-dynamo")
    graphs = os.path.join(capdir, "graphs")
    env = {CAPTURE_DIR_ENV: graphs, CAPTURE_INNER_ENV: backend, **CAPTURE_CACHE_ENV}
    cap_row = rerun_program(row, settings, capdir, log_path, "capture-dynamo", timeout, force_backend=CAPTURE_BACKEND,
                            extra_env=env)
    found = sorted(glob.glob(os.path.join(graphs, "graph_*.py")), key=lambda p: int(os.path.basename(p)[6:-3]))
    graph_of = {p: int(os.path.basename(p)[6:-3]) + 1 for p in found}
    cands = (list(reversed(found)) if failure_class != "accuracy"
             else sorted(found, key=lambda p: (os.path.getsize(p), p)))
    note = after_dynamo_note(row, settings)
    if cap_row.failure_class == "timeout":
        note += f"; the capture run hit its {timeout:.0f} s limit"
    cap = Capture(cands[0] if cands else None, "dynamo", None, "project", note, cap_row.replace(launchers=None), cands)
    cap.graph_of, cap.graphs = graph_of, cap_row.compiled_graphs
    return cap


def shared_capture(row: CheckRow, level: int, log_path: str) -> CheckRow | None:
    """The capture the check's own rerun made (bot.check.sweep: a failing program's rerun runs with
    repro-after at its class's level and failed the same way), as a capture run's row; None when
    there is none at this level on this machine (then the program is run again for capture)."""
    shared = row.capture
    if shared is None or shared.repro_level != level:
        return None
    kept = _kept(shared)
    if not kept:
        return None
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"capture: the check's rerun captured {len(kept)} launcher(s) at level {level}; "
                  "not run again\n")
    return CheckRow(status=row.status, failure_class=row.failure_class, launchers=kept,
                    compiled_graphs=shared.graphs)


def shared_first(levels: list, row: CheckRow) -> list:
    """The capture levels with the one the check's rerun already captured at first (its launchers
    cost no run; an accuracy failure's rerun keeps every graph at level 3)."""
    shared = row.capture
    level = shared.repro_level if shared is not None and _kept(shared) else None
    return [level] + [x for x in levels if x != level] if level in levels else levels


def _kept(shared: RerunCapture) -> list[Launcher]:
    """The rerun's launchers that are on this machine (a merged run's may be another job's)."""
    return [x for x in shared.launchers or [] if isinstance(x.path, str) and os.path.isfile(x.path)]
