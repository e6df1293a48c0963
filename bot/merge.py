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
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bot import rundir
from bot.errors import UsageError
from bot.records import CheckRow

# settings that must agree between shards of one sweep
_SAME_SETTINGS = ("source", "timeout", "baseline")
# settings that make a configuration: shards of different configurations are merged side by side
_CONFIG_SETTINGS = ("backend", "mode", "dtype", "device", "dynamic", "config")


def _configuration(settings: dict) -> tuple[str, list[dict]]:
    """(key, configurations) of a shard: its own settings, or the matrix it swept."""
    matrix = settings.get("matrix")
    configs = matrix if isinstance(matrix, list) and matrix else [{k: settings.get(k) for k in _CONFIG_SETTINGS}]
    configs = [{k: c.get(k) for k in _CONFIG_SETTINGS} for c in configs if isinstance(c, dict)]
    return json.dumps(configs, sort_keys=True), configs


def _label(configs: list[dict]) -> str:
    return "; ".join(f"{c.get('backend')}, {c.get('mode')}, {c.get('dtype')}, {c.get('device')}"
                     + (", dynamic" if c.get("dynamic") else "") for c in configs)


def expand(paths: list[str]) -> list[Path]:
    dirs: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_symlink() or not p.is_dir():
            raise UsageError(f"{raw}: not a directory")
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


def _shard(results: dict, where: str) -> tuple[int, int]:
    text = (results.get("settings") or {}).get("shard") or "1/1"
    m = re.fullmatch(r"(\d+)/(\d+)", text)
    i, n = int(m.group(1)), int(m.group(2))  # the schema guarantees the pattern
    if n < 1 or not 1 <= i <= n:
        raise UsageError(f"{where}: invalid shard {text!r}")
    return i, n


@dataclass
class _Sweep:
    """The shards given, checked to be shards of one sweep (or of one settings matrix)."""

    shards: dict = field(default_factory=dict)    # (configuration key, i) -> shard directory
    total_n: dict = field(default_factory=dict)   # configuration key -> number of shards
    groups: dict = field(default_factory=dict)    # configuration key -> its configurations
    owner: dict = field(default_factory=dict)     # check id -> the shard directory's name

    def add(self, run, base, base_settings: dict, base_torch) -> None:
        where = run.root.name
        settings = run.results.get("settings") or {}
        for key in _SAME_SETTINGS:
            if settings.get(key) != base_settings.get(key):
                raise UsageError(f"{where}: setting {key!r} differs from {base.root.name} "
                                 f"({settings.get(key)!r} vs {base_settings.get(key)!r}): not shards of one sweep")
        torch_version = (run.results.get("versions") or {}).get("torch")
        if torch_version != base_torch:
            raise UsageError(f"{where}: torch {torch_version!r} differs from {base.root.name} ({base_torch!r})")
        i, n = _shard(run.results, where)
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
          max_files: int = rundir.MAX_FILES) -> dict:
    """Validate and merge; returns the merge record (also written to out/merge.json)."""
    if not shard_dirs:
        raise UsageError("no shard directories to merge")
    runs = [rundir.load_untrusted(d, max_total=max_bytes, max_files=max_files) for d in shard_dirs]
    first = runs[0].results
    sweep = _Sweep()
    for run in runs:
        sweep.add(run, runs[0], first.get("settings") or {}, (first.get("versions") or {}).get("torch"))
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out}: the output directory exists and is not empty")
    missing = sweep.missing()
    complete = not missing and all(r.results.get("complete", False) for r in runs)
    staging = out.with_name(out.name + ".merging")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    checks = _copy_files(runs, staging)
    rundir.write_results(staging, _merged_results(runs, sweep, complete, checks))
    if all(rundir.RESULTS_CSV in r.files for r in runs):
        rundir.concat_csv(staging, [r.root / rundir.RESULTS_CSV for r in runs])
    record = {
        "merged_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "shards": [{"shard": f"{i}/{sweep.total_n[key]}", "dir": sweep.shards[key, i].name,
                    "configuration": _label(sweep.groups[key]),
                    "checks": sum(1 for row in checks if sweep.owner[row.id] == sweep.shards[key, i].name)}
                   for key, i in sorted(sweep.shards)],
        "missing_shards": missing,
        "ignored_files": {r.root.name: r.ignored for r in runs if r.ignored},
        "complete": complete,
        "checks": len(checks),
        "failures": sum(1 for row in checks if row.failure_class),
    }
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


def _merged_results(runs, sweep: _Sweep, complete: bool, checks: list[CheckRow]) -> dict:
    first = runs[0].results
    starts = [r.results.get("started") for r in runs if r.results.get("started")]
    ends = [r.results.get("finished") for r in runs]
    merged = dict(first)
    merged["settings"] = dict(first.get("settings") or {}, shard="1/1")
    if len(sweep.groups) > 1:  # a settings matrix: the configurations side by side, each row keeps its own settings
        for k in _CONFIG_SETTINGS:
            merged["settings"].pop(k, None)
        merged["settings"]["matrix"] = [c for configs in sweep.groups.values() for c in configs]
    merged["started"] = min(starts) if starts else None
    merged["finished"] = None if (not ends or None in ends) else max(ends)
    merged["complete"] = complete
    merged["checks"] = [row.to_json() for row in checks]
    return merged
