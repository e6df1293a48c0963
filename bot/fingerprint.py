"""Fingerprints: a versioned, stable key for "the same bug", and the hidden issue-body marker.

Works from failure.json / results.json data only (no torch import), through the failure's
signature (bot/signature.py). See docs/reporting.md.

A fingerprint (v2) has
  - ``primary``: ``v2:<20 hex>``, sha1 over the canonical parts below;
  - ``alternatives``: ``v2-model:<hex>`` (the model/configuration tuple and failure class), only for a
    failure identified by its model (no verified repro, no error message): it is the one way two
    such failures of the same check are the same bug, and it never applies when either side has a
    repro (the report checks the issue's side);
  - ``check_key``: ``v1-check:<hex>`` over the model/configuration tuple only (no failure class), used to
    recognise the same configuration (affected rows, passing checks). Its basis did not change in v2,
    so its version did not either;
  - ``legacy``: the v1 primary of the same failure, to find issues filed before v2 (migrated in
    place on their next update);
  - ``parts``: the human-readable components that went into ``primary``.

Parts of the primary signature: class, stage, device type (cuda:1 -> cuda), dtype, and
  - a compiler's rejection of the generated code (C++ ``error:`` lines, Triton's CompilationError)
    whose verified repro found the one op that fails compiled alone: the exception type and that
    culprit (op name, the bisector's answer), not the messages, which describe the generated code and
    change with the inputs' dtypes (``VecMask<unsigned char>`` vs ``operator|`` for one ``sum`` bug).
    Its message-keyed primary is kept as ``former``, so an issue filed under it is still found;
  - other errors (compile / runtime): the exception type and the normalized messages (every ``error:``
    line of a compiler error); when the message is not a compiler diagnostic, also the top 3
    non-framework frames (function name and file basename, no line numbers);
  - a failure with a verified repro: the culprit (op names and the bisector's answer; with a
    bisector answer and no culprit ops, the answer alone) - never the whole leftover op sequence,
    never tensor ranks or dtypes per op;
  - anything else (no verified repro, timeouts, crashes): the model/configuration tuple.

``model_key`` is the ``v2-model:`` key of every failure, whatever its basis: a failure filed without
a repro (its minify crashed, or ran out of budget) and the same check's failure minimized by a later
run are one bug, and the report updates that issue in place instead of filing a second one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any

from bot import signature as sg
from bot.failure import FailureRecord, signature_of
from bot.records import CheckError, CheckRow, GraphOp
from bot.signature import Signature

VERSION = "v2"
LEGACY_VERSION = "v1"
CHECK_KEY_VERSION = "v1"  # the model-tuple basis is unchanged since v1
MARKER_PREFIX = "<!-- minify-action:"
_MARKER_RX = re.compile(r"<!-- minify-action:(v\d+) (\{[^\n]*\}) -->")
TOP_FRAMES = 3

# Frames that are glue, not the bug (ClusterFuzz-style ignore list): stdlib plumbing, dynamo's frame
# evaluation wrappers, nn.Module call wrappers, this bot's own runner.
FRAMEWORK_FRAME_RX = re.compile(
    r"(<frozen |/contextlib\.py|/functools\.py|/threading\.py|/runpy\.py|/importlib/|/concurrent/futures/"
    r"|torch/_dynamo/(eval_frame|convert_frame|external_utils|utils|repro/[^/]+)\.py"
    r"|torch/nn/modules/module\.py|torch/_compile\.py|torch/_utils_internal\.py|torch/utils/_contextlib\.py"
    r"|torch/_dynamo/symbolic_convert\.py|torch/_dynamo/output_graph\.py|torch/_dynamo/backends/"
    r"|/bot/(check|commands|torch_adapter|suites)/|/site-packages/_pytest/|/site-packages/pluggy/)"
)
_GENERATED_RX = re.compile(r"[a-z0-9]{32,}\.py")  # inductor's output code: c<hash>.py
_FRAME_RX = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)', re.M)


@dataclasses.dataclass
class Fingerprint:
    primary: str
    alternatives: list[str]
    check_key: str
    parts: dict
    legacy: str | None = None  # the v1 primary, to find and migrate issues filed under v1
    has_repro: bool = False  # a verified minimized repro backs this failure
    signature: Signature | None = None
    # the model/configuration key of the failure whatever its basis: how a failure minimized in a
    # later run finds the issue filed for the same check and failure class without a repro
    model_key: str = ""
    # the primaries this failure had under an earlier rule of this version (a generated-code compile
    # error keyed on its messages before it was keyed on its culprit): an issue filed under one of
    # them is this bug's, and takes its primary from now on
    former: list[str] = dataclasses.field(default_factory=list)

    @property
    def all(self) -> list[str]:
        return [self.primary, *self.alternatives]


def _h(obj: Any) -> str:
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha1(data.encode()).hexdigest()[:20]


device_type = sg.device_type


_NORMALIZERS = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(/[\w.\-+]+)+/?"), "<path>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<hex>"),
    (re.compile(r"(?<![A-Za-z_])-?\d+(\.\d+)?([eE][-+]?\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
]


def normalize_message(message: str | None) -> str:
    """(v1 only) First line of the message with addresses, paths, hex ids and numbers abstracted."""
    text = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    for rx, repl in _NORMALIZERS:
        text = rx.sub(repl, text)
    return text.strip()[:200]


def top_frames(traceback: str | None, n: int = TOP_FRAMES, *, generated: bool = True) -> list[str]:
    """The innermost ``n`` non-framework frames as ``basename:function``, innermost first; the
    hash-named modules of generated code read ``<generated>`` (v1 kept their names)."""
    frames = _FRAME_RX.findall(traceback or "")
    out = []
    for path, func in reversed(frames):
        norm = path.replace("\\", "/")
        if FRAMEWORK_FRAME_RX.search(norm):
            continue
        base = norm.rsplit('/', 1)[-1]
        if generated and _GENERATED_RX.fullmatch(base):
            base = "<generated>"
        out.append(f"{base}:{func}")
        if len(out) == n:
            break
    return out


def canonical_op(node: GraphOp) -> str:
    op = str(node.op or "?")
    dtypes = node.dtypes or []
    ranks = node.ranks or []
    args = [f"{d}[r{r}]" for d, r in zip(dtypes, ranks)] if len(dtypes) == len(ranks) else \
        [str(d) for d in dtypes] + [f"r{r}" for r in ranks]
    return f"{op}({','.join(args)})"


def model_tuple(check: CheckRow) -> dict:
    spec = check.spec
    return {
        "source": spec.source if spec else None, "suite": spec.suite if spec else None, "model": check.model,
        "backend": check.backend, "mode": check.mode, "dtype": check.dtype,
        "device": device_type(check.device), "dynamic": bool(check.dynamic),
        "config": {str(k): v for k, v in sorted((check.config or {}).items())},
    }


def _error(check: CheckRow, failure: FailureRecord | None) -> CheckError:
    """The failure's error: its failure record's, else its check row's."""
    return (failure.error if failure else None) or check.error or CheckError()


def _parts(sig: Signature, check: CheckRow, failure: FailureRecord | None, *, by_culprit: bool) -> dict:
    """The primary signature's parts (see the module docstring). ``by_culprit``: an error keyed on its
    culprit (:func:`culprit_keyed`); False gives the parts it had before (``former``)."""
    parts: dict = {"class": sig.failure_class, "stage": sig.stage, "device": sig.device, "dtype": sig.dtype}
    culprit = sig.culprit
    if by_culprit:
        # the compiler's words vary with the inputs' dtypes; the op that fails compiled alone does not
        parts["basis"] = "culprit"
        parts["exception"] = sig.exc_type
        parts["ops"], parts["bisect"] = culprit["ops"], culprit["bisect"]
    elif sig.is_error and sig.exc_type:
        parts["basis"] = "error"
        parts["exception"] = sig.exc_type
        parts["messages"] = list(sig.messages)
        if not sig.is_compiler_diagnostic:
            # a generic message ("unhandled error") says little: the verified culprit when there
            # is one, else where it was raised
            if culprit is not None:
                parts["ops"], parts["bisect"] = culprit["ops"], culprit["bisect"]
            else:
                parts["frames"] = top_frames(_error(check, failure).traceback)
    elif culprit is not None:
        parts["basis"] = "culprit"
        parts["ops"] = culprit["ops"]
        parts["bisect"] = culprit["bisect"]
    else:
        parts["basis"] = "model"
        parts["model"] = model_tuple(check)
    return parts


def culprit_keyed(sig: Signature) -> bool:
    """Whether an error failure is keyed on its culprit instead of its messages: a compiler rejected
    the generated code (``Signature.is_generated_code_error``) and a verified repro found the one op
    that fails compiled alone. The same op failing with other words for other input dtypes is one bug."""
    return bool(sig.exc_type) and sig.is_generated_code_error and sig.culprit is not None \
        and sig.culprit_method == "compiled-alone" and len(sig.culprit_ops) == 1


def compute(check: CheckRow, failure: FailureRecord | None = None) -> Fingerprint:
    """Fingerprint a failing check (from results.json), refined by its failure.json when present."""
    sig = signature_of(check, failure)
    keyed = culprit_keyed(sig)
    parts = _parts(sig, check, failure, by_culprit=keyed)
    mt = model_tuple(check)
    model_key = f"{VERSION}-model:" + _h({"class": sig.failure_class, "model": mt})
    alternatives = [model_key] if parts["basis"] == "model" else []
    former = [f"{VERSION}:" + _h(_parts(sig, check, failure, by_culprit=False))] if keyed else []
    return Fingerprint(
        primary=f"{VERSION}:" + _h(parts),
        alternatives=alternatives,
        check_key=check_key(check),
        parts=parts,
        legacy=compute_v1(check, failure).primary,
        has_repro=sig.verified,
        signature=sig,
        model_key=model_key,
        former=former,
    )


def compute_v1(check: CheckRow, failure: FailureRecord | None = None) -> Fingerprint:
    """The v1 fingerprint (op sequence with ranks; first message line): kept only to find issues
    filed under v1. Do not use it to group failures."""
    cls = (failure.failure_class if failure else None) or check.failure_class or "unknown"
    stage = (failure.stage if failure else None) or "unlocalized"
    dtype = check.dtype
    dev = device_type(check.device)
    repro = failure.repro if failure else None
    graph = repro.graph if repro is not None and repro.status in ("minimized", "partial") else None
    error = _error(check, failure)
    parts: dict = {"class": cls, "stage": stage, "device": dev, "dtype": dtype}
    mt = model_tuple(check)
    if cls in ("compile_error", "runtime_error", "eager_error") and error.type:
        parts["basis"] = "error"
        parts["exception"] = error.type
        parts["message"] = normalize_message(error.message)
        parts["frames"] = top_frames(error.traceback, generated=False)
    elif graph:
        parts["basis"] = "graph"
        parts["ops"] = [canonical_op(n) for n in graph]
    else:
        parts["basis"] = "model"
        parts["model"] = mt
    alternatives = []
    if graph:
        ops = sorted(str(n.op or "?") for n in graph)
        alternatives.append(f"{LEGACY_VERSION}-ops:" + _h({"class": cls, "device": dev, "ops": ops}))
    alternatives.append(f"{LEGACY_VERSION}-model:" + _h({"class": cls, "model": mt}))
    return Fingerprint(
        primary=f"{LEGACY_VERSION}:" + _h(parts),
        alternatives=alternatives,
        check_key=check_key(check),
        parts=parts,
    )


def check_key(check: CheckRow) -> str:
    return f"{CHECK_KEY_VERSION}-check:" + _h(model_tuple(check))


# --------------------------------------------------------------------------- the hidden marker

def _json_for_comment(obj: Any) -> str:
    # No "<", ">" or "--" can appear verbatim, so the comment cannot be closed early or nested;
    # "@" and "#" are escaped too, so nothing in it reads as a mention or a reference.
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("@", "\\u0040"), ("#", "\\u0023")):
        text = text.replace(ch, esc)
    return text.replace("--", "-\\u002d")


def make_marker(state: dict) -> str:
    """The marker line that ends every issue body the bot writes."""
    return f"{MARKER_PREFIX}{VERSION} {_json_for_comment(state)} -->"


MAX_MARKER_CHARS = 65536  # GitHub's body limit: a longer marker line was not written by the bot
MAX_MARKER_DEPTH = 12  # the deepest state the bot writes is 5 levels


def read_marker(body: str | None) -> tuple[dict | None, str | None]:
    """The state stored in the marker, which must be the body's final line, and why it was not
    read: (state, None); (None, None) when the body carries no marker; (None, reason) when it carries
    one that is malformed (too long, nested too deeply, not JSON, not an object). Bounded: the body
    is cut to its last line before anything is parsed. Anything that only looks like a marker
    elsewhere in the body (e.g. inside a pasted log) is ignored."""
    if not body or not isinstance(body, str):
        return None, None
    last_line = body.rstrip()
    cut = last_line.rfind("\n")
    last_line = last_line[cut + 1:].strip() if cut >= 0 else last_line.strip()
    if not last_line.startswith(MARKER_PREFIX):
        return None, None
    if len(last_line) > MAX_MARKER_CHARS:
        return None, f"marker of {len(last_line)} characters (at most {MAX_MARKER_CHARS})"
    m = _MARKER_RX.fullmatch(last_line)
    if not m:
        return None, "the marker is not in the form the bot writes"
    from bot import safejson

    try:
        state = safejson.loads(m.group(2), max_depth=MAX_MARKER_DEPTH)
    except ValueError as exc:
        return None, f"marker is {exc}"
    if not isinstance(state, dict) or not isinstance(state.get("sigs"), list):
        return None, "marker is not an object with a list of signatures"
    return state, None


def parse_marker(body: str | None) -> dict | None:
    """The state stored in the marker (see read_marker), or None when there is none or it is malformed."""
    return read_marker(body)[0]


def comment_tag(kind: str, run_id: str, sig: str) -> str:
    """Hidden tag on bot comments: lets a retry find a comment that was stored before a 5xx."""
    return f"<!-- minify-action:comment {_json_for_comment({'kind': kind, 'run': run_id, 'sig': sig})} -->"
