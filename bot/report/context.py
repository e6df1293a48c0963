"""The template context of an issue body (templates/issue_body.md.j2): what one bug's failures and
its issue state show, built only from fields that pass strict patterns where a reader may copy them."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from bot import rundir, slash
from bot import signature as sg
from bot.errors import UsageError
from bot.failure import FailureRecord
from bot.options import ReportOptions
from bot.records import (
    BuildBoundary,
    BuildsFound,
    Capture,
    CheckError,
    CheckRow,
    ConfigDiff,
    Culprit,
    HarnessFacts,
    PlainRepro,
    Readout,
    Repro,
    Spec,
)
from bot.report.load import Failure
from bot.report.state import IssueState, repro_rank
from bot.slash import safe

INLINE_REPRO_LIMIT = 50000   # characters of repro inlined; the rest of a body takes some 10,000 of GitHub's 65,536
CLASS_WORDS = {
    "accuracy": "accuracy failure", "compile_error": "compile error", "runtime_error": "runtime error",
    "crash": "crash", "timeout": "timeout", "oom": "out of memory", "eager_error": "eager failure",
    "setup_error": "setup failure",
}



# Every artifact field that reaches a title, a label or a line of the body outside the escaping
# filters passes one of these allowlists first (an artifact may come from a pull request's job).
_OP = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,119}")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,59}")
_STAGE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,59}(?::[A-Za-z_][A-Za-z0-9_]{0,59})?")
_EXC = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,119}")
DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu", "meta")
GRAPH_ROLES = ("forward", "backward", "inference")
CULPRIT_METHODS = ("compiled-alone", "graph")
TITLE_OPS = 3
_KERNEL = re.compile(r"\b(?:cpp|triton_[a-z]+|cuda)_fused_([a-z0-9_]{1,200}?)_\d+\b")
_OVERLOADS = ("default", "Tensor", "Scalar", "int", "out", "self", "dim", "float")


def _op_names(values) -> list[str]:
    """Op names (no argument lists) that pass the allowlist, in order, once each."""
    out = []
    for v in values if isinstance(values, list) else []:
        name = v.split("(", 1)[0] if isinstance(v, str) else None
        if safe(name, _OP, None) and name not in out:
            out.append(name)
    return out


def _short(op: str) -> str:
    """aten.relu.default -> relu; aten.relu -> relu"""
    parts = op.split(".")
    if len(parts) >= 3 and parts[0] in ("aten", "prims", "quantized"):
        return parts[1]
    if len(parts) >= 2 and parts[-1] in _OVERLOADS:
        return parts[-2]
    return parts[-1]


def title_ops(parts: dict, failure: FailureRecord | None) -> tuple[list[str], int]:
    """At most TITLE_OPS op names for the title, chosen by what is known, and how many more the body
    names: first the bisector's lowering (an op of the culprit or graph whose name it gives), then
    the op(s) the culprit proved (compiled alone), then the op of the crashing kernel (inductor's
    fused kernel name in the error), then the rest of the culprit or the minimized graph's ops less
    data movement. Ops come only from a verified record; names only through the allowlist."""
    culprit = (failure.culprit if failure else None) or Culprit([])
    ops = _op_names(parts.get("ops")) or _op_names(culprit.ops)
    graph = (failure.repro.graph if failure else None) or []
    graph_ops = [o for o in _op_names([n.op for n in graph]) if o not in sg.PLUMBING_OPS]
    pool = ops or graph_ops
    if not pool:
        return [], 0
    chosen: list[str] = []

    def take(cands):
        chosen.extend(o for o in cands if o not in chosen)

    words = parts.get("bisect") or culprit.bisect
    if isinstance(words, str) and words.startswith("lowering"):
        names = set(re.findall(r"[a-z_][a-z0-9_]*", words.split(":", 1)[-1].lower()))
        take([o for o in pool if _short(o).lower() in names])
    if culprit.method == "compiled-alone":
        take(ops)
    error = (failure.error if failure else None) or CheckError()
    text = " ".join(str(v or "")[:20000] for v in (error.message, error.traceback))
    for m in _KERNEL.finditer(text):
        fused = "_" + m.group(1) + "_"
        take([o for o in pool if f"_{_short(o).lower()}_" in fused])
    take(pool)
    return chosen[:TITLE_OPS], max(0, len(chosen) - TITLE_OPS)


def title_dtype(parts: dict, failure: FailureRecord | None) -> str | None:
    """The dtype the title names: the one dtype every tensor the verified repro's ops read has (a
    bug of uint8 ops in a float32 model is a uint8 bug: "torch.any on uint8"), else the check's."""
    graph = (failure.repro.graph if failure else None) or []
    dtypes = {d for n in graph if n.op not in sg.PLUMBING_OPS for d in (n.dtypes or []) if isinstance(d, str)}
    return next(iter(dtypes)) if len(dtypes) == 1 else parts.get("dtype")


def _ops_summary(parts: dict, failure: FailureRecord | None = None) -> str | None:
    """The ops named in the title (``title_ops``), with how many more the body lists."""
    names, more = title_ops(parts, failure)
    if not names:
        return None
    return ", ".join(names) + (f" (+{more} more ops)" if more else "")


_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]{1,400}")
_BACKEND, _DEVICE = slash.BACKEND_RE, slash.DEVICE_RE


def _capture_note(capture: Capture | None) -> str | None:
    """How the failing graph was captured, when it was not the ordinary way (rendered escaped)."""
    note = capture.note if capture else None
    return note.strip().rstrip(".")[:500] if isinstance(note, str) and note.strip() else None


def _bisect_words(failure: FailureRecord | None) -> str | None:
    """The bisector's one-line answer: from the culprit record, else from the raw bisect result."""
    if failure is None:
        return None
    c = failure.culprit
    if c is not None and isinstance(c.bisect, str) and c.bisect:
        return c.bisect[:500]
    return sg.bisect_words(failure.bisect)


def _source_part(check: CheckRow, spec: Spec, models: list[str], trusted_commands):
    """The check's source's part of the command (an unknown or missing source: the models only)."""
    from bot.suites import source_of
    from bot.suites.source import Reproduce

    try:
        return source_of(spec).reproduce(check, spec, models, trusted_commands)
    except UsageError:
        return Reproduce(args=list(models))


def reproduce_command(check: CheckRow, has_repro: bool, trusted_commands=(), repro_file: str = rundir.REPRO) -> str:
    """`minify-bot check ...` for the issue's "Reproduce locally", built only from fields that pass
    strict patterns. A run directory may come from a pull request's job: its strings (above all a
    command suite's `spec.command`) are never offered as something to copy and paste, unless the
    command is one this report was configured with (``trusted_commands``). ``repro_file``: the repro
    the issue shows (a file name of the failure's directory that passed a strict pattern)."""
    from bot import slash

    lines = []
    if has_repro:
        lines.append(f"python {repro_file}    # from the failure's directory in the artifacts")
    cmd = ["minify-bot", "check"]
    notes = []
    spec = check.spec if isinstance(check.spec, Spec) else Spec()
    model = check.model
    model_ok = isinstance(model, str) and slash.MODEL_RE.fullmatch(model) is not None
    models = ["--models", model] if model_ok else []
    if not model_ok:
        notes.append("# the model name is in results.json")
    part = _source_part(check, spec, models, trusted_commands)
    lines += part.lines
    cmd += part.args
    notes += part.notes
    for k, ok in (("backend", lambda v: _BACKEND.fullmatch(v)), ("mode", lambda v: v in slash.MODES),
                  ("dtype", lambda v: v in slash.DTYPES), ("device", lambda v: _DEVICE.fullmatch(v))):
        v = getattr(check, k)
        if isinstance(v, str) and v and ok(v):
            cmd += [f"--{k}", v]
    config = check.config if isinstance(check.config, dict) else {}
    for k, v in sorted(config.items(), key=lambda kv: str(kv[0])):
        v = str(v).lower() if isinstance(v, bool) else v
        if (isinstance(k, str) and slash.CONFIG_KEY_RE.fullmatch(k)
                and isinstance(v, (str, int, float)) and slash.CONFIG_VALUE_RE.fullmatch(str(v))):
            cmd += ["--config", f"{k}={v}"]
        else:
            notes.append("# some config overrides are only in results.json")
    if check.dynamic is True:
        cmd.append("--dynamic")
    lines.append(" ".join(shlex.quote(c) for c in cmd))
    from bot.public import public_text

    lines = [line for line in lines if public_text(line).strip() != "cd ."]   # the workspace itself: no cd
    return "\n".join(lines + list(dict.fromkeys(notes)))


_REVISION = slash.REVISION_RE
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,39}")


def _harness_versions(check: CheckRow) -> list[tuple[str, str]]:
    """Versions-table rows for a harness check: the checkout's revision, the model libraries, the CPU
    vector ISA inductor picked (each validated: artifact text)."""
    harness = check.harness if isinstance(check.harness, HarnessFacts) else HarnessFacts()
    rows = []
    rev = safe(harness.revision, _REVISION, None)
    if rev:
        rows.append(("harness revision", rev))
    for key, v in (("transformers", harness.transformers), ("timm", harness.timm), ("torchbench", harness.torchbench)):
        v = safe(v, _VERSION, None)
        if v:
            rows.append((key, v))
    isa = safe(harness.cpu_isa, _WORD, None)
    if isa:
        rows.append(("cpu vector ISA", isa))
    return rows


def issue_context(group: list[Failure], state: IssueState, opts: ReportOptions, run_dir: Path) -> dict:
    rep = min(group, key=lambda f: repro_rank(f.failure))
    f, check = rep.failure, rep.check
    parts = rep.fingerprint.parts
    repro = f.repro if f else Repro(status=None, queries=None)
    error = (f.error if f else None) or check.error
    err_ctx = _error_context(error) if error is not None and error.to_json() else None
    accuracy = (f.accuracy if f else None) or check.accuracy
    accuracy = accuracy.to_json() if accuracy else None
    rel_dir = f"failures/{check.id}"
    ver = repro.verification
    repro_ctx = _repro_context(rep, repro, rel_dir)
    versions = f.versions if f else {}
    versions_table = [(k, v if not isinstance(v, (list, dict)) else json.dumps(v)) for k, v in versions.items()
                      if v not in (None, "", [])] + _harness_versions(check)
    cfg = f.config if f else ConfigDiff()
    affected = [a.to_json() for a in sorted(state.affected, key=lambda a: (a.model, a.backend, a.mode))]
    capture = repro.capture or Capture()
    readout_ctx = _readout(f.readout if f else None)
    cls = parts.get("class") if parts.get("class") in CLASS_WORDS else "failure"
    return {
        "sig": state.sig, "parts": parts, "summary": _summary(parts, check, accuracy, err_ctx, group, readout_ctx),
        "class": cls, "class_words": CLASS_WORDS.get(cls, "failure"),
        "stage": safe(parts.get("stage"), _STAGE, "unlocalized"),
        "dtype": safe(title_dtype(parts, f if f and f.repro_verified else None), _WORD, "unknown"),
        "device": parts.get("device") if parts.get("device") in DEVICES else "unknown",
        "status": check.status, "ops_summary": _ops_summary(parts, f if f and f.repro_verified else None),
        "flaky": state.flaky,
        "culprit": _culprit(f.culprit if f else None), "bisect_words": _bisect_words(f),
        "readout": readout_ctx,
        "graph_role": capture.role if capture.role in GRAPH_ROLES else None,
        "regression": state.regression, "error": err_ctx, "accuracy": accuracy,
        "repro": repro_ctx,
        "ablation": [a.to_json() for a in (f.ablation if f else None) or []],
        "config_minimal": [d.to_json() for d in cfg.minimal or []], "config_diff": [d.to_json() for d in cfg.diff],
        "versions": versions,
        "versions_table": versions_table, "collect_env": f.collect_env if f else None,
        "verification": ver.to_json() if ver else None, "affected": affected, "affected_omitted": 0,
        "first_seen": state.first_seen, "last_seen": state.last_seen, "occurrences": state.occurrences,
        "torch_versions": state.torch or ["unknown"], "artifact_url": opts.artifact_url, "run_url": opts.run_url,
        "builds": builds_context(state, f),
        "failure_dir": rel_dir,
        "generated_code": generated_code_context(rep, rel_dir),
        "reproduce_command": reproduce_command(check, bool(rep.repro_text), opts.trusted_commands,
                                               repro_ctx["file"] if repro_ctx["kind"] in ("plain", "short")
                                               else rundir.REPRO),
        "log_excerpt": None, "overflow": [],
    }


_SHA256 = re.compile(r"[0-9a-f]{64}")
_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")   # a file of the failure's own directory
MAX_PLAIN_CHARS = 1_000_000   # a plain repro is read only up to this size (an artifact's file)


def _repro_context(rep: Failure, repro: Repro, rel_dir: str) -> dict:
    """The "Minimized repro" section: which repro the issue inlines and what the text says about the
    other. The plain repro (repro_plain.py: public APIs only, inputs inline when small) when it
    failed the same way in its fresh runs and fits; else torch's launcher-format repro.py."""
    ver, capture = repro.verification, repro.capture or Capture()
    plain = repro.plain if repro.plain is not None and rep.failure is not None else PlainRepro()
    plain_path = safe(plain.path, _FILE, None)
    plain_text = _plain_text(rep, plain_path) if plain.reproduces and plain_path else None
    short_path = safe(plain.short_path, _FILE, None) if plain.short_reproduces and plain_text else None
    short_text = _plain_text(rep, short_path) if short_path else None
    if short_text is not None and len(short_text) <= INLINE_REPRO_LIMIT:   # the short form, as a person writes it
        plain_text, plain_path, short = short_text, short_path, True
    else:
        short = False
    launcher = rep.repro_text if rep.repro_text and len(rep.repro_text) <= INLINE_REPRO_LIMIT else None
    use_plain = plain_text is not None and len(plain_text) <= INLINE_REPRO_LIMIT
    shown = plain_text if use_plain else rep.repro_text
    name = plain_path if use_plain else repro.path or rundir.REPRO
    inputs_file = safe((plain.inputs_file or "").rsplit("/", 1)[-1], _FILE, None)   # inputs/<its file name>
    return {"status": repro.status, "reason": repro.reason,
            "status_words": {"minimized": "Minimized and verified", "partial": "Partially minimized"}.get(
                repro.status, "Captured"),
            "kind": ("short" if short else "plain") if use_plain else "launcher" if launcher else None,
            "short_runs": f"{plain.short_failed_same_way} of {plain.short_runs}" if short else None,
            "long_path": f"{rel_dir}/{safe(plain.path, _FILE, rundir.PLAIN)}" if short else None,
            "inline": plain_text if use_plain else launcher, "too_big": bool(shown) and not (use_plain or launcher),
            "size": len(shown or ""), "file": name.rsplit("/", 1)[-1], "artifact_path": f"{rel_dir}/{name}",
            "launcher_path": f"{rel_dir}/{repro.path or rundir.REPRO}",
            "plain_path": f"{rel_dir}/{plain_path}" if plain_path else None,
            "plain_runs": f"{plain.failed_same_way} of {plain.runs}" if plain.runs else None,
            "plain_reason": (plain.reason or "")[:500] or None,
            "plain_too_big": plain_text is not None and not use_plain,
            "needs_inputs": False if short else (not plain.inputs_inline) if use_plain
            else bool(repro.inputs_dir) and not (ver and ver.random_inputs_reproduce),
            "inputs_file": f"{rundir.INPUTS_DIR}/{inputs_file}" if inputs_file else None,
            "inputs_random": bool(use_plain and (plain.inputs_random or short)),
            "inputs_sha256": safe(plain.inputs_sha256, _SHA256, None),
            "nodes_before": repro.nodes_before, "nodes_after": repro.nodes_after,
            "queries": repro.queries, "reused": repro.reused is not None,
            "graph": _count(capture.graph), "graphs": _count(capture.graphs),
            "capture_note": _capture_note(capture)}


def _plain_text(rep: Failure, rel: str) -> str | None:
    """The plain repro's text: a file of the failure's own directory (an artifact names it), bounded."""
    if rep.dir is None:
        return None
    base = Path(rep.dir).resolve()
    path = (base / rel).resolve()
    try:
        path.relative_to(base)
        if not path.is_file() or path.stat().st_size > MAX_PLAIN_CHARS:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except (ValueError, OSError):
        return None


_ERROR_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*(?:Error|Exception|Mismatch|Failure)\b|AssertionError|"
                         r".*\b(?:mismatch|wrong|not close|differ)).*$", re.M | re.I)


TRACEBACK_LINE_CHARS = 300
_CARETS = re.compile(r"[ \t]*[\^~]+[ \t]*")


def _long_lines_cut(text: str) -> str:
    """A traceback as a person reads it: a line of generated code longer than
    :data:`TRACEBACK_LINE_CHARS` (inductor's call of a fused kernel, its name and every argument type:
    thousands of characters) cut with an ellipsis, and the caret line Python writes under it dropped
    (it points into what was cut)."""
    out, cut = [], False
    for line in text.split("\n"):
        if cut and _CARETS.fullmatch(line):
            continue
        cut = len(line) > TRACEBACK_LINE_CHARS
        out.append(line[:TRACEBACK_LINE_CHARS] + " …" if cut else line)
    return "\n".join(out)


def _message_once(traceback: str, first: str, rest: str) -> str:
    """The traceback up to its exception's first line when the lines after it are the message's own
    rest (shown whole under "Full error message"): a compile error's message is said once."""
    following = next((line.strip() for line in rest.splitlines() if line.strip()), "")
    at = traceback.rfind(first) if first and following else -1
    if at < 0:
        return traceback
    end = traceback.find("\n", at)
    if end < 0 or next((line.strip() for line in traceback[end:].splitlines() if line.strip()), "") != following:
        return traceback
    return traceback[:end] + "\n[the message goes on: see the full error message]"


def _error_context(error: CheckError) -> dict:
    """The error as the body shows it: its type through the allowlist, its message split at the
    first line, the traceback without this bot's own frames. A program that exited non-zero without
    an exception (``ExitCode``): its output is the program's output, not a traceback, and the
    headline is the last line of it that reads as an error."""
    from bot.public import without_bot_frames

    msg = sg.without_compile_command(sg.without_compiler_warnings(str(error.message or "")))
    first, _, rest = msg.strip().partition("\n")
    program = error.type == sg.EXIT_TYPE
    text = str(error.traceback or "")
    text = text if program else _long_lines_cut(sg.without_compile_command(sg.without_compiler_warnings(text)))
    if not program:
        text = _message_once(text, first, rest)
    errors = _ERROR_LINE.findall(text[-20000:]) if program else []
    return {"type": safe(error.type, _EXC, "Error"), "message": msg, "message_first_line": first[:500],
            # a compile error's first line is the wrapper's ("C++ compile error"): the compiler's own
            # first error line is what the failure is (its output is in the full message)
            "compiler_error": (sg.first_compiler_error(rest) or "")[:500] or None,
            "message_rest": bool(rest.strip()) or len(first) > 500,
            "program_output": program,
            "last_error_line": errors[-1].strip()[:500] if errors else None,
            "traceback": without_bot_frames(text) if text else "(no traceback recorded)"}


def _count(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10 ** 9 else None


def _culprit(c: Culprit | None) -> dict | None:
    """The culprit as the body shows it: allowlisted op names, a known method, the bisector's words
    (shown through the code filter)."""
    ops = _op_names(c.ops) if c is not None else None
    if not ops:
        return None
    return {"ops": ops, "method": c.method if c.method in CULPRIT_METHODS else "graph",
            "bisect": c.bisect if isinstance(c.bisect, str) else None}


def _readout(r: Readout | None) -> dict | None:
    """The numerics readout's table (accuracy failures): allowlisted op names, the numbers as the
    record has them (shown through the num filter; "n/a" where none), at most 30 rows; None when
    the record has no rows."""
    rows = r.nodes[:30] if r is not None and isinstance(r.nodes, list) else []
    if not rows:
        return None

    def n(v):
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else "n/a"

    return {"rows": [{"op": safe(x.op, _OP, "unknown"), "diverges": x.diverges is True, "change": _change(x),
                      "max_abs_compiled": n(x.max_abs_compiled), "rmse_compiled": n(x.rmse_compiled),
                      "max_abs_eager": n(x.max_abs_eager), "rmse_eager": n(x.rmse_eager)} for x in rows],
            "first_diverging": safe(r.first_diverging, _OP, None) if r.first_diverging else None,
            "deterministic": r.deterministic if isinstance(r.deterministic, bool) else None,
            "max_nondeterminism": n(r.max_nondeterminism) if r.max_nondeterminism is not None else None,
            "note": r.note[:500] if isinstance(r.note, str) else None}


def _change(x) -> str | None:
    """A readout row's dtype or shape change, or zeros of the other sign (-0.0 in one, +0.0 in the
    other), as words: "dtype uint8 → bool", "shape [2, 3] → [3]", "sign of zero differs in 4 elements"."""
    words = []
    dtype, was = safe(x.compiled_dtype, _WORD, None), safe(x.dtype, _WORD, None)
    if dtype and was and dtype != was:
        words.append(f"dtype {was} → {dtype}")
    shape = x.compiled_shape
    if isinstance(shape, list) and all(isinstance(v, int) for v in shape) and shape != x.shape:
        words.append(f"shape {list(x.shape)} → {shape[:16]}")
    zeros = x.signed_zeros
    if isinstance(zeros, int) and not isinstance(zeros, bool) and zeros > 0:
        words.append(f"sign of zero differs in {zeros} element{'s' if zeros != 1 else ''}")
    return ", ".join(words) or None


_GIT = re.compile(r"[0-9a-f]{7,40}")
_BUILD_NAME = re.compile(r"[A-Za-z0-9_.+:/@=-]{1,100}")


def builds_context(state: IssueState, failure: FailureRecord | None) -> dict | None:
    """"Present in / not present in": the torch versions the issue's runs failed on, and what
    `minify-bot bisect` found (failure.json's "builds"), with the commit range where it is known.
    Untrusted text passes strict patterns or is left out."""
    from bot.builds import version_word

    found = (failure.builds if failure else None) or BuildsFound()
    torch_of = {r.name: version_word(r.torch) for r in found.builds}

    def names(values, seen=()):
        """The builds named, each with its torch where the name does not say it; a build named by
        its version alone whose torch is one of ``seen`` (already listed) is left out."""
        return [f"{v} (torch {torch_of[v]})" if torch_of.get(v) and torch_of[v].split("+")[0] not in v else v
                for v in (values or [])[:30] if isinstance(v, str) and _BUILD_NAME.fullmatch(v)
                and not (torch_of.get(v) in seen and v in (torch_of[v], torch_of[v].split("+")[0]))]

    seen = [v for v in state.torch if version_word(v)]
    present = list(dict.fromkeys([f"torch {v}" for v in seen] + names(found.present_in, seen)))
    absent = names(found.absent_in)
    bounds = [b for b in map(_boundary, found.boundaries) if b is not None]
    if not (present or absent or bounds):
        return None
    return {"present": present, "absent": absent, "skipped": names(found.skipped), "boundaries": bounds}


def _boundary(b: BuildBoundary) -> dict | None:
    """A boundary as the body shows it: its builds' names and commit range where they pass the patterns."""
    if b.kind not in ("introduced", "fixed") or not all(
            isinstance(x, str) and _BUILD_NAME.fullmatch(x) for x in (b.before, b.after)):
        return None
    c = b.commits if isinstance(b.commits, dict) else {}
    lo, hi = c.get("from"), c.get("to")
    ok = isinstance(lo, str) and isinstance(hi, str) and _GIT.fullmatch(lo) and _GIT.fullmatch(hi)
    return {"kind": b.kind, "before": b.before, "after": b.after, "commits": f"{lo}..{hi}" if ok else None,
            "url": f"https://github.com/pytorch/pytorch/compare/{lo}...{hi}" if ok else None}


def _summary(parts, check, accuracy, err, group, readout: dict | None = None) -> str:
    """The body's headline: the failure itself (the compiled graph's own error, or which value is
    wrong by how much), then where it happened."""
    from bot.render import md
    models = sorted({str(f.check.model) for f in group})
    who = md(models[0]) + (f" and {len(models) - 1} more" if len(models) > 1 else "")
    where = (f"{md(parts.get('stage'))} stage ({md(check.backend)}, {md(check.mode)}, "
             f"{md(parts.get('dtype'))}, {md(parts.get('device'))})")
    return f"{headline(parts, accuracy, err, readout)} · {where} on {who}"


def _cut(text: str, limit: int = 150) -> str:
    """At most ``limit`` characters, cut at a word with an ellipsis."""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def rounded(value) -> str:
    """A number as a person writes it in a headline: three significant digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.3g}"


def headline(parts: dict, accuracy: dict | None, err: dict | None, readout: dict | None) -> str:
    """The failure in one line (markdown, escaped): for wrong results the first op whose compiled
    value is wrong, by its max error against fp64 (and eager's), else the output's RMSE against
    eager's and the tolerance; for an error the compiled graph's own exception, not the exit status
    of the program around it (that program's output is its own block)."""
    from bot.render import md
    row = next((r for r in (readout or {}).get("rows") or [] if r["op"] == (readout or {}).get("first_diverging")),
               None)
    if parts.get("class") == "accuracy" or (accuracy and accuracy.get("rmse_res") is not None and not err):
        if row is not None and isinstance(row["max_abs_compiled"], (int, float)):
            change = f" ({md(row['change'])})" if row.get("change") else ""
            return (f"output of {md(row['op'])} wrong{change}: max error {rounded(row['max_abs_compiled'])} "
                    f"(eager {rounded(row['max_abs_eager'])})")
        if row is not None and row.get("change"):
            return f"output of {md(row['op'])} wrong: {md(row['change'])}"
        if accuracy and accuracy.get("rmse_res") is not None:
            eager = f", eager {rounded(accuracy['rmse_ref'])}" if accuracy.get("rmse_ref") is not None else ""
            return (f"wrong results: RMSE {rounded(accuracy['rmse_res'])} vs fp64{eager}, tolerance "
                    f"{rounded(accuracy.get('tolerance'))}")
        if accuracy and accuracy.get("max_abs_diff") is not None:
            return f"wrong results: max error {rounded(accuracy['max_abs_diff'])}"
        return "wrong results"
    if err and not err.get("program_output"):
        return f"{md(err['type'])}: {md(_cut(err.get('compiler_error') or err['message_first_line']))}"
    if err and err.get("last_error_line"):
        return md(_cut(err["last_error_line"]))
    return md(CLASS_WORDS.get(parts.get("class"), parts.get("class") or "failure"))


INLINE_CODE_LIMIT = 8000         # the generated code the body shows: the kernels, at most this much
_KERNEL_START = re.compile(r"^(?:(?:cpp_fused|triton)_\w*\s*=|@triton\.jit)", re.MULTILINE)
_KERNEL_END = re.compile(r"^'''", re.MULTILINE)


def generated_code_context(rep: Failure, rel_dir: str) -> dict | None:
    """The "Trace and generated code" section: where the trace and tlparse's report are in the
    artifacts, and the kernels of output_code.py (untrusted text: only ever fenced). Paths are
    the record's only when they pass the file pattern and resolve inside the failure's directory."""
    tr = rep.failure.trace if rep.failure is not None else None
    if tr is None:
        return None
    trace_dir = _present(rep, safe(tr.trace_dir, _FILE, None))
    tlparse = _present(rep, safe(tr.tlparse, _FILE, None))
    code_file = safe(tr.output_code, _FILE, None)
    text = _plain_text(rep, code_file) if code_file else None
    if not (trace_dir or text):
        return None
    f = rep.failure
    ops = _op_names((f.culprit.ops if f.culprit else None) or []) or _op_names([n.op for n in f.repro.graph or []])
    from bot.public import public_text

    code, cut, (code_for, kernels) = _kernels(public_text(text or ""), ops)   # fenced as python: redacted here
    return {"trace_path": f"{rel_dir}/{trace_dir}" if trace_dir else None, "code_for": code_for,
            "code_kernels": kernels,
            "trace_cut": tr.trace_cut is True,
            "tlparse_path": f"{rel_dir}/{tlparse}" if tlparse else None,
            "code": code or None, "code_cut": cut, "code_path": f"{rel_dir}/{code_file}" if text else None,
            "repro": safe(tr.repro, _FILE, None), "note": tr.note[:500] if isinstance(tr.note, str) else None}


def _present(rep: Failure, name: str | None) -> str | None:
    """``name`` when it is a file or directory directly in the failure's own directory."""
    if name is None or rep.dir is None:
        return None
    base = Path(rep.dir).resolve()
    path = base / name
    return name if not path.is_symlink() and path.resolve().parent == base and path.exists() else None


_KERNEL_NAME = re.compile(r"\b(cpp_fused\w*|triton_\w+|cuda_fused\w*)")


def kernel_blocks(text: str) -> list[tuple[str, str]]:
    """The kernels of inductor's generated code (one or more modules): (name, its definition from
    ``<name> = async_compile...`` or ``@triton.jit`` to the end of its source string)."""
    out: list[tuple[str, str]] = []
    after = 0
    for m in _KERNEL_START.finditer(text):
        if m.start() < after:   # a kernel's own ``@triton.jit``, inside its source string
            continue
        end = _KERNEL_END.search(text, m.end())
        stop = text.find("\n", end.end()) if end else -1
        after = stop if stop >= 0 else len(text)
        block = text[m.start():after].strip("\n")
        name = _KERNEL_NAME.search(block)
        out.append((name.group(1) if name else "", block))
    return out


def _kernels(text: str, ops: list[str] | None = None) -> tuple[str, int, tuple[list[str], int]]:
    """The kernel(s) that compute the culprit: those whose fused name names one of ``ops`` (the
    culprit's, else the graph's), else every kernel (the whole text when none is found); at most
    INLINE_CODE_LIMIT characters at a line boundary. Returns (excerpt, characters left out, (the ops
    the excerpt was chosen for, how many kernels compute them))."""
    blocks = kernel_blocks(text)
    shorts = list(dict.fromkeys(_short(o).lower() for o in ops or [] if o))
    chosen = [(n, b) for n, b in blocks if any(f"_{s}_" in f"_{n.lower()}_" for s in shorts)]
    named = [s for s in shorts if any(f"_{s}_" in f"_{n.lower()}_" for n, _ in chosen)]
    part = "\n\n".join(b for _, b in (chosen or blocks)) if blocks else text.strip("\n")
    if len(part) > INLINE_CODE_LIMIT:
        part = part[:INLINE_CODE_LIMIT].rsplit("\n", 1)[0]
    return part, len(text.strip("\n")) - len(part), (named, len(chosen)) if chosen else ([], 0)
