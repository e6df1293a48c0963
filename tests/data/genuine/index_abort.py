"""A genuine inductor bug (pytorch/pytorch#195402, present in torch 2.13): an int8 lookup table
indexed by ids that include an invalid one. Eager raises ``IndexError``; inductor's generated C++
throws its bounds-check exception inside a parallel (OpenMP) loop, where it cannot be caught, and
the process dies with SIGABRT. A benchmark program that expects the compiled model to raise what
eager raises."""

import sys

import torch


class Lookup(torch.nn.Module):
    def __init__(self, docs=1000, dim=64):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.table = torch.randint(-127, 127, (docs, dim), dtype=torch.int8, generator=g)
        self.scale = torch.rand(docs, 1, generator=g)

    def forward(self, ids, q):
        return (self.table[ids].float() * self.scale[ids] * q[:, None, :]).sum(-1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Lookup().eval()
    ids, q = torch.randint(0, 1000, (8, 512)), torch.randn(8, 64)
    ids[5, 300:] = 1000   # padding slots carry the invalid id
    try:
        model(ids, q)
    except IndexError as exc:
        print(f"eager raises IndexError: {exc}")
    with torch.no_grad():
        try:
            torch.compile(model)(ids, q)
        except IndexError:
            print("compiled raises IndexError too")
            sys.exit(0)
    print("compiled returned a result for invalid ids")
    sys.exit(1)
