"""bot.proc, the one child-process module: real processes, real signals, real pipes (no torch compile)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
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


@pytest.fixture(autouse=True)
def _own_servers(monkeypatch):
    """The fork servers these tests start are their own (the shared ones: the tests that say so)."""
    monkeypatch.delenv(proc.SHARED_ENV, raising=False)


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
    # the head (a quarter of capture), what was left out, and the last `capture` characters
    head, gap, end = res.output.partition("characters of output left out ...]\n")
    assert head.startswith("line 0\n[... ") and gap and len(end) <= 30 and end.endswith("nodes\": 7}\n")
    assert [e["event"] for e in seen] == [e["event"] for e in res.events] == ["loaded", "query"]
    assert len(lines) == 101  # query events are progress, not log lines
    log = (tmp_path / "l.log").read_text()
    assert log.startswith("$ demo\nline 0\n") and re.search(r"\[exit 0, [\d.]+ s\]\n$", log)
    assert "\"query\"" not in log


def test_a_traceback_printed_before_pages_of_compiler_warnings_stays_in_the_captured_output():
    """A compile error prints its traceback, then every diagnostic g++ gave (on some CPUs thousands of
    -Woverflow warnings from torch's headers, over 200 KB), then the program's own last words: the
    exception line is kept, so the check is classified by it and not by the exit status."""
    from bot.suites.classify import classify

    code = "\n".join([
        "import sys",
        "print('Traceback (most recent call last):')",
        "print('  File \"prog.py\", line 9, in <module>')",
        "print('torch._inductor.exc.InductorError: CppCompileError: C++ compile error')",
        "print('/tmp/k.cpp:15:33: error: compile was not declared in this scope')",
        "for i in range(6000): print(f'vec256_qint.h:{i}:7: warning: overflow in conversion [-Woverflow]')",
        "print('benchmark: the compiled model did not build'); sys.exit(1)"])
    res = proc.run([PY, "-c", code], timeout=30, capture=200_000)
    assert "left out" in res.output and "InductorError: CppCompileError" in res.output
    row = classify(returncode=res.returncode, output=res.output, compiled_graphs=1)
    assert (row.failure_class, row.error.type) == ("compile_error", "InductorError"), row


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


def test_fork_server_runs_each_script_as_python_would_in_a_process_of_its_own(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import os, sys\n"
                      "print(sys.argv, __name__, os.path.basename(__file__), os.path.basename(os.getcwd()))\n"
                      "print('json' in sys.modules, sys.path[0] == os.path.dirname(os.path.abspath(__file__)))\n"
                      "print(sys.stdin.read() == '', os.getsid(0), os.getpid())\n"
                      "globals().setdefault('seen', []).append(1); print(len(seen))\n"
                      "sys.exit(int(sys.argv[1]))\n")
    with proc.forkserver(preload=("json",)) as server:
        with ThreadPoolExecutor(3) as pool:   # several at once, each in its own directory
            res = list(pool.map(lambda i: server.run(str(script), [str(i), "b"], cwd=str(tmp_path / f"c{i}"),
                                                     timeout=30, capture=10_000), range(4)))
        server_pid = server.pid
        server_sid = os.getsid(server_pid)
    for i, r in enumerate(res):
        out = r.output.splitlines()
        assert r.returncode == i, r.output
        assert out[0] == f"[{str(script)!r}, '{i}', 'b'] __main__ s.py c{i}"
        assert out[1] == "True True" and out[2].startswith("True ") and out[3] == "1"  # nothing shared
    sessions = {int(r.output.splitlines()[2].split()[1]) for r in res}
    pids = {int(r.output.splitlines()[2].split()[2]) for r in res}
    assert len(pids) == 4 and server_pid not in pids
    assert len(sessions) == 4 and not sessions & {server_sid, os.getsid(0)}   # each in a session of its own
    assert _wait_dead(server_pid)   # closed


def test_fork_server_deaths_timeouts_and_a_server_that_is_gone(tmp_path):
    crash, hang, ok = tmp_path / "crash.py", tmp_path / "hang.py", tmp_path / "ok.py"
    crash.write_text("import os\nprint('bye', flush=True)\nos.abort()\n")
    hang.write_text(GRANDCHILD)
    ok.write_text("raise ValueError('the script itself')\n")
    with proc.forkserver(preload=()) as server:
        r = server.run(str(crash), timeout=30)
        assert (r.returncode, r.signal_name, r.tail.strip()) == (-6, "SIGABRT", "bye")
        r = server.run(str(ok), timeout=30)
        assert r.returncode == 1 and "ValueError: the script itself" in r.tail and r.error is None
        t = time.monotonic()
        r = server.run(str(hang), timeout=1.5, grace=0.2)
        assert r.timed_out and r.returncode is None and time.monotonic() - t < 10
        assert _wait_dead(int(re.search(r"grandchild (\d+)", r.tail).group(1)))  # the whole group
    r = server.run(str(ok), timeout=30)
    assert r.error == "the fork server is closed" and r.returncode is None
    broken = proc.forkserver(preload=("no_such_module_for_minify_bot",))
    r = broken.run(str(ok), timeout=30)
    assert "before it ran the script" in r.error and "no_such_module_for_minify_bot" in r.error
    broken.close()


def test_no_other_module_starts_processes_by_hand():
    """bot.proc is the one place that forks, starts a subprocess or selects (issue: seven copies drifted);
    the fork server's own program (bot/forkserver.py, which bot.proc starts and talks to) forks its jobs."""
    pattern = re.compile(r"\bos\.fork\b|\bsubprocess\.\w+\(|^\s*import subprocess\b|\bPopen\(|"
                         r"^\s*import select\b|\bselect\.select\b|"
                         r"\bos\.posix_spawn|\bos\.spawn|\bos\.system\(|\bpty\.fork", re.M)
    offenders = []
    for path in sorted((ROOT / "bot").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("bot/proc.py", "bot/forkserver.py"):
            continue
        for m in pattern.finditer(path.read_text()):
            offenders.append(f"{rel}:{path.read_text()[:m.start()].count(chr(10)) + 1}: {m.group(0).strip()}")
    assert offenders == []


def test_verification_runs_fork_from_one_server_and_start_cold_without_it(tmp_path):
    """bot.minify.verify: every run a process of its own, from the fork server while it lives."""
    from bot.minify import procs, verify

    script = tmp_path / "repro.py"
    script.write_text("import os, sys\nprint('pid', os.getpid(), os.getppid(), sys.argv[1:], flush=True)\n"
                      "sys.exit(1)\n")
    pool = procs.Interpreters(preload=("json",))  # the repro imports (torch) do not matter here
    outs = [verify.run_repro(str(script), interpreters=pool) for _ in range(2)]
    pool.close()
    outs.append(verify.run_repro(str(script), random_inputs=True, interpreters=pool))  # server gone: cold
    assert [rc for rc, _ in outs] == [1, 1, 1]
    pids = [int(out.split()[1]) for _, out in outs]
    assert len(set(pids)) == 3 and outs[2][1].split()[3:] == ["['run',", "'--no-save-dir']"]


def test_fork_server_calls_a_preloaded_function_once_and_ignores_its_failures(tmp_path):
    (tmp_path / "warm.py").write_text("CALLS = []\ndef facts():\n    CALLS.append(1)\n"
                                      "def broken():\n    raise RuntimeError('no such ISA')\n")
    script = tmp_path / "s.py"
    script.write_text("import warm\nprint('calls', len(warm.CALLS))\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    with proc.forkserver(preload=("warm:facts", "warm:broken", "warm:not_in_this_version"), env=env) as server:
        outs = [server.run(str(script), timeout=30, capture=1000) for _ in range(2)]
    assert [(r.returncode, r.output.split()) for r in outs] == [(0, ["calls", "1"])] * 2


def test_fork_server_loads_a_file_by_path_runs_threads_first_and_runs_modules(tmp_path):
    """A ``path.py:function`` preload is called without becoming importable; ``&`` runs in a thread
    that ends before the next call and before any fork; run(module=...) is ``python -m`` with its
    own path and environment."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "prewarm_file.py").write_text(
        "import time\nSEEN = []\n"
        "def slow():\n    time.sleep(0.5)\n    SEEN.append('slow')\n"
        "def after():\n    import json\n    json.SEEN = list(SEEN) + ['after']\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text(
        "import json, os, sys\n"
        "print('@@ ' + json.dumps({'event': 'hello'}))\n"
        "print('seen', json.SEEN, 'importable', 'prewarm_file' in sys.modules, os.environ.get('ONLY_HERE'),"
        " sys.argv[1:])\n"
        "sys.exit(4)\n")
    f = elsewhere / "prewarm_file.py"
    events = []
    with proc.forkserver(preload=("json", f"{f}:slow&", f"{f}:after")) as server:
        r = server.run(None, ["x", "y"], module="pkg.tool", path=[str(tmp_path)], env={"ONLY_HERE": "1"},
                       cwd=str(tmp_path), timeout=30, capture=2000, events=True, on_event=events.append)
    assert r.returncode == 4, r.output
    assert "seen ['slow', 'after'] importable False 1 ['x', 'y']" in r.output
    assert events == [{"event": "hello"}]


def test_the_verification_preload_names_functions_this_torch_has():
    """The fork server skips a missing function silently: this says when torch renamed one of
    those the preload relies on (prewarm.py feature-detects them)."""
    import importlib

    from torch._inductor import cpu_vec_isa

    from bot.torch_adapter import prewarm
    from bot.torch_adapter.repro import PREWARM, REPRO_PRELOAD, repro_preload

    for entry in {*REPRO_PRELOAD, *repro_preload()}:
        if ".py:" in entry:
            path, _, fn = entry.rstrip("&").rpartition(":")
            assert path == PREWARM and callable(getattr(prewarm, fn, None)), entry
        else:
            importlib.import_module(entry)
    for name in ("valid_vec_isa_list", "x86_isa_checker", "supported_vec_isa_list"):
        assert hasattr(cpu_vec_isa, name), name


@pytest.mark.slow
def test_the_warm_up_builds_inductors_pattern_tables_even_when_its_graph_is_cached(tmp_path):
    """A process that warms up and then forks compiling children (the check parent, the fork
    server) must leave them nothing of a first compile to pay: nor the hash of torch's sources that
    keys inductor's caches (about 1 s per child). Inductor builds its pattern tables
    (about 2 s) in the graph passes of a process's first compile, and a compiled-graph cache hit
    skips those passes: the warm-up's own tiny graph is cached after its first run on a machine,
    so from then on the warm-up must still run the passes."""
    probe = ("from bot.torch_adapter.prewarm import compile_once_on_cpu\n"
             "from torch._inductor import codecache\n"
             "from torch._inductor.fx_passes import joint_graph, post_grad\n"
             "compile_once_on_cpu()\n"
             "print(joint_graph.lazy_init.cache_info().currsize, post_grad.lazy_init.cache_info().currsize)\n"
             # the hash of torch's sources that keys every cache lookup: computed, not left to each child
             "def rehash(*a, **k):\n"
             "    raise SystemExit('torch_key hashed torch sources again')\n"
             "codecache.build_code_hash = rehash\n"
             "codecache.torch_key()\n")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    for attempt in ("cold cache", "its graph cached"):
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split() == ["1", "1"], (attempt, out.stdout, out.stderr[-2000:])
    assert list((tmp_path / "cache").rglob("*")), "the warm-up compiled nothing"


def test_a_fork_waits_for_background_work_and_results_come_back():
    done = []
    job = proc.background(lambda: (time.sleep(0.3), done.append(1), "value")[-1], name="slow")
    res = proc.fork(lambda send: len(done), timeout=30)   # forked only once the work finished
    assert res.value == 1 and job.result() == "value"

    def boom():
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        proc.background(boom, name="boom").result()
    proc.wait_background()   # nothing left: returns at once


def test_a_fork_guard_refuses_and_child_setup_runs_first_in_the_child():
    def refuse():
        raise RuntimeError("not now")

    with pytest.raises(RuntimeError, match="not now"):
        proc.fork(lambda send: 0, timeout=30, guard=refuse)
    marks = []
    res = proc.fork(lambda send: {"seen": marks}, timeout=30, child_setup=lambda: marks.append("setup"))
    assert res.ok and res.value == {"seen": ["setup"]} and marks == []  # only the child ran it


# ---------------------------------------------------------------- the records on the wire


def test_a_fork_server_job_reads_back_as_written_and_a_malformed_one_is_an_error():
    from bot.forkserver import Job, ServerArgs

    job = Job(script="/x/s.py", path=["/p"], env={"A": "1"}, args=["a", "b"], cwd="/w")
    assert Job.decode(job.encode()) == job
    assert Job.decode(b'{"module": "m", "later": 1}') == Job(module="m")   # unknown keys dropped, defaults
    for msg in (b"{not json", b"[]", b'{"module": "m", "args": "ab"}', b'{"script": 3}',
                b'{"module": "m", "env": {"A": 1}}'):
        with pytest.raises(ValueError):
            Job.decode(msg)
    args = ServerArgs(["torch", "/p/prewarm.py:f&"], 7)
    assert ServerArgs.from_argv(args.to_argv()) == args


def _run_after_a_malformed_job(server: proc.ForkServer, script: Path) -> proc.Result:
    """Send ``server`` a message that is not a Job (what only a bug of bot.proc's would), then run ``script``."""
    import socket

    fds = [*os.pipe(), *os.pipe()]
    socket.send_fds(server._sock, [b'{"script": "/x.py", "args": "not a list"}'], [fds[1], fds[3]])
    for fd in fds:
        os.close(fd)
    return server.run(str(script), timeout=30, capture=100)


def test_a_malformed_job_stops_the_fork_server_and_the_next_run_says_why(tmp_path):
    """Only bot.proc writes the server's socket: a message that is not a Job is a bug, and the
    server stops loudly (as it did for one that was not JSON) instead of running something else."""
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    with proc.forkserver(preload=()) as server:
        assert server.run(str(script), timeout=30, capture=100).output == "ran\n"
        r = _run_after_a_malformed_job(server, script)
    assert r.returncode is None and r.output == ""
    assert "before it ran the script" in r.error and "a fork server job's args: expected a list of strings" in r.error


def test_what_a_forked_child_sends_is_never_taken_for_its_return_value():
    """Each line on a child's message pipe is a ChildMessage: a sent message that looks like the
    old return-value envelope is still a message, and values JSON cannot hold arrive as text."""
    def child(send):
        send({"__value__": "sent, not returned"})
        send(Path("/some/path"))
        send(None)
        return {"row": 1}

    res = proc.fork(child, timeout=30)
    assert res.ok and res.value == {"row": 1}
    assert res.messages == [{"__value__": "sent, not returned"}, "/some/path", None]
    assert proc.fork(lambda send: None, timeout=30).value is None


def test_the_message_pipe_reader_skips_lines_that_are_not_messages():
    got = []
    reader = proc._Messages(got.append)
    wire = (b"not json\n[1, 2]\n" + proc.ChildMessage({"phase": "compile"}).encode() + b'{"body": 3, "ret'
            + b'urned": true}\n' + proc.ChildMessage("x").encode())
    for i in range(0, len(wire), 7):   # lines split across reads
        reader.feed_bytes(wire[i:i + 7])
    assert reader.sent == got == [{"phase": "compile"}, "x"] and reader.value == 3
    assert proc.ChildMessage.from_json(json.loads(proc.ChildMessage([1], returned=True).encode())) == \
        proc.ChildMessage([1], returned=True)


DETACHER = r"""
import os, sys, time
from bot import proc
adopted = proc.adopt_orphans()
daemon = (
    "import os, sys, time\n"
    "r, w = os.pipe()\n"
    "if os.fork(): os.read(r, 1); os._exit(0)\n"   # the classic double fork: a new session, then orphaned
    "os.setsid()\n"                                 # (the program exits once its daemon is detached)
    "if os.fork(): os._exit(0)\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "os.write(w, b'x')\n"
    "time.sleep(60)\n")
res = proc.run([sys.executable, "-c", daemon, sys.argv[1]], timeout=30)
for _ in range(3000):   # a loaded machine may take seconds to start it
    if os.path.exists(sys.argv[1]) and open(sys.argv[1]).read():
        break
    time.sleep(0.02)
pid = int(open(sys.argv[1]).read())
alive_after_run = os.path.exists(f"/proc/{pid}")
killed = proc.end_descendants()
time.sleep(0.1)
print(adopted, res.returncode, alive_after_run, killed, os.path.exists(f"/proc/{pid}"), proc.descendants())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is a Linux process attribute")
def test_a_detached_daemon_outlives_its_group_but_not_the_stage_that_adopted_it(tmp_path):
    """Killing a child's group misses a daemon that double-forked into a session of its own; the
    process that adopted orphans finds it below itself after the child is gone and ends it (the
    Action does this after every stage, so nothing the checked code started lives into later steps)."""
    import subprocess

    res = subprocess.run([sys.executable, "-c", DETACHER, str(tmp_path / "pid")], capture_output=True, text=True,
                         timeout=120, cwd=Path(proc.__file__).parent.parent)
    assert res.returncode == 0, res.stderr[-2000:]
    adopted, rc, alive_after_run, killed, alive_after_end, left = res.stdout.strip().splitlines()[-1].split(" ", 5)
    assert (adopted, rc, alive_after_run) == ("True", "0", "True")   # the group kill did not reach it
    assert int(killed) >= 1 and alive_after_end == "False" and left.strip() == "[]", res.stdout


def test_a_job_killed_holding_tqdms_lock_does_not_block_the_servers_next_jobs(tmp_path):
    """tqdm keeps one multiprocessing lock for every progress bar (torch's fx interpreter makes one
    per graph it runs); made in the server, a fork would share it, and a job that ended while it
    held it (killed at its time limit, or by os._exit) left every later job waiting forever."""
    pytest.importorskip("tqdm")
    warmup = tmp_path / "warm.py"
    warmup.write_text("def make_lock():\n    import tqdm\n    tqdm.tqdm.get_lock()\n")
    holds = tmp_path / "holds.py"
    holds.write_text("import os, tqdm\ntqdm.tqdm.get_lock().acquire()\nprint('held', flush=True)\nos._exit(0)\n")
    bar = tmp_path / "bar.py"
    bar.write_text("import tqdm\nwith tqdm.tqdm.get_lock():\n    print('bar drawn')\n")
    with proc.forkserver(preload=("tqdm", f"{warmup}:make_lock")) as server:
        first = server.run(str(holds), [], timeout=60, capture=10_000)
        assert first.returncode == 0 and "held" in first.output, first.output
        after = server.run(str(bar), [], timeout=30, capture=10_000)
    assert after.returncode == 0 and "bar drawn" in after.output and not after.timed_out, after.output


SHARED_CALLER = r"""
import json, os, sys
from bot import proc
server = proc.forkserver(preload=("json",))
res = server.run(sys.argv[1], [], timeout=60, capture=10_000)
print(json.dumps({"server": server.pid, "out": res.output, "error": res.error}))
"""


def test_callers_of_a_directory_of_shared_servers_share_one_that_outlives_them(tmp_path, monkeypatch):
    """With MINIFY_BOT_FORKSERVERS, a fork server asked for by one command is connected to by the next
    (same interpreter, preload, directory and environment): the import is paid once per job, each
    run sees its own caller's environment, and a caller's end leaves the server to the others."""
    pool = tmp_path / "pool"
    pool.mkdir()
    script = tmp_path / "s.py"
    script.write_text("import os, sys\nprint(os.environ.get('PYTEST_CURRENT_TEST'), os.environ.get('OTHER'), "
                      "'json' in sys.modules)\n")

    def caller(test: str, other: str | None = None) -> dict:
        env = {**os.environ, proc.SHARED_ENV: str(pool), "PYTHONPATH": str(ROOT), "PYTEST_CURRENT_TEST": test}
        env.pop("OTHER", None)
        if other:
            env["OTHER"] = other
        out = subprocess.run([PY, "-c", SHARED_CALLER, str(script)], env=env, capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.splitlines()[-1])

    first, second = caller("a"), caller("b")
    assert first["error"] is None and first["out"] == "a None True\n"
    assert second["out"] == "b None True\n"          # its own caller's environment, in the same server
    assert second["server"] == first["server"] and _alive(first["server"])
    other = caller("c", other="1")                   # another environment: a server of its own
    assert other["out"] == "c 1 True\n" and other["server"] != first["server"]
    for found in (first, other):
        os.kill(found["server"], signal.SIGKILL)
        assert _wait_dead(found["server"])
    again = caller("d")                              # the one that was killed is started again
    assert again["out"] == "d None True\n" and again["server"] != first["server"]
    sockets = list(pool.glob("*.sock"))
    for sock in sockets:                             # the directory's owner removes it: the servers end
        sock.unlink()
    assert _wait_dead(again["server"], 15)


def test_a_malformed_job_ends_only_its_callers_connection_to_a_shared_server(tmp_path, monkeypatch):
    pool = tmp_path / "pool"
    pool.mkdir()
    monkeypatch.setenv(proc.SHARED_ENV, str(pool))
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    with proc.forkserver(preload=()) as bad, proc.forkserver(preload=()) as good:
        try:
            assert bad.pid == good.pid and bad.proc is None   # one server, started to outlive this process
            assert bad.run(str(script), timeout=30, capture=100).output == "ran\n"
            r = _run_after_a_malformed_job(bad, script)
            assert r.returncode is None and "a fork server job's args: expected a list of strings" in r.error
            assert good.run(str(script), timeout=30, capture=100).output == "ran\n"
            good.close()
            assert _alive(good.pid)   # its callers gone, it waits for the next one
        finally:
            os.kill(good.pid, signal.SIGKILL)
