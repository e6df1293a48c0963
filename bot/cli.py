"""Command line entry point: `minify-bot <command>` / `python -m bot <command>`.

Each command lives in its own module under bot/commands/ exposing:
    HELP: str                     one-line summary for the command list
    add_arguments(parser)         register its flags
    run(args) -> int              do the work, return an exit code (see bot.errors)
Modules are imported lazily so that `--help` never pays for importing torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from bot import __version__
from bot.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, BotError

COMMANDS = {
    "check": "bot.commands.check",
    "minify": "bot.commands.minify",
    "report": "bot.commands.report",
    "run": "bot.commands.run",
    "selftest": "bot.commands.selftest",
    "merge": "bot.commands.merge",
    "bisect": "bot.commands.bisect",
    "action": "bot.commands.action",
    "upstream": "bot.commands.upstream",
    "keygen": "bot.commands.keygen",
}

EPILOG = """exit codes:
  0  ok, nothing failing
  1  failures found
  2  usage or input error (bad flags, unknown model/backend, malformed YAML or payload)
  3  internal or infrastructure error
  130  interrupted (Ctrl-C): what was finished is kept, nothing is reported
"""


# the command this process was started as (`run` runs the check stage: its errors say `run`)
_running: list[str] = []


def running(default: str) -> str:
    """The command this process runs (`minify-bot <command>`), else ``default``."""
    return _running[0] if _running else default


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one-line reason, exit 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="minify-bot",
        description="torch.compile accuracy sweeps, automatic minification, one good issue per bug.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"minify-bot {__version__}")
    sub = parser.add_subparsers(dest="_command_name", metavar="COMMAND", parser_class=_Parser)
    for name, modname in COMMANDS.items():
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name != modname:
                raise
            continue  # command not built yet
        p = sub.add_parser(
            name,
            help=mod.HELP,
            description=getattr(mod, "DESCRIPTION", mod.HELP),
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    import os

    # torch.cuda.is_available() then asks NVML instead of the CUDA runtime, whose answer would mark
    # every child forked from this process unable to use CUDA (see bot/torch_adapter/device.py)
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    _running[:] = [args._command_name]
    try:
        return guarded(args._command_name, args._run, args)
    finally:
        _running.clear()


def run() -> None:
    """The console script and ``python -m bot``: :func:`main`, then :func:`exit_now`."""
    exit_now(main())


def exit_now(code: int) -> None:
    """Exit with ``code``. A process that imported torch skips the interpreter's final teardown
    (about 1.7 s of freeing torch's objects after a compile, on every command): exit handlers
    run and the standard streams are flushed first, then the process ends. Everything else exits
    the usual way."""
    if "torch" not in sys.modules:
        sys.exit(code)
    import atexit
    import os
    import threading

    try:
        for t in threading.enumerate():  # what interpreter shutdown would wait for
            if t is not threading.current_thread() and not t.daemon:
                t.join()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code & 0xFF if isinstance(code, int) else 1)


def guarded(name: str, fn, *args) -> int:
    """Call a command's function: its exit code; a BotError becomes one `error:` line and its exit code."""
    try:
        return int(fn(*args))
    except BotError as exc:
        print(f"minify-bot {name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"minify-bot {name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a bug or input nobody foresaw: exit 3, never 1 ("failures found")
        import traceback

        traceback.print_exc(file=sys.stderr)
        first = (str(exc).splitlines() or [""])[0][:300]
        print(f"minify-bot {name}: internal error: {type(exc).__name__}: {first}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    run()
