"""Known bugs: a failure that matches an open bot issue's verified repro is not minified again.

The issue's state (the hidden marker, bot/report/state.py) keeps a ``known`` block once a verified
repro backed the issue: the repro's source (zlib + base64), the signature verification proved, the
record fields the fingerprint is computed from, and how long the original minify took.

This module is the record and its rules (the state block, known.json, matching, the savings); the two
sides that use it never share a process:
- the trusted side (bot/report/known.py: ``run`` before its minify stage, the action before it
  starts the minify stage) holds the tracker and its token: it reads the open bot issues and writes
  ``known.json`` into the run directory (none for ``--reminify``; issues whose re-minify box is
  ticked left out);
- the minify process (no token, runs model code) reads ``known.json`` with the bounded reader
  (``bot.rundir.read_known``) and, for a failing check that matches an entry, runs the known repro
  once in a fresh process (bot/minify/reuse.py): when it still fails the same way, the entry's
  record stands in for localize / capture / reduce / verify, and failure.json says so in
  ``repro.reused``.

The repro comes from an issue the bot wrote; it runs only in the tokenless minify process, like the
model code the check ran. Rules: docs/reporting.md ("Known bugs are not minified again").
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import zlib

from bot import fingerprint as fp
from bot import rundir
from bot import signature as sg

MAX_REPRO_CHARS = 200_000  # a repro larger than this is not kept in the issue state
MAX_PACKED = 24_000  # characters of packed repro in the marker (the body budget is 65,536)
REUSE_VERIFY_RUNS = 1
REUSE_TIMEOUT = 600.0


@dataclasses.dataclass
class KnownRepro:
    """One open issue's verified repro, as handed to minify (known.json "known" items)."""
    issue: int
    checks: list[str]  # check keys (bot.fingerprint.check_key) the issue was seen on
    signature: dict  # the verified bot.signature.Signature
    record: dict  # failure.json fields to restore: class, stage, culprit, bisect, config, repro numbers
    repro: str  # repro.py source
    minify_seconds: float | None  # the original minify's wall time

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "KnownRepro":
        return cls(int(d["issue"]), [str(c) for c in d.get("checks") or []], dict(d["signature"]),
                   dict(d.get("record") or {}), str(d["repro"]),
                   float(d["minify_seconds"]) if d.get("minify_seconds") is not None else None)


# ---------------------------------------------------------------------------- the issue-state block

def pack(text: str) -> str:
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")


def unpack(packed: str) -> str | None:
    try:
        data = zlib.decompressobj().decompress(base64.b64decode(packed, validate=True), MAX_REPRO_CHARS * 4)
        return data.decode("utf-8")
    except (ValueError, zlib.error, UnicodeDecodeError):
        return None


def block_of(failure: dict | None, repro_text: str | None) -> dict | None:
    """The issue state's ``known`` block for a freshly minified failure, or None when it cannot be
    reused later: not verified, the repro needs its saved inputs (the issue holds no inputs), or
    it is too large for the marker."""
    failure = failure or {}
    repro = failure.get("repro") or {}
    ver = repro.get("verification") or {}
    sig = sg.Signature.from_json(failure.get("signature"))
    if (repro.get("reused") or not sg.repro_verified(failure) or sig is None or not sig.verified
            or not ver.get("random_inputs_reproduce") or not repro_text or len(repro_text) > MAX_REPRO_CHARS):
        return None
    packed = pack(repro_text)
    if len(packed) > MAX_PACKED:
        return None
    seconds = (repro.get("timings") or {}).get("total")
    return {
        "z": packed, "sha": hashlib.sha256(repro_text.encode()).hexdigest()[:16],
        "signature": sig.to_json(),
        "record": {"class": failure.get("class"), "stage": failure.get("stage"),
                   "culprit": failure.get("culprit"), "config": failure.get("config"),
                   "status": repro.get("status"), "nodes_before": repro.get("nodes_before"),
                   "nodes_after": repro.get("nodes_after"), "capture": repro.get("capture")},
        "minify_seconds": round(float(seconds), 2) if isinstance(seconds, (int, float)) else None,
    }


def merge_block(old: dict | None, new: dict | None) -> dict | None:
    """A fresh verified repro replaces the stored one; the first minify time is kept when the new
    record has none."""
    if new is None:
        return old
    if old and new.get("minify_seconds") is None:
        new = {**new, "minify_seconds": old.get("minify_seconds")}
    return new


def from_state(number: int, state: dict) -> KnownRepro | None:
    block = state.get("known")
    if not isinstance(block, dict) or not isinstance(block.get("z"), str):
        return None
    text = unpack(block["z"])
    if text is None or hashlib.sha256(text.encode()).hexdigest()[:16] != block.get("sha"):
        return None
    if sg.Signature.from_json(block.get("signature")) is None:
        return None
    return KnownRepro(number, [str(c) for c in state.get("checks") or []], block["signature"],
                      block.get("record") or {}, text, block.get("minify_seconds"))


# ---------------------------------------------------------------------------- known.json

def write(run_dir, entries: list[KnownRepro], reminify: list[int] | None = None) -> None:
    rundir.write_known(run_dir, {"known": [e.to_json() for e in entries], "reminify": sorted(reminify or [])})


# ---------------------------------------------------------------------------- the minify side

def load(run_dir) -> list[KnownRepro]:
    """known.json of a run directory (bounded, validated); [] when there is none or it is bad."""
    doc = rundir.read_known(run_dir)
    return [KnownRepro.from_json(d) for d in (doc or {}).get("known") or []]


def match(entries: list[KnownRepro], row: dict) -> KnownRepro | None:
    """The known repro for a failing check: the issue was seen on this check, and the check fails
    the way the repro does (bot.signature.consistent)."""
    key = fp.check_key(row)
    cls = row.get("failure_class")
    for e in entries:
        if key not in e.checks:
            continue
        stored = sg.Signature.from_json(e.signature)
        if stored is None or stored.failure_class != cls and not (
                cls in sg.ERROR_CLASSES and stored.failure_class in sg.ERROR_CLASSES):
            continue
        if sg.consistent(sg.of_record(row), stored):
            return e
    return None


# ---------------------------------------------------------------------------- the summary

@dataclasses.dataclass
class Savings:
    reused: int = 0
    verify_seconds: float = 0.0
    saved_seconds: float = 0.0

    def line(self) -> str | None:
        if not self.reused:
            return None
        return (f"Known bugs reused: {self.reused} (their repros verified in {self.verify_seconds:.0f} s "
                f"instead of minified again; about {self.saved_seconds:.0f} s of minify saved).")


def savings(failures: list[dict | None]) -> Savings:
    """How many failure records reused a known repro, and the time that saved."""
    def num(v) -> float:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e9 else 0.0

    s = Savings()
    for f in failures:
        reused = ((f or {}).get("repro") or {}).get("reused") if isinstance(f, dict) else None
        if isinstance(reused, dict):
            s.reused += 1
            s.verify_seconds += num(reused.get("verify_seconds"))
            s.saved_seconds += num(reused.get("saved_seconds"))
    s.verify_seconds = round(s.verify_seconds, 2)
    s.saved_seconds = round(s.saved_seconds, 2)
    return s


def savings_of_run(run_dir) -> Savings:
    """Savings of a run directory's failure records (for the action's summary)."""
    from bot.errors import UsageError

    try:
        results = rundir.read_results(run_dir)
        return savings([rundir.read_failure(run_dir, r["id"]) for r in results["checks"]
                        if r.get("failure_class")])
    except UsageError:
        return Savings()


def summary_lines(run_dir) -> list[str]:
    """The job summary's line on reused known bugs (none when nothing was reused)."""
    line = savings_of_run(run_dir).line()
    return [line, ""] if line else []
