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

import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass

from bot import proc
from bot.errors import UsageError
from bot.records import CheckError, CheckRow, Spec
from bot.suites import warm
from bot.suites.classify import NEVER_RAN, Patterns, classify
from bot.suites.source import ListRequest, Model, Reproduce, Source
from bot.suites.yaml_entries import load_entries, valid_name
from bot.torch_adapter.hook import HookState, config_env, read_state

HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hook")


def settings_env(settings) -> dict:
    return {
        "MINIFY_BOT_BACKEND": settings.backend,
        "MINIFY_BOT_MODE": settings.mode,
        "MINIFY_BOT_DTYPE": settings.dtype,
        "MINIFY_BOT_DEVICE": settings.device,
        "MINIFY_BOT_DYNAMIC": "1" if settings.dynamic else "0",
        **config_env(settings.config),
    }


def hook_env(state_path: str, *, force_backend: str | None = None, launcher_dir: str | None = None,
             base: dict | None = None) -> dict:
    """Environment that loads the hook in a child: PYTHONPATH gets the hook directory (and this
    package, which the hook imports) in front of what the caller had."""
    base = os.environ if base is None else base
    path = [HOOK_DIR, proc.BOT_ROOT] + [p for p in (base.get("PYTHONPATH") or "").split(os.pathsep) if p]
    env = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(path)), "MINIFY_BOT_HOOK_STATE": state_path}
    if force_backend:
        env["MINIFY_BOT_FORCE_BACKEND"] = force_backend
    if launcher_dir:
        env["MINIFY_BOT_LAUNCHER_DIR"] = launcher_dir
    return env


def capture_env(level: int, debug_dir: str) -> dict:
    """Environment of a program's capture run (minify's, or the check's rerun of a failure):
    torch's repro-after settings and the AOTAutograd cache off (bot.torch_adapter.repro.CAPTURE_CACHE_ENV:
    its hit would skip the repro wrapper; the variable wins over a program or harness that turns
    the cache on in code). The FX graph cache stays as the program has it: a rerun reuses what the
    first run compiled."""
    from bot.torch_adapter.repro import CAPTURE_CACHE_ENV

    return {"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": str(level),
            "TORCH_COMPILE_DEBUG_DIR": debug_dir, **CAPTURE_CACHE_ENV}


@dataclass
class Ran:
    returncode: int | None   # negative: killed by that signal
    timed_out: bool
    output: str              # the last 200 kB of stdout+stderr
    seconds: float
    hook: HookState          # what the environment hook saw (read_state)
    error: str | None = None  # could not start
    warm: bool = False       # forked from a warm interpreter (bot.suites.warm), not a fresh one

    def note_in(self, row: CheckRow) -> None:
        """What the hook counted and kept, what the program compiled (its graphs' device, dtype
        and mode: a settings default never contradicts what the program did) and the numerics
        flags it set, and the run's time, into the run's row."""
        row.compiled_graphs = self.hook.graphs
        row.compile_frames = self.hook.frames
        row.duration_s = self.seconds
        row.program_s = self.seconds
        row.launchers = list(self.hook.launchers)
        for k, v in self.hook.configuration().items():
            setattr(row, k, v)
        row.numerics = dict(self.hook.numerics) or None
        row.compile_options = dict(self.hook.options) or None


def execute(argv: list[str], *, env_extra: dict, cwd: str | None, timeout: float, log_path: str,
            force_backend: str | None = None, launcher_dir: str | None = None) -> Ran:
    """Run ``argv`` with the hook loaded; output to ``log_path``; kill the group at the timeout. A
    ``python script.py`` command that compiled once runs warm after (:mod:`bot.suites.warm`)."""
    fd, state = tempfile.mkstemp(prefix="minify-hook-", suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ)
    env.update(interpreter_env(env))
    env.update(env_extra)
    env.update(hook_env(state, force_backend=force_backend, launcher_dir=launcher_dir, base=env))
    try:
        res = warm.run(argv, cwd=cwd, env=env, timeout=timeout, log_path=log_path, log_mode="w", capture=200_000)
        hot = res is not None
        if not hot:  # no warm interpreter for it (bot.suites.warm): a fresh process
            res = proc.run(argv, cwd=cwd, env=env, timeout=timeout, log_path=log_path, log_mode="w", capture=200_000)
        if res.error:
            return Ran(None, False, "", 0.0, read_state(state), res.error)
        seen = read_state(state)
        if not hot and seen.frames:  # it compiled: its next runs fork from an interpreter started now
            warm.prepare(argv, env=env, cwd=cwd)
        return Ran(res.returncode, res.timed_out, res.output, res.seconds, seen, warm=hot)
    finally:
        os.remove(state)


def interpreter_env(base: dict) -> dict:
    """``python`` in a command is minify-bot's own interpreter when no environment is active: the
    bot's virtual environment's ``bin`` goes first on the program's PATH, as activating it would
    (a ``python bench.py`` from a venv that was never activated would otherwise run the system's
    Python, without torch). An active venv or conda environment (``VIRTUAL_ENV``, ``CONDA_PREFIX``)
    and a bot outside any venv leave PATH as it is."""
    if base.get("VIRTUAL_ENV") or base.get("CONDA_PREFIX") or sys.prefix == sys.base_prefix:
        return {}
    here = os.path.dirname(os.path.abspath(sys.executable))
    rest = [p for p in (base.get("PATH") or os.defpath).split(os.pathsep) if p and p != here]
    return {"PATH": os.pathsep.join([here, *rest])}


def interpreter_of(command: str) -> str | None:
    """The interpreter a command's ``python`` (or its own program, when that is a Python) resolves
    to on the PATH the program gets: what an import error's message names."""
    try:
        argv, shell = command_argv(command)
    except ValueError:
        return None
    env = dict(os.environ)
    env.update(interpreter_env(env))
    name = "python" if shell or not argv else argv[0]
    if not os.path.basename(name).startswith("python"):
        name = "python"
    return shutil.which(name, path=env.get("PATH"))


# What only a shell understands: operators (``&&``, ``|``, ``;``, redirections, subshells),
# expansions (``$VAR``, ``$(...)``, backquotes, globs, ``~``), a leading ``NAME=value`` assignment, or
# a shell builtin as the program (``cd``, ``source``, ``export``).
_SHELL_CHARS = re.compile(r"[|&;<>()$`*?\[\]~{}\n]")
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")
_BUILTINS = {"cd", "source", ".", "export", "set", "ulimit", "umask", "exec", "eval", "time", "!", "pushd"}


def command_argv(command: str) -> tuple[list[str], bool]:
    """How a command line runs: (argv, through a shell). A plain line (a program and its
    arguments) is split like a shell line and exec'd; a line that uses shell syntax runs as a
    workflow's ``run:`` line does, through bash (``sh`` where there is none), so ``cd bench &&
    STEPS=3 python run.py 2>&1`` works as typed. ValueError when it cannot be split (an open quote)."""
    argv = shlex.split(command)
    if argv and not (_SHELL_CHARS.search(command) or _ASSIGNMENT.match(argv[0]) or argv[0] in _BUILTINS):
        return argv, False
    return [shutil.which("bash") or "/bin/sh", "-c", command], True


def _signal_of_shell_status(returncode: int | None) -> int | None:
    """A shell reports a child killed by signal N as exit status 128 + N: the status as the
    program's own (negative: killed by that signal), so a crash is still a crash."""
    if returncode is not None and 128 < returncode < 128 + signal.NSIG:
        return -(returncode - 128)
    return returncode


def run_command(command: str, settings, log_path: str, cwd: str | None = None, extra_env: dict | None = None,
                patterns: Patterns | None = None, force_backend: str | None = None,
                launcher_dir: str | None = None) -> CheckRow:
    """One run of a user's command -> its row's result (plus ``compiled_graphs`` and ``launchers``)."""
    try:
        argv, shell = command_argv(command)
    except ValueError as exc:
        return _bad(f"cannot parse command: {exc}")
    if not command.strip():
        return _bad("empty command")
    env = settings_env(settings)
    env.update(extra_env or {})
    ran = execute(argv, env_extra=env, cwd=cwd, timeout=settings.timeout, log_path=log_path,
                  force_backend=force_backend, launcher_dir=launcher_dir)
    if ran.error:
        return _bad(ran.error, "setup_error")
    if shell:
        ran.returncode = _signal_of_shell_status(ran.returncode)
    row = classify(returncode=ran.returncode, output=ran.output, timed_out=ran.timed_out, timeout=settings.timeout,
                   patterns=patterns, compiled_graphs=ran.hook.frames, judge_start=force_backend is None)
    ran.note_in(row)
    return row


def bad_start(message: str, cls: str = "setup_error", **fields) -> CheckRow:
    """The row of a program that could not be started (it never ran)."""
    fields.setdefault("classified_by", NEVER_RAN + "could not start")
    return CheckRow(status="eager_fail_to_run", failure_class=cls, **fields,
                    error=CheckError(type="BadCommand", message=message, traceback="", frames=[]))


def _bad(message: str, cls: str = "setup_error") -> CheckRow:
    return bad_start(message, cls)


# --- the sources: one command, or several named commands from a YAML file ------------------------

COMMAND_OPTIONS = {"command", "cwd"}


class Command(Source):
    """``--suite command``: one command run under the chosen settings, judged by its exit status
    and output."""

    name = "command"
    program = True
    localizes_without_compile = True   # a failure with compilation off altogether is the program's own

    def models(self, req: ListRequest) -> list[Model]:
        if not req.command:
            raise UsageError("--suite command needs --command \"...\"")
        nm = req.name or "command"
        if not valid_name(nm):
            raise UsageError(f"invalid --name {nm!r} (letters, digits, '_', '-', '.')")
        return [Model(nm, _spec(req.command, nm, os.path.abspath(req.cwd or os.getcwd()), req.patterns),
                      req.command)]

    def run(self, spec: Spec, settings, log_path: str, *, extra_env: dict | None = None,
            force_backend: str | None = None, launcher_dir: str | None = None) -> CheckRow:
        return run_command(spec.command, settings, log_path, cwd=spec.cwd or os.getcwd(),
                           extra_env=extra_env, patterns=Patterns.from_dict(spec.patterns),
                           force_backend=force_backend, launcher_dir=launcher_dir)

    def describe(self, spec: Spec) -> str:
        return str(spec.command)

    def workdir(self, spec: Spec) -> str | None:
        return spec.cwd

    def reproduce(self, check: CheckRow, spec: Spec, models: list[str], trusted_commands=()) -> Reproduce:
        command = spec.command
        if not (isinstance(command, str) and command in trusted_commands):
            # a command the reporter was not configured with (e.g. from a pull request's job) is
            # never offered as something to copy and paste
            return Reproduce(args=["--suite", "command", "--command", "COMMAND"], notes=[
                "# COMMAND: the check's command (spec.command in results.json); read it before running it"])
        # the program exactly as the user configured this sweep, then the check that judges it
        out = Reproduce(args=["--suite", "command", "--command", command])
        cwd = spec.cwd
        if isinstance(cwd, str) and cwd:
            out.lines.append(f"cd {shlex.quote(cwd)}")
        out.lines.append(f"{command}    # the program; it fails with a non-zero exit")
        if models:
            out.args += ["--name", models[-1]]
        patterns = spec.patterns if isinstance(spec.patterns, dict) else {}
        for kind in ("accuracy", "error"):
            out.args += [a for pat in patterns.get(kind) or [] if isinstance(pat, str)
                         for a in (f"--{kind}-pattern", pat)]
        return out


class Commands(Command):
    """``--suite commands``: several named commands from a YAML file, each one command check."""

    name = "commands"

    def models(self, req: ListRequest) -> list[Model]:
        return commands_models(req.file, req.patterns)


def _spec(command: str, name: str, cwd: str, patterns: dict | None) -> Spec:
    given = patterns and (patterns.get("accuracy") or patterns.get("error"))
    return Spec(source="command", command=command, model=name, cwd=cwd, patterns=patterns if given else None)


COMMAND = Command()
COMMANDS = Commands()


def commands_models(path: str | None, patterns: dict | None = None) -> list[Model]:
    """Named commands from a YAML file, each one command check of the sweep::

        commands:                       # optional top-level key
          bert: python bench.py --model bert
          resnet:
            command: python bench.py --model resnet
            cwd: benchmarks             # relative to the file (default: the file's directory)
    """
    if not path:
        raise UsageError("--suite commands needs --command-file FILE (a YAML mapping of names to commands)")
    base, entries = load_entries(path, what="command file", top="commands", kind="command", key="command",
                                 options=COMMAND_OPTIONS, short="a command string")
    out = []
    for name, entry, where in entries:
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise UsageError(f"{where}: 'command' must be a non-empty string")
        try:
            command_argv(command)
        except ValueError as exc:
            raise UsageError(f"{where}: cannot parse the command: {exc}") from None
        cwd = entry.get("cwd", ".")
        if not isinstance(cwd, str):
            raise UsageError(f"{where}: 'cwd' must be a directory path")
        cwd = os.path.normpath(os.path.join(base, cwd))
        if not os.path.isdir(cwd):
            raise UsageError(f"{where}: working directory {cwd} does not exist")
        out.append(Model(name, _spec(command, name, cwd, patterns), command))
    return out
