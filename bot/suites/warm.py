"""Programs run warm: a user's ``python script.py args`` (or ``python -m module args``) runs in a
process forked from an interpreter of that same Python that has already imported torch, dynamo and
inductor (:class:`bot.proc.ForkServer`), instead of a fresh one that imports them again.

Importing them is most of what a small program costs (about 8 of 9 CPU-seconds on two cores), and
a check runs a program more than once: every program of a sweep under the same settings, the rerun
that captures a failure, minify's localize and capture reruns. A script that imports torch itself
(its text says ``import torch`` or ``from torch``) runs warm from its first run: the interpreter
starts for it and pays the import that run would have paid, once for all its runs. Any other
program's first run is fresh; when it compiled (the hook counted a frame; torch came in through
another module, or ``-m``), the interpreter for its next runs starts at once, in the background.
A program that never imports torch (a tool, a shell wrapper) never pays for an interpreter it
would not use.

What the program sees is what ``python script.py`` would give it: its environment, working
directory, ``sys.argv``, ``sys.path`` and ``__main__``, stdin from /dev/null, its own session and
time limit, non-daemon threads and ``atexit`` handlers at its end, and minify-bot's hook activated
from its own environment (``bot/suites/hook``). The one difference is that torch is already in
``sys.modules``; torch read its environment at that import, so:

- an interpreter is kept per Python, per working directory and per environment, but for the
  variables that change from run to run: minify-bot's own (``MINIFY_BOT_*``, read when used) and
  torch's per-run settings (:data:`bot.torch_adapter.warmenv.PER_RUN`), read again in the run;
- anything else (a shell line, interpreter flags such as ``-u`` or ``-X``, a script that is not a
  file, a Python that cannot import torch) runs fresh, as does everything when ``MINIFY_BOT_WARM=0``.

Interpreters live as long as this process (they exit when it does); the :data:`KEEP` most recently
used are kept.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import threading
from dataclasses import dataclass

from bot import proc
from bot.forkserver import EXIT_STARTUP_FAILED
from bot.torch_adapter.warmenv import PER_RUN

PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx")
OFF_ENV = "MINIFY_BOT_WARM"          # "0": every program runs in a fresh interpreter
# in each run, before the program: what torch read at import, read again from the run's own
# environment, fresh random seeds; then minify-bot's hook, activated from that environment
STARTUP = ["bot.torch_adapter.warmenv:fresh_start", "sitecustomize:activate"]
_PYTHON = re.compile(r"python[0-9.]*")
KEEP = 2   # warm interpreters kept at once (each holds torch in memory)
# a line of the script itself that imports torch (``import torch``, ``import torch.nn as nn``,
# ``from torch import nn``), not in a string or comment that starts the line
_IMPORTS_TORCH = re.compile(rb"^[ \t]*(?:import|from)[ \t]+torch(?:[ \t.,]|$)", re.M)
_READ = 1 << 20   # of a script's text, looked at for that line


@dataclass(frozen=True)
class Launch:
    """A command that can run warm: its interpreter, then a script or a module, and the arguments."""

    python: str
    script: str | None
    module: str | None
    args: tuple


def launch_of(argv: list[str], env: dict, cwd: str | None) -> Launch | None:
    """``argv`` as a warm launch, or None when it must run fresh."""
    if len(argv) < 2 or not _PYTHON.fullmatch(os.path.basename(argv[0])):
        return None
    here = cwd or os.getcwd()
    if os.sep in argv[0]:
        exe = os.path.join(here, argv[0])
        python = exe if os.access(exe, os.X_OK) else None
    else:
        python = shutil.which(argv[0], path=env.get("PATH", os.defpath))
    if not python:
        return None
    if argv[1] == "-m" and len(argv) > 2 and re.fullmatch(r"[A-Za-z_][\w.]*", argv[2]):
        return Launch(os.path.abspath(python), None, argv[2], tuple(argv[3:]))
    script = os.path.join(here, argv[1])
    if argv[1].startswith("-") or not os.path.isfile(script):
        return None
    return Launch(os.path.abspath(python), os.path.abspath(script), None, tuple(argv[2:]))


def imports_torch(launch: Launch) -> bool:
    """Whether the script imports torch itself, so that its first run may fork from an interpreter
    started for it (the import is paid once either way)."""
    if launch.script is None:
        return False
    try:
        with open(launch.script, "rb") as f:
            return _IMPORTS_TORCH.search(f.read(_READ)) is not None
    except OSError:
        return False


def server_env(env: dict) -> dict:
    """The environment an interpreter is started with: the run's, without what changes per run."""
    return {k: v for k, v in env.items() if not k.startswith("MINIFY_BOT_") and k not in PER_RUN}


class ProgramServers(proc.Closing):
    """Warm interpreters, one per Python, working directory (torch makes some paths absolute at
    import) and :func:`server_env`, started when first needed."""

    def __init__(self):
        self._lock = threading.Lock()
        self._servers: dict[tuple, proc.ForkServer | None] = {}   # None: that one failed; run fresh

    def prepare(self, launch: Launch, env: dict, cwd: str | None) -> None:
        """Start the interpreter that the next runs like this one will fork from."""
        self._server(launch.python, server_env(env), os.path.abspath(cwd or os.getcwd()), start=True)

    def _server(self, python: str, env: dict, cwd: str, *, start: bool) -> proc.ForkServer | None:
        key = (python, cwd, tuple(sorted(env.items())))
        idle = []
        with self._lock:
            if key not in self._servers and not start:
                return None
            if key not in self._servers:
                while len(self._servers) >= KEEP:  # the least recently used goes (its runs go on)
                    idle.append(self._servers.pop(next(iter(self._servers))))
                self._servers[key] = proc.forkserver(preload=PRELOAD, env=env, python=python, cwd=cwd)
            self._servers[key] = self._servers.pop(key)  # now the most recently used
            server = self._servers[key]
        for s in idle:
            if s is not None:
                s.close()
        return server

    def _failed(self, server: proc.ForkServer) -> None:
        with self._lock:
            for key, s in self._servers.items():
                if s is server:
                    self._servers[key] = None
        server.close()

    def run(self, launch: Launch, *, env: dict, cwd: str | None, timeout: float, log_path: str | None,
            log_mode: str, capture: int) -> proc.Result | None:
        """The run's result; None when there is no warm interpreter for it (the caller runs it fresh)."""
        cwd = os.path.abspath(cwd or os.getcwd())
        which = (launch.python, server_env(env), cwd)
        server = self._server(*which, start=False)
        if server is None and imports_torch(launch):   # its first run: the interpreter starts for it
            server = self._server(*which, start=True)
        if server is None:
            return None
        res = server.run(launch.script, list(launch.args), module=launch.module, env=env, cwd=cwd,
                         timeout=timeout, log_path=log_path, log_mode=log_mode, capture=capture,
                         startup=STARTUP, exit_hooks=True)
        if res.error or res.returncode == EXIT_STARTUP_FAILED:   # the program did not run: fresh, from now on
            self._failed(server)
            return None
        return res

    def close(self) -> None:
        with self._lock:
            servers = [s for s in self._servers.values() if s is not None]
            self._servers.clear()
        for s in servers:
            s.close()


_SERVERS = ProgramServers()
atexit.register(_SERVERS.close)


def _launch(argv: list[str], env: dict, cwd: str | None) -> Launch | None:
    if env.get(OFF_ENV, os.environ.get(OFF_ENV)) == "0":
        return None
    return launch_of(argv, env, cwd)


def run(argv: list[str], *, env: dict, cwd: str | None, timeout: float, log_path: str | None = None,
        log_mode: str = "a", capture: int = 0) -> proc.Result | None:
    """Run ``argv`` warm when it can be (module docstring) and an interpreter for it was prepared
    or the script imports torch; None: the caller runs it fresh."""
    launch = _launch(argv, env, cwd)
    if launch is None:
        return None
    return _SERVERS.run(launch, env=env, cwd=cwd, timeout=timeout, log_path=log_path, log_mode=log_mode,
                             capture=capture)


def prepare(argv: list[str], *, env: dict, cwd: str | None) -> None:
    """After a fresh run of a program that compiled: start the interpreter its next runs (the
    check's rerun, minify's localize and capture, the sweep's next program) fork from, while this
    process goes on. A program that compiles nothing, or runs once, never pays for one."""
    launch = _launch(argv, env, cwd)
    if launch is not None:
        _SERVERS.prepare(launch, env, cwd)
