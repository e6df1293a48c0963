"""bot/fuzz/ops.py: the fuzzer's op catalog. Every template is a valid op for operands of its declared
kinds (run here in eager torch, nothing compiled), the holes it uses are the documented ones, and the
catalog as a whole runs on every dtype a generated program's leaves can have."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch

from bot.fuzz.leaves import DTYPES, FLOATS, INTS
from bot.fuzz.ops import CATALOG, FEATURE_WEIGHTS

HOLES = {"d", "e", "dims", "kd", "n", "k", "s", "dt", "fdt", "idt", "wdt", "out", "w:conv", "w:mm"}
KIND_DTYPES = {"f": FLOATS, "i": INTS, "b": ("bool",), "n": FLOATS + INTS, "a": DTYPES}


def _shape(kind: str) -> tuple:
    rank = kind[1:]
    if rank in ("", "+", "2"):
        return (4, 6)
    return (2, 3, 6, 6) if rank == "4" else (2,) * int(rank)


def _tensor(dtype: str, shape: tuple, g) -> torch.Tensor:
    if dtype == "bool":
        return torch.rand(shape, generator=g) < 0.5
    if dtype in INTS:
        return torch.randint(0 if dtype == "uint8" else -16, 16, shape, generator=g).to(getattr(torch, dtype))
    return (torch.randn(shape, generator=g) * 2).to(getattr(torch, dtype))


def _run(op, dtype: str):
    """Fill ``op``'s holes the way the generator does and run it eagerly; the result."""
    g = torch.Generator().manual_seed(0)
    first = _tensor(dtype, _shape(op.kinds[0]), g)
    env = {"torch": torch, "f": lambda t: t, "x0": first}
    for k, kind in enumerate(op.kinds[1:], 1):
        partner = KIND_DTYPES[kind[0]]
        shape = first.shape[first.dim() - int(kind[1:]):] if kind[1:].isdigit() else first.shape
        env[f"x{k}"] = _tensor(dtype if dtype in partner else partner[0], shape, g)
    env["w_conv"] = _tensor(dtype, (2, first.shape[1], 3, 3), g) if first.dim() == 4 else None
    env["w_mm"] = _tensor(dtype, (first.shape[-1], 3), g)
    holes = {"d": "0", "e": "1", "dims": "(0, -1)", "kd": "True", "n": str(first.shape[0]), "k": "2", "s": "2.5",
             "dt": "f(torch.int32)", "fdt": "f(torch.float32)", "idt": "f(torch.int64)", "wdt": "f(torch.float64)",
             "out": "out",
             "w:conv": "w_conv", "w:mm": "w_mm"}
    text = re.sub(r"\{(\d)\}", r"x\1", op.template)
    text = re.sub(r"\{([\w:]+)\}", lambda m: holes[m.group(1)], text)
    code = text if "\n" in text else f"out = {text}"
    exec(compile(code, op.template, "exec"), env)  # noqa: S102 - the catalog's own templates
    return env["out"]


def test_catalog_entries_are_well_formed():
    features = {op.feature for op in CATALOG}
    assert set(FEATURE_WEIGHTS) <= features, set(FEATURE_WEIGHTS) - features
    assert len({op.template + op.feature for op in CATALOG}) == len(CATALOG)  # no duplicate
    for op in CATALOG:
        assert set(op.flags) <= {"x", "D"}, op
        assert not (op.exact and op.discrete) or op.feature in ("cast",), op
        for kind in op.kinds:
            assert re.fullmatch(r"[fibna](\+|\d)?", kind), (op.template, kind)
        used = {int(n) for n in re.findall(r"\{(\d)\}", op.template)}
        assert 0 in used and used <= set(range(len(op.kinds))), (op.template, op.kinds)
        assert set(re.findall(r"\{([a-z:]+)\}", op.template)) <= HOLES, op.template
        assert ("{out}" in op.template) == ("\n" in op.template), op.template


@pytest.mark.parametrize("op", CATALOG, ids=lambda op: f"{op.feature}:{op.template[:40]}")
def test_every_template_runs_on_its_kind(op):
    kind = op.kinds[0]
    dtype = {"f": "float32", "i": "int64", "b": "bool"}.get(kind[0], "float32")
    out = _run(op, dtype)
    assert isinstance(out, torch.Tensor)
    if op.discrete and op.feature.startswith("compare"):
        assert out.dtype == torch.bool


def test_catalog_covers_every_leaf_dtype():
    ran: Counter = Counter()
    for op in CATALOG:
        for dtype in KIND_DTYPES[op.kinds[0][0]]:
            try:
                _run(op, dtype)
            except (RuntimeError, TypeError, NotImplementedError):
                continue  # the generator rejects such a step and picks another
            ran[dtype] += 1
    assert set(ran) == set(DTYPES)
    for dtype in DTYPES:
        assert ran[dtype] >= 10, (dtype, ran[dtype])


def test_a_partner_of_a_given_rank_is_made_of_that_rank_and_promotes_as_a_0_dim_tensor_does():
    """``n0``: the second operand of a promotion step is a 0-dim tensor (of any number dtype), made
    for it when the program has none; an integer tensor with a 0-dim float becomes that float, a
    float tensor with a 0-dim float64 stays what it was."""
    from bot.fuzz import generate as gen

    st = gen._State(7, 0, 0)
    first = st.add_leaf(dtype="int16", shape=(3, 4))
    made = [gen._pick_partner(st, "n0", first) for _ in range(12)]
    assert all(v.val.dim() == 0 for v in made)
    assert len({v.val.dtype for v in made}) >= 3
    (op,) = [op for op in CATALOG if op.feature == "promote" and op.template == "{0} + {1}"]
    assert _run(op, "int16").dtype == torch.int16      # a 0-dim int16 partner: the tensor's own dtype
