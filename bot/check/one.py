"""Run ONE check in this (fresh) process: ``python -m bot.check.one --check CHECK.json --out ROW.json``.

CHECK.json is a :class:`CheckRequest` (the check's spec and settings, with the shapes used in
results.json). The check's row (:class:`bot.records.CheckRow`) is written to ROW.json; the exit
code is 0 when the check ran (whatever it found), so a non-zero exit or a missing row means the
process itself died. Used by later stages (minify's localize and capture) to re-run a check under
other backends or repro-after settings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field

from bot.check.settings import Settings
from bot.records import CheckRow, Record, Spec


@dataclass
class CheckRequest(Record):
    """What the child is asked to check: the check's spec under these settings."""

    spec: Spec | None = None
    settings: Settings = field(default_factory=Settings)

    def write(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_json(), fh)

    @classmethod
    def read(cls, path: str) -> "CheckRequest":
        with open(path, encoding="utf-8") as fh:
            return cls.from_json(json.load(fh))


def read_row(path: str) -> CheckRow | None:
    """The row a child wrote to ``path``; None when it wrote none (the process died)."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        return CheckRow.from_json(json.load(fh))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bot.check.one", description=__doc__.splitlines()[0])
    p.add_argument("--check", required=True, help="JSON file with spec and settings")
    p.add_argument("--out", required=True, help="where to write the result row (JSON)")
    args = p.parse_args(argv)
    req = CheckRequest.read(args.check)
    from bot.check.judge import judge

    row = judge(req.spec or Spec(), req.settings,
                phase=lambda ph: print(f"[check] phase {ph}", file=sys.stderr, flush=True))
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(row.to_json(), fh, indent=1, default=str)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
