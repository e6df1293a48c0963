"""Child processes, one way.

Every child minify-bot starts goes through this module and gets the same treatment: a new session
(its own process group), a time limit after which the whole group is stopped (SIGTERM, a short
grace, SIGKILL), its output routed line by line (a log file, an in-memory tail, ``@@ {json}``
events, a line callback) and one result record, :class:`Result`.

Three ways to start one:

- :func:`run` execs a fresh interpreter or any program (``argv``).
- :func:`fork` runs a Python function in a child forked from this process, which has imported and
  warmed torch once; the child can send JSON messages back over a pipe of its own (``send``) and
  its return value comes back as ``Result.value`` (each line on that pipe a :class:`ChildMessage`).
  Only fork from a process that has not started OpenMP or compile-worker pools, and never after
  CUDA was initialized (checked); a fork first waits for the work this process runs in
  :func:`background` threads.
- :func:`forkserver` starts a fresh interpreter *now* that imports some modules (torch), may warm
  them up, and then runs scripts or modules, each in a new session forked from it
  (:meth:`ForkServer.run`, several at once; each job a :class:`bot.forkserver.Job`). A script runs
  in a process that ran nothing but those imports - what ``python script.py`` would do first
  anyway - so the import is paid once, while the caller does other work.

What a child detaches (a daemon that double-forks out of its group) escapes the group kill; a
process that calls :func:`adopt_orphans` becomes its parent instead of init, and
:func:`end_descendants` ends everything left below it (the Action does both around each stage).

How a child died (signal names, aborts, out of memory) is decided in :mod:`bot.signature`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from bot.forkserver import BOOT as SERVER_BOOT
from bot.forkserver import Job, ServerArgs
from bot.records import Record
from bot.signature import is_oom_output, signal_name

BOT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the directory that holds ``bot``
GRACE_S = 1.0          # SIGTERM -> SIGKILL at the time limit
TAIL_LINES = 40


@dataclass
class Result:
    """How a child process ended."""

    returncode: int | None            # exit code; -N: killed by signal N; None: stopped at the time limit
    seconds: float                    # wall time from start (or hand-over, for a fork server) to exit
    events: list = field(default_factory=list)    # ``@@ {json}`` lines (events=True)
    timed_out: bool = False
    tail: str = ""                    # the last lines of output
    output: str = ""                  # the output, at most ``capture`` characters of its end (capture=N) after
                                      # its first capture // 4 (where a traceback printed before pages
                                      # of compiler warnings stands) when it is longer
    signal: int | None = None         # the signal that killed it (not ours at the time limit)
    signal_name: str | None = None    # "SIGABRT", ...
    oom: bool = False                 # killed by SIGKILL (the kernel's OOM killer) or out-of-memory output
    messages: list = field(default_factory=list)  # what a forked child sent (fork)
    value: Any = None                 # a forked function's return value (JSON), None if it returned none
    error: str | None = None          # could not start it at all

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


# ---------------------------------------------------------------- output routing


class _Sink:
    """Routes a child's output lines: ``@@ {json}`` lines are events (when asked for), the rest go to
    the log file, the tail, the captured output and the line callback."""

    def __init__(self, log, *, events: bool, on_event, on_line, tail_lines: int, capture: int, footer: bool):
        self.log, self.want_events, self.on_event, self.on_line = log, events, on_event, on_line
        self.footer = footer
        self.events: list = []
        self.tail: deque[str] = deque(maxlen=max(1, tail_lines))
        self.capture = capture
        self.captured: deque[str] = deque()
        self.captured_len = 0
        self.head: list[str] = []       # the first lines, up to capture // 4 characters
        self.head_len = 0
        self.dropped = 0                # characters between the head and the captured end
        self._buf = b""

    def feed_bytes(self, chunk: bytes) -> None:
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            self.feed(line.decode("utf-8", "replace") + "\n")

    def close(self) -> None:
        if self._buf:
            self.feed(self._buf.decode("utf-8", "replace") + "\n")
            self._buf = b""

    def feed(self, line: str) -> None:
        if self.want_events and line.startswith("@@ "):
            try:
                ev = json.loads(line[3:])
            except ValueError:
                ev = None
            if isinstance(ev, dict):
                self.events.append(ev)
                if self.on_event:
                    try:
                        self.on_event(ev)
                    except Exception:  # noqa: BLE001 - progress must not kill the run
                        pass
                if ev.get("event") == "query":
                    return
        if self.log is not None:
            self.log.write(line)
        self.tail.append(line)
        if self.capture:
            if not self.dropped and self.head_len + len(line) <= self.capture // 4:
                self.head.append(line)
                self.head_len += len(line)
            else:
                self.captured.append(line)
                self.captured_len += len(line)
            while self.captured_len > self.capture and len(self.captured) > 1:
                gone = self.captured.popleft()
                self.captured_len -= len(gone)
                self.dropped += len(gone)
        if self.on_line:
            self.on_line(line)

    def output(self) -> str:
        """The captured output: all of it, or its head, a line that says how much was left out, and
        its last ``capture`` characters (a compile error's traceback comes first, then thousands of
        lines of g++ diagnostics: the exception line must not be what is lost)."""
        if not self.capture:
            return ""
        head, text = "".join(self.head), "".join(self.captured)[-self.capture:]
        if not self.dropped:
            return head + text
        return f"{head}[... {self.dropped} characters of output left out ...]\n{text}"

    def finish(self, rc, timed_out: bool, t0: float) -> None:
        """Flush a partial last line; the ``[exit ...]`` log line when the log was announced."""
        self.close()
        if self.footer and self.log is not None:
            self.log.write(f"[exit {rc}{' (killed at the time limit)' if timed_out else ''}, "
                           f"{time.monotonic() - t0:.1f} s]\n")


@contextlib.contextmanager
def _routed(log_path: str | None, log_mode: str, announce: str | None, **sink_options):
    """The sink for one child's output, with its log file open (and the ``announce`` line written)."""
    with _open_log(log_path, log_mode) as log:
        if announce is not None and log is not None:
            log.write(announce + "\n")
            log.flush()
        yield _Sink(log if log_path else None, footer=announce is not None, **sink_options)


def _open_log(log_path: str | None, log_mode: str):
    if log_path is None:
        return contextlib.nullcontext()
    d = os.path.dirname(os.path.abspath(log_path))
    os.makedirs(d, exist_ok=True)
    return open(log_path, log_mode, encoding="utf-8", errors="replace")


# ---------------------------------------------------------------- waiting and stopping


def kill_group(pid: int, sig: int = signal.SIGKILL, *, unreaped: bool = True) -> None:
    """Send ``sig`` to the process group ``pid`` leads (the child and everything it started).
    ``unreaped``: ``pid`` is our child and not yet waited for, so when it has no group yet (it was
    forked a moment ago) the signal goes to it alone; never for a reaped pid, which may be reused."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        if unreaped:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    except PermissionError:
        pass


def _pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:
        return None


def _supervise(pid: int, poll: Callable[[], int | None], fds: dict, deadline: float, grace: float):
    """Read ``fds`` ({fd: feed_bytes}) until the child ``pid`` exits or ``deadline`` passes; then
    stop its group (SIGTERM, ``grace``, SIGKILL at the time limit; SIGKILL for stragglers after a
    normal exit) and read what is left. Returns (returncode, timed_out); returncode -N: signal N."""
    open_fds = dict(fds)
    pidfd = _pidfd(pid)
    rc = None
    timed_out = False
    try:
        while True:
            rc = poll()
            if rc is not None:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            watch = list(open_fds) + ([pidfd] if pidfd is not None else [])
            if not watch:
                time.sleep(min(remaining, 0.02))
                continue
            ready, _, _ = select.select(watch, [], [], min(remaining, 0.25 if pidfd is not None else 0.02))
            for fd in ready:
                if fd == pidfd:
                    continue
                chunk = os.read(fd, 65536)
                if chunk:
                    open_fds[fd](chunk)
                else:
                    del open_fds[fd]
        if timed_out:
            kill_group(pid, signal.SIGTERM)
            end = time.monotonic() + grace
            while (rc := poll()) is None and time.monotonic() < end:
                time.sleep(0.02)
            kill_group(pid, signal.SIGKILL)
            while (rc := poll()) is None:
                time.sleep(0.01)
        else:
            kill_group(pid, signal.SIGKILL, unreaped=False)  # stragglers it started (compile workers, pools)
        # what is still in the pipes; a writer that left the group cannot hold us for long
        end = time.monotonic() + 2.0
        while open_fds and time.monotonic() < end:
            ready, _, _ = select.select(list(open_fds), [], [], max(0.0, end - time.monotonic()))
            if not ready:
                break
            for fd in ready:
                chunk = os.read(fd, 65536)
                if chunk:
                    open_fds[fd](chunk)
                else:
                    del open_fds[fd]
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return rc, timed_out


def _result(rc, timed_out, t0, sink: _Sink, **extra) -> Result:
    sig = -rc if rc is not None and rc < 0 and not timed_out else None
    tail = "".join(sink.tail)
    oom = (sig == signal.SIGKILL) or (rc is not None and rc > 0 and is_oom_output(tail))
    return Result(None if timed_out else rc, round(time.monotonic() - t0, 3), sink.events, timed_out, tail,
                  sink.output(), sig, signal_name(sig) if sig else None, oom, **extra)


# ---------------------------------------------------------------- what outlives a child

PR_SET_CHILD_SUBREAPER = 36   # linux/prctl.h


def adopt_orphans() -> bool:
    """Make this process the subreaper of everything it starts (Linux): a descendant that leaves its
    process group and double-forks, the way a daemon detaches, is re-parented here instead of to
    init, so :func:`end_descendants` still finds it. Killing a child's group misses such a process,
    and it would otherwise live on into the job's later steps. False where the kernel has no such
    call."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _process_table() -> dict[int, tuple[int, str]]:
    """{pid: (parent pid, state letter)} of every process /proc shows now."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2:].split()   # the command name may hold spaces and parentheses
        if len(rest) >= 2:
            table[int(name)] = (int(rest[1]), rest[0].decode("ascii", "replace"))
    return table


def descendants(root: int | None = None) -> list[int]:
    """The pids below ``root`` (this process) now, parents before their children."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for pid, (ppid, _state) in _process_table().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def end_descendants(rounds: int = 50) -> int:
    """SIGKILL every process below this one and reap those that end up as our children, until none is
    left (a process may fork while its parent is being killed). For the end of a stage that ran
    model code, after its own process has exited: whatever is left is something it left behind.
    Returns how many processes were killed."""
    if not os.path.isdir("/proc"):
        return 0
    killed: set[int] = set()
    for _ in range(rounds):
        table = _process_table()
        below = descendants()
        live = [p for p in below if table.get(p, (0, "Z"))[1] not in ("Z", "X")]
        for pid in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(0.02 if live else 0)
        for pid in below:   # zombies re-parented here: ours to reap
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        if not below:
            break
    return len(killed)


# ---------------------------------------------------------------- exec


def run(argv: list[str], *, timeout: float, cwd: str | None = None, env: dict | None = None,
        log_path: str | None = None, log_mode: str = "a", announce: str | None = None,
        events: bool = False, on_event: Callable[[dict], None] | None = None,
        on_line: Callable[[str], None] | None = None, tail_lines: int = TAIL_LINES, capture: int = 0,
        grace: float = GRACE_S, user: tuple[int, int] | None = None) -> Result:
    """Exec ``argv`` in a new session with stdin from /dev/null and stdout+stderr routed as the
    module docstring says; stop its whole group at ``timeout`` seconds. ``announce``: a first log
    line (and an ``[exit ...]`` line at the end). ``user``: (uid, gid) it runs as, with no
    supplementary groups (a root parent starting code it does not trust). Never raises for the
    child's sake: a program that cannot start gives ``Result.error``."""
    t0 = time.monotonic()
    as_user = dict(user=user[0], group=user[1], extra_groups=[]) if user is not None else {}
    with _routed(log_path, log_mode, announce, events=events, on_event=on_event, on_line=on_line,
                 tail_lines=tail_lines, capture=capture) as sink:
        try:
            p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, start_new_session=True, **as_user)
        except OSError as exc:
            return Result(None, 0.0, error=f"cannot start {argv[0]!r}: {exc.strerror or exc}")
        return _follow(p, sink, t0, timeout, grace)


def _follow(p: subprocess.Popen, sink: _Sink, t0: float, timeout: float, grace: float) -> Result:
    try:
        fd = p.stdout.fileno()
        rc, timed_out = _supervise(p.pid, p.poll, {fd: sink.feed_bytes}, time.monotonic() + max(0.1, timeout),
                                   grace)
    except KeyboardInterrupt:
        # Ctrl-C reaches only this process (the child has a session of its own): the child is
        # interrupted too and given the grace period to keep what it finished, then killed
        kill_group(p.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=grace)
        raise
    finally:
        p.stdout.close()
        if p.returncode is None:
            kill_group(p.pid)
            p.wait()
    sink.finish(rc, timed_out, t0)
    return _result(rc, timed_out, t0, sink)


# ---------------------------------------------------------------- fork server

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkserver.py")   # its program
# A directory of shared fork servers: a fork server asked for there is connected to, or started there
# to outlive this process, so that the commands of one job (a test session, consecutive sweeps) import
# torch once per interpreter, preload, directory and environment, not once per command. Only for
# processes on one side of the trust boundary: a job that runs model code, never one that holds a token.
SHARED_ENV = "MINIFY_BOT_FORKSERVERS"
SHARED_IDLE_S = 20.0   # a shared server ends after this long without a caller (each holds torch: ~340 MB)
# variables that differ between callers of one server and that nothing reads at import
SHARED_IGNORED = frozenset({"PYTEST_CURRENT_TEST", SHARED_ENV})


class Closing:
    """``with thing:`` closes it at the end (``close()``)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class ForkServer(Closing):
    """A fresh interpreter that imports ``preload`` (torch) once and then runs scripts, each in a
    process of its own forked from it (a new session; several at a time). ``preload`` entries, in
    order: ``module`` imports it; ``module:function`` also calls that function once (if it
    exists), for facts of the machine that every script would compute the same way, or a warm-up
    (errors are ignored: the script computes it); ``path.py:function`` loads that file without
    making it importable and calls the function; a trailing ``&`` calls it in a thread while the
    next entries load (the server waits for it before the next call without ``&`` and before it
    forks anything).

    Each script runs as ``python script args...`` would, in an interpreter that ran nothing but
    those imports - what the script would do first anyway - so the import is paid once, while
    the caller does other work, instead of once per run. Nothing of the caller's state is in it.
    The server's own output (an import that failed) goes to a file that :meth:`run` quotes when
    the server is gone. If this process dies, the server reads end-of-file and exits.

    Under :data:`SHARED_ENV` the server is a shared one instead (:meth:`_shared`): closing this
    object ends only this caller's connection, and :attr:`pid` reads the server's from its file."""

    def __init__(self, *, preload: tuple[str, ...] = ("torch",), env: dict | None = None,
                 python: str | None = None, cwd: str | None = None):
        import socket
        import tempfile

        self._lock = threading.Lock()
        self.error: str | None = None
        self.proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        # a shared server's jobs are sent this caller's environment (the server may have been started by another caller)
        self._env = dict(os.environ if env is None else env)
        self._base: str | None = None   # a shared server's files, without their suffix (None: a server of our own)
        self._log = None
        shared = os.environ.get(SHARED_ENV, "")
        if shared and os.path.isdir(shared):
            try:
                self._sock = self._shared(shared, list(preload), env, python, cwd)
                return
            except OSError:   # a path too long for a socket, a directory not ours to write: one of our own
                self._sock, self._base = None, None
        self._log = tempfile.TemporaryFile()
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = self._start(ServerArgs(list(preload), theirs.fileno()), python, env, cwd, self._log)
        except OSError as exc:
            self.error = f"cannot start {python or sys.executable!r}: {exc.strerror or exc}"
        finally:
            theirs.close()

    @staticmethod
    def _start(args: ServerArgs, python: str | None, env: dict | None, cwd: str | None, log) -> subprocess.Popen:
        return subprocess.Popen([python or sys.executable, "-c", SERVER_BOOT, SERVER, *args.to_argv()], env=env,
                                cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                pass_fds=(args.fd,), start_new_session=True)

    def _shared(self, pool: str, preload: list, env: dict | None, python: str | None, cwd: str | None):
        """Connect to the shared server for this interpreter, preload, directory and environment in
        ``pool``, starting it first when there is none (or the one there is gone)."""
        import fcntl
        import hashlib
        import socket

        python = os.path.abspath(python or sys.executable)
        seen = sorted((k, v) for k, v in (os.environ if env is None else env).items() if k not in SHARED_IGNORED)
        key = hashlib.sha256(json.dumps([python, preload, os.path.abspath(cwd or os.getcwd()), seen]).encode())
        base = self._base = os.path.join(pool, key.hexdigest()[:24])
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with open(base + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                sock.connect(base + ".sock")
                return sock
            except OSError:   # none yet, or one that is gone: start it (its path is taken over)
                with contextlib.suppress(OSError):
                    os.unlink(base + ".sock")
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                listener.bind(base + ".sock")
                listener.listen(64)
                with open(base + ".log", "ab") as log:
                    server = self._start(ServerArgs(preload, listener.fileno(), SHARED_IDLE_S, base + ".sock"),
                                         python, env, cwd, log)
                with open(base + ".pid", "w") as fh:
                    fh.write(f"{server.pid}\n")
            finally:
                listener.close()
            sock.connect(base + ".sock")
            return sock

    @property
    def pid(self) -> int | None:
        """The server's process id (a shared server's from its file), None when it never started."""
        if self.proc is not None:
            return self.proc.pid
        if self._base is None:
            return None
        try:
            with open(self._base + ".pid") as fh:
                return int(fh.read())
        except (OSError, ValueError):
            return None

    def _said(self) -> str:
        """The end of the server's own output (a shared server's is in its file)."""
        try:
            if self._base is not None:
                with open(self._base + ".log", "rb") as fh:
                    said = fh.read()
            else:
                self._log.seek(0)
                said = self._log.read()
        except (OSError, ValueError):
            return ""
        return said[-2000:].decode(errors="replace").strip()

    def _gone(self) -> str:
        said = self._said()
        rc = None
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                rc = self.proc.wait(timeout=2)
        return f"the fork server exited ({rc}) before it ran the script" + (f": {said}" if said else "")

    def run(self, script: str | None, args: list[str] | tuple = (), *, timeout: float, cwd: str | None = None,
            module: str | None = None, path: list[str] | tuple = (), env: dict | None = None,
            log_path: str | None = None, log_mode: str = "a", announce: str | None = None, events: bool = False,
            on_event=None, on_line=None, tail_lines: int = TAIL_LINES, capture: int = 0,
            grace: float = GRACE_S, startup: list[str] | tuple = (), exit_hooks: bool = False) -> Result:
        """Run ``script`` (or, given ``module``, ``python -m module`` with ``path`` first on its
        ``sys.path``) in a process forked from the server, in ``cwd``; ``env`` replaces the
        server's environment in it (what the imports read stays as the server read it);
        ``startup`` and ``exit_hooks`` as :class:`bot.forkserver.Job` says. The time
        limit counts from now (an import still under way counts). ``Result.error`` when the
        server is gone."""
        import socket

        t0 = time.monotonic()
        if self._sock is None or self.error:
            return Result(None, 0.0, error=self.error or "the fork server is closed")
        env = self._env if env is None and self._base is not None else env
        if cwd:
            os.makedirs(cwd, exist_ok=True)
        job = Job(script=None if module else os.path.abspath(str(script)), module=module,
                  path=[os.path.abspath(p) for p in path], env=env, args=[str(a) for a in args],
                  cwd=os.path.abspath(cwd) if cwd else None, startup=list(startup),
                  exit_hooks=exit_hooks).encode()
        out_r, out_w = os.pipe()
        st_r, st_w = os.pipe()
        try:
            with self._lock:
                socket.send_fds(self._sock, [job], [out_w, st_w])
        except OSError:
            os.close(out_r)
            os.close(st_r)
            return Result(None, 0.0, error=self._gone())
        finally:
            os.close(out_w)
            os.close(st_w)
        deadline = t0 + max(0.1, timeout)
        with _routed(log_path, log_mode, announce, events=events, on_event=on_event, on_line=on_line,
                     tail_lines=tail_lines, capture=capture) as sink:
            try:
                lines = _Lines(st_r)
                started = lines.wait(deadline)  # "<group> <pid>" once the server forked it
                if started is None and lines.eof:  # the server died before it forked the script
                    return Result(None, 0.0, error=self._gone())
                if started is None:  # the time limit passed while the server was still importing
                    self.close()
                    sink.finish(None, True, t0)
                    return _result(None, True, t0, sink)
                group = int(started.split()[0])

                def poll() -> int | None:
                    line = lines.next_now()
                    if line is not None:
                        return int(line)
                    return -signal.SIGKILL if lines.eof else None  # its waiter was killed with the group

                rc, timed_out = _supervise(group, poll, {out_r: sink.feed_bytes}, deadline, grace)
            finally:
                os.close(out_r)
                os.close(st_r)
            sink.finish(rc, timed_out, t0)
            return _result(rc, timed_out, t0, sink)

    def close(self) -> None:
        """Stop the server (scripts it started run on to their end or their time limit)."""
        with self._lock:
            try:
                if self._sock is not None:
                    self._sock.close()
            except OSError:
                pass
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc.pid)
            self.proc.wait()
        self.error = self.error or "the fork server is closed"
        if self._log is not None:
            self._log.close()



class _Lines:
    """Lines from a pipe, read without blocking past a deadline."""

    def __init__(self, fd: int):
        self.fd, self.buf, self.eof = fd, b"", False

    def next_now(self, wait: float = 0.0) -> str | None:
        while b"\n" not in self.buf and not self.eof:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, wait))
            if not ready:
                return None
            chunk = os.read(self.fd, 4096)
            self.buf += chunk
            self.eof = not chunk
        if b"\n" not in self.buf:
            return None
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def wait(self, deadline: float) -> str | None:
        while True:
            line = self.next_now(min(0.25, max(0.0, deadline - time.monotonic())))
            if line is not None or self.eof or time.monotonic() >= deadline:
                return line


def forkserver(*, preload: tuple[str, ...] = ("torch",), env: dict | None = None,
               python: str | None = None, cwd: str | None = None) -> ForkServer:
    """Start a fresh interpreter now (``python``, by default this one; in ``cwd``) that imports
    ``preload`` and then runs scripts in forks of itself."""
    return ForkServer(preload=preload, env=env, python=python, cwd=cwd)


def bot_env(env: dict | None = None) -> dict:
    """``env`` (default: this process's) with :data:`BOT_ROOT` first on ``PYTHONPATH``: a fresh
    interpreter started with it imports this minify-bot, installed or not."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [BOT_ROOT, env.get("PYTHONPATH")]))
    return env


# ---------------------------------------------------------------- background work


class Background:
    """Work running in a thread of this process (see :func:`background`)."""

    def __init__(self, fn: Callable[[], Any], name: str):
        self._value: Any = None
        self._exc: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)

    def _run(self, fn) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the result
            self._exc = exc
        finally:
            with _PENDING_LOCK:
                if self in _PENDING:
                    _PENDING.remove(self)

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        """Wait for it; its return value, or the exception it raised."""
        self.wait()
        if self._exc is not None:
            raise self._exc
        return self._value


_PENDING: list[Background] = []
_PENDING_LOCK = threading.Lock()


def background(fn: Callable[[], Any], *, name: str) -> Background:
    """Run ``fn()`` in a thread, now. :func:`fork` first waits for all such work: a child forked
    while another thread holds a lock (an import, a log file, a pipe) could wait on it forever."""
    b = Background(fn, name)
    with _PENDING_LOCK:
        _PENDING.append(b)
    b._thread.start()
    return b


def wait_background() -> None:
    """Wait for every :func:`background` work of this process."""
    while True:
        with _PENDING_LOCK:
            pending = list(_PENDING)
        if not pending:
            return
        for b in pending:
            b.wait()


# ---------------------------------------------------------------- fork


@dataclass
class ChildMessage(Record):
    """One line on a forked child's message pipe (:func:`fork`): what ``fn`` sent (``send``), or,
    ``returned``, the value ``fn`` returned."""

    body: Any = None
    returned: bool = False

    def encode(self) -> bytes:
        """One line; ``body`` as ``json.dumps(default=str)`` writes it (what cannot be JSON, as text)."""
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        return (json.dumps(doc, default=str) + "\n").encode()


class _Messages:
    """The parent's end of a forked child's message pipe: one :class:`ChildMessage` a line; a
    line that is not one is skipped."""

    def __init__(self, on_message: Callable[[Any], None] | None):
        self.on_message = on_message
        self.sent: list = []
        self.value: Any = None
        self._buf = b""

    def feed_bytes(self, chunk: bytes) -> None:
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            try:
                msg = ChildMessage.from_json(json.loads(line))
            except ValueError:  # not JSON, or not a ChildMessage (RecordError)
                continue
            if msg.returned:
                self.value = msg.body
                continue
            self.sent.append(msg.body)
            if self.on_message:
                try:
                    self.on_message(msg.body)
                except Exception:  # noqa: BLE001 - a consumer's bug must not kill the run
                    pass


def fork(fn: Callable[..., Any], *, timeout: float, cwd: str | None = None, log_path: str | None = None,
         log_mode: str = "a", announce: str | None = None, events: bool = False, on_event=None, on_line=None,
         tail_lines: int = TAIL_LINES, capture: int = 0, memory_limit_mb: int | None = None,
         on_message: Callable[[Any], None] | None = None, grace: float = GRACE_S,
         guard: Callable[[], None] | None = None, child_setup: Callable[[], None] | None = None) -> Result:
    """Run ``fn(send)`` in a child forked from this process, in a new session and ``cwd``.

    ``send(obj)`` writes one JSON message to the parent (``Result.messages``, ``on_message``);
    ``fn``'s return value comes back as ``Result.value`` (JSON; an ``int`` is also the exit code).
    Exit code: 0 when ``fn`` returns, ``fn``'s int, 70 for an exception (traceback in the output),
    ``-signal`` when killed. ``memory_limit_mb``: an address-space limit in the child.
    ``guard()`` runs here first and raises to refuse the fork; ``child_setup()`` runs first in the
    child (bot.torch_adapter.device.fork_hooks gives both for a process that imported torch)."""
    wait_background()
    if guard is not None:
        guard()
    t0 = time.monotonic()
    if cwd:
        os.makedirs(cwd, exist_ok=True)
    with _routed(log_path, log_mode, announce, events=events, on_event=on_event, on_line=on_line,
                 tail_lines=tail_lines, capture=capture) as sink:
        out_r, out_w = os.pipe()
        msg_r, msg_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # --- child: never returns
            _child(fn, out_r, out_w, msg_r, msg_w, cwd, memory_limit_mb, child_setup)
        os.close(out_w)
        os.close(msg_w)
        messages = _Messages(on_message)
        status: dict = {}

        def poll() -> int | None:
            if "rc" not in status:
                wpid, st = os.waitpid(pid, os.WNOHANG)
                if wpid:
                    status["rc"] = os.waitstatus_to_exitcode(st)
            return status.get("rc")

        try:
            rc, timed_out = _supervise(pid, poll, {out_r: sink.feed_bytes, msg_r: messages.feed_bytes},
                                       time.monotonic() + max(0.1, timeout), grace)
        finally:
            os.close(out_r)
            os.close(msg_r)
            if "rc" not in status:
                kill_group(pid)
                os.waitpid(pid, 0)
        sink.finish(rc, timed_out, t0)
    return _result(rc, timed_out, t0, sink, messages=messages.sent, value=messages.value)


def _child(fn, out_r, out_w, msg_r, msg_w, cwd, memory_limit_mb, child_setup) -> None:  # pragma: no cover
    code = 70
    try:
        os.setsid()
        os.close(out_r)
        os.close(msg_r)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.close(out_w)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")
        import faulthandler

        if faulthandler.is_enabled():  # its tracebacks belong in this child's output
            faulthandler.enable(file=sys.stderr)
        if cwd:
            os.chdir(cwd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if memory_limit_mb:
            import resource

            lim = int(memory_limit_mb) * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        if child_setup is not None:
            child_setup()

        def write(msg: ChildMessage) -> None:
            data = msg.encode()
            while data:
                data = data[os.write(msg_w, data):]

        value = fn(lambda obj: write(ChildMessage(obj)))
        if value is not None:
            write(ChildMessage(value, returned=True))
        code = value if isinstance(value, int) and not isinstance(value, bool) else 0
    except BaseException:  # noqa: BLE001
        try:
            import traceback

            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF if code >= 0 else 70)
