"""`minify-bot bisect`: which torch build introduced or fixed a bug, from its verified repro."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bot import rundir
from bot.errors import EXIT_OK, UsageError
from bot.failure import FailureRecord

HELP = "run a failure's verified repro in each of an ordered list of torch builds: which one introduced or fixed it"
DESCRIPTION = """Run the verified repro of each failure of a run directory (or of one failure
directory) in torch builds given oldest first, each in fresh processes judged like verification
(the same failure in NEED of N runs is bad), and find the last good and first bad build (or last
bad and first good) in about log2(builds) verdicts per side. A build where the repro cannot run
(torch does not import, a missing op, another failure) is skipped. For nightlies the two builds'
torch commits bound the range to read. The answer is written into failure.json ("builds"), where
`report` puts it in the issue ("Present in / not present in").

Builds: --build torch==2.15.0, --build 'torch==2.16.0.dev20261120 @ INDEX_URL', --build python:PATH,
--build venv:DIR, --build image:NAME (NAME= in front names it), or --builds-file FILE.yaml (a list of
{name, pip|python|venv|image, index_url, env}). pip builds get a venv each, cached in --cache-dir.

  minify-bot bisect minify-out --build torch==2.13.0 --build torch==2.14.0 --build torch==2.15.0
  minify-bot bisect minify-out/failures/ID --builds-file nightlies.yaml
"""


def add_arguments(p) -> None:
    from bot.options import BisectOptions

    d = BisectOptions.default_of
    p.add_argument("path", nargs="?", metavar="DIR", help="a run directory or one failure's directory "
                   "(default: --out)")
    p.add_argument("--out", default=d("out"), metavar="RUN_DIR", help="the run directory (default: minify-out)")
    p.add_argument("--failure", action="append", default=[], metavar="ID",
                   help="only this failure (repeatable; default: every failure with a verified repro)")
    p.add_argument("--build", action="append", default=[], metavar="BUILD", help="a torch build, oldest first")
    p.add_argument("--builds-file", metavar="FILE", help="a YAML list of builds, oldest first")
    p.add_argument("--verify-runs", "--verification-runs", dest="verify_runs", type=int, default=d("verify_runs"),
                   metavar="N",
                   help="fresh runs per build (default: 3)")
    p.add_argument("--need", type=int, default=None, metavar="K",
                   help="runs that must fail the same way for a build to be bad (default: all N)")
    p.add_argument("--timeout", type=float, default=d("timeout"), help="seconds per repro run (default: 600)")
    p.add_argument("--cache-dir", metavar="DIR", help="where pip builds' venvs are kept "
                   "(default: $MINIFY_BOT_BUILDS_DIR or ~/.cache/minify-bot/builds)")
    p.add_argument("--no-write", action="store_true", help="print the answer; leave failure.json as it is")


def run(args) -> int:
    from bot.options import BisectOptions

    opts = BisectOptions.from_args(args)
    if getattr(args, "path", None):
        opts.out = args.path
    return execute(opts.resolved())


def targets(path: str, only: list[str]) -> list[tuple[Path, FailureRecord]]:
    """(failure directory, failure record) of each failure to bisect: the one directory given, or
    every failure of the run directory with a verified repro."""
    p = Path(path)
    if (p / rundir.FAILURE).is_file():
        rec = rundir.read_failure(p.parent.parent, p.name)
        return [(p, rec)]
    if not rundir.results_path(p).is_file():
        raise UsageError(f"{path}: neither a run directory (results.json) nor a failure directory (failure.json)")
    out = []
    for row in rundir.read_results(p).checks:
        if only and row.id not in only:
            continue
        rec = rundir.read_failure(p, row.id)
        if rec is not None and rec.repro_verified:
            out.append((rundir.failure_dir(p, row.id), rec))
    missing = set(only) - {d.name for d, _ in out}
    if missing:
        raise UsageError(f"no verified repro for: {', '.join(sorted(missing))}")
    return out


def execute(opts) -> int:
    from bot import builds as bl
    from bot.bisect import bisect_repro, summary_lines
    chosen = bl.from_options(opts.build, opts.builds_file)
    if len(chosen) < 2:
        raise UsageError("bisect needs at least two builds (--build, --builds-file), oldest first")
    if opts.verify_runs < 1:
        raise UsageError("--verify-runs must be at least 1")
    todo = targets(opts.out, list(opts.failure))
    say = lambda m: print(f"bisect: {m}", file=sys.stderr, flush=True)  # noqa: E731
    if not todo:
        say(f"no verified repro in {opts.out}: nothing to bisect")
        return EXIT_OK
    cache = bl.BuildCache(opts.cache_dir, log=say)
    for fdir, rec in todo:
        sig = rec.signature
        plain = rec.repro.plain   # public APIs only: it runs on builds whose private repro API differs
        repro = fdir / (plain.path if plain is not None and plain.reproduces else rec.repro.path or rundir.REPRO)
        if sig is None or not repro.is_file():
            say(f"{fdir.name}: no verified signature or repro.py; skipped")
            continue
        say(f"{fdir.name}: {len(chosen)} builds, {opts.verify_runs} runs each")
        answer = bisect_repro(chosen, os.fspath(repro), sig, rec.versions, runs=opts.verify_runs,
                              need=opts.need, timeout=opts.timeout, cache=cache,
                              log=lambda m, n=fdir.name: say(f"{n}: {m}"))
        print(f"{fdir.name}:")
        for line in summary_lines(answer):
            print(line)
        if not opts.no_write:
            rundir.write_failure(fdir, rec.replace(builds=answer.record()))
    return EXIT_OK
