"""The template context of an issue body (templates/issue_body.md.j2): what one bug's failures and
its issue state show, built only from fields that pass strict patterns where a reader may copy them."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from bot import signature as sg
from bot.report.load import Failure, ReportOptions
from bot.report.state import IssueState, repro_rank

INLINE_REPRO_LIMIT = 40000
CLASS_WORDS = {
    "accuracy": "accuracy failure", "compile_error": "compile error", "runtime_error": "runtime error",
    "crash": "crash", "timeout": "timeout", "oom": "out of memory", "eager_error": "eager failure",
    "setup_error": "setup failure",
}



def _ops_summary(parts: dict, failure: dict | None = None) -> str | None:
    """The ops to name in the title: the fingerprint's culprit ops, else (for display only) the
    minimized graph's ops less data movement."""
    ops = parts.get("ops")
    if not ops and failure:
        graph = (failure.get("repro") or {}).get("graph") or []
        ops = [str(n.get("op")) for n in graph if isinstance(n, dict) and n.get("op") not in sg.PLUMBING_OPS]
    if not ops:
        return None
    names = list(dict.fromkeys(o.split("(")[0] for o in ops))
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} ops)" if len(names) > 3 else "")


_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]{1,400}")
_BACKEND = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,99}(?::[A-Za-z_][A-Za-z0-9_]{0,99})?")
_DEVICE = re.compile(r"(cpu|cuda|xpu|mps)(:\d{1,3})?")
HARNESS_SUITES = ("torchbench", "huggingface", "timm_models")


def _capture_note(repro: dict) -> str | None:
    """How the failing graph was captured, when it was not the ordinary way (rendered escaped)."""
    note = (repro.get("capture") or {}).get("note")
    return note.strip().rstrip(".")[:500] if isinstance(note, str) and note.strip() else None


def _bisect_words(failure: dict) -> str | None:
    """The bisector's one-line answer: from the culprit record, else from the raw bisect result."""
    c = failure.get("culprit") or {}
    if c.get("bisect"):
        return c["bisect"]
    return sg.bisect_words(failure.get("bisect"))


def reproduce_command(check: dict, has_repro: bool, trusted_commands=()) -> str:
    """`minify-bot check ...` for the issue's "Reproduce locally", built only from fields that pass
    strict patterns. A run directory may come from a pull request's job: its strings (above all a
    command suite's `spec.command`) are never offered as something to copy and paste, unless the
    command is one this report was configured with (``trusted_commands``)."""
    from bot import slash

    lines = []
    if has_repro:
        lines.append("python repro.py    # from the failure's directory in the artifacts")
    cmd = ["minify-bot", "check"]
    notes = []
    spec = check.get("spec") if isinstance(check.get("spec"), dict) else {}
    source = spec.get("source") or "zoo"
    model = check.get("model")
    model_ok = isinstance(model, str) and slash.MODEL_RE.fullmatch(model) is not None
    models = ["--models", model] if model_ok else []
    if not model_ok:
        notes.append("# the model name is in results.json")
    if source == "zoo":
        cmd += models
    elif source == "yaml":
        path = spec.get("file")
        safe = isinstance(path, str) and _SAFE_PATH.fullmatch(path) and ".." not in path
        name = path.rsplit("/", 1)[-1] if safe else "MODELS.yaml"
        cmd += ["--suite", "yaml", "--model-file", name, *models]
    elif source == "command":
        command = spec.get("command")
        if isinstance(command, str) and command in trusted_commands:
            # the program exactly as the user configured this sweep, then the check that judges it
            cwd = spec.get("cwd")
            if isinstance(cwd, str) and cwd:
                lines.append(f"cd {shlex.quote(cwd)}")
            lines.append(f"{command}    # the program; it fails with a non-zero exit")
            cmd += ["--suite", "command", "--command", command]
            if model_ok:
                cmd += ["--name", model]
            patterns = spec.get("patterns") if isinstance(spec.get("patterns"), dict) else {}
            for kind in ("accuracy", "error"):
                for pat in patterns.get(kind) or []:
                    if isinstance(pat, str):
                        cmd += [f"--{kind}-pattern", pat]
        else:
            # a command the reporter was not configured with (e.g. from a pull request's job) is
            # never offered as something to copy and paste
            cmd += ["--suite", "command", "--command", "COMMAND"]
            notes.append("# COMMAND: the check's command (spec.command in results.json); read it before running it")
    elif source == "harness":
        suite = spec.get("suite") if spec.get("suite") in HARNESS_SUITES else "SUITE"
        cmd += ["--suite", "harness", "--pytorch", "PYTORCH_CHECKOUT", "--harness-suite", suite, *models]
        bs = spec.get("batch_size")
        if isinstance(bs, int) and not isinstance(bs, bool) and bs > 0:
            cmd += ["--batch-size", str(bs)]
    else:
        cmd += models
    for k, ok in (("backend", lambda v: _BACKEND.fullmatch(v)), ("mode", lambda v: v in slash.MODES),
                  ("dtype", lambda v: v in slash.DTYPES), ("device", lambda v: _DEVICE.fullmatch(v))):
        v = check.get(k)
        if isinstance(v, str) and v and ok(v):
            cmd += [f"--{k}", v]
    config = check.get("config") if isinstance(check.get("config"), dict) else {}
    for k, v in sorted(config.items(), key=lambda kv: str(kv[0])):
        v = str(v).lower() if isinstance(v, bool) else v
        if (isinstance(k, str) and slash.CONFIG_KEY_RE.fullmatch(k)
                and isinstance(v, (str, int, float)) and slash.CONFIG_VALUE_RE.fullmatch(str(v))):
            cmd += ["--config", f"{k}={v}"]
        else:
            notes.append("# some config overrides are only in results.json")
    if check.get("dynamic") is True:
        cmd.append("--dynamic")
    lines.append(" ".join(shlex.quote(c) for c in cmd))
    return "\n".join(lines + list(dict.fromkeys(notes)))


def issue_context(group: list[Failure], state: IssueState, opts: ReportOptions, run_dir: Path) -> dict:
    rep = min(group, key=lambda f: repro_rank(f.failure))
    f = rep.failure or {}
    check = rep.check
    parts = rep.fingerprint.parts
    repro = f.get("repro") or {}
    error = f.get("error") or check.get("error")
    err_ctx = None
    if error:
        msg = str(error.get("message") or "")
        first, _, rest = msg.strip().partition("\n")
        err_ctx = {"type": str(error.get("type") or "Error"), "message": msg, "message_first_line": first[:500],
                   "message_rest": bool(rest.strip()) or len(first) > 500,
                   "traceback": str(error.get("traceback") or "(no traceback recorded)")}
    accuracy = f.get("accuracy") or check.get("accuracy")
    rel_dir = f"failures/{check['id']}"
    inline = rep.repro_text if rep.repro_text and len(rep.repro_text) <= INLINE_REPRO_LIMIT else None
    status_words = {"minimized": "Minimized and verified", "partial": "Partially minimized"}.get(
        repro.get("status"), "Captured")
    ver = repro.get("verification") or None
    versions = f.get("versions") or {}
    versions_table = [(k, v if not isinstance(v, (list, dict)) else json.dumps(v)) for k, v in versions.items()
                      if v not in (None, "", [])]
    cfg = f.get("config") or {}
    affected = sorted(state.affected, key=lambda r: (r["model"], r["backend"], r["mode"]))
    device = parts.get("device")
    return {
        "sig": state.sig, "parts": parts, "summary": _summary(parts, check, accuracy, err_ctx, group),
        "class": parts["class"], "class_words": CLASS_WORDS.get(parts["class"], parts["class"]),
        "stage": parts.get("stage"), "dtype": parts.get("dtype"), "device": device,
        "status": check.get("status"), "ops_summary": _ops_summary(parts, f if sg.repro_verified(f) else None),
        "flaky": state.flaky,
        "culprit": f.get("culprit") or None, "bisect_words": _bisect_words(f),
        "graph_role": ((repro.get("capture") or {}).get("role")),
        "regression": state.regression, "error": err_ctx, "accuracy": accuracy,
        "repro": {"status": repro.get("status"), "status_words": status_words, "reason": repro.get("reason"),
                  "inline": inline, "too_big": bool(rep.repro_text) and inline is None,
                  "size": len(rep.repro_text or ""),
                  "artifact_path": f"{rel_dir}/{repro.get('path') or 'repro.py'}",
                  "needs_inputs": bool(repro.get("inputs_dir")) and not (ver or {}).get("random_inputs_reproduce"),
                  "nodes_before": repro.get("nodes_before"), "nodes_after": repro.get("nodes_after"),
                  "queries": repro.get("queries"),
                  "reused": isinstance(repro.get("reused"), dict),
                  "graph": (repro.get("capture") or {}).get("graph"),
                  "graphs": (repro.get("capture") or {}).get("graphs"),
                  "capture_note": _capture_note(repro)},
        "ablation": f.get("ablation") or [], "config_minimal": cfg.get("minimal") or [],
        "config_diff": cfg.get("diff") or [], "versions": versions, "versions_table": versions_table,
        "collect_env": f.get("collect_env"), "verification": ver, "affected": affected, "affected_omitted": 0,
        "first_seen": state.first_seen, "last_seen": state.last_seen, "occurrences": state.occurrences,
        "torch_versions": state.torch or ["unknown"], "artifact_url": opts.artifact_url, "run_url": opts.run_url,
        "builds": builds_context(state, f),
        "failure_dir": rel_dir,
        "reproduce_command": reproduce_command(check, bool(rep.repro_text), opts.trusted_commands),
        "log_excerpt": None, "overflow": [],
    }


_GIT = re.compile(r"[0-9a-f]{7,40}")
_BUILD_NAME = re.compile(r"[A-Za-z0-9_.+:/@=-]{1,100}")


def builds_context(state: IssueState, failure: dict) -> dict | None:
    """"Present in / not present in": the torch versions the issue's runs failed on, and what
    `minify-bot bisect` found (failure.json's "builds"), with the commit range where it is known.
    Untrusted text passes strict patterns or is left out."""
    from bot.builds import version_word

    rec = failure.get("builds") if isinstance(failure.get("builds"), dict) else {}

    def names(key):
        vals = rec.get(key) if isinstance(rec.get(key), list) else []
        return [v for v in vals[:30] if isinstance(v, str) and _BUILD_NAME.fullmatch(v)]

    present = list(dict.fromkeys([f"torch {v}" for v in state.torch if version_word(v)] + names("present_in")))
    absent = names("absent_in")
    bounds = []
    for b in rec.get("boundaries") if isinstance(rec.get("boundaries"), list) else []:
        if not isinstance(b, dict) or b.get("kind") not in ("introduced", "fixed"):
            continue
        before, after = b.get("before"), b.get("after")
        if not (isinstance(before, str) and _BUILD_NAME.fullmatch(before) and isinstance(after, str)
                and _BUILD_NAME.fullmatch(after)):
            continue
        c = b.get("commits") if isinstance(b.get("commits"), dict) else {}
        lo, hi = c.get("from"), c.get("to")
        ok = isinstance(lo, str) and isinstance(hi, str) and _GIT.fullmatch(lo) and _GIT.fullmatch(hi)
        bounds.append({"kind": b["kind"], "before": before, "after": after,
                       "commits": f"{lo}..{hi}" if ok else None,
                       "url": f"https://github.com/pytorch/pytorch/compare/{lo}...{hi}" if ok else None})
    if not (present or absent or bounds):
        return None
    return {"present": present, "absent": absent, "skipped": names("skipped"), "boundaries": bounds}


def _summary(parts, check, accuracy, err, group) -> str:
    from bot.render import md
    models = sorted({str(f.check.get("model")) for f in group})
    who = md(models[0]) + (f" and {len(models) - 1} more" if len(models) > 1 else "")
    where = (f"{md(parts.get('stage'))} stage ({md(check.get('backend'))}, {md(check.get('mode'))}, "
             f"{md(parts.get('dtype'))}, {md(parts.get('device'))})")
    if accuracy and accuracy.get("rmse_res") is not None:
        what = f"wrong results: RMSE {md(accuracy.get('rmse_res'))} vs tolerance {md(accuracy.get('tolerance'))}"
    elif err:
        what = f"{md(err['type'])}: {md(err['message_first_line'][:150])}"
    else:
        what = md(CLASS_WORDS.get(parts["class"], parts["class"]))
    return f"{where} on {who}: {what}"

