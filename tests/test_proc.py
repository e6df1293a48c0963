"""bot.proc, the one child-process module: real processes, real signals, real pipes (no torch compile)."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from bot import proc

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


GRANDCHILD = r"""
import os, subprocess, sys, time
g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("grandchild", g.pid, flush=True)
print("session", os.getsid(0), os.getpgrp(), os.getpid(), flush=True)
time.sleep(60)
"""


def test_exec_timeout_stops_the_whole_group_grandchild_included(tmp_path):
    t = time.monotonic()
    res = proc.run([PY, "-c", GRANDCHILD], timeout=2, grace=0.5, log_path=str(tmp_path / "log.txt"))
    assert time.monotonic() - t < 10
    assert res.timed_out and res.returncode is None and res.signal is None and not res.oom
    grandchild = int(re.search(r"grandchild (\d+)", res.tail).group(1))
    assert _wait_dead(grandchild), "the grandchild outlived the time limit"
    # a new session: the child leads its own session and process group
    sid, pgrp, pid = map(int, re.search(r"session (\d+) (\d+) (\d+)", res.tail).groups())
    assert sid == pgrp == pid != os.getsid(0)
    assert "grandchild" in (tmp_path / "log.txt").read_text()


def test_exec_sigterm_then_sigkill_for_a_child_that_ignores_sigterm():
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    t = time.monotonic()
    res = proc.run([PY, "-c", code], timeout=1.5, grace=0.5)
    assert res.timed_out and 1.5 <= time.monotonic() - t < 8
    assert "up" in res.tail


def test_a_normal_exit_takes_its_stragglers_along():
    code = ("import subprocess, sys; g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print(g.pid, flush=True)")
    res = proc.run([PY, "-c", code], timeout=30)
    assert res.returncode == 0 and not res.timed_out
    assert _wait_dead(int(res.tail.split()[-1]))


@pytest.mark.parametrize("sig, name", [(signal.SIGSEGV, "SIGSEGV"), (signal.SIGABRT, "SIGABRT"),
                                       (signal.SIGKILL, "SIGKILL")])
def test_death_by_signal_is_decoded(sig, name):
    res = proc.run([PY, "-c", f"import os, signal; print('bye', flush=True); os.kill(os.getpid(), {int(sig)})"],
                   timeout=30)
    assert res.returncode == -sig and res.signal == sig and res.signal_name == name and not res.timed_out
    assert res.oom is (sig == signal.SIGKILL)  # a SIGKILL that was not ours: the OOM killer's signature
    assert res.tail == "bye\n"


def test_exit_codes_memory_errors_tail_capture_and_events(tmp_path):
    res = proc.run([PY, "-c", "import sys; sys.exit(3)"], timeout=30)
    assert (res.returncode, res.oom, res.ok) == (3, False, False)
    res = proc.run([PY, "-c", "x = bytearray(1 << 62)"], timeout=30)
    assert res.returncode == 1 and res.oom and "MemoryError" in res.tail
    code = "\n".join(["for i in range(100): print('line', i)",
                      "print('@@ {\"event\": \"loaded\", \"nodes\": 7}')",
                      "print('@@ {\"event\": \"query\", \"n\": 1}')"])
    seen, lines = [], []
    res = proc.run([PY, "-c", code], timeout=30, tail_lines=5, capture=30, events=True, on_event=seen.append,
                   on_line=lines.append, log_path=str(tmp_path / "l.log"), announce="$ demo")
    assert res.ok and res.tail.splitlines()[-1].startswith("@@ {\"event\": \"loaded\"")
    assert len(res.tail.splitlines()) == 5 and res.tail.splitlines()[0] == "line 96"
    assert len(res.output) <= 30 and res.output.endswith("nodes\": 7}\n")
    assert [e["event"] for e in seen] == [e["event"] for e in res.events] == ["loaded", "query"]
    assert len(lines) == 101  # query events are progress, not log lines
    log = (tmp_path / "l.log").read_text()
    assert log.startswith("$ demo\nline 0\n") and re.search(r"\[exit 0, [\d.]+ s\]\n$", log)
    assert "\"query\"" not in log


def test_a_program_that_cannot_start_is_an_error_not_an_exception(tmp_path):
    res = proc.run([str(tmp_path / "nope")], timeout=5)
    assert res.error and "nope" in res.error and res.returncode is None


def test_fork_passes_messages_and_the_return_value(tmp_path):
    def child(send):
        send({"phase": "one"})
        print("hello from", os.getpid(), os.getsid(0) == os.getpid(), os.getcwd(), flush=True)
        send({"phase": "two"})
        return {"row": {"status": "pass", "big": "x" * 200_000}}

    got = []
    res = proc.fork(child, timeout=30, cwd=str(tmp_path), on_message=got.append)
    assert res.ok and res.value["row"]["status"] == "pass" and len(res.value["row"]["big"]) == 200_000
    assert res.messages == got == [{"phase": "one"}, {"phase": "two"}]
    pid, leads, cwd = res.tail.split()[2:5]
    assert int(pid) != os.getpid() and leads == "True" and cwd == str(tmp_path)


def test_fork_exit_codes_exceptions_signals_timeouts_and_memory_limits(tmp_path):
    assert proc.fork(lambda send: 5, timeout=30).returncode == 5

    def boom(send):
        raise ValueError("no good")

    res = proc.fork(boom, timeout=30)
    assert res.returncode == 70 and "ValueError: no good" in res.tail and res.value is None
    res = proc.fork(lambda send: os.abort(), timeout=30)
    assert res.signal == signal.SIGABRT and res.signal_name == "SIGABRT"

    def hang(send):
        import subprocess

        g = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
        send(g.pid)
        time.sleep(60)

    res = proc.fork(hang, timeout=1.5, grace=0.2)
    assert res.timed_out and res.returncode is None
    assert _wait_dead(res.messages[0])

    def hog(send):
        return len(bytearray(512 * 1024 * 1024))

    res = proc.fork(hog, timeout=30, memory_limit_mb=256)
    assert res.returncode == 70 and res.oom


def test_prestarted_interpreter_runs_the_script_as_python_would(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import os, sys\n"
                      "print(sys.argv, __name__, os.path.basename(__file__), flush=True)\n"
                      "print('json' in sys.modules, 'imported-before' , flush=True)\n"
                      "print(sys.path[0] == os.path.dirname(os.path.abspath(__file__)), flush=True)\n"
                      "print(sys.stdin.read() == '', os.getsid(0) == os.getpid(), flush=True)\n"
                      "sys.exit(4)\n")
    pre = proc.prestart(preload=("json",), cwd=str(tmp_path / "cwd"))
    time.sleep(0.3)
    res = pre.run(str(script), ["a", "b"], timeout=30, capture=10_000)
    out = res.output.splitlines()
    assert res.returncode == 4, res.output
    assert out[0] == f"[{str(script)!r}, 'a', 'b'] __main__ s.py"
    assert out[1].startswith("True") and out[2] == "True" and out[3] == "True True"
    with pytest.raises(RuntimeError):
        pre.run(str(script), timeout=5)


def test_prestarted_interpreter_timeout_and_close(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(GRANDCHILD)
    pre = proc.prestart(preload=())
    res = pre.run(str(script), timeout=1.5, grace=0.2)
    assert res.timed_out
    assert _wait_dead(int(re.search(r"grandchild (\d+)", res.tail).group(1)))
    unused = proc.prestart(preload=())
    pid = unused.proc.pid
    unused.close()
    assert not _alive(pid)


def test_no_other_module_starts_processes_by_hand():
    """bot.proc is the one place that forks, starts a subprocess or selects (issue: seven copies drifted)."""
    pattern = re.compile(r"\bos\.fork\b|\bsubprocess\.\w+\(|^\s*import subprocess\b|\bPopen\(|"
                         r"^\s*import select\b|\bselect\.select\b|"
                         r"\bos\.posix_spawn|\bos\.spawn|\bos\.system\(|\bpty\.fork", re.M)
    offenders = []
    for path in sorted((ROOT / "bot").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "bot/proc.py":
            continue
        for m in pattern.finditer(path.read_text()):
            offenders.append(f"{rel}:{path.read_text()[:m.start()].count(chr(10)) + 1}: {m.group(0).strip()}")
    assert offenders == []


def test_a_prestarted_interpreter_that_died_before_its_script_says_so(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    pre = proc.prestart(preload=("no_such_module_for_minify_bot",))
    pre.proc.wait(timeout=30)
    res = pre.run(str(script), timeout=30)
    assert res.error and "before it got its script" in res.error and res.returncode is None


def test_verification_uses_the_prestarted_interpreters_first(tmp_path):
    """bot.minify.verify: one repro per interpreter, prestarted ones first, then cold ones."""
    from bot.minify import verify

    script = tmp_path / "repro.py"
    script.write_text("import os, sys\nprint('pid', os.getpid(), sys.argv[1:], flush=True)\nsys.exit(1)\n")
    pool = verify.Interpreters(0)
    pool._free = [proc.prestart(preload=(), cwd=str(tmp_path / f"c{i}")) for i in range(2)]
    pids = {p.proc.pid for p in pool._free}
    outs = [verify.run_repro(str(script), interpreters=pool) for _ in range(3)]
    ran = [int(out.split()[1]) for _, out in outs]
    assert [rc for rc, _ in outs] == [1, 1, 1]
    assert set(ran[:2]) == pids and ran[2] not in pids and len(set(ran)) == 3
    assert pool.take() is None
    pool.close()


def test_a_fork_guard_refuses_and_child_setup_runs_first_in_the_child():
    def refuse():
        raise RuntimeError("not now")

    with pytest.raises(RuntimeError, match="not now"):
        proc.fork(lambda send: 0, timeout=30, guard=refuse)
    marks = []
    res = proc.fork(lambda send: {"seen": marks}, timeout=30, child_setup=lambda: marks.append("setup"))
    assert res.ok and res.value == {"seen": ["setup"]} and marks == []  # only the child ran it
