"""Exit codes and the exceptions that map onto them.

0  ok: the command did its job and found nothing that fails
1  failures found (a check failed, a regression was reproduced; see --fail-on where offered)
2  usage or input error: bad flags, unknown model/backend, malformed YAML or payload, unreadable file
3  internal or infrastructure error: a bug in the bot, GitHub unreachable after retries, a torch
   without the APIs a stage needs
130 interrupted (Ctrl-C, SIGINT): the run stopped where it was; what it had finished is kept, and
   nothing was reported
"""

EXIT_OK = 0
EXIT_FAILURES = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C stopped


class BotError(Exception):
    """An error with a one-line, user-facing reason and a defined exit code."""

    exit_code = EXIT_INTERNAL


class UsageError(BotError):
    """Bad command line or bad input file: exit 2."""

    exit_code = EXIT_USAGE


class InfraError(BotError):
    """The environment let us down (GitHub, torch, disk): exit 3."""

    exit_code = EXIT_INTERNAL


class Interrupted(BotError):
    """Ctrl-C, or a cancelled workflow run (SIGINT) reached a stage: exit 130. Nothing more runs and
    nothing is reported; what the stages finished stays in the run directory."""

    exit_code = EXIT_INTERRUPTED
