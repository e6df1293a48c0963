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

The repro comes from an issue body, and the login that wrote it proves nothing (on GitHub,
``github-actions[bot]`` is every workflow of the repository): a block runs only when the bot signed
it. The report side signs each fresh block with ``MINIFY_BOT_SIGNING_KEY`` (:func:`signed`, over
:func:`signed_message`: the repro's full sha256, the verified signature, the record fields, torch,
the check's settings, the issue's number and its check keys), and only a repro it rendered itself
from the failure's validated graph and inputs (bot/knownrepro.py); the minify side keeps only the
entries whose signature verifies with the public key (:func:`load`; bot/signing.py). Without a
public key nothing from an issue body runs. A verified repro runs only in the tokenless minify
process, like the model code the check ran. Rules:
docs/reporting.md ("Known bugs are not minified again").
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import sys
import zlib

from bot import fingerprint as fp
from bot import rundir, signing
from bot import signature as sg
from bot.failure import FailureRecord, signature_of
from bot.records import CheckRow, ConfigDiff, KnownRecord, Record, RecordError

MAX_REPRO_CHARS = 200_000  # a repro larger than this is not kept in the issue state
MAX_PACKED = 24_000  # characters of packed repro in the marker (the body budget is 65,536)
REUSE_VERIFY_RUNS = 1
REUSE_TIMEOUT = 600.0


@dataclasses.dataclass
class KnownRepro(Record):
    """One open issue's verified repro, as handed to minify (known.json "known" items)."""

    issue: int
    checks: list[str]  # check keys (bot.fingerprint.check_key) the issue was seen on
    signature: sg.Signature  # the verified signature
    record: KnownRecord  # failure.json fields to restore: class, stage, culprit, config, repro numbers
    repro: str  # repro.py source
    minify_seconds: float | None = None  # the original minify's wall time
    sig: str | None = None  # the bot's Ed25519 signature of signed_message (base64; bot/signing.py)


# ---------------------------------------------------------------------------- the issue-state block

# the failure's fields an issue's known block keeps (its build and the check's settings are the
# block's own "torch" and "check_config")
KNOWN_BLOCK_RECORD = ("class", "stage", "culprit", "config", "status", "nodes_before", "nodes_after", "capture")


@dataclasses.dataclass
class KnownBlock(Record):
    """An issue state's ``known`` block: the verified repro, packed, with its digest, the verified
    signature, the failure record fields it restores, the first minify's time, the torch it was
    minified on and the check's settings then. It comes back from an issue body people can edit:
    :func:`check_block` checks its JSON before it is read as this record."""

    z: str                             # the repro, compressed and base64 (bot.known.pack)
    sha: str                           # the repro's sha256, first 16 hex digits
    signature: sg.Signature
    record: KnownRecord                # KNOWN_BLOCK_RECORD of the failure record
    minify_seconds: float | None = None
    torch: str | None = None
    check_config: dict[str, str] = dataclasses.field(default_factory=dict)
    sig: str | None = None             # the bot's signature of signed_message (bot/signing.py)

    def to_json(self) -> dict:
        doc = super().to_json()
        if doc.get("sig") is None:
            doc.pop("sig", None)   # an unsigned block (no signing key): never run
        return {**doc, "record": {k: doc["record"][k] for k in KNOWN_BLOCK_RECORD}}


def pack(text: str) -> str:
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")


def unpack(packed: str) -> str | None:
    try:
        data = zlib.decompressobj().decompress(base64.b64decode(packed, validate=True), MAX_REPRO_CHARS * 4)
        return data.decode("utf-8")
    except (ValueError, zlib.error, UnicodeDecodeError):
        return None


def block_of(failure: FailureRecord | None, repro_text: str | None) -> KnownBlock | None:
    """The issue state's ``known`` block for a freshly minified failure, or None when it cannot be
    reused later: not verified, the repro needs its saved inputs (the issue holds no inputs), its
    graph, inputs or config are more than torch ops on tensors and literals (bot/knownrepro.py renders
    the repro the block keeps from them; the file itself is never kept), or it is too large for the
    marker. Only a run of trusted code may record one (the report never calls this for a
    pull-request run: bot/report/state.py's ``merge_state``)."""
    if failure is None:
        return None
    repro, sig = failure.repro, failure.signature
    if (repro.reused or not failure.repro_verified or sig is None or not sig.verified
            or not repro.verification.random_inputs_reproduce or not repro_text
            or len(repro_text) > MAX_REPRO_CHARS):
        return None
    from bot import knownrepro

    # the check job wrote repro.py, and model code ran there: what the issue keeps (and the bot signs)
    # is the report's own rendering of its graph and inputs, or nothing
    repro_text = knownrepro.render(repro_text)
    if repro_text is None:
        return None
    packed = pack(repro_text)
    if len(packed) > MAX_PACKED:
        return None
    seconds = repro.timings.get("total")
    return KnownBlock(z=packed, sha=hashlib.sha256(repro_text.encode()).hexdigest()[:16], signature=sig,
                      record=failure.known(),
                      minify_seconds=round(float(seconds), 2) if isinstance(seconds, (int, float)) else None,
                      torch=_torch_word(failure.torch), check_config=_check_config(failure.check.config))


def _torch_word(version) -> str | None:
    from bot.builds import version_word

    return version_word(version)


def _check_config(config: dict | None) -> dict:
    return {str(k)[:200]: _config_value(v) for k, v in (config or {}).items()} if isinstance(config, dict) else {}


def _config_value(v) -> str:
    """A config value as compared between a known bug and a check (True, "true" and "True" alike)."""
    return (str(v).lower() if isinstance(v, bool) else str(v))[:400]


# ---------------------------------------------------------------------------- the bot's signature
# A block runs only when the bot signed it (the issue's author proves nothing: bot/signing.py). What
# is signed is what decides what runs and which failure it stands in for, as the minify side reads it.

SIGNED_DOMAIN = "minify-action/known/v2"   # v2: the issue number and its check keys are signed too


def signed_message(repro, signature, record, torch, check_config, issue, checks) -> bytes | None:
    """The canonical bytes the bot signs for a known repro: a domain tag, the repro's full sha256,
    the verified signature (``sg.Signature``), the record fields it restores (``KnownRecord``,
    KNOWN_BLOCK_RECORD), the torch it was minified on, the check's settings then, the number of the
    issue whose state holds it and that state's check keys (a block copied into another issue, or
    a check key added to the state, no longer verifies). None when they do not make canonical JSON
    (a block that is not what the bot writes: it never verifies)."""
    try:
        sig = sg.Signature.from_json(signature.to_json())
        rec = record.to_json()
        if type(issue) is not int or not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
            return None
        doc = {"domain": SIGNED_DOMAIN, "repro_sha256": hashlib.sha256(repro.encode("utf-8")).hexdigest(),
               "signature": sig.to_json() if sig is not None else None,
               "record": {k: rec.get(k) for k in KNOWN_BLOCK_RECORD}, "torch": torch, "check_config": check_config,
               "issue": issue, "checks": sorted(set(checks))}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()
    except (AttributeError, TypeError, ValueError, RecursionError):
        return None


def signed(block: KnownBlock | None, signer, issue: int, checks: list[str]) -> KnownBlock | None:
    """A freshly made block signed by ``signer`` (a ``bot.signing.Signer``: the report side's
    MINIFY_BOT_SIGNING_KEY) for issue ``issue`` whose state holds ``checks``; without a signer, the
    block as it is (unsigned: it is never run). Never call this on a block read back from an issue:
    that would sign what someone else wrote."""
    if block is None or signer is None:
        return block
    text = unpack(block.z)
    msg = signed_message(text, block.signature, block.record, block.torch, block.check_config, issue,
                         list(checks)) if text else None
    return block.replace(sig=signer.sign(msg)) if msg is not None else block


def unverified(entry: KnownRepro, public_key: str) -> str | None:
    """Why a known repro must not run (None when the bot's signature of it verifies with
    ``public_key``): "unsigned" or "signature does not verify"."""
    if not entry.sig:
        return "unsigned"
    msg = signed_message(entry.repro, entry.signature, entry.record, getattr(entry.record, "torch", None),
                         getattr(entry.record, "check_config", None), entry.issue, entry.checks)
    if msg is None or not signing.verify(public_key, msg, entry.sig):
        return "signature does not verify"
    return None


# ---------------------------------------------------------------------------- checking a stored block
# The block comes back from an issue body that people can edit: every field is checked here (types and
# sizes, the same bounds as known.schema.json) before it is used; a bad block is dropped on its own.

_SIG_TEXT = {"failure_class": 40, "exc_type": 4096, "bisect": 4096, "stage": 100, "device": 40, "dtype": 40,
             "culprit_method": 40}
_RECORD_TEXT = {"class": 40, "stage": 100, "status": 40}


def _bad_text(v, limit: int, none: bool = True) -> bool:
    return not ((v is None and none) or (isinstance(v, str) and len(v) <= limit))


def _bad_texts(v, items: int, limit: int) -> bool:
    return not (isinstance(v, list) and len(v) <= items and all(isinstance(x, str) and len(x) <= limit for x in v))


def _bad_count(v) -> bool:
    return not (v is None or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10 ** 9))


def _bad_config(c) -> bool:
    if c is None:
        return False
    if not isinstance(c, dict):
        return True
    for name in ("diff", "minimal"):
        rows = c.get(name)
        if rows is None and name == "minimal":
            continue
        if not isinstance(rows, list) or len(rows) > 1000:
            return True
        if any(not isinstance(r, dict) or not isinstance(r.get("key"), str) or len(r["key"]) > 200
               or len(str(r.get("value"))) > 4096 for r in rows):
            return True
    return False


def check_block(block) -> str | None:
    """Why a stored ``known`` block cannot be used (None when it can)."""
    if not isinstance(block, dict):
        return "the known block is not an object"
    if not isinstance(block.get("z"), str) or len(block["z"]) > MAX_PACKED:
        return f"the known repro is not a packed string of at most {MAX_PACKED} characters"
    if not isinstance(block.get("sha"), str) or len(block["sha"]) != 16:
        return "the known repro has no digest"
    sig = block.get("signature")
    if not isinstance(sig, dict) or not sig.get("failure_class") or any(
            _bad_text(sig.get(k), n) for k, n in _SIG_TEXT.items()) or any(
            k in sig and _bad_texts(sig[k], 1000, 4096) for k in ("messages", "culprit_ops")):
        return "the known signature is malformed"
    rec = block.get("record")
    if not isinstance(rec, dict) or any(_bad_text(rec.get(k), n) for k, n in _RECORD_TEXT.items()) \
            or _bad_count(rec.get("nodes_before")) or _bad_count(rec.get("nodes_after")) \
            or _bad_config(rec.get("config")):
        return "the known record is malformed"
    culprit = rec.get("culprit")
    if culprit is not None and not (isinstance(culprit, dict) and not _bad_texts(culprit.get("ops") or [], 1000, 400)
                                    and not _bad_text(culprit.get("bisect"), 4096)
                                    and not _bad_text(culprit.get("method"), 40)):
        return "the known culprit is malformed"
    capture = rec.get("capture")
    if capture is not None and not isinstance(capture, dict):
        return "the known capture is malformed"
    sig_text = block.get("sig")
    if sig_text is not None and not (isinstance(sig_text, str) and len(sig_text) <= signing.MAX_SIGNATURE_CHARS
                                     and sig_text.isascii() and all(c.isalnum() or c in "+/=" for c in sig_text)):
        return "the known repro's signature is not base64 text"
    secs = block.get("minify_seconds")
    if secs is not None and (isinstance(secs, bool) or not isinstance(secs, (int, float)) or not 0 <= secs < 1e7):
        return "the known minify time is not a number of seconds"
    if _bad_text(block.get("torch"), 100):
        return "the known torch version is malformed"
    cc = block.get("check_config")
    if cc is not None and not (isinstance(cc, dict) and len(cc) <= 200 and all(
            isinstance(k, str) and len(k) <= 200 and isinstance(v, str) and len(v) <= 400 for k, v in cc.items())):
        return "the known check configuration is malformed"
    return None


def read_block(raw) -> KnownBlock | None:
    """A stored ``known`` block's JSON as the record, or None when :func:`check_block` refuses it."""
    if raw is None or check_block(raw) is not None:
        return None
    try:
        block = KnownBlock.from_json(raw)
    except RecordError:
        return None
    return block if block.signature is not None else None


def merge_block(old: KnownBlock | None, new: KnownBlock | None) -> KnownBlock | None:
    """A fresh verified repro replaces the stored one; the first minify time is kept when the new
    record has none."""
    if new is None:
        return old
    if old is not None and new.minify_seconds is None:
        new = new.replace(minify_seconds=old.minify_seconds)
    return new


def from_state(number: int, block: KnownBlock | None, checks: list[str]) -> KnownRepro | None:
    """The known repro of a bot-authored issue (its state's block and check keys), or None when it
    has none or the repro does not unpack to its digest."""
    if block is None:
        return None
    text = unpack(block.z)
    if text is None or hashlib.sha256(text.encode()).hexdigest()[:16] != block.sha:
        return None
    record = block.record.replace(torch=block.torch, check_config=dict(block.check_config))
    return KnownRepro(number, [str(c)[:200] for c in checks][:1000], block.signature, record, text,
                      block.minify_seconds, block.sig)


def torch_allows(entry: KnownRepro, torch: str | None) -> bool:
    """A known repro stands in only on the torch build it was minified on or a newer one (a bug of
    a newer build is not assumed to be in an older one); unknown versions on either side: no."""
    from bot.builds import version_word

    then, now = version_word(entry.record.torch), version_word(torch)
    if then is None or now is None:
        return False
    return _version_key(now) >= _version_key(then)


def _version_key(v: str) -> tuple:
    import re

    base = v.split("+", 1)[0]
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?(?:(a|b|rc|\.dev)(\d+))?", base)
    if not m:
        return (0,)
    major, minor, patch, pre, pren = m.groups()
    # a pre-release or nightly comes before the release of the same number
    return (int(major), int(minor), int(patch or 0), 0 if pre else 1, int(pren or 0))


# ---------------------------------------------------------------------------- known.json

@dataclasses.dataclass
class KnownFile(Record):
    """known.json (schema bot/schemas/known.schema.json): the open issues' verified repros handed
    to minify, and the issues whose re-minify box was ticked (left out of ``known``). The minify
    side reads it back entry by entry (:func:`load`): a bad entry is skipped alone."""

    known: list[KnownRepro] = dataclasses.field(default_factory=list)
    reminify: list[int] = dataclasses.field(default_factory=list)


def write(run_dir, entries: list[KnownRepro], reminify: list[int] | None = None) -> None:
    rundir.write_known(run_dir, KnownFile(list(entries), sorted(reminify or [])))


# ---------------------------------------------------------------------------- the minify side

def load(run_dir, public_key: str | None, say=lambda m: print(m, file=sys.stderr)) -> list[KnownRepro]:
    """The known repros to run: known.json's entries (bounded, validated; an entry that does not
    read is skipped alone) whose bot signature verifies with ``public_key``. An unsigned entry, or
    one whose signature does not verify, is never run: one line names its issue. Without a public
    key nothing from an issue body runs: [] and one line saying so. [] when there is no known.json
    or it is bad."""
    doc = rundir.read_known(run_dir)
    entries = []
    for d in (doc or {}).get("known") or []:
        try:
            entry = KnownRepro.from_json(d)
        except ValueError:   # RecordError: not an entry
            continue
        if entry.signature is not None:
            entries.append(entry)
    if entries and not public_key:
        say(f"known repros of {len(entries)} open issue(s) not run: no public key is configured "
            f"({signing.PUBLIC_KEY_ENV}"
            + ("; PyNaCl is not installed" if not signing.available() else "")
            + "); every failure is minified afresh")
        return []
    out = []
    for entry in entries:
        why = unverified(entry, public_key)
        if why is None:
            out.append(entry)
        else:
            say(f"known repro of #{entry.issue}: {why}; minified afresh")
    return out


def config_allows(entry: KnownRepro, row: CheckRow) -> bool:
    """Whether the known bug's minimal configuration is part of the check's configuration now: every
    setting the bug needs is set the same way in the check's config overrides. A bug whose minimal
    set was not found (``minimal`` null) needs the check's configuration to be the one it was
    minified under. A config-carried bug A says nothing about a check that no longer sets A's key."""
    from bot.torch_adapter.hook import valid_options

    given = {**(row.config if isinstance(row.config, dict) else {}), **valid_options(row.compile_options)}
    now = {str(k): _config_value(v) for k, v in given.items()}
    config = entry.record.config or ConfigDiff()
    if isinstance(config.minimal, list):
        return all(now.get(str(d.key)) == _config_value(d.value) for d in config.minimal)
    then = entry.record.check_config
    if isinstance(then, dict):
        return then == now
    return not config.diff and not now


def match(entries: list[KnownRepro], row: CheckRow) -> KnownRepro | None:
    """The known repro for a failing check: the issue was seen on this check, the bug's minimal
    configuration is part of the check's configuration (``config_allows``), and the check fails the
    way the repro does (``Signature.admits``). The torch build was checked by the side that wrote
    known.json (``torch_allows``)."""
    key = fp.check_key(row)
    sig = signature_of(row)
    for e in entries:
        if key not in e.checks or not config_allows(e, row):
            continue
        if e.signature is not None and sig.admits(e.signature) and _shown(sig, e.signature, row):
            return e
    return None


def _shown(sig: sg.Signature, known: sg.Signature, row: CheckRow) -> bool:
    """A program that printed no exception admits any error of its class (``Signature.admits``): a
    known repro is its failure only where its output shows that repro's error (a benchmark that
    catches each model's error may fail with another bug of the same class)."""
    if sig.exc_type != sg.EXIT_TYPE or known.failure_class == "accuracy":
        return True
    error = row.error
    return known.seen_in("\n".join(filter(None, [error.message, error.traceback])) if error else "")


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


def savings(failures: list[FailureRecord | None]) -> Savings:
    """How many failure records reused a known repro, and the time that saved."""
    def num(v) -> float:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e9 else 0.0

    s = Savings()
    for f in failures:
        reused = f.repro.reused if f is not None else None
        if reused is not None:
            s.reused += 1
            s.verify_seconds += num(reused.verify_seconds)
            s.saved_seconds += num(reused.saved_seconds)
    s.verify_seconds = round(s.verify_seconds, 2)
    s.saved_seconds = round(s.saved_seconds, 2)
    return s


def savings_of_run(run_dir) -> Savings:
    """Savings of a run directory's failure records (for the action's summary)."""
    from bot.errors import UsageError

    try:
        return savings([rundir.read_failure(run_dir, row.id) for row in rundir.read_results(run_dir).checks
                        if row.failure_class])
    except UsageError:
        return Savings()


def summary_lines(run_dir) -> list[str]:
    """The job summary's line on reused known bugs (none when nothing was reused)."""
    line = savings_of_run(run_dir).line()
    return [line, ""] if line else []
