"""Benchmark (CUDA): one training step of a soft-prompt sequence classifier, eager vs torch.compile.

A token encoder's features go through a NaN guard (a graph break: dynamo compiles the encoder and
the head as two graphs, and the head's input is the encoder's output, which needs a gradient).
The head writes learned soft-prompt vectors over the first slots of every sequence with
``torch.slice_scatter`` and sum-pools the sequence. In the head's backward, the gradient of the
sum is an expanded (stride-0) tensor that becomes ``self`` of the ``slice_scatter`` backward; the
fake kernel of ``slice_scatter`` preserves that stride-0 layout, inductor trusts it for the
gradient it returns for the head's input, collapses the sequence dimension and folds the slice
mask to a constant: the gradient reaching the encoder is zero, so every encoder gradient is wrong
while the forward, the loss and the head's own gradients agree: pytorch/pytorch#180164 (also
#180771; training / backward only; fix #180166).

    python benchmarks/genuine_cuda/prompt_pool_train.py   # exit 1 when compiled differs from eager
"""

import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 1e-3
DEVICE = "cuda"
SLOTS = 4  # the first SLOTS positions of every sequence are reserved for the soft prompt


class PromptPoolClassifier(nn.Module):
    def __init__(self, feat=24, dim=48, classes=5, slots=SLOTS):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(feat, dim), nn.GELU(), nn.Linear(dim, dim))
        self.prompt = nn.Parameter(torch.randn(slots, dim) * 0.02)
        self.fc = nn.Linear(dim, classes)

    def forward(self, x):
        h = self.encoder(x)  # (B, L, dim)
        if not torch.isfinite(h).all():  # graph break: a NaN guard
            raise FloatingPointError("non-finite encoder features")
        prompts = self.prompt.expand(h.shape[0], -1, -1)
        h = torch.slice_scatter(h, prompts, dim=1, start=0, end=self.prompt.shape[0])
        return self.fc(h.sum(dim=1) / h.shape[1])


def train_step(model, x, y, run=None):
    model.zero_grad()
    loss = F.cross_entropy((model if run is None else run)(x), y)
    loss.backward()
    return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-12)).item()


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 77
    torch.manual_seed(0)
    model = PromptPoolClassifier().to(DEVICE)
    x = torch.randn(8, 16, 24, device=DEVICE)  # 8 sequences of 16 tokens
    y = torch.randint(0, 5, (8,), device=DEVICE)
    ref = copy.deepcopy(model).double()
    _, g64 = train_step(ref, x.double(), y)
    loss_e, g_e = train_step(model, x, y)
    twin = copy.deepcopy(model)
    loss_c, g_c = train_step(twin, x, y, run=torch.compile(twin))
    print(f"prompt classifier training step: loss eager {loss_e.item():.6f} compiled {loss_c.item():.6f}")
    bad = []
    for name in g64:
        e, c = rel_err(g_e[name], g64[name]), rel_err(g_c[name], g64[name])
        print(f"  grad {name:18s} rel. error vs fp64: eager {e:.2e} compiled {c:.2e}")
        if not c <= max(TOL, 2 * e):  # also a NaN
            bad.append(name)
    if bad:
        print(f"FAIL: accuracy mismatch in the gradients of {', '.join(bad)} (compiled vs eager)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
