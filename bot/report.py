"""The report lifecycle: one issue per bug, filed, updated, reopened and closed.

Entry point for other commands (e.g. ``minify-bot run``)::

    from bot.report import ReportOptions, report_run
    from bot.tracker.local import LocalTracker
    result = report_run("minify-out", LocalTracker("minify-out/issues"), ReportOptions())
    result.counts        # {"created": 1, "updated": 0, ...}
    result.actions       # what was done, as written to report.json

``report_run`` validates every input file before it writes anything (bad input: UsageError, exit 2),
writes ``report.json`` after every action (so a GitHub failure half-way loses nothing: TrackerError,
exit 3) and ``summary.md`` at the end. Rules: docs/reporting.md.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as _dt
import hashlib
import json
import os
import re
import shlex
from pathlib import Path

from bot import fingerprint as fp
from bot import known
from bot import rundir
from bot import signature as sg
from bot.errors import BotError, UsageError
from bot.render import Renderer
from bot.tracker.base import Issue, Tracker

REPORT_SCHEMA = rundir.REPORT_SCHEMA
MAX_AFFECTED = 50
MAX_RUNS = 20
INLINE_REPRO_LIMIT = 40000
CLASS_WORDS = {
    "accuracy": "accuracy failure", "compile_error": "compile error", "runtime_error": "runtime error",
    "crash": "crash", "timeout": "timeout", "oom": "out of memory", "eager_error": "eager failure",
    "setup_error": "setup failure",
}


@dataclasses.dataclass
class ReportOptions:
    label: str = "minify-bot"
    max_new: int = 10  # new issues per run; the rest are listed in the summary
    close_after: int = 2  # consecutive passing runs before an issue is closed
    assignees: list[str] = dataclasses.field(default_factory=list)
    templates_dir: str | None = None
    dry_run: bool = False  # only recorded in report.json / the summary; pick a LocalTracker for it
    run_url: str | None = None
    artifact_url: str | None = None
    run_id: str | None = None  # default: derived from results.json (same run dir -> same id)
    file_flaky: bool = True  # file failures that passed on rerun (labelled flaky), or only list them
    # The results come from an unmerged pull request: only create issues or comment on open ones.
    # Such a run is not the main branch: it never counts as a passing run, closes, reopens, or
    # rewrites an issue's body.
    pr_run: bool = False
    # Commands this report's own configuration names (`run --command`, `report --command`, the
    # action's `command` input). A command check whose command is one of these is shown verbatim in
    # "Reproduce locally"; any other command string is an artifact's and is never shown as one.
    trusted_commands: tuple[str, ...] = ()
    # keep the dashboard issue and its history (bot/dashboard.py); `minify-bot report` turns it on unless
    # --no-dashboard, library callers opt in
    dashboard: bool = False


@dataclasses.dataclass
class ReportResult:
    run_id: str
    actions: list[dict]
    report_path: Path
    summary_path: Path | None = None
    error: str | None = None

    @property
    def counts(self) -> dict:
        return count_actions(self.actions)


def count_actions(actions: list[dict]) -> dict:
    c = {k: 0 for k in ("created", "updated", "reopened", "closed", "commented", "skipped", "unchanged",
                        "duplicate_closed", "capped")}
    for a in actions:
        c[a["action"]] = c.get(a["action"], 0) + 1
        if a.get("commented"):
            c["commented"] += 1
    c["skipped"] += c["capped"]
    return c


# ---------------------------------------------------------------------------- reading the run dir

@dataclasses.dataclass
class Failure:
    check: dict
    failure: dict | None
    dir: Path | None
    repro_text: str | None
    fingerprint: fp.Fingerprint


def _inside(base: Path, rel) -> Path | None:
    if not isinstance(rel, str) or not rel:
        return None
    p = (base / rel).resolve()
    try:
        p.relative_to(base.resolve())
    except ValueError:
        return None
    return p if p.is_file() else None


def load_run(run_dir: str | os.PathLike) -> tuple[dict, list[Failure], list[dict]]:
    """(results, failures, passing checks), read through bot.rundir; raises UsageError on bad input."""
    run = Path(run_dir)
    results = rundir.read_results(run)
    failures, passing = [], []
    for check in results["checks"]:
        if not check.get("failure_class"):
            if check["status"] == "pass":
                passing.append(check)
            continue
        fdir = rundir.failure_dir(run, check["id"])
        failure = rundir.read_failure(run, check["id"])
        repro_text = None
        rp = _inside(fdir, ((failure or {}).get("repro") or {}).get("path")) if failure else None
        if rp:
            try:
                repro_text = rp.read_text(encoding="utf-8", errors="replace")
            except OSError:
                repro_text = None
        failures.append(Failure(check, failure, fdir if failure else None, repro_text,
                                fp.compute(check, failure)))
    return results, failures, passing


def default_run_id(results: dict) -> str:
    basis = {k: results.get(k) for k in ("started", "settings", "versions")}
    basis["checks"] = sorted(c.get("id", "") for c in results.get("checks", []) if isinstance(c, dict))
    return "run-" + hashlib.sha1(json.dumps(basis, sort_keys=True, default=str).encode()).hexdigest()[:12]


# ---------------------------------------------------------------------------- issue state

def _repro_rank(failure: dict | None) -> tuple:
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


def _is_flaky(group: list[Failure]) -> bool:
    return all(bool((f.failure or {}).get("flaky")) for f in group)


def _is_regression(group: list[Failure]) -> bool:
    return (not _is_flaky(group)) and any(f.check.get("baseline") == "new" for f in group)


def merge_state(state: dict | None, group: list[Failure], run_id: str, when: str) -> tuple[dict, list[str]]:
    """Fold this run's failures of one bug into the issue's state. Returns (state, events worth a comment)."""
    new = state is None
    s = copy.deepcopy(state) if state else {
        "sig": group[0].fingerprint.primary, "sigs": [], "alt": [], "checks": [], "runs": [],
        "first_seen": when, "last_seen": when, "occurrences": 0, "affected": [], "torch": [],
        "best_repro": None, "flaky": True, "regression": False, "passing_runs": [], "repro": False,
    }
    events: list[str] = []
    if not str(s.get("sig", "")).startswith(f"{fp.VERSION}:"):
        # filed under an older fingerprint version: the marker moves to this version's signature
        # (the old keys stay in "sigs", so the issue is still found by them); no event, no comment
        s["sig"] = group[0].fingerprint.primary
    s["repro"] = state_has_repro(s) or any(f.fingerprint.has_repro for f in group)
    for f in group:
        for key, vals in (("sigs", [f.fingerprint.primary]), ("alt", f.fingerprint.alternatives),
                          ("checks", [f.fingerprint.check_key])):
            for v in vals:
                if v not in s[key]:
                    s[key].append(v)
        row = next((r for r in s["affected"] if r["check_key"] == f.fingerprint.check_key), None)
        if row is None:
            row = _affected_row(f.check, when)
            if len(s["affected"]) < MAX_AFFECTED:
                s["affected"].append(row)
            if not new:
                events.append(f"newly affected: {row['model']} ({row['backend']}, {row['mode']}, "
                              f"{row['dtype']}, {row['device']})")
        row["last_seen"] = when
        row["occurrences"] += 1
        torch_v = ((f.failure or {}).get("versions") or {}).get("torch")
        if torch_v and torch_v not in s["torch"]:
            s["torch"].append(torch_v)
            if not new:
                events.append(f"new torch version: {torch_v}")
        rank = list(_repro_rank(f.failure))
        if s["best_repro"] is None or rank < s["best_repro"]:
            if s["best_repro"] is not None and rank[0] <= 1:
                nodes = rank[2] if rank[2] < 10 ** 9 else "?"
                events.append(f"better repro: {nodes} graph nodes" + (", verified" if rank[1] == 0 else ""))
            s["best_repro"] = rank
    s["torch"] = s["torch"][-10:]
    s["occurrences"] += len(group)
    s["last_seen"] = when
    s["runs"] = (s["runs"] + [run_id])[-MAX_RUNS:]
    s["flaky"] = bool(s["flaky"]) and _is_flaky(group)
    s["regression"] = bool(s["regression"]) or _is_regression(group)
    s["passing_runs"] = []
    for f in sorted(group, key=lambda f: _repro_rank(f.failure)):  # the best fresh verified repro is kept
        block = known.block_of(f.failure, f.repro_text)
        if block is not None:
            s["known"] = known.merge_block(s.get("known"), block)
            break
    return s, events


def state_has_repro(state: dict) -> bool:
    """Whether an issue is backed by a verified repro (issues filed under v1 record only the rank
    of their best repro: minimized/partial and verified)."""
    if "repro" in state:
        return bool(state["repro"])
    rank = state.get("best_repro")
    return isinstance(rank, list) and len(rank) >= 2 and rank[0] <= 1 and rank[1] == 0


def labels_for(state: dict, group: list[Failure], base: list[str], bot_label: str) -> list[str]:
    rep = group[0]
    wanted = [bot_label, rep.fingerprint.parts["class"]]
    if rep.fingerprint.parts.get("stage") not in (None, "unlocalized"):
        wanted.append(rep.fingerprint.parts["stage"])
    out = [x for x in base if x not in ("flaky", "regression")]
    for x in wanted + (["flaky"] if state["flaky"] else []) + (["regression"] if state["regression"] and not state["flaky"] else []):
        if x not in out:
            out.append(x)
    return out


# ---------------------------------------------------------------------------- render context

def _ops_summary(parts: dict, failure: dict | None = None) -> str | None:
    """The ops to name in the title: the fingerprint's culprit ops, else (for display only) the
    minimized graph's ops less data movement."""
    ops = parts.get("ops")
    if not ops and failure:
        graph = (failure.get("repro") or {}).get("graph") or []
        ops = [str(n.get("op")) for n in graph if isinstance(n, dict) and n.get("op") not in sg.PLUMBING_OPS]
    if not ops:
        return None
    names = list(dict.fromkeys(o.split("(")[0] for o in ops))
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} ops)" if len(names) > 3 else "")


_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]{1,400}")
_BACKEND = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,99}(?::[A-Za-z_][A-Za-z0-9_]{0,99})?")
_DEVICE = re.compile(r"(cpu|cuda|xpu|mps)(:\d{1,3})?")
HARNESS_SUITES = ("torchbench", "huggingface", "timm_models")


def _bisect_words(failure: dict) -> str | None:
    """The bisector's one-line answer: from the culprit record, else from the raw bisect result."""
    c = failure.get("culprit") or {}
    if c.get("bisect"):
        return c["bisect"]
    from bot.minify.passes import bisect_words

    return bisect_words(failure.get("bisect"))


def _reproduce_command(check: dict, has_repro: bool, trusted_commands=()) -> str:
    """`minify-bot check ...` for the issue's "Reproduce locally", built only from fields that pass
    strict patterns. A run directory may come from a pull request's job: its strings (above all a
    command suite's `spec.command`) are never offered as something to copy and paste, unless the
    command is one this report was configured with (``trusted_commands``)."""
    from bot import slash

    lines = []
    if has_repro:
        lines.append("python repro.py    # from the failure's directory in the artifacts")
    cmd = ["minify-bot", "check"]
    notes = []
    spec = check.get("spec") if isinstance(check.get("spec"), dict) else {}
    source = spec.get("source") or "zoo"
    model = check.get("model")
    model_ok = isinstance(model, str) and slash.MODEL_RE.fullmatch(model) is not None
    models = ["--models", model] if model_ok else []
    if not model_ok:
        notes.append("# the model name is in results.json")
    if source == "zoo":
        cmd += models
    elif source == "yaml":
        path = spec.get("file")
        name = path.rsplit("/", 1)[-1] if isinstance(path, str) and _SAFE_PATH.fullmatch(path) and ".." not in path else "MODELS.yaml"
        cmd += ["--suite", "yaml", "--model-file", name, *models]
    elif source == "command":
        command = spec.get("command")
        if isinstance(command, str) and command in trusted_commands:
            # the program exactly as the user configured this sweep, then the check that judges it
            cwd = spec.get("cwd")
            if isinstance(cwd, str) and cwd:
                lines.append(f"cd {shlex.quote(cwd)}")
            lines.append(f"{command}    # the program; it fails with a non-zero exit")
            cmd += ["--suite", "command", "--command", command]
            if model_ok:
                cmd += ["--name", model]
            patterns = spec.get("patterns") if isinstance(spec.get("patterns"), dict) else {}
            for kind in ("accuracy", "error"):
                for pat in patterns.get(kind) or []:
                    if isinstance(pat, str):
                        cmd += [f"--{kind}-pattern", pat]
        else:
            # a command the reporter was not configured with (e.g. from a pull request's job) is
            # never offered as something to copy and paste
            cmd += ["--suite", "command", "--command", "COMMAND"]
            notes.append("# COMMAND: the check's command (spec.command in results.json); read it before running it")
    elif source == "harness":
        suite = spec.get("suite") if spec.get("suite") in HARNESS_SUITES else "SUITE"
        cmd += ["--suite", "harness", "--pytorch", "PYTORCH_CHECKOUT", "--harness-suite", suite, *models]
        bs = spec.get("batch_size")
        if isinstance(bs, int) and not isinstance(bs, bool) and bs > 0:
            cmd += ["--batch-size", str(bs)]
    else:
        cmd += models
    for k, ok in (("backend", lambda v: _BACKEND.fullmatch(v)), ("mode", lambda v: v in slash.MODES),
                  ("dtype", lambda v: v in slash.DTYPES), ("device", lambda v: _DEVICE.fullmatch(v))):
        v = check.get(k)
        if isinstance(v, str) and v and ok(v):
            cmd += [f"--{k}", v]
    config = check.get("config") if isinstance(check.get("config"), dict) else {}
    for k, v in sorted(config.items(), key=lambda kv: str(kv[0])):
        v = str(v).lower() if isinstance(v, bool) else v
        if (isinstance(k, str) and slash.CONFIG_KEY_RE.fullmatch(k)
                and isinstance(v, (str, int, float)) and slash.CONFIG_VALUE_RE.fullmatch(str(v))):
            cmd += ["--config", f"{k}={v}"]
        else:
            notes.append("# some config overrides are only in results.json")
    if check.get("dynamic") is True:
        cmd.append("--dynamic")
    lines.append(" ".join(shlex.quote(c) for c in cmd))
    return "\n".join(lines + list(dict.fromkeys(notes)))


def issue_context(group: list[Failure], state: dict, opts: ReportOptions, run_dir: Path) -> dict:
    rep = min(group, key=lambda f: _repro_rank(f.failure))
    f = rep.failure or {}
    check = rep.check
    parts = rep.fingerprint.parts
    repro = f.get("repro") or {}
    error = f.get("error") or check.get("error")
    err_ctx = None
    if error:
        msg = str(error.get("message") or "")
        first, _, rest = msg.strip().partition("\n")
        err_ctx = {"type": str(error.get("type") or "Error"), "message": msg, "message_first_line": first[:500],
                   "message_rest": bool(rest.strip()) or len(first) > 500,
                   "traceback": str(error.get("traceback") or "(no traceback recorded)")}
    accuracy = f.get("accuracy") or check.get("accuracy")
    rel_dir = f"failures/{check['id']}"
    inline = rep.repro_text if rep.repro_text and len(rep.repro_text) <= INLINE_REPRO_LIMIT else None
    status_words = {"minimized": "Minimized and verified", "partial": "Partially minimized"}.get(
        repro.get("status"), "Captured")
    ver = repro.get("verification") or None
    versions = f.get("versions") or {}
    versions_table = [(k, v if not isinstance(v, (list, dict)) else json.dumps(v)) for k, v in versions.items()
                      if v not in (None, "", [])]
    cfg = f.get("config") or {}
    affected = sorted(state["affected"], key=lambda r: (r["model"], r["backend"], r["mode"]))
    device = parts.get("device")
    return {
        "sig": state["sig"], "parts": parts, "summary": _summary(parts, check, accuracy, err_ctx, group),
        "class": parts["class"], "class_words": CLASS_WORDS.get(parts["class"], parts["class"]),
        "stage": parts.get("stage"), "dtype": parts.get("dtype"), "device": device,
        "status": check.get("status"), "ops_summary": _ops_summary(parts, f if sg.repro_verified(f) else None),
        "flaky": state["flaky"],
        "culprit": f.get("culprit") or None, "bisect_words": _bisect_words(f),
        "graph_role": ((repro.get("capture") or {}).get("role")),
        "regression": state["regression"], "error": err_ctx, "accuracy": accuracy,
        "repro": {"status": repro.get("status"), "status_words": status_words, "reason": repro.get("reason"),
                  "inline": inline, "too_big": bool(rep.repro_text) and inline is None,
                  "size": len(rep.repro_text or ""),
                  "artifact_path": f"{rel_dir}/{repro.get('path') or 'repro.py'}",
                  "needs_inputs": bool(repro.get("inputs_dir")) and not (ver or {}).get("random_inputs_reproduce"),
                  "nodes_before": repro.get("nodes_before"), "nodes_after": repro.get("nodes_after"),
                  "queries": repro.get("queries"),
                  "graph": (repro.get("capture") or {}).get("graph"),
                  "graphs": (repro.get("capture") or {}).get("graphs")},
        "ablation": f.get("ablation") or [], "config_minimal": cfg.get("minimal") or [],
        "config_diff": cfg.get("diff") or [], "versions": versions, "versions_table": versions_table,
        "collect_env": f.get("collect_env"), "verification": ver, "affected": affected, "affected_omitted": 0,
        "first_seen": state["first_seen"], "last_seen": state["last_seen"], "occurrences": state["occurrences"],
        "torch_versions": state["torch"] or ["unknown"], "artifact_url": opts.artifact_url, "run_url": opts.run_url,
        "failure_dir": rel_dir, "reproduce_command": _reproduce_command(check, bool(rep.repro_text), opts.trusted_commands),
        "log_excerpt": None, "overflow": [],
    }


def _summary(parts, check, accuracy, err, group) -> str:
    from bot.render import md
    models = sorted({str(f.check.get("model")) for f in group})
    who = md(models[0]) + (f" and {len(models) - 1} more" if len(models) > 1 else "")
    where = f"{md(parts.get('stage'))} stage ({md(check.get('backend'))}, {md(check.get('mode'))}, {md(parts.get('dtype'))}, {md(parts.get('device'))})"
    if accuracy and accuracy.get("rmse_res") is not None:
        what = f"wrong results: RMSE {md(accuracy.get('rmse_res'))} vs tolerance {md(accuracy.get('tolerance'))}"
    elif err:
        what = f"{md(err['type'])}: {md(err['message_first_line'][:150])}"
    else:
        what = md(CLASS_WORDS.get(parts["class"], parts["class"]))
    return f"{where} on {who}: {what}"


# ---------------------------------------------------------------------------- the lifecycle

class _Reporter:
    def __init__(self, run_dir: Path, tracker: Tracker, opts: ReportOptions):
        self.run_dir = run_dir
        self.tracker = tracker
        self.opts = opts
        self.renderer = Renderer(opts.templates_dir)
        self.actions: list[dict] = []
        self.commented: set[int] = set()
        self.report_path = run_dir / rundir.REPORT
        self.configs: list[dict] = []  # pass counts per configuration (bot.dashboard.configuration_counts)
        self.dashboard: dict | None = None  # the dashboard issue, when kept (bot.dashboard.after_report)

    # -- bookkeeping
    def record(self, action: str, group: list[Failure] | None, issue: Issue | None, reason: str, **extra) -> dict:
        a = {"action": action, "issue": issue.number if issue else None, "url": issue.url if issue else None,
             "fingerprint": group[0].fingerprint.primary if group else None,
             "checks": [f.check["id"] for f in group] if group else extra.pop("checks", []),
             "reason": reason, **extra}
        self.actions.append(a)
        self.write_report()
        return a

    def write_report(self, error: str | None = None) -> None:
        data = {"run_id": self.run_id, "tracker": self.tracker.name,
                "dry_run": self.opts.dry_run, "label": self.opts.label, "run_url": self.opts.run_url,
                "counts": count_actions(self.actions), "actions": self.actions, "error": error}
        if self.dashboard:
            data["dashboard"] = self.dashboard
        rundir.write_report(self.run_dir, data)

    def run_link(self) -> str:
        return f"[{self.run_id}]({self.opts.run_url})" if self.opts.run_url else f"run `{self.run_id}`"

    def comment(self, issue: Issue, kind: str, template: str, ctx: dict) -> bool:
        """At most one comment per issue per run."""
        if issue.number in self.commented:
            return False
        tag = fp.comment_tag(kind, self.run_id, ctx.get("sig", ""))
        body = self.renderer.comment(template, ctx).rstrip("\n") + "\n\n" + tag + "\n"
        self.tracker.comment(issue.number, body, tag)
        self.commented.add(issue.number)
        return True

    def body(self, group, state) -> tuple[str, list[str]]:
        return self.renderer.body(issue_context(group, state, self.opts, self.run_dir), state)

    # -- steps
    def run(self, results: dict, failures: list[Failure], passing: list[dict]) -> None:
        when = str(results.get("finished") or results.get("started") or _dt.datetime.now(_dt.timezone.utc).isoformat())
        self.tracker.ensure_label(self.opts.label, "5319e7", "Filed and maintained by minify-bot")
        me = self.tracker.bot_login()
        issues = self._bot_issues(me)
        if not self.opts.pr_run:
            issues = self._close_duplicates(issues)
        groups: dict[str, list[Failure]] = {}
        for f in sorted(failures, key=lambda f: f.check["id"]):
            groups.setdefault(f.fingerprint.primary, []).append(f)
        touched: set[int] = set()
        created = 0
        # every group of this run that belongs to one issue goes into ONE update of that issue
        buckets: dict[int, tuple[Issue, dict, list[Failure]]] = {}
        unmatched: list[list[Failure]] = []
        migrated: set[int] = set()
        for sig in sorted(groups, key=lambda s: groups[s][0].check["id"]):
            group = groups[sig]
            match = self._match(issues, group, migrated)
            if match is None:
                unmatched.append(group)
            else:
                issue, state = match
                buckets.setdefault(issue.number, (issue, state, []))[2].extend(group)
        for group in unmatched:
            if _is_flaky(group) and not self.opts.file_flaky:
                self.record("skipped", group, None, "flaky: passed on rerun; not filed")
                continue
            if created >= self.opts.max_new:
                self.record("capped", group, None, f"over the cap of {self.opts.max_new} new issues per run")
                continue
            issue = self._create(group, when, me)
            created += 1
            issues = self._bot_issues(me)
            touched.add(issue.number)
        for number in sorted(buckets):
            issue, state, group = buckets[number]
            touched.add(issue.number)
            if self.opts.pr_run:
                self._pr_comment(issue, state, group)
            elif issue.state == "open":
                self._update(issue, state, group, when)
            else:
                self._reopen(issue, state, group, when)
        if not self.opts.pr_run:
            self._close_passing(issues, touched, failures, passing)

    def _pr_comment(self, issue: Issue, state: dict, group) -> None:
        """A pull-request run that fails like a filed bug: a comment on the open issue, nothing else."""
        if issue.state != "open":
            self.record("skipped", group, issue, "closed; a pull-request run does not reopen issues")
            return
        if self.run_id in state.get("runs", []):
            self.record("unchanged", group, issue, "this run was already reported")
            return
        commented = self.comment(issue, "pr", "update_comment.md.j2", {
            "events": ["seen in a run on an unmerged pull request (not counted as a main-branch run)"],
            "run_link": self.run_link(), "sig": state.get("sig", "")})
        self.record("unchanged", group, issue, "seen in a pull-request run" + (", commented" if commented else ""),
                    commented=commented)

    def _bot_issues(self, me: str) -> list[tuple[Issue, dict]]:
        out = []
        for issue in self.tracker.list_issues(self.opts.label):
            state = fp.parse_marker(issue.body)
            if state and issue.author == me:
                out.append((issue, state))
        return out

    def _close_duplicates(self, issues):
        """Open bot issues sharing a primary signature (a race slipped through): keep the oldest."""
        by_sig: dict[str, list] = {}
        for issue, state in issues:
            if issue.state == "open":
                by_sig.setdefault(state.get("sig"), []).append((issue, state))
        closed = set()
        for sig, items in by_sig.items():
            items.sort(key=lambda t: t[0].number)
            for issue, state in items[1:]:
                self._close_as_duplicate(issue, items[0][0].number, sig)
                closed.add(issue.number)
        return [(i, s) for i, s in issues if i.number not in closed]

    def _close_as_duplicate(self, issue: Issue, survivor: int, sig: str) -> None:
        self.comment(issue, "duplicate", "duplicate_comment.md.j2", {"survivor": survivor, "sig": sig})
        self.tracker.edit_issue(issue.number, state="closed", state_reason="not_planned")
        self.record("duplicate_closed", None, issue, f"duplicate of #{survivor}", survivor=survivor,
                    commented=True, fingerprint=sig)

    def _match(self, issues, group: list[Failure], migrated: set[int]):
        """The issue for this bug; open before closed:
        1. the primary signature;
        2. the model/configuration alternative, only when neither side has a verified repro (the
           failure has the alternative only when it is identified by its model);
        3. an issue filed under v1 whose primary is this failure's v1 primary, not yet migrated:
           it migrates to this group's signature, and no second group of the run may take it."""
        fpr = group[0].fingerprint
        ranked = sorted(issues, key=lambda t: (t[0].state != "open", t[0].number))
        reused = {((f.failure or {}).get("repro") or {}).get("reused", {}).get("issue") for f in group
                  if isinstance(((f.failure or {}).get("repro") or {}).get("reused"), dict)}
        for issue, state in ranked:  # a known repro was reused: the issue it came from, if it is this bug's
            if issue.number in reused and fpr.check_key in (state.get("checks") or []):
                return issue, state
        for issue, state in ranked:
            if fpr.primary in (state.get("sigs") or []):
                return issue, state
        if not any(f.fingerprint.has_repro for f in group):
            for issue, state in ranked:
                if not state_has_repro(state) and any(k in (state.get("alt") or []) for k in fpr.alternatives):
                    return issue, state
        legacy = {f.fingerprint.legacy for f in group if f.fingerprint.legacy}
        for issue, state in ranked:
            if issue.number in migrated or str(state.get("sig", "")).startswith(f"{fp.VERSION}:"):
                continue
            if legacy & set(state.get("sigs") or []):
                migrated.add(issue.number)
                return issue, state
        return None

    def _create(self, group, when, me) -> Issue:
        state, _ = merge_state(None, group, self.run_id, when)
        body, overflow = self.body(group, state)
        ctx = issue_context(group, state, self.opts, self.run_dir)
        title = self.renderer.title(ctx)
        labels = labels_for(state, group, [], self.opts.label)
        issue = self.tracker.create_issue(title, body, labels, list(self.opts.assignees), state["sig"])
        # Re-check: a concurrent reporter may have filed the same bug. The oldest open issue survives.
        rivals = sorted(i.number for i, s in self._bot_issues(me)
                        if i.state == "open" and s.get("sig") == state["sig"])
        if rivals and rivals[0] != issue.number and issue.number in rivals:
            self.record("created", group, issue, "new fingerprint", labels=labels, overflow=overflow)
            self._close_as_duplicate(issue, rivals[0], state["sig"])
            survivor = next(i for i, s in self._bot_issues(me) if i.number == rivals[0])
            sstate = fp.parse_marker(survivor.body)
            self._update(survivor, sstate, group, when)
            return survivor
        self.record("created", group, issue, "new fingerprint" + (" (flaky)" if state["flaky"] else ""),
                    labels=labels, overflow=overflow)
        return issue

    def _update(self, issue: Issue, state: dict, group, when) -> None:
        if self.run_id in state.get("runs", []):
            self.record("unchanged", group, issue, "this run was already reported")
            return
        new_state, events = merge_state(state, group, self.run_id, when)
        body, overflow = self.body(group, new_state)
        labels = labels_for(new_state, group, issue.labels, self.opts.label)
        self.tracker.edit_issue(issue.number, body=body, labels=labels if set(labels) != set(issue.labels) else None)
        commented = False
        if events:
            commented = self.comment(issue, "update", "update_comment.md.j2",
                                     {"events": events, "run_link": self.run_link(), "sig": new_state["sig"]})
        self.record("updated", group, issue, "; ".join(events) or "seen again", commented=commented,
                    overflow=overflow)

    def _reopen(self, issue: Issue, state: dict, group, when) -> None:
        if issue.state_reason == "not_planned":
            self.record("skipped", group, issue, "closed as not planned; not reopened")
            return
        if self.run_id in state.get("runs", []):
            self.record("unchanged", group, issue, "this run was already reported")
            return
        new_state, events = merge_state(state, group, self.run_id, when)
        body, overflow = self.body(group, new_state)
        labels = labels_for(new_state, group, issue.labels, self.opts.label)
        self.tracker.edit_issue(issue.number, body=body, state="open", labels=labels)
        commented = self.comment(issue, "reopen", "reopen_comment.md.j2",
                                 {"events": events, "run_link": self.run_link(), "sig": new_state["sig"]})
        self.record("reopened", group, issue, "failing again", commented=commented, overflow=overflow)

    def _close_passing(self, issues, touched, failures, passing) -> None:
        failing_keys = {f.fingerprint.check_key for f in failures}
        passing_by_key: dict[str, list[str]] = {}
        for c in passing:
            passing_by_key.setdefault(fp.check_key(c), []).append(c["id"])
        for issue, state in issues:
            if issue.state != "open" or issue.number in touched or state.get("flaky"):
                continue
            keys = state.get("checks") or []
            if any(k in failing_keys for k in keys):
                continue
            ids = [i for k in keys for i in passing_by_key.get(k, [])]
            if not ids:
                continue  # not checked in this run
            runs = state.get("passing_runs") or []
            if any(r.get("run") == self.run_id for r in runs):
                self.record("unchanged", None, issue, "passing run already counted", checks=ids,
                            fingerprint=state.get("sig"))
                continue
            new = copy.deepcopy(state)
            new["passing_runs"] = (runs + [{"run": self.run_id, "link": self.run_link(), "checks": ids[:20]}])[-10:]
            body = _replace_marker(issue.body, new)
            if len(new["passing_runs"]) >= self.opts.close_after:
                self.comment(issue, "close", "close_comment.md.j2",
                             {"passing_runs": new["passing_runs"], "sig": state.get("sig")})
                self.tracker.edit_issue(issue.number, body=body, state="closed", state_reason="completed")
                self.record("closed", None, issue, f"passed in {len(new['passing_runs'])} consecutive runs",
                            checks=ids, commented=True, fingerprint=state.get("sig"))
            else:
                self.tracker.edit_issue(issue.number, body=body)
                self.record("updated", None, issue,
                            f"passing ({len(new['passing_runs'])}/{self.opts.close_after} runs to close)",
                            checks=ids, fingerprint=state.get("sig"))


def _replace_marker(body: str, state: dict) -> str:
    head = body.rstrip().rsplit("\n", 1)[0] if "\n" in body.rstrip() else ""
    return head.rstrip("\n") + "\n\n" + fp.make_marker(state) + "\n"


def report_run(run_dir: str | os.PathLike, tracker: Tracker, options: ReportOptions | None = None) -> ReportResult:
    """Report one run directory through ``tracker``. Writes report.json and summary.md into it."""
    opts = options or ReportOptions()
    if opts.max_new < 0 or opts.close_after < 1:
        raise UsageError("--max-new must be >= 0 and --close-after >= 1")
    run = Path(run_dir)
    results, failures, passing = load_run(run)  # all validation happens before any write
    rep = _Reporter(run, tracker, opts)
    rep.run_id = opts.run_id or default_run_id(results)
    from bot.dashboard import configuration_counts

    rep.configs = configuration_counts(results["checks"])  # pass counts per configuration, for the summary
    result = ReportResult(run_id=rep.run_id, actions=rep.actions, report_path=rep.report_path)
    board = None
    try:
        if opts.dashboard:  # history, automatic baseline, mutes and flakes: bot/dashboard.py
            from bot import dashboard

            board = dashboard.before_report(tracker, results, failures, passing, rep.run_id)
            failures, passing = board.failures, board.passing
        rep.run(results, failures, passing)
        if board is not None:
            dashboard.after_report(board, rep, results)
    except BotError as exc:
        rep.write_report(error=str(exc))
        result.error = str(exc)
        result.summary_path = write_summary(rep, failures)
        raise
    rep.write_report()
    result.summary_path = write_summary(rep, failures)
    return result


def write_summary(rep: _Reporter, failures) -> Path:
    not_filed = [a for a in rep.actions if a["action"] == "capped"]
    text = rep.renderer.render("summary.md.j2", counts=count_actions(rep.actions), actions=rep.actions,
                               known_line=known.savings([f.failure for f in failures]).line(),
                               configs=rep.configs, dashboard=rep.dashboard,
                               not_filed=not_filed, max_new=rep.opts.max_new, dry_run=rep.opts.dry_run,
                               run_id=rep.run_id, run_url=rep.opts.run_url)
    path = rep.run_dir / "summary.md"
    path.write_text(text, encoding="utf-8")
    return path
