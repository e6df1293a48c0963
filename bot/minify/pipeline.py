"""One failure end to end: localize -> capture -> reduce -> package -> verify -> failure.json."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Callable

from bot import known as kn
from bot import rundir
from bot.minify import capture as cap
from bot.minify import localize as loc
from bot.minify import package as pkg
from bot.minify import procs, reuse
from bot.minify import reduce as red
from bot.minify import verify as ver
from bot.signature import ABORT_TYPE, MINIFIABLE_CLASSES, Signature, short_type, verified_signature

SCHEMA = rundir.FAILURE_SCHEMA

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
                    "processes): its failure is not a compiler failure; nothing to minify")


@dataclass
class Options:
    repro_after: str | None = None      # None: by stage; "aot" | "dynamo"
    repro_level: int | None = None
    strict_accuracy: bool = False
    offload_to_disk: bool = False
    isolate: bool = False
    budget: float = 600.0
    verify_runs: int = 3
    localize: bool = True
    bisect: bool = True
    check_timeout: float = 900.0
    keep_work: bool = False
    known: list = field(default_factory=list)  # bot.known.KnownRepro: open issues' verified repros


def empty_repro(status: str, reason: str | None) -> dict:
    return {"status": status, "reason": reason, "path": None, "standalone_path": None, "inputs_dir": None,
            "log": None, "nodes_before": None, "nodes_after": None, "queries": 0, "seconds": 0.0, "graph": None,
            "verification": None, "capture": None, "timings": {}, "reused": None}


def base_record(row: dict) -> dict:
    acc = row.get("accuracy")
    return {
        "schema": SCHEMA,
        "id": row["id"],
        "check": row,
        "class": row.get("failure_class"),
        "stage": None,
        "ablation": None,
        "bisect": None,
        "culprit": None,
        "error": row.get("error"),
        "accuracy": ({k: acc.get(k) for k in ("tolerance", "rmse_res", "rmse_ref")}
                     if row.get("failure_class") == "accuracy" and isinstance(acc, dict) else None),
        "repro": empty_repro("none", None),
        "config": {"diff": [], "minimal": None},
        "versions": {},
        "flaky": False,
        "signature": None,  # set once verification proves the minimized repro fails the same way
    }


def process(row: dict, settings: dict, run_dir: str, opts: Options, versions: dict,
            say: Callable[[str], None], launcher: str | None = None,
            interpreters: procs.Interpreters | None = None) -> dict:
    """Minify one failure; always returns (and writes) a failure record. ``interpreters``: the
    caller's verification fork server (shared by its failures; the caller closes it)."""
    fid = row["id"]
    fdir = os.path.join(run_dir, "failures", fid)
    work = os.path.join(run_dir, "minify-work", fid)
    shutil.rmtree(fdir, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(fdir, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    log_path = os.path.join(fdir, "minifier.log")
    rec = base_record(row)
    rec["versions"] = versions
    t0 = time.time()
    try:
        _process(rec, row, settings, fdir, work, log_path, opts, say, launcher, interpreters)
    except Exception as exc:  # noqa: BLE001 - one failure's crash must not stop the others
        rec["repro"] = dict(empty_repro("none", f"minify-bot internal error: {type(exc).__name__}: {exc}"),
                            log="minifier.log")
        import traceback

        with open(log_path, "a") as fh:
            fh.write(traceback.format_exc())
        say(f"{fid}: internal error: {type(exc).__name__}: {exc}")
    if os.path.exists(log_path):
        rec["repro"]["log"] = "minifier.log"
    timings = rec["repro"].setdefault("timings", {})
    timings["total"] = round(time.time() - t0, 2)
    say(f"{fid}: timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    rundir.write_failure(fdir, rec)
    if not opts.keep_work and rec["repro"]["status"] in ("minimized", "partial", "none", "not_reproduced"):
        shutil.rmtree(work, ignore_errors=True)
        try:
            os.rmdir(os.path.join(run_dir, "minify-work"))
        except OSError:
            pass
    return rec


def _process(rec, row, settings, fdir, work, log_path, opts: Options, say, launcher, interpreters=None):
    fid = row["id"]
    fclass = row.get("failure_class")
    if launcher is None:
        if fclass in NOT_MINIFIED or fclass not in MINIFIABLE_CLASSES:
            rec["repro"]["reason"] = NOT_MINIFIED.get(fclass, f"failure class {fclass!r} is not minified")
            say(f"{fid}: skipped: {rec['repro']['reason']}")
            return
        program = (row.get("spec") or {}).get("source") in loc.PROGRAM_SOURCES
        if program and (row.get("compile_frames") if "compile_frames" in row else row.get("compiled_graphs")) == 0:
            rec["repro"]["reason"] = COMPILED_NOTHING
            say(f"{fid}: skipped: {COMPILED_NOTHING}")
            return
        # 0. a known bug: a short verify of the open issue's repro instead of minifying again
        entry = kn.match(opts.known, row)
        if entry is not None and reuse.reuse(rec, entry, fdir, log_path, lambda m: say(f"{fid}: {m}")):
            return
        # 1. localize
        stage_backend = row.get("backend") or settings.get("backend")
        timings = rec["repro"]["timings"]
        provisional = False
        if opts.localize:
            t = time.time()
            lz = loc.settled_by_capture(row) if program else None
            if lz is not None:
                say(f"{fid}: localize: {lz['note']}")
            else:
                lz = _localize(row, settings, os.path.join(work, "localize"), log_path, opts, say, program)
            rec["stage"], rec["ablation"] = lz["stage"], lz["ablation"]
            stage_backend = lz["first_failing"]
            provisional = bool(lz.get("provisional"))
            timings["localize"] = round(time.time() - t, 2)
        else:
            rec["stage"] = "inductor" if stage_backend == "inductor" else stage_backend
        say(f"{fid}: first failing stage: {rec['stage']}")
        if rec["stage"] == "eager":
            rec["repro"]["reason"] = FAILS_WITHOUT_COMPILER
            return
        if rec["stage"] == "dynamo":
            rec["repro"]["reason"] = ("the check already fails with the eager backend: the bug is in dynamo's "
                                      "tracing, before a graph reaches a compiler; graph minification does not apply")
            return
        # 2. capture, then reduce and verify; torch's level-4 accuracy check can miss a real
        # accuracy failure (it dumps nothing, or a graph that passes on its own): then every graph
        # is captured at level 3 and judged by the worker's own predicate
        levels = _capture_levels(fclass, opts)
        if program:
            levels = cap.shared_first(levels, row)
        for i, level in enumerate(levels):
            wk = work if i == 0 else os.path.join(work, f"level{level}")
            if program:
                ok = _capture_program(rec, row, settings, wk, log_path, opts, say, fclass, stage_backend, level)
                c = rec.pop("_capture", None)
                # level 3 dumps every graph: a program of many graphs can fail in any of them
                candidates = c.candidates[:16 if level == 3 else 8] if ok else None
            else:
                c = None
                candidates = _capture_built(rec, row, settings, wk, log_path, opts, say, fclass, stage_backend, level)
            if candidates is not None:
                _reduce_and_verify(rec, row, fdir, wk, log_path, opts, say, None, candidates, stage_backend, fclass,
                                   c, interpreters)
            if rec["class"] == "accuracy" and level == 3:  # the check's class, or the one the graph showed
                _note(rec, "every graph was captured at level 3 and judged by minify-bot's predicate (fp64 reference, "
                      "the check's tolerance)" + (f", after torch's level-{levels[0]} accuracy check gave no graph "
                                                  "that fails on its own" if i > 0 else ""))
            if (rec["repro"]["status"] not in ("none", "not_reproduced") or rec["flaky"] or i == len(levels) - 1
                    or (rec["repro"].get("capture") or {}).get("repro_after") != "aot"):
                break
            say(f"{fid}: capture: no graph captured at level {level} fails on its own; capturing at level "
                f"{levels[i + 1]}" + (" (every graph)" if levels[i + 1] == 3 else ""))
        if provisional and rec["repro"]["status"] in ("none", "not_reproduced") and not rec["flaky"]:
            _localize_after(rec, row, settings, work, log_path, opts, say)
        return
    else:
        c = None
        candidates = [launcher]
        timings = rec["repro"]["timings"]
        stage_backend = "inductor"
        rec["stage"] = "inductor"
        rec["repro"]["capture"] = {"repro_after": None, "repro_level": None, "method": "given", "note": None}
    _reduce_and_verify(rec, row, fdir, work, log_path, opts, say, launcher, candidates, stage_backend, fclass, c,
                       interpreters)


def _localize(row, settings, wdir, log_path, opts: Options, say, program: bool) -> dict:
    """Rerun the check (or the program) with the debug backends: the first failing stage."""
    fid = row["id"]
    say(f"{fid}: localize: rerunning {'the program ' if program else ''}with eager / aot_eager / "
        "aot_eager_decomp_partition")
    return (loc.localize_program if program else loc.localize)(
        row, settings, wdir, log_path, opts.check_timeout,
        on_event=lambda e: say(f"{fid}: localize: {e['backend']}: {e['status']}")
        if e.get("event") == "stage" else None)


def _localize_after(rec, row, settings, work, log_path, opts: Options, say) -> None:
    """No graph inductor received fails on its own: which stage does the program fail at? (The
    stage was taken from the check's level-3 capture before minify; now the stages are rerun.)"""
    fid = row["id"]
    t = time.time()
    say(f"{fid}: localize: no captured graph fails on its own")
    lz = _localize(row, settings, os.path.join(work, "localize-after"), log_path, opts, say, True)
    rec["repro"]["timings"]["localize"] = round(rec["repro"]["timings"].get("localize", 0) + time.time() - t, 2)
    rec["stage"], rec["ablation"] = lz["stage"], lz["ablation"]
    say(f"{fid}: first failing stage: {rec['stage']}")
    if rec["stage"] == "eager":
        rec["repro"].update(status="none", reason=FAILS_WITHOUT_COMPILER)
    elif rec["stage"] != "inductor":
        rec["repro"].update(status="none", reason=(
            f"the program already fails at stage {rec['stage']}: the graphs inductor received do not fail on "
            "their own (" + str(rec["repro"].get("reason")) + ")"))


def _capture_levels(fclass: str | None, opts: Options) -> list[int | None]:
    """The repro levels a failure is captured at, in order: the user's, or the one that fits the
    class; an accuracy failure at level 4 falls back to level 3 (every graph with real inputs)."""
    if opts.repro_level is not None:
        return [opts.repro_level]
    level = cap.level_for(fclass)
    return [level, 3] if level == 4 else [level]


def _note(rec: dict, text: str) -> None:
    capture = rec["repro"].get("capture")
    if capture is not None:
        capture["note"] = "; ".join(x for x in (capture.get("note"), text) if x)


def _capture_program(rec, row, settings, work, log_path, opts, say, fclass, stage_backend, level=None) -> bool:
    """Capture a command / harness failure through the environment; False (reason set) when no graph."""
    fid = row["id"]
    timings = rec["repro"]["timings"]
    if rec["stage"] != "inductor" or stage_backend != "inductor" or opts.repro_after == "dynamo":
        rec["repro"]["reason"] = (
            f"first failing stage {rec['stage']} (backend {stage_backend}): a program is captured with "
            "TORCHDYNAMO_REPRO_AFTER=aot, which wraps inductor only; capture this one by hand with "
            "TORCHDYNAMO_REPRO_AFTER=dynamo and `minify-bot minify --repro`")
        say(f"{fid}: {rec['repro']['reason']}")
        return False
    level = level or opts.repro_level or cap.level_for(fclass)
    say(f"{fid}: capture: rerunning the program with TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL={level}")
    t = time.time()
    c = cap.run_capture_program(row, settings, work, log_path, failure_class=fclass, level=level,
                                timeout=opts.check_timeout)
    timings["capture"] = round(timings.get("capture", 0) + time.time() - t, 2)
    rec["repro"]["capture"] = {"repro_after": "aot", "repro_level": level, "method": "environment",
                               "note": c.note, "graph": None, "graphs": c.graphs}
    if c.launcher is None:
        _no_graph_captured(rec, c.row, "program", _no_launcher_reason(c, level), lambda m: say(f"{fid}: {m}"))
        return False
    say(f"{fid}: capture: {len(c.candidates)} launcher(s) from {c.graphs if c.graphs is not None else '?'} "
        "compiled graph(s)")
    rec["_capture"] = c
    return True


def _no_launcher_reason(c: cap.Capture, level: int) -> str:
    """Why a program's capture run left no launcher, in what is known: torch's level-4 check found
    no compiled graph wrong; the program compiled graphs but torch wrote nothing for them; or no
    graph was compiled through the environment torch was given."""
    status = (c.row or {}).get("status")
    if c.graphs == 0:
        return (f"the capture run (status {status}) compiled no graph with inductor: the program does not "
                "pass torch's environment variables on to the process that compiles, or it failed before compiling")
    graphs = f"{c.graphs} graph(s)" if c.graphs is not None else "its graphs"
    if level == 4:
        return (f"torch's level-4 accuracy check passed each of the {graphs} the capture run compiled "
                f"(status {status}): the wrong result appears outside what inductor compiled, or only in how "
                "the program combines the graphs")
    return (f"torch wrote no launcher for the {graphs} the capture run compiled at level {level} (status {status})")


def _no_graph_captured(rec: dict, cap_row: dict | None, rerun: str, no_graph_reason: str, say) -> None:
    """The capture rerun left no graph: the failure did not recur (flaky), or it did but nothing was saved."""
    if cap_row is not None and not cap_row.get("failure_class"):
        rec["flaky"] = True
        rec["repro"].update(status="not_reproduced", reason=(
            f"the failure did not recur when the {rerun} was rerun for capture (status {cap_row.get('status')})"))
    else:
        rec["repro"].update(status="none", reason=no_graph_reason)
    say(rec["repro"]["reason"])


def _capture_built(rec, row, settings, work, log_path, opts, say, fclass, stage_backend, level=None):
    fid = row["id"]
    timings = rec["repro"]["timings"]
    mode = opts.repro_after or ("aot" if rec["stage"] == "inductor" and stage_backend == "inductor" else "dynamo")
    note = None
    if mode == "aot" and stage_backend != "inductor":
        mode = "dynamo"
        note = "repro_after=aot wraps inductor only; captured after dynamo instead"
    if mode == "dynamo":
        reason = cap.probe_dynamo(stage_backend, work, log_path)
        if reason is None:
            mode = "dynamo-torch"
        else:
            note = ((note + "; ") if note else "") + (
                f"torch's TORCHDYNAMO_REPRO_AFTER=dynamo fails on a clean graph with backend {stage_backend!r} "
                f"here ({reason}); captured with minify-bot's own dynamo-level capture backend instead")
            mode = "project"
            say(f"{fid}: {note}")
    level = level or opts.repro_level
    say(f"{fid}: capture: repro_after={'dynamo' if mode != 'aot' else 'aot'}"
        f"{'' if mode == 'project' else ' level ' + str(level or cap.level_for(fclass))}")
    t = time.time()
    c = cap.run_capture(row, settings, work, log_path, failure_class=fclass, stage_backend=stage_backend,
                        repro_after=mode, level=level, timeout=opts.check_timeout, probe_note=note)
    timings["capture"] = round(timings.get("capture", 0) + time.time() - t, 2)
    rec["repro"]["capture"] = {"repro_after": c.repro_after, "repro_level": c.repro_level, "method": c.method,
                               "note": c.note}
    if c.launcher is None:
        _no_graph_captured(rec, c.row, "check", "the capture run wrote no graph" + (
            f" (status {c.row.get('status')})" if c.row else " (the capture process died)"),
            lambda m: say(f"{fid}: {m}"))
        return None
    return c.candidates[:4]


def _reduce_and_verify(rec, row, fdir, work, log_path, opts, say, launcher, candidates, stage_backend, fclass, c,
                       interpreters=None):
    # the fork server starts now (if it has not yet): the minify worker and each verification run
    # are processes forked from it (each verification run still runs the repro and nothing else).
    # The run with random inputs is usually not needed (the worker decides it).
    own = None if interpreters is not None else procs.Interpreters(opts.verify_runs)
    try:
        _reduce_then_verify(rec, row, fdir, work, log_path, opts, say, launcher, candidates, stage_backend,
                            fclass, c, (interpreters or own).start())
    finally:
        if own is not None:
            own.close()


def _reduce_then_verify(rec, row, fdir, work, log_path, opts, say, launcher, candidates, stage_backend, fclass, c,
                        interps):
    fid = row["id"]
    timings = rec["repro"]["timings"]
    # 3. reduce
    # a failure that aborted the check's process (a C++ exception thrown inside an OpenMP region)
    # would abort an in-process worker too: one forked process per query from the start
    aborts = launcher is None and short_type((row.get("error") or {}).get("type")) == ABORT_TYPE
    result = None
    early: _EarlyVerify | None = None
    for i, cand in enumerate(candidates):
        wdir = os.path.join(work, f"minify{i}")
        say(f"{fid}: minify: {'isolated ' if opts.isolate or aborts else ''}culprit search and reduction on "
            f"{os.path.relpath(cand, work) if cand.startswith(work) else os.path.basename(cand)}")
        progress = {"last": None, "signature": None}

        def on_event(e, progress=progress):
            nonlocal early
            if e.get("event") == "loaded":
                say(f"{fid}: minify: {e['nodes']} nodes")
            elif e.get("event") == "checkpoint" and e.get("nodes") != progress["last"]:
                progress["last"] = e.get("nodes")
                say(f"{fid}: minify: -> {e['nodes']} nodes")
            elif e.get("event") == "signature":
                progress["signature"] = e.get("signature")
            elif (e.get("event") == "final" and e.get("bisects") and early is None
                  and Signature.from_json(progress["signature"])):
                # the worker runs the bisector next: verify the final repro meanwhile
                say(f"{fid}: verify: {_verify_plan(opts, e.get('random_inputs_reproduce'))} (while the bisector runs)")
                early = _EarlyVerify(e, Signature.from_json(progress["signature"]), opts, fdir, interps)
        job = {
            "repro": cand, "workdir": wdir, "class": fclass if launcher is None else _class_of_launcher(cand),
            "class_uncertain": _class_uncertain(row, launcher, cand),
            "original_error": row.get("error"), "tolerance": (row.get("accuracy") or {}).get("tolerance") or 1e-4,
            "strict_accuracy": opts.strict_accuracy, "offload_to_disk": opts.offload_to_disk,
            "isolate": opts.isolate or aborts, "budget": opts.budget, "check_config": row.get("config") or {},
            "bisect": opts.bisect and rec["stage"] == "inductor", "backend": stage_backend or "inductor",
        }
        t = time.time()
        result = red.reduce(job, log_path, on_event=on_event, interpreters=interps)
        timings["reduce_total"] = round(timings.get("reduce_total", 0) + time.time() - t, 2)
        for k, v in (result.get("timings") or {}).items():
            timings[k] = round(timings.get(k, 0) + v, 2)
        if c is not None and c.graph_of is not None:
            rec["repro"]["capture"]["graph"] = c.graph_of.get(cand)
        if result.get("status") != "not_reproduced" or len(candidates) == 1:
            break
    assert result is not None
    sig = Signature.from_json(result.get("signature"))
    judge = result.get("judge") or {}
    if sig is not None and (launcher is not None or job["class_uncertain"]):
        rec["class"] = sig.failure_class  # learned from the graph: the check could not tell
    rec["bisect"] = result.get("bisect")
    rec["culprit"] = result.get("culprit")
    if result.get("graph_role"):
        rec["repro"]["capture"]["role"] = result["graph_role"]
    if result.get("dynamic"):
        rec["repro"]["capture"]["dynamic"] = True
    rec["config"] = {"diff": result.get("config_diff") or [], "minimal": result.get("config_minimal")}
    r = rec["repro"]
    r.update(nodes_before=result.get("nodes_before"), nodes_after=result.get("nodes_after"),
             queries=result.get("queries") or 0, seconds=result.get("seconds") or 0.0, graph=result.get("graph"))
    if result.get("note"):
        r["capture"]["note"] = "; ".join(x for x in (r["capture"].get("note"), result["note"]) if x)
    if result.get("status") not in ("minimized", "partial") or sig is None:
        if early is not None:
            early.discard()
        r.update(status=result.get("status") if result.get("status") in ("not_reproduced", "none") else "none",
                 reason=result.get("reason"))
        if r["status"] == "not_reproduced" and row.get("classified_by") == "exit status":
            r["reason"] = (f"{r['reason']}; the check's failure class ({fclass}) came from the program's exit "
                           "status alone: if the program reports a wrong result in its own words, say which "
                           "with --accuracy-pattern")
        say(f"{fid}: no repro: {r['reason']}")
        return
    partial = " (partial: " + str(result.get("reason")) + ")" if result["status"] == "partial" else ""
    say(f"{fid}: minify: {r['nodes_before']} -> {r['nodes_after']} nodes in {r['queries']} queries, "
        f"{r['seconds']:.1f} s{partial}")

    # 4. package + verify (begun while the bisector ran, when the worker announced the same repro)
    def vlog(msg):
        with open(log_path, "a") as fh:
            fh.write(msg + "\n")

    final = result["final"]
    rnd_known = result.get("random_inputs_reproduce")
    judge_lines = judge.get("config") or None
    config = _repro_config(rec["config"]["minimal"], rec["config"]["diff"])
    done = early.outcome(final, config, rnd_known, vlog, judge_lines) if early is not None else None
    if done is None:
        say(f"{fid}: verify: {_verify_plan(opts, rnd_known)}")
        done = _package_and_verify(final, config, sig, rnd_known, opts, fdir, vlog, interps, judge_lines)
    path, v = done
    timings["package"] = v.pop("package_seconds")
    timings["verify"] = v["seconds"]
    for fallback, why in _config_fallbacks(rec["config"], config):
        if v["failed_same_way"]:
            break
        vlog(f"the repro did not reproduce with {why}; retrying with {_config_words(fallback)}")
        path, v = _package_and_verify(final, fallback, sig, rnd_known, opts, fdir, vlog, interps, judge_lines)
        timings["verify"] = round(timings["verify"] + v["seconds"], 2)
        if v["failed_same_way"]:
            config = fallback
            rec["config"]["minimal"] = None
    r["verification"] = {"runs": v["runs"], "failed_same_way": v["failed_same_way"],
                         "random_inputs_reproduce": v["random_inputs_reproduce"]}
    r.update(path="repro.py", inputs_dir="inputs")
    say(f"{fid}: verify: {v['failed_same_way']}/{v['runs']} fresh runs fail the same way; random inputs "
        f"{'reproduce' if v['random_inputs_reproduce'] else 'do not reproduce'}")
    if v["failed_same_way"] == 0:
        # the worker's culprit and the bisector's answer are not proven: they stay in the log only
        named = ", ".join((rec.get("culprit") or {}).get("ops") or [])
        rec["culprit"], rec["bisect"] = None, None
        r.update(status="not_reproduced",
                 reason=f"the minimized repro did not fail the same way in {v['runs']} fresh processes"
                        + (f" (the minify worker's candidate culprit, {named}, is not verified)" if named else ""))
        return
    r["status"] = result["status"]
    r["reason"] = result.get("reason")
    rec["signature"] = verified_signature(sig, rec).to_json()
    if v["random_inputs_reproduce"]:
        pkg.write_standalone(fdir, config, final, judge_lines)
        r["standalone_path"] = "repro_standalone.py"


def _repro_config(minimal: list | None, diff: list | None) -> list:
    """The config lines a packaged repro carries: the minimal config when it was found, else the
    whole diff of non-default settings (empty: none at all; torch's repro files carry every
    setting, hundreds of lines that say nothing about the failure)."""
    return list(minimal) if minimal is not None else list(diff or [])


def _config_fallbacks(cfg: dict, tried: list | None) -> list[tuple[list | None, str]]:
    """What a repro that did not reproduce with ``tried`` is packaged with next, in order: the
    whole diff, then every setting the captured file carried (None)."""
    out: list[tuple[list | None, str]] = []
    if tried is not None and cfg.get("diff") and list(cfg["diff"]) != list(tried):
        out.append((list(cfg["diff"]), _config_words(tried)))
    out.append((None, _config_words(out[-1][0] if out else tried)))
    return out


def _config_words(config: list | None) -> str:
    if config is None:
        return "every setting of the captured file"
    return f"{len(config)} non-default setting(s)" if config else "no settings"


def _class_uncertain(row: dict, launcher: str | None, cand: str) -> bool:
    """The check's class may not be the graph's: a program judged by its exit status alone, or a
    launcher written without torch's accuracy check (the worker then judges the result too)."""
    if launcher is not None:
        return _class_of_launcher(cand) != "accuracy"
    return row.get("classified_by") == "exit status"


def _verify_plan(opts: Options, random_known) -> str:
    n = opts.verify_runs + (random_known is None)
    at_once = ver.side_by_side(n)
    return (f"{opts.verify_runs} fresh runs{' + 1 with random inputs' if random_known is None else ''}, "
            + ("all at once" if at_once >= n else f"{at_once} at a time"))


def _package_and_verify(final: str, config, sig: Signature, random_known, opts: Options, fdir: str, vlog,
                        interps, judge_lines=None) -> tuple[str, dict]:
    """Write failures/<id>/repro.py (+ inputs) from the worker's final repro and verify it in fresh
    processes; (path, verification) with the packaging time in ``package_seconds``."""
    from bot.torch_adapter.repro import parse_repro_file

    t = time.time()
    path = pkg.write_repro(final, parse_repro_file(final).save_dir, fdir, config, judge_lines)
    package_seconds = round(time.time() - t, 2)
    v = ver.verify(path, sig, opts.verify_runs, log=vlog, random_known=random_known, interpreters=interps)
    return path, dict(v, package_seconds=package_seconds)


def _digest(path: str) -> str | None:
    """The repro's identity (its inputs are named by content hash inside it)."""
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


class _EarlyVerify:
    """Verification of the final repro the worker announced (event ``final``) before it ran the
    bisector: it runs in the background while the worker bisects. Its log lines are held until
    the outcome is taken, so that they do not interleave with the worker's."""

    def __init__(self, event: dict, sig: Signature, opts: Options, fdir: str, interps):
        from bot import proc

        self.event = event
        self.digest = _digest(event["path"])  # the worker wrote it before it announced it
        self.fdir = fdir
        self.lines: list[str] = []
        self.config = config = _repro_config(event.get("config_minimal"), event.get("config_diff"))
        self.judge_lines = judge_lines = (event.get("judge") or {}).get("config") or None
        self.job = proc.background(lambda: _package_and_verify(
            event["path"], config, sig, event.get("random_inputs_reproduce"), opts, fdir, self.lines.append,
            interps, judge_lines), name="verify")

    def outcome(self, final: str, config, random_known, vlog, judge_lines=None) -> tuple[str, dict] | None:
        """The verification, when it verified this very repro; None (and what it wrote is gone)
        when the worker's result is another one (it died while bisecting; a checkpoint was kept)."""
        try:
            done = self.job.result()
        except Exception as exc:  # noqa: BLE001 - verified again the ordinary way
            vlog(f"verification during the bisection failed: {type(exc).__name__}: {exc}")
            self.discard()
            return None
        if not (os.path.realpath(final) == os.path.realpath(self.event["path"]) and _digest(final) == self.digest
                and config == self.config and random_known == self.event.get("random_inputs_reproduce")
                and judge_lines == self.judge_lines):
            self.discard()
            return None
        for line in self.lines:
            vlog(line)
        return done

    def discard(self) -> None:
        """Wait for it and remove the repro it packaged."""
        self.job.wait()
        shutil.rmtree(os.path.join(self.fdir, "inputs"), ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(self.fdir, "repro.py"))


def _class_of_launcher(path: str) -> str:
    from bot.torch_adapter.repro import parse_repro_file

    rf = parse_repro_file(path)
    return "accuracy" if rf.accuracy else "error"
