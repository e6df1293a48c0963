"""Benchmark (CUDA): a small CNN with a per-image feature-energy score, eager vs torch.compile.

The network returns class logits and, for each image, an out-of-distribution score: the sum of
its 7x7 adaptive-average-pooled feature map, ``F.adaptive_avg_pool2d(feat, 7).flatten(1).sum(-1)``.
The feature map has 33 channels, so a flattened row (33 * 7 * 7 = 1617 values) is over inductor's
padding threshold (1024 elements) and its channel count is not a multiple of 16. On the GPU,
inductor pads the pooled buffer's row stride (1617 -> 1632) when it lowers the flatten, while the
sum, a user-visible output that dislikes padding, freezes the unpadded stride: the pooling kernel
and the reduction disagree on where a row starts, and every image except the first gets a wrong
score: pytorch/pytorch#179931 (also reported as #180848 and #180956; silent wrong values, forward
only, batch > 1).

    python benchmarks/genuine_cuda/cnn_pool_energy.py   # exit 1 when compiled differs from eager
"""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 1e-3
DEVICE = "cuda"


class EnergyCNN(nn.Module):
    def __init__(self, classes=10, width=33):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)  # 16x16 -> 8x8
        self.conv2 = nn.Conv2d(16, width, 3, padding=1)
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        feat = self.conv2(F.relu(self.conv1(x)))  # (B, 33, 8, 8) pre-activation features
        logits = self.fc(F.relu(feat).mean((2, 3)))
        energy = F.adaptive_avg_pool2d(feat, 7).flatten(1).sum(-1)  # per-image OOD score
        return logits, energy


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 77
    torch.manual_seed(0)
    model = EnergyCNN().to(DEVICE).eval()
    ref = EnergyCNN().to(DEVICE).double().eval()
    ref.load_state_dict(model.state_dict())
    x = torch.randn(4, 3, 16, 16, device=DEVICE)
    with torch.no_grad():
        fp64 = ref(x.double())
        eager = model(x)
        compiled = torch.compile(model)(x)
    bad = []
    for name, f, e, c in zip(("logits", "energy"), fp64, eager, compiled):
        e_err, c_err = rmse(e, f), rmse(c, f)
        print(f"cnn {name:6s} {tuple(c.shape)}: RMSE vs fp64: eager {e_err:.2e}, compiled {c_err:.2e} "
              f"(tol {TOL})")
        if not c_err <= max(TOL, 2 * e_err):  # also a NaN
            bad.append(name)
    if bad:
        d = (compiled[1] - eager[1]).abs()
        print(f"FAIL: accuracy mismatch in {', '.join(bad)}: compiled CNN differs from eager "
              f"(energy per image |diff| {[round(v, 3) for v in d.tolist()]})")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
