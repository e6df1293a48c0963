"""An issue's state: what the hidden marker at the end of a bot issue's body records, and how one
run's failures of the bug are folded into it."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import field

from bot import fingerprint as fp
from bot import known
from bot.failure import FailureRecord
from bot.records import CheckRow, Record, SparseRecord, json_value
from bot.report.load import Failure

MAX_AFFECTED = 50
MAX_RUNS = 20
MAX_TORCH = 10
MAX_PASSING_RUNS = 10


@dataclasses.dataclass
class AffectedCheck(Record):
    """One model/configuration a bug was seen on (the state's ``affected``)."""

    model: str
    backend: str
    mode: str
    dtype: str
    device: str                      # the device type (cuda, not cuda:1)
    check_key: str                   # bot.fingerprint.check_key
    check_id: str
    first_seen: str | None = None
    last_seen: str | None = None
    occurrences: int = 0

    @classmethod
    def of(cls, check: CheckRow, when: str) -> "AffectedCheck":
        return cls(model=str(check.model)[:200], backend=str(check.backend)[:60], mode=str(check.mode)[:40],
                   dtype=str(check.dtype)[:40], device=fp.device_type(check.device)[:40],
                   check_key=fp.check_key(check), check_id=str(check.id)[:200], first_seen=when, last_seen=when)

    def describe(self) -> str:
        return f"{self.model} ({self.backend}, {self.mode}, {self.dtype}, {self.device})"


@dataclasses.dataclass
class PassingRun(SparseRecord):
    """A run in which the bug's checks passed, since it last failed (the state's ``passing_runs``)."""

    run: str
    link: str | None = None          # the run as a link (edited states: any text; shown only when it is one)
    checks: list[str] | None = None  # the passing checks (at most 20)
    torch: str | None = None         # the torch the run checked


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
    affected: list[AffectedCheck] = field(default_factory=list)  # one row per model/configuration
    torch: list[str] = field(default_factory=list)
    best_repro: list | None = None  # repro_rank of the best repro seen
    flaky: bool = True
    regression: bool = False
    passing_runs: list[PassingRun] = field(default_factory=list)  # passing runs in a row since the last failure
    repro: bool | None = None  # backed by a verified repro
    known: known.KnownBlock | None = None  # the verified repro reused instead of minifying again
    failed_at: str | None = None  # the commit@build of the last failing run, from the report's own environment
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
        kwargs["affected"] = [AffectedCheck.from_json(a) for a in kwargs.get("affected") or []]
        kwargs["passing_runs"] = [PassingRun.from_json(r) for r in kwargs.get("passing_runs") or []]
        kwargs["known"] = known.read_block(kwargs.get("known"))   # None when it is not one (dropped alone)
        return cls(**kwargs, extra=d)

    def to_json(self) -> dict:
        out = copy.deepcopy(self.extra)
        for f in dataclasses.fields(self):
            if f.name == "extra" or (f.name in ("repro", "known", "failed_at") and getattr(self, f.name) is None):
                continue
            out[f.name] = copy.deepcopy(json_value(getattr(self, f.name)))
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


class BadState(ValueError):
    """A marker whose state does not have the shape this version writes (edited by hand or by
    someone else): the issue's state is ignored, with a warning naming the issue."""


MAX_LIST = 1000
MAX_TEXT = 4096
MAX_EXTRA_CHARS = 20000


def _text(v, where: str, *, none: bool = False, limit: int = MAX_TEXT) -> None:
    if v is None and none:
        return
    if not isinstance(v, str) or len(v) > limit:
        raise BadState(f"{where} is not a string of at most {limit} characters")


def _count(v, where: str) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 10 ** 12:
        raise BadState(f"{where} is not a count")


def _texts(v, where: str, limit: int = MAX_LIST) -> None:
    if not isinstance(v, list) or len(v) > limit:
        raise BadState(f"{where} is not a list of at most {limit} strings")
    for i, x in enumerate(v):
        _text(x, f"{where}[{i}]")


def _objects(v, where: str, limit: int, fields: dict) -> None:
    """A list of objects whose ``fields`` (name -> check(value, where)) are all present and valid."""
    if not isinstance(v, list) or len(v) > limit:
        raise BadState(f"{where} is not a list of at most {limit} objects")
    for i, obj in enumerate(v):
        if not isinstance(obj, dict):
            raise BadState(f"{where}[{i}] is not an object")
        for name, ok in fields.items():
            ok(obj.get(name), f"{where}[{i}].{name}")


def _opt_text(v, where):
    _text(v, where, none=True)


_AFFECTED = {**{k: _text for k in ("model", "backend", "mode", "dtype", "device", "check_key", "check_id")},
             "first_seen": _opt_text, "last_seen": _opt_text, "occurrences": _count}
_PASSING = {"run": _text, "link": _opt_text, "torch": _opt_text,
            "checks": lambda v, w: _texts(v, w, 100) if v is not None else None}


def validate(d: dict) -> dict:
    """The marker's JSON checked against the shape this version writes (every field's type and a
    bound on its size); raises BadState naming the first field that is wrong. A ``known`` block is
    checked on its own (bot/known.py): a bad one is dropped, the rest of the state stays."""
    if not isinstance(d, dict):
        raise BadState("the state is not an object")
    _text(d.get("sig"), "sig", limit=200)
    if not d["sig"]:
        raise BadState("sig is empty")
    for name in ("sigs", "alt", "checks", "runs", "torch"):
        if name in d:
            _texts(d[name], name)
    for name in ("first_seen", "last_seen", "failed_at"):
        _opt_text(d.get(name), name)
    if "occurrences" in d:
        _count(d["occurrences"], "occurrences")
    if "affected" in d:
        _objects(d["affected"], "affected", MAX_LIST, _AFFECTED)
    if "passing_runs" in d:
        _objects(d["passing_runs"], "passing_runs", MAX_LIST, _PASSING)
    best = d.get("best_repro")
    if best is not None and not (isinstance(best, list) and len(best) == 3
                                 and all(isinstance(x, int) and not isinstance(x, bool) for x in best)):
        raise BadState("best_repro is not three integers")
    for name in ("flaky", "regression"):
        if name in d and not isinstance(d[name], bool):
            raise BadState(f"{name} is not true or false")
    if d.get("repro") is not None and not isinstance(d["repro"], bool):
        raise BadState("repro is not true, false or null")
    return d


def read(body: str | None) -> tuple[IssueState | None, str | None]:
    """(state, None) for a body with a well-formed marker; (None, None) without one; (None, reason)
    when the marker or its state is malformed. A malformed ``known`` block is dropped alone
    (reason: None, the state stands; ``known.check_block`` says why when asked)."""
    d, why = fp.read_marker(body)
    if d is None:
        return None, why
    try:
        validate(d)
    except BadState as exc:
        return None, str(exc)
    extra = {k: v for k, v in d.items() if k not in _FIELDS}
    if len(fp.make_marker(extra)) > MAX_EXTRA_CHARS:
        d = {k: v for k, v in d.items() if k in _FIELDS}  # unknown keys this large were not ours
    return IssueState.from_json(d), None


def parse(body: str | None) -> IssueState | None:
    """The state in an issue body's marker, or None when the body carries none or a malformed one.
    Call it only on issues the bot wrote (check the author first)."""
    return read(body)[0]


def repro_rank(failure: FailureRecord | None) -> tuple:
    """Smaller is better: verified minimized repros first, then fewer nodes."""
    if failure is None:
        return (4, 1, 10 ** 9)
    repro, ver = failure.repro, failure.repro.verification
    status_rank = {"minimized": 0, "partial": 1, "not_reproduced": 2, "none": 3}.get(repro.status, 4)
    verified = 0 if ver is not None and ver.runs and ver.failed_same_way == ver.runs else 1
    nodes = repro.nodes_after
    return (status_rank, verified, nodes if isinstance(nodes, int) else 10 ** 9)


def is_reuse(f: Failure) -> bool:
    """The failure's repro is a known issue's repro, verified again instead of minified (bot/known.py)."""
    return f.failure is not None and f.failure.repro.reused is not None


def is_flaky(group: list[Failure]) -> bool:
    return all(f.failure is not None and bool(f.failure.flaky) for f in group)


def not_compiler(group: list[Failure]) -> str | None:
    """Why the group is no compiler bug (every check failed without the compiler: it could not be
    set up, it fails or varies in eager, a program fails with torch.compile taken out, or compiled
    nothing with it), in the issue's words; None when it may be one."""
    reasons = set()
    for f in group:
        why = _not_compiler(f)
        if why is None:
            return None
        reasons.add(why)
    return " and ".join(sorted(reasons)) or None


def unverified(group: list[Failure]) -> str | None:
    """Why a group is not filed for want of a verified repro: its checks come from a source that files
    only failures whose repro failed the same way on its own (a fuzzer's generated programs), and none
    of them has one (``FailureRecord.repro_verified``); None otherwise."""
    from bot.records import NOT_VERIFIED
    from bot.suites import source_of

    if not group or not all(source_of(f.check.spec).files_only_verified for f in group):
        return None
    if any(f.failure is not None and f.failure.repro_verified for f in group):
        return None
    return NOT_VERIFIED


_NOT_COMPILER_WORDS = {"setup_error": "the model or program could not be set up",
                       "eager_error": "the model fails or varies in eager"}


def _not_compiler(f: Failure) -> str | None:
    from bot.signature import NOT_COMPILER_CLASSES

    c = f.check
    if c.failure_class in NOT_COMPILER_CLASSES:
        return _NOT_COMPILER_WORDS[c.failure_class]
    if f.failure is not None and f.failure.stage == "eager":   # localize: it fails without torch.compile too
        return "the program fails without torch.compile"
    frames = c.compile_frames if c.compile_frames is not None else c.compiled_graphs
    if frames == 0 and c.failure_class != "compile_error" and not _in_compiler(c):
        # the environment hook counted (None: it could not), and the failure names no compiler
        return "the program compiled no graph with torch.compile (an ahead-of-time compile is not captured)"
    return None


def _in_compiler(check: CheckRow) -> bool:
    """The check's error shows torch's compiler at work (a process the hook did not count, an
    error before dynamo started a frame, an ahead-of-time compile)."""
    e = check.error
    text = "\n".join(filter(None, [e.type, e.message, e.traceback])) if e else ""
    return any(m in text for m in ("torch/_inductor", "torch/_dynamo", "torch._inductor", "torch._dynamo"))


def passed_before(check: CheckRow) -> bool:
    """The check passed in an earlier run (the baseline's status for it: --baseline or the dashboard's
    history). A check failing in its first run, or one with no earlier result, did not."""
    from bot.check.results import PASS_STATUSES

    return check.baseline == "new" and check.baseline_status in PASS_STATUSES


def is_regression(group: list[Failure]) -> bool:
    """A regression: not flaky, and one of its checks passed in an earlier run and fails now."""
    return (not is_flaky(group)) and any(passed_before(f.check) for f in group)


# The marker's share of the issue body: GitHub refuses a body over 65,536 characters, and the body's
# text (bot/render.py's budget) is shortened to fit beside the marker; the dashboard's is the same.
STATE_BUDGET = 40000
MAX_NEWLY_AFFECTED = 10  # "newly affected" lines in one update comment; the rest are counted


def _seen_again(items: list[str], values) -> None:
    """Add ``values`` to ``items`` as its most recent entries (one seen before moves to the end), so
    that trimming the oldest entries (``compact``) keeps what the bug still fails on."""
    for v in values:
        if v in items:
            items.remove(v)
        items.append(v)


def _newly_affected(described: list[str]) -> list[str]:
    """The update comment's lines on configurations the bug was not seen on before: one per
    configuration, the rest counted (a bug that spreads to hundreds of checks is one line more, not
    hundreds)."""
    lines = [f"newly affected: {d}" for d in described[:MAX_NEWLY_AFFECTED]]
    if len(described) > MAX_NEWLY_AFFECTED:
        lines.append(f"newly affected: {len(described) - MAX_NEWLY_AFFECTED} more configurations")
    return lines


def _drop_oldest(s: IssueState, name: str, n: int) -> None:
    """Drop ``n`` of the entries of the state's list ``name`` seen longest ago: the first ones of
    ``checks``, ``alt`` and ``sigs`` (most recent last; the issue's own signature always stays first),
    the rows of ``affected`` with the oldest ``last_seen``."""
    items = getattr(s, name)
    if n <= 0:
        return
    if name == "affected":
        gone = set(sorted(range(len(items)), key=lambda i: str(items[i].last_seen or ""))[:n])
        s.affected = [a for i, a in enumerate(items) if i not in gone]
    elif name == "sigs":
        rest = [x for x in items if x != s.sig]
        s.sigs = ([s.sig] if s.sig in items else []) + rest[n:]
    else:
        setattr(s, name, items[n:])


# Trimmed in this order, each down to its floor, until the marker fits: affected rows first (shown
# in the body, which keeps 20 of them when short of room), then check keys (a bug is closed by its
# checks passing, and a configuration missing from them is "newly affected" again) and model
# alternatives, the oldest first (one seen again is the most recent), then the issue's other
# signatures last (the issue is found by ``sigs``: its own is never dropped).
_TRIM_STEPS = (("affected", 20), ("checks", 100), ("alt", 20), ("affected", 10), ("sigs", 20), ("checks", 1),
               ("alt", 0), ("affected", 1), ("sigs", 1))


def compact(state: IssueState, budget: int = STATE_BUDGET) -> IssueState:
    """The state as the marker can hold it: every list within what ``validate`` accepts (a state it
    rejects is ignored on the next run, and the bug is filed again as a new issue), and the marker
    under ``budget`` characters, so that the issue body fits GitHub's limit beside it. The entries
    seen longest ago go first (``_TRIM_STEPS``)."""
    s = copy.deepcopy(state)
    if s.sig in s.sigs:
        s.sigs = [s.sig] + [x for x in s.sigs if x != s.sig]
    for name in ("sigs", "alt", "checks"):
        _drop_oldest(s, name, len(getattr(s, name)) - MAX_LIST)
    for name, floor in _TRIM_STEPS:
        while len(s.marker()) > budget and len(getattr(s, name)) > floor:
            items = len(getattr(s, name))
            _drop_oldest(s, name, max(1, min(items - floor, items // 10)))
    return s


def merge_state(state: IssueState | None, group: list[Failure], run_id: str,
                when: str, *, trusted: bool = True, number: int | None = None,
                evidence: str | None = None) -> tuple[IssueState, list[str]]:
    """Fold this run's failures of one bug into the issue's state. Returns (state, events worth a comment).
    ``trusted``: the failures come from a run of trusted code. Only such a run may record the repro
    that later runs execute instead of minifying (``known``); a pull-request run's artifact never does.
    ``number``: the issue's number, which a fresh known block is signed for (``sign_known``; a new
    issue's block is signed once it has one). ``evidence``: this run's commit and build as the
    report's own environment gives them (``failed_at``). The state comes back compacted
    (``compact``): whatever the bug's size, the next run reads it back."""
    new = state is None
    s = copy.deepcopy(state) if state is not None else IssueState.new(group[0].fingerprint.primary, when)
    events: list[str] = []
    if not str(s.sig).startswith(f"{fp.VERSION}:"):
        # filed under an older fingerprint version: the marker moves to this version's signature
        # (the old keys stay in "sigs", so the issue is still found by them); no event, no comment
        s.sig = group[0].fingerprint.primary
    elif s.sig in group[0].fingerprint.former:
        # filed under the key this bug had before (its compiler's words): it takes the bug's key now
        s.sig = group[0].fingerprint.primary
    s.repro = s.has_repro or any(f.fingerprint.has_repro for f in group)
    seen = set(s.checks) | {a.check_key for a in s.affected}  # the configurations it was seen on before
    newly: list[tuple[str, str]] = []  # (check key, the configuration in words)
    for f in group:
        for vals, into in (([f.fingerprint.primary], s.sigs), (f.fingerprint.alternatives, s.alt),
                           ([f.fingerprint.check_key], s.checks)):
            _seen_again(into, vals)
        aff = next((a for a in s.affected if a.check_key == f.fingerprint.check_key), None)
        if aff is None:
            aff = AffectedCheck.of(f.check, when)
            if len(s.affected) < MAX_AFFECTED:
                s.affected.append(aff)
            if not new and aff.check_key not in seen:
                newly.append((aff.check_key, aff.describe()))
            seen.add(aff.check_key)
        aff.last_seen = when
        aff.occurrences += 1
        torch_v = f.failure.torch if f.failure else None
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
    # passing runs recorded since its last failure: its checks passed in an earlier run, so failing
    # again is a regression (whatever the baseline says)
    back = bool(s.passing_runs) and not is_flaky(group)
    s.regression = bool(s.regression) or is_regression(group) or back
    s.passing_runs = []
    if evidence is not None and trusted:
        s.failed_at = evidence   # where it last failed, as the report's environment says (not the artifact)
    fresh = None
    for f in sorted(group, key=lambda f: repro_rank(f.failure)) if trusted else ():  # the best verified repro
        fresh = known.block_of(f.failure, f.repro_text)
        if fresh is not None:
            s.known = known.merge_block(s.known, fresh)
            break
    s = compact(s)
    if fresh is not None and number is not None:
        s = sign_known(s, number)
    # a configuration the state cannot hold (a bug seen on more checks than it keeps) is not news:
    # it would be "newly affected" again in every run
    kept = set(s.checks)
    return s, _newly_affected([words for key, words in newly if key in kept]) + events


def sign_known(state: IssueState, number: int) -> IssueState:
    """The state with its known block signed with the bot's key (MINIFY_BOT_SIGNING_KEY; unsigned
    without it) for issue ``number`` and the state's check keys: only a block the bot signed is ever
    run (bot/known.py). Call it only for a block this report made from its own rendering
    (``merge_state``), never for one read back from the issue: that would sign what someone else
    wrote. The block's signature makes the marker longer: the state is compacted again, and signed
    again when that dropped a check key."""
    import os

    from bot import signing

    signer = signing.signer_from_env(os.environ)
    if state.known is None or signer is None:
        return state
    s = state
    for _ in range(3):
        s.known = known.signed(s.known.replace(sig=None), signer, number, s.checks)
        checks = list(s.checks)
        s = compact(s)
        if s.checks == checks:
            break
    return s


def with_passing_run(state: IssueState, run: PassingRun) -> IssueState:
    """The state after a run in which the bug's checks passed."""
    new = copy.deepcopy(state)
    new.passing_runs = (new.passing_runs + [run])[-MAX_PASSING_RUNS:]
    return new


# Labels the bot sets come from these words only: an artifact's class or stage never becomes a label
# (a label is created on first use and shown to everyone).
CLASS_LABELS = ("accuracy", "compile_error", "runtime_error", "crash", "timeout", "oom", "eager_error",
                "setup_error")
STAGE_LABELS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")
NEW_LABEL = "new"


def labels_for(state: IssueState, group: list[Failure], base: list[str], bot_label: str) -> list[str]:
    """The issue's labels: the bot's, the failure class and stage (allowlisted words), ``flaky``, and
    ``regression`` when a check of it passed in an earlier run, else ``new`` when the issue is filed
    (a first sighting is never a regression). Labels people added are kept."""
    rep = group[0]
    wanted = [bot_label]
    if rep.fingerprint.parts.get("class") in CLASS_LABELS:
        wanted.append(rep.fingerprint.parts["class"])
    if rep.fingerprint.parts.get("stage") in STAGE_LABELS:
        wanted.append(rep.fingerprint.parts["stage"])
    out = [x for x in base if x not in ("flaky", "regression", NEW_LABEL)]
    regression = bool(state.regression) and not state.flaky
    if regression:
        wanted.append("regression")
    elif not state.flaky and (not base or NEW_LABEL in base):
        wanted.append(NEW_LABEL)  # a first sighting (kept until it is known to have regressed)
    for x in wanted + (["flaky"] if state.flaky else []):
        if x not in out:
            out.append(x)
    return out


_FIELDS = {f.name for f in dataclasses.fields(IssueState)} - {"extra"}
