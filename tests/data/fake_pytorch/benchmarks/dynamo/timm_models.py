"""Stand-in for benchmarks/dynamo/timm_models.py (see common.py): two tiny real models."""
import sys

import torch

from common import main


def relu_mlp(bs):
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return m, torch.randn(bs, 8)


def tanh_mlp(bs):
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    return m, torch.randn(bs, 8)


MODELS = {"relu_mlp": relu_mlp, "tanh_mlp": tanh_mlp}

if __name__ == "__main__":
    sys.exit(main(MODELS, {"relu_mlp": 4, "tanh_mlp": 4}))
