"""Run directories that come back from another job are untrusted input.

A GPU job runs pull-request code; whatever it uploads (results.json, failure.json, repro files,
logs) may have been written by that code. Before the report job (which holds a write token) reads
any of it, `load_run_dir` checks it: only the run-directory layout, only regular files with safe
names, no links, capped sizes, JSON validated against strict schemas (the project's own schemas in
bot/schemas/ as well, when present).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import UsageError

RESULTS_KIND = "minify-action/results/v1"
FAILURE_KIND = "minify-action/failure/v1"

MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 512 * 1024 * 1024
MAX_FILES = 20_000
MAX_CHECKS = 20_000
MAX_DEPTH = 6

SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")
CHECK_ID = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$"

STATUSES = [
    "pass", "pass_due_to_skip", "fail_accuracy", "fail_to_run", "eager_fail_to_run",
    "eager_1st_run_fail", "eager_2nd_run_fail", "eager_two_runs_differ", "model_fail_to_load",
    "timeout", "OOM", "eager_1st_run_OOM", "eager_2nd_run_OOM", "crash",
]
FAILURE_CLASSES = ["accuracy", "compile_error", "runtime_error", "crash", "timeout", "oom", "eager_error",
                   "setup_error"]

_STR = {"type": "string", "maxLength": 4096}
_NSTR = {"type": ["string", "null"], "maxLength": 4096}
_ERROR = {
    "type": ["object", "null"],
    "properties": {"type": _NSTR, "message": {"type": ["string", "null"], "maxLength": 65536},
                   "traceback": {"type": ["string", "null"], "maxLength": 1048576}},
}
_CONFIG = {"type": "object", "maxProperties": 200,
           "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_.]{0,199}$"}}

CHECK_ROW_SCHEMA = {
    "type": "object",
    "required": ["id", "model", "backend", "mode", "dtype", "device", "status", "failure_class"],
    "properties": {
        "id": {"type": "string", "pattern": CHECK_ID},
        "model": {"type": "string", "maxLength": 200},
        "spec": {"type": ["object", "null"]},
        "backend": {"type": "string", "maxLength": 200},
        "mode": {"enum": ["inference", "training"]},
        "dtype": {"enum": ["float32", "float16", "bfloat16", "amp"]},
        "device": {"type": "string", "maxLength": 50},
        "dynamic": {"type": "boolean"},
        "config": _CONFIG,
        "status": {"enum": STATUSES},
        "failure_class": {"enum": FAILURE_CLASSES + [None]},
        "error": _ERROR,
        "accuracy": {"type": ["object", "null"]},
        "batch_size": {"type": ["integer", "null"]},
        "duration_s": {"type": ["number", "null"]},
        "baseline": {"enum": ["new", "known", "fixed", None]},
        "log": {"type": ["string", "null"], "pattern": r"^checks/[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}\.log$"},
    },
}

RESULTS_SCHEMA = {
    "type": "object",
    "required": ["schema", "settings", "checks"],
    "properties": {
        "schema": {"const": RESULTS_KIND},
        "tool_version": _NSTR,
        "started": _NSTR,
        "finished": _NSTR,
        "complete": {"type": "boolean"},
        "settings": {
            "type": "object",
            "properties": {
                "source": _NSTR, "backend": _NSTR, "mode": _NSTR, "dtype": _NSTR, "device": _NSTR,
                "dynamic": {"type": "boolean"}, "config": _CONFIG,
                "timeout": {"type": ["number", "null"]},
                "shard": {"type": ["string", "null"], "pattern": r"^\d{1,4}/\d{1,4}$"},
                "baseline": _NSTR,
            },
        },
        "versions": {"type": ["object", "null"]},
        "checks": {"type": "array", "maxItems": MAX_CHECKS, "items": CHECK_ROW_SCHEMA},
    },
}

FAILURE_SCHEMA = {
    "type": "object",
    "required": ["schema", "id", "class", "repro"],
    "properties": {
        "schema": {"const": FAILURE_KIND},
        "id": {"type": "string", "pattern": CHECK_ID},
        "check": {"type": ["object", "null"]},
        "class": {"enum": FAILURE_CLASSES},
        "stage": _NSTR,
        "error": _ERROR,
        "repro": {
            "type": "object",
            "required": ["status"],
            "properties": {
                "status": {"enum": ["minimized", "partial", "not_reproduced", "none"]},
                "reason": {"type": ["string", "null"], "maxLength": 65536},
                "path": {"type": ["string", "null"], "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}$"},
                "standalone_path": {"type": ["string", "null"], "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}$"},
            },
        },
        "flaky": {"type": ["boolean", "null"]},
    },
}


def _kind_and_major(doc: object) -> tuple[str, int] | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
        return None
    m = re.fullmatch(r"(minify-action/[a-z-]+)/v(\d+)", doc["schema"])
    return (m.group(1), int(m.group(2))) if m else None


def _validate(doc: object, schema: dict, what: str, project_schema: str | None = None) -> None:
    try:
        import jsonschema
    except ImportError:  # fail closed: never read an unvalidated artifact
        raise UsageError("cannot validate artifacts: the jsonschema package is not installed") from None
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
    if not errors and project_schema:
        path = Path(__file__).parent / "schemas" / project_schema
        if path.is_file():
            own = json.loads(path.read_text(encoding="utf-8"))
            errors = list(jsonschema.validators.validator_for(own)(own).iter_errors(doc))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        raise UsageError(f"{what}: invalid at {where}: {err.message[:300]}")


def read_json(path: Path, what: str) -> object:
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{what}: not a regular file")
    if st.st_size > MAX_JSON_BYTES:
        raise UsageError(f"{what}: {st.st_size} bytes is over the {MAX_JSON_BYTES}-byte cap")
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{what}: not valid JSON ({exc})") from None


def _check_kind(doc: object, kind: str, what: str) -> None:
    km = _kind_and_major(doc)
    if km is None or km[0] != kind.rsplit("/", 1)[0]:
        raise UsageError(f"{what}: not a {kind} document")
    if km[1] != int(kind.rsplit("/v", 1)[1]):
        raise UsageError(f"{what}: schema {doc['schema']} is not supported by this version (expects {kind})")


@dataclass
class RunDir:
    """A validated run directory: the results document and the files allowed to be copied."""

    root: Path
    results: dict
    failures: dict[str, dict] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # relative paths, validated
    ignored: list[str] = field(default_factory=list)
    total_bytes: int = 0


def _walk(root: Path, max_files: int, max_total: int) -> tuple[list[str], int]:
    files: list[str] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root)
        if len(rel_dir.parts) > MAX_DEPTH:
            raise UsageError(f"{root.name}: directories nested deeper than {MAX_DEPTH} levels")
        for name in dirnames + filenames:
            rel = rel_dir / name
            if not SAFE_NAME.fullmatch(name):
                raise UsageError(f"{root.name}: unsafe file name {str(rel)[:200]!r}")
            st = (root / rel).lstat()
            if stat.S_ISLNK(st.st_mode):
                raise UsageError(f"{root.name}: {rel} is a symbolic link; artifacts may not contain links")
            if name in filenames:
                if not stat.S_ISREG(st.st_mode):
                    raise UsageError(f"{root.name}: {rel} is not a regular file")
                if st.st_size > MAX_FILE_BYTES:
                    raise UsageError(f"{root.name}: {rel} is {st.st_size} bytes, over the {MAX_FILE_BYTES}-byte cap")
                total += st.st_size
                files.append(rel.as_posix())
                if len(files) > max_files:
                    raise UsageError(f"{root.name}: more than {max_files} files")
                if total > max_total:
                    raise UsageError(f"{root.name}: more than {max_total} bytes in total")
    return sorted(files), total


def load_run_dir(root: Path, *, max_total: int = MAX_TOTAL_BYTES, max_files: int = MAX_FILES) -> RunDir:
    """Validate an untrusted run directory. Raises UsageError (exit 2) on anything off-contract."""
    root = Path(root)
    if root.is_symlink() or not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    files, total = _walk(root, max_files, max_total)
    if "results.json" not in files:
        raise UsageError(f"{root}: no results.json")
    results = read_json(root / "results.json", f"{root.name}/results.json")
    _check_kind(results, RESULTS_KIND, f"{root.name}/results.json")
    _validate(results, RESULTS_SCHEMA, f"{root.name}/results.json", "results.schema.json")
    rows = results["checks"]
    ids = [row["id"] for row in rows]
    dup = {i for i in ids if ids.count(i) > 1} if len(ids) != len(set(ids)) else set()
    if dup:
        raise UsageError(f"{root.name}/results.json: check id {sorted(dup)[0]!r} appears twice")
    failing = {row["id"] for row in rows if row.get("failure_class")}
    run = RunDir(root=root, results=results, total_bytes=total)
    for rel in files:
        parts = rel.split("/")
        if rel in ("results.json", "results.csv"):
            run.files.append(rel)
        elif parts[0] == "checks" and len(parts) == 2 and rel.endswith(".log") and parts[1][:-4] in ids:
            run.files.append(rel)
        elif parts[0] == "failures" and len(parts) >= 3 and parts[1] in failing:
            run.files.append(rel)
        else:
            run.ignored.append(rel)
    for fid in sorted({rel.split("/")[1] for rel in run.files if rel.startswith("failures/")}):
        what = f"{root.name}/failures/{fid}/failure.json"
        fpath = root / "failures" / fid / "failure.json"
        if not fpath.exists():
            raise UsageError(f"{what}: missing")
        doc = read_json(fpath, what)
        _check_kind(doc, FAILURE_KIND, what)
        _validate(doc, FAILURE_SCHEMA, what, "failure.schema.json")
        if doc["id"] != fid:
            raise UsageError(f"{what}: id {doc['id']!r} does not match its directory")
        for key in ("path", "standalone_path"):
            ref = doc["repro"].get(key)
            if ref and (".." in ref.split("/") or f"failures/{fid}/{ref}" not in run.files):
                raise UsageError(f"{what}: repro.{key} {ref!r} is not a file of this failure")
        run.failures[fid] = doc
    return run
