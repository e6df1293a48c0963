"""Benchmark: a conv stem (Conv2d + BatchNorm2d) with an MLP head, eager vs torch.compile.

Between stem and head the flattened features are cut to the head's width with a shrinking
(negative) ``F.pad``. Inductor fuses the BatchNorm into that pad and reads the wrong elements,
so the logits are wrong: pytorch/pytorch#195582 (silent wrong values, inference).

    python benchmarks/genuine/conv_stem_mlp.py     # exit 1 when compiled differs from eager
"""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 1e-3


class StemMLP(nn.Module):
    def __init__(self, channels=50, width=50, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(1, channels, (2, 2))
        self.bn = nn.BatchNorm2d(channels)
        self.width = width
        self.head = nn.Sequential(nn.Linear(width, 32), nn.GELU(), nn.Linear(32, classes))

    def forward(self, x):
        x = self.bn(self.conv(x))
        x = x.view(x.shape[0], -1)
        x = F.pad(x, (0, self.width - x.shape[-1]))
        return self.head(x)


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def main() -> int:
    torch.manual_seed(420)
    model = StemMLP().eval()
    x = torch.randn(3, 1, 4, 4)
    with torch.no_grad():
        ref = StemMLP().double().eval()
        ref.load_state_dict(model.state_dict())
        fp64 = ref(x.double())
        eager = model(x)
        compiled = torch.compile(model)(x)
    e_err, c_err = rmse(eager, fp64), rmse(compiled, fp64)
    print(f"conv stem + MLP: logits {tuple(compiled.shape)}; RMSE vs fp64: eager {e_err:.2e}, "
          f"compiled {c_err:.2e} (tol {TOL})")
    if c_err > max(TOL, 2 * e_err):
        print(f"FAIL: accuracy mismatch: compiled logits differ from eager (max abs diff "
              f"{(compiled - eager).abs().max().item():.3g})")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
