"""A genuine inductor bug (pytorch/pytorch#183986, fixed after torch 2.13): ``index_add`` into a
tensor expanded from zeros inside the compiled graph. Inductor's reinplace pass writes into the
expanded (stride-0) storage, so every row sees every row's additions. A benchmark program around a
small model: it compares compiled with eager and exits 1 on a mismatch. ``--quiet`` makes it say
nothing but its exit status (a program judged by its exit status alone)."""

import sys

import torch


class Scatter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, src, idx):
        h = self.proj(src)
        rows = torch.zeros(1, 8).expand(4, -1)
        return rows.index_add(0, idx, h).relu().sum(0)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Scatter().eval()
    src, idx = torch.randn(3, 8), torch.tensor([0, 1, 0])
    with torch.no_grad():
        expected, got = model(src, idx), torch.compile(model)(src, idx)
    ok = torch.allclose(expected, got, atol=1e-4)
    if "--quiet" not in sys.argv:
        print(f"compiled vs eager: max abs diff {(expected - got).abs().max().item():.4f}"
              + ("" if ok else " (accuracy mismatch)"))
    sys.exit(0 if ok else 1)
