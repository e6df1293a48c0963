"""The issue lifecycle against the Tracker interface: one issue per bug, filed, updated or reopened
(one code path), closed after passing runs, duplicates closed. ``report_run`` is the entry point."""

from __future__ import annotations

import copy
import dataclasses
import datetime as _dt
import os
import re
from pathlib import Path

from bot import fingerprint as fp
from bot import known, rundir
from bot.errors import BotError, InfraError, UsageError
from bot.options import ReportOptions
from bot.records import CheckRow, DashboardRef, ReportAction, ReportDoc, ResultsDoc
from bot.render import BODY_LIMIT, Renderer
from bot.report import upstream
from bot.report.context import issue_context
from bot.report.load import Failure, default_run_id, load_run
from bot.report.state import (
    IssueState,
    PassingRun,
    compact,
    is_flaky,
    labels_for,
    merge_state,
    not_compiler,
    read,
    sign_known,
    unverified,
    with_passing_run,
)
from bot.tracker.base import Issue, Tracker

REPORT_SCHEMA = rundir.REPORT_SCHEMA


@dataclasses.dataclass
class ReportResult:
    run_id: str
    actions: list[ReportAction]
    report_path: Path
    summary_path: Path | None = None
    error: str | None = None

    @property
    def counts(self) -> dict:
        return count_actions(self.actions)


def count_actions(actions: list[ReportAction]) -> dict:
    c = {k: 0 for k in ("created", "updated", "reopened", "closed", "commented", "skipped", "unchanged",
                        "duplicate_closed", "capped")}
    for a in actions:
        c[a.action] = c.get(a.action, 0) + 1
        if a.commented:
            c["commented"] += 1
    c["skipped"] += c["capped"]
    return c



# ---------------------------------------------------------------------------- the lifecycle

class Lifecycle:
    """One report of one run: what it did (``actions``, written to report.json after each one) and
    the tracker calls. Its extensions (``bot.report.dashboard.after_report``,
    ``bot.report.upstream.answer_ticks``) see it as a :class:`bot.report.view.ReportView`."""

    def __init__(self, run_dir: Path, tracker: Tracker, opts: ReportOptions, run_id: str,
                 configs: list[dict] | None = None, evidence: str | None = None):
        self.run_dir = run_dir
        self.run_id = run_id
        self.tracker = tracker
        self.opts = opts.resolved()   # the report stage's options, every default filled in
        self.renderer = Renderer(self.opts.templates)
        # What this report knows of the run from its own environment, never from the artifact: the
        # commit the workflow ran and the build it checked with (bot.report.load.trusted_evidence). A
        # bug fails again and again on one commit and build; "passing" there is the artifact's word
        # alone, so it counts towards closing as fixed only on another commit or build. None: a local run.
        self.evidence = evidence
        self.actions: list[ReportAction] = []
        self.commented: set[int] = set()
        self.report_path = run_dir / rundir.REPORT
        self.configs = configs or []  # pass counts per configuration (bot.report.dashboard.configuration_counts)
        self.dashboard: DashboardRef | None = None  # the dashboard issue, when kept (dashboard.after_report)
        self.torch: str | None = None  # the torch version this run checked (results.json's versions)
        self.warnings: list[str] = []  # hidden state that was malformed and ignored, one line per issue

    def warn(self, message: str) -> None:
        import sys

        if message not in self.warnings:
            self.warnings.append(message)
            print(f"warning: {message}", file=sys.stderr)

    # -- bookkeeping
    def record(self, action: str, group: list[Failure] | None, issue: Issue | None, reason: str,
               **extra) -> ReportAction:
        checks = extra.pop("checks", [f.check.id for f in group] if group else [])
        extra.setdefault("fingerprint", group[0].fingerprint.primary if group else None)
        extra.setdefault("title", issue.title[:300] if issue and isinstance(issue.title, str) else None)
        a = ReportAction(action, issue.number if issue else None, issue.url if issue else None, checks=checks,
                         reason=reason, **extra)
        self.actions.append(a)
        self.write_report()
        return a

    def write_report(self, error: str | None = None) -> None:
        rundir.write_report(self.run_dir, ReportDoc(
            self.run_id, self.tracker.name, self.opts.dry_run, self.opts.label, self.opts.run_url,
            count_actions(self.actions), list(self.actions), error, self.warnings[:100] or None, self.dashboard))

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

    def body(self, group, state: IssueState) -> tuple[str, list[str]]:
        return self.renderer.body(issue_context(group, state, self.opts, self.run_dir), state.to_json())

    # -- steps
    def run(self, results: ResultsDoc, failures: list[Failure], passing: list[CheckRow]) -> None:
        when = str(results.when or _dt.datetime.now(_dt.timezone.utc).isoformat())
        from bot.builds import results_torch

        self.torch = results_torch(results)
        self.tracker.ensure_label(self.opts.label, "5319e7", "Filed and maintained by minify-bot")
        me = self.tracker.bot_login()
        issues = self._bot_issues(me)
        if not self.opts.pr_run:
            issues = self._close_duplicates(issues)
        groups: dict[str, list[Failure]] = {}
        for f in sorted(failures, key=lambda f: f.check.id):
            groups.setdefault(f.fingerprint.primary, []).append(f)
        touched: set[int] = set()
        created = 0
        # every group of this run that belongs to one issue goes into ONE update of that issue
        buckets: dict[int, tuple[Issue, IssueState, list[Failure]]] = {}
        unmatched: list[list[Failure]] = []
        migrated: set[int] = set()
        for sig in sorted(groups, key=lambda s: groups[s][0].check.id):
            group = groups[sig]
            match = self._match(issues, group, migrated)
            if match is None:
                unmatched.append(group)
            else:
                issue, state = match
                buckets.setdefault(issue.number, (issue, state, []))[2].extend(group)
        for group in unmatched:
            why = not_compiler(group)
            if why:
                self.record("skipped", group, None, f"{why}: not a torch.compile failure")
                continue
            why = unverified(group)
            if why:
                self.record("skipped", group, None, f"{why}; not filed")
                continue
            if is_flaky(group) and not self.opts.file_flaky:
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
            else:
                self._refresh(issue, state, group, when)
                issues = self._close_folded(issues, issue, group)
        if not self.opts.pr_run:
            self._close_passing(issues, touched, failures, passing)

    def _pr_comment(self, issue: Issue, state: IssueState, group) -> None:
        """A pull-request run that fails like a filed bug: a comment on the open issue, nothing else."""
        if issue.state != "open":
            self.record("skipped", group, issue, "closed; a pull-request run does not reopen issues")
            return
        if self.run_id in state.runs:
            self.record("unchanged", group, issue, "this run was already reported")
            return
        commented = self.comment(issue, "pr", "update_comment.md.j2", {
            "events": ["seen in a run on an unmerged pull request (not counted as a main-branch run)"],
            "run_link": self.run_link(), "sig": state.sig})
        self.record("unchanged", group, issue, "seen in a pull-request run" + (", commented" if commented else ""),
                    commented=commented)

    def bot_issues(self) -> list[tuple[Issue, IssueState]]:
        """The bot's own issues and their states, by the tracker's login (see ``_bot_issues``)."""
        return self._bot_issues(self.tracker.bot_login())

    def _bot_issues(self, me: str) -> list[tuple[Issue, IssueState]]:
        """The bot's own issues and their states. The author is checked before the marker is read
        (anyone who can label an issue can put a marker in it); a malformed state is ignored with a
        warning naming the issue."""
        out = []
        for issue in self.tracker.list_issues(self.opts.label):
            if issue.author != me:
                continue
            state, why = read(issue.body)
            if state is not None:
                out.append((issue, state))
            elif why:
                self.warn(f"issue #{issue.number}: its hidden state is malformed and was ignored ({why})")
        return out

    def _close_duplicates(self, issues):
        """Open bot issues sharing a primary signature (a race slipped through): keep the oldest."""
        by_sig: dict[str, list] = {}
        for issue, state in issues:
            if issue.state == "open":
                by_sig.setdefault(state.sig, []).append((issue, state))
        closed = set()
        for sig, items in by_sig.items():
            items.sort(key=lambda t: t[0].number)
            for issue, _ in items[1:]:
                self._close_as_duplicate(issue, items[0][0].number, sig)
                closed.add(issue.number)
        return [(i, s) for i, s in issues if i.number not in closed]

    def _close_folded(self, issues, survivor: Issue, group: list[Failure]):
        """Open issues filed for this bug under a key it had before (``former``: one ``sum`` compile
        error filed once per input dtype while it was keyed on the compiler's words) are closed as
        duplicates of the one it now updates."""
        keys = {k for f in group for k in f.fingerprint.former}
        if not keys:
            return issues
        closed = set()
        for issue, state in issues:
            if issue.state == "open" and issue.number != survivor.number and keys & set(state.sigs):
                self._close_as_duplicate(issue, survivor.number, group[0].fingerprint.primary, folded=True)
                closed.add(issue.number)
        return [(i, s) for i, s in issues if i.number not in closed]

    def _close_as_duplicate(self, issue: Issue, survivor: int, sig: str, *, folded: bool = False) -> None:
        self.comment(issue, "duplicate", "duplicate_comment.md.j2",
                     {"survivor": survivor, "sig": sig, "folded": folded})
        self.tracker.edit_issue(issue.number, state="closed", state_reason="not_planned")
        self.record("duplicate_closed", None, issue, f"duplicate of #{survivor}", survivor=survivor,
                    commented=True, fingerprint=sig)

    def _match(self, issues, group: list[Failure], migrated: set[int]):
        """The issue for this bug; open before closed:
        1. the primary signature, then a primary it had under an earlier rule (``former``);
        2. the model/configuration alternative, only when neither side has a verified repro (the
           failure has the alternative only when it is identified by its model); a failure with a
           verified repro takes an open issue that was filed for its check and class without one;
        3. an issue filed under v1 whose primary is this failure's v1 primary, not yet migrated:
           it migrates to this group's signature, and no second group of the run may take it."""
        fpr = group[0].fingerprint
        ranked = sorted(issues, key=lambda t: (t[0].state != "open", t[0].number))
        # an artifact's "repro.reused" (which issue a known repro came from) is never used to match: a
        # reused record carries the issue's own verified signature, so it matches by its primary
        for issue, state in ranked:
            if fpr.primary in state.sigs:
                return issue, state
        former = {k for f in group for k in f.fingerprint.former}
        for issue, state in ranked:
            if former & set(state.sigs):
                return issue, state
        if not any(f.fingerprint.has_repro for f in group):
            for issue, state in ranked:
                if not state.has_repro and any(k in state.alt for k in fpr.alternatives):
                    return issue, state
        else:
            # filed without a repro (its minify crashed or gave up), now minimized: the open issue of
            # the same check and failure class is this bug's, updated in place (once per run)
            keys = {f.fingerprint.model_key for f in group if f.fingerprint.model_key}
            for issue, state in ranked:
                if (issue.state == "open" and not state.has_repro and issue.number not in migrated
                        and keys & set(state.alt)):
                    migrated.add(issue.number)
                    return issue, state
        legacy = {f.fingerprint.legacy for f in group if f.fingerprint.legacy}
        for issue, state in ranked:
            if issue.number in migrated or str(state.sig).startswith(f"{fp.VERSION}:"):
                continue
            if legacy & set(state.sigs):
                migrated.add(issue.number)
                return issue, state
        return None

    def _create(self, group, when, me) -> Issue:
        state, _ = merge_state(None, group, self.run_id, when, trusted=not self.opts.pr_run,
                               evidence=self.evidence)
        body, overflow = self.body(group, state)
        ctx = issue_context(group, state, self.opts, self.run_dir)
        title = self.renderer.title(ctx)
        labels = labels_for(state, group, [], self.opts.label)
        issue = self.tracker.create_issue(title, body, labels, list(self.opts.assignees), state.sig)
        issue = self._sign_new(issue, group, state)
        # Re-check: a concurrent reporter may have filed the same bug. The oldest open issue survives.
        rivals = sorted(i.number for i, s in self._bot_issues(me)
                        if i.state == "open" and s.sig == state.sig)
        if rivals and rivals[0] != issue.number and issue.number in rivals:
            self.record("created", group, issue, "new fingerprint", labels=labels, overflow=overflow)
            self._close_as_duplicate(issue, rivals[0], state.sig)
            survivor, sstate = next((i, s) for i, s in self._bot_issues(me) if i.number == rivals[0])
            self._refresh(survivor, sstate, group, when)
            return survivor
        self.record("created", group, issue, "new fingerprint" + (" (flaky)" if state.flaky else ""),
                    labels=labels, overflow=overflow)
        return issue

    def _sign_new(self, issue: Issue, group, state: IssueState) -> Issue:
        """A new issue's known block, signed now that the issue has its number (the signature binds
        it): one more edit of the body, only when there is a block and a signing key."""
        signed = sign_known(copy.deepcopy(state), issue.number)
        if signed.known is None or signed.known.sig is None:
            return issue
        body, _ = self.body(group, signed)
        self.tracker.edit_issue(issue.number, body=body)
        return dataclasses.replace(issue, body=body)

    def _refresh(self, issue: Issue, state: IssueState, group, when) -> None:
        """The bug failed again: update its open issue, or reopen a closed one (never one closed as
        not planned). One edit (body, labels, state) and at most one comment."""
        reopen = issue.state != "open"
        if reopen and issue.state_reason == "not_planned":
            self.record("skipped", group, issue, "closed as not planned; not reopened")
            return
        why = not_compiler(group)
        if reopen and why:   # an issue filed for it before such failures were no longer filed
            self.record("skipped", group, issue, f"{why}: not a torch.compile failure; not reopened")
            return
        if self.run_id in state.runs:
            self.record("unchanged", group, issue, "this run was already reported")
            return
        new_state, events = merge_state(state, group, self.run_id, when, trusted=not self.opts.pr_run,
                                        number=issue.number, evidence=self.evidence)
        if reopen:
            events = [*events, *_back_in(state, group)]
        body, overflow = self.body(group, new_state)
        body = upstream.carry_box(issue.body, body)  # a ticked or done "upstream report" box stays so
        labels = labels_for(new_state, group, issue.labels, self.opts.label)
        self.tracker.edit_issue(issue.number, body=body, state="open" if reopen else None,
                                labels=labels if reopen or set(labels) != set(issue.labels) else None)
        commented = False
        if reopen or events:
            kind = "reopen" if reopen else "update"
            commented = self.comment(issue, kind, f"{kind}_comment.md.j2",
                                     {"events": events, "run_link": self.run_link(), "sig": new_state.sig})
        if reopen:
            self.record("reopened", group, issue, "failing again", commented=commented, overflow=overflow)
        else:
            self.record("updated", group, issue, "; ".join(events) or "seen again", commented=commented,
                        overflow=overflow)

    def _close_passing(self, issues, touched, failures, passing) -> None:
        failing_keys = {f.fingerprint.check_key for f in failures}
        passing_by_key: dict[str, list[str]] = {}
        for c in passing:
            passing_by_key.setdefault(fp.check_key(c), []).append(c.id)
        for issue, state in issues:
            if issue.state != "open" or issue.number in touched or state.flaky:
                continue
            if any(k in failing_keys for k in state.checks):
                continue
            ids = [i for k in state.checks for i in passing_by_key.get(k, [])]
            if not ids:
                continue  # not checked in this run
            if any(r.run == self.run_id for r in state.passing_runs):
                self.record("unchanged", None, issue, "passing run already counted", checks=ids,
                            fingerprint=state.sig)
                continue
            if self.evidence is not None and state.failed_at == self.evidence:
                self.record("unchanged", None, issue, "passing on the commit and build it last failed on: not "
                            "evidence of a fix (not counted towards closing)", checks=ids, fingerprint=state.sig)
                continue
            new = with_passing_run(state, PassingRun(self.run_id, self.run_link(), ids[:20], self.torch))
            body = _replace_marker(issue.body, new)
            if len(new.passing_runs) >= self.opts.close_after:
                self.comment(issue, "close", "close_comment.md.j2",
                             {"passing_runs": [_shown_run(r) for r in new.passing_runs], "sig": state.sig,
                              **fixed_in(new)})
                self.tracker.edit_issue(issue.number, body=body, state="closed", state_reason="completed")
                self.record("closed", None, issue, f"passed in {len(new.passing_runs)} consecutive runs",
                            checks=ids, commented=True, fingerprint=state.sig)
            else:
                self.tracker.edit_issue(issue.number, body=body)
                self.record("updated", None, issue,
                            f"passing ({len(new.passing_runs)}/{self.opts.close_after} runs to close)",
                            checks=ids, fingerprint=state.sig)


_RUN_LINK = re.compile(r"\[[\w.:+-]{1,120}\]\(https?://[\w.\-/:%=?&]{1,500}\)|run `[\w.:+-]{1,120}`")


def _shown_run(run: PassingRun) -> dict:
    """A passing run of the issue state as the close comment shows it: the link the bot wrote, or
    (edited state) the run's id as plain text."""
    from bot.render import md

    link = run.link
    shown = link if isinstance(link, str) and _RUN_LINK.fullmatch(link) else f"run {md(run.run)}"
    return {**run.to_json(), "link": shown, "checks": [str(c) for c in run.checks or []][:20]}


def fixed_in(state: IssueState) -> dict:
    """Which torch build fixed it, as the close comment says: the torch versions of the passing
    runs that it never failed on (``fixed_in``), and those it failed on (``failed_on``)."""
    from bot.builds import version_word

    failed_on = [v for v in state.torch if version_word(v)]
    passing = list(dict.fromkeys(v for r in state.passing_runs if (v := version_word(r.torch))))
    return {"fixed_in": [v for v in passing if v not in failed_on], "passing_torch": passing,
            "failed_on": failed_on}


def _back_in(state: IssueState, group) -> list[str]:
    """The reopen comment's line on builds: the torch it fails on again, and the one it had passed on."""
    from bot.builds import version_word

    now = list(dict.fromkeys(v for f in group if f.failure and (v := version_word(f.failure.torch))))
    passed = fixed_in(state)["passing_torch"]
    if not now:
        return []
    line = f"back in torch {', '.join(now)}"
    return [line + (f" (it had passed on torch {', '.join(passed)})" if passed else "")]


def _replace_marker(body: str, state: IssueState) -> str:
    """The body with its marker replaced by ``state``'s. The text stays as it was rendered, so the
    state is compacted to what fits beside it (a passing run makes the marker longer): a body over
    GitHub's limit is refused, and the issue would never close."""
    head = body.rstrip().rsplit("\n", 1)[0].rstrip("\n") if "\n" in body.rstrip() else ""
    state = compact(state, BODY_LIMIT - len(head) - 3)
    return head + "\n\n" + state.marker() + "\n"


def report_run(run_dir: str | os.PathLike, tracker: Tracker, options: ReportOptions | None = None, *,
               evidence: str | None = None) -> ReportResult:
    """Report one run directory through ``tracker``. Writes report.json and summary.md into it.
    ``options``: the report stage's (defaults filled in here); ``evidence``: the commit and build
    this run checked, from the report's own environment (``Lifecycle.evidence``)."""
    opts = (options or ReportOptions()).resolved()
    if opts.max_new < 0 or opts.close_after < 1:
        raise UsageError("--max-new-issues must be >= 0 and --close-after >= 1")
    run = Path(run_dir)
    results, failures, passing = load_run(run)  # all validation happens before any write
    from bot.report.dashboard import configuration_counts

    rep = Lifecycle(run, tracker, opts, opts.run_id or default_run_id(results),
                    configuration_counts(results.checks), evidence)  # pass counts per configuration, for the summary
    result = ReportResult(run_id=rep.run_id, actions=rep.actions, report_path=rep.report_path)
    board = None
    try:
        if opts.dashboard:  # history, automatic baseline, mutes and flakes: bot/report/dashboard.py
            from bot.report import dashboard

            board = dashboard.before_report(tracker, results, failures, passing, rep.run_id)
            failures, passing = board.failures, board.passing
        rep.run(results, failures, passing)
        upstream.answer_ticks(rep, failures)  # ticked "write an upstream report" boxes
        if board is not None:
            dashboard.after_report(board, rep, results)
    except Exception as exc:  # noqa: BLE001 - the cause goes to report.json (the action's summary shows it)
        reason = str(exc) if isinstance(exc, BotError) else f"internal error: {type(exc).__name__}: {exc}"[:500]
        rep.write_report(error=reason)
        result.error = reason
        try:
            result.summary_path = write_summary(rep, failures)
        except Exception:  # noqa: BLE001 - the first error is the one to report
            pass
        if isinstance(exc, BotError):
            raise
        raise InfraError(reason) from exc
    rep.write_report()
    result.summary_path = write_summary(rep, failures)
    return result


def write_summary(rep: Lifecycle, failures) -> Path:
    not_filed = [a for a in rep.actions if a.action == "capped"]
    text = rep.renderer.render("summary.md.j2", counts=count_actions(rep.actions), actions=rep.actions,
                               known_line=known.savings([f.failure for f in failures]).line(),
                               configs=rep.configs, dashboard=rep.dashboard,
                               not_filed=not_filed, max_new=rep.opts.max_new, dry_run=rep.opts.dry_run,
                               run_id=rep.run_id, run_url=rep.opts.run_url)
    path = rep.run_dir / rundir.SUMMARY
    path.write_text(text, encoding="utf-8")
    return path
