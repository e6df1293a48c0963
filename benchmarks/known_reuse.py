"""Minify time of a known bug, with and without reusing the open issue's repro (bot/known.py).

Three real `minify-bot run`s against one local tracker, default minify settings (3 verification
runs, bisector on): run 1 files the bug; run 2 sees the same failure and reuses the issue's repro
(one fresh-process run instead of localize / capture / reduce / verify); run 3 passes --reminify and
minifies it again. Prints each run's minify time (failure.json repro.timings.total), the reuse
record, and the wall time of each whole run. The runs sign and verify known repros with a key pair
made for the benchmark (MINIFY_BOT_SIGNING_KEY for the report, MINIFY_BOT_PUBLIC_KEY for minify):
only a signed repro is reused.

Usage: python benchmarks/known_reuse.py [--models mlp_relu] [--config KEY=VALUE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp_relu")
    ap.add_argument("--config", default="inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="known-reuse-bench-")
    sys.path.insert(0, ROOT)
    from bot import signing

    private, public = signing.generate()
    env = dict(os.environ, PYTHONPATH=ROOT, GITHUB_TOKEN="", GITHUB_REPOSITORY="",
               **{signing.SIGNING_KEY_ENV: private, signing.PUBLIC_KEY_ENV: public})
    try:
        for k, (name, extra) in enumerate((("first run (minified, filed)", []),
                                           ("same failure again (reused)", []),
                                           ("same failure, --reminify", ["--reminify"]))):
            out = os.path.join(work, f"run{k}")
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "bot", "run", "--out", out, "--issues-dir",
                            os.path.join(work, "issues"), "--models", args.models, "--config", args.config,
                            *extra], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t
            for fid in sorted(os.listdir(os.path.join(out, "failures"))):
                with open(os.path.join(out, "failures", fid, "failure.json")) as fh:
                    rec = json.load(fh)
                r = rec["repro"]
                print(f"{name:32s} {fid}: minify {r['timings'].get('total', 0):6.1f} s, status {r['status']}, "
                      f"queries {r['queries']}, reused {r.get('reused')}; whole run {wall:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
