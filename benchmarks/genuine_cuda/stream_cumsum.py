"""Benchmark (CUDA): a running-mean forecaster over one long sensor stream, eager vs torch.compile.

Each step of the stream is projected, squashed and shifted by a learned per-channel drift, and the
forecaster reads the running mean of every prefix: ``torch.cumsum(h + self.drift, dim=1)``. With a
scan longer than 128 steps inductor splits the scan over several Triton programs (``SplitScan``);
the split-scan kernel gives its pointwise range no tensor dimension, and loading the broadcast
drift vector then indexes a list with ``None``: compilation fails with ``InductorError:
TypeError: list indices must be integers or slices, not NoneType``: pytorch/pytorch#180221
(Triton codegen / compile error; cumprod and logcumsumexp fail the same way; fix #180369).

    python benchmarks/genuine_cuda/stream_cumsum.py   # dies with InductorError while compiling
"""

import sys

import torch
import torch.nn as nn

TOL = 1e-3
DEVICE = "cuda"
STEPS = 512  # > 128: a split scan


class DriftForecaster(nn.Module):
    def __init__(self, feat=8, dim=64, horizon=4):
        super().__init__()
        self.proj = nn.Linear(feat, dim, bias=False)
        self.drift = nn.Parameter(torch.randn(dim) * 0.1)
        self.head = nn.Linear(dim, horizon)

    def forward(self, x):  # x: (1, steps, feat), one stream
        h = torch.tanh(self.proj(x))
        running = torch.cumsum(h + self.drift, dim=1)  # running sum with a learned drift
        count = torch.arange(1, x.shape[1] + 1, device=x.device, dtype=x.dtype)
        return self.head(running / count[None, :, None])  # a forecast from every prefix's mean


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 77
    torch.manual_seed(0)
    model = DriftForecaster().to(DEVICE).eval()
    ref = DriftForecaster().to(DEVICE).double().eval()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(1, STEPS, 8, device=DEVICE)
    with torch.no_grad():
        fp64 = ref(x.double())
        eager = model(x)
        compiled = torch.compile(model)(x)  # the bug: InductorError here
    e_err, c_err = rmse(eager, fp64), rmse(compiled, fp64)
    print(f"forecaster over {STEPS} steps: forecasts {tuple(compiled.shape)}; RMSE vs fp64: "
          f"eager {e_err:.2e}, compiled {c_err:.2e} (tol {TOL})")
    if not c_err <= max(TOL, 2 * e_err):  # also a NaN
        print(f"FAIL: accuracy mismatch: compiled forecasts differ from eager (max abs diff "
              f"{(compiled - eager).abs().max().item():.3g})")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
