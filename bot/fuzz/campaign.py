"""A fuzz campaign's summary: programs per minute, verdicts, new and known bugs, coverage.

Verdicts are the check statuses. A program that failed eagerly cannot be a compiler bug (the
generator keeps only programs that run eagerly, so this means the check's device or settings
differ from the generator's): the sweep records it as skipped ("invalid program", the source's
``discard``), so nothing files it, and it is counted here apart, as invalid. Coverage is
what inductor generated over the campaign (its own metrics, summed over the programs' rows:
kernels, vectorized kernels, IR nodes before fusion, parallel and nested reductions, loop
reorderings) and how many programs reached each.
"""

from __future__ import annotations

from collections import Counter

from bot.records import CheckRow, ReportDoc

INVALID = ("eager_error", "setup_error")


def coverage(rows: list[CheckRow]) -> tuple[Counter, Counter]:
    """(metric -> total over the campaign, metric -> programs that reached it)."""
    total, programs = Counter(), Counter()
    for row in rows:
        cov = (row.stats or {}).get("codegen") if isinstance(row.stats, dict) else None
        if not isinstance(cov, dict):
            continue
        for name, value in cov.items():
            if isinstance(name, str) and isinstance(value, int) and value > 0:
                total[name] += value
                programs[name] += 1
    return total, programs


def summary(rows: list[CheckRow], elapsed_s: float) -> str:
    """The campaign's lines for the terminal and the job summary."""
    n = len(rows)
    minutes = max(elapsed_s, 1e-9) / 60
    lines = [f"fuzz campaign: {n} program{'s' if n != 1 else ''} in {minutes:.1f} min "
             f"({n / minutes:.1f} programs/min)"]
    verdicts = Counter(r.status or "unknown" for r in rows)
    lines.append("verdicts: " + (", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())) or "none"))
    invalid = [r for r in rows if r.failure_class in INVALID or str(r.skipped or "").startswith("invalid program")]
    failing = [r for r in rows if r.failing and r.failure_class not in INVALID]
    if invalid:
        lines.append(f"invalid programs (failed eagerly, not compiler bugs, not filed): {len(invalid)}")
    marked = [r for r in failing if r.baseline in ("new", "known")]
    text = f"failing programs: {len(failing)}"
    if marked:
        new = sum(1 for r in failing if r.baseline == "new")
        text += f" ({new} new, {len(marked) - new} known against the baseline)"
    lines.append(text)
    classes = Counter(r.failure_class for r in failing)
    if classes:
        lines.append("by class: " + ", ".join(f"{k} {v}" for k, v in sorted(classes.items())))
    total, programs = coverage(rows)
    if total:
        lines.append(f"coverage: {len(total)} kinds of generated code reached: "
                     + ", ".join(f"{k} {total[k]} in {programs[k]}" for k in sorted(total)))
    return "\n".join(lines)


def bugs(report: ReportDoc | None) -> str:
    """After the report: distinct bugs the campaign filed as new issues, and known ones it updated."""
    if report is None:
        return "fuzz bugs: no report"
    actions = Counter(a.action for a in report.actions or [])
    new = actions.get("created", 0)
    known = sum(actions.get(k, 0) for k in ("updated", "unchanged", "reopened"))
    return f"fuzz bugs: {new} new issue{'s' if new != 1 else ''}, {known} known (updated, unchanged or reopened)"
