"""Benchmark (CUDA): one training step of a DiT-style latent denoiser, eager vs torch.compile.

The block applies two chained modulated LayerNorms, ``x = x + (norm(x) * (1 + scale) + shift)``,
whose shift/scale vectors are ``chunk``s of one shared ``scale_shift_table`` parameter (the
AdaLN pattern of DiT / Wan 2.1). With a long sequence (32768 tokens of width 1024) inductor's
mix-order reduction fuses the backward's per-token and per-channel reductions; the gradients of
the table's slices are assembled into one buffer by ``cat``, and the fused kernel's final reduce
rebinds the second norm's slice gradients to fresh tensors instead of writing into that buffer.
Those rows of ``scale_shift_table.grad`` are never written (uninitialised or stale memory); the
forward and the loss agree: pytorch/pytorch#193061 (a regression in 2.10, where mix-order
reduction became the default; still failing on 2.11 and 2.13 per the report; fix #193103).

The compiled step runs first, on a fresh allocator, so the unwritten rows cannot happen to hold
the eager step's identical gradients.

    python benchmarks/genuine_cuda/dit_adaln_train.py   # exit 1 when compiled differs from eager
"""

import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 1e-3
DEVICE = "cuda"
DIM, SEQ, CH = 1024, 32768, 16  # the report's width and sequence length (batch 1)


class ModulatedNormBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 4, dim) / dim ** 0.5)

    def forward(self, x):
        shift1, scale1, shift2, scale2 = self.scale_shift_table.chunk(4, dim=1)
        x = x + (self.norm1(x) * (1 + scale1) + shift1)
        x = x + (self.norm2(x) * (1 + scale2) + shift2)
        return x


class LatentDenoiser(nn.Module):
    def __init__(self, ch=CH, dim=DIM):
        super().__init__()
        self.proj_in = nn.Linear(ch, dim)
        self.block = ModulatedNormBlock(dim)
        self.proj_out = nn.Linear(dim, ch)

    def forward(self, z):
        return self.proj_out(self.block(self.proj_in(z)))


def train_step(model, z, target, run=None):
    model.zero_grad()
    loss = F.mse_loss((model if run is None else run)(z), target)
    loss.backward()
    return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-12)).item()


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 77
    torch.manual_seed(0)
    model = LatentDenoiser().to(DEVICE)
    z = torch.randn(1, SEQ, CH, device=DEVICE)
    target = torch.randn(1, SEQ, CH, device=DEVICE)
    twin = copy.deepcopy(model)
    loss_c, g_c = train_step(twin, z, target, run=torch.compile(twin))  # first: see the docstring
    loss_e, g_e = train_step(model, z, target)
    ref = copy.deepcopy(model).double()
    _, g64 = train_step(ref, z.double(), target.double())
    print(f"denoiser training step ({SEQ} tokens x {DIM}): loss eager {loss_e.item():.6f} "
          f"compiled {loss_c.item():.6f}")
    bad = []
    for name in g64:
        e, c = rel_err(g_e[name], g64[name]), rel_err(g_c[name], g64[name])
        print(f"  grad {name:26s} rel. error vs fp64: eager {e:.2e} compiled {c:.2e}")
        if not c <= max(TOL, 2 * e):  # also a NaN
            bad.append(name)
    table = "block.scale_shift_table"
    for i, part in enumerate(("shift1", "scale1", "shift2", "scale2")):
        print(f"    {table}[:, {i}] ({part}): rel. error vs fp64: eager "
              f"{rel_err(g_e[table][:, i], g64[table][:, i]):.2e} "
              f"compiled {rel_err(g_c[table][:, i], g64[table][:, i]):.2e}")
    if bad:
        print(f"FAIL: accuracy mismatch in the gradients of {', '.join(bad)} (compiled vs eager)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
