"""An arbitrary command as a check: run it under the chosen settings, judge it by exit status and output.

The command gets the settings through the environment (MINIFY_BOT_BACKEND, _MODE, _DTYPE,
_DEVICE, _DYNAMIC, _CONFIG as JSON) plus any TORCHDYNAMO_* variables of the caller, runs with a
timeout in its own process group and working directory, and is classified:
  exit 0                                  -> pass
  killed by a signal                      -> crash (oom for SIGKILL)
  over the timeout                        -> timeout
  output names an accuracy failure        -> fail_accuracy / accuracy
  output has a compiler exception         -> fail_to_run / compile_error
  any other non-zero exit                 -> fail_to_run / runtime_error
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time

ACCURACY_PATTERNS = re.compile(r"AccuracyError|fail_accuracy|Accuracy failed|Bad accuracy detected")
COMPILE_PATTERNS = re.compile(r"BackendCompilerFailed|InductorError|CppCompileError|LoweringException|"
                              r"torch\._dynamo\.exc\.Unsupported|CompilationError")
EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failed|Interrupt)[\w]*): ?(.*)$")


def settings_env(settings) -> dict:
    return {
        "MINIFY_BOT_BACKEND": settings.backend,
        "MINIFY_BOT_MODE": settings.mode,
        "MINIFY_BOT_DTYPE": settings.dtype,
        "MINIFY_BOT_DEVICE": settings.device,
        "MINIFY_BOT_DYNAMIC": "1" if settings.dynamic else "0",
        "MINIFY_BOT_CONFIG": json.dumps(settings.config),
    }


def last_exception(text: str) -> tuple[str, str] | None:
    for line in reversed(text.splitlines()):
        m = EXC_LINE.match(line.strip())
        if m:
            return m.group(1).rsplit(".", 1)[-1], m.group(2)
    return None


def run_command(command: str, settings, log_path: str, cwd: str | None = None, extra_env: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(settings_env(settings))
    env.update(extra_env or {})
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return _row("fail_to_run", "eager_error", "BadCommand", f"cannot parse command: {exc}", "")
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=cwd, env=env, start_new_session=True)
        except OSError as exc:
            return _row("eager_fail_to_run", "eager_error", type(exc).__name__, f"cannot start {argv[0]!r}: {exc.strerror}", "")
        try:
            rc = proc.wait(timeout=settings.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            rc = proc.wait()
    elapsed = round(time.perf_counter() - t0, 3)
    with open(log_path, "rb") as fh:
        text = fh.read()[-200_000:].decode("utf-8", "replace")
    tail = "\n".join(text.splitlines()[-40:])
    if timed_out:
        row = _row("timeout", "timeout", "Timeout", f"command did not finish within {settings.timeout:g} s", tail)
    elif rc == 0:
        row = {"status": "pass", "failure_class": None, "error": None, "accuracy": None}
    elif rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        if -rc == signal.SIGKILL:
            row = _row("OOM", "oom", "Killed", f"command killed by {name} (out of memory?)", tail)
        else:
            row = _row("fail_to_run", "crash", name, f"command died with {name}", tail)
    else:
        exc = last_exception(text)
        etype, emsg = exc if exc else ("ExitCode", f"command exited with code {rc}")
        if ACCURACY_PATTERNS.search(text):
            row = {"status": "fail_accuracy", "failure_class": "accuracy", "accuracy": None,
                   "error": {"type": etype, "message": emsg, "traceback": tail, "frames": []}}
        elif COMPILE_PATTERNS.search(text):
            row = _row("fail_to_run", "compile_error", etype, emsg, tail)
        else:
            row = _row("fail_to_run", "runtime_error", etype, emsg, tail)
        row["exit_code"] = rc
    row["duration_s"] = elapsed
    return row


def _row(status, cls, etype, message, tail):
    return {"status": status, "failure_class": cls, "accuracy": None,
            "error": {"type": etype, "message": message, "traceback": tail, "frames": []}}
