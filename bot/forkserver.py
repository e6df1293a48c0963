"""The fork server's own program: a fresh interpreter that imports what every job needs first
(torch) once, then runs each job (a script or a module, as ``python script args`` / ``python -m
module args`` would) in a process forked from it. :class:`bot.proc.ForkServer` starts it and
talks to it; see there for the protocol.

It imports nothing of minify-bot: it runs in the interpreter (and venv) of the torch being tested,
where the project need not be importable, and it is started as ``python -c`` running this file
(:data:`BOOT`), so that the scripts it runs see the path a fresh ``python`` would, not this
directory.

Its arguments are a :class:`ServerArgs` (the preload list, JSON, and the file descriptor of its
socket). Each message on the socket is a :class:`Job` (JSON) with two descriptors: where the
job's output goes and where its waiter writes "<waiter pid> <job pid>" and then the job's exit
code. Both records are defined here, once, and :mod:`bot.proc` writes them with these classes.

A *shared* server (:attr:`ServerArgs.idle` set) was given a listening socket instead, bound to a
path in a directory of shared servers (:data:`bot.proc.SHARED_ENV`): it serves every process that
connects, each connection as one caller, and ends once it has had no caller for ``idle`` seconds,
or when its path no longer leads to it (removed, or taken by a server started in its place).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields

BOOT = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__main__')"


def _strings(value, what: str) -> list:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what}: expected a list of strings")
    return value


@dataclass
class Job:
    """One job the fork server is sent: a script (``python script args``) or, given ``module``,
    ``python -m module args`` with ``path`` first on its ``sys.path``; ``env`` replaces the
    server's environment (None: keep it); ``cwd`` the directory it runs in (None: the server's).
    ``startup``: :func:`preload` entries the job runs once its environment, directory and path are
    its own, before the script (what a fresh interpreter's site customization would have done
    with that environment); ``exit_hooks``: at the end, wait for the script's non-daemon threads
    and run its ``atexit`` handlers, as a fresh interpreter's exit does."""

    script: str | None = None
    module: str | None = None
    path: list = field(default_factory=list)
    env: dict | None = None
    args: list = field(default_factory=list)
    cwd: str | None = None
    startup: list = field(default_factory=list)
    exit_hooks: bool = False

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, msg: bytes) -> Job:
        """The job of a message; ValueError for one that is not a job (unknown keys are dropped,
        missing ones take their defaults, as :class:`bot.records.Record` reads)."""
        doc = json.loads(msg)
        if not isinstance(doc, dict):
            raise ValueError("a fork server job: expected an object")
        job = cls(**{f.name: doc[f.name] for f in fields(cls) if f.name in doc})
        for name in ("script", "module", "cwd"):
            if not isinstance(getattr(job, name), (str, type(None))):
                raise ValueError(f"a fork server job: {name} is not a string")
        _strings(job.path, "a fork server job's path")
        _strings(job.args, "a fork server job's args")
        _strings(job.startup, "a fork server job's startup")
        if not isinstance(job.exit_hooks, bool):
            raise ValueError("a fork server job: exit_hooks is not a boolean")
        if job.env is not None and not (isinstance(job.env, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in job.env.items())):
            raise ValueError("a fork server job: env is not a mapping of strings")
        return job


@dataclass
class ServerArgs:
    """The server's command line after its program: the preload list (JSON) and its socket's fd;
    for a shared server, the seconds it stays without a caller and the path its socket is bound to."""

    preload: list
    fd: int
    idle: float = 0.0
    path: str = ""

    def to_argv(self) -> list[str]:
        return [json.dumps(list(self.preload)), str(self.fd)] + ([str(self.idle), self.path] if self.idle else [])

    @classmethod
    def from_argv(cls, argv: list[str]) -> ServerArgs:
        shared = (float(argv[2]), argv[3]) if len(argv) >= 4 else ()
        return cls(_strings(json.loads(argv[0]), "the preload list"), int(argv[1]), *shared)


def _call(f):
    try:  # a fact the script would compute itself, or a warm-up: if it fails here, it will there
        f()
    except Exception:  # noqa: BLE001 - the script computes it again, and fails there if it must
        pass


def preload(entries: list[str]) -> None:
    """``module``, ``module:function``, ``path.py:function``; a trailing ``&`` calls the function in
    a thread while the next entries load (joined before the next plain call and at the end)."""
    held, threads = {}, []

    def join():
        for t in threads:
            t.join()
        del threads[:]

    for entry in entries:
        background = entry.endswith("&")
        entry = entry.rstrip("&")
        mod, fn = entry.rsplit(":", 1) if re.search(r":[A-Za-z_][A-Za-z0-9_]*$", entry) else (entry, "")
        if mod.endswith(".py"):  # a file of its own, not put among the modules a script could import
            if mod not in held:
                spec = importlib.util.spec_from_file_location("_preload%d" % len(held), mod)
                held[mod] = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(held[mod])
            obj = held[mod]
        else:
            __import__(mod)
            obj = sys.modules[mod]
        f = getattr(obj, fn, None) if fn else None
        if callable(f) and background:
            threads.append(threading.Thread(target=_call, args=(f,), daemon=True))
            threads[-1].start()
        elif callable(f):
            join()
            _call(f)
    join()


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


EXIT_STARTUP_FAILED = 121   # a job's start-up entries could not load: the script never ran


def _start_up(entries: list[str]) -> None:
    """The job's :attr:`Job.startup`; one that cannot load ends the job with
    :data:`EXIT_STARTUP_FAILED` before the script runs (its caller runs it elsewhere)."""
    try:
        preload(entries)
    except BaseException:  # noqa: BLE001 - said, and told apart from the script's own exit
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(EXIT_STARTUP_FAILED)


def _exit_as_python() -> None:
    """What a fresh interpreter does at its end before it exits: wait for non-daemon threads, then
    run the ``atexit`` handlers (which print their own errors)."""
    import atexit
    try:
        threading._shutdown()
    except BaseException:  # noqa: BLE001 - an interrupted wait still runs the handlers, as Python does
        pass
    atexit._run_exitfuncs()


def forget_shared_locks() -> None:
    """In a forked child: forget the locks a fresh interpreter would make for itself but a fork
    shares with its parent and every other child, multiprocessing semaphores. tqdm keeps one for all
    its progress bars (torch's fx interpreter makes a bar for every graph it runs), made by the
    parent's warm-up compile: a child killed, or ended by ``os._exit``, while it held it left every
    later child waiting forever. Forgotten, each child makes its own on first use."""
    std = sys.modules.get("tqdm.std")
    if std is None:
        return
    for owner, name in ((getattr(std, "TqdmDefaultWriteLock", None), "mp_lock"), (getattr(std, "tqdm", None), "_lock")):
        if owner is not None and name in vars(owner):
            try:
                delattr(owner, name)
            except (AttributeError, TypeError):  # a tqdm that keeps it otherwise: left as it is
                pass


def make_own_thread_pool() -> None:
    """In a forked child of a process that imported torch: let torch replace the intra-op thread pool
    it inherited (caffe2's pthreadpool, which ``torch.set_num_threads`` sizes) now, on this one thread.

    The inherited pool has no threads; torch replaces it at its first use in the child, unguarded
    against a second thread. Once the parent has set a thread count (the warm-up does), every thread
    torch starts sets it again, and the autograd engine starts its device threads all at once at a
    child's first backward (eight on a CUDA build of torch 2.15 without a GPU): one could find the
    pool gone while another replaced it, and abort the process ("Invalid thread pool!"). On torch
    2.15, 10 of 45 forked fuzz checks died so; none once each child made its pool first."""
    torch = sys.modules.get("torch")
    get, put = getattr(torch, "get_num_threads", None), getattr(torch, "set_num_threads", None)
    if callable(get) and callable(put):
        put(get())


def forget_inherited_state() -> None:
    """What every child forked from a process that imported torch does first: its own locks
    (:func:`forget_shared_locks`) and its own thread pool (:func:`make_own_thread_pool`)."""
    forget_shared_locks()
    make_own_thread_pool()


def run_job(job: Job, out_w: int) -> None:
    """In the job's own process: its output to ``out_w``, a fresh script's signal dispositions,
    its environment and directory, its own locks and thread pool; then the script or module; exits with its code."""
    forget_inherited_state()
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    os.close(out_w)
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    if job.env is not None:
        os.environ.clear()
        os.environ.update(job.env)
    if job.cwd:
        os.chdir(job.cwd)
    code = 0
    try:
        import runpy
        if job.module:  # python -m module args, with job.path first on sys.path
            sys.argv = [job.module, *job.args]
            sys.path[0:1] = [*job.path, os.getcwd()]
            _start_up(job.startup)
            runpy.run_module(job.module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [job.script, *job.args]
            sys.path[0] = os.path.dirname(job.script)
            _start_up(job.startup)
            runpy.run_path(job.script, run_name="__main__")
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException:  # noqa: BLE001 - as a fresh interpreter would: the traceback, exit 1
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        if job.exit_hooks:
            _exit_as_python()
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except BaseException:  # noqa: BLE001 - a closed stream at exit is not the job's failure
                pass
    os._exit(code & 0xFF)


def _waiter(socks: list, job: Job, fds: list[int]) -> None:
    """The job's waiter (a new session): forks the job, reports its pid and then its exit code."""
    for sock in socks:   # the server's: its callers' connections are nothing of the job's
        sock.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    out_w, st_w = fds
    pid = os.fork()
    if pid == 0:
        os.close(st_w)
        run_job(job, out_w)
    os.close(out_w)
    os.write(st_w, f"{os.getpid()} {pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    os.write(st_w, f"{os.waitstatus_to_exitcode(status)}\n".encode())
    os._exit(0)


def _quiet_stdin() -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(0, closefd=False)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the per-job waiters reap themselves


def _start(conn: socket.socket, socks: list) -> bool:
    """Read one message of ``conn`` and start its job; False at the caller's end of file."""
    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
    if not msg:
        return False
    if len(fds) != 2:
        for fd in fds:
            os.close(fd)
        return True
    try:
        job = Job.decode(msg)
    except ValueError:   # not a job: a bug of bot.proc's; that caller reads end of file and quotes why
        for fd in fds:
            os.close(fd)
        raise
    if os.fork() == 0:
        _waiter(socks, job, fds)
    for fd in fds:
        os.close(fd)
    return True


def serve(sock: socket.socket) -> None:
    """One caller, on a socket pair: its jobs until its end of file."""
    _quiet_stdin()
    while _start(sock, [sock]):
        pass
    os._exit(0)


def _still_mine(path: str, ino: int) -> bool:
    try:
        return os.stat(path).st_ino == ino
    except OSError:
        return False


def serve_shared(listener: socket.socket, idle: float, path: str) -> None:
    """Every caller that connects to ``listener``, until none has been connected for ``idle`` seconds
    or ``path`` no longer leads to this server's socket."""
    _quiet_stdin()
    ino = os.stat(path).st_ino
    conns: list[socket.socket] = []
    last = time.monotonic()
    while True:
        ready, _, _ = select.select([listener, *conns], [], [], min(2.0, idle))
        if not conns and time.monotonic() - last > idle or not _still_mine(path, ino):
            os._exit(0)
        for s in ready:
            if s is listener:
                conns.append(listener.accept()[0])
                continue
            try:
                going = _start(s, [listener, *conns])
            except (OSError, ValueError):   # said in the server's file; that caller reads end of file
                import traceback
                traceback.print_exc()
                going = False
            if not going:
                conns.remove(s)
                s.close()
                last = time.monotonic()


def main(argv: list[str]) -> None:
    args = ServerArgs.from_argv(argv[1:])
    sock = socket.socket(fileno=args.fd)
    preload(args.preload)
    if args.idle:
        serve_shared(sock, args.idle, args.path)
    serve(sock)


if __name__ == "__main__":
    main(sys.argv)
