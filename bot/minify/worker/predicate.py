"""The predicate: how a candidate graph is compiled and judged ("fails the same way").

One definition for the minify worker's queries (in-process, or one forked process per query for
failures that crash or hang), its sanity step (which also learns what the check could not tell:
the class of a program judged by its exit status, integer outputs), and the repro it writes:
:func:`judge_of` gives the settings under which torch's ``run_repro(..., accuracy=...)`` in a
fresh process judges the repro the same way (the check's tolerance, integer comparison). Progress
goes to stdout as ``@@ `` + JSON lines (:func:`emit`); everything else is the minifier log.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from bot.minify.records import Judge, MinifyJob, Query, QueryAnswer, QueryJob, emit
from bot.signature import Signature, exception_chain, signature_of_error_record, signature_of_exception
from bot.torch_adapter import fxutil

CRASH_HOOK_ENV = "MINIFY_BOT_WORKER_CRASH_AFTER"   # fault injection: hard-exit after N in-process queries


class BudgetExceeded(Exception):
    pass


def log(msg: str) -> None:
    sys.stdout.write(msg + "\n")
    sys.stdout.flush()


def load_graph(path: str, kind_hint: str | None = None, static: bool = False):
    """(the parsed file, its graph, its inputs). ``static``: an after-AOT graph captured with dynamic
    shapes traced with its sizes set to the captured values, its size inputs gone."""
    from bot.torch_adapter import repro as R

    rf = R.parse_repro_file(path)
    loaded = R.load_repro_file(rf)
    args = R.read_inputs(loaded, rf.save_dir)
    if rf.kind == "dynamo":
        gm = R.trace_dynamo_graph(loaded)
    else:
        gm, args = R.trace_aot_graph(loaded, args, static=static)
        if static:
            gm, args = _without_size_inputs(gm, args)
            rf.tracing_mode = "real"
        if loaded.contiguous:
            log(f"load: the graph cannot run on its inputs' captured strides ({loaded.contiguous}); its "
                "inputs are made contiguous")
        if loaded.traced != rf.tracing_mode and rf.tracing_mode == "real":
            log(f"load: the graph reads a tensor's value (item(), nonzero); traced with {loaded.traced} tensors"
                if fxutil.data_dependent(gm) else
                f"load: the graph raises when run on its inputs; traced with {loaded.traced} tensors")
            rf.tracing_mode = loaded.traced   # and so the repros written from it
    return rf, gm, args


def _without_size_inputs(gm, args):
    """A graph traced with real sizes reads its size inputs no more (they are constants in it): they go,
    so that the repro written from it is static (no ``reader.symint``)."""
    import torch

    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    drop = {i for i, n in enumerate(phs) if not n.users and i < len(args) and not isinstance(args[i], torch.Tensor)}
    for i in drop:
        gm.graph.erase_node(phs[i])
    if drop:
        gm.recompile()
    return gm, [a for i, a in enumerate(args) if i not in drop]


def _phase(phase: str, exc: BaseException) -> str:
    """The phase an exception belongs to: torch.compile compiles at a graph's first call, so an
    error in the backend's compile (dynamo wraps it in BackendCompilerFailed; inductor's own,
    InductorError around a CppCompileError, comes through as it is) is a compile error whenever it
    is raised (the check's own rule, ``runtime.is_compile_exception``)."""
    from bot.torch_adapter.runtime import is_compile_exception

    if any(is_compile_exception(e) for e in exception_chain(exc)):
        return "compile_error"
    return phase


class ProcessPoisoned(Exception):
    """A run left this process's accelerator context unusable (an illegal memory access, a
    device-side assert: every later CUDA call fails the same way), so no later query here means
    anything. ``signature``: what the run that did it observed. The in-process worker exits on it
    and minification resumes with one fresh process per query."""

    def __init__(self, signature: Signature | None, error: str):
        super().__init__(error)
        self.signature = signature


class Evaluator:
    """Evaluates one candidate graph in this process and returns (fails_same_way, signature)."""

    def __init__(self, job: MinifyJob, kind: str, pinned: Signature | None):
        self.job = job
        self.cls = job.failure_class
        self.kind = kind
        self.backend = job.backend
        self.pinned = pinned
        self.tol = job.tolerance
        self.strict = job.strict_accuracy
        # integer and bool outputs are compared exactly when the failure is in them (the sanity
        # step learns it), or under --strict-accuracy
        self.ignore_non_fp = not (self.strict or job.compare_non_fp)
        self.queries = 0
        self.last_error = ""
        self.eager_error: str | None = None   # the last candidate's own eager training step raised this
        self.poisoned: str | None = None   # the device fault the last run left behind
        self.deadline = job.deadline
        self.training = job.training and kind == "dynamo"
        hook = os.environ.get(CRASH_HOOK_ENV, "")
        self.crash_after = int(hook) if hook.strip().isdigit() else None

    def compile(self, gm, args):
        from bot.torch_adapter import minifier as M

        if self.kind == "dynamo":
            return M.compile_dynamo(gm, self.backend, dynamic=self.job.dynamic)
        if self.kind == "backend":
            return M.compile_backend(gm, args, self.backend)
        return M.compile_aot(gm, args)

    def observe(self, gm, args) -> Signature | None:
        """Run the candidate; the signature of how it fails, or None when it does not fail. Raises
        :class:`ProcessPoisoned` after a run that left the device unusable, unless this process
        only ever answers one query (``job.isolate``: a query's own child, or the isolated worker,
        whose queries run elsewhere)."""
        self.poisoned = None
        try:
            sig = self._observe(gm, args)
        except Exception as exc:  # noqa: BLE001 - only a device fault is handled here
            if not self._poison_check(exc):
                raise
            sig = None
        if self.poisoned and not self.job.isolate:
            raise ProcessPoisoned(sig, self.poisoned)
        return sig

    def _poison_check(self, exc: BaseException) -> bool:
        """Note a run's error that left the device unusable (the one place ``poisoned`` is set:
        where a run's error is data, and for any other step that raises it); True when it did."""
        from bot.torch_adapter import runtime as rt

        if rt.poisons_process(exc):
            self.poisoned = f"{type(exc).__name__}: {str(exc)[:500]}"
        return self.poisoned is not None

    def _observe(self, gm, args) -> Signature | None:
        import torch

        from bot.torch_adapter import minifier as M
        from bot.torch_adapter import runtime as rt

        if not M.has_compute(gm):
            return None  # an empty graph never reproduces a compiler bug
        if self.job.dynamic and self.kind == "aot" and not fxutil.symbolic_placeholders(gm):
            return None  # captured with dynamic shapes: a candidate whose sizes became constants
            #              would no longer show a dynamic-shapes-only bug (never specialize it away)
        if self.training:
            return self._observe_training(gm, args)
        eager_error = None
        try:
            with torch.no_grad():
                ref = M.run_eager(gm, args)
        except Exception as exc:  # noqa: BLE001 - an eager failure is data for an error class
            if self._poison_check(exc):
                return None   # the device is gone: the compiled run could tell nothing
            if self.cls == "accuracy":
                return None  # no reference to compare with: not a valid candidate
            # an error the program expects (an index out of bounds eager reports as IndexError):
            # the compiled graph fails the pinned way only if it fails otherwise (it aborts)
            eager_error, ref = signature_of_exception("runtime_error", exc), None
        phase = "compile_error"
        try:
            with torch.no_grad():
                fn = self.compile(gm, args)
                phase = "runtime_error"
                res = fn(fxutil.clone_inputs(args))
                rt.synchronize()   # a device fault of the compiled run surfaces here, as its error
        except Exception as exc:  # noqa: BLE001 - any failure is data here
            self._poison_check(exc)
            if self.cls == "accuracy":
                return None  # never drift from a wrong result to an error
            self.last_error = "\n".join(f"{type(e).__name__}: {e}" for e in exception_chain(exc))[-20000:]
            sig = signature_of_exception(_phase(phase, exc), exc)
            return None if eager_error is not None and eager_error.matches(sig) else sig
        if self.cls != "accuracy":
            return None
        # no fp64 reference (an op without a float64 kernel): compared with eager directly, as
        # torch's run_repro does, so that the repro and the worker judge alike
        fp64 = M.fp64_reference(gm, args)
        if M.accuracy_fails(ref, res, fp64, tol=self.tol, ignore_non_fp=self.ignore_non_fp):
            return Signature("accuracy")
        return None

    def _observe_training(self, gm, args) -> Signature | None:
        """A dynamo-level graph of a check that ran a backward: forward and backward together,
        outputs and gradients judged against eager and fp64 as the check judged the step."""
        from bot.torch_adapter import minifier as M

        mask = M.grad_mask(gm, args, set(self.job.frozen_inputs or ()))   # what required grad in the program
        try:
            ref = M.train_step(lambda xs: gm(*xs), args, mask)
        except Exception as exc:  # noqa: BLE001 - no eager step to compare with: not a valid candidate
            self._poison_check(exc)
            self.eager_error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc) else ''}"
            return None
        phase = "compile_error"
        try:
            fn = self.compile(gm, args)
            phase = "runtime_error"   # torch.compile compiles at the first call: a compile error says so itself
            res = M.train_step(fn, args, mask)
        except Exception as exc:  # noqa: BLE001 - any failure is data here
            self._poison_check(exc)
            if self.cls == "accuracy":
                return None
            self.last_error = "\n".join(f"{type(e).__name__}: {e}" for e in exception_chain(exc))[-20000:]
            return signature_of_exception(_phase(phase, exc), exc)
        if self.cls != "accuracy":
            return None
        fp64 = M.fp64_train_reference(gm, args, mask)
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
        emit(Query(n=self.queries, nodes=len(gm.graph.nodes), fails=ok))
        return ok


class IsolatedEvaluator:
    """One process per query, for failures that crash or hang the worker: each query is a child
    forked from this worker (which holds the graph and inputs and has not run compiled code), so
    a query that aborts (a C++ exception thrown inside an OpenMP region) or segfaults only takes
    its own process down. A child that dies with ``terminate called after throwing ...`` fails as
    the runtime error ``UncaughtCppException`` (the way ``check`` records it)."""

    def __init__(self, job: MinifyJob, kind: str, pinned: Signature | None):
        self.job, self.kind, self.pinned = job, kind, pinned
        self.queries = 0
        self.deadline = job.deadline
        self.dir = os.path.join(job.workdir, "isolate")
        os.makedirs(self.dir, exist_ok=True)

    def observe(self, gm, args, config: tuple[dict, dict] | None = None) -> Signature | None:
        timeout = self.job.query_timeout
        if self.deadline:
            timeout = max(5.0, min(timeout, self.deadline - time.time() + 5))
        return observe_forked(self.job, self.kind, gm, args, timeout, self.dir, config)

    def __call__(self, gm, args) -> bool:
        if self.deadline and time.time() > self.deadline:
            raise BudgetExceeded()
        self.queries += 1
        sig = self.observe(gm, args)
        ok = sig is not None and (self.pinned.matches(sig) if self.pinned else True)
        emit(Query(n=self.queries, nodes=len(gm.graph.nodes), fails=ok, isolated=True))
        return ok


def observe_forked(job: MinifyJob, kind: str, gm, args, timeout: float, qdir: str,
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


def _observe_exec(job: MinifyJob, kind: str, gm, args, timeout: float, qdir: str, config):
    """The candidate judged in a fresh interpreter (``python -m bot.minify.worker query QDIR``),
    written out as a launcher beside its job: for a worker whose graph lives on the GPU, which
    no forked child could use. Returns proc's Result, with the signature file's record as
    ``value`` when the query ran to the end."""
    from bot import proc
    from bot.minify.worker import child
    from bot.torch_adapter import repro as R

    os.makedirs(qdir, exist_ok=True)
    for name in (QUERY_SIGNATURE, "candidate.py"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(qdir, name))
    src = R.repro_source(gm, args, kind=kind, accuracy=acc_mode(job), save_dir=os.path.join(job.workdir, "store"),
                         backend=job.backend, tracing_mode="symbolic" if job.dynamic else None)
    with open(os.path.join(qdir, "candidate.py"), "w") as fh:
        fh.write(src)
    job.replace(deadline=None, isolate=True).write(os.path.join(qdir, "job.json"))
    QueryJob(kind, list(config) if config is not None else None).write(os.path.join(qdir, "query.json"))
    res = proc.run([sys.executable, "-m", "bot.minify.worker", "query", qdir], timeout=timeout, cwd=job.workdir,
                   env=child.child_env(), log_path=os.path.join(qdir, "query.log"), log_mode="w", capture=20000,
                   grace=0.0)
    try:
        res.value = QueryAnswer.read(os.path.join(qdir, QUERY_SIGNATURE)).signature
    except (OSError, ValueError, KeyError, TypeError):
        res.value = None
    return res


QUERY_SIGNATURE = "signature.json"


def cmd_query(qdir: str) -> int:
    """The worker's ``query`` command: judge ``QDIR/candidate.py`` as the job there says (its
    kind and config subset in ``query.json``) and write its signature to ``QDIR/signature.json``."""
    job = MinifyJob.read(os.path.join(qdir, "job.json"))
    q = QueryJob.read(os.path.join(qdir, "query.json"))
    apply_process_state(job, fresh=True)
    _rf, gm, args = load_graph(os.path.join(qdir, "candidate.py"))
    apply_compile_options(job)
    args = differentiable(job, q.kind, gm, args)
    ev = Evaluator(job, q.kind, None)
    config = q.config
    sig = with_config(config[0], config[1], lambda: ev.observe(gm, args)) if config else ev.observe(gm, args)
    QueryAnswer(sig.to_json() if sig else None).write(os.path.join(qdir, QUERY_SIGNATURE))
    return 0


def apply_process_state(job: MinifyJob, *, fresh: bool) -> list[str]:
    """The process state a job is judged under, in this process: the program's numerics flags (a
    ``fresh`` interpreter sets them: the worker, a query's own; a forked query child has them from
    its worker) and the worker's thread count (the isolated worker itself runs one thread, so that
    forking it is safe). Returns the flags this torch cannot set."""
    failed: list[str] = []
    if fresh and job.numerics:
        from bot.torch_adapter import numerics

        failed = numerics.apply(job.numerics)
    if job.threads:
        import torch

        torch.set_num_threads(int(job.threads))
    return failed


def apply_compile_options(job: MinifyJob) -> list[str]:
    """The inductor settings the program's ``torch.compile(mode=..., options=...)`` gave its graphs,
    set on top of the captured file's config lines (inductor sets them only while it compiles, so a
    launcher or a graph captured after dynamo does not carry them); the repros written from here on
    carry them as config lines. Returns those this torch refuses."""
    from bot.torch_adapter import config as tconfig
    from bot.torch_adapter.repro import CAPTURE_KEYS

    refused = []
    for key, value in list(job.compile_options.items()):
        try:
            if key in CAPTURE_KEYS or key.startswith("inductor.trace.") or key == "inductor.debug":
                raise ValueError("a debug or cache setting, not the compiler's behaviour")
            tconfig.set_config(key, tconfig.validate_overrides({key: value})[key])
        except Exception:  # noqa: BLE001 - a key this torch lacks, a value of the wrong type
            refused.append(key)
            del job.compile_options[key]   # nor in the config diff, nor in a repro
    return refused


def differentiable(job: MinifyJob, kind: str, gm, args: list) -> list:
    """A dynamo-level graph judged by a training step: the inputs that required grad in the program
    (:func:`bot.torch_adapter.minifier.grad_mask`) require grad, so the repros written from it
    differentiate them too, and nothing else (never a buffer)."""
    import torch

    if not (job.training and kind == "dynamo"):
        return args
    from bot.torch_adapter.minifier import grad_mask

    if job.frozen_inputs is None:   # the captured graph as loaded (a query's candidate has the job's already)
        phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
        job.frozen_inputs = [p.name for p, a in zip(phs, args) if isinstance(a, torch.Tensor)
                             and a.is_floating_point() and not a.requires_grad]
    return [a.requires_grad_(True) if m and isinstance(a, torch.Tensor) and a.is_leaf else a
            for a, m in zip(args, grad_mask(gm, args, set(job.frozen_inputs or ())))]


def _observe_forked_once(job, kind, gm, args, timeout, qdir, config):
    from bot import proc
    from bot.torch_adapter.device import autograd_threads_started, cuda_initialized, fork_hooks

    sys.stdout.flush()
    sys.stderr.flush()
    # a forked child could not use the device, or run the graph's backward: a fresh interpreter judges
    if cuda_initialized() or autograd_threads_started():
        return _judged(job, _observe_exec(job, kind, gm, args, timeout + EXEC_START_S, qdir, config), timeout)

    def child(send):
        os.environ.pop(CRASH_HOOK_ENV, None)
        apply_process_state(job, fresh=False)
        ev = Evaluator(job.replace(deadline=None), kind, None)
        if config is not None:
            sig = with_config(config[0], config[1], lambda: ev.observe(gm, args))
        else:
            sig = ev.observe(gm, args)
        return sig.to_json() if sig else None   # the Signature record (or none)

    res = proc.fork(child, timeout=timeout, log_path=os.path.join(qdir, "query.log"), log_mode="w",
                    capture=20000, grace=0.0,
                    child_setup=fork_hooks("its queries")["child_setup"])
    return _judged(job, res, timeout)


EXEC_START_S = 30.0   # a fresh interpreter's import of torch and the device's start, on top of a query's time


def _judged(job: MinifyJob, res, timeout: float):
    """A query child's end as (signature or None, whether its death is unexplained)."""
    from bot.signature import death_of, signature_of_abort

    if res.timed_out:
        log(f"query: killed at its {timeout:.0f} s limit")
        return None, False
    if res.returncode == 0:
        return Signature.from_json(res.value), False
    output = res.output
    if res.signal is not None:
        death = death_of(res.signal, output)
        sig = signature_of_abort(output) if death.kind == "abort" else None
        if sig is None and job.failure_class == "crash":
            sig = Signature("crash")
        log(f"query: process died with {death.signal}" + (f" ({sig.describe()})" if sig else
                                                          ": " + " | ".join(output.strip().splitlines()[-6:])))
        return sig, sig is None
    log("query: process failed: " + " | ".join(output.strip().splitlines()[-3:]))
    return None, False


def acc_mode(job: MinifyJob) -> str:
    if job.failure_class != "accuracy":
        return ""
    return "strict_accuracy" if job.strict_accuracy else "accuracy"


def judge_of(job: MinifyJob) -> Judge:
    """How this worker judges a candidate, for the parent and for the repro it writes: the
    failure class, and for accuracy failures the check's tolerance and whether integer outputs
    are compared (torch's ``repro_tolerance`` / ``repro_ignore_non_fp`` in the repro)."""
    if job.failure_class != "accuracy":
        return Judge(job.failure_class)
    from bot.torch_adapter import repro as R

    compare = job.strict_accuracy or job.compare_non_fp
    return Judge(job.failure_class, job.tolerance, compare, R.judge_config(job.tolerance, compare))


def sanity(job: MinifyJob, kind: str, gm, args, isolate: bool) -> tuple[Signature | None, str]:
    """Does the captured graph fail on its own, the way the check failed? (signature, "") or
    (None, why not). Updates ``job`` with what it learns, in this order:

    1. the check's own class and error (a wrong type or message is another failure);
    2. a class the check could not know (a program judged by its exit status, a launcher written
       without torch's accuracy check): a graph that raises nothing but computes a wrong result
       is an accuracy failure;
    3. an accuracy failure whose floating-point outputs agree: integer and bool outputs compared
       exactly (an int32 overflow, an index off by one).
    """
    eager: list = []

    def observe():
        ev = IsolatedEvaluator(job, kind, None) if isolate else Evaluator(job, kind, None)
        sig = ev.observe(gm, args)   # ProcessPoisoned: the worker's step_sanity pins what it saw
        eager.append(getattr(ev, "eager_error", None))
        return sig

    uncertain = job.class_uncertain
    sig = observe()
    if sig is None and uncertain and job.failure_class != "accuracy":
        log(f"sanity: the graph raises nothing as {job.failure_class}; judging its result against fp64")
        job.failure_class = "accuracy"
        sig = observe()
    if sig is None and job.failure_class == "accuracy" and not (job.strict_accuracy or job.compare_non_fp):
        job.compare_non_fp = True
        sig = observe()
        if sig is None:
            job.compare_non_fp = False
        else:
            log("sanity: the floating-point outputs agree; an integer or bool output differs")
    if sig is None and eager and eager[0]:
        # not "does not fail": the graph cannot be judged on its own (a limitation, said as one)
        why = (f"limitation: the captured graph's own eager training step raises ({eager[0]}), so it cannot be "
               "judged on its own")
        log(f"sanity: {why}")
        return None, why
    return pinnable(job, sig)


def pinnable(job: MinifyJob, sig: Signature | None) -> tuple[Signature | None, str]:
    """(sig, "") when ``sig`` is the failure the check saw, else (None, why not)."""
    original = None if job.class_uncertain else signature_of_error_record(job.failure_class, job.original_error)
    if sig is None:
        return None, "the captured graph does not fail when run on its own"
    if original is not None and not original.admits(sig):
        return None, (f"the captured graph fails differently ({sig.describe()}) than the check "
                      f"({original.describe()})")
    return sig, ""


def random_inputs_reproduce(job: MinifyJob, kind, pinned, gm, final_path: str, isolate: bool) -> bool | None:
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
            loaded = R.load_repro_file(rf)
            rargs = R.read_inputs(loaded, None)
            if rf.kind == "dynamo" and R.holds_tensors(gm):
                # a graph that holds its weights: with no saved inputs they are random too, as in
                # repro_standalone.py (a random BatchNorm variance can hide the failure)
                gm = R.trace_dynamo_graph(loaded)
            ev = (IsolatedEvaluator if isolate else Evaluator)(job.replace(deadline=None), kind, pinned)
            sig = ev.observe(gm, rargs)
        return sig is not None and pinned.matches(sig)
    except Exception as exc:  # noqa: BLE001
        log(f"random-input check failed: {type(exc).__name__}: {exc}")
        return None
    finally:
        log(f"random-input check: {time.time() - t:.1f} s")


def bisect_probe(ev: Evaluator, gm, args, backend: str) -> bool:
    """True when ``gm`` compiled with ``backend`` does NOT fail the pinned way (bisector: good)."""
    ev.backend = backend
    sig = ev.observe(gm, args)
    return not (sig is not None and ev.pinned.matches(sig))


def with_config(all_keys: dict, subset: dict, fn):
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
