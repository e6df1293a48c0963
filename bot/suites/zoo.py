"""The built-in zoo: small models that are structurally different where compilers go wrong.

Each factory takes a batch size and returns ``(model, example_inputs)``; weights and inputs
come from the caller's seeded RNG. Every model checks on a CPU in a few seconds.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLPReLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(32, 64), nn.Linear(64, 64), nn.Linear(64, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class MLPGeLUSoftplus(nn.Module):
    """GELU hidden layers and a softplus head (softplus lowers through log1p)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(32, 64), nn.Linear(64, 64), nn.Linear(64, 10)

    def forward(self, x):
        return F.softplus(self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x))))))


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean(dim=(2, 3)))


class ResBlock(nn.Module):
    """A ResNet basic block: conv-bn-relu-conv-bn plus the identity, then relu."""

    def __init__(self, c=8):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + x)


class EncoderLayer(nn.Module):
    """A transformer encoder layer: masked softmax attention, residuals, layernorm, relu FFN."""

    def __init__(self, d=32, heads=4, ff=64):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x, pad_mask):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        scores = scores.masked_fill(pad_mask[:, None, None, :], float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(b, t, d)
        x = self.norm1(x + self.out(y))
        return self.norm2(x + self.ff2(torch.relu(self.ff1(x))))


class GRU(nn.Module):
    """A GRU unrolled over a short sequence, with a softplus head."""

    def __init__(self, i=16, hdim=32, steps=4):
        super().__init__()
        self.steps = steps
        self.wx = nn.Linear(i, 3 * hdim)
        self.wh = nn.Linear(hdim, 3 * hdim)
        self.head = nn.Linear(hdim, 4)

    def forward(self, x):
        h = x.new_zeros(x.shape[0], self.wh.in_features)
        for t in range(self.steps):
            xr, xz, xn = self.wx(x[:, t]).chunk(3, dim=-1)
            hr, hz, hn = self.wh(h).chunk(3, dim=-1)
            r = torch.sigmoid(xr + hr)
            z = torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            h = (1 - z) * n + z * h
        return F.softplus(self.head(h))


class EmbedLayerNorm(nn.Module):
    def __init__(self, vocab=100, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(16, d) * 0.02)
        self.norm = nn.LayerNorm(d)
        self.proj = nn.Linear(d, d)

    def forward(self, ids):
        x = self.emb(ids) + self.pos[: ids.shape[1]]
        return torch.tanh(self.proj(self.norm(x))).sum(1)


class Log1pExpWhere(nn.Module):
    """Elementwise math where precision matters: log1p, exp, where, a stable log-sum-exp."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        y = self.fc(x)
        pos = torch.log1p(y.clamp(min=0))
        neg = torch.exp(y.clamp(max=0)) - 1
        z = torch.where(y > 0, pos, neg)
        return z - torch.logsumexp(z, dim=-1, keepdim=True)


class InplaceViews(nn.Module):
    """In-place ops on views: add_, mul_, clamp_min_ through transpose/narrow/view."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 24)
        self.scale = nn.Parameter(torch.ones(6))

    def forward(self, x):
        y = self.fc(x).view(x.shape[0], 4, 6)
        t = y.transpose(1, 2).contiguous()
        head = t.narrow(1, 0, 3)
        head.mul_(2.0)
        t.add_(self.scale[:, None])
        t.clamp_min_(0.0)
        return t.view(x.shape[0], -1) * torch.sigmoid(x)


def _dense(model_cls, features):
    def factory(batch_size):
        return model_cls(), (torch.randn(batch_size, features),)

    return factory


def _image(model_cls, channels, size=8):
    def factory(batch_size):
        return model_cls(), (torch.randn(batch_size, channels, size, size),)

    return factory


def _encoder(batch_size):
    t = 8
    x = torch.randn(batch_size, t, 32)
    lengths = torch.arange(batch_size) % 3 + t - 2  # last positions padded in some rows
    pad_mask = torch.arange(t)[None, :] >= lengths[:, None]
    return EncoderLayer(), (x, pad_mask)


def _gru(batch_size):
    return GRU(), (torch.randn(batch_size, 4, 16),)


def _embed(batch_size):
    return EmbedLayerNorm(), (torch.randint(0, 100, (batch_size, 12)),)


# name -> (factory, default batch size, one-line description)
MODELS = {
    "mlp_relu": (_dense(MLPReLU, 32), 8, "MLP with relu"),
    "mlp_gelu": (_dense(MLPGeLUSoftplus, 32), 8, "MLP with gelu and a softplus head"),
    "conv_bn": (_image(ConvBN, 3), 4, "conv + batchnorm + relu + pooling"),
    "resblock": (_image(ResBlock, 8), 4, "residual block (conv-bn-relu x2 + identity)"),
    "transformer": (_encoder, 4, "transformer encoder layer, masked softmax attention, relu FFN"),
    "gru": (_gru, 8, "GRU unrolled over 4 steps, softplus head"),
    "embed_layernorm": (_embed, 4, "embedding + positional + layernorm + tanh"),
    "log1p_exp_where": (_dense(Log1pExpWhere, 16), 8, "log1p / exp / where / logsumexp"),
    "inplace_views": (_dense(InplaceViews, 24), 8, "in-place ops through views"),
}
