"""User models for the YAML-source tests: a good one, and ones that break the check process."""

import os
import sys
import time

import torch
import torch.nn as nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.fc(x))


class Aborts(nn.Module):
    def forward(self, x):
        os.abort()


class Hangs(nn.Module):
    def forward(self, x):
        while True:
            time.sleep(1)


def good(batch_size=4):
    return Small(), (torch.randn(batch_size, 8),)


def aborts():
    return Aborts(), (torch.randn(2, 8),)


class AbortsWhenForked(nn.Module):
    """Dies of its process's past: only in a forked child (of the sweep, or of a fork server: as
    torch's thread pool can in a child forked at the wrong moment), never in a fresh interpreter
    started as `python -m bot.check.one` (a fork server's job runs that module too, but the process
    was started as the server)."""

    def forward(self, x):
        if sys.orig_argv[1:3] != ["-m", "bot.check.one"]:
            os.abort()
        return torch.tanh(x)


def aborts_when_forked():
    return AbortsWhenForked(), (torch.randn(2, 8),)


def hangs():
    return Hangs(), (torch.randn(2, 8),)


def raises():
    raise ValueError("factory could not build the model: missing weights")


class ReluNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


def relu_under_buggy_compiler(batch_size=4):
    """A relu model; MINIFY_TEST_COMPILER_BUG=1 plays a compiler release that miscompiles relu."""
    import torch._inductor.config as inductor_config

    if os.environ.get("MINIFY_TEST_COMPILER_BUG") == "1":
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    return ReluNet(), (torch.randn(batch_size, 8),)


def relu_fails_first_time(batch_size=4):
    """A flaky check: the first build (per MINIFY_TEST_FLAKY_DIR) plays a miscompiling compiler, later ones do not.

    The checks run in forked children, so the marker file is what remembers the first build."""
    import torch._inductor.config as inductor_config

    marker = os.path.join(os.environ["MINIFY_TEST_FLAKY_DIR"], "built-once")
    if not os.path.exists(marker):
        open(marker, "w").close()
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    return ReluNet(), (torch.randn(batch_size, 8),)
