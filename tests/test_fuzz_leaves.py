"""bot/fuzz/leaves.py: a generated program's inputs and parameters. Each leaf's one line of Python
makes, from a seeded generator, a tensor of the declared dtype, shape and layout, bit for bit again."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from bot.fuzz.leaves import DTYPES, FLOATS, INT_RANGE, INTS, LAYOUTS, Leaf, random_leaf


def _make(leaf: Leaf, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return eval(leaf.code(), {"torch": torch, "g": g})  # noqa: S307 - the leaf's own code


def _values_of(dtype):
    return "bools" if dtype == "bool" else "ints" if dtype in INTS else "grid"


@pytest.mark.parametrize("dtype,layout", [(d, lay) for d, lay in itertools.product(DTYPES, LAYOUTS)])
def test_leaf_code_makes_the_declared_tensor(dtype, layout):
    shape = (2, 3, 4, 5)
    leaf = Leaf("x", dtype, shape, layout, _values_of(dtype))
    t = _make(leaf)
    assert t.dtype == getattr(torch, dtype) and tuple(t.shape) == shape
    if layout == "transposed":
        assert not t.is_contiguous() and t.stride()[-2] == 1
    elif layout == "expanded":
        assert 0 in t.stride()
    elif layout == "sliced":
        assert t.stride()[-1] == 2
    elif layout == "channels_last":
        assert t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
    elif layout == "offset":
        assert t.storage_offset() == 3
    else:
        assert t.is_contiguous() and t.storage_offset() == 0
    assert torch.equal(t, _make(leaf)), "the same seed must make the same values"
    if dtype in INTS:
        lo, hi = INT_RANGE[dtype]
        assert lo <= int(t.min()) and int(t.max()) < hi


def test_grid_values_are_exact_quarters_and_randn_differs_by_seed():
    t = _make(Leaf("x", "bfloat16", (8, 8), values="grid"))
    assert torch.equal(t.float() * 4, (t.float() * 4).round()) and t.abs().max() <= 2
    a, b = (_make(Leaf("x", "float32", (16,)), seed) for seed in (1, 2))
    assert not torch.equal(a, b)


def test_scalar_leaves():
    for layout in ("contiguous", "offset"):
        t = _make(Leaf("x", "float32", (), layout))
        assert t.dim() == 0


def test_random_leaves_cover_every_dtype_and_layout_and_stay_valid():
    rng = random.Random(0)
    seen_dtypes, seen_layouts = set(), set()
    for k in range(600):
        leaf = random_leaf(rng, f"x{k}")
        seen_dtypes.add(leaf.dtype)
        seen_layouts.add(leaf.layout)
        assert not leaf.param or leaf.dtype in FLOATS  # only float leaves get a gradient
        if leaf.layout == "channels_last":
            assert len(leaf.shape) == 4
        if leaf.layout == "expanded":
            assert not leaf.param
        t = _make(leaf)
        assert tuple(t.shape) == leaf.shape and str(t.dtype) == f"torch.{leaf.dtype}"
    assert seen_dtypes == set(DTYPES) and seen_layouts == set(LAYOUTS)


def test_given_dtype_and_shape_are_kept_and_ints_are_never_params():
    rng = random.Random(1)
    leaf = random_leaf(rng, "w", dtype="int8", shape=[3, 4], param=True)
    assert (leaf.dtype, leaf.shape, leaf.param, leaf.values) == ("int8", (3, 4), False, "ints")
    assert random_leaf(rng, "p", dtype="float16", shape=(2,), param=True).param
