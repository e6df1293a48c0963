"""The failure record: ``failures/<id>/failure.json`` (schema ``minify-action/failure/v1``), what
minify found about one failing check. Minify writes it; report, known-bug reuse, bisect and the
selftest read it (through :func:`bot.rundir.read_failure`), all as a :class:`FailureRecord`.

Its parts are records of :mod:`bot.records`; its ``signature`` is a :class:`bot.signature.Signature`.
The functions below read a failure's signature and culprit from a record by the rules of
:mod:`bot.signature`, for a record written by this version and for older ones alike.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bot.records import (
    FAILURE_SCHEMA,
    Accuracy,
    BuildsFound,
    CheckError,
    CheckRow,
    ConfigDiff,
    Culprit,
    GraphBisect,
    KnownRecord,
    Readout,
    Record,
    Repro,
    StageVerdict,
    Trace,
    key,
)
from bot.signature import (
    ERROR_CLASSES,
    PLUMBING_OPS,
    VERIFIED_STATUSES,
    Signature,
    bisect_answer,
    device_type,
    signature_of_error_record,
)


@dataclass
class FailureRecord(Record):
    """failures/<id>/failure.json."""

    SCHEMA: ClassVar[str] = FAILURE_SCHEMA

    id: str
    check: CheckRow = field(default_factory=CheckRow)   # the check's results.json row
    failure_class: str | None = field(default=None, metadata=key("class"))
    stage: str | None = None
    ablation: list[StageVerdict] | None = None
    bisect: GraphBisect | None = None
    culprit: Culprit | None = None
    error: CheckError | None = None
    accuracy: Accuracy | None = None
    repro: Repro = field(default_factory=Repro)
    config: ConfigDiff = field(default_factory=ConfigDiff)
    versions: dict[str, Any] = field(default_factory=dict)   # package -> version (bot.versions)
    flaky: bool = False
    signature: Signature | None = None   # set once verification proves the repro fails the same way
    schema: str = FAILURE_SCHEMA
    builds: BuildsFound | None = None    # `minify-bot bisect`'s answer over torch builds
    collect_env: str | None = None       # torch's collect_env output, when the record carries it
    readout: Readout | None = None       # accuracy failures: the minimized graph's numerics per op
    trace: Trace | None = None           # the verified repro's traced rerun: trace, tlparse, generated code

    OPTIONAL: ClassVar[tuple[str, ...]] = ("builds", "collect_env", "readout", "trace")   # written only when set

    def to_json(self) -> dict:
        doc = super().to_json()
        for k in self.OPTIONAL:
            if doc.get(k) is None:
                doc.pop(k)
        return doc

    @classmethod
    def for_check(cls, row: CheckRow) -> "FailureRecord":
        """The record of a failing check before minify learned anything."""
        acc = row.accuracy
        accuracy = (Accuracy(tolerance=acc.tolerance, rmse_res=acc.rmse_res, rmse_ref=acc.rmse_ref)
                    if row.failure_class == "accuracy" and acc is not None else None)
        return cls(id=row.id, check=row.replace(), failure_class=row.failure_class, error=row.error,
                   accuracy=accuracy)

    @property
    def torch(self) -> str | None:
        """The torch version the failure was found on (its ``versions``)."""
        v = self.versions.get("torch")
        return v if isinstance(v, str) else None

    @property
    def repro_verified(self) -> bool:
        """Whether the record holds a minimized repro that fresh processes saw fail the same way."""
        ver = self.repro.verification
        return (self.repro.status in VERIFIED_STATUSES and ver is not None
                and isinstance(ver.failed_same_way, int) and ver.failed_same_way >= 1)

    def culprit_found(self) -> tuple[list[str], str | None, str | None]:
        """(ops, bisector answer, method).

        The record's ``culprit`` (ops that fail when compiled alone, and the bisector's answer) comes
        first; without one, the bisector's answer from ``bisect`` and the op *names* of the minimized
        graph, less data-movement ops (never dtypes or tensor ranks: the same bug on a rank-2 and a
        rank-4 tensor is one bug). With a bisector answer the graph's leftovers are not used at all:
        they differ between models that share the bug."""
        c = self.culprit
        if c is not None and (c.ops or c.bisect):
            return sorted({str(o) for o in c.ops or []}), bisect_answer(c.bisect), str(c.method or "culprit")
        answer = bisect_answer(self.bisect)
        if answer:
            return [], answer, "bisector"
        ops = sorted({str(n.op) for n in self.repro.graph or [] if n.op} - PLUMBING_OPS)
        return ops, None, ("graph" if ops else None)

    def known(self) -> KnownRecord:
        """The fields an issue's known-bug block keeps of this record (bot/known.py)."""
        r = self.repro
        return KnownRecord(self.failure_class, self.stage, self.culprit, self.config, r.status, r.nodes_before,
                           r.nodes_after, r.capture)

    def verified_signature(self, pinned: Signature) -> Signature:
        """The signature minify writes once verification passed: the pinned "how", with this
        record's stage, device, dtype and culprit."""
        ops, answer, method = self.culprit_found()
        return Signature(pinned.failure_class, pinned.exc_type, list(pinned.messages), self.stage,
                         device_type(self.check.device), self.check.dtype, ops, answer, method, True)


def signature_of(check: CheckRow, failure: FailureRecord | None = None) -> Signature:
    """The signature of a failing check (a results.json row), refined by its failure record.

    A record written by this version carries the signature verification proved ("signature");
    older records (and checks minify did not reach) get one derived by the same rules."""
    cls = (failure.failure_class if failure else None) or check.failure_class or "unknown"
    sig = dataclasses.replace(failure.signature) if failure and failure.signature else None   # refined below
    if sig is None:
        if cls in ERROR_CLASSES or cls == "crash":
            sig = signature_of_error_record(cls, (failure.error if failure else None) or check.error)
        sig = sig or Signature(cls)
        sig.verified = bool(failure and failure.repro_verified)
    sig.failure_class = cls
    sig.stage = sig.stage or (failure.stage if failure else None) or "unlocalized"
    sig.device = device_type(sig.device or check.device)
    sig.dtype = sig.dtype or check.dtype
    if failure is not None and sig.verified and not (sig.culprit_ops or sig.bisect):
        sig.culprit_ops, sig.bisect, sig.culprit_method = failure.culprit_found()
    return sig
