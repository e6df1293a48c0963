"""The bot on genuine CUDA inductor bugs (benchmarks/genuine_cuda/), timed on the GPU runner.

Every program there (one public pytorch/pytorch bug each, see benchmarks/genuine_cuda/README.md)
is run three ways,

    python benchmarks/genuine_cuda/<prog>.py                                  the plain program, timed
    minify-bot check --command "python benchmarks/genuine_cuda/<prog>.py" --name <prog> --reruns 0 --out CHECK
    minify-bot run --command "python benchmarks/genuine_cuda/<prog>.py" --name <prog> --out RUN --issues-dir TRACKER

one work directory per program and one local tracker shared by all of them (as genuine_bench.py).
From RUN/results.json, RUN/failures/*/failure.json and the tracker's issue files it reads what
genuine_bench.py reads (its row_of: failure class, capture, nodes before -> after, queries,
verified k/N, the issue's title), plus the device the check row names (results.json rows'
"device") and the device the issue title names (its trailing "(dtype, device)"), and the seconds
from the end of the check stage to the issue being filed.

Seconds to issue: the issue file's mtime (TRACKER/<n>.json, written when the report stage files
the issue, rewritten when it updates one) minus RUN/results.json's mtime (written last by the
check stage; minify and report only read it). Both are this machine's clock, so the number covers
minify (capture, minimization, verification, bisection) and report. A bug folded into another
program's issue reads as the seconds to that update.

A program that exits 77 ("needs a CUDA device") is listed as "skipped: no CUDA device" and the bot
is not run on it.

    python benchmarks/gpu_bench.py [--programs cnn_pool_energy,stream_cumsum] [--out DIR] [--timeout 1800]

Slow (minutes per program: the run compiles the program several times). Needs a CUDA machine.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from genuine_bench import BOT, row_of  # noqa: E402

REL = "benchmarks/genuine_cuda"
CORPUS = os.path.join(ROOT, REL)
NO_CUDA = 77  # a program's exit status when no CUDA device is available
TITLE_DEVICE = re.compile(r"\(([^(),]+), ([^(),]+)\)(?: \[flaky\])?\s*$")  # "... (float32, cuda)"


def programs() -> list[str]:
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(CORPUS, "*.py")))


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def timed(cmd: list[str], log: str, timeout: float) -> tuple[int | None, float]:
    """Run one command from the repository root; its exit status (None: timed out) and wall time."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = None, _text(e.stdout) + _text(e.stderr)
    wall = time.time() - t0
    with open(log, "w") as fh:
        fh.write(out)
    return rc, wall


def read_json(path: str):
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def run_record(out: str, rc: int | None, wall: float) -> dict:
    """What genuine_bench.row_of reads of a `minify-bot run` directory."""
    fails = [read_json(p) for p in sorted(glob.glob(os.path.join(out, "failures", "*", "failure.json")))]
    report = read_json(os.path.join(out, "report.json")) or {}
    return {"rc": rc, "wall": wall, "out": out, "failures": [f for f in fails if f],
            "actions": report.get("actions") or [], "results": read_json(os.path.join(out, "results.json"))}


def check_rows(results) -> list[dict]:
    return list((results or {}).get("checks") or [])


def row_device(results) -> str:
    return ",".join(sorted({str(c.get("device")) for c in check_rows(results)})) or "-"


def title_device(title: str | None) -> str:
    m = TITLE_DEVICE.search(title or "")
    return m.group(2) if m else "-"


def seconds_to_issue(run_out: str, tracker: str, issue) -> float | None:
    results, path = os.path.join(run_out, "results.json"), os.path.join(tracker, f"{issue}.json")
    if issue is None or not os.path.exists(results) or not os.path.exists(path):
        return None
    return os.path.getmtime(path) - os.path.getmtime(results)


def bench(prog: str, work: str, tracker: str, timeout: float) -> dict:
    d = os.path.join(work, prog)
    os.makedirs(d, exist_ok=True)
    script = f"{REL}/{prog}.py"
    rc_p, plain = timed([sys.executable, script], os.path.join(d, "plain.log"), timeout)
    if rc_p == NO_CUDA:
        return {"program": prog, "skipped": "skipped: no CUDA device", "plain_s": plain}
    command = f"{shlex.quote(sys.executable)} {script}"
    check_out, run_out = os.path.join(d, "check"), os.path.join(d, "run")
    rc_c, check_s = timed([BOT, "check", "--command", command, "--name", prog, "--reruns", "0",
                           "--out", check_out], os.path.join(d, "check.log"), timeout)
    rc_r, run_s = timed([BOT, "run", "--command", command, "--name", prog, "--out", run_out,
                         "--issues-dir", tracker], os.path.join(d, "bot.log"), timeout)
    bot = run_record(run_out, rc_r, run_s)
    r = row_of(prog, bot, tracker, None)
    alone = check_rows(read_json(os.path.join(check_out, "results.json")))
    r.update({"plain_s": plain, "plain_rc": rc_p, "check_s": check_s, "check_rc": rc_c,
              "check_alone": [(c.get("status"), c.get("failure_class")) for c in alone],
              "run_rc": rc_r, "device_check": row_device(bot["results"]),
              "device_issue": title_device(r.get("title")),
              "to_issue_s": seconds_to_issue(run_out, tracker, r.get("issue"))})
    return r


def _s(v, fmt: str = "{:.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def print_table(rows: list[dict]) -> None:
    print()
    hdr = (f"{'program':18} {'plain s':>7} {'check s':>7} {'ratio':>6} {'class':13} {'capture':16} "
           f"{'nodes':>9} {'q':>4} {'verif':>5} {'device row/issue':>16} {'to issue s':>10}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        if r.get("skipped"):
            print(f"{r['program']:18} {r['skipped']}")
            continue
        ratio = r["check_s"] / r["plain_s"] if r.get("plain_s") else None
        dev = f"{r.get('device_check', '-')}/{r.get('device_issue', '-')}"
        print(f"{r['program']:18} {_s(r.get('plain_s'), '{:.1f}'):>7} {_s(r.get('check_s'), '{:.1f}'):>7} "
              f"{_s(ratio, '{:.1f}x'):>6} {str(r.get('class')):13} {r.get('capture', '-'):16} "
              f"{r.get('nodes', '-'):>9} {_s(r.get('queries'), '{}'):>4} {r.get('verified', '-'):>5} "
              f"{dev:>16} {_s(r.get('to_issue_s')):>10}")
    print()
    for r in rows:
        if r.get("skipped"):
            continue
        print(f"{r['program']:18} #{r.get('issue') or '-'} {r.get('title', '-')}; plain exit {r.get('plain_rc')}; "
              f"check alone exit {r.get('check_rc')} {r.get('check_alone')}; run exit {r.get('run_rc')} "
              f"in {r['seconds']:.0f} s; status {r.get('status')}"
              + (f"; reason: {r['reason']}" if r.get("reason") else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default=",".join(programs()), help=f"comma-separated names from {REL}")
    ap.add_argument("--out", help="keep the work here (default: a temp dir)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per program run, check and bot run")
    a = ap.parse_args()
    known = programs()
    work = a.out or tempfile.mkdtemp(prefix="gpu-bench-")
    tracker = os.path.join(work, "tracker")
    rows = []
    for prog in a.programs.split(","):
        if prog not in known:
            print(f"unknown program {prog!r}: expected one of {', '.join(known)}", file=sys.stderr)
            return 2
        r = bench(prog, work, tracker, a.timeout)
        rows.append(r)
        print(json.dumps(r, default=str), flush=True)
    print_table(rows)
    print(f"\nwork: {work}  (logs: <program>/plain.log, check.log, bot.log; run dirs: <program>/check, "
          f"<program>/run; tracker: tracker/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
