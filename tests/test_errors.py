"""bot/errors.py: each kind of error exits with its documented code, and the bot says why in one line."""

from __future__ import annotations

import re

from bot import errors
from bot.cli import guarded


def test_documented_codes_are_the_constants():
    """The module's table of exit codes (what docs and workflows rely on) is what the constants say."""
    table = {int(code): text for code, text in re.findall(r"^(\d+)\s+(\S.*)$", errors.__doc__, re.M)}
    assert table.keys() == {errors.EXIT_OK, errors.EXIT_FAILURES, errors.EXIT_USAGE, errors.EXIT_INTERNAL,
                            errors.EXIT_INTERRUPTED}
    assert "usage" in table[errors.EXIT_USAGE] and "internal" in table[errors.EXIT_INTERNAL]
    assert "failures" in table[errors.EXIT_FAILURES] and "interrupted" in table[errors.EXIT_INTERRUPTED]


def _fail_with(exc):
    def fn():
        raise exc
    return fn


def test_each_error_becomes_its_exit_code_and_one_line(capsys):
    cases = [(errors.UsageError("bad --shard"), 2), (errors.InfraError("GitHub unreachable"), 3),
             (errors.Interrupted("stopped"), 130), (errors.BotError("plain"), 3)]
    for exc, code in cases:
        assert guarded("demo", _fail_with(exc)) == code
        err = capsys.readouterr().err
        assert err == f"minify-bot demo: error: {exc}\n"


def test_an_unforeseen_exception_is_internal_never_failures_found(capsys):
    assert guarded("demo", _fail_with(KeyError("x"))) == errors.EXIT_INTERNAL != errors.EXIT_FAILURES
    assert "minify-bot demo: internal error: KeyError" in capsys.readouterr().err


def test_usage_errors_from_a_real_command_exit_2(bot):
    proc = bot("check", "--shard", "5/2")
    assert proc.returncode == errors.EXIT_USAGE, proc.stderr
    assert "error:" in proc.stderr and "Traceback" not in proc.stderr
