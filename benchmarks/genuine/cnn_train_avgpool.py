"""Benchmark: one training step of a small CNN, eager vs torch.compile.

The network ends its stem with ``nn.AvgPool2d(3, stride=2, ceil_mode=True)``. The forward
outputs agree; inductor's ``avg_pool2d_backward`` divides the last, overhanging window by the
full kernel size, so the gradients of everything before the pool are wrong:
pytorch/pytorch#198119 (training/backward only).

    python benchmarks/genuine/cnn_train_avgpool.py     # exit 1 when compiled differs from eager
"""

import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 1e-3


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.pool = nn.AvgPool2d(3, stride=2, ceil_mode=True)
        self.fc = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc(x.flatten(1))


def train_step(model, x, y, run=None):
    model.zero_grad()
    loss = F.cross_entropy((model if run is None else run)(x), y)
    loss.backward()
    return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-12)).item()


def main() -> int:
    torch.manual_seed(0)
    model = SmallCNN()
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    ref = copy.deepcopy(model).double()
    _, g64 = train_step(ref, x.double(), y)
    loss_e, g_e = train_step(model, x, y)
    twin = copy.deepcopy(model)
    loss_c, g_c = train_step(twin, x, y, run=torch.compile(twin))
    print(f"cnn training step: loss eager {loss_e.item():.6f} compiled {loss_c.item():.6f}")
    bad = []
    for name in g64:
        e, c = rel_err(g_e[name], g64[name]), rel_err(g_c[name], g64[name])
        print(f"  grad {name:14s} rel. error vs fp64: eager {e:.2e} compiled {c:.2e}")
        if c > max(TOL, 2 * e):
            bad.append(name)
    if bad:
        print(f"FAIL: accuracy mismatch in the gradients of {', '.join(bad)} (compiled vs eager)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
