"""The dashboard: one issue the bot edits every run, holding the sweep's history.

It is three things (docs/dashboard.md):
- the history store: the hidden marker at the end of the dashboard issue's body keeps, for the last
  ``MAX_RUNS`` runs, the pass counts per configuration and, per check, its status, failure class,
  fingerprint and a one-letter-per-run history; older runs are compacted into a count. The next
  report reads it back with the token it already has: no file for the user to keep.
- the automatic baseline: with no ``--baseline``, a failure whose check passed in the previous run is
  new (a regression), one that was failing is known, a pass that was failing is fixed.
- the requests people make by ticking checkboxes in the body: mute a check, retry a flaky check,
  re-minify an issue's checks.

The report lifecycle calls ``before_report`` (reads; applies the baseline, mutes, flakes) and
``after_report`` (writes the dashboard); ``requests_from`` serves the check stage.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from typing import ClassVar

from bot import fingerprint as fp
from bot.check.results import PASS_STATUSES, is_failure, mark_baseline
from bot.failure import FailureRecord
from bot.records import CheckRow, DashboardRef, Record, ReportAction, Repro, ResultsDoc, SparseRecord
from bot.records import key as json_key
from bot.report.view import ReportView
from bot.tracker.base import Issue, Tracker

LABEL = "minify-bot-dashboard"
TITLE = "minify-bot dashboard"
KIND = "dashboard"
SIG = "minify-bot-dashboard"  # stands in the marker's "sigs" so trackers can find a lost create
MAX_RUNS = 30  # runs kept in full; older ones are compacted into a count
STATE_BUDGET = 40000  # characters of marker JSON; the rest of the 65,536 is the rendered body
FLIP_WINDOW = 10  # runs looked at to decide that a check "keeps flipping"
FLIP_LIMIT = 2  # flaky reruns + pass/fail flips in the window from which a flaky check is filed
LIST_LIMIT = 50  # rows per list before the budget cuts further

# one letter per run in a check's history
PASS, FAIL, FLAKY, MUTED = "P", "F", "K", "M"

_BOX_RX = re.compile(r"^\s*[-*] \[( |x|X)\] <!-- minify-box:(mute|retry|reminify):([A-Za-z0-9_.-]{1,200}) -->",
                     re.M)


# ---------------------------------------------------------------------------- records

@dataclasses.dataclass
class Requests:
    """What the ticked boxes ask of the next run."""
    mute: set[str] = dataclasses.field(default_factory=set)  # check ids
    retry: set[str] = dataclasses.field(default_factory=set)  # check ids
    reminify: set[int] = dataclasses.field(default_factory=set)  # issue numbers

    def to_dict(self) -> dict:
        return {"mute": sorted(self.mute), "retry": sorted(self.retry), "reminify": sorted(self.reminify)}


@dataclasses.dataclass
class HistoryRun(SparseRecord):
    """One run of the history: its id, when it ended, its link, its pass counts per configuration
    (``configs``: configuration key -> [passed, total, flaky]) and the torch it checked."""

    WRITTEN: ClassVar[frozenset[str]] = frozenset({"when", "url"})

    id: str
    when: str | None = None
    url: str | None = None
    configs: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    torch: str | None = None          # bot.builds.version_word


@dataclasses.dataclass
class OlderRuns(Record):
    """The runs compacted out of the history: how many, and when the first of them ran."""

    runs: int = 0
    first: str | None = None


@dataclasses.dataclass
class CheckHistory(SparseRecord):
    """One check in the history, under one-letter keys (the marker holds thousands of them)."""

    history: str = dataclasses.field(default="", metadata=json_key("h"))  # one letter per run, oldest first
    status: str | None = dataclasses.field(default=None, metadata=json_key("s"))
    before: str | None = dataclasses.field(default=None, metadata=json_key("b"))  # its status in the run before
    failure_class: str | None = dataclasses.field(default=None, metadata=json_key("c"))
    fingerprint: str | None = dataclasses.field(default=None, metadata=json_key("f"))
    issue: int | None = dataclasses.field(default=None, metadata=json_key("i"))  # the issue of its last failure
    config: str | None = dataclasses.field(default=None, metadata=json_key("k"))  # config_key
    model: str | None = dataclasses.field(default=None, metadata=json_key("m"))


@dataclasses.dataclass
class History(Record):
    """The dashboard marker's state: the last ``MAX_RUNS`` runs, a count of older ones, each
    check's history by id, and the id hashes of checks compacted away because they always passed.
    It comes back from an issue body people can edit: ``_bad_history`` checks its JSON first."""

    kind: str = KIND
    sigs: list[str] = dataclasses.field(default_factory=lambda: [SIG])
    v: int = 1
    runs: list[HistoryRun] = dataclasses.field(default_factory=list)
    older: OlderRuns = dataclasses.field(default_factory=OlderRuns)
    checks: dict[str, CheckHistory] = dataclasses.field(default_factory=dict)
    passing: str = ""

    def again(self, run_id: str | None) -> bool:
        """Whether ``run_id`` is the last run recorded (the same run reported again)."""
        return bool(self.runs) and run_id is not None and self.runs[-1].id == run_id

    def drop_oldest_run(self) -> None:
        old = self.runs.pop(0)
        self.older.runs += 1
        self.older.first = self.older.first or old.when

    def marker_size(self) -> int:
        return len(fp.make_marker(self.to_json()))


@dataclasses.dataclass
class Board:
    """The dashboard as read before a report, and what the report should see."""
    issue: Issue | None
    state: History
    requests: Requests
    failures: list  # bot.report.Failure, muted ones removed, flipping flaky ones added
    passing: list[CheckRow]  # passing rows, flaky ones removed (a flaky pass does not close an issue)
    muted: list  # bot.report.Failure of muted checks
    flaky_rows: list[CheckRow]  # rows that failed and then passed on rerun
    auto_baseline: bool  # whether the history was used as the baseline
    run_id: str = ""


# ---------------------------------------------------------------------------- small helpers

def config_key(row: CheckRow) -> str:
    """The configuration a check belongs to: backend, mode, dtype, device type, dynamic shapes.
    Compiler config overrides are not part of it (a run with an injected bug is the same config)."""
    return "|".join([str(row.backend), str(row.mode), str(row.dtype), fp.device_type(row.device),
                     "dynamic" if row.dynamic else "static"])


def config_fields(key: str) -> dict:
    backend, mode, dtype, device, dyn = (key.split("|") + ["?"] * 5)[:5]
    return {"backend": backend, "mode": mode, "dtype": dtype, "device": device, "dynamic": dyn == "dynamic"}


HASH_LEN = 8


def _hash(check_id: str) -> str:
    return hashlib.sha1(check_id.encode()).hexdigest()[:HASH_LEN]


def _passing_set(state: History) -> set[str]:
    """Checks compacted away because they always passed: their id hashes, concatenated in one string."""
    text = state.passing
    return {text[i:i + HASH_LEN] for i in range(0, len(text), HASH_LEN)}


def letter(row: CheckRow, muted: bool = False) -> str:
    if row.flaky:
        return FLAKY
    if is_failure(row):
        return MUTED if muted else FAIL
    return PASS


def flips(history: str) -> int:
    """Flaky reruns plus pass<->fail changes in the last FLIP_WINDOW runs."""
    h = history[-FLIP_WINDOW:]
    n = h.count(FLAKY)
    seq = [c for c in h if c in (PASS, FAIL)]
    n += sum(1 for a, b in zip(seq, seq[1:]) if a != b)
    return n


def previous_status(state: History, check_id: str, run_id: str | None = None) -> str | None:
    """The check's status in the last run the history knows of before ``run_id``, or None when it never
    ran. (Reporting a run again compares against the run before it, not against itself.)"""
    ent = state.checks.get(check_id)
    if ent:
        return ent.before if state.again(run_id) else ent.status
    if _hash(check_id) in _passing_set(state):
        return "pass"
    return None


def _box_ok(check_id: str) -> bool:
    """Whether a check id can sit in a box's hidden tag (no way to close the HTML comment early)."""
    return bool(re.fullmatch(r"[A-Za-z0-9_.-]{1,200}", check_id)) and "--" not in check_id


def parse_requests(body: str | None) -> Requests:
    """The ticked boxes of a dashboard body. Only boxes the bot wrote count (each carries a hidden tag)."""
    req = Requests()
    for mark, kind, target in _BOX_RX.findall(body or ""):
        if mark == " ":
            continue
        if kind == "reminify":
            if target.isdigit():
                req.reminify.add(int(target))
        else:
            getattr(req, kind).add(target)
    return req


# ---------------------------------------------------------------------------- the tracker side

def _bad_history(state) -> str | None:
    """Why a dashboard marker's state does not have the shape this version writes (None when it does):
    the types and sizes of every field ``record_run``, ``previous_status`` and the view read."""
    def text(v, n=4096, none=True):
        return (v is None and none) or (isinstance(v, str) and len(v) <= n)

    def count(v):
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10 ** 12

    if not isinstance(state, dict) or state.get("kind") != KIND:
        return "not a dashboard state"
    runs = state.get("runs", [])
    if not isinstance(runs, list) or len(runs) > 10 * MAX_RUNS:
        return "runs is not a list of runs"
    for i, r in enumerate(runs):
        if not (isinstance(r, dict) and text(r.get("id"), 200, none=False) and text(r.get("when"), 100)
                and text(r.get("url"), 2000) and text(r.get("torch"), 100)):
            return f"runs[{i}] is malformed"
        configs = r.get("configs")
        if not isinstance(configs, dict) or len(configs) > 10000 or not all(
                isinstance(k, str) and len(k) <= 400 and isinstance(v, list) and len(v) == 3 and all(map(count, v))
                for k, v in configs.items()):
            return f"runs[{i}].configs is not pass counts per configuration"
    older = state.get("older", {"runs": 0, "first": None})
    if not (isinstance(older, dict) and count(older.get("runs", 0)) and text(older.get("first"), 100)):
        return "older is malformed"
    if not text(state.get("passing", ""), 10 ** 6, none=False):
        return "passing is not a string"
    checks = state.get("checks", {})
    if not isinstance(checks, dict) or len(checks) > 100000:
        return "checks is not an object"
    for cid, e in checks.items():
        if not (isinstance(cid, str) and len(cid) <= 400 and isinstance(e, dict)):
            return "checks holds a malformed entry"
        texts = (("s", 60), ("b", 60), ("c", 60), ("f", 200), ("k", 400), ("m", 400))
        if not (text(e.get("h", ""), 200, none=False) and all(text(e.get(k), n) for k, n in texts)
                and (e.get("i") is None or count(e.get("i")))):
            return f"checks[{cid[:60]!r}] is malformed"
    return None


def find_all(tracker: Tracker, say=None) -> list[tuple[Issue, History]]:
    """Every dashboard issue authored by the bot with its state: open before closed, then the oldest.
    The author is checked before the marker is read; a dashboard whose hidden history is malformed
    (edited by hand) is kept with an empty history and a warning naming the issue."""
    import sys

    say = say or (lambda m: print(m, file=sys.stderr))
    me = tracker.bot_login()
    found = []
    for issue in tracker.list_issues(LABEL):
        if issue.author != me or not issue.title.startswith(TITLE):
            continue
        state, why = fp.read_marker(issue.body)
        if state is None and why is None:
            continue  # no marker: not a dashboard the bot wrote
        if state is not None and state.get("kind") != KIND:
            continue
        why = why or _bad_history(state)
        if why:
            say(f"warning: dashboard issue #{issue.number}: its hidden history is malformed and was ignored ({why}); "
                "it starts again from this run")
        found.append((issue.state != "open", issue.number, issue, History() if why else History.from_json(state)))
    found.sort(key=lambda t: t[:2])
    return [(t[2], t[3]) for t in found]


def find(tracker: Tracker) -> tuple[Issue | None, History | None]:
    """The dashboard issue and its state (None, None when there is none yet)."""
    found = find_all(tracker)
    return found[0] if found else (None, None)


def requests_from(tracker: Tracker) -> Requests:
    """What the dashboard's ticked boxes ask for (empty when there is no dashboard yet)."""
    issue, _ = find(tracker)
    return parse_requests(issue.body) if issue else Requests()


# ---------------------------------------------------------------------------- before the report

def before_report(tracker: Tracker, results: ResultsDoc, failures: list, passing: list[CheckRow], run_id: str) -> Board:
    """Read the dashboard; apply the automatic baseline (unless the check had --baseline), drop muted
    failures, and turn flaky checks that keep flipping into failures to file (labelled flaky)."""
    from bot.report.load import Failure

    issue, state = find(tracker)
    state = state if state is not None else History()
    requests = parse_requests(issue.body) if issue else Requests()
    rows = [f.check for f in failures] + list(passing)
    flaky_rows = [r for r in results.checks if r.flaky and not is_failure(r)]
    user_baseline = bool(results.settings.baseline)
    auto = not user_baseline and len(state.runs) > (1 if state.again(run_id) else 0)
    if auto:
        for row in rows + flaky_rows:
            before = previous_status(state, row.id, run_id)
            mark_baseline(row, {row.id: before} if before is not None else {})
    kept, muted = [], []
    for f in failures:
        (muted if f.check.id in requests.mute else kept).append(f)
    flaky_ids = {r.id for r in flaky_rows}
    passing = [r for r in passing if r.id not in flaky_ids]
    for row in flaky_rows:
        ent = state.checks.get(row.id) or CheckHistory()
        history = ent.history + FLAKY
        if flips(history) >= FLIP_LIMIT and row.id not in requests.mute:
            check = failing_view(row)
            record = FailureRecord(check.id, check, flaky=True, repro=Repro(status=None, queries=None))
            kept.append(Failure(check, record, None, None, fp.compute(check, None)))
    return Board(issue=issue, state=state, requests=requests, failures=kept, passing=passing, muted=muted,
                 flaky_rows=flaky_rows, auto_baseline=auto, run_id=run_id)


def failing_view(row: CheckRow) -> CheckRow:
    """A flaky row (passed on rerun) as the failing check its first attempt was."""
    check = copy.deepcopy(row)
    first = row.flaky
    if first is not None:
        check.status, check.failure_class = first.status, first.failure_class
        check.error, check.accuracy = copy.deepcopy(first.error), copy.deepcopy(first.accuracy)
    if not check.failure_class:
        check.failure_class = "runtime_error"
    return check


# ---------------------------------------------------------------------------- history

def record_run(state: History | None, run: HistoryRun, rows: list[CheckRow], muted_ids: set[str],
               fingerprints: dict[str, str], issues: dict[str, int] | None = None) -> History:
    """Fold one run into the history (its pass counts per configuration are counted here from
    ``rows``). Reporting the same run again replaces its entry instead of adding one."""
    s = copy.deepcopy(state) if state else History()
    again = s.again(run.id)
    entry = run.replace(configs=_counts(rows))
    if again:
        s.runs[-1] = entry
    else:
        s.runs.append(entry)
    while len(s.runs) > MAX_RUNS:
        s.drop_oldest_run()
    passing_hashes = _passing_set(s)
    for row in rows:
        cid = row.id
        ent = s.checks.get(cid)
        if ent is None:
            ent = CheckHistory(history=PASS if _hash(cid) in passing_hashes else "")
            passing_hashes.discard(_hash(cid))
        elif again and ent.history:
            ent.history = ent.history[:-1]
        if not again:
            ent.before = ent.status
        ent.history = (ent.history + letter(row, cid in muted_ids))[-MAX_RUNS:]
        first = row.flaky
        ent.status = first.status if first else row.status
        ent.failure_class = first.failure_class if first else row.failure_class
        ent.fingerprint = fingerprints.get(cid)
        if (issues or {}).get(cid):
            ent.issue = issues[cid]  # the bug issue last linked to this check (kept while it passes)
        ent.config = config_key(row)
        ent.model = str(row.model)[:200]
        s.checks[cid] = ent
    s.passing = "".join(sorted(passing_hashes))
    return compact(s)


def compact(state: History, budget: int = STATE_BUDGET) -> History:
    """Keep the marker under ``budget`` characters: first forget the details of checks that passed in
    every run they were seen (only a short hash of their id is kept, enough for the baseline), then
    shorten histories, then drop fingerprints, then drop the oldest runs."""
    if state.marker_size() <= budget:
        return state
    s = copy.deepcopy(state)
    hashes = _passing_set(s)
    for cid in [c for c, e in s.checks.items() if set(e.history or PASS) == {PASS}]:
        hashes.add(_hash(cid))
        del s.checks[cid]
    s.passing = "".join(sorted(hashes))
    for keep in (10, 3):
        if s.marker_size() <= budget:
            return s
        for e in s.checks.values():
            e.history = e.history[-keep:]
    if s.marker_size() > budget:
        for e in s.checks.values():
            e.fingerprint = e.model = None
    while s.marker_size() > budget and len(s.runs) > 3:
        s.drop_oldest_run()
    if s.marker_size() > budget:  # a sweep of tens of thousands of checks: keep only the failing ones
        s.passing = ""
        s.checks = {c: e for c, e in s.checks.items() if e.status not in PASS_STATUSES}
    return s


# ---------------------------------------------------------------------------- the view

def _links(actions: list[ReportAction]) -> dict[str, dict]:
    """check id -> {"issue", "url", "action"} from this run's report actions."""
    out: dict[str, dict] = {}
    for a in actions:
        for cid in a.checks or []:
            if a.issue and (cid not in out or not out[cid].get("issue")):
                out[cid] = {"issue": a.issue, "url": a.url, "action": a.action}
            elif cid not in out:
                out[cid] = {"issue": None, "url": None, "action": a.action, "reason": a.reason}
    return out


def _chart_label(when, k: int) -> str:
    text = re.sub(r"[^0-9:T-]", "", str(when or ""))
    m = re.match(r"\d{4}-(\d\d-\d\d)T(\d\d:\d\d)", text)
    return f"{k}: {m.group(1)} {m.group(2)}" if m else f"run {k}"


def build_view(board: Board, state: History, rows: list[CheckRow], actions: list[ReportAction], run: dict,
               honoured: dict) -> dict:
    """Everything templates/dashboard.md.j2 shows. ``run``: this run as the template shows it."""
    links = _links(actions)
    runs = state.runs
    prev = runs[-2] if len(runs) >= 2 else None
    cur = runs[-1]
    configs = []
    for key in sorted(cur.configs):
        passed, total, flaky = (cur.configs[key] + [0, 0, 0])[:3]
        before = prev.configs.get(key) if prev else None
        configs.append({**config_fields(key), "key": key, "passed": passed, "total": total, "flaky": flaky,
                        "delta": (passed - before[0]) if before else None,
                        "prev_total": before[1] if before else None})
    muted_ids = {f.check.id for f in board.muted}
    old = board.state.checks

    def item(row: CheckRow, **extra):
        link = links.get(row.id) or {}
        issue = link.get("issue")
        if issue is None and not is_failure(row) and not row.flaky:
            issue = old[row.id].issue if row.id in old else None  # a fixed check: the issue of its last failure
        return {"id": row.id, "model": row.model, "config": config_key(row),
                "status": row.status, "class": row.failure_class, "issue": issue,
                "url": link.get("url"), "why": link.get("reason"), **extra}

    new, known, fixed, flaky, muted = [], [], [], [], []
    for row in sorted(rows, key=lambda r: r.id):
        before = previous_status(board.state, row.id, board.run_id) if board.auto_baseline else None
        failed_before = before is not None and before not in PASS_STATUSES
        if row.id in muted_ids:
            muted.append(item(row))
        elif row.flaky:
            history = old[row.id].history if row.id in old else ""
            flaky.append(item(row, status=row.flaky.status, flips=flips(history + FLAKY)))
        elif is_failure(row):
            (known if failed_before else new).append(item(row))
        elif failed_before:
            fixed.append(item(row, before=before))
    chart_runs = runs[-MAX_RUNS:]
    keys = [c["key"] for c in configs]
    chart = {"x": [_chart_label(r.when, k) for k, r in enumerate(chart_runs, 1)],
             "lines": [[(r.configs.get(key) or [0, 0])[0] for r in chart_runs] for key in keys],
             "ymax": max([1] + [(r.configs.get(key) or [0, 0])[1] for r in chart_runs for key in keys]),
             "names": keys,
             "torch": [r.torch for r in chart_runs]}
    reminify = sorted({i["issue"] for i in new + known if i["issue"]})
    boxable = [i["id"] for i in new + known + flaky + muted if _box_ok(i["id"])]
    return {"run": run, "configs": configs, "new": new, "known": known, "fixed": fixed, "flaky": flaky,
            "muted": muted, "chart": chart, "older": state.older.to_json(), "n_runs": len(runs),
            "boxes": {"reminify": reminify, "retry": [i["id"] for i in flaky if _box_ok(i["id"])],
                      "mute": sorted(set(boxable)),
                      "muted": muted_ids},
            "honoured": honoured, "auto_baseline": board.auto_baseline,
            "omitted": {}}


def _budget_steps(view: dict):
    """Progressively shorter views for a body that does not fit."""
    for limit in (LIST_LIMIT, 10, 0):
        v = dict(view)
        v["omitted"] = {}
        for key in ("known", "fixed", "flaky", "new", "muted"):
            if len(view[key]) > limit:
                v[key] = view[key][:limit]
                v["omitted"][key] = len(view[key]) - limit
        boxes = dict(view["boxes"])
        if limit < LIST_LIMIT:
            boxes["mute"] = [m for m in boxes["mute"] if m in boxes["muted"]]
        else:
            boxes["mute"] = boxes["mute"][:limit]
        v["boxes"] = boxes
        yield v


def render(renderer, view: dict, state: History) -> str:
    from bot.render import BODY_BUDGET

    marker = fp.make_marker(state.to_json())
    room = BODY_BUDGET - len(marker) - 2
    text = renderer.render("dashboard.md.j2", **view)
    if len(text) > room:
        for v in _budget_steps(view):
            text = renderer.render("dashboard.md.j2", **v)
            if len(text) <= room:
                break
    if len(text) > room:
        text = text[: room - 200] + "\n\n[... dashboard truncated to fit GitHub's limit; see the artifacts ...]\n"
    return text.rstrip("\n") + "\n\n" + marker + "\n"


# ---------------------------------------------------------------------------- after the report

def after_report(board: Board, rep: ReportView, results: ResultsDoc) -> DashboardRef:
    """Record this run in the history and write the dashboard (create it, or edit it in place: never a
    comment). Returns the dashboard issue (also report.json's "dashboard")."""
    rows = [r for r in results.checks if r.id]
    for f in board.muted:
        rep.record("skipped", [f], None, "muted on the dashboard; not filed")
    fingerprints = {}
    for f in board.failures + board.muted:
        fingerprints[f.check.id] = f.fingerprint.primary
    from bot.builds import results_torch

    run = HistoryRun(rep.run_id, results.when, rep.opts.run_url, torch=results_torch(results))
    muted_ids = {f.check.id for f in board.muted}
    issues = {cid: a["issue"] for cid, a in _links(rep.actions).items() if a.get("issue")}
    state = record_run(board.state, run, rows, muted_ids, fingerprints, issues)
    honoured_retry = set(results.settings.retry or [])
    honoured = {"retry": sorted(board.requests.retry & honoured_retry),
                "reminify": sorted(board.requests.reminify), "mute": sorted(muted_ids)}
    shown = {"id": run.id, "when": run.when, "url": run.url, "artifact_url": rep.opts.artifact_url, "torch": run.torch}
    view = build_view(board, state, rows, rep.actions, shown, honoured)
    # boxes still waiting for a run that can honour them stay ticked
    view["boxes"]["pending_retry"] = sorted(board.requests.retry - honoured_retry)
    view["boxes"]["muted"] = sorted(board.requests.mute)
    body = render(rep.renderer, view, state)
    title = TITLE
    tracker = rep.tracker
    tracker.ensure_label(LABEL, "0e8a16", "The minify-bot dashboard: status over time, requests by checkbox")
    if board.issue is not None and board.issue.body == body and board.issue.state == "open":
        issue, action = board.issue, "unchanged"
    elif board.issue is None:
        issue = tracker.create_issue(title, body, [LABEL], [], SIG)
        action = "created"
        # Re-check: a concurrent reporter may have created one too. The oldest open one survives.
        survivor, _ = find(tracker)
        if survivor is not None and survivor.number != issue.number and survivor.state == "open":
            tracker.edit_issue(issue.number, state="closed", state_reason="not_planned")
            issue = tracker.edit_issue(survivor.number, body=body)
            action = "updated"
    else:
        issue = tracker.edit_issue(board.issue.number, body=body,
                                   state="open" if board.issue.state != "open" else None)
        action = "updated"
    for extra, _ in find_all(tracker):  # duplicates left by a race: closed, never commented on
        if extra.number != issue.number and extra.state == "open":
            tracker.edit_issue(extra.number, state="closed", state_reason="not_planned")
    rec = DashboardRef(issue.number, issue.url, action)
    rep.dashboard = rec  # report.json "dashboard" (kept apart from the bug-issue actions)
    rep.write_report()
    return rec


def _counts(rows: list[CheckRow]) -> dict[str, list[int]]:
    """Per configuration key of a run: [passed, total, flaky] (a history run's ``configs``)."""
    counts: dict[str, list[int]] = {}
    for row in rows:
        c = counts.setdefault(config_key(row), [0, 0, 0])
        c[1] += 1
        c[0] += 0 if is_failure(row) else 1
        c[2] += 1 if row.flaky else 0
    return counts


def configuration_counts(rows: list[CheckRow]) -> list[dict]:
    """Per configuration of a run: {backend, mode, dtype, device, dynamic, passed, total, flaky}, sorted."""
    return [{**config_fields(k), "passed": c[0], "total": c[1], "flaky": c[2]}
            for k, c in sorted(_counts(rows).items())]
