"""Benchmark: an event-sequence classifier with graph breaks, compiled with dynamic shapes.

Sequences of different lengths go through ``torch.compile(model, dynamic=True)``. The forward has
graph breaks (a data-dependent branch on ``.item()`` and a logging call), so dynamo compiles it
as several graphs. One of them builds nanosecond timestamps, ``torch.arange(L, dtype=int64) *
1_000_000_000``; inductor computes that product in 32-bit arithmetic and the timestamps wrap
past 2**31 (from the third position on), so the time features are wrong:
pytorch/pytorch#175966 (integer overflow, values only a length >= 3 reaches; dynamic shapes;
the failing graph is one of several).

    python benchmarks/genuine/timeseries_dynamic.py     # exit 1 when compiled differs from eager
"""

import logging
import sys

import torch
import torch.nn as nn

log = logging.getLogger("timeseries")
TOL = 1e-3
NS = 1_000_000_000


class EventClassifier(nn.Module):
    def __init__(self, feat=6, dim=32, classes=3):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        self.time_w = nn.Parameter(torch.randn(2, dim) * 0.5)
        self.mix = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def time_features(self, x, start_ns):
        stamps = torch.arange(x.shape[1], dtype=torch.int64) * NS + start_ns  # ns since start
        sec = stamps.to(x.dtype) / NS  # seconds
        return torch.sin(sec / 100), torch.sin(sec / 10)

    def forward(self, x, start_ns):
        h = torch.tanh(self.inp(x))
        if h.abs().amax().item() > 0.999:  # graph break: data-dependent branch
            h = h * 0.5
        log.debug("features %s", tuple(h.shape))  # graph break: logging
        slow, fast = self.time_features(x, start_ns)
        h = h + slow[None, :, None] * self.time_w[0] + fast[None, :, None] * self.time_w[1]
        torch._dynamo.graph_break()
        h = self.norm(h + torch.relu(self.mix(h)))
        weights = torch.softmax(fast, 0)  # attention over time: recent-cycle weighting
        return self.head((h * weights[None, :, None]).sum(1))


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def main() -> int:
    torch.manual_seed(0)
    model = EventClassifier().eval()
    ref = EventClassifier().double().eval()
    ref.load_state_dict(model.state_dict())
    compiled = torch.compile(model, dynamic=True)
    start = torch.zeros((), dtype=torch.int64)
    bad = 0
    with torch.no_grad():
        for length in (5, 9, 14):
            x = torch.randn(4, length, 6)
            fp64, eager, comp = ref(x.double(), start), model(x, start), compiled(x, start)
            e_err, c_err = rmse(eager, fp64), rmse(comp, fp64)
            print(f"length {length:3d}: RMSE vs fp64 eager {e_err:.2e} compiled {c_err:.2e} (tol {TOL})")
            if c_err > max(TOL, 2 * e_err):
                bad += 1
    if bad:
        print(f"FAIL: accuracy mismatch in {bad} of 3 batches (compiled vs eager)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
