"""What running programs warm saves (bot.suites.warm): each program of the genuine corpus goes
through the user's whole way to an issue,

    minify-bot run --command "python benchmarks/genuine/<prog>.py" --name <prog> --no-bisect

once with every program run in a fresh interpreter (``MINIFY_BOT_WARM=0``) and once warm (forked
from an interpreter that imported torch already), alternately, side by side in one run, the same
inductor cache warm for both (a first warm-up run per program is not counted). The plain program
(``python prog.py``) is timed beside them.

Printed per program: the plain program's wall time, the run's fresh and warm (median over
``--repeat``), warm / fresh, and each run's time over the plain program's; plus whether both ended
the same way (the culprit and verification of each failure).

    python benchmarks/warm_programs.py [--programs ranker_int32,gnn_index_add] [--repeat 1]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=False)
    return time.perf_counter() - t


def _ending(out: str) -> list:
    """Each failure's culprit and verification, as the run directory records them."""
    ends = []
    for path in sorted(glob.glob(os.path.join(out, "failures", "*", "failure.json"))):
        with open(path) as fh:
            repro = json.load(fh).get("repro") or {}
        ends.append((repro.get("status"), repro.get("nodes_after"), repro.get("verified")))
    return ends


def measure(name: str, repeat: int, d: str) -> dict:
    prog = os.path.join("benchmarks", "genuine", f"{name}.py")
    times: dict[str, list[float]] = {"plain": [], "fresh": [], "warm": []}
    ends: dict[str, list] = {}
    for k in range(repeat + 1):
        times["plain"].append(_timed([sys.executable, prog], dict(os.environ)))
        for mode in ("fresh", "warm"):
            out = os.path.join(d, f"{name}-{mode}-{k}")
            env = dict(os.environ, MINIFY_BOT_WARM="0" if mode == "fresh" else "1")
            issues = os.path.join(d, f"issues-{mode}-{k}")
            times[mode].append(_timed([sys.executable, "-m", "bot", "run", "--command", f"{sys.executable} {prog}",
                                       "--name", name, "--out", out, "--issues-dir", issues, "--no-bisect"], env))
            ends[mode] = _ending(out)
    return {m: statistics.median(v[1:]) for m, v in times.items()} | {"same": ends["fresh"] == ends["warm"],
                                                                       "ends": ends["warm"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default="ranker_int32,gnn_index_add,uint8_image_stretch",
                    help="comma-separated names from benchmarks/genuine/")
    ap.add_argument("--repeat", type=int, default=1, help="counted runs per program and mode (default 1)")
    args = ap.parse_args()
    print(f"{'program':<22}{'plain s':>9}{'fresh s':>9}{'warm s':>8}{'warm/fresh':>11}{'fresh/plain':>12}"
          f"{'warm/plain':>11}  same ending")
    ratios = []
    with tempfile.TemporaryDirectory() as d:
        for name in args.programs.split(","):
            r = measure(name, args.repeat, d)
            ratios.append(r["warm"] / r["fresh"])
            print(f"{name:<22}{r['plain']:>9.1f}{r['fresh']:>9.1f}{r['warm']:>8.1f}{ratios[-1]:>10.2f}x"
                  f"{r['fresh'] / r['plain']:>11.2f}x{r['warm'] / r['plain']:>10.2f}x  {r['same']} {r['ends']}",
                  flush=True)
    print(f"\nwarm / fresh: median {statistics.median(ratios):.2f}x over {len(ratios)} programs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
