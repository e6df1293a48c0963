"""Benchmark: a click-through-rate ranker over int32 item ids, eager vs torch.compile.

Item ids are int32; a newer catalogue version shifts them by ``VERSION_SHIFT``. Ids near the top
of the int32 range wrap when shifted, and the model flags that with ``ids + shift > ids``, which
selects the row of an indicator embedding. Eager int32 arithmetic wraps (two's complement);
inductor's generated C++ does the add in signed int, where overflow is undefined, and the C++
compiler folds ``x + c > x`` to true: the wrapped ids get the wrong row and the scores are wrong.
pytorch/pytorch#190764 (signed int32 overflow in CPU codegen; fixed by #191132); the failure
needs ids within 16 of 2**31, which random inputs never reach.

    python benchmarks/genuine/ranker_int32.py     # exit 1 when compiled differs from eager
"""

import sys

import torch
import torch.nn as nn

TOL = 1e-3
VERSION_SHIFT = 16


class Ranker(nn.Module):
    def __init__(self, buckets=1000, dim=16):
        super().__init__()
        self.item = nn.Embedding(buckets, dim)
        self.wrapped = nn.Embedding(2, dim)  # row 1: id still valid after the shift, row 0: wrapped
        self.user = nn.Linear(8, dim)
        self.mlp = nn.Sequential(nn.Linear(2 * dim, 32), nn.ReLU(), nn.Linear(32, 1))
        self.buckets = buckets

    def forward(self, ids, user_feats):
        shifted = ids + VERSION_SHIFT
        valid = (shifted > ids).long()
        item = self.item(torch.remainder(ids, self.buckets)) + self.wrapped(valid)
        user = self.user(user_feats)
        return self.mlp(torch.cat([item, user], -1)).squeeze(-1)


def rmse(a, b):
    return (a.double() - b.double()).pow(2).mean().sqrt().item()


def main() -> int:
    torch.manual_seed(0)
    model = Ranker().eval()
    ids = torch.randint(0, 2**31 - 1, (64,), dtype=torch.int32)
    ids[::8] = 2**31 - 1 - torch.arange(8, dtype=torch.int32)  # the newest items: top of the id range
    user = torch.randn(64, 8)
    with torch.no_grad():
        ref = Ranker().double().eval()
        ref.load_state_dict(model.state_dict())
        fp64 = ref(ids, user.double())
        eager = model(ids, user)
        compiled = torch.compile(model)(ids, user)
    e_err, c_err = rmse(eager, fp64), rmse(compiled, fp64)
    print(f"ranker: {ids.numel()} scores; RMSE vs fp64: eager {e_err:.2e}, compiled {c_err:.2e} (tol {TOL})")
    if c_err > max(TOL, 2 * e_err):
        print(f"FAIL: accuracy mismatch: compiled scores differ from eager on "
              f"{int((~torch.isclose(compiled, eager, rtol=1e-3, atol=1e-4)).sum())} of {ids.numel()} items")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
