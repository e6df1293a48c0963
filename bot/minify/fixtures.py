"""Build a run directory by running checks one at a time with ``python -m bot.check.one``.

Used by the minify tests and benchmarks to get real failing checks (injected bugs) without a
full sweep: each check runs in its own fresh process, and the rows are written with the same
ResultsWriter the sweep uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bot import rundir
from bot.minify.procs import child_env


def run_checks(out_dir: str, models: list, config: dict, *, backend: str = "inductor",
               timeout: float = 900, env: dict | None = None) -> dict:
    """``models``: names, or (name, extra_config) pairs whose config is merged over ``config``."""
    from bot.check.results import ResultsWriter
    from bot.check.settings import Settings, check_id

    settings = {"source": "zoo", "backend": backend, "mode": "inference", "dtype": "float32", "device": "cpu",
                "dynamic": False, "config": config, "timeout": timeout, "shard": "1/1", "baseline": None}
    out_dir = os.path.abspath(out_dir)
    writer = ResultsWriter(out_dir, settings, versions={"python": sys.version.split()[0]})
    for item in models:
        model, extra = (item, {}) if isinstance(item, str) else item
        cfg = {**config, **extra}
        s = Settings(backend=backend, config=cfg, timeout=timeout)
        cid = check_id(model, s)
        if extra:
            cid += "-" + "-".join(str(v) for v in extra.values())
        spec = {"source": "zoo", "model": model}
        req = os.path.join(out_dir, "checks", f"{cid}.json")
        row_path = os.path.join(out_dir, "checks", f"{cid}.row.json")
        with open(req, "w") as fh:
            json.dump({"spec": spec, "settings": s.to_dict()}, fh)
        with open(os.path.join(out_dir, "checks", f"{cid}.log"), "w") as log:
            subprocess.run([sys.executable, "-m", "bot.check.one", "--check", req, "--out", row_path],
                           cwd=out_dir, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                           env=child_env(env))
        if os.path.exists(row_path):
            with open(row_path) as fh:
                row = json.load(fh)
            os.remove(row_path)
        else:  # the process died before writing its row (e.g. an abort inside a kernel)
            row = {"status": "crash", "failure_class": "crash", "accuracy": None,
                   "error": {"type": "Crash", "message": "the check process died before writing its row",
                             "traceback": ""}}
        os.remove(req)
        full = {"id": cid, "model": model, "spec": spec, "backend": backend, "mode": "inference",
                "dtype": "float32", "device": "cpu", "dynamic": False, "config": cfg,
                "baseline": None, "log": f"checks/{cid}.log", **row}
        writer.add(full)
    writer.finish()
    return rundir.read_results(out_dir)
