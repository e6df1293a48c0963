"""`minify-bot selftest`: prove the whole pipeline works on this runner."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

from bot import rundir
from bot.errors import EXIT_FAILURES, EXIT_INTERNAL, EXIT_OK

HELP = "inject a known bug into a built-in model and run the whole pipeline; the first thing to run on a new runner"
DESCRIPTION = """Inject inductor's test-only relu accuracy bug into the code generator the device uses
(C++ on cpu, Triton on cuda), then run check -> minify -> report
against a throw-away local tracker and check every stage's result:

  check   mlp_relu fails accuracy, mlp_gelu (no relu) passes
  minify  the repro is minimized to the relu, fails the same way in every fresh run
  report  exactly one issue is filed; reporting the same run again files and comments nothing

Exits 0 when every stage behaves, 3 (loudly, saying which stage) when one does not."""

RELU_BUG_KEYS = {"cpu": "inductor.cpp.inject_relu_bug_TESTING_ONLY",
                 "cuda": "inductor.triton.inject_relu_bug_TESTING_ONLY"}


def injection_key(device: str) -> str:
    """The relu-bug key inductor reads for ``device``: its C++ backend generates CPU kernels, Triton
    GPU kernels (a C++ injection on a CUDA runner changes nothing and the check passes)."""
    kind = device.split(":")[0]
    if kind not in RELU_BUG_KEYS:
        from bot.errors import UsageError

        raise UsageError(f"selftest --device {device!r}: expected one of {', '.join(RELU_BUG_KEYS)}")
    return RELU_BUG_KEYS[kind]


def injection(device: str) -> str:
    """The ``--config`` item that injects the relu accuracy bug on ``device``."""
    return f"{injection_key(device)}=accuracy"


def add_arguments(p) -> None:
    p.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    p.add_argument("--keep", metavar="DIR", help="keep the run directory here instead of a temporary one")


class _StageFailed(Exception):
    pass


def _expect(cond, stage, what):
    if not cond:
        raise _StageFailed(f"{stage}: {what}")


def run(args) -> int:
    from bot.options import CheckOptions, MinifyOptions, ReportOptions, call_stage

    key = injection_key(args.device)
    inject = injection(args.device)
    base = args.keep or tempfile.mkdtemp(prefix="minify-selftest-")
    out = os.path.join(base, "run")
    issues = os.path.join(base, "issues")
    t0 = time.perf_counter()
    say = lambda m: print(f"selftest: {m}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        say(f"injecting {inject} (device {args.device}); working in {base}")
        rc = call_stage(CheckOptions(out=out, models=["mlp_relu", "mlp_gelu"], device=args.device,
                                     config=[inject], timeout=300.0))
        _expect(rc == EXIT_FAILURES, "check", f"expected exit 1 (a failure found), got {rc}")
        rows = {r.model: r for r in rundir.read_results(out).checks}
        _expect(rows["mlp_relu"].status == "fail_accuracy", "check",
                f"mlp_relu should fail accuracy under the injected bug, got {rows['mlp_relu'].status}")
        _expect(rows["mlp_gelu"].status == "pass", "check",
                f"mlp_gelu has no relu and should pass, got {rows['mlp_gelu'].status}")
        say(f"check ok ({time.perf_counter() - t0:.0f}s)")

        rc = call_stage(MinifyOptions(out=out, no_bisect=True, budget=120.0))
        fid = rows["mlp_relu"].id
        rec = rundir.read_failure(out, fid)
        _expect(rec is not None, "minify", f"no failure record for {fid} (exit {rc})")
        repro = rec.repro
        _expect(repro.status == "minimized", "minify", f"repro status {repro.status}: {repro.reason}")
        ops = [n.op for n in repro.graph or []]
        _expect(ops == ["aten.relu.default"], "minify", f"the repro should be exactly the relu, got {ops}")
        culprit = rec.culprit.ops if rec.culprit else None
        _expect(culprit == ["aten.relu.default"], "minify", f"culprit should be the relu, got {culprit}")
        ver = repro.verification
        _expect(ver is not None and ver.runs and ver.failed_same_way == ver.runs, "minify",
                f"repro did not fail the same way in every fresh run: {ver}")
        keys = [d.key for d in rec.config.minimal or []]
        _expect(keys == [key], "minify", f"minimal config diff should be the injected key, got {keys}")
        say(f"minify ok: {repro.nodes_before} -> {repro.nodes_after} nodes, verified "
            f"{ver.failed_same_way}/{ver.runs} ({time.perf_counter() - t0:.0f}s)")

        report = ReportOptions(out=out, tracker="local", issues_dir=issues, dashboard=False)
        rc = call_stage(report)
        _expect(rc in (EXIT_OK, EXIT_FAILURES), "report", f"exit {rc}")
        counts = rundir.read_report(out).counts
        _expect(counts.get("created") == 1, "report", f"expected 1 issue filed, got {counts}")
        rc = call_stage(report)
        counts = rundir.read_report(out).counts
        _expect(counts.get("created", 0) == 0 and counts.get("commented", 0) == 0, "report",
                f"reporting the same run twice must file and comment nothing, got {counts}")
        say(f"report ok: one issue in {issues}; a second report filed nothing")
    except _StageFailed as exc:
        say(f"FAILED at {exc}")
        say(f"the run directory is kept for inspection: {base}")
        return EXIT_INTERNAL
    say(f"PASSED in {time.perf_counter() - t0:.0f}s")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return EXIT_OK
