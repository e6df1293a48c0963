"""Benchmark: an int8 dense retriever (query encoder, int8 document index, candidate re-scoring).

Three compiled stages with graph breaks between them (the candidate count is read back with
``.item()``). The re-scoring stage looks candidates up by id; a candidate list padded with an
invalid id (``num_docs``) must raise ``IndexError``, as eager does. In inductor's generated C++
the bounds check throws inside a parallel (OpenMP) loop, where the exception cannot be caught:
the process dies with SIGABRT ("terminate called ... index out of bounds"):
pytorch/pytorch#195402 (hard crash in one graph of several; needs the edge id in the input).

    python benchmarks/genuine/retriever_int8.py     # dies with SIGABRT on torch 2.13
"""

import sys

import torch
import torch.nn as nn


class Retriever(nn.Module):
    def __init__(self, vocab=500, dim=64, docs=1000):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.proj = nn.Linear(dim, dim)
        g = torch.Generator().manual_seed(1)
        index = torch.randn(docs, dim, generator=g)
        self.scale = index.abs().amax(1, keepdim=True) / 127
        self.index = torch.round(index / self.scale).to(torch.int8)
        self.docs = docs

    def encode(self, tokens):
        return torch.nn.functional.normalize(self.proj(self.embed(tokens)), dim=-1)

    def forward(self, tokens, candidates):
        q = self.encode(tokens)
        n = int((candidates < self.docs).sum().item())  # graph break: how many real candidates
        if n == 0:
            return q.new_zeros(candidates.shape)
        docs = self.index[candidates].float() * self.scale[candidates]
        return (docs * q[:, None, :]).sum(-1) * 2.0


def run(fn, tokens, candidates):
    try:
        return fn(tokens, candidates), None
    except (IndexError, RuntimeError) as e:
        return None, type(e).__name__


def main() -> int:
    torch.manual_seed(0)
    model = Retriever().eval()
    compiled = torch.compile(model)
    tokens = torch.randint(0, 500, (8, 12))
    good = torch.randint(0, 1000, (8, 512))
    padded = good.clone()
    padded[5, 300:] = model.docs  # padding slots carry the invalid id num_docs
    ok = True
    with torch.no_grad():
        for name, cand in (("valid candidates", good), ("padded candidates", padded)):
            e, e_err = run(model, tokens, cand)
            c, c_err = run(compiled, tokens, cand)
            if e_err or c_err:
                print(f"{name}: eager raised {e_err}, compiled raised {c_err}")
                ok = ok and e_err == c_err
            else:
                diff = (e - c).abs().max().item()
                print(f"{name}: scores {tuple(c.shape)}, max abs diff {diff:.2e}")
                if not torch.allclose(e, c, rtol=1e-3, atol=1e-4):
                    print(f"FAIL: accuracy mismatch in {name}")
                    ok = False
    print("PASS" if ok else "FAIL: compiled retriever does not behave like eager")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
