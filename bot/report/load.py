"""What a report reads: its options and the run directory (results.json, failure.json, repro.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from bot import fingerprint as fp
from bot import rundir
from bot.failure import FailureRecord
from bot.records import CheckRow, ResultsDoc


def trusted_evidence(env) -> str | None:
    """The commit and build of this run as the report's own environment gives them (GitHub sets
    GITHUB_SHA; the workflow passes the check job's image as MINIFY_BOT_BUILD), or None outside one."""
    sha = (env.get("GITHUB_SHA") or "").strip()
    if not sha:
        return None
    build = (env.get("MINIFY_BOT_BUILD") or "").strip()
    return f"{sha[:40]}@{build[:200]}" if build else sha[:40]



@dataclasses.dataclass
class Failure:
    check: CheckRow
    failure: FailureRecord | None
    dir: Path | None
    repro_text: str | None
    fingerprint: fp.Fingerprint


def _inside(base: Path, rel) -> Path | None:
    if not isinstance(rel, str) or not rel:
        return None
    p = (base / rel).resolve()
    try:
        p.relative_to(base.resolve())
    except ValueError:
        return None
    return p if p.is_file() else None


def load_run(run_dir: str | os.PathLike) -> tuple[ResultsDoc, list[Failure], list[CheckRow]]:
    """(results, failures, passing checks), read through bot.rundir; raises UsageError on bad input."""
    run = Path(run_dir)
    results = rundir.read_results(run)
    failures, passing = [], []
    for check in results.checks:
        if not check.failure_class:
            if check.status == "pass":
                passing.append(check)
            continue
        fdir = rundir.failure_dir(run, check.id)
        failure = rundir.read_failure(run, check.id)
        repro_text = None
        rp = _inside(fdir, failure.repro.path) if failure else None
        if rp:
            try:
                repro_text = rp.read_text(encoding="utf-8", errors="replace")
            except OSError:
                repro_text = None
        failures.append(Failure(check, failure, fdir if failure else None, repro_text,
                                fp.compute(check, failure)))
    return results, failures, passing


def default_run_id(results: ResultsDoc) -> str:
    """The run's id: a hash of when it started, its settings, versions and check ids."""
    basis = {"started": results.started, "settings": results.settings.to_json(), "versions": results.versions,
             "checks": sorted(c.id or "" for c in results.checks)}
    return "run-" + hashlib.sha1(json.dumps(basis, sort_keys=True, default=str).encode()).hexdigest()[:12]

