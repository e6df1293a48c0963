"""What a `--command` check costs beyond the program: each program of the genuine corpus
(benchmarks/genuine/ on CPU; benchmarks/genuine_cuda/ on a GPU runner with --corpus genuine_cuda)
is run plain (`python prog.py`) and as a check (`minify-bot check --command "python prog.py"
--reruns 0`: one run, the environment hook loaded), alternately, side by side in one run, the
same inductor cache warm for both (the first pair is a warm-up and not counted).

Printed per program: the median wall time of the plain program, of the check (the whole
`minify-bot check` process), the program's own run time as the check recorded it (results.json's
``program_s``), the ratio check / plain (target <= 1.15x), and the backend, device, dtype and mode the
check recorded (what the program compiled).

    python benchmarks/command_overhead.py [--programs gnn_index_add,ranker_int32] [--repeat 3]
        [--corpus genuine|genuine_cuda]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOT = os.path.join(os.path.dirname(sys.executable), "minify-bot")
SKIP = 77   # a CUDA program on a machine without a GPU


def _timed(cmd: list[str], cwd: str) -> tuple[float, int]:
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
    return time.perf_counter() - t, p.returncode


def measure(prog: str, repeat: int) -> dict:
    plain_cmd = [sys.executable, prog]
    plain, check, own = [], [], []
    row: dict = {}
    with tempfile.TemporaryDirectory() as d:
        for k in range(repeat + 1):
            s_plain, rc = _timed(plain_cmd, ROOT)
            if rc == SKIP:
                return {"skipped": "no CUDA device"}
            out = os.path.join(d, f"run{k}")
            s_check, _ = _timed([BOT, "check", "--command", shlex.join(plain_cmd), "--name", "prog", "--reruns", "0",
                                 "--out", out], ROOT)
            with open(os.path.join(out, "results.json")) as fh:
                row = json.load(fh)["checks"][0]
            if k == 0:
                continue   # warm-up: the inductor cache and the page cache
            plain.append(s_plain)
            check.append(s_check)
            own.append(row.get("program_s") or float("nan"))
    return {"plain": statistics.median(plain), "check": statistics.median(check), "own": statistics.median(own),
            "status": row.get("status"),
            "where": ", ".join(str(row.get(k)) for k in ("backend", "device", "dtype", "mode")),
            "rc": rc}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", help="comma-separated names (default: every program of the corpus)")
    ap.add_argument("--repeat", type=int, default=3, help="counted pairs per program (default 3)")
    ap.add_argument("--corpus", default="genuine", help="genuine (CPU) or genuine_cuda (default genuine)")
    args = ap.parse_args()
    corpus = os.path.join(ROOT, "benchmarks", args.corpus)
    names = args.programs.split(",") if args.programs else \
        sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(corpus, "*.py")))
    print(f"{'program':<22}{'plain s':>9}{'check s':>9}{'own s':>8}{'ratio':>7}  {'status':<14}recorded")
    ratios = []
    for name in names:
        r = measure(os.path.join("benchmarks", args.corpus, f"{name}.py"), args.repeat)
        if "skipped" in r:
            print(f"{name:<22}  skipped: {r['skipped']}")
            continue
        ratio = r["check"] / r["plain"]
        ratios.append(ratio)
        print(f"{name:<22}{r['plain']:>9.2f}{r['check']:>9.2f}{r['own']:>8.2f}{ratio:>6.2f}x  {r['status']:<14}"
              f"{r['where']}", flush=True)
    if ratios:
        print(f"\ncheck / plain: median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x (target <= 1.15x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
