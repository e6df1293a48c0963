"""A thumbnail encoder trained on images of several sizes: antialiased bicubic downscaling
(``F.interpolate(..., mode="bicubic", antialias=True)``) under ``torch.compile(dynamic=True)``.

The bug: AOTAutograd traces the backward of the antialiased bicubic upsample with symbolic sizes,
and ``aten._upsample_bicubic2d_aa_backward``'s meta receives its output size as a list of symbolic
ints; the op's schema parser asserts (``isIntList() INTERNAL ASSERT FAILED ... Expected IntList
but got GenericList``), so the compile fails in AOTAutograd (torch 2.13.0 and 2.15.0, CPU):
https://github.com/pytorch/pytorch/issues/197622 (open). Inductor
decomposes the op first and passes; the program compiles with ``backend="aot_eager"``, as one does
to tell a dynamo/AOTAutograd problem from an inductor one. Eager and static shapes are fine.

A failure of the AOTAutograd stage: torch's repro-after-AOT wraps inductor only, so the graph is
captured after dynamo and minified with the first failing backend, forward and backward together.
"""

import sys

import torch
import torch.nn.functional as F


class Thumbnailer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = torch.nn.Parameter(torch.ones(1, 3, 1, 1))   # a learned colour balance, before resizing
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        x = F.interpolate(x * self.gain, scale_factor=0.5, mode="bicubic", antialias=True)
        x = torch.relu(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))


def main() -> int:
    torch.manual_seed(0)
    model = Thumbnailer()
    compiled = torch.compile(model, backend="aot_eager", dynamic=True)
    for size in (32, 48):
        x = torch.randn(2, 3, size, size)
        target = torch.randn(2, 4)
        eager_loss = F.mse_loss(model(x), target)
        eager_loss.backward()
        try:
            loss = F.mse_loss(compiled(x), target)
            loss.backward()
        except RuntimeError as exc:  # the benchmark reports a failed compile and stops
            print(f"size {size}: the compiled training step failed: {type(exc).__name__}: {str(exc)[:300]}",
                  file=sys.stderr)
            return 1
        print(f"size {size}: loss {loss.item():.6f} (eager {eager_loss.item():.6f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
