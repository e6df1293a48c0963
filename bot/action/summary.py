"""What the Action says: step outputs, the job summary, and the exit code it ends with.

The markdown lives in templates/action_*.md.j2 (rendered with bot.render's environment plus the
Action's escaping filters, bot.gha.md_escape / md_code); this module prepares their data from the
run directory and writes GITHUB_OUTPUT and GITHUB_STEP_SUMMARY once, at the end of the step.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bot import gha, known, rundir
from bot.action import ownership
from bot.action.context import Context
from bot.action.results import (
    entry_url,
    failing,
    failure_of,
    issue_urls,
    load,
    regressions,
    report_entries,
    report_error,
    rows,
)
from bot.errors import EXIT_FAILURES, EXIT_OK
from bot.failure import FailureRecord
from bot.records import ReportAction, ReportDoc, ResultsDoc

SETTINGS_SHOWN = ("backend", "mode", "dtype", "device", "shard")

_renderer = None


def render(name: str, **data) -> str:
    """Render one of the Action's templates."""
    global _renderer
    if _renderer is None:
        from bot.render import Renderer

        _renderer = Renderer()
        _renderer.env.filters.update(md_escape=gha.md_escape, md_code=gha.md_code)
    return _renderer.render(name, **data)


# ---------------------------------------------------------------- template data


def counts(results: ResultsDoc | None) -> dict | None:
    if results is None:
        return None
    return {"checks": len(rows(results)), "failing": len(failing(results)),
            "new": len(regressions(results)), "incomplete": not results.complete}


def table_rows(results: ResultsDoc | None, failures_dir: Path | None, report: ReportDoc | None) -> list[dict]:
    """One row per check, failing first; with its failure record and the report entry naming it."""
    checks = rows(results)
    by_id: dict[str, ReportAction] = {}
    for e in report_entries(report):
        for cid in e.checks or []:
            if isinstance(cid, str):
                by_id.setdefault(cid, e)
    out = []
    for r in sorted(checks, key=lambda r: (not r.failure_class, str(r.id))):
        looked = bool(r.failure_class) and failures_dir is not None
        entry = by_id.get(str(r.id))
        failure = failure_of(failures_dir.parent, str(r.id)) if looked else None
        url = link_target(entry_url(entry)) if entry else None
        out.append({"check": r, "looked": looked, "entry": entry, "url": url, "failure": failure,
                    "verified": verified_words(failure)})
    return out


def _count(value) -> int | None:
    """A number of runs from a failure record, or None when it is not one. The record was written by
    a job that ran model code and is read by the trusted reader, which takes any JSON value: Infinity,
    NaN, a fraction or an object is not a count (and must not stop the summary)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not (0 <= value < 10 ** 9) or value != int(value):  # NaN fails every comparison
        return None
    return int(value)


def verified_words(failure: FailureRecord | None) -> str | None:
    """The results table's "k/n verified" for a repro run n times in fresh processes; None when it
    was not run or its run count is not a count. A failed count that is not one reads ``?``."""
    repro = failure.repro if failure is not None else None
    ver = repro.verification if repro is not None else None
    runs = _count(ver.runs) if ver is not None else None
    if not runs:
        return None
    failed = _count(ver.failed_same_way or 0)
    return f"{'?' if failed is None else failed}/{runs} verified"


# what a link target keeps as it is; anything else (parentheses, a pipe, spaces, angle brackets) is
# percent-encoded, so that it can end neither the link nor the table cell it stands in
_URL_SAFE = ":/?#@!$&'*+,;=%-._~"


def link_target(url: str | None) -> str | None:
    """A URL (from report.json) as the target of a markdown link."""
    from urllib.parse import quote

    return quote(url, safe=_URL_SAFE) if url else None


def issues(report: ReportDoc | None) -> dict:
    """What report did, one entry per action with the reason (also for what was NOT filed)."""
    entries = [{"action": e.action or "?", "url": link_target(entry_url(e)),
                "number": e.issue if isinstance(e.issue, int) else None,
                "checks": [c for c in e.checks or [] if isinstance(c, str)], "reason": e.reason}
               for e in report_entries(report)]
    warnings = report.warnings if report is not None else None
    return {"missing": report is None, "error": report_error(report), "entries": entries,
            "dry_run": bool(report.dry_run) if report is not None else False,
            "warnings": [w for w in warnings[:20] if isinstance(w, str)] if isinstance(warnings, list) else []}


# ---------------------------------------------------------------- outputs, summary, exit code


def exit_for(ctx: Context, results: ResultsDoc | None) -> int:
    if ctx.inputs.fail_on == "failure" and failing(results):
        return EXIT_FAILURES
    if ctx.inputs.fail_on == "regression" and regressions(results):
        return EXIT_FAILURES
    return EXIT_OK


def result_outputs(ctx: Context, results: ResultsDoc | None, report: ReportDoc | None) -> None:
    ctx.output("failure-count", str(len(failing(results))))
    ctx.output("regression-count", str(len(regressions(results))))
    ctx.output("issue-urls", "\n".join(issue_urls(report)))
    ctx.output("run-dir", str(ctx.out))
    ctx.output("results-path", str(ctx.out / rundir.RESULTS) if results is not None else "")


def summary_results(ctx: Context, results: ResultsDoc | None, report: ReportDoc | None, title: str) -> None:
    s = results.settings if results is not None else None
    show_issues = report is not None or ctx.inputs.stage in ("all", "report")
    ctx.summary.append(render(
        "action_results.md.j2", title=title, counts=counts(results),
        settings=[(k, str(v)) for k in SETTINGS_SHOWN if (v := getattr(s, k, None))],
        rows=table_rows(results, ctx.out / "failures", report), issues=issues(report) if show_issues else None,
        known=known.summary_lines(ctx.out)))  # known bugs reused instead of minified, time saved


def summarize_failure(ctx: Context | None, env: dict, line: str) -> None:
    if ctx is not None:
        ctx.summary += ["", line, ""]
    else:
        gha.append_summary(f"## minify-bot\n\n{line}\n", env)


def save_traceback(ctx: Context | None) -> None:
    """The traceback of an unexpected error goes into the run directory, not the log."""
    import traceback

    if ctx is None:
        return
    try:
        ctx.out.mkdir(parents=True, exist_ok=True)
        (ctx.out / rundir.ACTION_ERROR).write_text(gha.redact(traceback.format_exc(), ctx.secrets), encoding="utf-8")
    except Exception:  # noqa: BLE001
        pass


def finish(ctx: Context | None, env: dict, code: int, started: float) -> None:
    try:
        _write_finish(ctx, env, code, started)
    except Exception as exc:  # noqa: BLE001 - the runner's files are gone or unwritable
        print(f"minify-bot action: error: could not write the outputs or summary ({type(exc).__name__})",
              file=sys.stderr)


def _write_finish(ctx: Context | None, env: dict, code: int, started: float) -> None:
    if ctx is None:
        gha.set_output("exit-code", str(code), env)
        return
    ctx.output("exit-code", str(code))
    if "failure-count" not in ctx.outputs and ctx.produced_results:
        # an error after the checks ran: still say what was found
        results = load(ctx.out / rundir.RESULTS)
        if results is not None:
            report = load(ctx.out / rundir.REPORT)
            result_outputs(ctx, results, report)
            summary_results(ctx, results, report, "minify-bot results (incomplete run)")
    summary = gha.redact(render("action_summary.md.j2", body="\n".join(ctx.summary).rstrip(),
                                notes=list(dict.fromkeys(ctx.notes)), stage=ctx.inputs.stage,
                                event=ctx.event.name, seconds=f"{time.monotonic() - started:.0f}"), ctx.secrets)
    try:
        ctx.out.mkdir(parents=True, exist_ok=True)
        path = ctx.out / rundir.ACTION_SUMMARY
        path.write_text(summary, encoding="utf-8")
        ctx.output("summary-path", str(path))
    except OSError:
        ctx.output("summary-path", "")
    gha.append_summary(summary, env)
    for name, value in ctx.outputs.items():
        gha.set_output(name, gha.redact(str(value), ctx.secrets), env)
    ownership.fix(ctx)
