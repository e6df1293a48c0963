"""results.json (versioned) and the benchmark harness's accuracy CSV; baselines.

results.json is rewritten atomically after every check, so an interrupted sweep keeps every
row it had; ``complete`` stays false until the last selected check has a row.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import platform

from bot import __version__, rundir
from bot.check.settings import Settings, check_id
from bot.errors import UsageError
from bot.records import CheckRow, ResultsDoc, RunSettings, Spec

# The run directory's format (schema ids, status words, the writers and readers) is bot/rundir.py's.
SCHEMA = rundir.RESULTS_SCHEMA
PASS_STATUSES = set(rundir.PASS_STATUSES)
STATUS_CLASS = rundir.STATUS_CLASS
CSV_COLUMNS = rundir.CSV_COLUMNS
STAT_COLUMNS = rundir.STAT_COLUMNS


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def basic_versions() -> dict:
    from bot.torch_adapter.versions import torch_build

    return {"python": platform.python_version(), "os": platform.platform(terse=True), **torch_build()}


def is_failure(row: CheckRow) -> bool:
    return row.failing


# What one run writes into the run directory; a new check clears it so that a reused directory
# never mixes runs. The local issue tracker (issues/) lives on across runs and is kept.
RUN_OUTPUTS = (rundir.RESULTS, rundir.RESULTS_CSV, rundir.CHECKS_DIR, rundir.FAILURES_DIR, rundir.REPORT,
               rundir.MERGE, rundir.SUMMARY)


def clear_run_outputs(out_dir: str) -> None:
    import shutil

    for name in RUN_OUTPUTS:
        path = os.path.join(out_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)


class ResultsWriter:
    """Accumulates rows and keeps results.json and results.csv current on disk."""

    def __init__(self, out_dir: str, settings: RunSettings, versions: dict | None = None):
        self.out_dir = out_dir
        clear_run_outputs(out_dir)
        os.makedirs(os.path.join(out_dir, rundir.CHECKS_DIR), exist_ok=True)
        self.doc = ResultsDoc(settings=settings, versions=versions or basic_versions(),
                              tool_version=__version__, started=now())
        self.flush()

    @property
    def rows(self) -> list[CheckRow]:
        return self.doc.checks

    def add(self, row: CheckRow) -> None:
        self.rows.append(row)
        self.flush()

    def finish(self, complete: bool = True) -> None:
        self.doc.finished = now()
        self.doc.complete = complete
        self.flush()

    def flush(self) -> None:
        rundir.write_results(self.out_dir, self.doc)
        rundir.write_csv(self.out_dir, self.rows)


# --- reading ---------------------------------------------------------------------------------------


def load(path: str) -> ResultsDoc:
    """Read and check a results.json (a run directory or the file); UsageError (exit 2) when it is
    not one we understand."""
    return rundir.read_results(path)


def csv_to_rows(records: list[dict], settings: Settings) -> list[CheckRow]:
    """Harness CSV records -> results.json rows (for `--suite csv`)."""
    rows = []
    unknown = sorted({r["accuracy"] for r in records} - set(rundir.STATUSES))
    if unknown:
        raise UsageError(f"unknown status word(s) in the CSV: {', '.join(map(repr, unknown[:5]))} "
                         f"(known: {', '.join(rundir.STATUSES)})")
    for rec in records:
        status = rec["accuracy"]
        s = dataclasses.replace(settings, device=rec.get("dev") or settings.device)
        rows.append(CheckRow(
            id=check_id(rec["name"], s), model=rec["name"], spec=Spec(source="csv", model=rec["name"]),
            backend=s.backend, mode=s.mode, dtype=s.dtype, device=s.device, dynamic=s.dynamic, config=dict(s.config),
            status=status, failure_class=STATUS_CLASS[status],
            batch_size=rec.get("batch_size") or None, compile_s=rec.get("compilation_latency") or None,
            stats={c: rec[c] for c in STAT_COLUMNS if isinstance(rec.get(c), int)}))
    return rows


# --- baselines -------------------------------------------------------------------------------------


def load_baseline(path: str) -> dict[str, str]:
    """A baseline: an earlier results.json or a harness / expected-accuracy CSV.

    Returns {key: status} where key is a check id (results.json) and a model name (both).
    """
    if not os.path.exists(path):
        raise UsageError(f"cannot read baseline {path}: no such file")
    if path.endswith(".json") or os.path.isdir(path):
        out = {}
        for row in load(path).checks:
            out[row.id or ""] = row.status
            out.setdefault("name:" + str(row.model), row.status)
        return out
    try:
        records = rundir.read_csv(path)
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read baseline {path}: not a text CSV") from exc
    return {"name:" + r["name"]: r["accuracy"] for r in records}


def mark_baseline(row: CheckRow, baseline: dict[str, str] | None) -> None:
    if baseline is None:
        row.baseline = None
        return
    before = baseline.get(row.id or "") or baseline.get("name:" + str(row.model))
    failing_now = is_failure(row)
    passed_before = before in PASS_STATUSES
    if failing_now:
        row.baseline = "known" if (before is not None and not passed_before) else "new"
    elif before is not None and not passed_before:
        row.baseline = "fixed"
    else:
        row.baseline = None
    row.baseline_status = before
