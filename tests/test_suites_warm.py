"""Programs run warm (bot.suites.warm): a ``python script.py`` command forked from an interpreter
that imported torch already must see what a fresh ``python script.py`` sees - torch's settings
read from its own environment (the capture's per-run variables included), its argv, path,
directory, random numbers, stdin, threads and atexit handlers, and minify-bot's hook - and what
cannot run warm runs fresh. Real interpreters, real torch; compiles with the eager backend only."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from dataclasses import asdict

import pytest

from bot.suites import warm
from bot.suites.command import capture_env, execute

PROGRAM = textwrap.dedent("""\
    import atexit, json, os, sys, threading, time
    import torch
    import torch._dynamo.config as dc, torch._inductor.config as ic, torch._functorch.config as fc

    def config(module):
        # (a set's order follows the interpreter's hash seed, which differs between fresh runs too)
        return {k: repr(sorted(map(str, v)) if isinstance(v, (set, frozenset)) else v)
                for k, v in sorted(module.get_config_copy().items())}

    torch.compile(lambda x: x.sin() + 1, backend="eager")(torch.ones(3))
    seen = {
        "argv": sys.argv[1:], "main": __name__, "file": os.path.basename(__file__), "cwd": os.getcwd(),
        "path0": sys.path[0], "stdin": sys.stdin.read(),
        "env": {k: os.environ.get(k) for k in ("TORCHDYNAMO_REPRO_AFTER", "MINIFY_BOT_MODE", "MY_VAR")},
        "rand": torch.rand(3).tolist(), "seed": torch.initial_seed(),
        "dynamo": config(dc), "inductor": config(ic), "functorch": config(fc),
    }
    print("SEEN " + json.dumps(seen, sort_keys=True))
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
    atexit.register(lambda: print("atexit ran"))
    sys.exit(3 if "fail" in sys.argv else 0)
""")


def _run(tmp_path, name, extra, *, warm_on: bool, args=("a", "b")):
    log = tmp_path / f"{name}.log"
    env = dict(extra, MY_VAR="mine", MINIFY_BOT_MODE="inference")
    if not warm_on:
        env[warm.OFF_ENV] = "0"
    ran = execute([sys.executable, "prog.py", *args], env_extra=env, cwd=str(tmp_path / "work"), timeout=240,
                  log_path=str(log))
    assert ran.error is None, ran.error
    seen = [json.loads(line[5:]) for line in ran.output.splitlines() if line.startswith("SEEN ")]
    assert len(seen) == 1, ran.output[-3000:]
    return ran, seen[0]


COMPILES = "import torch\ntorch.compile(lambda x: x * 2, backend='eager')(torch.ones(2))\n"


def _prime(cwd, env_extra=None) -> None:
    """A first run of a script that imports torch: the interpreter for the runs in ``cwd`` with that
    environment starts (which program is not part of which interpreter serves it)."""
    (cwd / "first.py").write_text(COMPILES)
    ran = execute([sys.executable, "first.py"], env_extra=dict(env_extra or {}), cwd=str(cwd), timeout=240,
                  log_path=str(cwd / "first.log"))
    assert ran.returncode == 0 and ran.hook.frames == 1 and ran.warm, ran.output[-2000:]


def test_a_script_that_imports_torch_runs_warm_from_its_first_run_and_one_that_does_not_after_it_compiled(tmp_path):
    """``import torch`` in the script: the first run forks from an interpreter started for it (the
    import is paid once, by that interpreter). torch imported through another module: the first run
    is fresh, and once it compiled, the next runs are warm."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "direct.py").write_text(COMPILES)
    first = execute([sys.executable, "direct.py"], env_extra={}, cwd=str(tmp_path / "a"), timeout=240,
                    log_path=str(tmp_path / "direct.log"))
    assert first.returncode == 0 and first.warm and first.hook.frames == 1, first.output[-2000:]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "helper.py").write_text(COMPILES)
    (tmp_path / "b" / "indirect.py").write_text("# torch comes in through helper\nimport helper  # noqa\n")
    runs = [execute([sys.executable, "indirect.py"], env_extra={}, cwd=str(tmp_path / "b"), timeout=240,
                    log_path=str(tmp_path / "indirect.log")) for _ in range(2)]
    assert [(r.returncode, r.hook.frames, r.warm) for r in runs] == [(0, 1, False), (0, 1, True)], runs[0].output


def test_a_warm_run_sees_what_a_fresh_interpreter_would(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "prog.py").write_text(PROGRAM)
    capture = capture_env(3, str(tmp_path / "debug"))
    _prime(tmp_path / "work", {"MY_VAR": "mine", "MINIFY_BOT_MODE": "inference"})
    runs = {}
    # plain, then a capture's per-run settings, then plain again failing: one warm interpreter serves all three
    for i, (extra, args) in enumerate((({}, ("a", "b")), (capture, ("a", "b")), ({}, ("a", "fail")))):
        for warm_on in (False, True):
            runs[i, warm_on] = _run(tmp_path, f"r{i}-{warm_on}", extra, warm_on=warm_on, args=args)
    for i in range(3):
        (fresh, fresh_seen), (hot, hot_seen) = runs[i, False], runs[i, True]
        assert hot.warm and not fresh.warm, i
        for key in sorted(set(fresh_seen) - {"rand", "seed"}):
            assert hot_seen[key] == fresh_seen[key], (i, key)
        assert (hot.returncode, fresh.returncode) == ((3, 3) if i == 2 else (0, 0))
        for line in ("thread done", "atexit ran"):
            assert line in hot.output and line in fresh.output, (i, line)
        # the hook saw the same program: its start, the graph it compiled, its end (the ISA it read there)
        assert (hot.hook.graphs, hot.hook.frames) == (fresh.hook.graphs, fresh.hook.frames) == (1, 1), i
        assert asdict(hot.hook) == asdict(fresh.hook), i
    # unseeded random numbers differ from run to run, warm as fresh
    for warm_on in (False, True):
        assert len({json.dumps(runs[i, warm_on][1]["rand"]) for i in range(3)}) == 3, warm_on
    capture_seen = runs[1, True][1]
    assert capture_seen["env"]["TORCHDYNAMO_REPRO_AFTER"] == "aot"
    assert capture_seen["dynamo"]["repro_after"] == "'aot'" and capture_seen["dynamo"]["repro_level"] == "3"
    assert capture_seen["dynamo"]["debug_dir_root"].startswith(repr(str(tmp_path / "debug"))[:-1])
    assert capture_seen["functorch"]["enable_autograd_cache"] == "False"
    assert capture_seen["inductor"]["fx_graph_cache"] == "True"    # its hit is inside the repro wrapper
    assert runs[0, True][1]["inductor"]["fx_graph_cache"] == "True"
    assert runs[0, True][1]["dynamo"]["debug_dir_root"] == repr(str(tmp_path / "work" / "torch_compile_debug"))


def test_commands_that_cannot_run_warm_run_fresh(tmp_path):
    (tmp_path / "prog.py").write_text("print('hi')\n")
    env = dict(os.environ)
    py = sys.executable
    launch = warm.launch_of([py, "prog.py", "--x"], env, str(tmp_path))
    assert launch and launch.script == str(tmp_path / "prog.py") and launch.args == ("--x",)
    assert warm.launch_of([py, "-m", "json.tool", "f"], env, str(tmp_path)).module == "json.tool"
    for argv in ([py, "-u", "prog.py"], [py, "missing.py"], [py], ["bash", "prog.py"], [py, "-m"],
                 ["/no/such/python", "prog.py"]):
        assert warm.launch_of(argv, env, str(tmp_path)) is None, argv
    # which scripts import torch themselves (their first run is warm): a line of their own, not a
    # comment, not another package
    for text, imports in (("import torch\n", True), ("import os, sys\nimport torch.nn as nn\n", True),
                          ("if True:\n    from torch import nn\n", True), ("import torch, os\n", True),
                          ("# import torch\n", False), ("import torchvision\n", False),
                          ("x = 'import torch'\n", False), ("print('hi')\n", False)):
        (tmp_path / "t.py").write_text(text)
        assert warm.imports_torch(warm.launch_of([py, "t.py"], env, str(tmp_path))) is imports, text
    assert not warm.imports_torch(warm.launch_of([py, "-m", "json.tool"], env, str(tmp_path)))
    # what changes per run is not part of which interpreter serves it
    base = {"PATH": "/bin", "TORCHDYNAMO_REPRO_LEVEL": "3", "MINIFY_BOT_HOOK_STATE": "/x", "TORCH_LOGS": "+dynamo"}
    assert warm.server_env(base) == {"PATH": "/bin", "TORCH_LOGS": "+dynamo"}


def test_a_python_that_cannot_import_torch_runs_the_program_fresh(tmp_path):
    """A warm interpreter needs torch; without it (here a venv without torch) the run is fresh and
    the program's result is its own."""
    base = shutil.which("python3", path=os.defpath) or sys.executable
    venv = tmp_path / "venv"
    import subprocess

    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # it would import torch (so its first run asks for an interpreter), but this venv has none
    (tmp_path / "prog.py").write_text("import sys\ntry:\n    import torch\nexcept ImportError:\n    pass\n"
                                      "print('no torch here', 'torch' in sys.modules)\nsys.exit(5)\n")
    argv = [str(venv / "bin" / "python"), "prog.py"]
    first = execute(argv, env_extra={}, cwd=str(tmp_path), timeout=120, log_path=str(tmp_path / "log"))
    # its first run asked for an interpreter, which could not import torch: the run went fresh
    assert first.returncode == 5 and not first.warm and not first.hook.frames, first.output[-2000:]
    assert "no torch here False" in first.output
    # asking again (as after a run that compiled) starts nothing: every later run goes straight to a fresh one
    warm.prepare(argv, env=_env_of_runs(tmp_path), cwd=str(tmp_path))
    for _ in range(2):
        ran = execute(argv, env_extra={}, cwd=str(tmp_path), timeout=120, log_path=str(tmp_path / "log"))
        assert ran.returncode == 5 and "no torch here False" in ran.output and not ran.warm, ran.output[-2000:]


def _env_of_runs(cwd) -> dict:
    """The environment execute() gives a run (what keys its interpreter)."""
    from bot.suites.command import hook_env, interpreter_env

    env = dict(os.environ)
    env.update(interpreter_env(env))
    env.update(hook_env(str(cwd / "state.jsonl"), base=env))
    return env


def test_a_program_that_compiles_nothing_runs_fresh_and_prepares_no_interpreter(tmp_path):
    (tmp_path / "p.py").write_text("print('plain')\n")
    for _ in range(2):
        ran = execute([sys.executable, "p.py"], env_extra={}, cwd=str(tmp_path), timeout=240,
                      log_path=str(tmp_path / "log"))
        assert ran.returncode == 0 and not ran.warm


@pytest.mark.parametrize("args", [("--fast",), ()])
def test_a_warm_programs_arguments_and_exit_code_are_its_own(tmp_path, args):
    _prime(tmp_path)
    (tmp_path / "p.py").write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(len(sys.argv))\n")
    ran = execute([sys.executable, "p.py", *args], env_extra={}, cwd=str(tmp_path), timeout=240,
                  log_path=str(tmp_path / "log"))
    assert ran.warm and ran.returncode == 1 + len(args) and f"args {list(args)}" in ran.output


def test_a_warm_start_up_that_cannot_load_runs_the_program_fresh(tmp_path, monkeypatch):
    """The program never runs twice, and never runs without what a warm run needs first: a
    start-up that cannot load ends the warm job before the script, and the run is made fresh."""
    _prime(tmp_path)
    monkeypatch.setattr(warm, "STARTUP", ["no_such_module_of_minify_bot:start", *warm.STARTUP])
    (tmp_path / "p.py").write_text("import os, sys\nprint('ran', os.getpid())\nsys.exit(4)\n")
    ran = execute([sys.executable, "p.py"], env_extra={}, cwd=str(tmp_path), timeout=240,
                  log_path=str(tmp_path / "log"))
    assert ran.returncode == 4 and ran.output.count("ran ") == 1 and not ran.warm, ran.output[-2000:]
    assert "no_such_module_of_minify_bot" not in (tmp_path / "log").read_text()
