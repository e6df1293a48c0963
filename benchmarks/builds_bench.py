"""A torch upgrade, end to end: the genuine-bug corpus under torch 2.13.0, then under 2.15.0.

Builds a venv per torch build (bot/builds.py: cached, created with uv or pip, the project installed
into it beside torch), then runs `minify-bot run --command "python PROGRAM"` for every program of
the corpus (benchmarks/genuine/) with one local tracker:

1. under the old build: each failing program files its issue;
2. under the new build, ``--close-after`` times: a bug fixed in the new build passes and its issue is
   closed, the close comment naming the build; a bug still there updates its issue, which lists the
   new build among those it is present in.

Prints one row per program: what the old build found, what the new one did, the issue's final state,
whether the close comment names the new build ("fixed in") or the issue lists it as still affected,
and, where the corpus says which torch fixed the bug, whether that matches.

    python benchmarks/builds_bench.py                                   # torch==2.13.0 -> torch==2.15.0
    python benchmarks/builds_bench.py --old venv:.venv --new venv:/opt/t215   # existing venvs
    python benchmarks/builds_bench.py --only decoder_sdpa --close-after 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot import builds as bl  # noqa: E402
from bot.tracker.local import LocalTracker  # noqa: E402

CORPUS = ROOT / "benchmarks" / "genuine"
RUN_TIMEOUT = 3600


def programs(corpus: Path, only: list[str]) -> list[dict]:
    """The corpus's programs: {name, path, cwd, fixed_in (or None)}. A manifest (corpus.json,
    corpus.yaml or manifest.yaml: a list or {programs: [...]}, each with name and program/path and
    optionally fixed_in) when there is one; else every ``*/prog.py`` and top-level ``*.py`` that
    is not a script of the corpus itself."""
    corpus = corpus.resolve()
    entries = _manifest(corpus)
    if entries is None:
        found = sorted(corpus.glob("*/prog.py")) + sorted(p for p in corpus.glob("*.py")
                                                           if not p.name.startswith(("_", "run", "bench")))
        entries = [{"name": p.parent.name if p.name == "prog.py" else p.stem, "program": str(p)} for p in found]
    out = []
    for e in entries:
        path = Path(e.get("program") or e.get("path") or e.get("script") or "")
        path = path if path.is_absolute() else corpus / path
        if not path.is_file():
            continue
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(e.get("name") or path.stem))[:60]
        if only and name not in only:
            continue
        fixed = e.get("fixed_in") or e.get("fixed")
        out.append({"name": name, "path": path, "cwd": path.parent,
                    "fixed_in": str(fixed) if fixed not in (None, False) else None})
    return out


def _manifest(corpus: Path):
    import yaml

    for name in ("corpus.json", "corpus.yaml", "manifest.yaml", "manifest.json"):
        p = corpus / name
        if p.is_file():
            doc = yaml.safe_load(p.read_text())
            if isinstance(doc, dict):
                doc = doc.get("programs") or doc.get("bugs") or [dict(v, name=k) for k, v in doc.items()
                                                                   if isinstance(v, dict)]
            return [d for d in doc or [] if isinstance(d, dict)]
    return None


def run_bot(python: str, prog: dict, out: Path, issues: Path, close_after: int, env: dict) -> dict:
    cmd = f"{shlex.quote(python)} {shlex.quote(prog['path'].name)}"
    argv = [python, "-m", "bot", "run", "--command", cmd, "--name", prog["name"], "--out", str(out),
            "--issues-dir", str(issues), "--close-after", str(close_after)]
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=prog["cwd"], env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    seconds = time.perf_counter() - t0
    report = {}
    if (out / "report.json").is_file():
        report = json.loads((out / "report.json").read_text())
    status = "?"
    if (out / "results.json").is_file():
        checks = json.loads((out / "results.json").read_text()).get("checks") or []
        status = ",".join(sorted({str(c.get("status")) for c in checks})) or "?"
    if res.returncode not in (0, 1):
        (out.parent / f"{out.name}.stderr.txt").write_text(res.stderr)
    return {"rc": res.returncode, "status": status, "seconds": seconds,
            "actions": [a for a in report.get("actions") or [] if a.get("fingerprint")]}


def plain_exit(python: str, prog: dict, env: dict) -> int | None:
    """The program's own exit status under a build, without the bot: the ground truth of whether
    the build has the bug (exit 1: compiled differs from eager) when the corpus does not say."""
    try:
        res = subprocess.run([python, prog["path"].name], cwd=prog["cwd"], env=env, capture_output=True, text=True,
                             timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    return res.returncode


def issue_of(issues: Path, name: str) -> dict | None:
    """The bug issue whose affected checks name the program (its check id starts with it)."""
    for rec in LocalTracker(issues).records():
        if "minify-bot-dashboard" in rec["labels"]:
            continue
        if re.search(rf"\b{re.escape(name)}\b", rec["body"].replace("\\", "")):
            return rec
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", default="torch==2.13.0", help="the build before the upgrade (default torch==2.13.0)")
    ap.add_argument("--new", default="torch==2.15.0", help="the build after it (default torch==2.15.0)")
    ap.add_argument("--corpus", default=str(CORPUS), help="the genuine-bug corpus (default benchmarks/genuine)")
    ap.add_argument("--only", action="append", default=[], help="only this program (repeatable)")
    ap.add_argument("--close-after", type=int, default=2, help="passing runs that close an issue (default 2)")
    ap.add_argument("--cache-dir", help="where the builds' venvs are kept (default: minify-bot's build cache)")
    ap.add_argument("--work", help="keep run directories and issues here (default: a temporary directory)")
    args = ap.parse_args(argv)

    progs = programs(Path(args.corpus), args.only)
    if not progs:
        print(f"no programs in {args.corpus}", file=sys.stderr)
        return 2
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    cache = bl.BuildCache(args.cache_dir, log=say)
    pythons, versions = {}, {}
    for key, spec in (("old", args.old), ("new", args.new)):
        b = bl.parse_build(spec)
        if b.kind == "pip":  # the project beside torch: the bot itself runs under the build
            b = bl.Build(b.kind, b.target, b.name, b.index_url, b.env, editable=(str(ROOT),))
        t0 = time.perf_counter()
        prepared = cache.prepare(b)
        info = cache.probe(prepared)
        if info.error:
            say(f"{key} build {b.name}: {info.error}")
            return 3
        pythons[key], versions[key] = prepared.prefix[0], info.torch
        say(f"{key} build {b.name}: torch {info.torch} ({info.git and info.git[:12]}), ready in "
            f"{time.perf_counter() - t0:.0f} s")

    work = Path(args.work or tempfile.mkdtemp(prefix="builds-bench-"))
    issues = work / "issues"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    rows = []
    for prog in progs:
        say(f"{prog['name']}: under torch {versions['old']}")
        old = run_bot(pythons["old"], prog, work / f"{prog['name']}-old", issues, args.close_after, env)
        new_runs = []
        for k in range(args.close_after):
            say(f"{prog['name']}: under torch {versions['new']}, run {k + 1}")
            r = run_bot(pythons["new"], prog, work / f"{prog['name']}-new{k + 1}", issues, args.close_after, env)
            new_runs.append(r)
            if "pass" not in r["status"]:
                break  # still failing: its issue is updated; no more runs needed to tell
        if prog["fixed_in"] is None:
            rc = plain_exit(pythons["new"], prog, env)
            prog["plain_new"] = rc
            if rc is not None:
                prog["fixed_in"] = versions["new"] if rc == 0 else "later"
        rows.append(_row(prog, old, new_runs, issue_of(issues, prog["name"]), versions["new"]))
    _print(rows, versions)
    print(f"\nrun directories and issues: {work}")
    return 0


def _row(prog, old, new_runs, issue, new_version) -> dict:
    base = new_version.split("+")[0]
    comments = [c["body"].replace("\\", "") for c in (issue or {}).get("comments") or []]
    body = ((issue or {}).get("body") or "").replace("\\", "")
    closed_naming = any(c.startswith("Closing") and f"Fixed in torch {base}" in c for c in comments)
    still = bool(re.search(rf"Present in: [^\n]*torch {re.escape(base)}", body))
    verdict = "fixed" if issue and issue["state"] == "closed" else "still present" if issue else "-"
    expected = None
    if prog["fixed_in"] is not None:
        expected = "fixed" if str(prog["fixed_in"]).split("+")[0] == base else "still present"
    ok = None if expected is None else (expected == verdict and (closed_naming if verdict == "fixed" else still))
    return {"name": prog["name"], "old": old["status"], "old_s": old["seconds"], "issue": (issue or {}).get("number"),
            "new": " -> ".join(r["status"] for r in new_runs), "new_s": sum(r["seconds"] for r in new_runs),
            "state": (issue or {}).get("state", "-"), "verdict": verdict, "closed_naming": closed_naming,
            "still": still, "expected": expected, "ok": ok}


def _print(rows, versions) -> None:
    old, new = versions["old"], versions["new"]
    print(f"\n| program | torch {old} | issue | torch {new} runs | issue state | close comment names {new} "
          f"| lists {new} as still present | expected | as expected | seconds (old / new) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['old']} | {'#' + str(r['issue']) if r['issue'] else '-'} | {r['new']} | "
              f"{r['state']} | {'yes' if r['closed_naming'] else 'no'} | {'yes' if r['still'] else 'no'} | "
              f"{r['expected'] or '?'} | {'-' if r['ok'] is None else 'yes' if r['ok'] else 'NO'} | "
              f"{r['old_s']:.0f} / {r['new_s']:.0f} |")
    fixed = sum(r["verdict"] == "fixed" for r in rows)
    print(f"\n{len(rows)} programs: {fixed} closed as fixed in {new}, {len(rows) - fixed} open")


if __name__ == "__main__":
    sys.exit(main())
