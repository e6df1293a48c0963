"""Isolation overhead of `minify-bot check` on the built-in zoo.

Prints, per model, the in-process compile+check time (one interpreter runs every check in turn,
no isolation), then the wall time of the real sweep (`minify-bot check`, every check in its own
forked process with a timeout, including interpreter start, torch import and warm-up), and the
ratio of the two. For context it also times the naive design: a fresh interpreter per check.

All runs share one warm C++ kernel cache but have the FX graph cache off, so every variant
really compiles every graph.   Usage: python benchmarks/check_overhead.py [--skip-naive]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

IN_PROCESS = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from bot.check.judge import judge
from bot.check.settings import Settings
from bot.suites.zoo import MODELS
times = {}
for name in MODELS:
    t = time.perf_counter()
    row = judge({"source": "zoo", "model": name}, Settings())
    times[name] = (time.perf_counter() - t, row["status"])
print(json.dumps(times))
"""


def main() -> None:
    env = dict(os.environ, PYTHONPATH=ROOT, TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(ROOT, ".cache", "inductor"))
    py = sys.executable
    print("priming the C++ kernel cache ...", flush=True)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([py, "-m", "bot", "check", "--out", d], env=env, capture_output=True, check=False)

    out = subprocess.run([py, "-c", IN_PROCESS, ROOT], env=env, capture_output=True, text=True, check=True)
    inproc = json.loads(out.stdout.strip().splitlines()[-1])
    total_in = sum(t for t, _ in inproc.values())

    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        subprocess.run([py, "-m", "bot", "check", "--out", d], env=env, capture_output=True, check=False)
        sweep_wall = time.perf_counter() - t
        rows = {r["model"]: r for r in json.load(open(os.path.join(d, "results.json")))["checks"]}

    naive = None
    if "--skip-naive" not in sys.argv:
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            for name in inproc:
                req = os.path.join(d, "c.json")
                with open(req, "w") as fh:
                    json.dump({"spec": {"source": "zoo", "model": name}, "settings": {}}, fh)
                subprocess.run([py, "-m", "bot.check.one", "--check", req, "--out", os.path.join(d, "r.json")],
                               env=env, capture_output=True, check=False, cwd=d)
        naive = time.perf_counter() - t

    print(f"\n{'model':<18}{'in-process s':>14}{'forked check s':>16}  status")
    for name, (secs, _) in inproc.items():
        print(f"{name:<18}{secs:>14.2f}{rows[name]['duration_s']:>16.2f}  {rows[name]['status']}")
    print(f"\nsum of in-process compile+check times : {total_in:8.2f} s")
    print(f"sweep wall time (minify-bot check)    : {sweep_wall:8.2f} s")
    print(f"isolation overhead ratio              : {sweep_wall / total_in:8.2f}x  (target <= 1.5x)")
    if naive is not None:
        print(f"naive fresh interpreter per check     : {naive:8.2f} s  ({naive / total_in:.2f}x)")


if __name__ == "__main__":
    main()
