"""The minify worker: runs in a process of its own, started by :mod:`bot.minify.reduce`.

    python -m bot.minify.worker minify JOB.json     reduce a captured graph (fast path: in-process
                                                     queries; or --isolate: one process per query)
    python -m bot.minify.worker query JOB.json FILE  one isolated query: exit 1 = fails the same way
    python -m bot.minify.worker localize JOB.json    run the check with eager/aot_eager/... in order
    python -m bot.minify.worker probe-dynamo BACKEND does TORCHDYNAMO_REPRO_AFTER=dynamo work here?

JOB.json is written by the parent (see reduce.py). Progress goes to stdout as lines starting with
``@@ `` followed by JSON; everything else is the minifier log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bot.minify.predicate import ERROR_CLASSES, Signature, consistent, signature_of_error_record, \
    signature_of_exception

CRASH_HOOK_ENV = "MINIFY_BOT_WORKER_CRASH_AFTER"   # fault injection: hard-exit after N in-process queries


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
        self.queries = 0
        self.deadline = job.get("deadline")
        self.crash_after = int(os.environ.get(CRASH_HOOK_ENV, "0") or 0)

    def compile(self, gm, args):
        from bot.torch_adapter import minifier as M

        if self.kind == "dynamo":
            return M.compile_dynamo(gm, self.backend)
        return M.compile_aot(gm, args)

    def observe(self, gm, args) -> Signature | None:
        """Run the candidate; the signature of how it fails, or None when it does not fail."""
        import torch
        from bot.torch_adapter import minifier as M

        if not M.has_compute(gm):
            return None  # an empty graph never reproduces a compiler bug
        try:
            with torch.no_grad():
                ref = M.run_eager(gm, args)
        except Exception:
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
            return signature_of_exception(phase, exc)
        if self.cls != "accuracy":
            return None
        fp64 = M.fp64_reference(gm, args)
        if fp64 is None and not self.strict:
            return None
        if M.accuracy_fails(ref, res, fp64, tol=self.tol, ignore_non_fp=not self.strict):
            return Signature("accuracy")
        return None

    def __call__(self, gm, args) -> bool:
        if self.deadline and time.time() > self.deadline:
            raise BudgetExceeded()
        self.queries += 1
        if self.crash_after and self.queries > self.crash_after:
            os._exit(70)  # fault injection for the isolation fallback
        sig = self.observe(gm, args)
        ok = sig is not None and (self.pinned.matches(sig) if self.pinned else True)
        emit(event="query", n=self.queries, nodes=len(gm.graph.nodes), fails=ok)
        return ok


class IsolatedEvaluator:
    """One fresh process per query (for failures that crash or hang the worker)."""

    def __init__(self, job: dict, job_path: str, kind: str, store: str):
        self.job, self.job_path, self.kind, self.store = job, job_path, kind, store
        self.queries = 0
        self.deadline = job.get("deadline")
        self.dir = os.path.join(job["workdir"], "isolate")
        os.makedirs(self.dir, exist_ok=True)

    def __call__(self, gm, args) -> bool:
        from bot.torch_adapter import repro as R

        if self.deadline and time.time() > self.deadline:
            raise BudgetExceeded()
        self.queries += 1
        path = os.path.join(self.dir, f"q{self.queries}.py")
        src = R.repro_source(gm, args, kind=self.kind, accuracy=_acc_mode(self.job), save_dir=self.store,
                             backend=self.job.get("backend"))
        with open(path, "w") as fh:
            fh.write(src)
        timeout = float(self.job.get("query_timeout") or 300)
        if self.deadline:
            timeout = max(5.0, min(timeout, self.deadline - time.time() + 5))
        rc = _run_query(self.job_path, path, timeout)
        ok = rc == 1 or (self.job["class"] == "crash" and rc is not None and rc < 0)
        emit(event="query", n=self.queries, nodes=len(gm.graph.nodes), fails=ok, isolated=True)
        try:
            os.remove(path)
        except OSError:
            pass
        return ok


def _run_query(job_path: str, path: str, timeout: float) -> int | None:
    cmd = [sys.executable, "-m", "bot.minify.worker", "query", job_path, path]
    try:
        p = subprocess.run(cmd, cwd=os.path.dirname(path), timeout=timeout, capture_output=True, text=True,
                           env=_child_env())
    except subprocess.TimeoutExpired:
        return None
    sys.stdout.write("".join(">>  " + l + "\n" for l in (p.stdout + p.stderr).splitlines()[-5:]))
    return p.returncode


def _child_env() -> dict:
    env = dict(os.environ)
    env.pop(CRASH_HOOK_ENV, None)
    env.pop("TORCHDYNAMO_REPRO_AFTER", None)
    env.pop("TORCHDYNAMO_REPRO_LEVEL", None)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _acc_mode(job: dict) -> str:
    if job["class"] != "accuracy":
        return ""
    return "strict_accuracy" if job.get("strict_accuracy") else "accuracy"


# ------------------------------------------------------------------------------------------
# minify
# ------------------------------------------------------------------------------------------


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

    rf, gm, args = load_graph(job["repro"])
    kind = rf.kind
    job.setdefault("backend", rf.backend or "inductor")
    nodes_start = len(gm.graph.nodes)
    nodes_before = int(job.get("nodes_before") or nodes_start)
    emit(event="loaded", nodes=nodes_start, kind=kind)
    original = signature_of_error_record(job["class"], job.get("original_error"))

    pinned = Signature.from_json(json.load(open(sig_path))) if os.path.exists(sig_path) else None
    isolate = bool(job.get("isolate"))

    with R.config_snapshot(), R.disable_repro_after(), torch.no_grad():
        # 1. sanity: the captured graph must fail, and the same way as the check
        if pinned is None:
            if isolate:
                rc = _run_query(job_path, job["repro"], float(job.get("query_timeout") or 300))
                learned = Signature.from_json(json.load(open(sig_path))) if os.path.exists(sig_path) else None
                if learned is None and job["class"] == "crash" and rc is not None and rc < 0:
                    learned = Signature("crash")
                sig = learned
            else:
                sig = Evaluator(job, kind, None).observe(gm, args)
            if sig is None:
                return _finish(job, result, "not_reproduced",
                               "the captured graph does not fail when run on its own", t0, nodes_before)
            if not consistent(original, sig):
                return _finish(job, result, "not_reproduced",
                               f"the captured graph fails differently ({sig.describe()}) than the check "
                               f"({original.describe()})", t0, nodes_before)
            pinned = sig
            with open(sig_path, "w") as fh:
                json.dump(pinned.to_json(), fh)
        emit(event="signature", signature=pinned.to_json())
        result["signature"] = pinned.to_json()

        # 2. reduce
        evaluator = IsolatedEvaluator(job, job_path, kind, store) if isolate else Evaluator(job, kind, pinned)
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
        try:
            final_gm, final_args = M.fx_minify(
                gm, args, evaluator, dump_state, skip_sanity=True,
                offload_to_disk=bool(job.get("offload_to_disk")), save_dir=os.path.join(workdir, "offload"),
            )
        except BudgetExceeded:
            status = "partial"
            result["reason"] = f"time budget of {job.get('budget')} s ran out; kept the smallest checkpoint"
            final_gm, final_args = best["gm"], best["args"]
        except M.SanityCheckFailed:
            return _finish(job, result, "not_reproduced", "the captured graph does not fail when run on its own",
                           t0, nodes_before)
        queries = evaluator.queries

        # 3. the minimal config diff, by delta debugging over the non-default keys
        from bot.minify.configdiff import true_diff

        values = {**rf.config, **(job.get("check_config") or {})}
        diff = true_diff(values, R.config_default, R.CAPTURE_KEYS)
        result["config_diff"] = diff
        keys = {d["key"]: values[d["key"]] for d in diff if not isinstance(values[d["key"]], R._Unparsed)}
        minimal = None
        if keys and not isolate:
            try:
                minimal = minimal_config(keys, lambda cfg: _with_config(keys, cfg, lambda: Evaluator(
                    {**job, "deadline": None}, kind, pinned)(final_gm, final_args)))
            except Exception as exc:  # noqa: BLE001
                log(f"config minimization failed: {type(exc).__name__}: {exc}")
        result["config_minimal"] = None if minimal is None else [d for d in diff if d["key"] in minimal]

        # 4. bisect (optional)
        result["bisect"] = None
        if job.get("bisect") and kind == "aot" and not isolate:
            from bot.torch_adapter import bisect as B

            remaining = (job.get("deadline") or (time.time() + 120)) - time.time()
            if remaining > 10:
                ev = Evaluator({**job, "deadline": None}, "dynamo", pinned)
                try:
                    result["bisect"] = B.bisect_graph(final_gm, final_args, lambda g, a, b: _bisect_probe(ev, g, a, b),
                                                      budget=min(remaining - 5, float(job.get("bisect_budget") or 60)))
                except Exception as exc:  # noqa: BLE001
                    log(f"bisect failed: {type(exc).__name__}: {exc}")

    # 5. final repro (inputs in final/inputs)
    final_dir = os.path.join(workdir, "final")
    os.makedirs(final_dir, exist_ok=True)
    src = R.repro_source(final_gm, final_args, kind=kind, accuracy=_acc_mode(job),
                         save_dir=os.path.join(final_dir, "inputs"), backend=job.get("backend"))
    with open(os.path.join(final_dir, "repro.py"), "w") as fh:
        fh.write(src)
    result.update(
        graph=M.graph_ops(final_gm), nodes_after=len(final_gm.graph.nodes), queries=queries, kind=kind,
        backend=job.get("backend"),
    )
    return _finish(job, result, status, result.get("reason"), t0, nodes_before)


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
    """ddmin over the keys: a smallest subset (1-minimal) for which ``fails(subset)`` holds."""
    from bot.minify.configdiff import ddmin

    names = list(keys)
    if fails({}):
        return []
    if not fails(dict(keys)):
        raise RuntimeError("the failure does not reproduce with the full config diff")
    return ddmin(names, lambda sub: fails({k: keys[k] for k in sub}))


def _finish(job, result, status, reason, t0, nodes_before) -> int:
    result.update(status=status, reason=reason, seconds=round(time.time() - t0, 2), nodes_before=nodes_before)
    path = os.path.join(job["workdir"], "result.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(result, fh, indent=2, default=str)
    os.replace(path + ".tmp", path)
    emit(event="done", status=status)
    return 0


# ------------------------------------------------------------------------------------------
# query (isolated)
# ------------------------------------------------------------------------------------------


def cmd_query(job_path: str, path: str) -> int:
    import torch
    from bot.torch_adapter import repro as R

    with open(job_path) as fh:
        job = json.load(fh)
    sig_path = os.path.join(job["workdir"], "signature.json")
    pinned = Signature.from_json(json.load(open(sig_path))) if os.path.exists(sig_path) else None
    rf, gm, args = load_graph(path)
    job.setdefault("backend", rf.backend or "inductor")
    ev = Evaluator({**job, "deadline": None}, rf.kind, pinned)
    with R.disable_repro_after(), torch.no_grad():
        sig = ev.observe(gm, args)
    if pinned is None and sig is not None:
        with open(sig_path, "w") as fh:
            json.dump(sig.to_json(), fh)
        return 1
    return 1 if sig is not None and pinned.matches(sig) else 0


# ------------------------------------------------------------------------------------------
# localize (runs the lead's judge for each stage backend, in order, until one fails)
# ------------------------------------------------------------------------------------------


def cmd_localize(job_path: str) -> int:
    with open(job_path) as fh:
        job = json.load(fh)
    from bot.check.judge import judge
    from bot.check.settings import Settings

    rows = []
    for backend in job["backends"]:
        settings = Settings.from_dict(dict(job["settings"], backend=backend))
        try:
            row = judge(job["spec"], settings)
            status = row.get("status")
            fclass = row.get("failure_class")
            err = row.get("error")
        except Exception as exc:  # noqa: BLE001
            status, fclass, err = "fail_to_run", "runtime_error", {"type": type(exc).__name__, "message": str(exc)}
        rows.append({"backend": backend, "status": status, "failure_class": fclass,
                     "error": (err or {}).get("type") if isinstance(err, dict) else None})
        emit(event="stage", backend=backend, status=status)
        if err:
            log(f"{backend}: {status}: {(err or {}).get('type')}: {str((err or {}).get('message'))[:500]}")
        with open(job["out"], "w") as fh:
            json.dump(rows, fh)
        if fclass:
            break
        try:
            import torch

            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass
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
    if cmd == "query":
        return cmd_query(rest[0], rest[1])
    if cmd == "localize":
        return cmd_localize(rest[0])
    if cmd == "probe-dynamo":
        return cmd_probe_dynamo(rest[0])
    print(f"unknown worker command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
