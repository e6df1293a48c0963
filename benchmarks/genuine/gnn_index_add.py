"""Benchmark: a two-layer graph convolution (message passing) network, eager vs torch.compile.

Each layer sums its neighbours' messages into a zero tensor expanded to one row per node
(``torch.zeros(1, F).expand(N, F).index_add(0, dst, msg)``). Inductor rewrites that index_add
in place onto the expanded (stride-0) zeros, so rows that should stay apart share one row of
storage: pytorch/pytorch#183986 (silent wrong values; forward only).

    python benchmarks/genuine/gnn_index_add.py     # exit 1 when compiled differs from eager
"""

import sys

import torch
import torch.nn as nn

TOL = 1e-3


class GraphConv(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.msg = nn.Linear(dim, dim)
        self.upd = nn.Linear(2 * dim, dim)

    def forward(self, x, src, dst):
        messages = self.msg(x)[src]
        agg = torch.zeros(1, x.shape[1], dtype=x.dtype).expand(x.shape[0], -1)
        agg = agg.index_add(0, dst, messages)
        return torch.relu(self.upd(torch.cat([x, agg], dim=1)))


class GNN(nn.Module):
    def __init__(self, dim=16, classes=4):
        super().__init__()
        self.layers = nn.ModuleList([GraphConv(dim), GraphConv(dim)])
        self.head = nn.Linear(dim, classes)

    def forward(self, x, src, dst):
        for layer in self.layers:
            x = layer(x, src, dst)
        return self.head(x)


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def main() -> int:
    torch.manual_seed(0)
    nodes, edges = 12, 30
    model = GNN().eval()
    x = torch.randn(nodes, 16)
    src = torch.randint(0, nodes, (edges,))
    dst = torch.randint(0, nodes, (edges,))
    with torch.no_grad():
        ref = GNN().double().eval()
        ref.load_state_dict(model.state_dict())
        fp64 = ref(x.double(), src, dst)
        eager = model(x, src, dst)
        compiled = torch.compile(model)(x, src, dst)
    e_err, c_err = rmse(eager, fp64), rmse(compiled, fp64)
    print(f"gnn: node logits {tuple(compiled.shape)}; RMSE vs fp64: eager {e_err:.2e}, "
          f"compiled {c_err:.2e} (tol {TOL})")
    if c_err > max(TOL, 2 * e_err):
        print(f"FAIL: accuracy mismatch: compiled GNN logits differ from eager (max abs diff "
              f"{(compiled - eager).abs().max().item():.3g})")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
