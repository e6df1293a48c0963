"""Loaded by a test's ``minify-bot`` command that runs forked from a shared interpreter
(tests/conftest.py ``run_bot``), before the command itself: its standard output and error go to the
files the test reads, as ``subprocess.run(capture_output=True)`` keeps them apart. Not a test module."""

import os

OUT_ENV, ERR_ENV = "MINIFY_TEST_STDOUT", "MINIFY_TEST_STDERR"


def to_files() -> None:
    for fd, name in ((1, OUT_ENV), (2, ERR_ENV)):
        path = os.environ.pop(name)
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
