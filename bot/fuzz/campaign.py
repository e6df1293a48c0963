"""A fuzz campaign's summary: programs per minute, verdicts, new and known bugs, coverage.

Verdicts are the check statuses. A program that failed eagerly cannot be a compiler bug (the
generator keeps only programs that run eagerly, so this means the check's device or settings
differ from the generator's): the sweep records it as skipped ("invalid program", the source's
``discard``), so nothing files it, and it is counted here apart, as invalid. Coverage is
what inductor generated over the campaign (its own metrics, summed over the programs' rows:
kernels, vectorized kernels, IR nodes before fusion, parallel and nested reductions, loop
reorderings) and how many programs reached each; then how it grew (:func:`growth`): the distinct
static features of the programs (bot.fuzz.choose) and the generated-code features (each metric at a
magnitude), what each quarter of the campaign added, and how many programs a time-bounded campaign
chose for novelty rather than in order.
"""

from __future__ import annotations

from collections import Counter

from bot.records import NOT_VERIFIED, CheckRow, ReportDoc

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


def magnitude(value: int) -> str:
    """A metric's value as a power-of-two range: 1, 2-3, 4-7, 8-15, ..."""
    low = 1 << (value.bit_length() - 1)
    return str(low) if low == 1 else f"{low}-{2 * low - 1}"


def codegen_features(row: CheckRow) -> set[str]:
    """What a check's compile generated, as features: each non-zero codegen metric with its
    magnitude (``generated_kernel_count:2-3``); the coverage the fuzzer's choice looks for."""
    cov = row.stats.get("codegen") if isinstance(row.stats, dict) else None
    if not isinstance(cov, dict):
        return set()
    return {f"{name}:{magnitude(value)}" for name, value in cov.items()
            if isinstance(name, str) and type(value) is int and value > 0}


def growth(rows: list[CheckRow], parts: int = 4) -> list[str]:
    """Coverage growth over the campaign: distinct static features (the generator's) and generated-code
    features (metric and magnitude) and metric kinds, what each quarter of the programs added, and how
    the programs were chosen (for novelty, passing over lower indices, or in order)."""
    static: set[str] = set()
    code: set[str] = set()
    added: list[tuple[int, int]] = []
    bounds = [round(len(rows) * (k + 1) / parts) for k in range(parts)]
    start = 0
    for end in bounds:
        s0, c0 = len(static), len(code)
        for row in rows[start:end]:
            static.update(row.chosen.features if row.chosen else ())
            code |= codegen_features(row)
        added.append((len(static) - s0, len(code) - c0))
        start = end
    chosen = [r for r in rows if r.chosen is not None]
    if not chosen and not code:
        return []
    kinds = {f.rpartition(":")[0] for f in code}
    lines = [f"coverage growth: {len(static)} static features, {len(code)} generated-code features "
             f"({len(kinds)} metric kinds); new per quarter of the programs: static "
             + " ".join(f"+{s}" for s, _ in added) + ", generated code " + " ".join(f"+{c}" for _, c in added)]
    if chosen:
        novel = sum(1 for r in chosen if r.chosen.passed_over)
        cost = sum(r.chosen.choose_s for r in chosen)
        lines.append(f"choice: {novel} program{'s' if novel != 1 else ''} chosen for novelty (before lower "
                     f"indices), {len(chosen) - novel} in order; choosing took {cost:.1f} s "
                     f"({1000 * cost / len(chosen):.0f} ms a program)")
    return lines


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
    lines += growth(rows)
    return "\n".join(lines)


def bugs(report: ReportDoc | None) -> str:
    """After the report: distinct bugs the campaign filed as new issues, and known ones it updated."""
    if report is None:
        return "fuzz bugs: no report"
    actions = Counter(a.action for a in report.actions or [])
    new = actions.get("created", 0)
    known = sum(actions.get(k, 0) for k in ("updated", "unchanged", "reopened"))
    unverified = sum(len(a.checks or []) for a in report.actions or []
                     if a.action == "skipped" and (a.reason or "").startswith(NOT_VERIFIED))
    text = f"fuzz bugs: {new} new issue{'s' if new != 1 else ''}, {known} known (updated, unchanged or reopened)"
    if unverified:
        text += (f"; {unverified} failing program{'s' if unverified != 1 else ''} without a verified repro, "
                 "not filed (their programs and logs are in the artifacts)")
    return text
