"""How many issues a run directory's failures would become: fingerprint v1 against v2.

Reads RUN_DIR (after `check` and `minify`) through bot.rundir and prints the failures grouped by
the v1 primary (op sequence with tensor ranks; first message line) and by the v2 primary (culprit
and bisector answer; every compiler `error:` line). Each group is one issue.

Usage: python benchmarks/grouping.py RUN_DIR
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bot import fingerprint as fp  # noqa: E402
from bot import rundir  # noqa: E402


def main(run_dir: str) -> None:
    results = rundir.read_results(run_dir)
    groups: dict[str, dict[str, list[str]]] = {"v1": {}, "v2": {}}
    failing = [c for c in results["checks"] if c.get("failure_class")]
    for check in failing:
        rec = rundir.read_failure(run_dir, check["id"])
        groups["v1"].setdefault(fp.compute_v1(check, rec).primary, []).append(check["model"])
        groups["v2"].setdefault(fp.compute(check, rec).primary, []).append(check["model"])
    print(f"{len(failing)} failures in {run_dir}")
    for version, by_key in groups.items():
        print(f"{version}: {len(by_key)} issues")
        for key, models in sorted(by_key.items(), key=lambda kv: sorted(kv[1])):
            print(f"  {key}  {', '.join(sorted(models))}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    main(sys.argv[1])
