"""Generate one valid program from (seed, index), deterministically.

A program is built step by step and each step is run eagerly as it is chosen, twice: as written
(its dtypes) and *wide* (every float in float64, every integer in int64, the program's own casts
widened too). A step is kept only when it runs, its float results are finite, its integer and bool
results equal the wide ones (no overflow, no out-of-range cast, no float-to-int result that depends
on rounding) and, where it is discrete in a computed float (floor, compare, argmax, a cast to an
integer), a small change of that float leaves its result unchanged: a compiler may round
differently, so a result that flips on rounding is not a bug. A program whose outputs carry no
gradient, or whose backward fails, is not kept either; the next attempt of the same (seed, index)
is generated instead. So every program runs eagerly, with no undefined behaviour, forward and
backward, and the same (seed, index) always gives the same program on the same torch.
"""

from __future__ import annotations

import hashlib
import random
import re
import warnings
from dataclasses import dataclass, field

from bot.fuzz.leaves import FLOATS, INTS, Leaf, random_leaf
from bot.fuzz.ops import CATALOG, FEATURE_WEIGHTS, Op

MAX_NUMEL = 4096
ATTEMPTS = 40
# steps per program: short ones most (2-6 steps: a few kernels, a fast compile, a small repro)
STEPS = (2, 3, 4, 5, 6, 7, 8)
STEP_WEIGHTS = (3, 4, 4, 3, 2, 1, 1)
# how often an op takes a new input of its own (any dtype its kind allows, narrow ones often) rather
# than a value the program has: without it, the float parameters every program starts from feed
# most steps, and an integer reduction (a uint8 amin) is rare
FRESH_OPERAND = 0.3
EPS = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1.2e-7, "float64": 2.3e-16}


class Rejected(Exception):
    """This step (or this attempt) is not a valid program."""


@dataclass
class Var:
    name: str
    val: object            # the tensor as the program computes it
    wide: object           # the same in float64 / int64
    exact: bool = True     # a float value the compiler must reproduce bit for bit
    err: float = 0.0       # the relative rounding error it may carry otherwise
    leaf: Leaf | None = None
    used: bool = False


@dataclass
class Program:
    """A generated program: its leaves (inputs and parameters), its steps, its outputs."""

    seed: int
    index: int
    attempt: int
    leaves: list[Leaf] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    features: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return program_name(self.seed, self.index)

    @property
    def generator_seed(self) -> int:
        return generator_seed(self.seed, self.index, self.attempt)


def program_name(seed: int, index: int) -> str:
    """A check's model name: its seed and index (zero-padded, so names sort in index order)."""
    return f"fuzz-s{seed}-i{index:06d}"


NAME = re.compile(r"fuzz-s(\d{1,18})-i(\d{6,12})")


def parse_name(name: str) -> tuple[int, int] | None:
    m = NAME.fullmatch(name or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def generator_seed(seed: int, index: int, attempt: int) -> int:
    digest = hashlib.sha256(f"minify-action fuzz {seed} {index} {attempt}".encode()).hexdigest()
    return int(digest[:15], 16)


# how often a program runs as a training step (forward and backward, gradients compared) and with
# dynamic shapes, when the run keeps the default settings (inference, static): the backward and the
# symbolic-size code paths are where a good share of inductor's bugs live
TRAINING_SHARE = 0.35
DYNAMIC_SHARE = 0.2


# settings every program is checked with (as PyTorch's own fuzzer does): ``item()`` and ops whose
# output shape depends on the data (nonzero, a boolean mask) are traced into the graph with unbacked
# sizes instead of breaking it, so inductor compiles them; and inductor rounds every float16 /
# bfloat16 intermediate as eager does (``emulate_precision_casts``), so a compiled program that keeps
# a fused intermediate in float32 (a min's backward comparing an unrounded average with its rounded
# minimum) is not a finding: a compiler may keep more precision, and torch documents that it does. A
# finding's config diff says whether its failure needs them
CONFIG = {"dynamo.capture_scalar_outputs": True, "dynamo.capture_dynamic_output_shape_ops": True,
          "inductor.emulate_precision_casts": True}


def settings_of(seed: int, index: int) -> dict:
    """The settings program (seed, index) proposes for its check: :data:`CONFIG`; ``mode`` training
    for about :data:`TRAINING_SHARE` of the programs, ``dynamic`` for about :data:`DYNAMIC_SHARE`; the
    same for the same (seed, index), so a finding is checked again under the settings it was found
    with."""
    rng = random.Random(generator_seed(seed, index, -1))
    out: dict = {"config": dict(CONFIG)}
    if rng.random() < TRAINING_SHARE:
        out["mode"] = "training"
    if rng.random() < DYNAMIC_SHARE:
        out["dynamic"] = True
    return out


def widen(dt):
    import torch

    if dt.is_floating_point:
        return torch.float64
    return dt if dt == torch.bool else torch.int64


def as_written(dt):
    return dt


def generate(seed: int, index: int) -> Program:
    """The program of (seed, index): the first attempt that is valid."""
    last = None
    for attempt in range(ATTEMPTS):
        try:
            return _attempt(seed, index, attempt)
        except Rejected as exc:
            last = exc
    raise Rejected(f"no valid program for seed {seed} index {index} in {ATTEMPTS} attempts ({last})")


class _State:
    def __init__(self, seed: int, index: int, attempt: int):
        import torch

        self.rng = random.Random(generator_seed(seed, index, attempt))
        self.gen = torch.Generator().manual_seed(generator_seed(seed, index, attempt))
        self.program = Program(seed, index, attempt)
        self.vars: list[Var] = []
        self.count = 0

    def new_name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def add_leaf(self, **kw) -> Var:
        import torch

        param = kw.pop("param", None)
        leaf = random_leaf(self.rng, "", param=param, **kw)
        leaf.name = self.new_name("p" if leaf.param else "x")
        val = eval(leaf.code(), {"torch": torch, "g": self.gen})  # noqa: S307 - our own generated line
        if leaf.param:
            val = val.detach().requires_grad_(True)
        var = Var(leaf.name, val, val.detach().to(widen(val.dtype)), leaf=leaf)
        self.program.leaves.append(leaf)
        self.vars.append(var)
        return var


def _attempt(seed: int, index: int, attempt: int) -> Program:
    st = _State(seed, index, attempt)
    for _ in range(st.rng.randint(1, 3)):
        st.add_leaf()
    if not any(v.leaf.param for v in st.vars):
        st.add_leaf(dtype=st.rng.choice(FLOATS), param=True)
    steps = st.rng.choices(STEPS, STEP_WEIGHTS)[0]
    for _ in range(steps):
        for _try in range(12):
            try:
                _step(st)
                break
            except Rejected:
                continue
    _choose_outputs(st)
    _check_backward(st)
    return st.program


def _choose_outputs(st: _State) -> None:
    computed = [v for v in st.vars if v.leaf is None]
    outs = [v for v in computed if not v.used][-5:]
    if not any(v.val.requires_grad for v in outs):
        grad = [v for v in computed if v.val.requires_grad and v.val.is_floating_point()]
        if not grad:
            raise Rejected("no output carries a gradient")
        outs.append(grad[-1])
    if len(st.program.steps) < 2:
        raise Rejected("too few steps")
    st.program.outputs = [v.name for v in outs]


def _check_backward(st: _State) -> None:
    """The loss the judge's training mode takes (the mean of every output) has a finite backward."""
    import torch

    outs = [next(v for v in st.vars if v.name == n).val for n in st.program.outputs]
    loss = sum(o.sum() / max(o.numel(), 1) for o in outs if o.requires_grad)
    try:
        loss.backward()
    except Exception as exc:  # noqa: BLE001 - any backward failure rejects the attempt
        raise Rejected(f"backward: {type(exc).__name__}") from None
    for v in st.vars:
        if v.leaf is not None and v.leaf.param and v.val.grad is not None:
            if not bool(torch.isfinite(v.val.grad).all()):
                raise Rejected("non-finite gradient")


def _pick_op(st: _State) -> Op:
    features = sorted({op.feature for op in CATALOG})
    feature = st.rng.choices(features, [FEATURE_WEIGHTS.get(f, 1) for f in features])[0]
    return st.rng.choice([op for op in CATALOG if op.feature == feature])


def _kind_ok(kind: str, v: Var) -> bool:
    t = v.val
    cls, rank = kind[0], kind[1:]
    name = str(t.dtype).removeprefix("torch.")
    if cls == "f" and name not in FLOATS or cls == "i" and name not in INTS or cls == "b" and name != "bool":
        return False
    if cls == "n" and name == "bool":
        return False
    if t.numel() > MAX_NUMEL:
        return False
    if rank == "+":
        return t.dim() >= 1
    return t.dim() == int(rank) if rank else True


def _pick_first(st: _State, kind: str) -> Var:
    fits = [v for v in st.vars if _kind_ok(kind, v)]
    if not fits or st.rng.random() < FRESH_OPERAND:
        cls, rank = kind[0], kind[1:]
        dtype = {"f": st.rng.choice(FLOATS), "i": st.rng.choice(INTS), "b": "bool"}.get(cls)
        shape = None
        if rank and rank != "+":
            shape = tuple(st.rng.choice((2, 3, 4, 5)) for _ in range(int(rank)))
        elif rank == "+":
            shape = (st.rng.choice((2, 3, 4)), st.rng.choice((3, 5)))
        var = st.add_leaf(dtype=dtype, shape=shape)
        return var if _kind_ok(kind, var) else _reject("no operand")
    weights = [1 + k for k in range(len(fits))]  # the recent ones more often
    return st.rng.choices(fits, weights)[0]


def _pick_partner(st: _State, kind: str, first: Var) -> Var:
    import torch

    fits = []
    for v in st.vars:
        if v is first or not _kind_ok(kind, v):
            continue
        try:
            if torch.broadcast_shapes(v.val.shape, first.val.shape) == first.val.shape:
                fits.append(v)
        except RuntimeError:
            continue
    if fits and st.rng.random() < 0.7:
        return st.rng.choice(fits)
    rank = kind[1:]
    # a partner of a given rank takes the first's trailing dims (``n0``: a 0-dim tensor, for promotion)
    dims = first.val.shape[max(0, first.val.dim() - int(rank)):] if rank.isdigit() else first.val.shape
    shape = tuple(n if st.rng.random() < 0.6 else 1 for n in dims)
    if shape and not rank.isdigit() and st.rng.random() < 0.2:
        shape = shape[1:]
    cls = kind[0]
    dtype = {"f": st.rng.choice(FLOATS), "i": st.rng.choice(INTS), "b": "bool"}.get(cls)
    if cls in "na":
        dtype = st.rng.choice(FLOATS + INTS)
    return st.add_leaf(dtype=dtype, shape=shape)


def _reject(why: str):
    raise Rejected(why)


def _step(st: _State) -> None:
    op = _pick_op(st)
    first = _pick_first(st, op.kinds[0])
    operands = [first] + [_pick_partner(st, k, first) for k in op.kinds[1:]]
    out = st.new_name("v")
    code = _fill(st, op, operands, out)
    val, wide = _run(st, code, operands, out)
    var = _judge_step(st, op, operands, out, code, val, wide)
    for v in operands:
        v.used = True
    st.vars.append(var)
    st.program.steps.append(code)
    st.program.features.append(f"{op.feature}:{','.join(_dtname(v.val) for v in operands)}->{_dtname(val)}")


def _dtname(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _fill(st: _State, op: Op, operands: list[Var], out: str) -> str:
    t = operands[0].val
    rank = t.dim()
    rng = st.rng
    holes: dict[str, str] = {}
    text = op.template
    if "{d}" in text or "{n}" in text or "{e}" in text:
        if rank == 0:
            _reject("needs a dimension")
        d = rng.randrange(rank)
        holes["d"], holes["n"] = str(d), str(t.shape[d])
        if "{e}" in text:
            others = [k for k in range(rank) if k != d]
            holes["e"] = str(rng.choice(others)) if others else _reject("needs two dimensions")
    if "{dims}" in text:
        if rank == 0:
            _reject("needs a dimension")
        dims = sorted(rng.sample(range(rank), rng.randint(1, rank)))
        holes["dims"] = str(tuple(d - rank if rng.random() < 0.3 else d for d in dims))
    holes["kd"] = str(rng.random() < 0.5)
    holes["k"] = str(rng.randint(1, 3))
    holes["s"] = rng.choice(("0.5", "2.5", "-1.5", "3.0", "0.75"))
    holes["dt"] = f"f(torch.{rng.choice(FLOATS + INTS + ('bool',))})"
    holes["fdt"] = f"f(torch.{rng.choice(FLOATS)})"
    holes["idt"] = f"f(torch.{rng.choice(INTS)})"
    own = _dtname(t)
    wide = [d for d in ("float32", "float64") if own not in FLOATS or FLOATS.index(d) >= FLOATS.index(own)]
    holes["wdt"] = f"f(torch.{rng.choice(wide + ([own] if own in FLOATS else []))})"
    holes["out"] = out
    text = _weights(st, text, t)
    for k, name in enumerate(v.name for v in operands):
        text = text.replace("{%d}" % k, name)
    text = re.sub(r"\{(\w+)\}", lambda m: holes.get(m.group(1), m.group(0)), text)
    return text if "\n" in text else f"{out} = {text}"


def _weights(st: _State, text: str, t) -> str:
    """``{w:conv}``, ``{w:mm}``: a new parameter shaped for the op, of the operand's dtype."""
    if "{w:" not in text:
        return text
    dtype = _dtname(t)
    if "{w:conv}" in text:
        shape = (st.rng.choice((2, 4)), t.shape[1], 3, 3)
        w = st.add_leaf(dtype=dtype, shape=shape, param=True)
        return text.replace("{w:conv}", w.name)
    w = st.add_leaf(dtype=dtype, shape=(t.shape[-1], st.rng.choice((2, 3, 5))), param=True)
    return text.replace("{w:mm}", w.name)


def _run(st: _State, code: str, operands: list[Var], out: str):
    import torch

    env = {"torch": torch, "f": as_written, **{v.name: v.val for v in st.vars if v.name in code}}
    wenv = {"torch": torch, "f": widen, **{v.name: v.wide for v in st.vars if v.name in code}}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # a step that warns (var of one element) is judged by its result
            exec(code, env)  # noqa: S102 - a generated line over our own variables
            with torch.no_grad():
                exec(code, wenv)  # noqa: S102
    except Exception as exc:  # noqa: BLE001 - an op that does not run eagerly is not kept
        raise Rejected(f"eager: {type(exc).__name__}") from None
    val, wide = env[out], wenv[out]
    if not isinstance(val, torch.Tensor) or not isinstance(wide, torch.Tensor):
        _reject("not a tensor")
    if val.numel() == 0 or val.numel() > MAX_NUMEL or val.shape != wide.shape:
        _reject("size")
    return val, wide.detach()


def _judge_step(st: _State, op: Op, operands: list[Var], out: str, code: str, val, wide) -> Var:
    """The step's result as a variable, or Rejected when it is not valid (module docstring)."""
    import torch

    floats_in = [v for v in operands if v.val.is_floating_point()]
    err = max([v.err for v in floats_in] + [EPS.get(_dtname(v.val), 0.0) for v in floats_in]
              + [EPS.get(_dtname(val), 0.0)])
    inexact = [v for v in floats_in if not v.exact]
    v = val.detach()
    if v.is_floating_point():
        if not bool(torch.isfinite(v).all()) or not bool(torch.isfinite(wide).all()):
            _reject("non-finite")
        if float(v.abs().max()) > 1e4:
            _reject("too large")
        diff = ((v.double() - wide.double()).abs() / (wide.double().abs() + 1)).max()
        if float(diff) > max(1e-3, 100 * err):
            _reject("rounding dominates")
    elif not torch.equal(v.to(torch.int64), wide.to(torch.int64)):
        _reject("integer result differs from the wide one (overflow or rounding)")
    discrete = op.discrete or not v.is_floating_point()
    if discrete and inexact:
        _stable(st, code, operands, inexact, out, wide, err)
    if not v.is_floating_point() or discrete:
        return Var(out, val, wide, exact=True)
    exact = op.exact and not inexact
    return Var(out, val, wide, exact=exact, err=0.0 if exact else err)


def _stable(st: _State, code: str, operands: list[Var], inexact: list[Var], out: str, wide, err: float) -> None:
    """The discrete result does not move when the computed floats it reads move by their rounding."""
    import torch

    delta = max(32 * err, 1e-6)
    for sign in (1.0, -1.0):
        env = {"torch": torch, "f": widen, **{v.name: v.wide for v in st.vars if v.name in code}}
        for v in inexact:
            w = v.wide
            pattern = torch.ones(w.numel(), dtype=torch.float64)
            pattern[1::2] = -1
            env[v.name] = w + sign * delta * (w.abs() + 1) * pattern.reshape(w.shape)
        with torch.no_grad():
            exec(code, env)  # noqa: S102
        moved = env[out]
        if moved.shape != wide.shape:
            _reject("discrete result moves")
        if wide.is_floating_point():
            if float((moved - wide).abs().max()) > 10 * delta * (float(wide.abs().max()) + 1):
                _reject("discrete result moves")
        elif not torch.equal(moved.to(torch.int64), wide.to(torch.int64)):
            _reject("discrete result moves")
