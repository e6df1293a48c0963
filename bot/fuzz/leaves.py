"""A generated program's leaves: its inputs and parameters, each a typed tensor spec (dtype, shape,
layout, values) written as one line of Python over a seeded ``torch.Generator``, so the program's
source makes them again bit for bit."""

from __future__ import annotations

import random
from dataclasses import dataclass

DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("uint8", "int8", "int16", "int32", "int64")
# weights: narrow dtypes (uint8, int8, int16, float16, bfloat16) as often as float32, where the
# compiler's dtype handling and promotion have their bugs
DTYPE_WEIGHTS = (1, 3, 2, 2, 2, 2, 3, 3, 3, 1)
LAYOUTS = ("contiguous", "transposed", "expanded", "sliced", "channels_last", "offset")
SIZES = (1, 2, 3, 4, 5, 7, 8)
INT_RANGE = {"uint8": (0, 16), "int8": (-16, 16), "int16": (-64, 64), "int32": (-100, 100), "int64": (-100, 100)}


@dataclass
class Leaf:
    name: str
    dtype: str
    shape: tuple
    layout: str = "contiguous"
    values: str = "randn"       # randn, grid (multiples of 1/4), ints, bools
    param: bool = False         # a parameter (gets a gradient in training mode)

    def code(self) -> str:
        """One expression over generator ``g`` that makes this leaf."""
        base = self._base_shape()
        make = self._values(base)
        return _layout(make, self.layout, self.shape)

    def _base_shape(self) -> tuple:
        s = list(self.shape)
        if self.layout == "transposed":
            s[-1], s[-2] = s[-2], s[-1]
        elif self.layout == "expanded":
            s = [1 if n > 1 else n for n in s]
        elif self.layout == "sliced":
            s[-1] = 2 * s[-1]
        elif self.layout == "offset":
            n = 1
            for k in s:
                n *= k
            s = [n + 3]
        return tuple(s)

    def _values(self, shape: tuple) -> str:
        dt = f"torch.{self.dtype}"
        if self.values == "bools":
            return f"(torch.rand({shape}, generator=g) < 0.5)"
        if self.values == "ints":
            lo, hi = INT_RANGE[self.dtype]
            return f"torch.randint({lo}, {hi}, {shape}, generator=g).to({dt})"
        if self.values == "grid":
            return f"(torch.randint(-8, 9, {shape}, generator=g) / 4).to({dt})"
        return f"(torch.randn({shape}, generator=g) * 2).to({dt})"


def _layout(make: str, layout: str, shape: tuple) -> str:
    if layout == "transposed":
        return f"{make}.transpose(-1, -2)"
    if layout == "expanded":
        return f"{make}.expand{shape}"
    if layout == "sliced":
        return f"{make}[..., ::2]"
    if layout == "channels_last":
        return f"{make}.contiguous(memory_format=torch.channels_last)"
    if layout == "offset":
        return f"{make}[3:].view{shape}" if shape else f"{make}[3:].view(())"
    return make


def random_leaf(rng: random.Random, name: str, *, dtype: str | None = None, shape: tuple | None = None,
                param: bool | None = None) -> Leaf:
    """A leaf of a random (or the given) dtype and shape, in a layout its rank allows."""
    dtype = dtype or rng.choices(DTYPES, DTYPE_WEIGHTS)[0]
    if shape is None:
        rank = rng.choices((0, 1, 2, 3, 4), (1, 4, 7, 4, 4))[0]
        shape = tuple(rng.choice(SIZES) for _ in range(rank))
    shape = tuple(shape)
    is_float = dtype in FLOATS
    if param is None:
        param = is_float and rng.random() < 0.6
    param = param and is_float
    layouts = ["contiguous", "offset"] + (["sliced"] if shape else [])
    if len(shape) >= 2:
        layouts.append("transposed")
    if len(shape) == 4:
        layouts.append("channels_last")
    if not param and any(n > 1 for n in shape):
        layouts.append("expanded")
    layout = "contiguous" if rng.random() < 0.4 else rng.choice(layouts)
    if dtype == "bool":
        values = "bools"
    elif dtype in INTS:
        values = "ints"
    else:
        values = rng.choice(("randn", "grid"))
    return Leaf(name, dtype, shape, layout, values, param)
