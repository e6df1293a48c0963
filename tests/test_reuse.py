"""bot/minify/reuse.py: an open issue's verified repro stands in for minifying the same bug again,
but only when the bot signed it and it still fails the same way in a fresh process. The known
repros here are plain Python scripts (no torch, nothing compiled) that fail like a repro does, or
no longer do."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bot import fingerprint as fp
from bot import known, rundir, signing
from bot.check.settings import Settings
from bot.failure import FailureRecord
from bot.known import REUSE_VERIFY_RUNS, KnownRepro
from bot.minify import pipeline as pl
from bot.minify import reuse
from bot.options import MinifyOptions
from bot.records import Capture, CheckRow, ConfigDiff, ConfigEntry, Culprit, KnownRecord, Reused, Verification
from bot.signature import Signature
from tests.ghstub.rundir import check_row, row_of

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
FAILS = "import sys\nprint('AccuracyError: Bad accuracy detected')\nsys.exit(1)\n"
PASSES = "print('all outputs match')\n"


def _row() -> CheckRow:
    return row_of(check_row("mlp_relu", status="fail_accuracy", failure_class="accuracy"))


def _entry(row: CheckRow, repro: str, *, status="minimized", minify_seconds: float | None = 120.0) -> KnownRepro:
    sig = Signature("accuracy", stage="inductor", culprit_ops=["aten.relu.default"], verified=True)
    record = KnownRecord("accuracy", "inductor", Culprit(["aten.relu.default"], "lowerings: relu", "compiled-alone"),
                         ConfigDiff([ConfigEntry(RELU, None, "accuracy")],
                                    [ConfigEntry(RELU, None, "accuracy")]),
                         status, 40, 3, Capture("aot", 4, "torch", role="inference"))
    return KnownRepro(17, [fp.check_key(row)], sig, record, repro, minify_seconds)


def _reuse(tmp_path: Path, entry: KnownRepro, row: CheckRow | None = None):
    rec = FailureRecord.for_check(row or _row())
    fdir = tmp_path / "failures" / rec.id
    fdir.mkdir(parents=True)
    said: list[str] = []
    reused = reuse.reuse(rec, entry, str(fdir), str(fdir / rundir.MINIFIER_LOG), said.append)
    return reused, rec, fdir, said


def test_a_known_repro_that_still_fails_stands_in_for_minifying(tmp_path):
    entry = _entry(_row(), FAILS)
    reused, rec, fdir, said = _reuse(tmp_path, entry)
    assert reused is True
    assert (fdir / rundir.REPRO).read_text() == FAILS
    assert (rec.failure_class, rec.stage) == ("accuracy", "inductor")
    assert rec.culprit == entry.record.culprit and rec.config == entry.record.config
    r = rec.repro
    assert (r.status, r.path, r.reason, r.queries, r.nodes_before, r.nodes_after) == (
        "minimized", rundir.REPRO, None, 0, 40, 3)
    assert r.capture == Capture("aot", 4, "torch", role="inference")
    assert r.verification == Verification(REUSE_VERIFY_RUNS, REUSE_VERIFY_RUNS, True)
    assert r.reused.issue == 17 and r.reused.saved_seconds == round(120.0 - r.reused.verify_seconds, 2)
    assert r.timings["known_verify"] == r.reused.verify_seconds
    assert rec.signature.verified and rec.signature.culprit_ops == ["aten.relu.default"]
    assert any("known bug #17" in line and "not minified again" in line for line in said)
    log = (fdir / rundir.MINIFIER_LOG).read_text()
    assert "issue #17 has a verified repro" in log and "fails the same way" in log


def test_a_reused_record_is_a_valid_failure_json(tmp_path):
    _, rec, fdir, _ = _reuse(tmp_path, _entry(_row(), FAILS))
    rundir.write_failure(fdir, rec)
    doc = json.loads((fdir / rundir.FAILURE).read_text())
    rundir.validate(doc, "failure", rundir.FAILURE)
    assert doc["repro"]["reused"]["issue"] == 17


def test_a_known_repro_that_no_longer_fails_is_removed_and_minify_goes_on(tmp_path):
    reused, rec, fdir, said = _reuse(tmp_path, _entry(_row(), PASSES))
    assert reused is False
    assert not (fdir / rundir.REPRO).exists()
    assert rec.repro.status == "none" and rec.repro.reused is None and rec.repro.verification is None
    assert rec.stage is None and rec.culprit is None and rec.signature is None
    assert "known_verify" in rec.repro.timings
    assert any("no longer fails the same way" in line and "minifying again" in line for line in said)
    log = (fdir / rundir.MINIFIER_LOG).read_text()
    assert "does NOT fail the same way" in log and "all outputs match" in log


def test_a_known_repro_that_now_fails_differently_is_not_reused(tmp_path):
    reused, _, fdir, _ = _reuse(tmp_path, _entry(_row(), "raise RuntimeError('something else')\n"))
    assert reused is False and not (fdir / rundir.REPRO).exists()


def test_the_known_repro_runs_with_random_inputs(tmp_path):
    """A known repro is published without its inputs: it must fail on random ones."""
    needs_saved = "import sys\nif '--no-save-dir' in sys.argv:\n    sys.exit(0)\n" + FAILS
    reused, _, _, _ = _reuse(tmp_path, _entry(_row(), needs_saved))
    assert reused is False


def test_a_partial_known_repro_stays_partial_and_an_unknown_status_reads_as_minimized(tmp_path):
    _, rec, _, _ = _reuse(tmp_path / "a", _entry(_row(), FAILS, status="partial"))
    assert rec.repro.status == "partial"
    _, rec, _, _ = _reuse(tmp_path / "b", _entry(_row(), FAILS, status=None))
    assert rec.repro.status == "minimized"


def test_without_the_original_minify_time_no_saving_is_claimed(tmp_path):
    reused, rec, _, said = _reuse(tmp_path, _entry(_row(), FAILS, minify_seconds=None))
    assert reused and rec.repro.reused == Reused(17, rec.repro.reused.verify_seconds, None)
    assert not any("saved about" in line for line in said)


def test_the_stage_reuses_a_matching_known_repro_before_any_localize_or_compile(tmp_path):
    row = _row()
    said: list[str] = []
    rec = pl.process(row, Settings(), str(tmp_path / "run"), MinifyOptions().resolved(), {"torch": "2.13.0"},
                     said.append, known=[_entry(row, FAILS)])
    doc = json.loads((tmp_path / "run" / "failures" / row.id / rundir.FAILURE).read_text())
    assert rec.repro.reused.issue == 17 and doc["repro"]["reused"]["issue"] == 17
    assert doc["repro"]["status"] == "minimized" and doc["culprit"]["ops"] == ["aten.relu.default"]
    assert "localize" not in doc["repro"]["timings"]
    assert not any("localize" in line for line in said)


# ---------------------------------------------------------------------------- only what the bot signed runs

PRIVATE, PUBLIC = signing.generate()
OTHER_PRIVATE, _ = signing.generate()


def _sign(entry: KnownRepro, private: str = PRIVATE) -> KnownRepro:
    msg = known.signed_message(entry.repro, entry.signature, entry.record, entry.record.torch,
                               entry.record.check_config, entry.issue, entry.checks)
    return dataclasses.replace(entry, sig=signing.sign(private, msg))


def _stage_with_known_json(tmp_path: Path, row: CheckRow, entries: list[KnownRepro], public_key: str | None):
    """known.json as the trusted side writes it, read back the way minify does, then the stage."""
    run = tmp_path / "run"
    known.write(run, entries)
    said: list[str] = []
    loaded = known.load(run, public_key, say=said.append)
    rec = pl.process(row, Settings(), str(run), MinifyOptions(no_localize=True).resolved(), {"torch": "2.13.0"},
                     said.append, known=loaded)
    return rec, said


FORGERIES = {
    "unsigned": lambda e: dataclasses.replace(e, sig=None),
    "signed by another key": lambda e: _sign(e, OTHER_PRIVATE),
    "the bot's signature, the repro swapped": lambda e: dataclasses.replace(e, repro=e.repro + "# swapped\n"),
    "the bot's signature, another record": lambda e: dataclasses.replace(e, record=e.record.replace(status="partial")),
}


@pytest.mark.parametrize("what", sorted(FORGERIES))
def test_a_known_repro_the_bot_did_not_sign_never_runs_and_the_failure_is_minified_afresh(tmp_path, what):
    """The repro would write a file and fail the same way: it is never run, and the failure takes
    the usual way (an eager check: it stops at once, without compiling anything)."""
    row = row_of(check_row("mlp_relu", backend="eager", status="fail_accuracy", failure_class="accuracy"))
    mark = tmp_path / "ran"
    writes = f"import pathlib\npathlib.Path({str(mark)!r}).write_text('ran')\n" + FAILS
    genuine = _sign(_entry(row, writes))
    rec, said = _stage_with_known_json(tmp_path, row, [FORGERIES[what](genuine)], PUBLIC)
    assert not mark.exists()
    assert rec.repro.reused is None and rec.repro.reason == pl.FAILS_WITHOUT_COMPILER
    assert any(line.startswith("known repro of #17: ") and line.endswith("; minified afresh") for line in said)
    assert not (tmp_path / "run" / "failures" / row.id / rundir.REPRO).exists()


def test_without_a_public_key_even_a_signed_known_repro_never_runs(tmp_path):
    row = row_of(check_row("mlp_relu", backend="eager", status="fail_accuracy", failure_class="accuracy"))
    mark = tmp_path / "ran"
    genuine = _sign(_entry(row, f"import pathlib\npathlib.Path({str(mark)!r}).write_text('ran')\n" + FAILS))
    rec, said = _stage_with_known_json(tmp_path, row, [genuine], None)
    assert not mark.exists() and rec.repro.reused is None
    assert [line for line in said if "known repro" in line] == [
        "known repros of 1 open issue(s) not run: no public key is configured (MINIFY_BOT_PUBLIC_KEY); "
        "every failure is minified afresh"]

    rec, said = _stage_with_known_json(tmp_path / "with-key", row, [genuine], PUBLIC)   # the same, with the key
    assert mark.read_text() == "ran" and rec.repro.reused.issue == 17
