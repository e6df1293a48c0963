"""bot/minify/procs.py and bot/minify/worker/child.py: how minify starts its children. Each gets a log
with the command it ran, its ``@@`` events, a time limit, and the environment it needs: minify-bot on
the path of a worker, never on the path of a repro (which needs torch only), and never the capture
settings of the run."""

from __future__ import annotations

import os
import sys

from bot import proc
from bot.minify import procs
from bot.minify.worker import child

EVENT_SCRIPT = "import json, sys; print('hello'); print('@@ ' + json.dumps({'stage': 'x', 'n': 3})); sys.exit(4)"


def test_child_env_puts_the_checkout_first_and_drops_capture_settings(monkeypatch):
    monkeypatch.setenv("TORCHDYNAMO_REPRO_AFTER", "aot")
    monkeypatch.setenv("MINIFY_BOT_CAPTURE_DIR", "/somewhere")
    monkeypatch.setenv("MINIFY_BOT_WORKER_CRASH_AFTER", "3")
    monkeypatch.setenv("PYTHONPATH", "/their/site")
    assert proc.BOT_ROOT == os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # this checkout
    env = child.child_env({"EXTRA": "1"})
    assert "TORCHDYNAMO_REPRO_AFTER" not in env and "MINIFY_BOT_CAPTURE_DIR" not in env
    assert "MINIFY_BOT_WORKER_CRASH_AFTER" not in env
    assert child.child_env(keep_hooks=True)["MINIFY_BOT_WORKER_CRASH_AFTER"] == "3"
    assert env["PYTHONPATH"].split(os.pathsep) == [proc.BOT_ROOT, "/their/site"] and env["EXTRA"] == "1"
    repro = procs.repro_env()
    assert repro["PYTHONPATH"] == "/their/site" and "TORCHDYNAMO_REPRO_AFTER" not in repro
    monkeypatch.setenv("PYTHONPATH", proc.BOT_ROOT)
    assert "PYTHONPATH" not in procs.repro_env()


def test_run_logged_logs_the_command_and_reads_events(tmp_path):
    log = tmp_path / "child.log"
    seen = []
    out = child.run_logged([sys.executable, "-c", EVENT_SCRIPT], cwd=str(tmp_path / "work"), log_path=str(log),
                           timeout=60, on_event=seen.append)
    assert out.returncode == 4
    assert out.events == seen == [{"stage": "x", "n": 3}]
    text = log.read_text()
    assert f"$ {os.path.basename(sys.executable)} -c" in text and "hello" in text
    assert sys.executable not in text.splitlines()[0]  # the runner's paths are not shown
    assert (tmp_path / "work").is_dir()


def test_a_child_that_cannot_start_is_exit_127_with_why(tmp_path):
    out = child.run_logged([str(tmp_path / "no-such-program")], cwd=str(tmp_path), log_path=str(tmp_path / "l"),
                           timeout=10)
    assert out.returncode == 127 and out.tail


def test_a_child_past_its_time_limit_is_stopped(tmp_path):
    out = child.run_logged([sys.executable, "-c", "import time; time.sleep(60)"], cwd=str(tmp_path),
                           log_path=str(tmp_path / "l"), timeout=1)
    assert out.timed_out and out.seconds < 30


def test_forked_children_exit_with_the_functions_code(tmp_path):
    def ok():
        print("in the child")
        return 5

    def broken():
        raise RuntimeError("boom")

    out = procs.fork_logged(ok, name="ok", cwd=str(tmp_path / "a"), log_path=str(tmp_path / "a.log"), timeout=60)
    assert out.returncode == 5 and "in the child" in (tmp_path / "a.log").read_text()
    out = procs.fork_logged(broken, name="broken", cwd=str(tmp_path / "b"), log_path=str(tmp_path / "b.log"),
                            timeout=60)
    assert out.returncode == 70 and "boom" in (tmp_path / "b.log").read_text()


def test_fork_server_runs_scripts_without_minify_bot_and_modules_with_it(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text("import os, sys\n"
                      f"print('checkout on the path:', {proc.BOT_ROOT!r} in [os.path.abspath(p) for p in sys.path])\n"
                      "print('cwd:', os.getcwd())\n")
    interpreters = procs.Interpreters(preload=("json",))
    try:
        res = interpreters.run_script(str(script), [], timeout=60)
        assert res is not None and res.returncode == 0, res
        # a repro runs as a user's script does: the bot's checkout is not put on its path (an installed
        # bot may still be importable, as any installed package is)
        assert "checkout on the path: False" in res.output, res.output
        cwd = res.output.split("cwd: ")[1].split()[0]
        assert "minify-verify-" in cwd and not os.path.exists(cwd)  # a fresh directory, removed after
        log = tmp_path / "w.log"
        out = interpreters.run_module("bot.safejson", [], cwd=str(tmp_path / "w"), log_path=str(log), timeout=60,
                                      env=child.child_env())
        assert out is not None and out.returncode == 0, log.read_text()
        assert "-m bot.safejson" in log.read_text()
    finally:
        interpreters.close()
    assert interpreters.run_script(str(script), [], timeout=60) is None  # closed: the caller starts its own
    assert procs.Interpreters(runs=0).run_script(str(script), [], timeout=60) is None


def test_a_server_started_ahead_is_the_one_the_next_stage_takes(tmp_path):
    """`run` starts its minify stage's fork server during the check (at its first failure): the stage
    then takes that server, already warm, and the next stage starts its own."""
    script = tmp_path / "pid.py"
    # the job's parent is the server's waiter for it; the waiter's parent is the server
    script.write_text("import os\nprint('server', open(f'/proc/{os.getppid()}/stat').read().split()[3])\n")
    procs.start_ahead(1, preload=("json",))
    procs.start_ahead(1, preload=("json",))   # one server ahead, however many failures ask
    taken = procs.Interpreters.for_stage(1)
    try:
        first = taken.run_script(str(script), [], timeout=60)
        again = taken.run_script(str(script), [], timeout=60)
        assert first is not None and again is not None
        server = str(taken._server.pid)
        assert first.output.split()[-1] == again.output.split()[-1] == server   # both forked from it
        fresh = procs.Interpreters.for_stage(1)
        assert fresh is not taken and fresh._server is None   # nothing ahead any more: started when needed
    finally:
        taken.close()
    procs.close_ahead()   # nothing ahead: nothing to close
    procs.start_ahead(1, preload=("json",))
    ahead = procs._AHEAD["servers"]
    procs.close_ahead()   # a server no stage took is stopped
    assert ahead.run_script(str(script), [], timeout=60) is None
