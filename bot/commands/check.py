"""`minify-bot check`: the accuracy sweep."""

from __future__ import annotations

import argparse
import os
import sys

from bot import rundir
from bot.errors import EXIT_FAILURES, EXIT_OK, UsageError
from bot.records import Configuration, RunSettings

HELP = "run torch.compile accuracy checks over a model source and write a run directory"
DESCRIPTION = """Run torch.compile accuracy checks, judged like PyTorch's benchmark harness (fp64
reference, torch._dynamo.utils.same with per-dtype tolerance, cosine fallback), each check in
its own process with a timeout. Writes results.json, results.csv (harness format) and per-check
logs to the run directory, and prints a table.

model sources (--suite; a source's own flag selects it when --suite is not given):
  zoo       built-in small models (default)
  yaml      user models: --model-file models.yaml  (name: module:factory, with options)
  command   an arbitrary command: --command "python my_bench.py ..."  (see docs/sources.md)
  harness   PyTorch's benchmarks/dynamo: --pytorch PATH --harness-suite torchbench
  csv       import a harness accuracy CSV: --csv FILE
  fuzz      generated programs: --seed 0 --fuzz-count 50, or --fuzz-time 3600 (see docs/sources.md)

examples:
  minify-bot check
  minify-bot check --models mlp_relu,transformer --config inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy
  minify-bot check --suite yaml --model-file models.yaml --mode training --dtype bfloat16
  minify-bot check --command "python bench.py" --accuracy-pattern "outputs differ"
  minify-bot check --pytorch ~/pytorch --harness-suite timm_models --models ghostnet_100 --batch-size 8
"""

# the flags that belong to one model source (argparse dest -> source)
SOURCE_FLAGS = {
    "model_file": "yaml", "command": "command", "name": "command", "pytorch": "harness",
    "harness_suite": "harness", "batch_size": "harness", "csv": "csv", "command_file": "commands",
    "seed": "fuzz", "fuzz_count": "fuzz", "fuzz_time": "fuzz",
}


def add_common_check_arguments(p: argparse.ArgumentParser) -> None:
    """Flags shared by `check` and `run`."""
    from bot.options import CheckOptions
    from bot.suites import REGISTRY

    d = CheckOptions.default_of
    g = p.add_argument_group("models")
    g.add_argument("--suite", default=None, choices=list(REGISTRY),
                   help="where the models come from (default: the source whose flag is given, else zoo)")
    g.add_argument("--models", default=None, help="comma-separated model names (default: all the source offers)")
    g.add_argument("--list", action="store_true", help="list the models the source offers and exit")
    g.add_argument("--model-file", help="YAML file of user models (--suite yaml)")
    g.add_argument("--command", help="command to run as one check (--suite command)")
    g.add_argument("--name", help="name of the --command check (default: command)")
    g.add_argument("--command-file", metavar="FILE",
                   help="YAML file of named commands, each one check of the sweep (--suite commands)")
    g.add_argument("--pytorch", "--pytorch-path", dest="pytorch",
                   help="path to a pytorch checkout (--suite harness; --pytorch-path as the Action says)")
    g.add_argument("--harness-suite", default=None,
                   help="torchbench (default), huggingface or timm_models (--suite harness)")
    g.add_argument("--batch-size", type=int, default=None, help="batch size passed to the harness (--suite harness)")
    g.add_argument("--csv", help="harness accuracy CSV to import (--suite csv)")
    g.add_argument("--seed", type=int, default=None, help="the campaign's seed (--suite fuzz; default 0)")
    g.add_argument("--fuzz-count", type=int, default=None, metavar="N",
                   help="check programs 0..N-1 of the seed (--suite fuzz)")
    g.add_argument("--fuzz-time", type=float, default=None, metavar="SECONDS",
                   help="check programs of the seed until this much time is spent, each next one chosen "
                        "for the coverage it adds (--suite fuzz)")
    g.add_argument("--accuracy-pattern", action="append", default=[], metavar="REGEX",
                   help="output that means an accuracy failure (--suite command/harness; repeatable)")
    g.add_argument("--error-pattern", action="append", default=[], metavar="REGEX",
                   help="output that means a runtime/compile error (--suite command/harness; repeatable)")
    s = p.add_argument_group("settings")
    s.add_argument("--backend", default=d("backend"),
                   help="inductor, aot_eager, eager, aot_eager_decomp_partition, or module:function "
                        "(default: inductor)")
    s.add_argument("--mode", default=d("mode"), help="inference or training (default: inference)")
    s.add_argument("--dtype", default=d("dtype"), help="float32, float16, bfloat16 or amp (default: float32)")
    s.add_argument("--device", default=d("device"), help="cpu or cuda (default: cpu)")
    s.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes")
    s.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="compiler config override, e.g. inductor.max_autotune=true (repeatable)")
    s.add_argument("--matrix", action="append", default=[], metavar="SETTING=V1,V2",
                   help="check every model under each value: backend, mode, dtype or dynamic (true/false); "
                        "repeat for a product, e.g. --matrix backend=inductor,aot_eager --matrix dynamic=false,true")
    s.add_argument("--timeout", type=float, default=d("timeout"), help="seconds per check (default: 600)")
    s.add_argument("--memory-limit-mb", type=int, default=None, help="address-space limit per check (MiB)")
    r = p.add_argument_group("run")
    r.add_argument("--out", default=d("out"), help="run directory (default: ./minify-out)")
    r.add_argument("--shard", default=None, metavar="I/N", help="run only shard I of N (deterministic split)")
    r.add_argument("--baseline", default=None,
                   help="earlier results.json or a harness expected-accuracy CSV: marks failures new or known")
    r.add_argument("--fail-on", default=d("fail_on"), type=fail_on_arg, metavar="{failure,regression,never}",
                   help="exit 1 when any check fails (failure, the default), only on a regression (a failure "
                        "the baseline does not know), or never; the old words any and new still work")
    r.add_argument("--reruns", type=int, default=d("reruns"), metavar="N",
                   help="rerun a failing check up to N times; one that then passes is flaky, not failing (default: 1)")
    r.add_argument("--retry", action="append", default=[], metavar="CHECK_ID",
                   help="rerun this check more (3 times) before judging it flaky; what a ticked retry box "
                        "on the dashboard asks for (repeatable)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_common_check_arguments(p)


def fail_on_arg(text: str) -> str:
    from bot.options import fail_on_value

    try:
        return fail_on_value(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def labels_arg(text: str) -> str:
    """--labels L1,L2 (the old --label L): the bot's own label is the first."""
    from bot.options import first_label

    try:
        return first_label(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def resolve_source(args) -> str:
    """The model source the flags ask for. A source's own flag selects it when --suite is not
    given; a flag of another source than the one --suite names is a usage error (exit 2): the bot
    never runs something other than what was asked."""
    flag = {dest: "--" + dest.replace("_", "-") for dest in SOURCE_FLAGS}
    given = [d for d in SOURCE_FLAGS if getattr(args, d, None) is not None]
    wanted = sorted({SOURCE_FLAGS[d] for d in given})
    if args.suite is None:
        if len(wanted) > 1:
            raise UsageError(f"{', '.join(flag[d] for d in given)} belong to different model sources "
                             f"({', '.join(wanted)}); pick one (and --suite to be explicit)")
        args.suite = wanted[0] if wanted else "zoo"
    else:
        stray = [d for d in given if SOURCE_FLAGS[d] != args.suite]
        if stray:
            d = stray[0]
            raise UsageError(f"{flag[d]} does not apply to --suite {args.suite} (it is for --suite {SOURCE_FLAGS[d]})")
    pats = getattr(args, "accuracy_pattern", None) or getattr(args, "error_pattern", None)
    from bot.suites import source

    if pats and not source(args.suite).program:   # the patterns judge a program's output
        raise UsageError(f"--accuracy-pattern/--error-pattern apply to --suite command or harness, not {args.suite}")
    if getattr(args, "batch_size", None) is not None and args.batch_size <= 0:
        raise UsageError("--batch-size must be a positive integer")
    return args.suite


def patterns_of(args) -> dict:
    from bot.suites.classify import Patterns

    return Patterns(list(args.accuracy_pattern or []), list(args.error_pattern or [])).validate().to_dict()


def source_models(args):
    from bot.suites import available

    resolve_source(args)
    file = {"yaml": args.model_file, "commands": getattr(args, "command_file", None)}.get(args.suite, args.csv)
    return available(args.suite, file=file,
                     pytorch=args.pytorch, suite=args.harness_suite, command=args.command, name=args.name,
                     batch_size=args.batch_size, patterns=patterns_of(args), device=getattr(args, "device", None),
                     names=list(getattr(args, "models", None) or []) or None, seed=getattr(args, "seed", None),
                     fuzz_count=getattr(args, "fuzz_count", None), fuzz_time=getattr(args, "fuzz_time", None))


def select_models(args):
    from bot.check.settings import parse_shard, shard
    from bot.suites import select

    i, n = parse_shard(args.shard)
    models = source_models(args)
    names = list(args.models) or None
    models = select(models, names)
    return shard(models, i, n) if n > 1 else models, (i, n)


def build_settings(args):
    from bot.check.settings import Settings
    from bot.torch_adapter.config import parse_overrides

    s = Settings(backend=args.backend, mode=args.mode, dtype=args.dtype, device=args.device,
                 dynamic=args.dynamic, config={}, timeout=args.timeout)
    s.validate(with_torch=False)
    s.config = parse_overrides(args.config)
    s.validate(with_torch=True)
    return s


MATRIX_AXES = ("backend", "mode", "dtype", "dynamic")


def parse_matrix(items: list[str]) -> list[dict]:
    """--matrix SETTING=V1,V2 (repeatable) -> the list of setting overrides, one per combination."""
    import itertools

    axes: dict[str, list] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or key not in MATRIX_AXES or not vals:
            raise UsageError(f"invalid --matrix {item!r}: expected SETTING=V1,V2 with SETTING one of "
                             f"{', '.join(MATRIX_AXES)}")
        if key in axes:
            raise UsageError(f"--matrix {key} given twice")
        if key == "dynamic":
            bad = [v for v in vals if v.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off")]
            if bad:
                raise UsageError(f"invalid --matrix dynamic value {bad[0]!r}: expected true or false")
            vals = [v.lower() in ("true", "1", "yes", "on") for v in vals]
        axes[key] = list(dict.fromkeys(vals))
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())] if axes else [{}]


def build_matrix(args) -> list:
    import copy

    combos = parse_matrix(args.matrix)
    if len(combos) > 1 and args.suite == "csv":
        raise UsageError("--matrix does not apply to --suite csv (an imported CSV has one configuration)")
    out = []
    for combo in combos:
        a = copy.copy(args)
        for k, v in combo.items():
            setattr(a, k, v)
        out.append(build_settings(a))
    return out


def prepare(args):
    """Validate everything before anything is written: returns (models, settings, baseline, run_settings);
    settings is a list when --matrix asks for several configurations."""
    from bot.check.results import load_baseline

    models, (i, n) = select_models(args)
    matrix = build_matrix(args)
    settings = matrix[0] if len(matrix) == 1 else matrix
    baseline = load_baseline(args.baseline) if args.baseline else None
    if args.reruns < 0:
        raise UsageError("--reruns must be >= 0")
    run_settings = RunSettings.from_json(matrix[0].to_dict()).replace(
        source=args.suite, shard=f"{i}/{n}", baseline=os.path.abspath(args.baseline) if args.baseline else None,
        models=[m.name for m in models], reruns=args.reruns, retry=sorted(set(args.retry)),
        matrix=[Configuration.from_json(s.to_dict()) for s in matrix] if len(matrix) > 1 else None)
    return models, settings, baseline, run_settings


def exit_code(rows, fail_on: str) -> int:
    from bot.check.results import is_failure
    from bot.options import fail_on_value

    fail_on = fail_on_value(fail_on)
    if fail_on == "never":
        return EXIT_OK
    if fail_on == "regression":
        return EXIT_FAILURES if any(is_failure(r) and r.baseline in ("new", None) for r in rows) else EXIT_OK
    return EXIT_FAILURES if any(is_failure(r) for r in rows) else EXIT_OK


def run(args) -> int:
    from bot.options import CheckOptions

    return execute(CheckOptions.from_args(args))


def execute(args) -> int:
    """The check stage on typed options (bot.options.CheckOptions, every option resolved)."""
    if args.list:
        models = source_models(args)
        for m in models:
            extra = f"  (skip: {m.skip})" if m.skip else ""
            print(f"{m.name:<20} {m.description}{extra}")
        return EXIT_OK
    models, settings, baseline, run_settings = prepare(args)
    if not models:
        raise UsageError("no models selected (empty shard or empty source)")
    import time

    from bot.check.sweep import run_sweep, table

    started = time.monotonic()
    deadline = started + args.fuzz_time if args.suite == "fuzz" and args.fuzz_time else None
    rundir.ensure_writable(args.out)
    writer = run_sweep(models, settings, args.out, run_settings=run_settings, baseline=baseline,
                       memory_limit_mb=args.memory_limit_mb, reruns=args.reruns, retry=frozenset(args.retry),
                       deadline=deadline)
    print(table(writer.rows), flush=True)
    if args.suite == "fuzz":
        from bot.fuzz.campaign import summary

        print(summary(writer.rows, time.monotonic() - started), flush=True)
    print(f"results: {os.path.join(args.out, rundir.RESULTS)}", file=sys.stderr)
    never_ran(writer.rows)
    return exit_code(writer.rows, args.fail_on)


def never_ran(rows) -> None:
    """A program that never ran (a missing file, a syntax or import error, an exception before
    anything compiled: bot.suites.classify.never_ran) is an input error, whatever --fail-on says:
    UsageError (exit 2) in one line, after the results are written."""
    from bot.suites.classify import NEVER_RAN, is_never_ran

    bad = [r for r in rows if is_never_ran(r)]
    if not bad:
        return
    r = bad[0]
    why = r.classified_by[len(NEVER_RAN):]
    err = r.error.message.splitlines()[0][:300] if r.error and r.error.message else ""
    what = f"{r.error.type}: {err}" if r.error and r.error.type not in (None, "BadCommand", "ExitCode") else err
    line = f"the program of check {r.id} never ran ({why}): {what}".rstrip(": ")
    if why == "import error":
        line += _interpreter_note(r)
    more = f" (and {len(bad) - 1} more checks like it)" if len(bad) > 1 else ""
    raise UsageError(line + more)


def _interpreter_note(row) -> str:
    from bot.suites.command import interpreter_of

    command = row.spec.command if row.spec and isinstance(row.spec.command, str) else None
    python = interpreter_of(command) if command else None
    return f"; its python is {python} (run minify-bot from, or name, the interpreter that has the package)" \
        if python else ""
