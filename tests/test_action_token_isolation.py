"""The token and the code the Action runs (issue 22): in stage `all`, no process that model code or a
known repro can read holds the token.

A probe plays the attacker: run as the checked program and as a known repro, it reads the
environment block and command line of itself and of every ancestor (/proc/<pid>/environ), and of
every process of the job; it also leaves a detached daemon behind that keeps looking while the
report stage (the one child given the token) runs later. The token is a unique `ghp_` value, so any
copy of it anywhere in the job is found."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bot import fingerprint as fp
from bot import known
from bot.action import secrets as isolation
from tests.ghstub.action import assert_token_not_leaked, filed_issues, pr_comment, probe
from tests.ghstub.fixtures import BOT_LOGIN, REPO, make_client
from tests.ghstub.rundir import check_row, failure_record, write_run


def test_the_action_restarts_without_secrets_in_its_environment_block(tmp_path):
    """Unit of the mechanism, in a real subprocess: the restarted process's /proc/self/environ holds no
    secret, by name or by value, and the secrets come back in memory."""
    token = "ghp_" + secrets.token_hex(18)
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent("""
        import json, os, sys
        sys.path.insert(0, sys.argv[1])
        from bot.action.secrets import isolate
        got = isolate()
        print(json.dumps({"got": got, "environ": open("/proc/self/environ", "rb").read().decode(),
                          "fds": sorted(os.listdir("/proc/self/fd"))}))
    """))
    env = {"PATH": "/usr/bin:/bin", "INPUT_GITHUB-TOKEN": token, "GH_PAT": "ghp_" + "b" * 36, "HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, str(script), str(Path(__file__).resolve().parents[1])], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["got"] == {"INPUT_GITHUB-TOKEN": token, "GH_PAT": "ghp_" + "b" * 36}
    assert token not in doc["environ"] and "ghp_" not in doc["environ"] and "HOME=" in doc["environ"]
    assert f"{isolation.SECRETS_FD}=3" in doc["environ"]  # only the number of the descriptor, now closed
    assert len(doc["fds"]) <= 4  # 0, 1, 2 and the directory listing itself: the hand-over fd is closed


def test_reap_strays_stops_a_detached_descendant(tmp_path):
    """A daemon that double-forks and leaves its session is still found (the action is the reaper of
    its orphans) and stopped."""
    code = ("import os,time\nif os.fork()==0:\n os.setsid()\n if os.fork()==0:\n  time.sleep(60)\n os._exit(0)\n"
            "os.wait()\n")
    helper = tmp_path / "h.py"
    helper.write_text(textwrap.dedent(f"""
        import subprocess, sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from bot.action import secrets
        secrets.harden()
        subprocess.run([sys.executable, "-c", {code!r}], timeout=30)
        time.sleep(0.3)
        before = secrets.children(__import__("os").getpid())
        print(len(before), secrets.reap_strays(), len(secrets.children(__import__("os").getpid())))
    """))
    res = subprocess.run([sys.executable, str(helper)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["1", "1", "0"]


def _with_known_block(body: str, block: dict) -> str:
    state = fp.parse_marker(body)
    state["known"] = block
    head = body.rstrip().rsplit("\n", 1)[0]
    return head + "\n\n" + fp.make_marker(state) + "\n"


@pytest.mark.slow
def test_no_probe_in_model_code_or_a_known_repro_finds_the_token(runner, users, tmp_path):
    token = "ghp_" + secrets.token_hex(18)
    users.add_user(BOT_LOGIN, token=token)
    mark = "MINIFY_PROBE_JOB_" + secrets.token_hex(6)
    out = tmp_path / "probe"
    out.mkdir()
    env = {mark: "1"}

    # 1. a /minify report with pr-issues: true files an issue from the pull request's artifact, whose
    #    verified repro is the probe. It is never recorded as a known repro.
    row = check_row("mlp_relu")
    rec = failure_record(row)
    write_run(tmp_path / "pr" / "minify-pr-1", [row], {row["id"]: rec}, repro_text=probe(out, "pr", mark))
    payload = pr_comment(users, "walt-token", "/minify --models mlp_relu")
    auth = runner("issue_comment", payload, {"stage": "authorize"}, token=token)
    assert auth.rc == 0, auth.stdout + auth.stderr
    res = runner("issue_comment", payload, {"stage": "report", "request": auth.outputs["request"],
                                            "shards": str(tmp_path / "pr"), "check-result": "success",
                                            "pr-issues": "true"}, token=token)
    assert res.rc in (0, 1), res.stdout + res.stderr
    (pr_issue,) = filed_issues(users)
    assert "known" not in fp.parse_marker(pr_issue["body"])  # the PR's repro is not kept to run later

    # 2. a scheduled run (stage all) of a program that probes, and leaves a daemon behind
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "prog.py").write_text(probe(out, "check", mark))
    inputs = {"suite": "command", "command": f"{sys.executable} prog.py", "minify": "false", "timeout": "120"}
    t = time.time()
    first = runner("schedule", {}, inputs, workspace=ws, token=token, env=env)
    print(f"scheduled run 1: {time.time() - t:.1f} s")
    assert first.rc == 1, first.stdout[-3000:] + first.stderr[-3000:]
    assert "process(es) that the checked code left running after its stages ended" in first.stdout  # its daemons
    bug = next(i for i in filed_issues(users) if i["number"] != pr_issue["number"])

    # 3. someone with write access plants the probe as the bug issue's known repro (author stays the bot)
    state = fp.parse_marker(bug["body"])
    text = probe(out, "repro", mark)
    cls = json.loads((first.run_dir / "results.json").read_text())["checks"][0]["failure_class"]
    block = {"z": known.pack(text), "sha": hashlib.sha256(text.encode()).hexdigest()[:16],
             "signature": {"failure_class": cls, "verified": True},
             "record": {"class": cls, "stage": "inductor", "culprit": None, "config": {"diff": [], "minimal": []},
                        "status": "minimized", "nodes_before": 3, "nodes_after": 1, "capture": None},
             "minify_seconds": 100.0, "torch": "2.0.0", "check_config": {}}
    assert state["checks"]
    make_client(users, "alice-token").get_repo(REPO).get_issue(bug["number"]).edit(
        body=_with_known_block(bug["body"], block))

    # 4. the next scheduled run finds the known repro and runs it (instead of minifying): the probe
    #    runs in the minify stage's process tree, and its daemon is left behind again
    t = time.time()
    second = runner("schedule", {}, {**inputs, "minify": "true", "minify-budget": "60"}, workspace=ws, token=token,
                    env=env)
    print(f"scheduled run 2: {time.time() - t:.1f} s")
    assert second.rc == 1, second.stdout[-3000:] + second.stderr[-3000:]
    reports = {p.name.split("-")[0]: json.loads(p.read_text()) for p in out.glob("*-*.json")}
    assert set(reports) == {"check", "repro"}, sorted(p.name for p in out.iterdir())  # the PR's repro never ran
    failure = json.loads(next((second.run_dir / "failures").glob("*/failure.json")).read_text())
    assert failure["repro"]["reused"]["issue"] == bug["number"]
    for name in out.glob("*-*.json"):
        r = json.loads(name.read_text())
        assert r["found"] == [] and r["readable"] >= 4 and len(r["ancestors"]) >= 3, r
    daemon = [json.loads(line) for line in (out / "daemon.jsonl").read_text().splitlines()]
    assert daemon and all(d["found"] == [] for d in daemon)  # it ran, and never saw the token
    time.sleep(0.5)
    assert not [d for d in {x["pid"] for x in daemon} if Path(f"/proc/{d}").exists()
                and "Z" not in Path(f"/proc/{d}/stat").read_text().split(")")[-1][:3]]  # none still running
    for r in (res, first, second):
        assert_token_not_leaked(r, token)


def test_a_token_under_a_name_that_does_not_look_secret_is_refused_on_comment_events(runner):
    value = "ghp_" + secrets.token_hex(18)
    payload = {"action": "created", "issue": {"number": 1, "pull_request": {}}, "comment": {"id": 1}}
    res = runner("issue_comment", payload, {"stage": "check", "models": "gru"}, token="", env={"GH_PAT": value})
    assert res.rc == 2, res.stdout + res.stderr
    assert "refusing to run model code on a issue_comment event while a token is present ($GH_PAT)" in res.stderr
    assert "minify-bot check" not in res.stdout and not (res.run_dir / "results.json").exists()
    assert_token_not_leaked(res, value)


def test_a_code_snapshot_sees_every_change_an_import_could_pick_up(tmp_path):
    """Files the report would load: edited (even with its mtime set back), added `.pth`, a module that
    would shadow one the report imports; bytecode in __pycache__ is not read by the report at all."""
    import os

    tree, top = tmp_path / "site-packages", tmp_path / "pythonpath"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "mod.py").write_text("x = 1\n")
    top.mkdir()
    (top / "notes.txt").write_text("n")
    paths = ([str(tree)], [str(top)])
    before = isolation.snapshot(paths)
    st = os.stat(tree / "pkg" / "mod.py")
    (tree / "pkg" / "mod.py").write_text("x = 2\n")
    os.utime(tree / "pkg" / "mod.py", ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime set back
    (tree / "evil.pth").write_text("import os\n")
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"x")
    (top / "github.py").write_text("raise SystemExit\n")
    (top / "data").mkdir()
    (top / "notes.txt").write_text("changed")
    assert isolation.changed(before, isolation.snapshot(paths)) == sorted(
        [str(tree / "evil.pth"), str(tree / "pkg" / "mod.py"), str(top / "github.py")])


def test_the_report_gets_no_token_after_the_checked_code_planted_a_module_it_imports(runner, ghstub, tmp_path):
    """Stage all: the checked program writes a module that would shadow PyGithub in the report's
    interpreter (a directory on its PYTHONPATH). The report is not started with the token: exit 3,
    nothing filed, the cause in the summary."""
    shadow = tmp_path / "pythonpath"
    shadow.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "prog.py").write_text(f"open({str(shadow / 'github.py')!r}, 'w').write('raise SystemExit(42)')\n"
                                "raise SystemExit('RuntimeError: boom')\n")
    root = str(Path(__file__).resolve().parents[1])
    res = runner("schedule", {}, {"suite": "command", "command": f"{sys.executable} prog.py", "minify": "false"},
                 workspace=ws, env={"PYTHONPATH": os.pathsep.join([root, str(shadow)])})
    assert res.rc == 3, res.stdout[-3000:] + res.stderr[-3000:]
    assert "the token is not handed to a process that could run them" in res.summary
    assert "github.py" in res.summary and ghstub.issues() == []
