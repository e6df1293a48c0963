"""Fingerprints: a versioned, stable key for "the same bug", and the hidden issue-body marker.

Works from failure.json / results.json data only (no torch import). See docs/reporting.md.

A fingerprint has
  - ``primary``: ``v1:<20 hex>``, sha1 over the canonical parts below;
  - ``alternatives``: ``v1-ops:<hex>`` (op multiset of the minimized graph, order-free) and
    ``v1-model:<hex>`` (the model/configuration tuple and failure class);
  - ``check_key``: ``v1-check:<hex>`` over the model/configuration tuple only (no failure class), used to
    recognise a *passing* check of an affected configuration;
  - ``parts``: the human-readable components that went into ``primary``.

Parts of the primary signature:
  class, stage, device type (cuda:1 -> cuda), dtype, and
  - errors: exception type, normalized message, the top (innermost) 3 non-framework frames
    (function name and file basename, no line numbers);
  - accuracy with a minimized graph: the canonical op sequence ``op(dtype[rank],...)``;
  - anything else (no minimized graph, timeouts, crashes): the model/configuration tuple.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any

VERSION = "v1"
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
_FRAME_RX = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)', re.M)


@dataclasses.dataclass
class Fingerprint:
    primary: str
    alternatives: list[str]
    check_key: str
    parts: dict

    @property
    def all(self) -> list[str]:
        return [self.primary, *self.alternatives]


def _h(obj: Any) -> str:
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha1(data.encode()).hexdigest()[:20]


def device_type(device: Any) -> str:
    return str(device or "unknown").split(":")[0].strip().lower() or "unknown"


_NORMALIZERS = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(/[\w.\-+]+)+/?"), "<path>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<hex>"),
    (re.compile(r"(?<![A-Za-z_])-?\d+(\.\d+)?([eE][-+]?\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
]


def normalize_message(message: str | None) -> str:
    """First line of the message with addresses, paths, hex ids and numbers (sizes) abstracted."""
    text = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    for rx, repl in _NORMALIZERS:
        text = rx.sub(repl, text)
    return text.strip()[:200]


def top_frames(traceback: str | None, n: int = TOP_FRAMES) -> list[str]:
    """The innermost ``n`` non-framework frames as ``basename:function``, innermost first."""
    frames = _FRAME_RX.findall(traceback or "")
    out = []
    for path, func in reversed(frames):
        norm = path.replace("\\", "/")
        if FRAMEWORK_FRAME_RX.search(norm):
            continue
        out.append(f"{norm.rsplit('/', 1)[-1]}:{func}")
        if len(out) == n:
            break
    return out


def canonical_op(node: dict) -> str:
    op = str(node.get("op", "?"))
    dtypes = node.get("dtypes") or []
    ranks = node.get("ranks") or []
    args = [f"{d}[r{r}]" for d, r in zip(dtypes, ranks)] if len(dtypes) == len(ranks) else \
        [str(d) for d in dtypes] + [f"r{r}" for r in ranks]
    return f"{op}({','.join(args)})"


def model_tuple(check: dict) -> dict:
    spec = check.get("spec") or {}
    return {
        "source": spec.get("source"), "suite": spec.get("suite"), "model": check.get("model"),
        "backend": check.get("backend"), "mode": check.get("mode"), "dtype": check.get("dtype"),
        "device": device_type(check.get("device")), "dynamic": bool(check.get("dynamic")),
        "config": {str(k): v for k, v in sorted((check.get("config") or {}).items())},
    }


def compute(check: dict, failure: dict | None = None) -> Fingerprint:
    """Fingerprint a failing check (from results.json), refined by its failure.json when present."""
    failure = failure or {}
    cls = failure.get("class") or check.get("failure_class") or "unknown"
    stage = failure.get("stage") or "unlocalized"
    dtype = check.get("dtype")
    dev = device_type(check.get("device"))
    repro = failure.get("repro") or {}
    graph = repro.get("graph") if repro.get("status") in ("minimized", "partial") else None
    error = failure.get("error") or check.get("error") or {}
    parts: dict = {"class": cls, "stage": stage, "device": dev, "dtype": dtype}
    mt = model_tuple(check)
    if cls in ("compile_error", "runtime_error", "eager_error") and error.get("type"):
        parts["basis"] = "error"
        parts["exception"] = error.get("type")
        parts["message"] = normalize_message(error.get("message"))
        parts["frames"] = top_frames(error.get("traceback"))
    elif graph:
        parts["basis"] = "graph"
        parts["ops"] = [canonical_op(n) for n in graph]
    else:
        parts["basis"] = "model"
        parts["model"] = mt
    alternatives = []
    if graph:
        ops = sorted(str(n.get("op", "?")) for n in graph)
        alternatives.append(f"{VERSION}-ops:" + _h({"class": cls, "device": dev, "ops": ops}))
    alternatives.append(f"{VERSION}-model:" + _h({"class": cls, "model": mt}))
    return Fingerprint(
        primary=f"{VERSION}:" + _h(parts),
        alternatives=alternatives,
        check_key=f"{VERSION}-check:" + _h(mt),
        parts=parts,
    )


def check_key(check: dict) -> str:
    return f"{VERSION}-check:" + _h(model_tuple(check))


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


def parse_marker(body: str | None) -> dict | None:
    """The state stored in the marker, which must be the body's final line. Anything that only
    looks like a marker elsewhere in the body (e.g. inside a pasted log) is ignored."""
    if not body:
        return None
    last_line = body.rstrip().rsplit("\n", 1)[-1]
    m = _MARKER_RX.fullmatch(last_line.strip())
    if not m:
        return None
    try:
        state = json.loads(m.group(2))
    except ValueError:
        return None
    return state if isinstance(state, dict) and isinstance(state.get("sigs"), list) else None


def comment_tag(kind: str, run_id: str, sig: str) -> str:
    """Hidden tag on bot comments: lets a retry find a comment that was stored before a 5xx."""
    return f"<!-- minify-action:comment {_json_for_comment({'kind': kind, 'run': run_id, 'sig': sig})} -->"
