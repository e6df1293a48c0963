"""torch's structured trace (``TORCH_TRACE``), as text: how a run is made to write one, and the
generated code (inductor's output code) it carries.

No torch import: a trace is a file of glog-prefixed JSON lines, each optionally followed by a
payload whose lines start with a tab (torch/_logging/_internal.py, ``trace_structured``); inductor
logs every module it writes as an ``inductor_output_code`` entry whose payload is the module's
source (torch/_inductor/graph.py). tlparse reads the same files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from bot import safejson

# the one definition of how a run is traced (the runner script, which imports nothing of minify-bot)
from bot.torch_adapter.traced import EXIT_CANNOT_TRACE_HERE

TRACED_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "traced.py")
OUTPUT_CODE_KEY = "inductor_output_code"
_HEADER = re.compile(r"^[VIWEC]\d{4} [\d:.]+ +\d+ [^\]]{0,400}\] (\{.*\})\s*$")
_KERNEL_PATH = re.compile(r"^(\s*# kernel path: ).*/", re.MULTILINE)
MAX_HEADER_CHARS = 100_000


def traced_command(trace_dir: str, script: str) -> list[str]:
    """The arguments after ``python`` that run ``script`` traced into ``trace_dir``: in a fresh
    interpreter, or in a fork of one that imported torch already. traced.py is the one place that
    turns the trace and the cache switches on, either way."""
    return [TRACED_SCRIPT, trace_dir, script]


def cannot_trace_here(returncode: int | None) -> bool:
    """A forked run that could not turn the trace on after torch's import (run it fresh instead)."""
    return returncode == EXIT_CANNOT_TRACE_HERE


def trace_files(trace_dir: str) -> list[str]:
    """The trace files a run wrote (one per process), oldest name first."""
    if not os.path.isdir(trace_dir):
        return []
    return sorted(os.path.join(trace_dir, n) for n in os.listdir(trace_dir)
                  if n.endswith(".log") and os.path.isfile(os.path.join(trace_dir, n)))


@dataclass
class OutputCode:
    """One module inductor generated: its compile id (``frame/frame_compile``, attempt) and source."""

    compile_id: str
    source: str


def _header(line: str) -> dict | None:
    m = _HEADER.match(line) if len(line) <= MAX_HEADER_CHARS else None
    if m is None:
        return None
    try:
        doc = safejson.loads(m.group(1))   # bounded: the trace was written by a run of model code
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _compile_id(doc: dict) -> str:
    ids = [doc.get(k) for k in ("frame_id", "frame_compile_id", "attempt")]
    words = [str(v) if isinstance(v, int) else "-" for v in ids]
    return f"{words[0]}/{words[1]}" + (f" (attempt {words[2]})" if words[2] not in ("0", "-") else "")


def output_code(lines, max_chars: int) -> list[OutputCode]:
    """The modules inductor generated, from a trace's lines (an iterable of ``str``), in order; a
    module's source is kept up to ``max_chars`` characters (the rest of its payload is skipped).
    Absolute kernel paths (``# kernel path: /tmp/torchinductor_<user>/...``) keep their file name."""
    found: list[OutputCode] = []
    current: list[str] | None = None
    size = 0
    for line in lines:
        if line.startswith("\t"):
            if current is not None and size < max_chars:
                current.append(line[1:])
                size += len(line)
            continue
        if current is not None:
            found[-1].source = _KERNEL_PATH.sub(r"\1", "".join(current))
            current = None
        doc = _header(line)
        if doc is not None and OUTPUT_CODE_KEY in doc and doc.get("has_payload"):
            found.append(OutputCode(_compile_id(doc), ""))
            current, size = [], 0
    if current is not None:
        found[-1].source = _KERNEL_PATH.sub(r"\1", "".join(current))
    return found
