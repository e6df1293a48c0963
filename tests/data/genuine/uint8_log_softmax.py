"""A model built in-process whose bug inductor makes before the graph reaches the AOT capture:
``log_softmax`` of a uint8 tensor divided by a float one (the fuzzer's program seed 2026, index
215, reduced). Inductor's joint-graph pattern for log_softmax rewrites the graph with a uint8 sign
(``scalar_tensor(1, dtype=uint8)`` and its negation, 255): the compiled log_softmax is inf where
eager's is finite, torch 2.13.0 and 2.15.0, CPU, inference and training alike. The graph captured
after AOT already holds the rewrite, so it computes the same wrong values eagerly and does not fail
on its own; the graph captured after dynamo does."""

import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([2.25, 1.5, 1.25, 1.25]))

    def forward(self, counts):
        return torch.log_softmax(counts / self.scale, dim=2) * 0.75 + counts


def scaled_counts(batch_size=4):
    g = torch.Generator().manual_seed(0)
    return Scaled(), (torch.randint(0, 16, (batch_size, 2, 8, 4), generator=g, dtype=torch.uint8),)
