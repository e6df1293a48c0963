"""PyTorch's own benchmark harness (benchmarks/dynamo/{torchbench,huggingface,timm_models}.py).

Given a pytorch checkout, each model runs as
    python -m bot.suites.harness_boot benchmarks/dynamo/<suite>.py --accuracy --<mode> --<dtype>
           --devices <device> --only <model> --output <csv> (--inductor | --backend <b>) --timeout <s>
from the checkout's root; the bootstrap applies --config overrides before the harness starts.
The row it appends to the CSV is the result. The harness's model lists give `--list`.
"""

from __future__ import annotations

import os
import sys

from bot.errors import UsageError

SUITES = ("torchbench", "huggingface", "timm_models")
LIST_FILES = {
    "torchbench": ("torchbench_models_list.txt", "torchbench_models_list_cpu.txt"),
    "huggingface": ("huggingface_models_list.txt", "huggingface_models_list_cpu.txt"),
    "timm_models": ("timm_models_list.txt", "timm_models_list_cpu.txt"),
}


def _script(pytorch: str | None, suite: str | None) -> str:
    if not pytorch:
        raise UsageError("--suite harness needs --pytorch PATH (a pytorch checkout)")
    if suite not in SUITES:
        raise UsageError(f"--harness-suite must be one of {', '.join(SUITES)}, got {suite!r}")
    script = os.path.join(pytorch, "benchmarks", "dynamo", f"{suite}.py")
    if not os.path.isfile(script):
        raise UsageError(f"{pytorch} does not look like a pytorch checkout: no benchmarks/dynamo/{suite}.py")
    return script


def harness_models(pytorch: str | None, suite: str | None):
    from bot.suites import Model

    script = _script(pytorch, suite)
    names: list[tuple[str, int | None]] = []
    for fname in LIST_FILES[suite]:
        path = os.path.join(os.path.dirname(script), fname)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    name, _, bs = line.partition(",")
                    names.append((name.strip(), int(bs) if bs.strip().isdigit() else None))
            break
    seen = set()
    out = []
    for name, bs in names:
        if name in seen:
            continue
        seen.add(name)
        spec = {"source": "harness", "pytorch": os.path.abspath(pytorch), "suite": suite, "model": name}
        out.append(Model(name, spec, f"{suite} model", bs))
    return out


def harness_argv(spec: dict, settings, csv_path: str) -> list[str]:
    script = os.path.join(spec["pytorch"], "benchmarks", "dynamo", f"{spec['suite']}.py")
    argv = [sys.executable, "-m", "bot.suites.harness_boot", script, "--accuracy", f"--{settings.mode}",
            f"--{settings.dtype}", "--devices", settings.device, "--only", spec["model"], "--output", csv_path,
            "--timeout", str(int(settings.timeout))]
    argv += ["--inductor"] if settings.backend == "inductor" else [f"--backend={settings.backend}"]
    if settings.dynamic:
        argv.append("--dynamic-shapes")
    return argv


def run_harness(spec: dict, settings, log_path: str, workdir: str) -> dict:
    import json
    import shlex

    from bot.check.results import STATUS_CLASS, read_csv
    from bot.suites.command import COMPILE_PATTERNS, last_exception, run_command

    csv_path = os.path.join(workdir, "harness.csv")
    argv = harness_argv(spec, settings, csv_path)
    boot_env = {"MINIFY_BOT_HARNESS_CONFIG": json.dumps(settings.config),
                "PYTHONPATH": os.pathsep.join(filter(None, [_bot_root(), os.environ.get("PYTHONPATH")]))}
    from copy import copy

    # the harness enforces its own per-model timeout; ours is the backstop
    s = copy(settings)
    s.timeout = settings.timeout + 60
    row = run_command(shlex.join(argv), s, log_path, cwd=spec["pytorch"], extra_env=boot_env)
    rows = []
    if os.path.exists(csv_path):
        rows = [r for r in read_csv(csv_path) if r["name"] == spec["model"]]
    if not rows:
        if row["status"] == "pass":  # exited 0 but wrote nothing: the harness skipped it
            row.update(status="pass_due_to_skip", failure_class=None)
        return row  # crash / timeout / startup failure, classified from the process
    rec = rows[-1]
    status = rec["accuracy"]
    cls = STATUS_CLASS.get(status, None if status.startswith("pass") else "runtime_error")
    with open(log_path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()[-200_000:]
    if status == "fail_to_run" and COMPILE_PATTERNS.search(text):
        cls = "compile_error"
    error = None
    if cls and cls != "accuracy":
        exc = last_exception(text)
        error = {"type": exc[0] if exc else status, "message": exc[1] if exc else status,
                 "traceback": "\n".join(text.splitlines()[-40:]), "frames": []}
    from bot.check.results import STAT_COLUMNS

    return {"status": status, "failure_class": cls, "error": error, "accuracy": None,
            "batch_size": rec.get("batch_size") or None, "compile_s": rec.get("compilation_latency") or None,
            "stats": {c: rec[c] for c in STAT_COLUMNS if isinstance(rec.get(c), int)},
            "duration_s": row.get("duration_s")}


def _bot_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def csv_models(path: str | None):
    from bot.check.results import read_csv
    from bot.suites import Model

    if not path:
        raise UsageError("--suite csv needs --csv FILE (a harness accuracy CSV)")
    return [Model(r["name"], {"source": "csv", "model": r["name"], "record": r}) for r in read_csv(path)]
