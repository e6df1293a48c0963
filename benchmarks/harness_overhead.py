"""Cost of `minify-bot run` on one failing model of PyTorch's benchmark harness, side by side with
the plain harness run of that model.

Prints the wall time of the plain harness command (the one an issue's reproduce section shows),
the wall time of `minify-bot run` on the same model (check with its rerun, minify, report to a
local tracker), their ratio (target: <= 2.5), and how many times the harness ran: in the sweep
(the check and its reruns) and on top of it (localize and capture reruns, from the minifier log).

    python benchmarks/harness_overhead.py --pytorch ~/pytorch --suite huggingface \
        --model MobileBertForMaskedLM --config inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy

Without --pytorch it runs on the stand-in harness of the tests (tests/data/fake_pytorch: the real
harness's command line and CSV). Its torchbench/timm models are tiny (torch's import dominates both
sides, so the ratio is not the real one); its huggingface suite builds real transformers models at
their full default sizes (the ``models`` extra), which gives the real ratio's shape without a
PyTorch checkout:

    python benchmarks/harness_overhead.py --suite huggingface --model MobileBertForMaskedLM

Every subprocess has a timeout.
"""

from __future__ import annotations

import argparse
import getpass
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def timed(argv: list[str], cwd: str, timeout: float, env: dict | None = None) -> tuple[float, int]:
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=cwd, timeout=timeout, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    if res.returncode not in (0, 1):
        sys.stderr.write(res.stderr[-3000:])
    return time.perf_counter() - t0, res.returncode


# the variables that force inductor's compiled-graph caches on or off: neither side sets them, so each
# runs with the caches as the harness has them (it turns them on)
CACHE_SWITCHES = ("TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE")


def cold_graphs(env: dict, cache: str) -> dict:
    """``env`` with inductor's cache in ``cache``: the machine's compiled kernels (hard links), none of
    its compiled graphs. Each side starts from the same state: what a user's first run of this model
    on a new torch would find, less the C++ compiles that every run on this machine has paid."""
    src = env.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(tempfile.gettempdir(),
                                                               "torchinductor_" + getpass.getuser())
    shutil.rmtree(cache, ignore_errors=True)
    if os.path.isdir(src):
        shutil.copytree(src, cache, copy_function=os.link, ignore=shutil.ignore_patterns("fxgraph", "aotautograd"))
    return dict(env, TORCHINDUCTOR_CACHE_DIR=cache)


def bot_run(root: str, pytorch: str, args, config: list[str], work: str, env: dict) -> tuple[float, int]:
    """``minify-bot run`` of the checkout at ``root`` on the model: (seconds, exit code)."""
    bot = [sys.executable, "-m", "bot", "run", "--pytorch", pytorch, "--harness-suite", args.suite,
           "--models", args.model, "--mode", args.mode, "--out", os.path.join(work, "run"), "--tracker", "local",
           "--issues-dir", os.path.join(work, "issues")]
    for c in config:
        bot += ["--config", c]
    path = os.pathsep.join(x for x in (root, os.environ.get("PYTHONPATH")) if x)
    return timed(bot, pytorch, args.timeout * 8, dict(cold_graphs(env, os.path.join(work, "cache")), PYTHONPATH=path))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pytorch", help="a pytorch checkout (default: the tests' stand-in harness)")
    p.add_argument("--suite", default="timm_models", help="huggingface, timm_models or torchbench")
    p.add_argument("--model", default="relu_mlp")
    p.add_argument("--mode", default="inference")
    p.add_argument("--config", action="append", default=[], help="--config of the check (repeatable)")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--compare", metavar="ROOT", action="append", default=[],
                   help="also time minify-bot run of the checkout at ROOT (before this one, same cache state)")
    p.add_argument("--keep", metavar="DIR", help="copy the run directory and the local issues here")
    args = p.parse_args()
    config = args.config or ["inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"]
    work = tempfile.mkdtemp(prefix="harness-overhead-")
    try:
        pytorch = args.pytorch
        if not pytorch:
            pytorch = os.path.join(work, "pytorch")
            shutil.copytree(os.path.join(ROOT, "tests", "data", "fake_pytorch"), pytorch)
            print("harness: the tests' stand-in (tests/data/fake_pytorch), not PyTorch's")
        pytorch = os.path.abspath(pytorch)
        from bot.check.settings import Settings
        from bot.records import Spec
        from bot.suites.harness import reproduce_command
        from bot.torch_adapter.config import parse_overrides

        settings = Settings(mode=args.mode, config=parse_overrides(config))
        spec = Spec(source="harness", pytorch=pytorch, suite=args.suite, model=args.model)
        env = {k: v for k, v in os.environ.items() if k not in CACHE_SWITCHES}
        plain_cmd = reproduce_command(spec, settings, None)
        import shlex

        argv = [sys.executable if a == "python" else a for a in shlex.split(plain_cmd)]
        plain, _ = timed(argv + ["--output", os.path.join(work, "plain.csv")], pytorch, args.timeout,
                         cold_graphs(env, os.path.join(work, "cache-plain")))
        print(f"plain harness:  {plain:8.1f} s   {plain_cmd}")
        for root in args.compare:
            other, rc = bot_run(root, pytorch, args, config, os.path.join(work, "compare"), env)
            print(f"  {root}: minify-bot run {other:8.1f} s, exit {rc}, ratio {other / plain:.2f}x")
            shutil.rmtree(os.path.join(work, "compare"), ignore_errors=True)
        out = os.path.join(work, "run")
        total, rc = bot_run(ROOT, pytorch, args, config, work, env)
        with open(os.path.join(out, "results.json")) as fh:
            row = json.load(fh)["checks"][0]
        sweep_runs = row["flaky"].get("attempts", 2) if row.get("flaky") else 1 + int(row.get("reruns") or 0)
        logs = glob.glob(os.path.join(out, "failures", "*", "minifier.log"))
        extra = sum(open(x, encoding="utf-8", errors="replace").read().count("$ harness ") for x in logs)
        fail = None
        for x in glob.glob(os.path.join(out, "failures", "*", "failure.json")):
            with open(x) as fh:
                fail = json.load(fh)
        print(f"minify-bot run: {total:8.1f} s   exit {rc}; check {row.get('status')} "
              f"({row.get('failure_class')}), table time {row.get('duration_s')} s")
        if fail:
            r = fail["repro"]
            print(f"  repro: {r.get('status')}, {r.get('nodes_before')} -> {r.get('nodes_after')} nodes, "
                  f"timings {json.dumps(r.get('timings'))}")
        print(f"harness runs:   {sweep_runs} in the sweep (check + reruns), {extra} on top of it")
        print(f"ratio:          {total / plain:8.2f}x   (target <= 2.5x)")
    finally:
        if args.keep:
            shutil.copytree(work, args.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("pytorch"))
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
