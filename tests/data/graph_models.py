"""Models for the training and dynamic-shapes minify tests."""

import torch
import torch.nn as nn


class _ReluInBackward(torch.autograd.Function):
    """Forward doubles its input; backward gates the gradient with relu(x): relu appears only in
    the backward graph AOTAutograd hands the compiler."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.relu(x)


class BackwardRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.tanh(_ReluInBackward.apply(self.fc1(x))))


def backward_relu(batch_size=4):
    return BackwardRelu(), (torch.randn(batch_size, 8),)


class SeqMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))).sum(dim=1)


def seq_mlp(batch_size=4):
    return SeqMLP(), (torch.randn(batch_size, 5, 8),)
