"""An issue's state: what the hidden marker at the end of a bot issue's body records, and how one
run's failures of the bug are folded into it."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import field

from bot import fingerprint as fp
from bot import known
from bot.report.load import Failure

MAX_AFFECTED = 50
MAX_RUNS = 20
MAX_TORCH = 10
MAX_PASSING_RUNS = 10


@dataclasses.dataclass
class IssueState:
    """The marker's JSON, typed. Keys this version does not know are kept in ``extra`` and written
    back as they were; ``repro`` is None for a state filed under v1 (it recorded only
    ``best_repro``), and is then left out of the marker until a run merges into it."""
    sig: str
    sigs: list[str] = field(default_factory=list)  # every primary signature seen (found by any of them)
    alt: list[str] = field(default_factory=list)  # model/configuration alternatives
    checks: list[str] = field(default_factory=list)  # check keys (bot.fingerprint.check_key)
    runs: list[str] = field(default_factory=list)  # the last MAX_RUNS run ids that saw it fail
    first_seen: str | None = None
    last_seen: str | None = None
    occurrences: int = 0
    affected: list[dict] = field(default_factory=list)  # one row per model/configuration
    torch: list[str] = field(default_factory=list)
    best_repro: list | None = None  # repro_rank of the best repro seen
    flaky: bool = True
    regression: bool = False
    passing_runs: list[dict] = field(default_factory=list)  # consecutive passing runs since the last failure
    repro: bool | None = None  # backed by a verified repro
    known: dict | None = None  # the verified repro reused instead of minifying again (bot/known.py)
    extra: dict = field(default_factory=dict)

    @classmethod
    def new(cls, sig: str, when: str) -> "IssueState":
        return cls(sig=sig, first_seen=when, last_seen=when, repro=False)

    @classmethod
    def from_json(cls, d: dict) -> "IssueState":
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        d = copy.deepcopy(d)
        kwargs = {k: d.pop(k) for k in list(d) if k in names}
        kwargs.setdefault("sig", "")
        return cls(**kwargs, extra=d)

    def to_json(self) -> dict:
        out = copy.deepcopy(self.extra)
        for f in dataclasses.fields(self):
            if f.name == "extra" or (f.name in ("repro", "known") and getattr(self, f.name) is None):
                continue
            out[f.name] = copy.deepcopy(getattr(self, f.name))
        return out

    def marker(self) -> str:
        return fp.make_marker(self.to_json())

    @property
    def has_repro(self) -> bool:
        """Whether the issue is backed by a verified repro (v1 states: from the rank of their best
        repro, minimized/partial and verified)."""
        if self.repro is not None:
            return bool(self.repro)
        rank = self.best_repro
        return isinstance(rank, list) and len(rank) >= 2 and rank[0] <= 1 and rank[1] == 0


def parse(body: str | None) -> IssueState | None:
    """The state in an issue body's marker, or None when the body carries none."""
    d = fp.parse_marker(body)
    return IssueState.from_json(d) if d is not None else None


def repro_rank(failure: dict | None) -> tuple:
    """Smaller is better: verified minimized repros first, then fewer nodes."""
    repro = (failure or {}).get("repro") or {}
    status_rank = {"minimized": 0, "partial": 1, "not_reproduced": 2, "none": 3}.get(repro.get("status"), 4)
    ver = repro.get("verification") or {}
    verified = 0 if ver.get("runs") and ver.get("failed_same_way") == ver.get("runs") else 1
    nodes = repro.get("nodes_after")
    return (status_rank, verified, nodes if isinstance(nodes, int) else 10 ** 9)


def _affected_row(check: dict, when: str) -> dict:
    return {"model": str(check.get("model"))[:200], "backend": str(check.get("backend"))[:60],
            "mode": str(check.get("mode"))[:40], "dtype": str(check.get("dtype"))[:40],
            "device": fp.device_type(check.get("device"))[:40], "check_key": fp.check_key(check),
            "check_id": str(check.get("id"))[:200], "first_seen": when, "last_seen": when, "occurrences": 0}


def is_reuse(f: Failure) -> bool:
    """The failure's repro is a known issue's repro, verified again instead of minified (bot/known.py)."""
    return isinstance(((f.failure or {}).get("repro") or {}).get("reused"), dict)


def is_flaky(group: list[Failure]) -> bool:
    return all(bool((f.failure or {}).get("flaky")) for f in group)


def is_regression(group: list[Failure]) -> bool:
    return (not is_flaky(group)) and any(f.check.get("baseline") == "new" for f in group)


def merge_state(state: IssueState | None, group: list[Failure], run_id: str,
                when: str) -> tuple[IssueState, list[str]]:
    """Fold this run's failures of one bug into the issue's state. Returns (state, events worth a comment)."""
    new = state is None
    s = copy.deepcopy(state) if state is not None else IssueState.new(group[0].fingerprint.primary, when)
    events: list[str] = []
    if not str(s.sig).startswith(f"{fp.VERSION}:"):
        # filed under an older fingerprint version: the marker moves to this version's signature
        # (the old keys stay in "sigs", so the issue is still found by them); no event, no comment
        s.sig = group[0].fingerprint.primary
    s.repro = s.has_repro or any(f.fingerprint.has_repro for f in group)
    for f in group:
        for vals, into in (([f.fingerprint.primary], s.sigs), (f.fingerprint.alternatives, s.alt),
                           ([f.fingerprint.check_key], s.checks)):
            for v in vals:
                if v not in into:
                    into.append(v)
        row = next((r for r in s.affected if r["check_key"] == f.fingerprint.check_key), None)
        if row is None:
            row = _affected_row(f.check, when)
            if len(s.affected) < MAX_AFFECTED:
                s.affected.append(row)
            if not new:
                events.append(f"newly affected: {row['model']} ({row['backend']}, {row['mode']}, "
                              f"{row['dtype']}, {row['device']})")
        row["last_seen"] = when
        row["occurrences"] += 1
        torch_v = ((f.failure or {}).get("versions") or {}).get("torch")
        if torch_v and torch_v not in s.torch:
            s.torch.append(torch_v)
            if not new:
                events.append(f"new torch version: {torch_v} (still present in {torch_v})")
        rank = list(repro_rank(f.failure))
        if is_reuse(f) and s.best_repro is not None:
            continue  # the issue's own repro, rerun: never news (its one verify run is not "more verified")
        if s.best_repro is None or rank < s.best_repro:
            if s.best_repro is not None and rank[0] <= 1:
                nodes = rank[2] if rank[2] < 10 ** 9 else "?"
                events.append(f"better repro: {nodes} graph nodes" + (", verified" if rank[1] == 0 else ""))
            s.best_repro = rank
    s.torch = s.torch[-MAX_TORCH:]
    s.occurrences += len(group)
    s.last_seen = when
    s.runs = (s.runs + [run_id])[-MAX_RUNS:]
    s.flaky = bool(s.flaky) and is_flaky(group)
    s.regression = bool(s.regression) or is_regression(group)
    s.passing_runs = []
    for f in sorted(group, key=lambda f: repro_rank(f.failure)):  # the best fresh verified repro is kept
        block = known.block_of(f.failure, f.repro_text)
        if block is not None:
            s.known = known.merge_block(s.known, block)
            break
    return s, events


def with_passing_run(state: IssueState, run: dict) -> IssueState:
    """The state after a run in which the bug's checks passed."""
    new = copy.deepcopy(state)
    new.passing_runs = (new.passing_runs + [run])[-MAX_PASSING_RUNS:]
    return new


def labels_for(state: IssueState, group: list[Failure], base: list[str], bot_label: str) -> list[str]:
    rep = group[0]
    wanted = [bot_label, rep.fingerprint.parts["class"]]
    if rep.fingerprint.parts.get("stage") not in (None, "unlocalized"):
        wanted.append(rep.fingerprint.parts["stage"])
    out = [x for x in base if x not in ("flaky", "regression")]
    regression = ["regression"] if state.regression and not state.flaky else []
    for x in wanted + (["flaky"] if state.flaky else []) + regression:
        if x not in out:
            out.append(x)
    return out
