"""The token never shares a job with model code (issue 31), tried as an attacker.

Model code runs as the runner's own user: whatever its job holds, it can read (/proc/<pid>/environ
of its ancestors, the checkout's .git/config, files of the same user) and it can write the runner's
file commands it finds in its environment. So the layout, not a guard inside the job, is the
boundary: the check job (stage check, as .github/workflows/sweep.yml runs it) holds no credential
at all, and the report job, which runs no model code, holds the token.

The attacker here is a benchmark program run by the check job. It reads every environment block
and command line of its ancestors and of every process of the job, the checkout's git
configuration, and the runner's file commands; it writes the file commands it can find, plants a
template beside the bot, and leaves a chain of processes and a detached daemon that keep looking
while the job's remaining steps run."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bot import proc
from tests.ghstub.action import ROOT, assert_token_not_leaked, filed_issues
from tests.ghstub.fixtures import BOT_TOKEN

ATTACKER = r'''
import json, os, re, sys, time
OUT = {out!r}
MARK = {mark!r}.encode()
TOKENS = re.compile(rb"gh[pousr]_[A-Za-z0-9]{{20,}}|github_pat_|x-access-token|AUTHORIZATION:")


def read(path):
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def parent(pid):
    stat = read(f"/proc/{{pid}}/stat") or b") X 0"
    return int(stat[stat.rfind(b")") + 2:].split()[1])


def scan(where):
    chain, pid = [], os.getpid()
    while pid > 1:
        chain.append(pid)
        pid = parent(pid)
    found, readable = [], 0
    for p in chain:
        for what in ("environ", "cmdline"):
            data = read(f"/proc/{{p}}/{{what}}")
            readable += data is not None
            if data and TOKENS.search(data):
                found.append(f"ancestor {{p}} {{what}}")
    for name in os.listdir("/proc"):
        data = read(f"/proc/{{name}}/environ") if name.isdigit() else None
        if data and MARK in data and TOKENS.search(data):
            found.append(f"process {{name}} environ")
    git = read(os.path.join(os.getcwd(), ".git", "config")) or b""
    if TOKENS.search(git):
        found.append(".git/config")
    return {{"where": where, "pid": os.getpid(), "ancestors": len(chain), "readable": readable, "found": found}}


def note(name, doc):
    with open(os.path.join(OUT, name), "a") as fh:
        fh.write(json.dumps(doc) + "\n")


if sys.argv[1:2] == ["daemon"]:
    end = time.time() + float(sys.argv[2])
    while time.time() < end:
        note("daemon.jsonl", scan("daemon"))
        time.sleep(0.2)
    sys.exit(0)
if sys.argv[1:2] == ["chain"]:   # a chain of processes, each the parent of the next, the last one scanning
    n = int(sys.argv[2])
    if n > 0:
        pid = os.fork()
        if pid == 0:
            os.execv(sys.executable, [sys.executable, __file__, "chain", str(n - 1)])
        os.waitpid(pid, 0)
    else:
        note("chain.jsonl", scan("chain end"))
        time.sleep(20)
        note("chain.jsonl", scan("chain end, later"))
    sys.exit(0)

note("program.jsonl", scan("program"))
# the runner's file commands: whoever writes them sets later steps' environment, PATH, outputs, summary
wrote = []
for var, line in (("GITHUB_ENV", "BASH_ENV=/tmp/pwned"), ("GITHUB_PATH", "/tmp/pwned"),
                  ("GITHUB_OUTPUT", "failure-count=0"), ("GITHUB_STEP_SUMMARY", "PWNED summary"),
                  ("GITHUB_STATE", "pwned=1")):
    if os.environ.get(var):
        with open(os.environ[var], "a") as fh:
            fh.write(line + "\n")
        wrote.append(var)
note("program.jsonl", {{"file_commands": wrote}})
# ... and where the runner keeps them: every step's files, found by listing $RUNNER_TEMP
where = os.path.join(os.environ.get("RUNNER_TEMP", "/nonexistent"), "_runner_file_commands")
found = sorted(os.listdir(where)) if os.path.isdir(where) else []
for name in found:
    with open(os.path.join(where, name), "a") as fh:
        fh.write("BASH_ENV=/tmp/pwned\n" if name.startswith("set_env_") else "pwned\n")
note("program.jsonl", {{"found_file_commands": found}})
for cmd in ([sys.executable, __file__, "daemon", "40"], [sys.executable, __file__, "chain", "40"]):
    if os.fork() == 0:   # detached: its own session, outliving this program and the stage
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execv(cmd[0], cmd)
        os._exit(0)
    os.wait()
# the program outlives its helpers' scans (a program the bot runs warm takes a second, less than the
# chain's 40 interpreter starts), so that they run within the step as a slower program's would
end = time.time() + 60
while time.time() < end and not os.path.exists(os.path.join(OUT, "chain.jsonl")):
    time.sleep(0.1)
import torch

torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))   # a compiled frame: a compiler failure
print("RuntimeError: probe", file=sys.stderr)
sys.exit(1)
'''


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_the_check_job_gives_model_code_nothing_to_read_or_forge(runner, ghstub, tmp_path):
    """The check job as sweep.yml runs it (no github-token, persist-credentials: false): the attacker
    finds no credential in any process of the job, from the program, from a daemon and from the end
    of a 40-process chain it detaches; those end with the step (the action is their subreaper), so
    none lives on into the job's later steps (upload-artifact holds ACTIONS_RUNTIME_TOKEN, the
    checkout's post step the job token). None of the runner's file commands is in its environment,
    and what it writes into the ones it finds under $RUNNER_TEMP is undone, so the job's outputs,
    summary and later steps' environment are the action's. The report job, run apart with the token,
    files from the check job's run directory as data."""
    mark = "MINIFY_PROBE_JOB_" + secrets.token_hex(6)
    out = tmp_path / "probe"
    out.mkdir()
    ws = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=60)   # a checkout without credentials
    (ws / "prog.py").write_text(textwrap.dedent(ATTACKER).format(out=str(out), mark=mark))
    t = time.time()
    check = runner("schedule", {}, {"stage": "check", "suite": "command", "command": f"{sys.executable} prog.py",
                                    "minify": "false", "timeout": "120", "fail-on": "never"},
                   workspace=ws, env={mark: "1"})
    print(f"check job: {time.time() - t:.1f} s")
    assert check.rc == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert re.search(r"left \d+ process\(es\) running after it ended", check.stdout), check.stdout[-3000:]
    seen = (out / "daemon.jsonl").stat().st_size if (out / "daemon.jsonl").exists() else 0
    time.sleep(2)   # a daemon that lived on would still be writing
    assert (out / "daemon.jsonl").stat().st_size == seen, "the detached daemon outlived the step"
    assert _pids_marked(mark) == [], "a process the checked code started outlived the step"
    program = _lines(out / "program.jsonl")
    scans = program[:1] + _lines(out / "daemon.jsonl") + _lines(out / "chain.jsonl")
    assert program and program[0]["readable"] >= 4 and program[0]["ancestors"] >= 3, program
    assert _lines(out / "daemon.jsonl") and _lines(out / "chain.jsonl"), "the attacker's helpers did not run"
    assert all(s["found"] == [] for s in scans), [s for s in scans if s["found"]]
    assert program[1] == {"file_commands": []}   # none of GITHUB_ENV/PATH/OUTPUT/STEP_SUMMARY/STATE reached it
    assert len(program[2]["found_file_commands"]) == 5, program[2]   # it found them where the runner keeps them
    assert "PWNED" not in check.summary and "pwned" not in check.summary and check.outputs["failure-count"] == "1"
    files = runner.file_commands(runner.count)
    assert all(files[f].read_text() == "" for f in ("env", "path", "state"))   # later steps untouched

    # the report job: another machine in sweep.yml (report-runs-on); here, once the check job's
    # processes are gone, as its runner ends them
    _end_processes_marked(mark)
    shards = tmp_path / "artifacts"
    shutil.copytree(check.run_dir, shards / "minify-shard-0")
    report = runner("schedule", {}, {"stage": "report", "shards": str(shards)}, token=BOT_TOKEN)
    assert report.rc == 1, report.stdout[-3000:] + report.stderr[-3000:]
    assert len(filed_issues(ghstub)) == 1
    for res in (check, report):
        assert_token_not_leaked(res)


def _pids_marked(mark: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and mark.encode() in Path(f"/proc/{name}/environ").read_bytes():
                if b"Z" != Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]:
                    found.append(int(name))
        except OSError:
            pass
    return found


def _end_processes_marked(mark: str) -> None:
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and mark.encode() in Path(f"/proc/{name}/environ").read_bytes():
                os.kill(int(name), 9)
        except OSError:
            pass


def test_templates_planted_beside_an_installed_bot_are_never_rendered(tmp_path):
    """The bot installed as the action installs it (not editable), then a `templates/` directory
    planted where the old search path looked (beside the package, in site-packages) and a
    `pyproject.toml` to go with it: the renderer reads the package's own templates only."""
    site = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--target", str(site), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    (site / "templates").mkdir()
    for name in ("issue_title.j2", "issue_body.md.j2", "summary.md.j2"):
        (site / "templates" / name).write_text("PWNED {{ ''.__class__ }}\n")
    (site / "pyproject.toml").write_text('[project]\nname = "minify-action"\n')
    code = ("import json, bot.render as r; t = r.preload(); "
            "print(json.dumps([r.__file__, t['issue_title.j2'], t['issue_body.md.j2']]))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(site)})
    assert res.returncode == 0, res.stderr[-3000:]
    where, title, body = json.loads(res.stdout)
    assert where.startswith(str(site))   # the installed copy was the one imported
    assert "PWNED" not in title + body
    assert title == (ROOT / "templates" / "issue_title.j2").read_text()


def test_run_reads_its_templates_before_the_checked_code_runs(tmp_path):
    """`minify-bot run` from an installed copy: the checked program rewrites the installed package's
    own templates; the issue it files is rendered from the templates as they were when run started."""
    site = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--target", str(site), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(f"""
        import glob, sys
        import torch
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))   # a compiled frame: a compiler failure
        for path in glob.glob({str(site / "bot" / "templates" / "*.j2")!r}):
            open(path, "w").write("PWNED\\n")
        print("accuracy mismatch: max abs error 1.0", file=sys.stderr)
        sys.exit(1)
    """))
    res = subprocess.run([sys.executable, "-m", "bot", "run", "--command", f"{sys.executable} {prog}", "--name",
                          "planter", "--no-minify", "--out", str(tmp_path / "out"), "--issues-dir",
                          str(tmp_path / "issues")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**{k: v for k, v in os.environ.items() if "TOKEN" not in k}, "PYTHONPATH": str(site)})
    assert res.returncode == 1, res.stderr[-3000:]
    assert (site / "bot" / "templates" / "issue_title.j2").read_text() == "PWNED\n"   # it did plant them
    (issue,) = [json.loads(p.read_text()) for p in (tmp_path / "issues").glob("*.json")
                if "dashboard" not in p.read_text()]
    assert "PWNED" not in issue["title"] and "PWNED" not in issue["body"] and "planter" in issue["body"]


def test_run_with_a_token_says_what_it_trusts(tmp_path):
    """`minify-bot run` on someone's own machine may hold a token: it says that the checked code can
    read it, and the stages that run model code get neither it nor the runner's file commands."""
    prog = tmp_path / "prog.py"
    # it imports torch (a program whose interpreter would be kept warm) and looks for a directory of
    # shared fork servers: a server it planted there could be sent the jobs, and environments, of the
    # process that holds the token
    prog.write_text("import json, os\nimport torch\nprint(json.dumps(sorted(k for k in os.environ if "
                    "k.startswith('GITHUB_') or 'TOKEN' in k or 'FORKSERVERS' in k)))\n")
    token = "ghp_" + secrets.token_hex(18)
    pool = tmp_path / "pool"
    pool.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_TOKEN": token, "GITHUB_ENV": str(tmp_path / "env"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), proc.SHARED_ENV: str(pool)}
    res = subprocess.run([sys.executable, "-m", "bot", "run", "--command", f"{sys.executable} {prog}", "--name", "p",
                          "--out", str(tmp_path / "out"), "--tracker", "local"], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "this process holds GITHUB_TOKEN" in res.stderr and "run it only on code you trust" in res.stderr
    log = next((tmp_path / "out" / "checks").glob("*.log")).read_text()
    assert "GITHUB_TOKEN" not in log and "GITHUB_ENV" not in log and "GITHUB_STEP_SUMMARY" not in log
    assert token not in res.stdout + res.stderr + log
    assert "FORKSERVERS" not in log   # the checked code never learns where shared servers live ...
    assert not list(pool.iterdir())   # ... and no process of this run asked for one there (a caller leaves a lock)


LATER_STEPS = r'''
import os, pathlib, sys
SITE, OUT, MARK = {site!r}, {out!r}, {mark!r}
# 1. the installed bot, rewritten: the action process would run this when it imports bot.render
render = pathlib.Path(SITE) / "bot" / "render.py"
with open(render, "a") as fh:
    fh.write("\nimport pathlib as _p\n_p.Path(%r).write_text('ran in the action process')\n" % MARK)
# 2. links and a FIFO in the run directory: upload-artifact follows links
os.makedirs(os.path.join(OUT, "checks"), exist_ok=True)
os.symlink("/proc/self/environ", os.path.join(OUT, "environ.txt"))
os.symlink("/proc/self/environ", os.path.join(OUT, "checks", "environ.log"))
os.mkfifo(os.path.join(OUT, "checks", "fifo.log"))
with open(os.path.join(OUT, "planted.txt"), "w") as fh:
    fh.write("not a file of the layout")
print("AccuracyError: Bad accuracy detected")
sys.exit(1)
'''


def test_model_code_cannot_change_what_the_check_job_does_after_it(runner, tmp_path):
    """The check job as sweep.yml runs it, against the bot installed as the action installs it (not
    editable): model code appends a payload to the installed bot.render and plants links to
    /proc/self/environ and a FIFO in the run directory. The action imported everything it runs before
    the first stage, so the payload never runs in the action process; the run directory is uploaded
    from a copy that holds only regular files of the layout (output upload-dir), and no link is left
    in the run directory itself."""
    site = tmp_path / "site"   # the package and its templates, as an install lays them out
    shutil.copytree(ROOT / "bot", site / "bot", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "templates", site / "bot" / "templates")
    (site / "bot" / "templates" / "__init__.py").write_text("")
    mark, out, ws = tmp_path / "payload-ran", tmp_path / "out", tmp_path / "ws"
    ws.mkdir()
    (ws / "prog.py").write_text(LATER_STEPS.format(site=str(site), out=str(out), mark=str(mark)))
    check = runner("schedule", {}, {"stage": "check", "suite": "command", "command": f"{sys.executable} prog.py",
                                    "minify": "false", "timeout": "120", "fail-on": "never", "out": str(out)},
                   workspace=ws, env={"PYTHONPATH": str(site)})
    assert check.rc == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert "ran in the action process" in (site / "bot" / "render.py").read_text()   # the model wrote it ...
    assert not mark.exists(), "the action process ran code the checked program wrote into the installed bot"
    assert check.outputs["failure-count"] == "1"   # ... and the action's own summary and outputs stand

    upload = Path(check.outputs["upload-dir"])
    copied = sorted(p.relative_to(upload).as_posix() for p in upload.rglob("*") if not p.is_dir())
    assert "results.json" in copied and all(not (upload / c).is_symlink() for c in copied)
    for planted in ("environ.txt", "checks/environ.log", "checks/fifo.log", "planted.txt"):
        assert planted not in copied
    assert not any(b"GITHUB_" in (upload / c).read_bytes() for c in copied if c != "results.json")
    left = [p for p in out.rglob("*") if p.is_symlink() or not (p.is_file() or p.is_dir())]
    assert left == []   # the run directory itself holds no link, FIFO or device after the step
