"""Run ONE check in this (fresh) process: ``python -m bot.check.one --check CHECK.json --out ROW.json``.

CHECK.json is ``{"spec": {...}, "settings": {...}}`` with the shapes used in results.json. The
row is written to ROW.json; the exit code is 0 when the check ran (whatever it found), so a
non-zero exit or a missing row means the process itself died. Used by later stages (minify's
localize and capture) to re-run a check under other backends or repro-after settings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bot.check.one", description=__doc__.splitlines()[0])
    p.add_argument("--check", required=True, help="JSON file with spec and settings")
    p.add_argument("--out", required=True, help="where to write the result row (JSON)")
    args = p.parse_args(argv)
    with open(args.check, encoding="utf-8") as fh:
        req = json.load(fh)
    from bot.check.judge import judge
    from bot.check.settings import Settings

    settings = Settings.from_dict(req["settings"])
    row = judge(req["spec"], settings, phase=lambda ph: print(f"[check] phase {ph}", file=sys.stderr, flush=True))
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(row, fh, indent=1, default=str)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
