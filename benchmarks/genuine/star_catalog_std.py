"""Benchmark: one training step of a stellar-parameter regressor fed raw catalogue columns in
SI units (masses in kg, radii in m, luminosities in W), eager vs torch.compile.

The model standardises its inputs itself, per column over the batch: ``(x - x.mean(0)) /
x.std(0)``. Eager CPU ``std`` accumulates float32 input in double; inductor accumulates the
variance in float32, where the squared deviations of a 1e30 kg column (~1e60) overflow: the
compiled ``std`` of the mass and luminosity columns is ``inf``, those standardised features are
silently zero, and the loss and every gradient are off (nothing is NaN):
https://github.com/pytorch/pytorch/issues/197089 (open; torch 2.13.0 and 2.15.0, CPU).

Training: the failure starts in the forward graph (a reduction) and reaches the gradients
through the backward graph; the program compares the loss and each parameter's gradient
against an fp64 copy of the model.

    python benchmarks/genuine/star_catalog_std.py     # exit 1 when compiled differs from eager
"""

import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 1e-3


def catalogue(n, gen):
    """n synthetic stars: (features in SI units, target = log10 age in years)."""
    u = torch.rand(n, 5, generator=gen)
    mass = 1.989e30 * 10 ** (2.5 * u[:, 0] - 1)           # 0.1 .. 30 solar masses, kg
    radius = 6.957e8 * (mass / 1.989e30) ** 0.8           # m
    lum = 3.828e26 * (mass / 1.989e30) ** 3.5             # W
    teff = 5772 * (lum / 3.828e26) ** 0.25 / (radius / 6.957e8) ** 0.5   # K
    metal = 0.004 + 0.03 * u[:, 1]                        # metallicity Z
    x = torch.stack([mass, radius, lum, teff, metal], dim=1)
    age = 10 - 2.5 * torch.log10(mass / 1.989e30) + 0.3 * (u[:, 2] - 0.5)
    return x, age


class BatchStandardize(nn.Module):
    def forward(self, x):
        return (x - x.mean(dim=0)) / x.std(dim=0)


class StellarRegressor(nn.Module):
    def __init__(self, features=5, hidden=32):
        super().__init__()
        self.standardize = BatchStandardize()
        self.inp = nn.Linear(features, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.mid = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        z = self.standardize(x)
        h = F.gelu(self.norm1(self.inp(z)))
        h = h + F.gelu(self.norm2(self.mid(h)))
        return self.out(h).squeeze(-1)


def train_step(model, x, y, run=None):
    model.zero_grad()
    loss = F.smooth_l1_loss((model if run is None else run)(x), y)
    loss.backward()
    return loss.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def rel_err(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-12)).item()


def main() -> int:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x, y = catalogue(128, gen)
    model = StellarRegressor()
    ref = copy.deepcopy(model).double()
    loss64, g64 = train_step(ref, x.double(), y.double())
    loss_e, g_e = train_step(model, x, y)
    twin = copy.deepcopy(model)
    loss_c, g_c = train_step(twin, x, y, run=torch.compile(twin))
    le, lc = rel_err(loss_e, loss64), rel_err(loss_c, loss64)
    print(f"stellar regressor training step: loss fp64 {loss64.item():.6f} eager {loss_e.item():.6f} "
          f"compiled {loss_c.item():.6f}")
    bad = ["loss"] if lc > max(TOL, 2 * le) else []
    for name in g64:
        e, c = rel_err(g_e[name], g64[name]), rel_err(g_c[name], g64[name])
        print(f"  grad {name:12s} rel. error vs fp64: eager {e:.2e} compiled {c:.2e}")
        if c > max(TOL, 2 * e):
            bad.append(name)
    if bad:
        print(f"FAIL: accuracy mismatch in {', '.join(bad)} (compiled vs eager)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
