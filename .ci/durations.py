"""Where a test run's time went, per test file: ``python .ci/durations.py JUNIT.xml [N]``.

Reads pytest's JUnit XML (``--junitxml``; pytest-xdist keeps each test's own time) and prints the N
files (default 25) that took longest, with their test counts and share of the total: the first
thing to read before making CI faster (per-test times are pytest's ``--durations``)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def main(argv: list[str]) -> int:
    if not argv or len(argv) > 2:
        print(__doc__.splitlines()[0].split(": ", 1)[1], file=sys.stderr)
        return 2
    top = int(argv[1]) if len(argv) > 1 else 25
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for case in ET.parse(argv[0]).getroot().iter("testcase"):
        name = (case.get("classname") or "?").split(".")
        module = next((p for p in name if p.startswith("test_")), name[-1])
        seconds[module] += float(case.get("time") or 0.0)
        count[module] += 1
    total = sum(seconds.values()) or 1.0
    print(f"test time per file (sum of its tests' own times: {total:.0f} s over {sum(count.values())} tests)")
    for module, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {s:8.1f} s  {100 * s / total:5.1f}%  {count[module]:4d} tests  {module}.py")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
