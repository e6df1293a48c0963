"""Keeping the token away from model code in one job (stage `all`, and stage `check` when it is given one).

Code of the same user reads any process's initial environment block (``/proc/<pid>/environ``):
changing ``os.environ`` does not change it, and scrubbing a child's environment does not hide the
parent's. So the action process, before it does anything else:

1. ``isolate``: re-executes itself without any secret in its environment (the `github-token` input,
   variables whose name or value looks like a credential). The secrets travel over an anonymous
   memory file descriptor that the new process reads once and closes: after that they live only
   in this process's memory. The runner's step shell runs the bot with ``exec`` (action.yml), so no
   ancestor of the bot holds them either;
2. ``harden``: marks the process not dumpable (its memory, environment and file descriptors are no
   longer readable or traceable by other processes of the same user without CAP_SYS_PTRACE) and
   makes it the reaper of its orphaned descendants;
3. ``reap_strays``: once the model-running stages (check, minify: the only ones that run model
   code or known repros) have returned, every process they left behind (daemons that detached
   themselves) is killed before the report stage, the only child ever given the token, starts.

Linux only; elsewhere the steps that need /proc or prctl are skipped (there is no /proc to read).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

from bot import gha, safejson

SECRETS_FD = "MINIFY_BOT_HANDOVER_FD"
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
TOKEN_INPUTS = ("INPUT_GITHUB-TOKEN", "INPUT_GITHUB_TOKEN")


def is_secret(name: str, value: str) -> bool:
    """A variable to keep out of any environment block model code could read."""
    return bool(value) and (name.upper() in TOKEN_INPUTS or bool(gha.secret_like_env({name: value})))


def isolate(say=lambda m: print(m, file=sys.stderr)) -> dict[str, str]:
    """Make sure this process's environment block holds no secret, and return the secrets (name ->
    value), which then live only in this process's memory. Called first thing by the action: it
    may replace the process (``os.execve``) and start again from the top with the secrets handed
    over on a file descriptor."""
    handed = os.environ.pop(SECRETS_FD, None)
    if handed is not None:
        secrets = _receive(handed)
        harden()
        return secrets
    secrets = {k: v for k, v in os.environ.items() if is_secret(k, v)}
    argv = getattr(sys, "orig_argv", None)
    if secrets and argv and sys.executable and sys.platform.startswith("linux"):
        fd = _hand_over(secrets)
        env = {k: v for k, v in os.environ.items() if k not in secrets}
        env[SECRETS_FD] = str(fd)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        try:
            os.execve(sys.executable, list(argv), env)
        except OSError as exc:  # pragma: no cover - the interpreter that runs us can always run again
            os.close(fd)
            say(f"warning: could not restart without the token in the environment ({exc}); "
                "model code in this job can read it")
    harden()
    return secrets


def _hand_over(secrets: dict[str, str]) -> int:
    """An inheritable, anonymous file (no name on any filesystem) holding the secrets as JSON."""
    import json

    data = json.dumps(secrets).encode("utf-8")
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("minify-bot", 0)
    else:  # pragma: no cover - Linux without memfd (before 3.17)
        import tempfile

        fh = tempfile.TemporaryFile()
        fd = os.dup(fh.fileno())
        fh.close()
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


def _receive(handed: str) -> dict[str, str]:
    try:
        fd = int(handed)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        os.close(fd)
        doc = safejson.loads(b"".join(chunks), max_depth=2)
    except (ValueError, OSError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {str(k): str(v) for k, v in doc.items() if isinstance(v, str)}


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def harden() -> None:
    """Not dumpable (no ptrace, no /proc/<pid>/mem, environ or fd for other processes of the same
    user); the reaper of its orphaned descendants (so ``reap_strays`` finds detached daemons)."""
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[1].isdigit() and int(fields[1]) == pid:
            out.append(int(name))
    return out


def reap_strays(timeout: float = 10.0) -> int:
    """Kill (SIGKILL) and reap every process still descending from this one: called when no child
    of ours should be running, after the stages that run model code. Returns how many it stopped."""
    me = os.getpid()
    stopped = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = children(me)
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
                stopped += 1
            except OSError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    return stopped


# ---------------------------------------------------------------- code the report would load
# Model code (and a known repro) runs as the same user as the interpreter that later starts the
# report, so it could leave code behind for the report to run with the token: a `.pth` or
# `sitecustomize.py` in site-packages, an edited module, a template (jinja2 templates can run code).
# The files the report loads are recorded before model code runs and compared before the token is
# handed over; compiled bytecode is not read from the tree at all (the report gets a fresh
# `pycache_prefix`), so `__pycache__` is left out. A file's ctime cannot be set back by its owner.

_baseline: dict[str, tuple] | None = None
_baseline_paths: tuple[list[str], list[str]] = ([], [])


IMPORTABLE = (".py", ".pth", ".so", ".pyd", ".zip", ".egg-link")


def code_paths(extra=()) -> tuple[list[str], list[str]]:
    """(trees, tops): directories whose every file counts (the interpreter's site and standard-library
    directories, where action.yml installs the bot, and ``extra``), and the PYTHONPATH directories,
    where only what an import could pick up at the top counts."""
    # the bot itself is in site-packages as action.yml installs it; a development checkout on
    # PYTHONPATH (or an editable install) is someone's working tree and counts only at its top
    site = [p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p)
            and (p.startswith((sys.prefix, sys.base_prefix, sys.exec_prefix)) or "-packages" in p)]
    trees = site + [str(e) for e in extra if e and os.path.isdir(e)]
    out: list[str] = []
    for p in sorted(set(os.path.realpath(p) for p in trees)):
        if not any(p.startswith(q + os.sep) for q in out):
            out.append(p)
    # the report's interpreter is started with `-c` (the current directory dropped): beyond the site and
    # standard-library directories it imports from PYTHONPATH only
    extra_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.isdir(p)]
    tops = sorted({os.path.realpath(p) for p in extra_path} - set(out))
    return out, tops


def _stat(path: str) -> tuple | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def snapshot(paths) -> dict[str, tuple]:
    """path -> (size, mtime, ctime, inode, mode) of every file under the trees of ``paths`` (as
    ``code_paths`` returns them, or a list of trees), bytecode left out; for the top-only
    directories, the modules, packages and path files at their top."""
    trees, tops = paths if isinstance(paths, tuple) else (list(paths), [])
    out: dict[str, tuple] = {}
    for top in trees:
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                if not name.endswith((".pyc", ".pyo")) and (st := _stat(os.path.join(root, name))) is not None:
                    out[os.path.join(root, name)] = st
    for top in tops:
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for name in names:
            path = os.path.join(top, name)
            target = os.path.join(path, "__init__.py") if os.path.isdir(path) else path
            if (target != path or name.endswith(IMPORTABLE)) and (st := _stat(target)) is not None:
                out[target] = st
    return out


def changed(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def record_code(extra=()) -> None:
    """Before model code runs: remember the files the report would load."""
    global _baseline, _baseline_paths
    _baseline_paths = code_paths(extra)
    _baseline = snapshot(_baseline_paths)


def code_changes() -> list[str]:
    """The files the report would load that changed since ``record_code`` ([] when nothing ran)."""
    if _baseline is None:
        return []
    return changed(_baseline, snapshot(_baseline_paths))
