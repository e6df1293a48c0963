"""Fuzz campaign throughput, before and after, side by side: programs per minute on one core.

Runs the same campaign (``check --suite fuzz --seed S --fuzz-count N``) with this checkout and with
another commit of the project (``--before``, default ``main``; exported with ``git archive``), one
after the other, each pinned to one CPU core (taskset) with its own empty inductor cache, so that
every kernel of every program really compiles. Each variant generates the programs its own
generator makes for the seed (a shorter program is part of the throughput). Prints, per variant,
the campaign's own line (programs/min from the start, warm-up included), programs/min over the
checks alone, the mean compile time, and how many forked checks died and were run again in a fresh
interpreter (a death that a fresh interpreter does not repeat costs a whole interpreter start).

    python benchmarks/fuzz_throughput.py [--before REF] [--seed 11] [--count 8] [--python PY] [--all-cores]

One core hides races between a forked child's threads: on torch 2.15, 45 programs of seed 11 on both
cores (``--all-cores``) lost 9-10 checks to "Invalid thread pool!" before forked children made their
own thread pool, none after; pinned, none either way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def export(ref: str, dest: str) -> str:
    os.makedirs(dest)
    archive = subprocess.run(["git", "-C", ROOT, "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return dest


def campaign(tree: str, python: str, seed: int, count: int, work: str, pin: bool = True) -> dict:
    out = os.path.join(work, "run")
    env = dict(os.environ, PYTHONPATH=tree, TORCHINDUCTOR_CACHE_DIR=os.path.join(work, "inductor"),
               TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
    pin = ["taskset", "-c", "0"] if pin and shutil.which("taskset") else []
    argv = [*pin, python, "-m", "bot", "check", "--suite", "fuzz", "--seed", str(seed), "--fuzz-count",
            str(count), "--out", out, "--fail-on", "never"]
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    line = next((m.group(0) for m in re.finditer(r"fuzz campaign: .*", proc.stdout)), "no summary")
    try:
        rows = json.load(open(os.path.join(out, "results.json")))["checks"]
    except (OSError, ValueError, KeyError):
        print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"the campaign in {tree} wrote no results") from None
    checks_s = sum(r.get("duration_s") or 0 for r in rows)
    compiles = [r["compile_s"] for r in rows if isinstance(r.get("compile_s"), (int, float))]
    logs = os.path.join(out, "checks")
    rerun = sum("the same check in a fresh interpreter" in open(os.path.join(logs, f), errors="replace").read()
                for f in (os.listdir(logs) if os.path.isdir(logs) else ()) if f.endswith(".log"))
    return {"line": line, "wall_s": wall, "programs": len(rows), "checks_s": checks_s,
            "per_min_checks": 60 * len(rows) / max(checks_s, 1e-9),
            "per_min_wall": 60 * len(rows) / max(wall, 1e-9),
            "compile_mean_s": sum(compiles) / max(len(compiles), 1), "rerun_fresh": rerun}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="the commit to compare with (default main)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--all-cores", action="store_true",
                    help="no pinning: a forked child's threads run truly at once (races show only so)")
    args = ap.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory(prefix="fuzz-throughput-") as tmp:
        trees = {f"before ({args.before})": export(args.before, os.path.join(tmp, "before")), "after": ROOT}
        for name, tree in trees.items():
            work = os.path.join(tmp, name.split()[0] + "-work")
            os.makedirs(work)
            results[name] = r = campaign(tree, args.python, args.seed, args.count, work, pin=not args.all_cores)
            print(f"{name}: {r['line']}", flush=True)
            print(f"  {r['programs']} programs, {r['per_min_wall']:.1f} programs/min (wall, warm-up included), "
                  f"{r['per_min_checks']:.1f} programs/min (checks alone), mean compile {r['compile_mean_s']:.1f}s, "
                  f"{r['rerun_fresh']} forked checks died and ran again in a fresh interpreter",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
