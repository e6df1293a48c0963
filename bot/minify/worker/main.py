"""The minify worker's process: its commands and its steps (started by :mod:`bot.minify.reduce`).

    python -m bot.minify.worker minify JOB.json     reduce a captured graph (fast path: in-process
                                                     queries; or --isolate: one forked process per query)
    python -m bot.minify.worker probe-dynamo BACKEND does TORCHDYNAMO_REPRO_AFTER=dynamo work here?
    python -m bot.minify.worker query QDIR           judge one candidate (QDIR/candidate.py) in a fresh
                                                     process: the isolated queries of a worker whose
                                                     graph is on the GPU, which no fork could use

A run that leaves the device unusable (an illegal memory access, a device-side assert) ends the
in-process worker (exit 75, :class:`ProcessPoisoned`) once the failure is pinned; the minify stage
resumes from the latest checkpoint with one process per query.

Normally :func:`cmd_minify` runs in a child forked from the minify command's fork server (see
reduce.py); the command line is the fresh-process variant. JOB.json is written by the parent.
The steps, in order, each a function over one :class:`Run`: :func:`step_sanity` (does the captured
graph fail on its own, the way the check did), :func:`step_reduce` (the culprit search and the
reduction passes: :data:`bot.minify.worker.passes.REDUCTION`), :func:`step_config` (the minimal config
diff), :func:`step_final` (the repro,
announced so the parent verifies it while) :func:`bot.minify.worker.readout.step_readout` (accuracy
failures: each op against fp64) and :func:`step_bisect` (torch's bisector) run. How a
candidate is judged is :mod:`bot.minify.worker.predicate`'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bot import rundir
from bot.errors import InfraError
from bot.minify.records import (
    EXIT_POISONED,
    Checkpoint,
    Done,
    Final,
    Judge,
    Loaded,
    MinifyJob,
    Pinned,
    Probe,
    WorkerResult,
    emit,
)
from bot.minify.worker.predicate import (
    BudgetExceeded,
    Evaluator,
    IsolatedEvaluator,
    ProcessPoisoned,
    acc_mode,
    apply_compile_options,
    apply_process_state,
    bisect_probe,
    cmd_query,
    differentiable,
    judge_of,
    load_graph,
    log,
    pinnable,
    random_inputs_reproduce,
    sanity,
    with_config,
)
from bot.minify.worker.readout import step_readout
from bot.records import Culprit, GraphBisect
from bot.signature import Signature, bisect_words
from bot.torch_adapter import fxutil

BISECT_CRASH_ENV = "MINIFY_BOT_WORKER_CRASH_IN_BISECT"  # fault injection: =1: hard-exit when the bisector starts
# fault injection: =1: the worker is killed (SIGKILL) right after it announced its first checkpoint
CHECKPOINT_KILL_ENV = "MINIFY_BOT_WORKER_KILLED_AT_CHECKPOINT"
DYNAMIC_MARK = "dynamic"   # in the worker's directory: its dynamo graph is compiled with dynamic shapes


class Stop(Exception):
    """A step ends the run early with this status and reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass
class Run:
    """One worker run: the job, the captured graph, and what the steps learn."""

    job: MinifyJob
    rf: Any                       # the launcher as parsed (bot.torch_adapter.repro.ReproFile)
    gm: Any
    args: list
    t0: float
    nodes_before: int
    pinned: Signature | None = None
    status: str = "minimized"
    culprit: Any = None           # problem.Culprit
    queries: int = 0
    result: WorkerResult = field(default_factory=WorkerResult)

    @property
    def kind(self) -> str:
        return self.rf.kind

    @property
    def isolate(self) -> bool:
        return self.job.isolate

    @property
    def workdir(self) -> str:
        return self.job.workdir

    @contextlib.contextmanager
    def timed(self, name: str):
        t = time.time()
        try:
            yield
        finally:
            self.result.timings[name] = round(time.time() - t, 2)

    def evaluator(self, kind: str | None = None, budgeted: bool = True):
        job = self.job if budgeted else self.job.replace(deadline=None)
        cls = IsolatedEvaluator if self.isolate and kind is None else Evaluator
        return cls(job, kind or self.kind, self.pinned)


def cmd_minify(job_path: str) -> int:
    import torch

    from bot.torch_adapter import repro as R

    run = load_run(job_path)
    try:
        with R.config_snapshot(), R.disable_repro_after(), torch.no_grad():
            step_sanity(run)
            step_reduce(run)
            step_config(run)
        bisects = step_final(run)
        with R.config_snapshot(), R.disable_repro_after(), torch.no_grad():
            step_readout(run)
            step_bisect(run, bisects)
    except Stop as stop:
        return _finish(run, stop.status, stop.reason)
    except InfraError as exc:   # e.g. a repro torch's writer cannot write as valid Python: no repro, said why
        log(f"internal error: {exc}")
        return _finish(run, "error", f"the final repro could not be written: {exc}")
    except ProcessPoisoned as exc:
        # no result: the minify stage resumes from the latest checkpoint with one process per query
        log(f"the device is unusable in this process after {exc}; exiting so that the rest runs in fresh "
            "processes")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_POISONED)
    from bot.torch_adapter import minifier as M

    r = run.result
    r.graph, r.nodes_after, r.queries, r.kind = M.graph_ops(run.gm), len(run.gm.graph.nodes), run.queries, run.kind
    r.backend, r.dynamic = run.job.backend, run.job.dynamic
    r.graph_role = graph_role(run.rf.source) if run.kind == "aot" else None
    return _finish(run, run.status, r.reason)


def load_run(job_path: str) -> Run:
    """Read the job, enter its working directory, load the captured graph and its inputs."""
    import torch

    from bot.torch_adapter import repro as R

    job = MinifyJob.read(job_path)
    if job.numerics:   # the program's process state the graph ran under (TF32, default dtype, autocast)
        failed = apply_process_state(job, fresh=True)
        log(f"numerics: the program's {', '.join(sorted(job.numerics))}"
            + (f" (this torch cannot set {', '.join(failed)})" if failed else ""))
    os.makedirs(job.workdir, exist_ok=True)
    os.chdir(job.workdir)  # torch writes scratch files into the CWD
    t0 = time.time()
    R.require_repro_api()
    os.makedirs(os.path.join(job.workdir, "checkpoints"), exist_ok=True)
    if job.isolate:
        # queries are forked from this process: it must not start OpenMP's thread pool itself
        job.threads = torch.get_num_threads()
        torch.set_num_threads(1)
    t = time.time()
    rf, gm, args = load_graph(job.repro)
    if job.compile_options:
        refused = apply_compile_options(job)
        log(f"compile options: the program's torch.compile set {', '.join(sorted(job.compile_options))}"
            + (f" (this torch refuses {', '.join(refused)})" if refused else ""))
    # a launcher captured with dynamic shapes was traced symbolically: every candidate must stay so
    job.dynamic = bool(rf.kind == "aot" and fxutil.symbolic_placeholders(gm))
    args = differentiable(job, rf.kind, gm, args)
    run = Run(job, rf, gm, args, t0, job.nodes_before or len(gm.graph.nodes))
    run.result.timings["load"] = round(time.time() - t, 2)
    emit(Loaded(nodes=len(gm.graph.nodes), kind=rf.kind, dynamic=job.dynamic))
    return run


def step_sanity(run: Run) -> None:
    """1. The captured graph must fail on its own, the way the check failed; a resumed run (the
    isolated worker after the in-process one died) takes what the first one learned."""
    sig_path = os.path.join(run.workdir, "signature.json")
    judge_path = os.path.join(run.workdir, "judge.json")
    with run.timed("sanity"):
        if os.path.exists(sig_path):
            run.pinned = Signature.from_json(json.load(open(sig_path)))
            run.job.dynamic = run.job.dynamic or (run.kind == "dynamo"
                                                  and os.path.exists(os.path.join(run.workdir, DYNAMIC_MARK)))
            with contextlib.suppress(OSError, ValueError):
                run.job.learn(Judge.from_json(json.load(open(judge_path))))
        if run.pinned is None:
            poisoned = None
            try:
                sig, why_not = static_first(run)
            except ProcessPoisoned as exc:   # pinned from this run; the rest needs fresh processes
                (sig, why_not), poisoned = pinnable(run.job, exc.signature), exc
                if sig is None and exc.signature is None:
                    raise   # nothing learned here: the isolated worker asks again, in a fresh process
            if sig is None:
                raise Stop("not_reproduced", why_not)
            run.pinned = sig
            with open(sig_path, "w") as fh:
                json.dump(sig.to_json(), fh)
            with open(judge_path, "w") as fh:
                json.dump(judge_of(run.job).to_json(), fh)
            if poisoned is not None:
                raise poisoned
    emit(Pinned(run.pinned))
    run.result.signature = run.pinned
    run.result.judge = judge_of(run.job)


def static_first(run: Run) -> tuple[Signature | None, str]:
    """The sanity step, static first: a graph captured with dynamic shapes is tried with its sizes set
    to the captured values; when that fails the way the check did, the reduction and the repro are
    static (a bug that does not need symbolic sizes is reported without them). Dynamic only when the
    static graph does not fail; the result's ``dynamic`` says which."""
    if run.job.dynamic and run.kind == "aot":
        try:
            _rf, gm, args = load_graph(run.job.repro, static=True)
        except Exception as exc:  # noqa: BLE001 - a graph that cannot be traced static stays dynamic
            log(f"static first: the graph could not be traced with its captured sizes ({type(exc).__name__}: "
                f"{str(exc)[:200]}); kept dynamic")
        else:
            job = run.job.replace(dynamic=False)
            sig, _ = sanity(job, run.kind, gm, args, run.isolate)
            if sig is not None:
                log(f"static first: the graph with its sizes set to the captured values fails the same way: "
                    f"static ({len(gm.graph.nodes)} nodes)")
                run.job, run.gm, run.args = job, gm, args
                run.rf.tracing_mode = "real"
                run.result.static_first = True
                return sig, ""
            log("static first: the graph with its sizes set to the captured values does not fail: kept dynamic")
    elif run.kind == "dynamo" and "reader.symint(" in run.rf.source and not run.job.dynamic:
        return _static_first_dynamo(run)
    return sanity(run.job, run.kind, run.gm, run.args, run.isolate)


def _static_first_dynamo(run: Run) -> tuple[Signature | None, str]:
    """A dynamo graph captured with dynamic sizes (``reader.symint``: ``mark_dynamic``, ``dynamic=True``):
    compiled static first, and with dynamic shapes, as captured, when static does not fail."""
    sig, why = sanity(run.job, run.kind, run.gm, run.args, run.isolate)
    if sig is not None:
        log("static first: the dynamo graph captured with dynamic sizes fails compiled static: static")
        run.result.static_first = True
        return sig, why
    job = run.job.replace(dynamic=True)
    sig, why_dynamic = sanity(job, run.kind, run.gm, run.args, run.isolate)
    if sig is None:
        return None, why
    log("static first: the dynamo graph does not fail compiled static; compiled with dynamic shapes, as captured")
    run.job = job
    open(os.path.join(run.workdir, DYNAMIC_MARK), "w").close()   # a resumed worker compiles it so too
    return sig, why_dynamic


def step_reduce(run: Run) -> None:
    """2. The culprit search and the reduction passes (:data:`bot.minify.worker.passes.REDUCTION`);
    checkpoints as the graph shrinks (the smallest is kept when the budget runs out)."""
    from bot.minify.worker.problem import PassStats
    from bot.torch_adapter import minifier as M
    from bot.torch_adapter import repro as R

    evaluator = run.evaluator()
    stats = PassStats()
    best = {"gm": run.gm, "args": run.args}
    store = os.path.join(run.workdir, "store")

    def dump_state(cur_gm, cur_args):
        n = len(cur_gm.graph.nodes)
        best["gm"], best["args"] = cur_gm, list(cur_args)
        path = os.path.join(run.workdir, "checkpoints", f"{n}.py")
        try:
            src = R.repro_source(cur_gm, cur_args, kind=run.kind, accuracy=acc_mode(run.job), save_dir=store,
                                 backend=run.job.backend, tracing_mode=run.rf.tracing_mode)
            with open(path + ".tmp", "w") as fh:
                fh.write(src)
            os.replace(path + ".tmp", path)
        except Exception as exc:  # noqa: BLE001 - a checkpoint is a convenience; the reduction goes on
            log(f"could not write checkpoint {path}: {exc}")
        emit(Checkpoint(nodes=n, path=path))
        if os.environ.get(CHECKPOINT_KILL_ENV) == "1":
            os.kill(os.getpid(), signal.SIGKILL)

    with run.timed("reduce"):
        try:
            run.gm, run.args, run.culprit = reduce_graph(run.job, run.gm, run.args, evaluator, dump_state, run.workdir,
                                                         stats)
        except BudgetExceeded:
            run.status = "partial"
            run.result.reason = f"time budget of {run.job.budget} s ran out; kept the smallest checkpoint"
            run.gm, run.args = best["gm"], best["args"]
        except M.SanityCheckFailed as exc:
            raise Stop("not_reproduced", "the captured graph does not fail when run on its own") from exc
        finally:
            run.result.passes = stats.records()   # per pass: queries, removed call nodes, seconds
            _judge_learned(run)
        run.queries = evaluator.queries


def _judge_learned(run: Run) -> None:
    """The search learned how to judge (the failure shows in integers): the repro's judge, and a
    resumed worker's, say so too."""
    judge = judge_of(run.job)
    if judge == run.result.judge:
        return
    run.result.judge = judge
    with open(os.path.join(run.workdir, "judge.json"), "w") as fh:
        json.dump(judge.to_json(), fh)


def step_config(run: Run) -> None:
    """3. The minimal config diff, by delta debugging over the non-default keys."""
    from bot.minify.worker.configdiff import true_diff
    from bot.torch_adapter import repro as R

    with run.timed("config"):
        values = {**run.rf.config, **run.job.check_config, **run.job.compile_options}
        diff = true_diff(values, ignore=R.CAPTURE_KEYS)
        run.result.config_diff = diff
        keys = {d.key: values[d.key] for d in diff if not isinstance(values[d.key], R._Unparsed)}
        minimal = None
        if keys:
            if run.isolate:
                iso = IsolatedEvaluator(run.job.replace(deadline=None), run.kind, run.pinned)

                def fails(cfg):
                    sig = iso.observe(run.gm, run.args, config=(keys, cfg))
                    return sig is not None and run.pinned.matches(sig)
            else:
                def fails(cfg):
                    return with_config(keys, cfg, lambda: run.evaluator(budgeted=False)(run.gm, run.args))
            try:
                minimal = minimal_config(keys, fails)
            except Exception as exc:  # noqa: BLE001 - the full diff is kept: it reproduces
                log(f"config minimization failed: {type(exc).__name__}: {exc}")
        run.result.config_minimal = None if minimal is None else [d for d in diff if d.key in minimal]


def step_final(run: Run) -> bool:
    """4. The final repro (inputs in final/inputs), announced before the bisector runs: the parent
    starts verifying it in fresh processes meanwhile. Returns whether the bisector runs next."""
    from bot.torch_adapter import repro as R

    final_dir = os.path.join(run.workdir, "final")
    os.makedirs(final_dir, exist_ok=True)
    path = os.path.join(final_dir, rundir.REPRO)
    args = run.args
    if run.job.training and run.kind == "dynamo":   # the repro runs the backward too (torch's run_fwd_maybe_bwd)
        import torch

        from bot.torch_adapter.minifier import grad_mask

        args = [a.detach().requires_grad_(m) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a, m in zip(args, grad_mask(run.gm, args, set(run.job.frozen_inputs or ())))]
    src = R.repro_source(run.gm, args, kind=run.kind, accuracy=acc_mode(run.job),
                         save_dir=os.path.join(final_dir, "inputs"), backend=run.job.backend,
                         tracing_mode=run.rf.tracing_mode, state=run.job.numerics)
    with open(path, "w") as fh:
        fh.write(src)
    r = run.result
    r.random_inputs_reproduce = random_inputs_reproduce(run.job, run.kind, run.pinned, run.gm, path, run.isolate)
    bisects = run.job.bisect and run.kind == "aot" and not run.isolate
    emit(Final(path=path, config_diff=r.config_diff, config_minimal=r.config_minimal,
               random_inputs_reproduce=r.random_inputs_reproduce, bisects=bisects, judge=r.judge))
    return bisects


def step_bisect(run: Run, bisects: bool) -> None:
    """5. torch's CompilerBisector on the final graph (optional), and the culprit record."""
    t = time.time()
    run.result.bisect = None
    if bisects:
        from bot.torch_adapter import bisect as B

        if os.environ.get(BISECT_CRASH_ENV) == "1":
            os._exit(70)  # fault injection: the worker dies after it announced its final repro
        remaining = (run.job.deadline or (time.time() + 120)) - time.time()
        if remaining > 10:
            # each of the bisector's backends (eager ... inductor) straight on the aten graph;
            # through dynamo where the graph has symbolic sizes (dynamo keeps them symbolic)
            ev = run.evaluator("dynamo" if run.job.dynamic else "backend", budgeted=False)
            try:
                run.result.bisect = B.bisect_graph(
                    run.gm, run.args, lambda g, a, b: bisect_probe(ev, g, a, b),
                    budget=min(remaining - 5, run.job.bisect_budget))
            except Exception as exc:  # noqa: BLE001 - the bisector's answer is optional
                log(f"bisect failed: {type(exc).__name__}: {exc}")
    if run.result.bisect is not None or run.job.bisect:
        run.result.timings["bisect"] = round(time.time() - t, 2)
    run.result.culprit = culprit_record(run.gm, run.culprit, run.result.bisect, run.status)


def reduce_graph(job: MinifyJob, gm, args, evaluator, dump_state, workdir: str, stats=None, steps=None):
    """Reduce ``gm``: :data:`bot.minify.worker.passes.REDUCTION` (or ``steps``) over one problem, every
    query through one cached oracle over ``evaluator``; logs the ``reduce:`` line (queries against
    the bound, and each pass's queries, removed call nodes and seconds). Returns (gm, args,
    problem.Culprit | None); ``stats`` (problem.PassStats) gets each pass's record."""
    from bot.minify.worker import passes as P
    from bot.minify.worker import problem as PR
    from bot.minify.worker.graph import State, call_nodes

    problem = PR.Problem(State(gm, list(args)), PR.Oracle(evaluator), job, workdir=workdir, checkpoint_to=dump_state,
                         log=log, stats=stats if stats is not None else PR.PassStats())
    n0, g0 = len(call_nodes(gm)), len(gm.graph.nodes)
    P.run(problem, P.REDUCTION if steps is None else steps)
    n1, g1, asked = len(call_nodes(problem.state.gm)), len(problem.state.gm.graph.nodes), problem.oracle.asked
    bound = query_bound(g0, g1)
    log(f"reduce: {n0} -> {n1} call nodes ({g0} -> {g1} graph nodes) in {asked} queries "
        f"({'within' if asked <= bound else 'OVER'} the bound 2*ceil(log2 N) + 2*final + 4 = {bound}); "
        + "; ".join(problem.stats.lines()))
    return problem.state.gm, problem.state.args, problem.culprit


def query_bound(n: int, final: int) -> int:
    """The reduction's query bound on an ``n``-node graph reduced to ``final`` nodes, counted as the
    issue counts a graph ("25 -> 3 graph nodes"): every node, inputs and outputs included (the
    cleanup's queries try dropping outputs and inputs too). The one definition the log, the tests
    and the benchmarks use."""
    import math

    return 2 * math.ceil(math.log2(max(n, 2))) + 2 * final + 4


def culprit_record(gm, culprit, bisect: GraphBisect | None, status: str) -> Culprit | None:
    """failure.json's "culprit": the op(s) that fail compiled alone (or the reduced graph's ops),
    and the bisector's one-line answer."""
    from bot.minify.worker.problem import agrees_with_bisect

    if culprit is None or status != "minimized":
        return None  # a partial reduction proves no culprit
    ops, method = sorted(culprit.ops), culprit.method
    agree = agrees_with_bisect(ops, bisect)
    if agree is False:
        log(f"culprit {', '.join(ops)} does not match the bisector's answer {bisect_words(bisect)!r}")
    return Culprit(ops, bisect_words(bisect), method)


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


def minimal_config(keys: dict, fails) -> list[str]:
    """ddmin over the keys: a smallest subset (1-minimal) for which ``fails(subset)`` holds.

    The minimized graph fails with the full diff (it was minimized under it), so that is not
    queried again; with one key, a single query (does it fail without it?) decides."""
    from bot.minify.worker.configdiff import ddmin

    names = list(keys)
    if fails({}):
        return []
    if len(names) == 1:
        return names
    return ddmin(names, lambda sub: fails({k: keys[k] for k in sub}))


def _finish(run: Run, status: str, reason: str | None) -> int:
    result = run.result
    result.status, result.reason, result.nodes_before = status, reason, run.nodes_before
    result.seconds = round(time.time() - run.t0, 2)
    result.write(os.path.join(run.workdir, "result.json"))
    emit(Done(status))
    return 0


def cmd_probe_dynamo(backend: str) -> int:
    from bot.torch_adapter import repro as R

    reason = R.probe_dynamo_repro_after(backend)
    emit(Probe(broken=reason is not None, reason=reason))
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
    if cmd == "query":
        return cmd_query(rest[0])
    print(f"unknown worker command {cmd}", file=sys.stderr)
    return 2

