"""Child processes: every one gets a timeout, its own working directory and a log file.

How a child's environment is made and how a fresh process runs logged are shared with the worker,
which may not import this module: :mod:`bot.minify.worker.child` defines them and this module builds
on it. Here: the forked children, the warm parent, a repro's environment and the fork server
(:class:`Interpreters`)."""

from __future__ import annotations

import os
from typing import Callable

from bot import proc
from bot.minify.worker.child import Outcome, child_env


def fork_logged(fn: Callable[[], int], *, name: str, cwd: str, log_path: str, timeout: float,
                on_event: Callable[[dict], None] | None = None) -> Outcome:
    """Like :func:`bot.minify.worker.child.run_logged`, but ``fn()`` runs in a child *forked* from
    this process (which has imported and warmed torch once), in its own session and working directory. The exit
    code is ``fn``'s return value, 70 for an exception, ``-signal`` when the child was killed.

    Only fork from a process that has not started OpenMP or compile-worker pools (see
    :func:`bot.torch_adapter.runtime.warm_up`); the child forgets inherited pools."""
    from bot.torch_adapter.device import fork_hooks

    return proc.fork(lambda send: int(fn() or 0), cwd=cwd, timeout=max(1.0, timeout), log_path=log_path,
                     announce=f"$ (forked) {name}", events=True, on_event=on_event, **fork_hooks(name))


def warm_parent() -> None:
    """Import and warm torch once in this process (once: a process the check warmed is not warmed
    again), so children forked from it start fast."""
    from bot.torch_adapter.runtime import warm_up

    warm_up("cpu")


def repro_env() -> dict:
    """The environment of a repro run: a child's, without minify-bot on the path (a repro needs
    torch only; the user's own PYTHONPATH stays: it may be where their torch comes from)."""
    env = child_env()
    theirs = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
              if p and os.path.abspath(p) != proc.BOT_ROOT]
    if theirs:
        env["PYTHONPATH"] = os.pathsep.join(theirs)
    else:
        env.pop("PYTHONPATH", None)
    return env


class Interpreters(proc.Closing):
    """The minify command's one fork server (:class:`bot.proc.ForkServer`): a fresh interpreter
    that does what every repro does first (:data:`bot.torch_adapter.repro.REPRO_PRELOAD`: import
    torch, learn the CPU's vector ISAs, one throwaway compile) and then runs, each in a process
    forked from it:

    - the verification runs (:meth:`run_script`): each is its own process that ran nothing of the
      minifier, as ``python repro.py`` would, without minify-bot's checkout on its path;
    - the minify workers (:meth:`run_module`), as ``python -m bot.minify.worker`` would;
    - what this torch offers (:meth:`facts`), so that the command's own process need not import
      torch beside the server.

    So torch is imported and warmed once per minify command, while this process does other work,
    instead of once per run. :meth:`start` it ahead. A run returns None when there is no server
    (never started, closed, or gone): the caller then starts a process of its own. Close it when
    done."""

    def __init__(self, runs: int = 1, preload: tuple[str, ...] | None = None):
        self._wanted = runs > 0
        self._preload = preload
        self._server: proc.ForkServer | None = None

    @classmethod
    def for_stage(cls, runs: int) -> "Interpreters":
        """The minify stage's fork server: the one :func:`start_ahead` started, else a new one
        (started when first needed)."""
        ahead = _AHEAD.pop("servers", None)
        return ahead if ahead is not None else cls(runs)

    def start(self) -> "Interpreters":
        if self._wanted and self._server is None:
            from bot.torch_adapter.repro import repro_preload

            self._server = proc.forkserver(preload=self._preload if self._preload is not None else repro_preload(),
                                           env=repro_env())
        return self

    def run_script(self, path: str, args: list[str], *, timeout: float, cwd: str | None = None,
                   log_path: str | None = None, announce: str | None = None) -> proc.Result | None:
        """One run of a script that needs torch only (a repro) in a fork of the server, in ``cwd``
        (by default a fresh temporary directory, removed after), its output also appended to
        ``log_path`` when given."""
        import shutil
        import tempfile

        if self.start()._server is None:
            return None
        own = cwd is None
        cwd = tempfile.mkdtemp(prefix="minify-verify-") if own else cwd
        try:
            res = self._server.run(path, args, cwd=cwd, timeout=timeout, capture=REPRO_CAPTURE, log_path=log_path,
                                   announce=announce)
        finally:
            if own:
                shutil.rmtree(cwd, ignore_errors=True)
        return None if res.error else res

    def fork_server(self) -> proc.ForkServer | None:
        """The server itself (started now), for a caller that runs its own kind of job in it; None
        when there is none."""
        return self.start()._server

    def facts(self, timeout: float = 300) -> dict | None:
        """:func:`bot.torch_adapter.facts.gather`, run in a fork of the server (None without one)."""
        import json

        from bot.torch_adapter import facts

        res = self.run_script(facts.__file__, [], timeout=timeout)
        if res is None or res.returncode != 0:
            return None
        try:
            found = json.loads((res.output.strip().splitlines() or ["null"])[-1])
        except ValueError:
            return None
        return found if isinstance(found, dict) else None

    def run_module(self, module: str, args: list[str], *, cwd: str, log_path: str, timeout: float,
                   env: dict, on_event: Callable[[dict], None] | None = None) -> Outcome | None:
        """``python -m module args`` in a fork of the server, with this repository first on its path
        and ``env`` as its environment; logged and evented like :func:`bot.minify.worker.child.run_logged`."""
        if self.start()._server is None:
            return None
        os.makedirs(cwd, exist_ok=True)
        announce = f"$ (forked from the fork server) -m {module} " + " ".join(os.path.basename(a) for a in args)
        out = self._server.run(None, args, module=module, path=[proc.BOT_ROOT], env=env, cwd=cwd,
                               timeout=max(1.0, timeout), log_path=log_path, announce=announce, events=True,
                               on_event=on_event)
        return None if out.error else out

    def close(self) -> None:
        """Stop the server; later runs start processes of their own."""
        self._wanted = False
        if self._server is not None:
            self._server.close()



REPRO_CAPTURE = 1_000_000  # bytes of a repro run's output kept for the same-failure check


_AHEAD: dict = {}


def start_ahead(runs: int, preload: tuple[str, ...] | None = None) -> None:
    """Start the next minify stage's fork server now, ahead of the stage: the `run` command calls
    this when its check sees a first failure, so that the server's import of torch and its warm-up
    overlap the rest of the check (its reruns, the checks after it) instead of following it. The
    server is the one :meth:`Interpreters.for_stage` would start: same environment, same preload."""
    if "servers" not in _AHEAD:
        _AHEAD["servers"] = Interpreters(runs, preload).start()


def close_ahead() -> None:
    """Stop a server started ahead that no stage took (the check was interrupted, nothing to minify)."""
    ahead = _AHEAD.pop("servers", None)
    if ahead is not None:
        ahead.close()
