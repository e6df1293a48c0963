"""Bisect a verified repro over torch builds: which build introduced the bug, which one fixed it.

The repro runs in each build it needs, in fresh processes, judged by verification's own predicate
(:func:`bot.minify.verify.verify`: the same failure in at least ``need`` of ``runs`` runs is *bad*;
no failure and every run exiting 0 is *good*). A build where the repro cannot run - torch does not
import, an op is missing, it fails some other way, or too few runs fail to decide - is *skip*,
neither good nor bad, as ``git bisect skip``.

The search starts from an anchor: the build the failure was seen on (matched by torch's version and
commit), else the newest build. Then, on each side of it, one verdict at the far end tells whether
the answer changes on that side at all; if it does, halving the range between them finds the pair
of neighbours where it changes: ``last good``/``first bad`` (introduced) or ``last bad``/``first
good`` (fixed). Each side costs at most ``1 + ceil(log2(builds - 1))`` verdicts, plus one per
skipped build it meets. For nightlies the two builds' ``torch.version.git_version`` bound the
commit range to read.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from bot.builds import Build, BuildCache, Info
from bot.records import BuildBoundary, BuildsFound, BuildVerdict

BAD, GOOD, SKIP = "bad", "good", "skip"
COMPARE_URL = "https://github.com/pytorch/pytorch/compare/{a}...{b}"


@dataclass
class Verdict:
    build: Build
    verdict: str
    reason: str = ""
    torch: str | None = None
    git: str | None = None
    runs: int = 0
    failed_same_way: int = 0
    seconds: float = 0.0

    def record(self) -> BuildVerdict:
        return BuildVerdict(self.build.name, self.verdict, self.reason[:300], self.torch, self.git, self.runs,
                            self.failed_same_way, round(self.seconds, 2))


@dataclass
class Boundary:
    kind: str  # "introduced" (good -> bad, oldest to newest) or "fixed" (bad -> good)
    before: Verdict
    after: Verdict
    skipped_between: list[str] = field(default_factory=list)

    def commits(self) -> dict | None:
        a, b = self.before.git, self.after.git
        if not (a and b) or a == b or a == "Unknown" or b == "Unknown":
            return None
        return {"from": a, "to": b, "url": COMPARE_URL.format(a=a, b=b), "log": f"git log {a}..{b}"}

    def record(self) -> BuildBoundary:
        return BuildBoundary(self.kind, self.before.build.name, self.after.build.name, self.before.torch,
                             self.after.torch, self.skipped_between, self.commits())

    def words(self) -> str:
        what = {"introduced": ("last good", "first bad"), "fixed": ("last bad", "first good")}[self.kind]
        text = f"{self.kind} between {self.before.build.name} ({what[0]}) and {self.after.build.name} ({what[1]})"
        if self.skipped_between:
            text += f"; could not run in {', '.join(self.skipped_between)} between them"
        c = self.commits()
        return text + (f"; commits {c['from'][:12]}..{c['to'][:12]}: {c['url']}" if c else "")


@dataclass
class Answer:
    builds: list[Build]
    verdicts: dict[int, Verdict]
    anchor: int | None
    boundaries: list[Boundary]
    runs: dict  # verdicts taken: anchor, before (older side), after (newer side)
    runs_per_verdict: int = 1
    need: int = 1

    def names(self, verdict: str) -> list[str]:
        return [self.verdicts[i].build.name for i in sorted(self.verdicts) if self.verdicts[i].verdict == verdict]

    def present_in(self) -> list[str]:
        """Every build the bug is in, tested or implied (between two bad builds of one side)."""
        return self._implied(BAD)

    def absent_in(self) -> list[str]:
        return self._implied(GOOD)

    def _implied(self, verdict: str) -> list[str]:
        known = {i: v.verdict for i, v in self.verdicts.items() if v.verdict != SKIP}
        out = []
        for i, b in enumerate(self.builds):
            if known.get(i) == verdict:
                out.append(b.name)
            elif i not in self.verdicts:
                lo = max((j for j in known if j < i), default=None)
                hi = min((j for j in known if j > i), default=None)
                if lo is not None and hi is not None and known[lo] == known[hi] == verdict:
                    out.append(b.name)
        return out

    def record(self) -> BuildsFound:
        """What failure.json keeps of the answer ("builds")."""
        rows = [self.verdicts[i].record() if i in self.verdicts else BuildVerdict(b.name, "untested")
                for i, b in enumerate(self.builds)]
        return BuildsFound(rows, self.present_in(), self.absent_in(), self.names(SKIP),
                           [b.record() for b in self.boundaries], self.runs, self.runs_per_verdict, self.need,
                           bound(len(self.builds)))


def bound(n: int) -> int:
    """The most verdicts one side takes on ``n`` runnable builds: ceil(log2 n) + 1."""
    return math.ceil(math.log2(max(n, 1))) + 1


def search(n: int, verdict_of: Callable[[int], Verdict], anchor: int | None = None,
           log=lambda msg: None) -> tuple[dict[int, Verdict], int | None, list[tuple[int, int, str]], dict]:
    """The boundaries among builds 0..n-1 (oldest first), asking ``verdict_of`` as few times as it
    can. Returns (verdicts, the anchor's index, [(before, after, side)], verdicts per side)."""
    seen: dict[int, Verdict] = {}
    runs = {"anchor": 0, "before": 0, "after": 0}

    def ask(i: int, side: str) -> str:
        if i not in seen:
            seen[i] = verdict_of(i)
            runs[side] += 1
            log(f"{seen[i].build.name}: {seen[i].verdict}" + (f" ({seen[i].reason})" if seen[i].reason else ""))
        return seen[i].verdict

    order = ([anchor] if anchor is not None else []) + [i for i in range(n - 1, -1, -1) if i != anchor]
    a = next((i for i in order if ask(i, "anchor") != SKIP), None)
    if a is None:
        return seen, None, [], runs
    pairs = []
    for side, far_end in (("before", range(0, a)), ("after", range(n - 1, a, -1))):
        far = next((i for i in far_end if ask(i, side) != SKIP), None)
        if far is None or seen[far].verdict == seen[a].verdict:
            continue
        lo, hi = sorted((far, a))
        lo, hi = _halve(lo, hi, lambda i, s=side: ask(i, s), lambda i: seen[i].verdict)
        pairs.append((lo, hi, side))
    return seen, a, pairs, runs


def _halve(lo: int, hi: int, ask: Callable[[int], str], verdict: Callable[[int], str]) -> tuple[int, int]:
    """Narrow [lo, hi] (different verdicts at the ends) to neighbours among the runnable builds:
    the middle first, and when it cannot run, the untested builds nearest the middle."""
    skipped: set[int] = set()
    while True:
        inner = [i for i in range(lo + 1, hi) if i not in skipped]
        if not inner:
            return lo, hi
        mid = (lo + hi) // 2
        pick = min(inner, key=lambda i: (abs(i - mid), i))
        v = ask(pick)
        if v == SKIP:
            skipped.add(pick)
        elif v == verdict(lo):
            lo = pick
        else:
            hi = pick


def judge(cache: BuildCache, build: Build, repro: str, sig, runs: int, need: int, timeout: float,
          log=lambda msg: None) -> Verdict:
    """One build's verdict on the repro: ``runs`` fresh processes under the build, judged by
    verification's predicate."""
    from bot.errors import InfraError
    from bot.minify.verify import verify

    t0 = time.perf_counter()
    try:
        prepared = cache.prepare(build)
    except InfraError as exc:
        return Verdict(build, SKIP, f"build not available: {exc}", seconds=time.perf_counter() - t0)
    info: Info = cache.probe(prepared)
    if info.error:
        return Verdict(build, SKIP, info.error, seconds=time.perf_counter() - t0)
    res = verify(repro, sig, runs=runs, timeout=timeout, random_known=True, build=prepared)
    same, exits = res.failed_same_way, res.exits
    v = Verdict(build, SKIP, "", info.torch, info.git, runs, same, time.perf_counter() - t0)
    if same >= need:
        v.verdict, v.reason = BAD, f"fails the same way in {same}/{runs} runs"
    elif same == 0 and exits and all(rc == 0 for rc in exits):
        v.verdict = GOOD
    elif same == 0:
        tail = [ln for ln in res.last_output_tail.splitlines() if ln.strip()][-1:]
        v.reason = f"the repro cannot run here (exit {exits[-1] if exits else '?'}): " + (tail[0][:200] if tail else "")
    else:
        v.reason = f"fails the same way in only {same}/{runs} runs (needs {need})"
    return v


def bisect_repro(builds: list[Build], repro: str, sig, versions: dict | None = None, *, runs: int = 3,
                 need: int | None = None, timeout: float = 600, cache: BuildCache | None = None,
                 log=lambda msg: None) -> Answer:
    """Bisect ``repro`` (a verified repro.py failing as ``sig``) over ``builds`` (oldest first)."""
    cache = cache or BuildCache(log=log)
    need = need or runs
    if not 1 <= need <= runs:
        from bot.errors import UsageError

        raise UsageError(f"--need {need}: between 1 and --verify-runs ({runs})")
    anchor = _local_anchor(builds, versions or {})
    seen, a, pairs, counts = search(len(builds), lambda i: judge(cache, builds[i], repro, sig, runs, need, timeout,
                                                                 log), anchor, log)
    bounds = []
    for lo, hi, _side in pairs:
        kind = "introduced" if seen[lo].verdict == GOOD else "fixed"
        between = [builds[i].name for i in range(lo + 1, hi) if i in seen and seen[i].verdict == SKIP]
        bounds.append(Boundary(kind, seen[lo], seen[hi], between))
    return Answer(builds, seen, a, bounds, counts, runs, need)


def _local_anchor(builds: list[Build], versions: dict) -> int | None:
    """A build named after the failure's own torch version (``2.15.0`` for ``2.15.0+cu132``):
    the anchor without probing every build first."""
    torch_v = str(versions.get("torch") or "")
    if not torch_v:
        return None
    base = torch_v.split("+")[0]
    for i, b in enumerate(builds):
        if b.name in (torch_v, base) or (b.kind == "pip" and b.target in (f"torch=={torch_v}", f"torch=={base}")):
            return i
    return None


def summary_lines(answer: Answer) -> list[str]:
    """What the command prints: each build's verdict, the boundaries, the runs it took."""
    lines = []
    for i, b in enumerate(answer.builds):
        v = answer.verdicts.get(i)
        if v is None:
            lines.append(f"  {b.name}: not tested")
            continue
        ver = f" (torch {v.torch}" + (f", {v.git[:12]}" if v.git else "") + ")" if v.torch else ""
        lines.append(f"  {b.name}{ver}: {v.verdict}" + (f" - {v.reason}" if v.reason else ""))
    for bd in answer.boundaries:
        lines.append(bd.words())
        c = bd.commits()
        if c:
            lines.append(f"  commit range: {c['log']}")
    if not answer.boundaries:
        present = answer.present_in()
        lines.append("no boundary among these builds: " + (f"present in all of {', '.join(present)}" if present and
                     not answer.absent_in() else "absent in all runnable builds" if answer.absent_in() and not present
                     else "no runnable build"))
    r = answer.runs
    lines.append(f"verdicts: {r['anchor']} for the anchor, {r['before']} on the older side, {r['after']} on the newer "
                 f"side (each {answer.runs_per_verdict} fresh runs; at most {bound(len(answer.builds))} per side "
                 "plus one per build that could not run)")
    return lines
