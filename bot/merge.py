"""Merging shards: combine the run directories of a sharded sweep into one, for one report.

Each shard directory is untrusted input (it comes back as an artifact from a job that ran model
code): it is validated by bot.rundir's untrusted reader before anything is copied. The merge refuses, with exit 2,
anything that would make the combined report wrong: the same shard twice, shards of different
sweeps (source, timeout, baseline or torch differ), or one check id in two shards.

Shards may carry different check settings (a settings matrix: inductor and aot_eager, dynamic shapes
off and on): each configuration is a sweep of its own, sharded i/N, and the merged results.json lists
the configurations under settings.matrix; every check row keeps its own settings.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bot import rundir
from bot.check.settings import parse_shard
from bot.errors import UsageError
from bot.records import CONFIGURATION_FIELDS, CheckRow, Configuration, MergedShard, MergeRecord, ResultsDoc, RunSettings

# settings that must agree between shards of one sweep
_SAME_SETTINGS = ("source", "timeout", "baseline")


def _configuration(settings: RunSettings) -> tuple[str, list[Configuration]]:
    """(key, configurations) of a shard: its own settings, or the matrix it swept."""
    configs = settings.configurations()
    return json.dumps([c.to_json() for c in configs], sort_keys=True), configs


def _label(configs: list[Configuration]) -> str:
    return "; ".join(c.label() for c in configs)


def expand(paths: list[str]) -> list[Path]:
    """The shard run directories under ``paths``: each a run directory, or a directory of them; an
    artifact's zip file (``<name>.zip``, as the GitHub API serves an artifact) is unpacked into
    ``<name>/`` first, within the caps (``unpack_capped``), and only then read."""
    dirs: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_symlink() or not p.is_dir():
            raise UsageError(f"{raw}: not a directory")
        for z in sorted(p.glob("*.zip")):
            unpack_capped(z, p / z.name[:-4])
        if (p / rundir.RESULTS).exists() or (p / rundir.RESULTS).is_symlink():
            dirs.append(p)
            continue
        inner = sorted(c for c in p.iterdir() if c.is_dir() and not c.is_symlink() and (c / rundir.RESULTS).exists())
        if not inner:
            raise UsageError(f"{raw}: holds no results.json and no shard directories")
        dirs.extend(inner)
    seen = set()
    for d in dirs:
        key = d.resolve()
        if key in seen:
            raise UsageError(f"{d}: given twice")
        seen.add(key)
    return dirs


def _shard(settings: RunSettings, where: str) -> tuple[int, int]:
    try:
        return parse_shard(settings.shard)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None


@dataclass
class _Sweep:
    """The shards given, checked to be shards of one sweep (or of one settings matrix)."""

    shards: dict = field(default_factory=dict)    # (configuration key, i) -> shard directory
    total_n: dict = field(default_factory=dict)   # configuration key -> number of shards
    groups: dict = field(default_factory=dict)    # configuration key -> its configurations
    owner: dict = field(default_factory=dict)     # check id -> the shard directory's name

    def add(self, run: rundir.RunDir, base: rundir.RunDir) -> None:
        where = run.root.name
        settings, base_settings = run.results.settings, base.results.settings
        for key in _SAME_SETTINGS:
            if getattr(settings, key) != getattr(base_settings, key):
                raise UsageError(f"{where}: setting {key!r} differs from {base.root.name} ({getattr(settings, key)!r} "
                                 f"vs {getattr(base_settings, key)!r}): not shards of one sweep")
        torch_version, base_torch = run.results.versions.get("torch"), base.results.versions.get("torch")
        if torch_version != base_torch:
            raise UsageError(f"{where}: torch {torch_version!r} differs from {base.root.name} ({base_torch!r})")
        i, n = _shard(settings, where)
        key, configs = _configuration(settings)
        self.groups.setdefault(key, configs)
        if self.total_n.setdefault(key, n) != n:
            raise UsageError(f"{where}: shard {i}/{n} does not belong to a sweep of {self.total_n[key]} shards")
        if (key, i) in self.shards:
            raise UsageError(f"{where}: shard {i}/{n} was already given ({self.shards[key, i].name})")
        self.shards[key, i] = run.root
        for row in run.rows:
            if row.id in self.owner:
                raise UsageError(f"{where}: check {row.id!r} is also in {self.owner[row.id]}")
            self.owner[row.id] = where

    def missing(self) -> list[str]:
        several = len(self.groups) > 1
        return [f"{i}/{n}" + (f" ({_label(self.groups[key])})" if several else "")
                for key, n in self.total_n.items() for i in range(1, n + 1) if (key, i) not in self.shards]


def merge(shard_dirs: list[Path], out: Path, *, max_bytes: int = rundir.MAX_TOTAL_BYTES,
          max_files: int = rundir.MAX_FILES) -> MergeRecord:
    """Validate and merge; returns the merge record (also written to out/merge.json)."""
    if not shard_dirs:
        raise UsageError("no shard directories to merge")
    runs = [rundir.load_untrusted(d, max_total=max_bytes, max_files=max_files) for d in shard_dirs]
    sweep = _Sweep()
    for run in runs:
        sweep.add(run, runs[0])
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out}: the output directory exists and is not empty")
    missing = sweep.missing()
    complete = not missing and all(r.results.complete for r in runs)
    staging = out.with_name(out.name + ".merging")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    checks = _copy_files(runs, staging)
    rundir.write_results(staging, _merged_results(runs, sweep, complete, checks))
    if all(rundir.RESULTS_CSV in r.files for r in runs):
        rundir.concat_csv(staging, [r.root / rundir.RESULTS_CSV for r in runs])
    record = MergeRecord(
        merged_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        shards=[MergedShard(shard=f"{i}/{sweep.total_n[key]}", dir=sweep.shards[key, i].name,
                            configuration=_label(sweep.groups[key]),
                            checks=sum(1 for row in checks if sweep.owner[row.id] == sweep.shards[key, i].name))
                for key, i in sorted(sweep.shards)],
        missing_shards=missing, ignored_files={r.root.name: r.ignored for r in runs if r.ignored},
        complete=complete, checks=len(checks), failures=sum(1 for row in checks if row.failure_class))
    rundir.write_merge(staging, record)
    if out.exists():
        out.rmdir()
    os.replace(staging, out)
    return record


def _copy_files(runs, staging: Path) -> list[CheckRow]:
    """Every shard's files but its results into ``staging``; the shards' check rows, by id."""
    checks: list[CheckRow] = []
    for run in runs:
        for rel in run.files:
            if rel in (rundir.RESULTS, rundir.RESULTS_CSV):
                continue
            dst = staging / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run.root / rel, dst)  # regular files only (validated), content copied
        checks.extend(run.rows)
    return sorted(checks, key=lambda row: row.id)


def _merged_results(runs, sweep: _Sweep, complete: bool, checks: list[CheckRow]) -> ResultsDoc:
    first = runs[0].results
    starts = [r.results.started for r in runs if r.results.started]
    ends = [r.results.finished for r in runs]
    settings = first.settings.replace(shard="1/1")
    if len(sweep.groups) > 1:  # a settings matrix: the configurations side by side, each row keeps its own settings
        settings = settings.replace(**dict.fromkeys(CONFIGURATION_FIELDS),
                                    matrix=[c for configs in sweep.groups.values() for c in configs])
    return first.replace(settings=settings, started=min(starts) if starts else None,
                         finished=None if (not ends or None in ends) else max(ends), complete=complete, checks=checks)


def unpack_capped(zip_path: Path, dest: Path, *, max_total: int = rundir.MAX_TOTAL_BYTES,
                  max_files: int = rundir.MAX_FILES) -> Path:
    """Unpack an artifact's zip file (written by a job that ran model code) into ``dest``, checking the
    caps before anything is written and again while it is written: the zip file's own size, the
    number of entries, each entry's size and the total (as declared, then as actually decompressed:
    a declared size can lie), safe names at most ``rundir.MAX_DEPTH`` deep, no links or other
    special entries. UsageError (exit 2) names what was over; nothing of a refused zip is kept."""
    import stat
    import zipfile

    what = zip_path.name
    st = zip_path.lstat()
    if not stat.S_ISREG(st.st_mode) or st.st_size > max_total:
        raise UsageError(f"{what}: not a regular file of at most {max_total} bytes")
    if dest.exists() or dest.is_symlink():
        raise UsageError(f"{what}: {dest.name} exists already")
    try:
        with zipfile.ZipFile(zip_path) as zf:
            entries = [i for i in zf.infolist() if not i.is_dir()]
            _check_entries(what, entries, max_total, max_files)
            dest.mkdir()
            written = 0
            for info in entries:
                written += _unpack_one(zf, info, dest, max_total - written, what)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise UsageError(f"{what}: not a zip file the bot can read ({type(exc).__name__})") from None
    except UsageError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def _check_entries(what: str, entries, max_total: int, max_files: int) -> None:
    import stat

    if len(entries) > max_files:
        raise UsageError(f"{what}: more than {max_files} files")
    if sum(i.file_size for i in entries) > max_total:
        raise UsageError(f"{what}: more than {max_total} bytes once unpacked")
    for info in entries:
        parts = info.filename.split("/")
        if info.filename.startswith("/") or len(parts) > rundir.MAX_DEPTH + 1 or any(
                not rundir.SAFE_NAME.fullmatch(part) for part in parts):
            raise UsageError(f"{what}: unsafe file name {info.filename[:200]!r}")
        kind = stat.S_IFMT(info.external_attr >> 16)   # none recorded: a plain file
        if kind and kind != stat.S_IFREG:
            raise UsageError(f"{what}: {info.filename[:200]} is not a regular file (a link or a special file)")
        if info.file_size > rundir.MAX_FILE_BYTES:
            raise UsageError(f"{what}: {info.filename[:200]} is {info.file_size} bytes, over the "
                             f"{rundir.MAX_FILE_BYTES}-byte cap")


def _unpack_one(zf, info, dest: Path, budget: int, what: str) -> int:
    """One entry, decompressed in chunks and cut off at its declared size (or the budget left)."""
    target = dest / info.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    limit = min(info.file_size, budget)
    n = 0
    with zf.open(info) as src, open(target, "xb") as out:
        while chunk := src.read(1 << 20):
            n += len(chunk)
            if n > limit:
                raise UsageError(f"{what}: {info.filename[:200]} unpacks to more than it declares")
            out.write(chunk)
    return n
