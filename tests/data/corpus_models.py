"""The grouping corpus: tiny user models whose compiler bug comes from their own environment.

Each factory sets one of inductor's test-only bug injections itself, the way a model would pick up
a broken torch build: the bot's own ``--config`` is the same (empty) for every check and every run.
The two ``switch_*`` models use relu and log1p; ``CORPUS_PHASE`` (1 or 2) plays "relu was fixed in
the nightly, log1p broke", so the bug on those models changes between runs.

Bugs (op, kind):  relu/accuracy, log1p/accuracy, relu/compile_error, relu/runtime_error,
log1p/compile_error (torch 2.13 has no log1p compile-error injection: the unknown value makes
inductor's C++ codegen raise while compiling, which is a compile error of its own kind).
"""

import os

import torch
import torch.nn as nn

RELU = "inject_relu_bug_TESTING_ONLY"
LOG1P = "inject_log1p_bug_TESTING_ONLY"


def _inject(key, kind):
    import torch._inductor.config as inductor_config

    setattr(inductor_config.cpp, key, kind)


class Dense(nn.Module):
    """rank 2 (or rank 3 when given a sequence): linear then the op."""

    def __init__(self, op):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.op = op

    def forward(self, x):
        y = self.fc(x)
        return torch.relu(y) if self.op == "relu" else torch.log1p(y.abs())


class Conv(nn.Module):
    """rank 4: conv then the op."""

    def __init__(self, op):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.op = op

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(y) if self.op == "relu" else torch.log1p(y.abs())


class Both(nn.Module):
    """relu and log1p in one model."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        return torch.relu(y) * 2 + torch.log1p(y.abs())


def _dense(op, key, kind, rank=2, batch_size=4):
    _inject(key, kind)
    shape = (batch_size, 8) if rank == 2 else (batch_size, 3, 8)
    return Dense(op), (torch.randn(*shape),)


def _conv(op, key, kind, batch_size=2):
    _inject(key, kind)
    return Conv(op), (torch.randn(batch_size, 2, 4, 4),)


# relu / accuracy on ranks 2, 3, 4
def acc_relu_mlp(batch_size=4):
    return _dense("relu", RELU, "accuracy", 2, batch_size)


def acc_relu_seq(batch_size=4):
    return _dense("relu", RELU, "accuracy", 3, batch_size)


def acc_relu_conv(batch_size=2):
    return _conv("relu", RELU, "accuracy", batch_size)


# log1p / accuracy on ranks 2 and 4
def acc_log1p_mlp(batch_size=4):
    return _dense("log1p", LOG1P, "accuracy", 2, batch_size)


def acc_log1p_conv(batch_size=2):
    return _conv("log1p", LOG1P, "accuracy", batch_size)


# relu / compile_error on ranks 2 and 4
def ce_relu_mlp(batch_size=4):
    return _dense("relu", RELU, "compile_error", 2, batch_size)


def ce_relu_conv(batch_size=2):
    return _conv("relu", RELU, "compile_error", batch_size)


# relu / runtime_error on ranks 2 and 3
def rt_relu_mlp(batch_size=4):
    return _dense("relu", RELU, "runtime_error", 2, batch_size)


def rt_relu_seq(batch_size=4):
    return _dense("relu", RELU, "runtime_error", 3, batch_size)


# log1p / compile_error on ranks 2 and 3
def ce_log1p_mlp(batch_size=4):
    return _dense("log1p", LOG1P, "compile_error", 2, batch_size)


def ce_log1p_seq(batch_size=4):
    return _dense("log1p", LOG1P, "compile_error", 3, batch_size)


# the models whose bug changes between runs
def _phase():
    return os.environ.get("CORPUS_PHASE", "1")


def switch_acc(batch_size=4):
    _inject(RELU if _phase() == "1" else LOG1P, "accuracy")
    return Both(), (torch.randn(batch_size, 8),)


def switch_ce(batch_size=4):
    _inject(RELU if _phase() == "1" else LOG1P, "compile_error")
    return Both(), (torch.randn(batch_size, 8),)
