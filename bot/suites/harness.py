"""PyTorch's own benchmark harness (benchmarks/dynamo/{torchbench,huggingface,timm_models}.py).

Given a pytorch checkout, each model runs as
    python benchmarks/dynamo/<suite>.py --accuracy --<mode> --<dtype>
           --devices <device> --only <model> --output <csv> (--inductor | --backend <b>) --timeout <s>
from the checkout's root with the environment hook loaded, which applies the --config overrides
as the harness imports torch._dynamo (bot.torch_adapter.hook).
The row it appends to the CSV is the verdict; a run that wrote none is judged by bot.suites.classify
from its exit status and output. The harness's model lists (`name,batch` or `name batch`) give `--list`.
"""

from __future__ import annotations

import os
import re
import sys

from bot.errors import UsageError
from bot.records import Accuracy, CheckError, CheckRow, HarnessFacts, Spec
from bot.signature import EXIT_TYPE
from bot.suites.source import ListRequest, Model, Reproduce, Source
from bot.torch_adapter.hook import config_env

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


def parse_list_line(line: str) -> tuple[str, int | None]:
    """One model-list line: ``name,batch`` (torchbench, huggingface) or ``name batch`` (timm), or a
    bare name."""
    parts = [p for p in re.split(r"[,\s]+", line.strip()) if p]
    name = parts[0]
    bs = parts[1] if len(parts) > 1 else ""
    return name, int(bs) if bs.isdigit() else None


# The batch size the harness uses in accuracy mode when none is given (common.py's main: "Use
# small batch size", the same on every device); the model lists' sizes are for performance runs
# (the main list's on GPU). minify-bot always runs the harness with --accuracy.
ACCURACY_BATCH = {"huggingface": 1, "torchbench": 4, "timm_models": 8}


def list_files(suite: str, device: str | None) -> tuple[str, ...]:
    """The model-list files to read, the device's own first (the harness keeps a *_cpu.txt list)."""
    main, cpu = LIST_FILES[suite]
    return (cpu, main) if device == "cpu" else (main, cpu)


def harness_models(pytorch: str | None, suite: str | None, batch_size: int | None = None,
                   patterns: dict | None = None, device: str | None = None):
    """The suite's models with the batch size a check uses: the one given, else the harness's
    accuracy-mode default for the suite (the lists' sizes are shown as the performance ones)."""
    script = _script(pytorch, suite)
    names: list[tuple[str, int | None]] = []
    listed_in = None
    for fname in list_files(suite, device):
        path = os.path.join(os.path.dirname(script), fname)
        if os.path.isfile(path):
            listed_in = fname
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    line = line.strip()
                    if not line or line.startswith("#"):
                        continue
                    names.append(parse_list_line(line))
            break
    seen = set()
    out = []
    for name, bs in names:
        if name in seen:
            continue
        seen.add(name)
        given = patterns and (patterns.get("accuracy") or patterns.get("error"))
        spec = Spec(source="harness", pytorch=os.path.abspath(pytorch), suite=suite, model=name,
                    batch_size=batch_size or None, patterns=patterns if given else None)
        used = batch_size or ACCURACY_BATCH[suite]
        why = "as given" if batch_size else "the harness's accuracy-mode default"
        listed = f"; {listed_in} says {bs}, for performance runs" if bs and bs != used else ""
        out.append(Model(name, spec, f"{suite} model, batch size {used} ({why}{listed})", used))
    return out


def harness_argv(spec: Spec, settings, csv_path: str) -> list[str]:
    script = os.path.join(spec.pytorch, "benchmarks", "dynamo", f"{spec.suite}.py")
    argv = [sys.executable, script, "--accuracy", f"--{settings.mode}",
            f"--{settings.dtype}", "--devices", settings.device, "--only", spec.model, "--output", csv_path,
            "--timeout", str(int(settings.timeout))]
    argv += ["--inductor"] if settings.backend == "inductor" else [f"--backend={settings.backend}"]
    if settings.dynamic:
        argv.append("--dynamic-shapes")
    if spec.batch_size:
        argv += ["--batch-size", str(int(spec.batch_size))]
    return argv


def run_harness(spec: Spec, settings, log_path: str, workdir: str, *, extra_env: dict | None = None,
                launcher_dir: str | None = None) -> CheckRow:
    """One harness run of one model -> its row's result.

    The CSV row the harness appends is the verdict when it wrote one; the process's exit status
    and output classify what it did not (a crash, a timeout, a failure before the model loaded),
    through the same classifier as the command source."""
    from copy import copy

    from bot.rundir import STAT_COLUMNS, read_csv
    from bot.suites.classify import Patterns, classify
    from bot.suites.command import bad_start, execute

    csv_path = os.path.join(workdir, "harness.csv")
    if os.path.exists(csv_path):
        os.remove(csv_path)
    argv = harness_argv(spec, settings, csv_path)
    # set by the environment hook, as for a command; the compiled-graph caches as the harness has
    # them (it turns them on when imported), but for a capture rerun (extra_env: capture_env)
    env = {**config_env(settings.config), **(extra_env or {})}
    # the harness enforces its own per-model timeout; ours is the backstop
    s = copy(settings)
    s.timeout = settings.timeout + 60
    ran = execute(argv, env_extra=env, cwd=spec.pytorch, timeout=s.timeout, log_path=log_path,
                  launcher_dir=launcher_dir)
    patterns = Patterns.from_dict(spec.patterns)
    output = without_progress_bars(ran.output)
    rec = None
    if os.path.exists(csv_path):
        try:
            recs = [r for r in read_csv(csv_path) if r.get("name") == spec.model]
        except Exception:  # noqa: BLE001 - a half-written CSV: judge the process instead
            recs = []
        rec = recs[-1] if recs else None
    if ran.error:
        row = bad_start(ran.error)
    elif rec is None and ran.returncode == 0 and not ran.timed_out:
        row = CheckRow(status="pass_due_to_skip", skipped="the harness exited 0 without a result row for this model")
    else:
        row = classify(returncode=ran.returncode, output=output, timed_out=ran.timed_out, timeout=s.timeout,
                       status_word=rec["accuracy"] if rec else None, patterns=patterns,
                       compiled_graphs=ran.hook.frames, what="the harness")
    if rec:
        row.batch_size, row.compile_s = _int(rec.get("batch_size")), rec.get("compilation_latency") or None
        row.stats = {c: rec[c] for c in STAT_COLUMNS if isinstance(rec.get(c), int)}
    if row.failure_class == "accuracy":
        _accuracy_from_output(row, output)
    row.harness = harness_facts(spec, ran.hook.isa)
    row.reproduce = reproduce_command(spec, settings, row.batch_size or spec.batch_size)
    ran.note_in(row)
    return row


def csv_models(path: str | None):
    from bot.rundir import read_csv
    if not path:
        raise UsageError("--suite csv needs --csv FILE (a harness accuracy CSV)")
    return [Model(r["name"], Spec(source="csv", model=r["name"], record=r)) for r in read_csv(path)]


PROGRESS = re.compile(r"\d+%\|[^|\n]*\||^\s*\d+/\d+ \[[\d:<,.\w\s/?]*\]\s*$|[█▏▎▍▌▋▊▉]{3,}")


def without_progress_bars(text: str) -> str:
    """The harness's output without progress bars (tqdm's, the model download's): a line redrawn
    with carriage returns keeps its last state, and a line that is only a bar goes."""
    out = []
    for line in text.split("\n"):
        if "\r" in line:
            line = [p for p in line.split("\r") if p.strip()][-1:] or [""]
            line = line[0]
        if PROGRESS.search(line):
            continue
        out.append(line)
    return "\n".join(out)


RMSE = re.compile(r"RMSE \(res-fp64\): ([-+\w.]+), \(ref-fp64\): ([-+\w.]+) and shape=.*?tol: ([-+\w.]+)")
FAILED_KEY = re.compile(r"Accuracy failed for key name (\S+)")


def _float(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if x == x and abs(x) != float("inf") else None


def _int(value) -> int | None:
    try:
        return int(value) or None
    except (TypeError, ValueError):
        return None


def _accuracy_from_output(row: CheckRow, output: str) -> None:
    """The numbers the harness's accuracy check printed (torch._dynamo.utils.same: RMSE of the
    compiled and the eager result against fp64, the tolerance; the output key that failed) as the
    row's accuracy figures, and an error message that says what failed instead of the status word."""
    found = RMSE.findall(output)
    key = FAILED_KEY.findall(output)
    if found:
        res, ref, tol = found[-1]
        row.accuracy = Accuracy(rmse_res=_float(res), rmse_ref=_float(ref), tolerance=_float(tol))
    err = row.error or CheckError()
    if err.type in (row.status, EXIT_TYPE) or err.message == row.status:
        what = f"output {key[-1]!r}" if key else "an output"
        acc = row.accuracy or Accuracy()
        numbers = (f": RMSE compiled vs fp64 {acc.rmse_res:.5g}, eager vs fp64 {acc.rmse_ref:.5g}, "
                   f"tolerance {acc.tolerance:g}" if None not in (acc.rmse_res, acc.rmse_ref, acc.tolerance) else "")
        err.type, err.output_key = "AccuracyCheck", key[-1] if key else None
        err.message = f"the harness's accuracy check failed for {what}{numbers}"
        row.error = err


def harness_facts(spec: Spec, isa: str | None = None) -> HarnessFacts:
    """What an issue needs to name the harness run: the suite's script, the checkout's git commit
    (when it is a git checkout), the model libraries' versions, the CPU's vector ISA."""
    from importlib import metadata

    from bot import proc

    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    revision = None
    if os.path.exists(os.path.join(spec.pytorch, ".git")):
        res = proc.run(["git", "-C", spec.pytorch, "rev-parse", "HEAD"], timeout=30, capture=200)
        out = (res.output or "").strip()
        revision = out if not res.error and res.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", out) else None
    return HarnessFacts(suite=spec.suite, script=f"benchmarks/dynamo/{spec.suite}.py", revision=revision,
                        transformers=version("transformers"), timm=version("timm"),
                        torchbench=version("torchbenchmark"), cpu_isa=isa)


def _literal(value) -> str:
    """A Python literal for a config value, in double quotes (the command line wraps it in single)."""
    import json

    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def reproduce_command(spec: Spec, settings, batch_size: int | None) -> str:
    """The plain harness command for this check, run from the checkout's root, as a compiler
    engineer would type it (the batch size the harness used; the check's --config overrides set
    before the harness starts, when there are any)."""
    import shlex

    argv = ["python", f"benchmarks/dynamo/{spec.suite}.py", "--accuracy", f"--{settings.mode}",
            f"--{settings.dtype}", "--devices", settings.device]
    argv += ["--inductor"] if settings.backend == "inductor" else [f"--backend={settings.backend}"]
    if settings.dynamic:
        argv.append("--dynamic-shapes")
    argv += ["--only", spec.model]
    if batch_size:
        argv += ["--batch-size", str(int(batch_size))]
    config = dict(settings.config or {})
    if not config:
        return shlex.join(argv)
    from bot.torch_adapter.config import MODULES

    sets = []
    for key, value in sorted(config.items()):
        prefix, _, rest = key.partition(".")
        if prefix not in MODULES or not rest:
            continue
        sets.append(f"import {MODULES[prefix]}; {MODULES[prefix]}.{rest} = {_literal(value)}")
    boot = "; ".join(sets + ["import runpy, sys", "sys.argv = sys.argv[1:]",
                             'sys.path.insert(0, "benchmarks/dynamo")',
                             'runpy.run_path(sys.argv[0], run_name="__main__")'])
    return shlex.join(["python", "-c", boot, *argv[1:]])


def _batch(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1_000_000 else None


def plain_harness_lines(check: CheckRow, spec: Spec, model: str | None) -> list[str]:
    """The plain harness command, as a compiler engineer types it from the checkout's root, rebuilt
    from fields that pass strict patterns (the run directory may come from a pull request's job):
    the suite's script, the model, the check's settings, the batch size the harness used."""
    from types import SimpleNamespace

    from bot import slash
    from bot.slash import safe

    suite = spec.suite
    if suite not in SUITES or model is None:
        return []
    config = check.config if isinstance(check.config, dict) else {}
    if not all(isinstance(k, str) and slash.CONFIG_KEY_RE.fullmatch(k) and isinstance(v, (str, int, float, bool))
               and slash.CONFIG_VALUE_RE.fullmatch(str(v).lower() if isinstance(v, bool) else str(v))
               for k, v in config.items()):
        return []
    settings = SimpleNamespace(
        mode=check.mode if check.mode in slash.MODES else "inference",
        dtype=check.dtype if check.dtype in slash.DTYPES else "float32",
        device=safe(check.device, slash.DEVICE_RE, "cpu"),
        backend=safe(check.backend, slash.BACKEND_RE, "inductor"),
        dynamic=check.dynamic is True, config=config)
    harness = check.harness if isinstance(check.harness, HarnessFacts) else HarnessFacts()
    revision = safe(harness.revision, slash.REVISION_RE, None)
    cmd = reproduce_command(Spec(suite=suite, model=model), settings,
                            _batch(check.batch_size) or _batch(spec.batch_size))
    return [f"cd PYTORCH_CHECKOUT    # a pytorch checkout{' at ' + revision if revision else ''}",
            f"{cmd}    # the plain harness run", "# minify-bot's own check of it:"]


# --- the sources: the harness run, and its accuracy CSV imported ------------------------------------


class Harness(Source):
    """``--suite harness``: PyTorch's own benchmarks/dynamo harness in a pytorch checkout."""

    name = "harness"
    program = True

    def models(self, req: ListRequest) -> list[Model]:
        return harness_models(req.pytorch, req.suite or "torchbench", batch_size=req.batch_size,
                              patterns=req.patterns, device=req.device)

    def run(self, spec: Spec, settings, log_path: str, *, extra_env: dict | None = None,
            force_backend: str | None = None, launcher_dir: str | None = None) -> CheckRow:
        import shutil
        import tempfile
        from copy import copy

        work = tempfile.mkdtemp(prefix="minify-check-")
        try:
            if force_backend:  # the harness's own --backend replaces the compile backend
                settings = copy(settings)
                settings.backend = force_backend
            return run_harness(spec, settings, log_path, work, extra_env=extra_env, launcher_dir=launcher_dir)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def describe(self, spec: Spec) -> str:
        return f"harness {spec.suite} {spec.model}"

    def reproduce(self, check: CheckRow, spec: Spec, models: list[str], trusted_commands=()) -> Reproduce:
        suite = spec.suite if spec.suite in SUITES else "SUITE"
        out = Reproduce(plain_harness_lines(check, spec, models[-1] if models else None),
                        ["--suite", "harness", "--pytorch", "PYTORCH_CHECKOUT", "--harness-suite", suite, *models])
        if _batch(spec.batch_size):
            out.args += ["--batch-size", str(spec.batch_size)]
        return out


class HarnessCsv(Source):
    """``--suite csv``: an accuracy CSV the harness wrote, imported (not run)."""

    name = "csv"
    imported = True

    def models(self, req: ListRequest) -> list[Model]:
        return csv_models(req.file)


HARNESS = Harness()
CSV = HarnessCsv()
