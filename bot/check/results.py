"""results.json (versioned) and the benchmark harness's accuracy CSV; baselines.

results.json is rewritten atomically after every check, so an interrupted sweep keeps every
row it had; ``complete`` stays false until the last selected check has a row.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import os
import platform
from typing import Any

from bot import __version__
from bot.errors import UsageError

SCHEMA = "minify-action/results/v1"
SCHEMA_KIND = "minify-action/results/"
SCHEMA_MAJOR = 1

PASS_STATUSES = {"pass", "pass_due_to_skip"}

# The harness's accuracy CSV columns (benchmarks/dynamo/common.py)
CSV_COLUMNS = ["dev", "name", "batch_size", "accuracy", "calls_captured", "unique_graphs", "graph_breaks",
               "unique_graph_breaks", "autograd_captures", "autograd_compiles", "cudagraph_skips",
               "compilation_latency"]
STAT_COLUMNS = CSV_COLUMNS[4:11]

# harness status word -> failure class (when nothing more precise is known)
STATUS_CLASS = {
    "pass": None, "pass_due_to_skip": None,
    "fail_accuracy": "accuracy", "fail_to_run": "runtime_error", "OOM": "oom",
    "eager_1st_run_fail": "eager_error", "eager_2nd_run_fail": "eager_error", "eager_fail_to_run": "eager_error",
    "eager_two_runs_differ": "eager_error", "model_fail_to_load": "eager_error", "not_bitwise_equivalent": "accuracy",
    "eager_1st_run_OOM": "oom", "eager_2nd_run_OOM": "oom", "timeout": "timeout",
}


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def basic_versions() -> dict:
    out = {"python": platform.python_version(), "os": platform.platform(terse=True)}
    try:
        import torch

        out["torch"] = torch.__version__
        out["torch_git"] = getattr(torch.version, "git_version", None)
        out["cuda"] = torch.version.cuda
    except ImportError:
        pass
    return out


def is_failure(row: dict) -> bool:
    return row.get("failure_class") is not None


# What one run writes into the run directory; a new check clears it so that a reused directory
# never mixes runs. The local issue tracker (issues/) lives on across runs and is kept.
RUN_OUTPUTS = ("results.json", "results.csv", "checks", "failures", "report.json", "summary.md")


def clear_run_outputs(out_dir: str) -> None:
    import shutil

    for name in RUN_OUTPUTS:
        path = os.path.join(out_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)


def _atomic_write(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


class ResultsWriter:
    """Accumulates rows and keeps results.json and results.csv current on disk."""

    def __init__(self, out_dir: str, settings: dict, versions: dict | None = None):
        self.out_dir = out_dir
        clear_run_outputs(out_dir)
        os.makedirs(os.path.join(out_dir, "checks"), exist_ok=True)
        self.doc: dict[str, Any] = {
            "schema": SCHEMA,
            "tool_version": __version__,
            "started": now(),
            "finished": None,
            "complete": False,
            "settings": settings,
            "versions": versions or basic_versions(),
            "checks": [],
        }
        self.flush()

    @property
    def rows(self) -> list[dict]:
        return self.doc["checks"]

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.flush()

    def finish(self, complete: bool = True) -> None:
        self.doc["finished"] = now()
        self.doc["complete"] = complete
        self.flush()

    def flush(self) -> None:
        _atomic_write(os.path.join(self.out_dir, "results.json"), json.dumps(self.doc, indent=1, default=str) + "\n")
        write_csv(os.path.join(self.out_dir, "results.csv"), self.rows)


# --- reading ---------------------------------------------------------------------------------------


def load(path: str) -> dict:
    """Read and check a results.json; UsageError (exit 2) when it is not one we understand."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc
    check_schema(doc, path)
    return doc


def check_schema(doc: Any, path: str = "results.json") -> None:
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_KIND):
        raise UsageError(f"{path} is not a minify-action results file (schema {schema!r})")
    try:
        major = int(schema.rsplit("/v", 1)[1])
    except (IndexError, ValueError):
        raise UsageError(f"{path}: unreadable schema version {schema!r}") from None
    if major != SCHEMA_MAJOR:
        raise UsageError(f"{path}: schema {schema!r} is not supported by minify-bot {__version__} "
                         f"(expected {SCHEMA})")
    if not isinstance(doc.get("checks"), list):
        raise UsageError(f"{path}: 'checks' must be a list")


# --- the harness CSV -------------------------------------------------------------------------------


def write_csv(path: str, rows: list[dict]) -> None:
    lines = []
    for r in rows:
        stats = r.get("stats") or {}
        rec = {
            "dev": r.get("device", "cpu"),
            "name": r.get("model", r.get("id")),
            "batch_size": r.get("batch_size") or 0,
            "accuracy": r.get("status"),
            "compilation_latency": r.get("compile_s") or 0,
        }
        for c in STAT_COLUMNS:
            rec[c] = stats.get(c, 0)
        lines.append(rec)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(lines)
    os.replace(tmp, path)


def read_csv(path: str) -> list[dict]:
    """Read a harness accuracy CSV or a ci_expected_accuracy CSV (blank lines allowed).

    Returns dicts with at least 'name' and 'accuracy'; numeric columns become ints/floats.
    """
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            text = [ln for ln in fh.read().splitlines() if ln.strip()]
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not text:
        raise UsageError(f"{path} is empty")
    reader = csv.DictReader(text)
    fields = reader.fieldnames or []
    if "name" not in fields or "accuracy" not in fields:
        raise UsageError(f"{path} is not an accuracy CSV: it needs 'name' and 'accuracy' columns (has {', '.join(fields)})")
    out = []
    for rec in reader:
        row = {}
        for k, v in rec.items():
            if k is None:
                continue
            v = (v or "").strip()
            if k in ("name", "accuracy", "dev"):
                row[k] = v
            else:
                try:
                    row[k] = int(v)
                except ValueError:
                    try:
                        row[k] = float(v)
                    except ValueError:
                        row[k] = v
        out.append(row)
    return out


def csv_to_rows(records: list[dict], settings: dict) -> list[dict]:
    """Harness CSV records -> results.json rows (for `--suite csv`)."""
    from bot.check.settings import Settings, check_id

    s = Settings.from_dict(settings)
    rows = []
    for rec in records:
        status = rec["accuracy"]
        dev = rec.get("dev") or s.device
        s_dev = Settings.from_dict({**settings, "device": dev})
        rows.append({
            "id": check_id(rec["name"], s_dev),
            "model": rec["name"],
            "spec": {"source": "csv", "model": rec["name"]},
            "backend": s.backend, "mode": s.mode, "dtype": s.dtype, "device": dev, "dynamic": s.dynamic,
            "config": dict(s.config),
            "status": status,
            "failure_class": STATUS_CLASS.get(status, "runtime_error" if status not in PASS_STATUSES else None),
            "error": None, "accuracy": None,
            "batch_size": rec.get("batch_size") or None,
            "compile_s": rec.get("compilation_latency") or None,
            "stats": {c: rec[c] for c in STAT_COLUMNS if isinstance(rec.get(c), int)},
            "duration_s": None, "baseline": None, "log": None,
        })
    return rows


# --- baselines -------------------------------------------------------------------------------------


def load_baseline(path: str) -> dict[str, str]:
    """A baseline: an earlier results.json or a harness / expected-accuracy CSV.

    Returns {key: status} where key is a check id (results.json) and a model name (both).
    """
    if not os.path.exists(path):
        raise UsageError(f"cannot read baseline {path}: no such file")
    if path.endswith(".json") or os.path.isdir(path):
        doc = load(path)
        out = {}
        for r in doc["checks"]:
            if not isinstance(r, dict) or "status" not in r:
                raise UsageError(f"baseline {path}: malformed check row")
            out[r.get("id", "")] = r["status"]
            out.setdefault("name:" + str(r.get("model")), r["status"])
        return out
    try:
        records = read_csv(path)
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read baseline {path}: not a text CSV") from exc
    return {"name:" + r["name"]: r["accuracy"] for r in records}


def mark_baseline(row: dict, baseline: dict[str, str] | None) -> None:
    if baseline is None:
        row["baseline"] = None
        return
    before = baseline.get(row.get("id", "")) or baseline.get("name:" + str(row.get("model")))
    failing_now = is_failure(row)
    passed_before = before in PASS_STATUSES
    if failing_now:
        row["baseline"] = "known" if (before is not None and not passed_before) else "new"
    elif before is not None and not passed_before:
        row["baseline"] = "fixed"
    else:
        row["baseline"] = None
    row["baseline_status"] = before
