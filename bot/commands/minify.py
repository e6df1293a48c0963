"""`minify-bot minify`: turn each failing check of a run directory (or one launcher / repro file)
into a minimized, verified repro under failures/<check-id>/."""

from __future__ import annotations

import os
import re
import sys
import time

from bot import rundir
from bot.check.settings import Settings
from bot.errors import EXIT_FAILURES, EXIT_OK, InfraError, UsageError
from bot.records import CONFIGURATION_FIELDS, CheckRow, RunSettings

HELP = "minimize each failing check's graph into a verified repro (failures/<id>/)"
DESCRIPTION = """Minimize failures found by `check`.

For each failing check in RUN_DIR/results.json: localize the first failing stage (eager,
aot_eager, aot_eager_decomp_partition, inductor), capture the failing graph with its real inputs
(repro-after), reduce it with torch's fx minifier (in-process worker; per-query isolation as a
fallback), verify the result in fresh processes and write failures/<check-id>/{failure.json,
repro.py, inputs/, minifier.log[, repro_standalone.py]}.

With --launcher/--repro FILE, minify one torch minifier_launcher.py / repro.py instead."""


def add_arguments(p) -> None:
    from bot.options import MinifyOptions

    d = MinifyOptions.default_of
    p.add_argument("--out", metavar="RUN_DIR", default=d("out"),
                   help="run directory (reads results.json, writes failures/) [minify-out]")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--launcher", metavar="FILE", help="minify this minifier_launcher.py instead of a run")
    src.add_argument("--repro", metavar="FILE", help="minify this repro.py instead of a run")
    p.add_argument("--only", metavar="CHECK_ID,...", help="only these failing checks")
    p.add_argument("--repro-after", choices=["aot", "dynamo"], help="force the capture point")
    p.add_argument("--repro-level", type=int, choices=[1, 2, 3, 4], help="force TORCHDYNAMO_REPRO_LEVEL")
    p.add_argument("--strict-accuracy", action="store_true",
                   help="minimize on any divergence, including non-floating outputs")
    p.add_argument("--offload-to-disk", action="store_true",
                   help="keep the minifier's intermediate values on disk instead of in memory")
    p.add_argument("--isolate", action="store_true",
                   help="one fresh process per minifier query (slow; for failures that crash the process)")
    p.add_argument("--budget", "--minify-budget", dest="budget", type=float, default=d("budget"), metavar="SECONDS",
                   help="time budget per failure for reduction [600]")
    p.add_argument("--verify-runs", "--verification-runs", dest="verify_runs", type=int, default=d("verify_runs"),
                   metavar="N", help="fresh verification runs [3]")
    p.add_argument("--no-localize", action="store_true", help="skip the eager/aot_eager/... ablation")
    p.add_argument("--reminify", action="store_true",
                   help="minify every failure, even one whose open issue has a verified repro (known.json)")
    p.add_argument("--no-bisect", action="store_true", help="skip torch's CompilerBisector on inductor failures")
    p.add_argument("--no-trace", action="store_true",
                   help="skip the TORCH_TRACE rerun of each verified repro (about 15 s each): issues then carry "
                        "no tlparse report and no generated code")
    p.add_argument("--check-timeout", type=float, default=d("check_timeout"), metavar="SECONDS",
                   help="time limit for each rerun of a check (localize, capture) [900]")
    p.add_argument("--known-public-key", metavar="BASE64", default=d("known_public_key"),
                   help="the public key known repros must be signed with to be run instead of minifying "
                        "[$MINIFY_BOT_PUBLIC_KEY]; without one, no repro from an issue body is run")
    p.add_argument("--jobs", type=int, default=d("jobs"), metavar="N",
                   help="failures minimized at once, each in a process of its own [one per GPU when a failure "
                        "ran on CUDA, else one per 4 cores]")


def _say(msg: str) -> None:
    print(f"minify: {msg}", file=sys.stderr, flush=True)


def preflight(servers) -> dict:
    """Fail early (exit 3) on a torch without what minify needs; returns version facts. What torch
    offers is learned in a fork of the command's fork server (``servers``), which imports torch
    anyway: this process does not import it (a second import beside the server's would take a
    core for some 3 s). Without a server, or where this process imported torch already, here."""
    from bot.torch_adapter import repro as R
    from bot.torch_adapter import versions

    version = versions.torch_build()["torch"]
    if version is not None:
        R.check_repro_api(version, [])  # too old: no need to wait for the server
    # torch imported here already (`run` checked in this process): asking here costs nothing, and the
    # server's warm-up goes on while the first failure is localized
    facts = None if "torch" in sys.modules else servers.facts()
    if facts is None:  # torch here already, no server, or torch failed it: here, to say why
        try:
            from bot.torch_adapter.facts import gather

            facts = gather()
        except ImportError as exc:
            raise InfraError(f"torch is not importable: {exc}") from exc
        except Exception as exc:  # an import-time failure inside torch
            raise InfraError(f"torch is not usable for minify: {type(exc).__name__}: {exc}") from exc
    R.check_repro_api(facts.get("torch") or version, facts.get("missing") or [])
    return versions.collect(facts)


def run(args) -> int:
    from bot.options import MinifyOptions

    return execute(MinifyOptions.from_args(args))


def execute(args) -> int:
    """The minify stage on typed options (bot.options.MinifyOptions, every option resolved): the
    one options object that flows to each failure's pipeline and into the worker's job."""
    if args.budget <= 0:
        raise UsageError("--budget must be a positive number of seconds")
    if args.verify_runs < 1:
        raise UsageError("--verify-runs must be at least 1")
    from bot.minify.procs import Interpreters

    # one fork server for all the failures of this command (the minify workers and the
    # verification runs fork from it), started once there is something to minify (or already
    # started by `run` while its check went on)
    servers = Interpreters.for_stage(args.verify_runs)
    try:
        return _run(args, os.path.abspath(args.out), servers)
    finally:
        servers.close()


def _launcher_device(source: str) -> str:
    """The device a launcher's graph runs on, as its inputs say (torch writes each storage's
    ``device(type='cuda', index=0)``): the record, title and signature name it, not ``unknown``."""
    types = set(re.findall(r"device\(type='(\w+)'", source))
    return next((t for t in sorted(types) if t != "cpu"), "cpu")


def _todo(args, run_dir: str) -> list[tuple[CheckRow, Settings, str | None]] | None:
    """What to minify: (check row, its settings, given launcher); None when nothing fails."""
    given = args.launcher or args.repro
    todo: list[tuple[CheckRow, Settings, str | None]] = []
    if given:
        from bot.torch_adapter.repro import parse_repro_file

        rf = parse_repro_file(given)  # UsageError (exit 2) for a missing or corrupt file
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.splitext(os.path.basename(given))[0])
        device = _launcher_device(rf.source)
        todo.append((CheckRow(id=name, backend="inductor", config={}, device=device), Settings(device=device),
                     os.path.abspath(given)))
    else:
        from bot.check import results

        doc = results.load(run_dir)  # UsageError (exit 2) for an unknown schema
        only = set(filter(None, (args.only or "").split(",")))
        rows = doc.checks
        ids = {r.id for r in rows}
        unknown = sorted(only - ids)
        if unknown:
            raise UsageError(f"--only: no check {', '.join(unknown)} in {run_dir}/results.json")
        for r in rows:
            if only and r.id not in only:
                continue
            if not r.failure_class:
                if only:
                    _say(f"{r.id}: status {r.status}: the check passes, nothing to minify "
                         "(no repro is written for a clean model)")
                continue
            todo.append((r, _settings_of(r, doc.settings), None))
        if not todo:
            _say(f"no failing checks{' among ' + ','.join(sorted(only)) if only else ''} in "
                 f"{os.path.join(args.out, rundir.RESULTS)}: nothing to minify")
            return None
    return todo


def _settings_of(row: CheckRow, run: RunSettings) -> Settings:
    """A check's settings: its row's, else its run's, else the check stage's defaults."""
    given = {k: v if (v := getattr(row, k)) is not None else getattr(run, k) for k in CONFIGURATION_FIELDS}
    given["timeout"] = run.timeout
    return Settings.from_dict({k: v for k, v in given.items() if v is not None})


def _run(args, run_dir: str, servers) -> int:
    from bot import known as kn
    from bot.minify import parallel
    from bot.minify.pipeline import process

    todo = _todo(args, run_dir)
    if todo is None:
        return EXIT_OK
    t0 = time.time()
    jobs = parallel.jobs_for([row for row, _, _ in todo], args.jobs) if not (args.launcher or args.repro) else 1
    if jobs > 1:
        return _run_parallel(args, run_dir, [row for row, _, _ in todo], jobs, t0)
    # only repros the bot signed run: verified with --known-public-key, else MINIFY_BOT_PUBLIC_KEY
    known = kn.load(run_dir, kn.signing.public_key_from_env(os.environ, args.known_public_key),
                    say=_say) if not (args.launcher or args.repro or args.reminify) else []
    servers.start()  # its torch import and warm-up overlap the checks below and the capture
    versions = preflight(servers)
    known = _on_this_torch(known, versions.get("torch"))
    found = 0
    records = []
    for i, (row, s, launcher) in enumerate(todo, 1):
        _say(f"[{i}/{len(todo)}] {row.id} ({row.failure_class or 'launcher'})")
        rec = process(row, s, run_dir, args, versions, lambda m: _say(f"  {m}"), launcher=launcher,
                      interpreters=servers, known=known)
        records.append(rec)
        st = rec.repro.status
        ver = rec.repro.verification
        extra = f", verified {ver.failed_same_way}/{ver.runs}" if ver else ""
        _say(f"[{i}/{len(todo)}] {row.id}: {st}{extra}"
             + (f" ({rec.repro.reason})" if rec.repro.reason else "")
             + f" -> {os.path.relpath(os.path.join(run_dir, 'failures', row.id))}/")
        if st in ("minimized", "partial"):
            found += 1
    _say(f"done: {found}/{len(todo)} failures minimized and verified in {time.time() - t0:.0f} s")
    if known:
        _say(kn.savings(records).line() or "known bugs: none of the failures matched a known repro")
    return EXIT_FAILURES if found else EXIT_OK


def _on_this_torch(known: list, torch: str | None) -> list:
    """A known repro stands in only on the torch it was minified on or a newer one."""
    from bot import known as kn

    keep = [k for k in known if kn.torch_allows(k, torch)]
    for k in known:
        if k not in keep:
            _say(f"known bug #{k.issue}: minified on torch {k.record.torch or 'unknown'}, this is torch "
                 f"{torch or 'unknown'}: minified afresh")
    return keep


def _run_parallel(args, run_dir: str, rows: list[CheckRow], jobs: int, t0: float) -> int:
    """Each failure in a `minify --only ID` process of its own, ``jobs`` at a time
    (bot.minify.parallel); the same summary as one at a time, read from the failure records."""
    import dataclasses

    from bot.minify import parallel
    from bot.options import to_argv

    _say(f"{len(rows)} failures, {jobs} at a time")
    codes = parallel.minify_all(lambda row: ["minify", *to_argv(dataclasses.replace(args, only=row.id, jobs=1))],
                                rows, run_dir, jobs, _say)
    found = 0
    for i, (row, rc) in enumerate(zip(rows, codes), 1):
        rec = rundir.read_failure(run_dir, str(row.id)) if rc in (EXIT_OK, EXIT_FAILURES) else None
        log = rundir.minify_log(args.out, str(row.id))
        st = rec.repro.status if rec is not None else f"stopped (exit {rc}; see {log})"
        ver = rec.repro.verification if rec is not None else None
        _say(f"[{i}/{len(rows)}] {row.id}: {st}" + (f", verified {ver.failed_same_way}/{ver.runs}" if ver else ""))
        found += st in ("minimized", "partial")
    _say(f"done: {found}/{len(rows)} failures minimized and verified in {time.time() - t0:.0f} s")
    if any(rc not in (EXIT_OK, EXIT_FAILURES) for rc in codes) and not found:
        raise InfraError(f"minify stopped for {sum(rc not in (EXIT_OK, EXIT_FAILURES) for rc in codes)} "
                         "failure(s): see their minify.log")
    return EXIT_FAILURES if found else EXIT_OK
