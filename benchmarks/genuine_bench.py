"""The bot on genuine inductor bugs: every program in benchmarks/genuine/ (one public pytorch/pytorch
bug each, see benchmarks/genuine/README.md) is run the way a user runs it,

    minify-bot run --command "python benchmarks/genuine/<prog>.py" --name <prog> --out RUN --issues-dir TRACKER

one run directory per program and one local tracker shared by all of them (so a bug folded into
another's issue, or labelled as a regression on its first sighting, shows). Then torch's own fx
minifier (``minifier_launcher.py minify --no-isolate``) runs on the same graph: the program is
captured again through the bot's own capture (its environment hook keeps every launcher torch
writes, numbered by graph) at the level the bot used, and the launcher of the graph the bot
minified is handed to torch (measured by benchmarks/minify_bench.py's helpers).

Printed per program: failure class, capture (how, level, graph k of n), nodes before -> after,
queries, verified k/N, whether the repro is inlined in the issue, the issue's title and labels,
seconds; then torch's --no-isolate queries and final nodes on the same launcher.

    python benchmarks/genuine_bench.py [--programs gnn_index_add,ranker_int32] [--out DIR]
        [--no-torch] [--budget 600] [--timeout 1800]

Slow (minutes per program: each run compiles the program several times). Run it with `nice` on a
shared machine.
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

from minify_bench import nodes_of, run_torch  # noqa: E402

CORPUS = os.path.join(ROOT, "benchmarks", "genuine")
BOT = os.path.join(os.path.dirname(sys.executable), "minify-bot")


def programs() -> list[str]:
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(CORPUS, "*.py")))


def run_bot(prog: str, work: str, tracker: str, budget: int, timeout: float) -> dict:
    """One `minify-bot run` on one program; its failure record, issue and wall time."""
    out = os.path.join(work, "run")
    cmd = [BOT, "run", "--command", f"{shlex.quote(sys.executable)} benchmarks/genuine/{prog}.py", "--name", prog,
           "--out", out, "--issues-dir", tracker, "--budget", str(budget)]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        rc, log = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, log = None, (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
    wall = time.time() - t0
    with open(os.path.join(work, "bot.log"), "w") as fh:
        fh.write(log)
    r = {"rc": rc, "wall": wall, "out": out, "failures": []}
    for path in sorted(glob.glob(os.path.join(out, "failures", "*", "failure.json"))):
        with open(path) as fh:
            r["failures"].append(json.load(fh))
    report = os.path.join(out, "report.json")
    r["actions"] = []
    if os.path.exists(report):
        with open(report) as fh:
            r["actions"] = json.load(fh).get("actions") or []
    r["results"] = None
    if os.path.exists(os.path.join(out, "results.json")):
        with open(os.path.join(out, "results.json")) as fh:
            r["results"] = json.load(fh)
    return r


def issue_of(action: dict, tracker: str) -> dict:
    path = os.path.join(tracker, f"{action['issue']}.json")
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        return json.load(fh)


def inlined(body: str, fdir: str, repro_path: str | None) -> bool:
    """Whether the issue body carries the repro itself (its graph code), not only a pointer to the
    artifacts."""
    if not repro_path:
        return False
    path = os.path.join(fdir, repro_path)
    if not os.path.exists(path):
        return False
    with open(path) as fh:
        lines = [x.strip() for x in fh if re.match(r"\s+\w+ = torch\.", x)]
    return bool(lines) and all(x in body for x in lines[:3])


def paste_run(body: str, work: str, timeout: float) -> str:
    """The issue's repro code block, pasted into an empty directory and run with no artifacts, as a
    maintainer runs it: ``exit N`` and the last line of its output, or why it could not run."""
    m = re.search(r"### Minimized repro\n.*?^(`{3,})python\n(.*?)\n\1$", body, re.S | re.M)
    if not m:
        return "no code block"
    d = os.path.join(work, "paste")
    os.makedirs(d, exist_ok=True)
    name = re.search(r"Save as `([\w.]+)`", body)
    path = os.path.join(d, name.group(1) if name else "repro.py")
    with open(path, "w") as fh:
        fh.write(m.group(2) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        p = subprocess.run([sys.executable, os.path.basename(path)], cwd=d, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timed out"
    last = (p.stdout + p.stderr).strip().splitlines()[-1:] or [""]
    return f"exit {p.returncode}: {last[0][:120]}"


def same_graph(c, capture: dict) -> str | None:
    """The launcher of the graph the bot minified: graph k of the run, and of the role the bot
    reported (a training step's forward and backward are the same graph k)."""
    try:
        from bot.minify.worker.main import graph_role
    except ImportError:  # the bot's layout moved: graph number only
        def graph_role(_source):
            return None
    graph_of = getattr(c, "graph_of", None) or {}
    want = [p for p, g in graph_of.items() if capture.get("graph") is not None and g == capture["graph"]]
    for path in want:
        with open(path) as fh:
            if graph_role(fh.read()) == capture.get("role"):
                return path
    return want[0] if want else c.launcher


def torch_no_isolate(bot: dict, fail: dict, work: str, cap: float) -> dict:
    """torch's fx minifier (--no-isolate; --accuracy for an accuracy failure) on the launcher of the
    graph the bot minified, captured by the bot's own capture at the bot's level (the launchers the
    check's rerun kept, when it kept them at that level)."""
    from bot.minify.capture import run_capture_program

    capture = (fail.get("repro") or {}).get("capture") or {}
    level = capture.get("repro_level")
    res = bot["results"]
    row = next((c for c in (res or {}).get("checks") or [] if c.get("id") == fail.get("id")), None)
    if not level or row is None:
        return {"status": "no capture by the bot"}
    d = os.path.join(work, "torch")
    os.makedirs(d, exist_ok=True)
    c = run_capture_program(row, res["settings"], d, os.path.join(d, "capture.log"),
                            failure_class=fail.get("class") or "accuracy", level=level, timeout=cap)
    launcher = same_graph(c, capture)
    if not launcher:
        return {"status": f"capture at level {level} wrote no launcher"}
    # a launcher written below level 4 judges by exceptions only: an accuracy failure is minified
    # with torch's own accuracy test (RMSE against fp64), as run_repro(..., accuracy="accuracy")
    flags = ["--no-isolate"] + (["--accuracy"] if fail.get("class") == "accuracy" else [])
    r = run_torch(launcher, os.path.join(d, "noiso"), flags, cap)
    r["launcher_nodes"] = nodes_of(launcher)
    r["graph"] = (getattr(c, "graph_of", None) or {}).get(launcher)
    return r


def block_of(body: str) -> tuple[str, int]:
    """The issue's repro block: which form it is (short, plain, launcher) and its lines."""
    m = re.search(r"### Minimized repro\n.*?^(`{3,})python\n(.*?)\n\1$", body, re.S | re.M)
    if not m:
        return "-", 0
    name = re.search(r"Save as `([\w.]+)`", body)
    kind = {"repro_short.py": "short", "repro_plain.py": "plain"}.get(name.group(1) if name else "", "launcher")
    return kind, len(m.group(2).splitlines())


def machine_paths(text: str) -> list[str]:
    """This machine's paths that a GitHub-visible text holds (venv, checkout, home, temp)."""
    import tempfile

    roots = {sys.prefix, ROOT, os.path.expanduser("~") + "/", tempfile.gettempdir() + "/"}
    return sorted(r for r in roots if r in text)


def row_of(prog: str, bot: dict, tracker: str, torch_r: dict | None) -> dict:
    fails = bot["failures"]
    if not fails:
        return {"program": prog, "class": f"(no failure; bot exit {bot['rc']})", "seconds": bot["wall"],
                "torch": torch_r}
    f = fails[0]
    rep = f.get("repro") or {}
    cap = rep.get("capture") or {}
    ver = rep.get("verification") or {}
    act = next((a for a in bot["actions"] if f.get("id") in (a.get("checks") or [])), None)
    iss = issue_of(act, tracker) if act else {}
    fdir = os.path.join(bot["out"], "failures", f.get("id", ""))
    how = f"{cap.get('method') or '-'} L{cap.get('repro_level') or '-'}"
    if cap.get("graph"):
        how += f" g{cap['graph']}/{cap.get('graphs') or '?'}"
    return {"program": prog, "class": f.get("class"), "status": rep.get("status"), "capture": how,
            "capture_note": cap.get("note"), "reason": rep.get("reason"),
            "nodes": f"{rep.get('nodes_before') or '-'}->{rep.get('nodes_after') or '-'}",
            "queries": rep.get("queries"),
            "verified": f"{ver.get('failed_same_way')}/{ver.get('runs')}" if ver else "-",
            "random_inputs_reproduce": ver.get("random_inputs_reproduce"),
            "inlined": inlined(iss.get("body") or "", fdir, rep.get("path"))
            or inlined(iss.get("body") or "", fdir, (rep.get("plain") or {}).get("path"))
            or block_of(iss.get("body") or "")[0] == "short",
            "plain": (f"{(rep.get('plain') or {}).get('failed_same_way')}/{(rep.get('plain') or {}).get('runs')}"
                      if (rep.get("plain") or {}).get("runs") else (rep.get("plain") or {}).get("reason") or "-"),
            "plain_inline_inputs": (rep.get("plain") or {}).get("inputs_inline"),
            "paste": paste_run(iss.get("body") or "", os.path.dirname(bot["out"]), 600) if iss.get("body") else "-",
            "block": "{} {} lines".format(*block_of(iss.get("body") or "")),
            "ops": len([g for g in rep.get("graph") or [] if g.get("op") != "output"]),
            "leaks": machine_paths((iss.get("title") or "") + (iss.get("body") or "")),
            "first_diverging": ((f.get("readout") or {}).get("first_diverging")),
            "issue": act.get("issue") if act else None, "issue_action": act.get("action") if act else None,
            "title": iss.get("title") or "-", "labels": iss.get("labels") or [],
            "culprit": (f.get("culprit") or {}).get("ops"), "bisect": (f.get("culprit") or {}).get("bisect"),
            "seconds": bot["wall"], "torch": torch_r}


def print_table(rows: list[dict]) -> None:
    print()
    hdr = (f"{'program':20} {'class':13} {'capture':16} {'nodes':>9} {'q':>4} {'verif':>5} {'inl':>3} "
           f"{'sec':>6} | {'torch q':>7} {'nodes':>5} {'sec':>6} | issue")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        t = r.get("torch") or {}
        tq = t.get("queries") if t.get("queries") is not None else "-"
        tn = t.get("nodes") if t.get("nodes") is not None else "-"
        tw = f"{t['wall']:.0f}" if t.get("wall") else "-"
        print(f"{r['program']:20} {str(r.get('class')):13} {r.get('capture', '-'):16} {r.get('nodes', '-'):>9} "
              f"{str(r.get('queries') if r.get('queries') is not None else '-'):>4} {r.get('verified', '-'):>5} "
              f"{'yes' if r.get('inlined') else 'no':>3} {r['seconds']:6.0f} | {str(tq):>7} {str(tn):>5} {tw:>6} | "
              f"#{r.get('issue') or '-'} {r.get('title', '-')}")
    print()
    for r in rows:
        t = r.get("torch") or {}
        notes = [f"status {r.get('status')}"]
        if r.get("reason"):
            notes.append(f"reason: {r['reason']}")
        if r.get("capture_note"):
            notes.append(f"capture note: {r['capture_note']}")
        notes.append(f"labels {','.join(r.get('labels') or []) or '-'}")
        notes.append(f"culprit {', '.join(r.get('culprit') or []) or '-'}; bisector {r.get('bisect') or '-'}")
        notes.append(f"issue block: {r.get('block')} for {r.get('ops')} ops; machine paths in the issue: "
                     f"{r.get('leaks') or 'none'}")
        notes.append(f"plain repro {r.get('plain')} (inputs inline: {r.get('plain_inline_inputs')}); "
                     f"the issue's block pasted alone: {r.get('paste')}; first diverging op {r.get('first_diverging')}")
        if r.get("random_inputs_reproduce") is not None:
            notes.append(f"random inputs reproduce: {r['random_inputs_reproduce']}")
        if t:
            notes.append(f"torch --no-isolate: {t.get('status')}"
                         + (f" on graph {t['graph']} ({t.get('launcher_nodes')} nodes)" if t.get("graph") else ""))
        print(f"{r['program']:20} " + "; ".join(notes))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default=",".join(programs()), help="comma-separated names from benchmarks/genuine")
    ap.add_argument("--out", help="keep the work here (default: a temp dir)")
    ap.add_argument("--no-torch", action="store_true", help="skip torch's fx minifier (--no-isolate) comparison")
    ap.add_argument("--budget", type=int, default=600, help="the bot's minify budget per failure (seconds)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per bot run and per torch minifier run")
    a = ap.parse_args()
    known = programs()
    work = a.out or tempfile.mkdtemp(prefix="genuine-bench-")
    tracker = os.path.join(work, "tracker")
    rows = []
    for prog in a.programs.split(","):
        if prog not in known:
            print(f"unknown program {prog!r}: expected one of {', '.join(known)}", file=sys.stderr)
            return 2
        d = os.path.join(work, prog)
        os.makedirs(d, exist_ok=True)
        bot = run_bot(prog, d, tracker, a.budget, a.timeout)
        torch_r = None
        if not a.no_torch and bot["failures"]:
            torch_r = torch_no_isolate(bot, bot["failures"][0], d, a.timeout)
        r = row_of(prog, bot, tracker, torch_r)
        rows.append(r)
        print(json.dumps(r, default=str), flush=True)
    print_table(rows)
    print(f"\nwork: {work}  (bot logs: <program>/bot.log, run dirs: <program>/run, tracker: tracker/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
