"""Run ONE check in this (fresh) process: ``python -m bot.check.one --check CHECK.json --out ROW.json``.

CHECK.json is a :class:`CheckRequest` (the check's spec and settings, with the shapes used in
results.json). The check's row (:class:`bot.records.CheckRow`) is written to ROW.json; the exit
code is 0 when the check ran (whatever it found), so a non-zero exit or a missing row means the
process itself died. :func:`launch` is the one way a check is run in a fresh interpreter: the sweep's
check again after a forked child died (:func:`bot.check.isolate.run_fresh`) and minify's capture
rerun (:func:`bot.minify.capture.run_capture`) both start this module through it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from dataclasses import dataclass, field

from bot import proc
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


def launch(request: CheckRequest, *, cwd: str, log_path: str, timeout: float, env: dict,
           announce: str | None = None, python: str | None = None, server: proc.ForkServer | None = None,
           **run_kw) -> tuple[CheckRow | None, proc.Result]:
    """Run the check ``request`` asks for in a fresh interpreter (``python -m bot.check.one``) in ``cwd``
    (its ``check.json`` and ``row.json`` are written there), under ``env``, its output appended to
    ``log_path`` after the line ``announce`` (default: the command). Given a fork ``server`` (one that
    imported torch and nothing of this process's state), the interpreter is a fork of it, as
    ``python -m`` would run there; a fresh one when the server is gone. ``run_kw`` goes to
    :func:`bot.proc.run` (``tail_lines``, ``capture``, ``events``). Returns (the row the child wrote, or
    None when it wrote none or one that does not parse; the process's result): whether a row from a
    process that exited non-zero counts is the caller's to say."""
    os.makedirs(cwd, exist_ok=True)
    check, out = os.path.join(cwd, "check.json"), os.path.join(cwd, "row.json")
    with contextlib.suppress(FileNotFoundError):
        os.remove(out)   # a row left by an earlier run in the same directory is not this run's
    request.write(check)
    cmd = [python or sys.executable, "-m", "bot.check.one", "--check", check, "--out", out]
    shown = " ".join(os.path.basename(c) if os.path.isabs(c) else c for c in cmd)
    res = None
    if server is not None:
        res = server.run(None, cmd[3:], module="bot.check.one", path=[proc.BOT_ROOT], env=env, cwd=cwd, timeout=timeout,
                         log_path=log_path, log_mode="a", announce=announce if announce is not None else
                         f"$ (forked from the fork server) python -m bot.check.one {' '.join(cmd[4:])}", **run_kw)
        res = None if res.error else res
    if res is None:
        res = proc.run(cmd, cwd=cwd, env=env, timeout=timeout, log_path=log_path, log_mode="a",
                       announce=announce if announce is not None else f"$ {shown}", **run_kw)
    try:
        row = read_row(out)
    except (ValueError, TypeError, KeyError):   # a row the check's own code spoiled: no result
        row = None
    return row, res


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
