"""Side-by-side minification benchmark on a corpus of injected bugs.

For each case a model is compiled with inductor and a test-only bug injected into the C++ relu;
torch's repro-after (aot) writes a minifier_launcher.py. Cases: deep MLPs (Linear + tanh, one relu
at a chosen depth) and real architectures from transformers built from tiny configs (needs the
``models`` extra), among them an 18-layer BERT whose inference graph has over 1,000 nodes. The same
launcher is then minified three ways, each in its own directory:

  ours        minify-bot minify --repro LAUNCHER: the whole command, counting its torch import and
              warm-up, culprit search, config reduction, bisector and 3 fresh verification runs
  ours-nohints  the same without the search hints (error-named node, fp64 divergence analysis)
  isolated    python minifier_launcher.py minify               (torch default: a process per query)
  no-isolate  python minifier_launcher.py minify --no-isolate

and wall time, queries, final node count and peak RSS (the largest process of the run) are printed
per case. torch's isolated mode can take hours on a big graph: it is stopped at --cap seconds and
reported as "> cap".

    python benchmarks/minify_bench.py [--cases small,bert18] [--skip-isolated] [--cap 900] [--out DIR]

Keeps the C++ kernel cache warm through TORCHINDUCTOR_CACHE_DIR (shared by all runs); the
FX-graph/AOTAutograd caches are off so every run really compiles.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

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
# real architectures: name -> (huggingface model, config overrides, bug)
REAL = {
    "mobilebert": ("MobileBertForMaskedLM", {}, "accuracy"),
    "t5": ("T5Small", {}, "accuracy"),
    "bert18": ("BertForMaskedLM", {"num_hidden_layers": 18, "hidden_act": "relu"}, "accuracy"),
}
DEFAULT_CASES = "small,medium,large,mobilebert,t5,bert18"

REAL_MODEL = r'''
import json, sys, torch
name, overrides, bug = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
import torch._inductor.config as ic
ic.cpp.inject_relu_bug_TESTING_ONLY = bug
from bot.suites.huggingface import build_model
torch.manual_seed(0)
model, inputs, _ = build_model(name, **overrides)
model.eval()
with torch.no_grad():
    torch.compile(model)(*inputs)
'''

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
    d = os.path.join(work, case, "capture")
    os.makedirs(d, exist_ok=True)
    if case in REAL:
        name, overrides, bug = REAL[case]
        argv = [name, json.dumps(overrides), bug]
    else:
        layers, relu_at, bug = CASES[case]
        argv = [str(layers), str(relu_at), bug]
    with open(os.path.join(d, "model.py"), "w") as fh:
        fh.write(REAL_MODEL if case in REAL else MODEL)
    level = "4" if bug == "accuracy" else "2"
    found = glob.glob(os.path.join(d, "torch_compile_debug", "run_*", "minifier", "minifier_launcher.py"))
    if found:  # --out DIR of an earlier run: same corpus
        return found[0]
    p = subprocess.run([sys.executable, "model.py", *argv], cwd=d, capture_output=True,
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


PEAK = r'''
import json, resource, subprocess, sys, time
t0 = time.time()
try:
    p = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1]))
    rc, out = p.returncode, p.stdout + p.stderr
except subprocess.TimeoutExpired as e:
    rc, out = None, (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
print(json.dumps({"rc": rc, "wall": time.time() - t0, "out": out[-200000:],
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
'''


def measured(cmd: list[str], cwd: str, cap: float, extra_env: dict | None = None) -> dict:
    """Run ``cmd`` under a small wrapper process: wall time, exit code, output and the peak RSS of
    the largest process it started (a killed run keeps what it measured up to the cap)."""
    p = subprocess.run([sys.executable, "-c", PEAK, str(cap), *cmd], cwd=cwd, capture_output=True, text=True,
                       env=env(extra_env), timeout=cap + 600)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"rc": p.returncode, "wall": None, "out": p.stderr[-4000:], "peak_rss_mb": None}


def run_ours(launcher: str, d: str, bug: str, cap: float, hints: bool = True) -> dict:
    os.makedirs(d, exist_ok=True)
    m = measured([sys.executable, "-m", "bot", "minify", "--launcher", launcher, "--out", os.path.join(d, "out"),
                  "--budget", str(int(cap))], d, cap, extra_env=None if hints else {"MINIFY_BOT_NO_SEARCH_HINTS": "1"})
    with open(os.path.join(d, "log.txt"), "w") as fh:
        fh.write(m["out"])
    rec = {}
    found = glob.glob(os.path.join(d, "out", "failures", "*", "failure.json"))
    if found:
        with open(found[0]) as fh:
            rec = json.load(fh)
    r = rec.get("repro") or {}
    ver = r.get("verification") or {}
    return {"wall": m["wall"], "queries": r.get("queries"), "nodes": r.get("nodes_after"),
            "start": r.get("nodes_before"), "status": r.get("status"), "peak_rss_mb": m["peak_rss_mb"],
            "verified": f"{ver.get('failed_same_way')}/{ver.get('runs')}" if ver else None,
            "culprit": (rec.get("culprit") or {}).get("ops"),
            "bisect": (rec.get("culprit") or {}).get("bisect"), "timings": r.get("timings")}


def run_torch(launcher: str, d: str, flags: list[str], cap: float) -> dict:
    os.makedirs(d, exist_ok=True)
    m = measured([sys.executable, launcher, "minify", *flags], d, cap)
    out = m["out"]
    q = re.findall(r"Made (\d+) queries", out)
    ck = re.findall(r"Writing checkpoint with (\d+) nodes", out)
    with open(os.path.join(d, "log.txt"), "w") as fh:
        fh.write(out)
    status = "ok" if m["rc"] == 0 and q else (f"> cap ({cap:.0f} s)" if m["rc"] is None else f"rc={m['rc']}")
    return {"wall": m["wall"], "queries": int(q[-1]) if q else None, "nodes": int(ck[-1]) if ck else None,
            "status": status, "peak_rss_mb": m["peak_rss_mb"], "capped": m["rc"] is None}


def _cell(x: dict) -> str:
    wall = f"> {x['wall']:.0f}" if x.get("capped") else f"{x['wall']:.1f}"
    rss = f"{x['peak_rss_mb']:.0f}" if x.get("peak_rss_mb") else "-"
    return f"{wall:>8} s {x['queries'] or '-':>4} {x['nodes'] or '-':>5} {rss:>6}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES, help=f"comma-separated, of {', '.join([*CASES, *REAL])}")
    ap.add_argument("--skip-isolated", action="store_true", help="skip torch's default (slow) isolated mode")
    ap.add_argument("--modes", default="ours,no-isolate,isolated",
                    help="which of ours,ours-nohints,no-isolate,isolated to run (ours-nohints: our culprit "
                         "search without the error/fp64-divergence hints, to compare query counts)")
    ap.add_argument("--cap", type=float, default=900.0, help="seconds before a run is stopped (default: 900)")
    ap.add_argument("--out", help="keep the work here (default: a temp dir)")
    a = ap.parse_args()
    work = a.out or tempfile.mkdtemp(prefix="minify-bench-")
    modes = [m for m in a.modes.split(",") if not (a.skip_isolated and m == "isolated")]
    rows = []
    for case in a.cases.split(","):
        if case not in CASES and case not in REAL:
            raise SystemExit(f"unknown case {case!r}: expected one of {', '.join([*CASES, *REAL])}")
        bug = REAL[case][2] if case in REAL else CASES[case][2]
        launcher = capture(case, work)
        r = {"case": case, "bug": bug, "start": nodes_of(launcher)}
        if "ours" in modes:
            r["ours"] = run_ours(launcher, os.path.join(work, case, "ours"), bug, a.cap)
            r["start"] = r["ours"].pop("start") or r["start"]
        if "ours-nohints" in modes:
            r["ours-nohints"] = run_ours(launcher, os.path.join(work, case, "ours-nohints"), bug, a.cap, hints=False)
            r["ours-nohints"].pop("start")
        if "no-isolate" in modes:
            r["no-isolate"] = run_torch(launcher, os.path.join(work, case, "noiso"), ["--no-isolate"], a.cap)
        if "isolated" in modes:
            r["isolated"] = run_torch(launcher, os.path.join(work, case, "iso"), [], a.cap)
        rows.append(r)
        print(json.dumps(r), flush=True)
    print()
    print("per mode: wall, queries, final nodes, peak RSS (MiB)")
    print(f"{'case':10} {'bug':14} {'nodes':>5} | " + " | ".join(f"{m:^30}" for m in modes))
    for r in rows:
        print(f"{r['case']:10} {r['bug']:14} {r['start'] or '-':>5} | " + " | ".join(_cell(r[m]) for m in modes))
    if "ours" in modes:
        print("(ours: the whole minify command, torch import, warm-up and 3 fresh verification runs included)")
        for r in rows:
            o = r["ours"]
            notes = [f"culprit {', '.join(o['culprit'] or ['-'])}", f"bisector {o['bisect'] or '-'}",
                     f"verified {o['verified'] or '-'}"]
            for m in modes:
                if m.startswith("ours") or not r[m].get("wall"):
                    continue
                x = r[m]
                notes.append(f"{'>' if x.get('capped') else ''}{x['wall'] / o['wall']:.1f}x faster than {m}")
                if x.get("nodes") and o.get("nodes") and o["nodes"] > x["nodes"]:
                    notes.append(f"MORE nodes than {m}")
            print(f"{r['case']:10} " + "; ".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
