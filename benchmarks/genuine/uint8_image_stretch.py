"""Benchmark: a small image classifier over raw uint8 camera frames, eager vs torch.compile.

The model stretches each frame's contrast itself on the uint8 pixels (``x - x.amin(...)``, the
darkest pixel of each row becomes 0) before converting to float and classifying. Inductor's
vectorized CPU reduction returns 0 for the ``amin`` of a uint8 row of 16 or more positive values
(pytorch/pytorch#191499, open: "torch.compile returns 0 for short positive uint8/int8 amin
reductions", x86-64 too once the reduction has 16 or more elements): the stretch becomes a no-op and
the logits are wrong. The failure shows in integers (the uint8 ``amin``), the program compares floats.

    python benchmarks/genuine/uint8_image_stretch.py     # exit 1 when compiled differs from eager
"""

import sys

import torch
import torch.nn as nn

TOL = 1e-3


class Classifier(nn.Module):
    def __init__(self, width=32, classes=5):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8 * width * width, 32), nn.ReLU(), nn.Linear(32, classes))

    def forward(self, frames):
        lo = frames.amin(-1, keepdim=True)             # the darkest pixel of each row
        stretched = (frames - lo).clamp_min(1)          # uint8 arithmetic, as the camera pipeline did
        x = stretched.float() / 255.0
        return self.head(torch.relu(self.conv(x)))


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def main() -> int:
    torch.manual_seed(0)
    model = Classifier().eval()
    frames = torch.randint(16, 240, (4, 3, 32, 32), dtype=torch.uint8)   # a dim sensor: no pixel is 0
    with torch.no_grad():
        ref = Classifier().double().eval()
        ref.load_state_dict(model.state_dict())
        lo = frames.amin(-1, keepdim=True)
        fp64 = ref.head(torch.relu(ref.conv((frames - lo).clamp_min(1).double() / 255.0)))
        eager = model(frames)
        compiled = torch.compile(model)(frames)
    e_err, c_err = rmse(eager, fp64), rmse(compiled, fp64)
    print(f"classifier: {frames.shape[0]} frames; RMSE vs fp64: eager {e_err:.2e}, compiled {c_err:.2e} (tol {TOL})")
    if c_err > max(TOL, 2 * e_err):
        print("FAIL: accuracy mismatch: compiled logits differ from eager")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
