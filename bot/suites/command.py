"""An arbitrary command as a check: run it under the chosen settings, judge it by exit status and output.

The command gets the settings through the environment (MINIFY_BOT_BACKEND, _MODE, _DTYPE,
_DEVICE, _DYNAMIC, _CONFIG as JSON) plus any TORCHDYNAMO_* variables of the caller, runs with a
timeout in its own session (process group), in the directory it was configured from, and is classified by
:func:`bot.suites.classify.classify` (exit status, output, user patterns).

Every run also loads minify-bot's environment hook (``bot/suites/hook`` on PYTHONPATH), which
counts the graphs the program compiles; minify's reruns use the same hook to replace the compile
backend (localize) and to keep every minifier launcher torch writes (capture).
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from dataclasses import dataclass

from bot import proc
from bot.suites.classify import Patterns, classify

HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hook")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def settings_env(settings) -> dict:
    return {
        "MINIFY_BOT_BACKEND": settings.backend,
        "MINIFY_BOT_MODE": settings.mode,
        "MINIFY_BOT_DTYPE": settings.dtype,
        "MINIFY_BOT_DEVICE": settings.device,
        "MINIFY_BOT_DYNAMIC": "1" if settings.dynamic else "0",
        "MINIFY_BOT_CONFIG": json.dumps(settings.config),
    }


def hook_env(state_path: str, *, force_backend: str | None = None, launcher_dir: str | None = None,
             base: dict | None = None) -> dict:
    """Environment that loads the hook in a child: PYTHONPATH gets the hook directory (and this
    package, which the hook imports) in front of what the caller had."""
    base = os.environ if base is None else base
    path = [HOOK_DIR, REPO_ROOT] + [p for p in (base.get("PYTHONPATH") or "").split(os.pathsep) if p]
    env = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(path)), "MINIFY_BOT_HOOK_STATE": state_path}
    if force_backend:
        env["MINIFY_BOT_FORCE_BACKEND"] = force_backend
    if launcher_dir:
        env["MINIFY_BOT_LAUNCHER_DIR"] = launcher_dir
    return env


def capture_env(level: int, debug_dir: str) -> dict:
    """Environment of a program's capture run (minify's, or the check's rerun of a failure):
    torch's repro-after settings and the FX-graph and AOTAutograd caches off (a program or
    harness that turns the caches on in code is overridden by these variables; a cache hit
    would skip the repro wrapper)."""
    return {"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": str(level),
            "TORCH_COMPILE_DEBUG_DIR": debug_dir,
            "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}


@dataclass
class Ran:
    returncode: int | None   # negative: killed by that signal
    timed_out: bool
    output: str              # the last 200 kB of stdout+stderr
    seconds: float
    hook: dict               # bot.torch_adapter.hook.read_state()
    error: str | None = None  # could not start


def execute(argv: list[str], *, env_extra: dict, cwd: str | None, timeout: float, log_path: str,
            force_backend: str | None = None, launcher_dir: str | None = None) -> Ran:
    """Run ``argv`` with the hook loaded; output to ``log_path``; kill the group at the timeout."""
    from bot.torch_adapter.hook import read_state

    fd, state = tempfile.mkstemp(prefix="minify-hook-", suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ)
    env.update(env_extra)
    env.update(hook_env(state, force_backend=force_backend, launcher_dir=launcher_dir, base=env))
    try:
        res = proc.run(argv, cwd=cwd, env=env, timeout=timeout, log_path=log_path, log_mode="w", capture=200_000)
        if res.error:
            return Ran(None, False, "", 0.0, read_state(state), res.error)
        return Ran(res.returncode, res.timed_out, res.output, res.seconds, read_state(state))
    finally:
        os.remove(state)


def run_command(command: str, settings, log_path: str, cwd: str | None = None, extra_env: dict | None = None,
                patterns: Patterns | None = None, force_backend: str | None = None,
                launcher_dir: str | None = None) -> dict:
    """One run of a user's command -> the fields of a results.json row (plus ``compiled_graphs``)."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return _bad(f"cannot parse command: {exc}")
    if not argv:
        return _bad("empty command")
    env = settings_env(settings)
    env.update(extra_env or {})
    ran = execute(argv, env_extra=env, cwd=cwd, timeout=settings.timeout, log_path=log_path,
                  force_backend=force_backend, launcher_dir=launcher_dir)
    if ran.error:
        return _bad(ran.error, "setup_error")
    row = classify(returncode=ran.returncode, output=ran.output, timed_out=ran.timed_out, timeout=settings.timeout,
                   patterns=patterns, compiled_graphs=ran.hook["frames"])
    row["compiled_graphs"] = ran.hook["graphs"]
    row["compile_frames"] = ran.hook["frames"]
    row["duration_s"] = ran.seconds
    row["_launchers"] = ran.hook["launchers"]
    return row


def _bad(message: str, cls: str = "setup_error") -> dict:
    return {"status": "eager_fail_to_run", "failure_class": cls, "accuracy": None, "classified_by": "start",
            "error": {"type": "BadCommand", "message": message, "traceback": "", "frames": []}}
