"""bot.cli's exit path: a command that imported torch skips the interpreter's slow teardown but
loses nothing on the way out (real subprocesses, real torch import, no compile)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PROGRAM = r"""
import atexit, sys, threading, time
import torch  # the teardown being skipped is torch's
from bot.cli import exit_now
out = sys.argv[1]
atexit.register(lambda: open(out + ".atexit", "w").write("ran"))
def late():
    time.sleep(0.5)
    open(out + ".thread", "w").write("done")
threading.Thread(target=late).start()          # non-daemon: waited for, as at a normal exit
sys.stdout.write("x" * 200_000)                # buffered: flushed before the end
sys.stderr.write("last words")
exit_now(3)
"""


def test_exit_now_keeps_exit_code_output_exit_handlers_and_threads(tmp_path):
    out = tmp_path / "mark"
    p = subprocess.run([sys.executable, "-c", PROGRAM, str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 3, p.stderr[-2000:]
    assert p.stdout == "x" * 200_000 and p.stderr.endswith("last words")
    assert (tmp_path / "mark.atexit").read_text() == "ran"
    assert (tmp_path / "mark.thread").read_text() == "done"


@pytest.mark.parametrize("how", ["module", "console script"])
def test_the_module_and_the_console_script_exit_with_the_commands_code(tmp_path, how):
    if how == "module":
        argv = [sys.executable, "-m", "bot"]
    else:
        script = Path(sys.executable).parent / "minify-bot"
        if not script.exists():
            pytest.skip("minify-bot is not installed next to this interpreter")
        argv = [str(script)]
    p = subprocess.run([*argv, "check", "--models", "no_such_model", "--out", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "unknown model 'no_such_model'" in p.stderr, p.stderr[-2000:]


def test_a_launcher_minified_on_its_own_is_labelled_with_its_graphs_device():
    """`minify --launcher FILE`: the device comes from the storages torch wrote (a GPU graph's say
    ``device=device(type='cuda', index=0)``), so the record and the issue do not say `unknown`."""
    from bot.commands.minify import _launcher_device

    gpu = ("    buf0 = reader.storage('ab12', 4096, device=device(type='cuda', index=0))\n"
           "    buf1 = reader.storage('cd34', 64)\n")
    cpu = "    buf0 = reader.storage('ab12', 4096)\n"
    assert (_launcher_device(gpu), _launcher_device(cpu)) == ("cuda", "cpu")
