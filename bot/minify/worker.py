"""The minify worker: runs in a process of its own, started by :mod:`bot.minify.reduce`.

    python -m bot.minify.worker minify JOB.json     reduce a captured graph (fast path: in-process
                                                     queries; or --isolate: one forked process per query)
    python -m bot.minify.worker probe-dynamo BACKEND does TORCHDYNAMO_REPRO_AFTER=dynamo work here?

Normally :func:`cmd_minify` runs in a child forked from the minify command's warmed process
(see reduce.py); the command line is the fresh-process variant. JOB.json is written by the parent.
Progress goes to stdout as lines starting with ``@@ `` followed by JSON; everything else is the
minifier log.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from bot.signature import (
    Signature,
    bisect_words,
    consistent,
    exception_chain,
    signature_of_error_record,
    signature_of_exception,
)

CRASH_HOOK_ENV = "MINIFY_BOT_WORKER_CRASH_AFTER"   # fault injection: hard-exit after N in-process queries
BISECT_CRASH_ENV = "MINIFY_BOT_WORKER_CRASH_IN_BISECT"  # fault injection: =1: hard-exit when the bisector starts
NO_HINTS_ENV = "MINIFY_BOT_NO_SEARCH_HINTS"        # =1: culprit search without hints (benchmarks compare)


class BudgetExceeded(Exception):
    pass


def emit(**kw) -> None:
    sys.stdout.write("@@ " + json.dumps(kw) + "\n")
    sys.stdout.flush()


def log(msg: str) -> None:
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------------------------------
# loading a repro into (gm, args)
# ------------------------------------------------------------------------------------------


def load_graph(path: str, kind_hint: str | None = None):
    from bot.torch_adapter import repro as R

    rf = R.parse_repro_file(path)
    loaded = R.load_repro_file(rf)
    args = R.read_inputs(loaded, rf.save_dir)
    if rf.kind == "dynamo":
        gm = R.trace_dynamo_graph(loaded)
    else:
        gm = R.trace_aot_graph(loaded, args)
    return rf, gm, args


# ------------------------------------------------------------------------------------------
# the predicate
# ------------------------------------------------------------------------------------------


class Evaluator:
    """Evaluates one candidate graph in this process and returns (fails_same_way, signature)."""

    def __init__(self, job: dict, kind: str, pinned: Signature | None):
        self.job = job
        self.cls = job["class"]
        self.kind = kind
        self.backend = job.get("backend") or "inductor"
        self.pinned = pinned
        self.tol = float(job.get("tolerance") or 1e-4)
        self.strict = bool(job.get("strict_accuracy"))
        # integer and bool outputs are compared exactly when the failure is in them (the sanity
        # step learns it), or under --strict-accuracy
        self.ignore_non_fp = not (self.strict or job.get("compare_non_fp"))
        self.queries = 0
        self.last_error = ""
        self.deadline = job.get("deadline")
        hook = os.environ.get(CRASH_HOOK_ENV, "")
        self.crash_after = int(hook) if hook.strip().isdigit() else None

    def compile(self, gm, args):
        from bot.torch_adapter import minifier as M

        if self.kind == "dynamo":
            return M.compile_dynamo(gm, self.backend, dynamic=bool(self.job.get("dynamic")))
        if self.kind == "backend":
            return M.compile_backend(gm, args, self.backend)
        return M.compile_aot(gm, args)

    def observe(self, gm, args) -> Signature | None:
        """Run the candidate; the signature of how it fails, or None when it does not fail."""
        import torch

        from bot.torch_adapter import minifier as M
        from bot.torch_adapter import repro as R

        if not M.has_compute(gm):
            return None  # an empty graph never reproduces a compiler bug
        if self.job.get("dynamic") and not R.symbolic_placeholders(gm):
            return None  # captured with dynamic shapes: a candidate whose sizes became constants
            #              would no longer show a dynamic-shapes-only bug (never specialize it away)
        try:
            with torch.no_grad():
                ref = M.run_eager(gm, args)
        except Exception:  # noqa: BLE001 - any eager failure makes the candidate invalid
            return None  # eager must run for the graph to be a valid candidate
        phase = "compile_error"
        try:
            with torch.no_grad():
                fn = self.compile(gm, args)
                phase = "runtime_error"
                res = fn(M.clone_inputs(args))
        except Exception as exc:  # noqa: BLE001 - any failure is data here
            if self.cls == "accuracy":
                return None  # never drift from a wrong result to an error
            self.last_error = "\n".join(f"{type(e).__name__}: {e}" for e in exception_chain(exc))[-20000:]
            return signature_of_exception(phase, exc)
        if self.cls != "accuracy":
            return None
        # no fp64 reference (an op without a float64 kernel): compared with eager directly, as
        # torch's run_repro does, so that the repro and the worker judge alike
        fp64 = M.fp64_reference(gm, args)
        if M.accuracy_fails(ref, res, fp64, tol=self.tol, ignore_non_fp=self.ignore_non_fp):
            return Signature("accuracy")
        return None

    def __call__(self, gm, args) -> bool:
        if self.deadline and time.time() > self.deadline:
            raise BudgetExceeded()
        self.queries += 1
        if self.crash_after is not None and self.queries > self.crash_after:
            os._exit(70)  # fault injection for the isolation fallback
        sig = self.observe(gm, args)
        ok = sig is not None and (self.pinned.matches(sig) if self.pinned else True)
        emit(event="query", n=self.queries, nodes=len(gm.graph.nodes), fails=ok)
        return ok


class IsolatedEvaluator:
    """One process per query, for failures that crash or hang the worker: each query is a child
    forked from this worker (which holds the graph and inputs and has not run compiled code), so
    a query that aborts (a C++ exception thrown inside an OpenMP region) or segfaults only takes
    its own process down. A child that dies with ``terminate called after throwing ...`` fails as
    the runtime error ``UncaughtCppException`` (the way ``check`` records it)."""

    def __init__(self, job: dict, kind: str, pinned: Signature | None):
        self.job, self.kind, self.pinned = job, kind, pinned
        self.queries = 0
        self.deadline = job.get("deadline")
        self.dir = os.path.join(job["workdir"], "isolate")
        os.makedirs(self.dir, exist_ok=True)

    def observe(self, gm, args, config: tuple[dict, dict] | None = None) -> Signature | None:
        timeout = float(self.job.get("query_timeout") or 300)
        if self.deadline:
            timeout = max(5.0, min(timeout, self.deadline - time.time() + 5))
        return observe_forked(self.job, self.kind, gm, args, timeout, self.dir, config)

    def __call__(self, gm, args) -> bool:
        if self.deadline and time.time() > self.deadline:
            raise BudgetExceeded()
        self.queries += 1
        sig = self.observe(gm, args)
        ok = sig is not None and (self.pinned.matches(sig) if self.pinned else True)
        emit(event="query", n=self.queries, nodes=len(gm.graph.nodes), fails=ok, isolated=True)
        return ok


def observe_forked(job: dict, kind: str, gm, args, timeout: float, qdir: str,
                   config: tuple[dict, dict] | None = None) -> Signature | None:
    """Evaluate a candidate in a forked child; its failure signature (None: it does not fail).
    ``config``: (all keys, subset) — run with only ``subset`` of the config diff set.

    A child killed by a signal that left no recognisable trace is run once more: a real failure
    dies the same way again, a one-off death of the process does not decide a query."""
    sig, unexplained = _observe_forked_once(job, kind, gm, args, timeout, qdir, config)
    if unexplained:
        log("query: rerunning once after an unexplained death")
        sig, _ = _observe_forked_once(job, kind, gm, args, timeout, qdir, config)
    return sig


def _observe_forked_once(job, kind, gm, args, timeout, qdir, config):
    from bot import proc
    from bot.signature import death_of, signature_of_abort
    from bot.torch_adapter.runtime import after_fork

    sys.stdout.flush()
    sys.stderr.flush()

    def child(send):
        os.environ.pop(CRASH_HOOK_ENV, None)
        threads = job.get("_threads")
        if threads:
            import torch

            torch.set_num_threads(int(threads))
        ev = Evaluator({**job, "deadline": None}, kind, None)
        if config is not None:
            sig = _with_config(config[0], config[1], lambda: ev.observe(gm, args))
        else:
            sig = ev.observe(gm, args)
        return {"signature": sig.to_json() if sig else None}

    res = proc.fork(child, timeout=timeout, log_path=os.path.join(qdir, "query.log"), log_mode="w",
                    capture=20000, grace=0.0, child_setup=after_fork)
    if res.timed_out:
        log(f"query: killed at its {timeout:.0f} s limit")
        return None, False
    if res.returncode == 0 and isinstance(res.value, dict):
        return Signature.from_json(res.value.get("signature")), False
    output = res.output
    if res.signal is not None:
        death = death_of(res.signal, output)
        sig = signature_of_abort(output) if death.kind == "abort" else None
        if sig is None and job["class"] == "crash":
            sig = Signature("crash")
        log(f"query: process died with {death.signal}" + (f" ({sig.describe()})" if sig else
                                                          ": " + " | ".join(output.strip().splitlines()[-6:])))
        return sig, sig is None
    log("query: process failed: " + " | ".join(output.strip().splitlines()[-3:]))
    return None, False


def _acc_mode(job: dict) -> str:
    if job["class"] != "accuracy":
        return ""
    return "strict_accuracy" if job.get("strict_accuracy") else "accuracy"


# ------------------------------------------------------------------------------------------
# minify
# ------------------------------------------------------------------------------------------


def judge_of(job: dict) -> dict:
    """How this worker judges a candidate, for the parent and for the repro it writes: the
    failure class, and for accuracy failures the check's tolerance and whether integer outputs
    are compared (torch's ``repro_tolerance`` / ``repro_ignore_non_fp`` in the repro)."""
    out = {"class": job["class"], "config": []}
    if job["class"] == "accuracy":
        out.update(tolerance=float(job.get("tolerance") or 1e-4),
                   compare_non_fp=bool(job.get("strict_accuracy") or job.get("compare_non_fp")))
        from bot.torch_adapter import repro as R

        out["config"] = R.judge_config(out["tolerance"], out["compare_non_fp"])
    return out


def sanity(job: dict, kind: str, gm, args, isolate: bool) -> tuple[Signature | None, str]:
    """Does the captured graph fail on its own, the way the check failed? (signature, "") or
    (None, why not). Updates ``job`` with what it learns, in this order:

    1. the check's own class and error (a wrong type or message is another failure);
    2. a class the check could not know (a program judged by its exit status, a launcher written
       without torch's accuracy check): a graph that raises nothing but computes a wrong result
       is an accuracy failure;
    3. an accuracy failure whose floating-point outputs agree: integer and bool outputs compared
       exactly (an int32 overflow, an index off by one).
    """
    def observe():
        ev = IsolatedEvaluator(job, kind, None) if isolate else Evaluator(job, kind, None)
        return ev.observe(gm, args)

    uncertain = bool(job.get("class_uncertain"))
    original = None if uncertain else signature_of_error_record(job["class"], job.get("original_error"))
    sig = observe()
    if sig is None and uncertain and job["class"] != "accuracy":
        log(f"sanity: the graph raises nothing as {job['class']}; judging its result against fp64")
        job["class"] = "accuracy"
        sig = observe()
    if sig is None and job["class"] == "accuracy" and not (job.get("strict_accuracy") or job.get("compare_non_fp")):
        job["compare_non_fp"] = True
        sig = observe()
        if sig is None:
            job["compare_non_fp"] = False
        else:
            log("sanity: the floating-point outputs agree; an integer or bool output differs")
    if sig is None:
        return None, "the captured graph does not fail when run on its own"
    if not consistent(original, sig):
        return None, (f"the captured graph fails differently ({sig.describe()}) than the check "
                      f"({original.describe()})")
    return sig, ""


def cmd_minify(job_path: str) -> int:
    import torch

    from bot.torch_adapter import minifier as M
    from bot.torch_adapter import repro as R

    with open(job_path) as fh:
        job = json.load(fh)
    workdir = job["workdir"]
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)  # torch writes scratch files into the CWD
    t0 = time.time()
    R.require_repro_api()
    store = os.path.join(workdir, "store")
    ckdir = os.path.join(workdir, "checkpoints")
    os.makedirs(ckdir, exist_ok=True)
    sig_path = os.path.join(workdir, "signature.json")
    result: dict = {"status": None, "reason": None}
    timings: dict = {}
    result["timings"] = timings
    isolate = bool(job.get("isolate"))
    if isolate:
        # queries are forked from this process: it must not start OpenMP's thread pool itself
        job["_threads"] = torch.get_num_threads()
        torch.set_num_threads(1)

    t = time.time()
    rf, gm, args = load_graph(job["repro"])
    timings["load"] = round(time.time() - t, 2)
    kind = rf.kind
    job.setdefault("backend", rf.backend or "inductor")
    nodes_start = len(gm.graph.nodes)
    nodes_before = int(job.get("nodes_before") or nodes_start)
    # a launcher captured with dynamic shapes was traced symbolically: every candidate must stay so
    job["dynamic"] = bool(kind == "aot" and R.symbolic_placeholders(gm))
    emit(event="loaded", nodes=nodes_start, kind=kind, dynamic=job["dynamic"])
    pinned = Signature.from_json(json.load(open(sig_path))) if os.path.exists(sig_path) else None

    with R.config_snapshot(), R.disable_repro_after(), torch.no_grad():
        t = time.time()
        # 1. sanity: the captured graph must fail, and the same way as the check
        if pinned is None:
            sig, why_not = sanity(job, kind, gm, args, isolate)
            if sig is None:
                return _finish(job, result, "not_reproduced", why_not, t0, nodes_before)
            pinned = sig
            with open(sig_path, "w") as fh:
                json.dump(pinned.to_json(), fh)
            with open(os.path.join(workdir, "judge.json"), "w") as fh:
                json.dump(judge_of(job), fh)
        else:  # resumed (isolated after a crash): judged as the first worker learned
            with contextlib.suppress(OSError, ValueError):
                job.update(json.load(open(os.path.join(workdir, "judge.json"))))
        emit(event="signature", signature=pinned.to_json())
        result["signature"] = pinned.to_json()
        result["judge"] = judge_of(job)
        timings["sanity"] = round(time.time() - t, 2)
        t = time.time()

        # 2. reduce
        evaluator = IsolatedEvaluator(job, kind, pinned) if isolate else Evaluator(job, kind, pinned)
        best = {"gm": gm, "args": args}

        def dump_state(cur_gm, cur_args):
            n = len(cur_gm.graph.nodes)
            best["gm"], best["args"] = cur_gm, list(cur_args)
            path = os.path.join(ckdir, f"{n}.py")
            try:
                src = R.repro_source(cur_gm, cur_args, kind=kind, accuracy=_acc_mode(job), save_dir=store,
                                     backend=job.get("backend"))
                with open(path + ".tmp", "w") as fh:
                    fh.write(src)
                os.replace(path + ".tmp", path)
            except Exception as exc:  # noqa: BLE001
                log(f"could not write checkpoint {path}: {exc}")
            emit(event="checkpoint", nodes=n, path=path)

        status = "minimized"
        culprit = None
        try:
            final_gm, final_args, culprit = reduce_graph(job, gm, args, evaluator, dump_state, workdir)
        except BudgetExceeded:
            status = "partial"
            result["reason"] = f"time budget of {job.get('budget')} s ran out; kept the smallest checkpoint"
            final_gm, final_args = best["gm"], best["args"]
        except M.SanityCheckFailed:
            return _finish(job, result, "not_reproduced", "the captured graph does not fail when run on its own",
                           t0, nodes_before)
        queries = evaluator.queries
        timings["reduce"] = round(time.time() - t, 2)
        t = time.time()

        # 3. the minimal config diff, by delta debugging over the non-default keys
        from bot.minify.configdiff import true_diff

        values = {**rf.config, **(job.get("check_config") or {})}
        diff = true_diff(values, ignore=R.CAPTURE_KEYS)
        result["config_diff"] = diff
        keys = {d["key"]: values[d["key"]] for d in diff if not isinstance(values[d["key"]], R._Unparsed)}
        minimal = None
        if keys:
            if isolate:
                iso = IsolatedEvaluator({**job, "deadline": None}, kind, pinned)

                def fails(cfg):
                    sig = iso.observe(final_gm, final_args, config=(keys, cfg))
                    return sig is not None and pinned.matches(sig)
            else:
                def fails(cfg):
                    return _with_config(keys, cfg, lambda: Evaluator({**job, "deadline": None}, kind, pinned)(
                        final_gm, final_args))
            try:
                minimal = minimal_config(keys, fails)
            except Exception as exc:  # noqa: BLE001
                log(f"config minimization failed: {type(exc).__name__}: {exc}")
        result["config_minimal"] = None if minimal is None else [d for d in diff if d["key"] in minimal]
        timings["config"] = round(time.time() - t, 2)

    # 4. the final repro (inputs in final/inputs), announced before the bisector runs: the parent
    # starts verifying it in fresh processes meanwhile
    final_dir = os.path.join(workdir, "final")
    os.makedirs(final_dir, exist_ok=True)
    src = R.repro_source(final_gm, final_args, kind=kind, accuracy=_acc_mode(job),
                         save_dir=os.path.join(final_dir, "inputs"), backend=job.get("backend"))
    with open(os.path.join(final_dir, "repro.py"), "w") as fh:
        fh.write(src)
    result["random_inputs_reproduce"] = _random_inputs_reproduce(job, kind, pinned, final_gm,
                                                                 os.path.join(final_dir, "repro.py"), isolate)
    bisects = bool(job.get("bisect")) and kind == "aot" and not isolate
    emit(event="final", path=os.path.join(final_dir, "repro.py"), config_diff=result["config_diff"],
         config_minimal=result["config_minimal"], random_inputs_reproduce=result["random_inputs_reproduce"],
         bisects=bisects, judge=result.get("judge"))

    with R.config_snapshot(), R.disable_repro_after(), torch.no_grad():
        t = time.time()
        # 5. bisect (optional)
        result["bisect"] = None
        if bisects:
            from bot.torch_adapter import bisect as B

            if os.environ.get(BISECT_CRASH_ENV) == "1":
                os._exit(70)  # fault injection: the worker dies after it announced its final repro

            remaining = (job.get("deadline") or (time.time() + 120)) - time.time()
            if remaining > 10:
                # each of the bisector's backends (eager ... inductor) straight on the aten graph;
                # through dynamo where the graph has symbolic sizes (dynamo keeps them symbolic)
                ev = Evaluator({**job, "deadline": None}, "dynamo" if job.get("dynamic") else "backend", pinned)
                try:
                    result["bisect"] = B.bisect_graph(final_gm, final_args, lambda g, a, b: _bisect_probe(ev, g, a, b),
                                                      budget=min(remaining - 5, float(job.get("bisect_budget") or 60)))
                except Exception as exc:  # noqa: BLE001
                    log(f"bisect failed: {type(exc).__name__}: {exc}")
        if result["bisect"] is not None or job.get("bisect"):
            timings["bisect"] = round(time.time() - t, 2)
        result["culprit"] = culprit_record(final_gm, culprit, result["bisect"], status)

    result.update(
        graph=M.graph_ops(final_gm), nodes_after=len(final_gm.graph.nodes), queries=queries, kind=kind,
        backend=job.get("backend"), graph_role=graph_role(rf.source) if kind == "aot" else None,
        dynamic=bool(job.get("dynamic")),
    )
    return _finish(job, result, status, result.get("reason"), t0, nodes_before)


def reduce_graph(job: dict, gm, args, evaluator, dump_state, workdir: str):
    """Reduce ``gm``: the culprit search first (log N queries); when the culprit does not fail
    compiled alone, torch's fx minifier on the smallest failing prefix, then the cleanup passes.
    Returns (gm, args, passes.Culprit | None)."""
    from bot.minify import passes as P
    from bot.torch_adapter import minifier as M

    oracle = P.Oracle(evaluator)
    st = P.State(gm, list(args))
    found = None
    if job.get("culprit_search", True):
        t = time.time()
        try:
            hint = known_hint(job, evaluator, st) if job.get("use_hints", os.environ.get(NO_HINTS_ENV) != "1") else None
            found = P.find_culprit(st, oracle, log=log, hint=hint)
        except BudgetExceeded:
            raise
        except Exception as exc:  # noqa: BLE001 - the search is an accelerator; the fx minifier still runs
            log(f"culprit search failed: {type(exc).__name__}: {exc}")
        log(f"culprit search: {time.time() - t:.1f} s, {oracle.asked} queries")
    if found is not None and found[1].method == "compiled-alone":
        final = P.cleanup(found[0], oracle)
        dump_state(final.gm, final.args)
        return final.gm, final.args, found[1]
    if found is not None:
        # a culprit of several connected nodes: where the failure shows (the prefix search, log N),
        # how far back it reaches (log N), then 1-minimal
        window = P.reach_back(found[0], oracle, found[1].node, log=log)
        if window is not None:
            final = P.cleanup(window, oracle)
            dump_state(final.gm, final.args)
            return final.gm, final.args, P.Culprit(P.culprit_ops(final), "graph", found[1].node)
    start = found[0] if found is not None else st
    if found is not None:
        dump_state(start.gm, start.args)
    g, a = M.fx_minify(start.gm, start.args, lambda g_, a_: oracle(P.State(g_, list(a_))), dump_state,
                       skip_sanity=True, offload_to_disk=bool(job.get("offload_to_disk")),
                       save_dir=os.path.join(workdir, "offload"))
    final = P.cleanup(P.State(g, list(a)), oracle)
    if len(final.gm.graph.nodes) < len(g.graph.nodes):
        dump_state(final.gm, final.args)
    culprit = P.Culprit(P.culprit_ops(final), "graph", found[1].node if found else None)
    return final.gm, final.args, culprit


def known_hint(job: dict, evaluator, st):
    """What is known before the culprit search: for errors, the node the error message names
    (the check's error and the sanity run's); for accuracy failures (in-process only), the first
    intermediate of the compiled graph that diverges from the fp64 run (one compile of the graph
    with every intermediate as an output; counted as a query)."""
    from bot.minify import passes as P
    from bot.torch_adapter import minifier as M

    if job["class"] != "accuracy":
        texts = [str((job.get("original_error") or {}).get("message") or ""), getattr(evaluator, "last_error", "")]
        hint = P.error_hint(st.gm, "\n".join(t for t in texts if t))
        if hint is not None:
            log(f"hint: the error names {hint.node}")
        return hint
    if isinstance(evaluator, IsolatedEvaluator) or evaluator.kind != "aot":
        return None
    if evaluator.deadline and time.time() > evaluator.deadline:
        raise BudgetExceeded()
    t = time.time()
    evaluator.queries += 1
    try:
        import torch

        probe, names = P.all_outputs_state(st)
        with torch.no_grad():
            res = evaluator.compile(probe.gm, probe.args)(M.clone_inputs(probe.args))
        hint = P.divergence_hint(st.gm, st.args, dict(zip(names, M.flat_outputs(res))), tol=evaluator.tol)
    except Exception as exc:  # noqa: BLE001 - an analysis that fails only costs its time
        log(f"hint: fp64 divergence analysis failed: {type(exc).__name__}: {exc}")
        return None
    emit(event="query", n=evaluator.queries, nodes=len(st.gm.graph.nodes), fails=hint is not None, analysis=True)
    log(f"hint: fp64 divergence analysis in {time.time() - t:.1f} s: "
        + (f"first divergence within call nodes {hint.lo + 1}..{hint.hi}" if hint else "no intermediate diverges"))
    return hint


def culprit_record(gm, culprit, bisect: dict | None, status: str) -> dict | None:
    """failure.json's "culprit": the op(s) that fail compiled alone (or the reduced graph's ops),
    and the bisector's one-line answer."""
    from bot.minify import passes as P

    if culprit is None or status != "minimized":
        return None  # a partial reduction proves no culprit
    ops, method = sorted(culprit.ops), culprit.method
    agree = P.agrees_with_bisect(ops, bisect)
    if agree is False:
        log(f"culprit {', '.join(ops)} does not match the bisector's answer {bisect_words(bisect)!r}")
    return {"ops": ops, "bisect": bisect_words(bisect), "method": method}


def graph_role(source: str) -> str:
    """Which graph AOTAutograd handed the compiler, from the captured Repro's forward signature:
    "backward" (reads tangents), "forward" (a training forward: reads primals) or "inference"."""
    import re

    m = re.search(r"class Repro\(.*?def forward\(self,?([^)]*)\)", source, re.S)
    names = [a.strip().split(":")[0].strip() for a in (m.group(1).split(",") if m else [])]
    if any(n.startswith("tangents") for n in names):
        return "backward"
    if any(n.startswith("primals") for n in names):
        return "forward"
    return "inference"


def _random_inputs_reproduce(job, kind, pinned, gm, final_path: str, isolate: bool) -> bool | None:
    """Whether the minimized graph fails the same way on random inputs (what ``repro.py run
    --no-save-dir`` and repro_standalone.py use: the file's load_args read with no save dir).
    Evaluated here (forked when isolated) rather than in one more fresh interpreter; None when
    it could not be decided."""
    import torch

    from bot.torch_adapter import repro as R

    t = time.time()
    try:
        with R.config_snapshot(), R.disable_repro_after(), torch.no_grad():
            rf = R.parse_repro_file(final_path)
            rargs = R.read_inputs(R.load_repro_file(rf), None)
            ev = (IsolatedEvaluator({**job, "deadline": None}, kind, pinned) if isolate
                  else Evaluator({**job, "deadline": None}, kind, pinned))
            sig = ev.observe(gm, rargs)
        return sig is not None and pinned.matches(sig)
    except Exception as exc:  # noqa: BLE001
        log(f"random-input check failed: {type(exc).__name__}: {exc}")
        return None
    finally:
        log(f"random-input check: {time.time() - t:.1f} s")


def _bisect_probe(ev: Evaluator, gm, args, backend: str) -> bool:
    """True when ``gm`` compiled with ``backend`` does NOT fail the pinned way (bisector: good)."""
    ev.backend = backend
    sig = ev.observe(gm, args)
    return not (sig is not None and ev.pinned.matches(sig))


def _with_config(all_keys: dict, subset: dict, fn):
    from bot.torch_adapter import repro as R

    with R.config_snapshot():
        for k in all_keys:
            try:
                R.set_config(k, R.config_default(k))
            except Exception:  # noqa: BLE001
                pass
        for k, v in subset.items():
            R.set_config(k, v)
        return fn()


def minimal_config(keys: dict, fails) -> list[str]:
    """ddmin over the keys: a smallest subset (1-minimal) for which ``fails(subset)`` holds.

    The minimized graph fails with the full diff (it was minimized under it), so that is not
    queried again; with one key, a single query (does it fail without it?) decides."""
    from bot.minify.configdiff import ddmin

    names = list(keys)
    if fails({}):
        return []
    if len(names) == 1:
        return names
    return ddmin(names, lambda sub: fails({k: keys[k] for k in sub}))


def _finish(job, result, status, reason, t0, nodes_before) -> int:
    result.update(status=status, reason=reason, seconds=round(time.time() - t0, 2), nodes_before=nodes_before)
    path = os.path.join(job["workdir"], "result.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(result, fh, indent=2, default=str)
    os.replace(path + ".tmp", path)
    emit(event="done", status=status)
    return 0


def cmd_probe_dynamo(backend: str) -> int:
    from bot.torch_adapter import repro as R

    reason = R.probe_dynamo_repro_after(backend)
    emit(event="probe", broken=reason is not None, reason=reason)
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "minify":
        return cmd_minify(rest[0])
    if cmd == "probe-dynamo":
        return cmd_probe_dynamo(rest[0])
    print(f"unknown worker command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
