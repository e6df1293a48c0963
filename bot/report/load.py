"""What a report reads: its options and the run directory (results.json, failure.json, repro.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from bot import fingerprint as fp
from bot import rundir
from bot.failure import FailureRecord
from bot.options import ReportStageOptions
from bot.records import CheckRow, ResultsDoc

_STAGE = ReportStageOptions.default_of   # each default is the report stage's, defined once


@dataclasses.dataclass
class ReportOptions:
    """The reporter's settings, built from the report stage's options (bot.options.ReportStageOptions)
    by `minify-bot report`; its defaults are the stage's."""

    label: str = _STAGE("label")
    max_new: int = _STAGE("max_new")  # new issues per run; the rest are listed in the summary
    close_after: int = _STAGE("close_after")  # consecutive passing runs before an issue is closed
    assignees: list[str] = dataclasses.field(default_factory=list)
    templates_dir: str | None = None
    dry_run: bool = _STAGE("dry_run")  # only recorded in report.json / the summary; pick a LocalTracker for it
    run_url: str | None = None
    artifact_url: str | None = None
    run_id: str | None = None  # default: derived from results.json (same run dir -> same id)
    file_flaky: bool = _STAGE("file_flaky")  # file failures that passed on rerun (labelled flaky), or only list them
    # The results come from an unmerged pull request: only create issues or comment on open ones.
    # Such a run is not the main branch: it never counts as a passing run, closes, reopens, or
    # rewrites an issue's body.
    pr_run: bool = _STAGE("pr_run")
    # Commands this report's own configuration names (`run --command`, `report --command`, the
    # action's `command` input). A command check whose command is one of these is shown verbatim in
    # "Reproduce locally"; any other command string is an artifact's and is never shown as one.
    trusted_commands: tuple[str, ...] = ()
    # keep the dashboard issue and its history (bot/report/dashboard.py); --no-dashboard turns it off
    dashboard: bool = _STAGE("dashboard")
    # What this report knows of the run from its own environment, never from the artifact: the
    # commit the workflow ran (GITHUB_SHA) and the build it checked with (MINIFY_BOT_BUILD, the
    # check job's image digest, given to the report job by the workflow). A bug fails again and
    # again on one commit and build; "passing" there is the artifact's word alone, so it counts
    # towards closing as fixed only on another commit or build (``evidence``). None: a local run.
    evidence: str | None = None


def trusted_evidence(env) -> str | None:
    """The commit and build of this run as the report's own environment gives them (GitHub sets
    GITHUB_SHA; the workflow passes the check job's image as MINIFY_BOT_BUILD), or None outside one."""
    sha = (env.get("GITHUB_SHA") or "").strip()
    if not sha:
        return None
    build = (env.get("MINIFY_BOT_BUILD") or "").strip()
    return f"{sha[:40]}@{build[:200]}" if build else sha[:40]



@dataclasses.dataclass
class Failure:
    check: CheckRow
    failure: FailureRecord | None
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


def load_run(run_dir: str | os.PathLike) -> tuple[ResultsDoc, list[Failure], list[CheckRow]]:
    """(results, failures, passing checks), read through bot.rundir; raises UsageError on bad input."""
    run = Path(run_dir)
    results = rundir.read_results(run)
    failures, passing = [], []
    for check in results.checks:
        if not check.failure_class:
            if check.status == "pass":
                passing.append(check)
            continue
        fdir = rundir.failure_dir(run, check.id)
        failure = rundir.read_failure(run, check.id)
        repro_text = None
        rp = _inside(fdir, failure.repro.path) if failure else None
        if rp:
            try:
                repro_text = rp.read_text(encoding="utf-8", errors="replace")
            except OSError:
                repro_text = None
        failures.append(Failure(check, failure, fdir if failure else None, repro_text,
                                fp.compute(check, failure)))
    return results, failures, passing


def default_run_id(results: ResultsDoc) -> str:
    """The run's id: a hash of when it started, its settings, versions and check ids."""
    basis = {"started": results.started, "settings": results.settings.to_json(), "versions": results.versions,
             "checks": sorted(c.id or "" for c in results.checks)}
    return "run-" + hashlib.sha1(json.dumps(basis, sort_keys=True, default=str).encode()).hexdigest()[:12]

