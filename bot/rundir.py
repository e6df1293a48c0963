"""The run directory's format, and the only module that reads or writes its JSON files.

Layout (docs/run-directory.md)::

    results.json                 one row per check            (schema bot/schemas/results.schema.json)
    results.csv                  the same rows in the benchmark harness's accuracy-CSV format
    checks/<id>.log              each check's output
    failures/<id>/failure.json   one failure record per failing check (bot/schemas/failure.schema.json)
    failures/<id>/repro.py ...   the repro, its inputs, the minifier log
    report.json                  what `report` did               (bot/schemas/report.schema.json)
    known.json                   known bugs' repros handed to minify (bot/schemas/known.schema.json)
    merge.json                   what `merge` combined (merged run directories only)
    summary.md, issues/          the job summary; the local tracker's issues

Two readers:
- trusted (``read_results``, ``read_failure``, ``read_report``, ``read_optional``): this machine's own
  stages read what they wrote: schema id and major version, and the shape the code relies on;
  anything else is a UsageError (exit 2) naming the file;
- untrusted (``load_untrusted``): a run directory that comes back from another job (an artifact
  written by a job that ran model code): only the layout, only regular files with safe names, no
  links, capped sizes, and every JSON document validated against the JSON schemas in bot/schemas/
  plus the limits below. Validation fails closed (no jsonschema package: nothing is read).

The writers (``write_results``, ``write_failure``, ``write_report``, ``write_merge``, ``write_csv``)
replace files atomically, so a reader never sees half a document.

The status words are PyTorch's benchmark harness's (benchmarks/dynamo/common.py) plus ``crash``;
every status any stage writes or imports (``--suite csv``) is in ``STATUSES`` and in
results.schema.json's enum, so `merge` accepts what `check` wrote (tests/test_rundir.py).
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot import safejson
from bot.errors import UsageError
from bot.failure import FailureRecord
from bot.records import FAILURE_SCHEMA, CheckRow, MergeRecord, Record, RecordError, ReportDoc, ResultsDoc

# --------------------------------------------------------------------------- names and ids

RESULTS = "results.json"
RESULTS_CSV = "results.csv"
FAILURE = "failure.json"
REPORT = "report.json"
MERGE = "merge.json"
KNOWN = "known.json"
CHECKS_DIR = "checks"
FAILURES_DIR = "failures"
SUMMARY = "summary.md"                # the report's (or the check's) job summary
ACTION_SUMMARY = "action-summary.md"  # the Action's own summary
ACTION_ERROR = "action-error.txt"     # the Action's traceback when a stage failed inside it
WORK_DIR = "minify-work"              # minify's scratch space, one directory per failure (removed when done)
# failures/<id>/: the repro, its saved inputs, the standalone repro (random inputs), the minifier's log
REPRO = "repro.py"
INPUTS_DIR = "inputs"
STANDALONE = "repro_standalone.py"
PLAIN = "repro_plain.py"              # the plain repro: a function of aten ops, torch.compile, public APIs only
SHORT = "repro_short.py"              # the short repro: the plain one as a person writes it (bot.minify.worker.short)
PLAIN_INPUTS = "plain_inputs.pt"      # its inputs (torch.save of a list) under inputs/, when too large to inline
MINIFIER_LOG = "minifier.log"
TRACE_DIR = "trace"                   # torch's structured trace of the verified repro's traced rerun (TORCH_TRACE)
TLPARSE_REPORT = "tlparse.zip"        # tlparse's HTML report of that trace (zipped: its file names are not safe names)
OUTPUT_CODE = "output_code.py"        # the modules inductor generated in that rerun

RESULTS_SCHEMA = "minify-action/results/v1"
REPORT_SCHEMA = "minify-action/report/v1"
MERGE_SCHEMA = "minify-action/merge/v1"
KNOWN_SCHEMA = "minify-action/known/v1"
SCHEMA_FILES = {"results": "results.schema.json", "failure": "failure.schema.json", "report": "report.schema.json",
                "known": "known.schema.json"}
MAX_KNOWN_BYTES = 8 * 1024 * 1024
SCHEMA_DIR = Path(__file__).parent / "schemas"

# --------------------------------------------------------------------------- status words

PASS_STATUSES = ("pass", "pass_due_to_skip")
# harness status word -> failure class (when nothing more precise is known)
STATUS_CLASS: dict[str, str | None] = {
    "pass": None, "pass_due_to_skip": None,
    "fail_accuracy": "accuracy", "not_bitwise_equivalent": "accuracy",
    "fail_to_run": "runtime_error", "fail_exception": "runtime_error",
    "eager_fail_to_run": "eager_error", "eager_1st_run_fail": "eager_error", "eager_2nd_run_fail": "eager_error",
    "eager_two_runs_differ": "eager_error", "eager_variation": "eager_error", "model_fail_to_load": "eager_error",
    "OOM": "oom", "eager_1st_run_OOM": "oom", "eager_2nd_run_OOM": "oom",
    "timeout": "timeout",
    "infra_error": "setup_error",
    "crash": "crash",  # ours: the check's process died without a result
}
STATUSES = tuple(STATUS_CLASS)
FAILURE_CLASSES = ("accuracy", "compile_error", "runtime_error", "crash", "timeout", "oom", "eager_error",
                   "setup_error")
REPRO_STATUSES = ("minimized", "partial", "not_reproduced", "none")
REPORT_ACTIONS = ("created", "updated", "reopened", "closed", "skipped", "unchanged", "duplicate_closed", "capped")

# --------------------------------------------------------------------------- untrusted limits

MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 512 * 1024 * 1024
MAX_FILES = 20_000
MAX_DEPTH = 6
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")
CHECK_ID = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$"
_REL = {"type": ["string", "null"], "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}$"}
# what an artifact's failure.json must also satisfy (its format is failure.schema.json)
FAILURE_LIMITS = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": CHECK_ID},
        "error": {"type": ["object", "null"],
                  "properties": {"type": {"type": ["string", "null"], "maxLength": 4096},
                                 "message": {"type": ["string", "null"], "maxLength": 65536},
                                 "traceback": {"type": ["string", "null"], "maxLength": 1048576}}},
        "repro": {"type": "object",
                  "properties": {"reason": {"type": ["string", "null"], "maxLength": 65536},
                                 "path": _REL, "standalone_path": _REL}},
    },
}


# --------------------------------------------------------------------------- writing

def ensure_writable(run_dir: str | os.PathLike, flag: str = "--out") -> None:
    """Create the run directory and prove a file can be written in it, before anything runs: an
    unwritable one is an input error (UsageError, exit 2) in one line, never a traceback after the
    work is done."""
    import tempfile

    try:
        os.makedirs(run_dir, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=run_dir, prefix=".writable-"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {os.fspath(run_dir)}: cannot write there: {exc.strerror or exc}") from None


def _atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _dump(doc: dict, indent: int = 1) -> str:
    return json.dumps(doc, indent=indent, default=str, ensure_ascii=False) + "\n"


def write_results(run_dir: str | os.PathLike, doc: ResultsDoc) -> Path:
    path = Path(run_dir) / RESULTS
    _atomic_write(path, _dump({"schema": RESULTS_SCHEMA, **doc.to_json()}))
    return path


def write_failure(failure_dir: str | os.PathLike, rec: FailureRecord) -> Path:
    path = Path(failure_dir) / FAILURE
    _atomic_write(path, _dump({**rec.to_json(), "schema": FAILURE_SCHEMA}))
    return path


def write_report(run_dir: str | os.PathLike, doc: ReportDoc) -> Path:
    path = Path(run_dir) / REPORT
    _atomic_write(path, _dump({"schema": REPORT_SCHEMA, **doc.to_json()}, indent=2))
    return path


def write_merge(run_dir: str | os.PathLike, doc: MergeRecord) -> Path:
    path = Path(run_dir) / MERGE
    _atomic_write(path, _dump({"schema": MERGE_SCHEMA, **doc.to_json()}, indent=2))
    return path


def write_known(run_dir: str | os.PathLike, doc: Record) -> Path:
    """known.json (bot.known.KnownFile): written by the side that holds the tracker, before minify."""
    path = Path(run_dir) / KNOWN
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, _dump({"schema": KNOWN_SCHEMA, **doc.to_json()}))
    return path


# The harness's accuracy CSV columns (benchmarks/dynamo/common.py)
CSV_COLUMNS = ["dev", "name", "batch_size", "accuracy", "calls_captured", "unique_graphs", "graph_breaks",
               "unique_graph_breaks", "autograd_captures", "autograd_compiles", "cudagraph_skips",
               "compilation_latency"]
STAT_COLUMNS = CSV_COLUMNS[4:11]


def write_csv(run_dir: str | os.PathLike, rows: list[CheckRow]) -> Path:
    """results.csv: the rows in the harness's accuracy-CSV format."""
    lines = []
    for r in rows:
        stats = r.stats or {}
        rec = {"dev": r.device if r.device is not None else "cpu", "name": r.model if r.model is not None else r.id,
               "batch_size": r.batch_size or 0, "accuracy": r.status, "compilation_latency": r.compile_s or 0}
        for c in STAT_COLUMNS:
            rec[c] = stats.get(c, 0)
        lines.append(rec)
    path = Path(run_dir) / RESULTS_CSV
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(lines)
    os.replace(tmp, path)
    return path


def concat_csv(out_dir: str | os.PathLike, parts: list[Path]) -> bool:
    """Write results.csv as the concatenation of shard CSVs with one header; False (nothing written)
    when a part is missing or the headers differ (never write a wrong CSV)."""
    header = None
    lines: list[str] = []
    for p in parts:
        text = Path(p).read_text(encoding="utf-8", errors="replace").splitlines()
        if not text:
            continue
        if header is None:
            header = text[0]
        elif text[0] != header:
            return False
        lines.extend(text[1:])
    if header is None:
        return False
    _atomic_write(Path(out_dir) / RESULTS_CSV, "\n".join([header, *lines]) + "\n")
    return True


# --------------------------------------------------------------------------- trusted reading

def _parse(path: Path) -> Any:
    try:
        return safejson.loads(path.read_bytes())  # bounded: nesting and number bombs are bad input
    except FileNotFoundError:
        raise UsageError(f"{path}: not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: unreadable ({exc})") from None
    except ValueError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None


def check_schema_id(doc: Any, expected: str, where: str) -> None:
    """The document's "schema" must be ``expected``'s kind with the same major version."""
    kind, major = expected.rsplit("/v", 1)
    schema = doc.get("schema") if isinstance(doc, dict) else None
    m = re.fullmatch(r"(minify-action/[a-z_-]+)/v(\d+)", str(schema))
    if not isinstance(doc, dict):
        raise UsageError(f"{where}: expected a JSON object")
    if not m or m.group(1) != kind:
        raise UsageError(f"{where}: not a minify-action {kind.rsplit('/', 1)[1]} file (schema {schema!r})")
    if int(m.group(2)) != int(major):
        hint = "; upgrade minify-bot" if int(m.group(2)) > int(major) else ""
        raise UsageError(f"{where}: schema {schema} is not supported by this version (expects {expected}){hint}")


def _need(cond: bool, where: Path, what: str) -> None:
    if not cond:
        raise UsageError(f"{where}: {what}")


def results_path(run_dir: str | os.PathLike) -> Path:
    p = Path(run_dir)
    return p / RESULTS if p.is_dir() or not p.suffix else p


def failure_dir(run_dir: str | os.PathLike, check_id: str) -> Path:
    return Path(run_dir) / FAILURES_DIR / check_id


def minify_log(run_dir: str | os.PathLike, check_id: str) -> Path:
    """The output of a failure's own minify process (several minified at once, bot.minify.parallel):
    beside the check's log, since the failure's directory is written anew by that process."""
    return Path(run_dir) / CHECKS_DIR / f"{check_id}.minify.log"


def read_results(run_dir: str | os.PathLike) -> ResultsDoc:
    """results.json of a run directory (or the file itself); UsageError (exit 2) when it is not one
    this version understands or its rows lack what every stage relies on."""
    path = results_path(run_dir)
    doc = _parse(path)
    check_schema_id(doc, RESULTS_SCHEMA, str(path))
    checks = doc.get("checks")
    _need(isinstance(checks, list), path, "'checks' must be a list")
    _need(isinstance(doc.get("settings") or {}, dict), path, "'settings' must be an object")
    _need(isinstance(doc.get("versions") or {}, dict), path, "'versions' must be an object")
    for i, raw in enumerate(checks):  # the document's JSON, before it is read as rows
        _need(isinstance(raw, dict) and isinstance(raw.get("id"), str) and raw["id"], path,
              f"checks[{i}] needs a string 'id'")
        _need(isinstance(raw.get("status"), str), path, f"checks[{i}] needs a string 'status'")
    return _results_doc(doc, str(path))


def _results_doc(doc: dict, where: str) -> ResultsDoc:
    """A results document's JSON (its schema checked) as the typed record; UsageError (exit 2)
    naming the row, or the part, that is not what it should be."""
    rows = []
    for i, raw in enumerate(doc.get("checks") or []):
        try:
            rows.append(CheckRow.from_json(raw))
        except RecordError as exc:
            raise UsageError(f"{where}: checks[{i}] is not a check row ({exc})") from None
    try:
        return ResultsDoc.from_json({**doc, "checks": rows, "settings": doc.get("settings") or {},
                                     "versions": doc.get("versions") or {}})
    except RecordError as exc:
        raise UsageError(f"{where}: not a results document ({exc})") from None


def read_failure(run_dir: str | os.PathLike, check_id: str) -> FailureRecord | None:
    """failures/<id>/failure.json, or None when minify wrote none for this check; UsageError (exit
    2) when it is not a failure record."""
    path = failure_dir(run_dir, check_id) / FAILURE
    if not path.exists():
        return None
    doc = _parse(path)
    check_schema_id(doc, FAILURE_SCHEMA, str(path))
    _need(doc.get("id") in (None, check_id), path, "'id' does not match its directory")
    repro = doc.get("repro")
    _need(isinstance(repro or {}, dict), path, "'repro' must be an object")
    graph = (repro or {}).get("graph")
    _need(graph is None or (isinstance(graph, list) and all(isinstance(n, dict) for n in graph)),
          path, "'repro.graph' must be a list of objects")
    try:
        return FailureRecord.from_json(doc)
    except RecordError as exc:
        raise UsageError(f"{path}: not a failure record ({exc})") from None


def read_report(run_dir: str | os.PathLike) -> ReportDoc | None:
    """report.json, or None when no report ran; UsageError (exit 2) when it is not one."""
    path = Path(run_dir) / REPORT
    if not path.exists():
        return None
    doc = _parse(path)
    check_schema_id(doc, REPORT_SCHEMA, str(path))
    try:
        return ReportDoc.from_json(doc)
    except RecordError as exc:
        raise UsageError(f"{path}: not a report ({exc})") from None


def read_optional(path: str | os.PathLike) -> ResultsDoc | ReportDoc | None:
    """results.json or report.json by path, for callers that go on without it (the action's
    summary): None when it is missing or not a document of its kind."""
    path = Path(path)
    readers = {RESULTS: lambda: read_results(path), REPORT: lambda: read_report(path.parent)}
    reader = readers.get(path.name)
    if reader is None:
        raise ValueError(f"{path.name} is not a run-directory JSON file")
    try:
        return reader() if path.exists() else None
    except UsageError:
        return None


def read_known(run_dir: str | os.PathLike) -> dict | None:
    """known.json, read the untrusted way (the minify process runs model code and reads it from a
    directory that process can write): a regular file under a size cap, bounded JSON, validated
    against known.schema.json. None when it is missing or not valid (minify then reuses nothing)."""
    path = Path(run_dir) / KNOWN
    if not path.exists():
        return None
    try:
        if path.lstat().st_size > MAX_KNOWN_BYTES:
            raise UsageError(f"{path}: over the {MAX_KNOWN_BYTES}-byte cap")
        doc = read_capped(path, str(path))
        check_schema_id(doc, KNOWN_SCHEMA, str(path))
        validate(doc, "known", str(path))
    except (UsageError, OSError) as exc:
        print(f"warning: {KNOWN} ignored (every failure is minified): {exc}", flush=True)
        return None
    return doc


def has_failures(run_dir: str | os.PathLike) -> bool:
    try:
        return any(row.failure_class for row in read_results(run_dir).checks)
    except UsageError:
        return False


# --------------------------------------------------------------------------- the accuracy CSV

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
        raise UsageError(f"{path} is not an accuracy CSV: it needs 'name' and 'accuracy' columns "
                         f"(has {', '.join(fields)})")
    out = []
    for line in reader:
        rec = {}
        for k, v in line.items():
            if k is None:
                continue
            v = (v or "").strip()
            if k in ("name", "accuracy", "dev"):
                rec[k] = v
            else:
                try:
                    rec[k] = int(v)
                except ValueError:
                    try:
                        rec[k] = float(v)
                    except ValueError:
                        rec[k] = v
        out.append(rec)
    return out


# --------------------------------------------------------------------------- untrusted reading

def load_schema(kind: str) -> dict:
    return json.loads((SCHEMA_DIR / SCHEMA_FILES[kind]).read_text(encoding="utf-8"))


def validate(doc: object, kind: str, what: str, *extra: dict) -> None:
    """Validate against bot/schemas/<kind>.schema.json (and any extra limits); UsageError on the
    first error. Fails closed without the jsonschema package."""
    try:
        import jsonschema
    except ImportError:
        raise UsageError("cannot validate artifacts: the jsonschema package is not installed") from None
    for schema in (load_schema(kind), *extra):
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        errors = sorted(cls(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
        if errors:
            err = errors[0]
            where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
            raise UsageError(f"{what}: invalid at {where}: {err.message[:300]}")


def read_capped(path: Path, what: str) -> object:
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{what}: not a regular file")
    if st.st_size > MAX_JSON_BYTES:
        raise UsageError(f"{what}: {st.st_size} bytes is over the {MAX_JSON_BYTES}-byte cap")
    try:
        return safejson.loads(path.read_bytes())  # bounded: nesting and number bombs are bad input
    except ValueError as exc:
        raise UsageError(f"{what}: not valid JSON ({exc})") from None


@dataclass
class RunDir:
    """A validated run directory: the results document and the files allowed to be copied."""

    root: Path
    results: ResultsDoc                              # read once its schema passed
    failures: dict[str, FailureRecord] = field(default_factory=dict)   # validated, by check id
    files: list[str] = field(default_factory=list)  # relative paths, validated
    ignored: list[str] = field(default_factory=list)
    total_bytes: int = 0

    @property
    def rows(self) -> list[CheckRow]:
        return self.results.checks


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


# the run directory's files by where they may be (docs/run-directory.md): what an upload carries
TOP_FILES = (RESULTS, RESULTS_CSV, REPORT, SUMMARY, ACTION_SUMMARY, ACTION_ERROR, MERGE, KNOWN)


def in_layout(rel: str) -> bool:
    """Whether the relative path ``rel`` is a file of the documented layout: a top-level document, a
    check's log, or a file inside a failure's directory (its repro, inputs, logs, trace)."""
    parts = rel.split("/")
    if any(not SAFE_NAME.fullmatch(p) for p in parts) or len(parts) > MAX_DEPTH:
        return False
    if len(parts) == 1:
        return parts[0] in TOP_FILES
    if parts[0] == CHECKS_DIR:
        return len(parts) == 2 and parts[1].endswith(".log")
    return parts[0] == FAILURES_DIR and len(parts) >= 3


def load_untrusted(root: str | os.PathLike, *, max_total: int = MAX_TOTAL_BYTES, max_files: int = MAX_FILES) -> RunDir:
    """Validate a run directory that came from another job. Raises UsageError (exit 2) on anything
    off-contract; reads nothing but the run-directory layout."""
    root = Path(root)
    if root.is_symlink() or not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    files, total = _walk(root, max_files, max_total)
    if RESULTS not in files:
        raise UsageError(f"{root}: no {RESULTS}")
    what = f"{root.name}/{RESULTS}"
    raw = read_capped(root / RESULTS, what)
    check_schema_id(raw, RESULTS_SCHEMA, what)
    validate(raw, "results", what)
    results = _results_doc(raw, what)   # only once the schema passed
    ids = [row.id for row in results.checks]
    if len(ids) != len(set(ids)):
        dup = sorted({i for i in ids if ids.count(i) > 1})[0]
        raise UsageError(f"{what}: check id {dup!r} appears twice")
    failing = {row.id for row in results.checks if row.failure_class}
    run = RunDir(root=root, results=results, total_bytes=total)
    for rel in files:
        parts = rel.split("/")
        if rel in (RESULTS, RESULTS_CSV):
            run.files.append(rel)
        elif parts[0] == CHECKS_DIR and len(parts) == 2 and rel.endswith(".log") and parts[1][:-4] in ids:
            run.files.append(rel)
        elif parts[0] == FAILURES_DIR and len(parts) >= 3 and parts[1] in failing:
            run.files.append(rel)
        else:
            run.ignored.append(rel)
    for fid in sorted({rel.split("/")[1] for rel in run.files if rel.startswith(FAILURES_DIR + "/")}):
        what = f"{root.name}/{FAILURES_DIR}/{fid}/{FAILURE}"
        fpath = root / FAILURES_DIR / fid / FAILURE
        if not fpath.exists():
            raise UsageError(f"{what}: missing")
        doc = read_capped(fpath, what)
        check_schema_id(doc, FAILURE_SCHEMA, what)
        validate(doc, "failure", what, FAILURE_LIMITS)
        if doc["id"] != fid:
            raise UsageError(f"{what}: id {doc['id']!r} does not match its directory")
        for key in ("path", "standalone_path"):
            ref = doc["repro"].get(key)
            if ref and (".." in ref.split("/") or f"{FAILURES_DIR}/{fid}/{ref}" not in run.files):
                raise UsageError(f"{what}: repro.{key} {ref!r} is not a file of this failure")
        run.failures[fid] = FailureRecord.from_json(doc)
    return run
