"""A tabular anomaly scorer served in bfloat16: residual MLP blocks, then a batch-statistics
block that centres each feature on the batch mean (``h.sum(0, keepdim=True) / n``) and appends
the batch's pooled summary (``h.sum(0) / n``).

The bug: both sums reduce the same tensor over dim 0; inductor's CPU codegen computes the
reduction once and stores the one accumulator into both buffers, declaring the bf16 copy of the
vectorised accumulator twice: ``error: conflicting declaration 'auto at_BFloat16_tmp_acc0_vec'``
(C++ compile error; bfloat16 and float16, float32 is fine), torch 2.13.0 and 2.15.0, CPU:
https://github.com/pytorch/pytorch/issues/194706 (open; the issue's ``jacfwd`` repro in float16
fails with the same ``conflicting declaration 'auto at_Half_tmp_acc1_vec'``).

A compile error inside one inference graph of about 150 ATen nodes (60 after dynamo); eager
runs fine, the compiled call raises (``InductorError``) and the program dies with it.

    python benchmarks/genuine/anomaly_scorer_bf16.py     # dies on the compile error
"""

import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

TOL = 5e-2


class Block(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, h):
        return h + self.down(F.gelu(self.up(self.norm(h))))


class AnomalyScorer(nn.Module):
    def __init__(self, num_features=24, dim=48, depth=3):
        super().__init__()
        self.inp = nn.Linear(num_features, dim)
        self.blocks = nn.ModuleList(Block(dim, 2 * dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.gate = nn.Linear(dim, dim)
        self.head = nn.Linear(2 * dim, 1)

    def forward(self, x):
        h = F.silu(self.inp(x))
        for block in self.blocks:
            h = block(h)
        h = self.norm(h)
        n = h.shape[0]
        centred = h - h.sum(0, keepdim=True) / n   # batch-centred features
        summary = h.sum(0) / n                     # the batch's pooled summary
        ctx = torch.sigmoid(self.gate(summary)).expand_as(centred) * centred
        score = self.head(torch.cat([centred, ctx], dim=-1)).squeeze(-1)
        return score - torch.logsumexp(score, dim=0)


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def main() -> int:
    torch.manual_seed(0)
    model = AnomalyScorer().eval()
    x = torch.randn(64, 24)
    ref = copy.deepcopy(model).double()
    model = model.to(torch.bfloat16)
    xb = x.to(torch.bfloat16)
    with torch.no_grad():
        want = ref(x.double())
        eager = model(xb)
        compiled = torch.compile(model)(xb)
    e, c = rmse(eager, want), rmse(compiled, want)
    print(f"anomaly scores (bf16, batch {x.shape[0]}): RMSE vs fp64 eager {e:.3e} compiled {c:.3e}")
    if c > max(TOL, 2 * e):
        print("FAIL: compiled scores differ from eager")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
