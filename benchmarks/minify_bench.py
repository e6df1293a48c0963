"""Side-by-side minification benchmark on a corpus of injected bugs.

For each case a deep MLP (Linear + tanh, with one relu at a chosen depth) is compiled with
inductor and a test-only bug injected into the C++ relu; torch's repro-after (aot) writes a
minifier_launcher.py. The same launcher is then minified three ways, each in its own directory:

  ours        minify-bot's reduce stage (in-process fx minifier in a worker process, pinned predicate)
  isolated    python minifier_launcher.py minify               (torch default: a process per query)
  no-isolate  python minifier_launcher.py minify --no-isolate

and wall time, queries and final node count are printed per case, with medians.

    python benchmarks/minify_bench.py [--cases small,medium,large] [--skip-isolated] [--out DIR]

Keeps the C++ kernel cache warm through TORCHINDUCTOR_CACHE_DIR (shared by all runs); the
FX-graph/AOTAutograd caches are off so every run really compiles.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# name: (layers, relu_at, bug)  -> about 5 * layers + 2 aot-graph nodes.
# An accuracy bug must sit within ~10 layers of the output: further up, the tanh layers after it
# squash the error below the tolerance and torch's level-4 check (rightly) captures nothing —
# that was the "capture wrote no launcher" of a relu at layer 60 of 100.
CASES = {
    "small": (10, 3, "accuracy"),
    "medium": (30, 27, "compile_error"),
    "large": (100, 92, "accuracy"),
    "large-deep": (100, 20, "compile_error"),
}
DEFAULT_CASES = "small,medium,large"

MODEL = r'''
import sys, torch
layers, relu_at, bug = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
import torch._inductor.config as ic
ic.cpp.inject_relu_bug_TESTING_ONLY = bug
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ls = torch.nn.ModuleList([torch.nn.Linear(32, 32) for _ in range(layers)])
    def forward(self, x):
        for i, l in enumerate(self.ls):
            x = l(x)
            x = torch.relu(x) if i == relu_at else torch.tanh(x)
        return x
torch.manual_seed(0)
with torch.no_grad():
    torch.compile(M())(torch.randn(8, 32))
'''


def env(extra=None):
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
    e["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
    e.update(extra or {})
    return e


def capture(case: str, work: str) -> str:
    layers, relu_at, bug = CASES[case]
    d = os.path.join(work, case, "capture")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.py"), "w") as fh:
        fh.write(MODEL)
    level = "4" if bug == "accuracy" else "2"
    found = glob.glob(os.path.join(d, "torch_compile_debug", "run_*", "minifier", "minifier_launcher.py"))
    if found:  # --out DIR of an earlier run: same corpus
        return found[0]
    p = subprocess.run([sys.executable, "model.py", str(layers), str(relu_at), bug], cwd=d, capture_output=True,
                       text=True, env=env({"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": level,
                                           "TORCH_COMPILE_DEBUG_DIR": d}), timeout=1800)
    with open(os.path.join(d, "capture.log"), "w") as fh:
        fh.write(p.stdout + p.stderr)
    found = glob.glob(os.path.join(d, "torch_compile_debug", "run_*", "minifier", "minifier_launcher.py"))
    if not found:
        tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
        raise SystemExit(f"{case}: capture wrote no launcher (exit {p.returncode}; "
                         f"{'the bug was not detected' if p.returncode == 0 else ' | '.join(tail)})")
    return found[0]


def nodes_of(launcher: str) -> int:
    src = open(launcher).read()
    m = re.search(r"def forward\(self(.*?)\n\n", src, re.S)
    return len(re.findall(r"^        \w+ = ", m.group(0), re.M)) + len(m.group(1).split(",")) if m else -1


def warm_up() -> float:
    """minify imports and warms torch once per command (shared by every failure's localize,
    capture and reduce); that one-time cost is measured and printed separately."""
    from bot.minify import procs

    t0 = time.time()
    procs.warm_parent()
    return time.time() - t0


def run_ours(launcher: str, d: str, bug: str) -> dict:
    from bot.minify.reduce import reduce

    t0 = time.time()
    res = reduce({"repro": launcher, "workdir": d, "class": "accuracy" if bug == "accuracy" else "error",
                  "budget": 1800, "bisect": False, "check_config": {}}, os.path.join(d, "..", "ours.log"))
    return {"wall": time.time() - t0, "queries": res.get("queries"), "nodes": res.get("nodes_after"),
            "start": res.get("nodes_before"), "status": res.get("status")}


def run_torch(launcher: str, d: str, flags: list[str]) -> dict:
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    p = subprocess.run([sys.executable, launcher, "minify", *flags], cwd=d, capture_output=True, text=True,
                       env=env(), timeout=3600)
    wall = time.time() - t0
    out = p.stdout + p.stderr
    q = re.findall(r"Made (\d+) queries", out)
    ck = re.findall(r"Writing checkpoint with (\d+) nodes", out)
    with open(os.path.join(d, "log.txt"), "w") as fh:
        fh.write(out)
    return {"wall": wall, "queries": int(q[-1]) if q else None, "nodes": int(ck[-1]) if ck else None,
            "status": "ok" if p.returncode == 0 and q else f"rc={p.returncode}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES, help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--skip-isolated", action="store_true", help="skip torch's default (slow) isolated mode")
    ap.add_argument("--modes", default="ours,no-isolate,isolated", help="which of ours,no-isolate,isolated to run")
    ap.add_argument("--out", help="keep the work here (default: a temp dir)")
    a = ap.parse_args()
    work = a.out or tempfile.mkdtemp(prefix="minify-bench-")
    modes = [m for m in a.modes.split(",") if not (a.skip_isolated and m == "isolated")]
    rows = []
    warm = warm_up() if "ours" in modes else 0.0
    print(json.dumps({"ours_one_time_warm_up_s": round(warm, 1)}), flush=True)
    for case in a.cases.split(","):
        layers, relu_at, bug = CASES[case]
        launcher = capture(case, work)
        r = {"case": case, "bug": bug, "depth": f"{relu_at}/{layers}", "start": nodes_of(launcher)}
        if "ours" in modes:
            r["ours"] = run_ours(launcher, os.path.join(work, case, "ours"), bug)
            r["start"] = r["ours"].pop("start")
        if "no-isolate" in modes:
            r["no-isolate"] = run_torch(launcher, os.path.join(work, case, "noiso"), ["--no-isolate"])
        if "isolated" in modes:
            r["isolated"] = run_torch(launcher, os.path.join(work, case, "iso"), [])
        rows.append(r)
        print(json.dumps(r), flush=True)
    print()
    print(f"{'case':8} {'bug':14} {'relu at':8} {'nodes':>5} | " +
          " | ".join(f"{m:>10} s  {'q':>3} {'final':>5}" for m in modes))
    for r in rows:
        cells = []
        for m in modes:
            x = r[m]
            cells.append(f"{x['wall']:>10.1f} s  {x['queries'] or '-':>3} {x['nodes'] or '-':>5}")
        print(f"{r['case']:8} {r['bug']:14} {r['depth']:8} {r['start'] or '-':>5} | " + " | ".join(cells))
    med = {m: statistics.median(r[m]["wall"] for r in rows) for m in modes}
    print("median wall: " + ", ".join(f"{m} {v:.1f} s" for m, v in med.items()))
    print(f"(ours excludes the minify command's one-time torch import + warm-up, {warm:.1f} s here, "
          "shared by all failures of a run; torch's modes each start `python minifier_launcher.py`)")
    if "ours" in med:
        for m in ("isolated", "no-isolate"):
            if m in med:
                print(f"speedup vs {m}: {med[m] / med['ours']:.1f}x")
        bigger = [r["case"] for r in rows for m in modes if m != "ours"
                  if r[m]["nodes"] and r["ours"]["nodes"] and r["ours"]["nodes"] > r[m]["nodes"]]
        print("final node count never larger than torch's: " + ("yes" if not bigger else f"NO ({bigger})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
