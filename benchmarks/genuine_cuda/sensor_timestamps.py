"""Benchmark (CUDA): a sensor-window classifier with graph breaks, eager vs torch.compile.

Windows of sensor readings, one sample every 1.5 s, go through a classifier whose forward has two
graph breaks (a data-dependent rescale of outliers read with ``.item()``, and a NaN guard that
branches on a tensor), so dynamo compiles it as three graphs. The middle one builds the samples'
nanosecond timestamps, ``torch.arange(L, dtype=int64) * torch.tensor([1_500_000_000])``, for the
time features; inductor folds the product into an index expression and Triton computes it in
the kernel's 32-bit index type, so from the third sample on the timestamps wrap past 2**31
(3_000_000_000 ns becomes -1_294_967_296) and the time features are wrong:
pytorch/pytorch#183901 (the CUDA twin of #175966; integer overflow; the failing graph is one of
several; fix #186913).

    python benchmarks/genuine_cuda/sensor_timestamps.py   # exit 1 when compiled differs from eager
"""

import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 1e-3
DEVICE = "cuda"
STEP_NS = 1_500_000_000  # 1.5 s between samples, in nanoseconds


class SensorClassifier(nn.Module):
    def __init__(self, feat=6, dim=32, classes=3):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        self.time_w = nn.Parameter(torch.randn(2, dim) * 0.5)
        self.mix = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def time_features(self, h):
        # the samples' timestamps (ns since the window start), as in the report
        stamps = torch.arange(0, h.shape[1], device=h.device, dtype=torch.int64) * torch.tensor(
            [STEP_NS], dtype=torch.int64, device=h.device)
        sec = stamps.to(h.dtype) / 1e9
        return torch.sin(2 * math.pi * sec / 60), torch.sin(2 * math.pi * sec / 9)

    def forward(self, x):
        h = F.gelu(self.inp(x))
        if h.abs().amax().item() > 8:  # graph break: rescale a window with outliers
            h = h / 8
        slow, fast = self.time_features(h)
        h = h + slow[None, :, None] * self.time_w[0] + fast[None, :, None] * self.time_w[1]
        if torch.isnan(h).any():  # graph break: a NaN guard
            raise FloatingPointError("NaN in the time-encoded sensor features")
        h = self.norm(h + torch.relu(self.mix(h)))
        return self.head(h.mean(1))


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 77
    torch.manual_seed(0)
    model = SensorClassifier().to(DEVICE).eval()
    ref = SensorClassifier().to(DEVICE).double().eval()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(8, 24, 6, device=DEVICE)  # 8 windows of 24 samples (36 s)
    with torch.no_grad():
        fp64 = ref(x.double())
        eager = model(x)
        compiled = torch.compile(model)(x)
    e_err, c_err = rmse(eager, fp64), rmse(compiled, fp64)
    print(f"sensor classifier: logits {tuple(compiled.shape)}; RMSE vs fp64: eager {e_err:.2e}, "
          f"compiled {c_err:.2e} (tol {TOL})")
    if not c_err <= max(TOL, 2 * e_err):  # also a NaN
        print(f"FAIL: accuracy mismatch: compiled sensor logits differ from eager (max abs diff "
              f"{(compiled - eager).abs().max().item():.3g})")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
