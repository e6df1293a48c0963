"""The fuzzer's op catalog: what a generated program may do, as templates over typed operands.

Each :class:`Op` is one line (or a few) of Python over operands ``{0}``, ``{1}``, ``{2}`` with
holes the generator fills (:mod:`bot.fuzz.generate`):

  {d} {e}       two distinct dimensions of operand 0 (``{e}`` only when it has two)
  {dims}        a non-empty tuple of operand 0's dimensions
  {kd}          True or False (keepdim)
  {n}           operand 0's size along ``{d}``
  {k}           a small positive int; {s} a small float scalar (exact in every float dtype)
  {dt} {fdt} {idt}  a dtype (any / float / integer), written ``f(torch.X)`` so that the fp64
                reference runs the program without its narrowing casts
  {wdt}         a float dtype at least as wide as operand 0's (float32 or float64; operand 0's own
                dtype when it is a float)
  {out}         the result's name, for ops written as several statements (in-place on a fresh clone)

Operand kinds: ``f`` float, ``i`` integer (not bool), ``b`` bool, ``n`` int or float, ``a`` any;
a digit after it is the exact rank, ``+`` rank >= 1. The second operand of a binary op is any
variable of its kind that broadcasts with the first (or a new input made to).

Flags: ``x`` the op is exact (its float result is a value its operands hold, or a sum exact on a
grid), so a discrete op after it needs no margin; ``D`` the op is discrete in a float operand
(floor, compare, argmax, a cast to an integer): the generator keeps it only where a small change of
a computed operand leaves the result unchanged, so a compiler's legitimate rounding cannot flip it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    feature: str        # coverage name: the family of code this exercises
    kinds: tuple        # operand kinds, e.g. ("f+", "f")
    template: str
    flags: str = ""

    @property
    def exact(self) -> bool:
        return "x" in self.flags

    @property
    def discrete(self) -> bool:
        return "D" in self.flags


def _ops(feature: str, kinds: str, flags: str, *templates: str) -> list[Op]:
    return [Op(feature, tuple(kinds.split()), t, flags) for t in templates]


CATALOG: list[Op] = [
    # elementwise float math (bounded so that no input overflows)
    *_ops("unary", "f", "", "torch.sin({0})", "torch.tanh({0})", "torch.sigmoid({0})",
          "torch.exp({0}.clamp(-8, 8))", "torch.log1p({0}.abs())", "torch.sqrt({0}.abs())",
          "torch.rsqrt({0}.abs() + 1)", "torch.erf({0})", "torch.nn.functional.gelu({0})",
          "torch.nn.functional.silu({0})", "torch.nn.functional.softplus({0})", "torch.atan({0})",
          "torch.reciprocal({0}.abs() + 1)", "{0} * {0}", "torch.expm1({0}.clamp(-4, 4))"),
    *_ops("unary_exact", "n", "x", "torch.neg({0})", "torch.abs({0})", "torch.relu({0})",
          "{0}.clamp(-2, 2)", "torch.sign({0})"),
    *_ops("binary", "n n", "", "{0} + {1}", "{0} - {1}", "{0} * {1}", "{0} / ({1}.abs() + 1)",
          "torch.maximum({0}, {1})", "torch.minimum({0}, {1})", "{0} * {s} + {1}"),
    *_ops("binary_float", "f f", "", "torch.atan2({0}, {1})", "torch.hypot({0}, {1})",
          "torch.lerp({0}, {1}, 0.25)", "torch.copysign({0}, {1})"),
    *_ops("where", "b n n", "x", "torch.where({0}, {1}, {2})"),
    # integer arithmetic: floor division, remainder, shifts, bitwise
    *_ops("int_div", "i i", "", "torch.div({0}, {1}.abs() + 1, rounding_mode='floor')",
          "torch.div({0}, {1}.abs() + 1, rounding_mode='trunc')", "torch.remainder({0}, {1}.abs() + 1)",
          "torch.fmod({0}, {1}.abs() + 1)", "{0} & {1}", "{0} | {1}", "{0} ^ {1}"),
    *_ops("int_scalar", "i", "", "{0} // {k}", "{0} % {k}", "{0} << {k}", "{0} >> {k}", "{0} * {k} - {k}"),
    *_ops("float_floordiv", "n", "D", "{0} // {s}", "torch.remainder({0}, {s})", "torch.floor({0} * 4)",
          "torch.round({0} * 2)", "torch.trunc({0})", "torch.ceil({0})"),
    # type promotion across categories: a 0-dim tensor promotes a tensor of a lower category only (an
    # integer tensor and a 0-dim float are that float) and never one of its own (int8 with a 0-dim int64
    # stays int8); a Python scalar likewise (an integer tensor with a float scalar is the default float
    # dtype); bool arithmetic; tensors of two dtypes joined
    *_ops("promote", "n n0", "", "{0} + {1}", "{0} * {1}", "torch.where({0} > 0, {0}, {1})",
          "{0}.clamp(min={1})", "torch.maximum({0}, {1})"),
    *_ops("promote_scalar", "n", "", "torch.where({0} > 0, {0}, {s})", "{0}.clamp(max={s})",
          "torch.add({0}, {0}, alpha={k})", "torch.true_divide({0}, {k})", "{0}.masked_fill({0} > 0, {k})"),
    *_ops("bool_arith", "b a", "", "{0} + {1}", "{0} * {1}", "torch.maximum({0}, {1})"),
    # bool shifted: eager promotes it with the int (an int64 result)
    *_ops("bool_shift", "b", "", "{0} << {k}", "{0} >> {k}", "torch.bitwise_left_shift({0}, {k})"),
    *_ops("join", "a+ a", "", "torch.cat([{0}, {1}.expand_as({0})], dim={d})",
          "torch.stack([{0}, {1}.expand_as({0})], dim={d})"),
    # comparisons and logic
    *_ops("compare", "n n", "D", "{0} < {1}", "{0} >= {1}", "{0} == {1}", "{0} != {1}"),
    *_ops("compare_scalar", "n", "D", "{0} > 0", "{0} <= {s}"),
    *_ops("logical", "b b", "x", "{0} & {1}", "{0} | {1}", "torch.logical_xor({0}, {1})", "~{0}"),
    # casts and type promotion
    *_ops("cast", "a", "D", "{0}.to({dt})", "{0}.to({idt})"),
    *_ops("cast_float", "a", "x", "{0}.to({fdt})"),
    # reductions over any dims, keepdim, dtype
    *_ops("reduce", "n+", "", "torch.sum({0}, dim={dims}, keepdim={kd})",
          "torch.mean({0}.to({fdt}), dim={dims}, keepdim={kd})", "torch.amax({0}, dim={dims}, keepdim={kd})",
          "torch.amin({0}, dim={dims}, keepdim={kd})", "torch.sum({0}, dim={dims}, dtype={dt})",
          "torch.var({0}.to({fdt}), dim={d}, keepdim={kd})", "torch.logsumexp({0}.to({fdt}), dim={d})",
          "torch.linalg.vector_norm({0}.to({fdt}), dim={dims})", "torch.prod({0}.clamp(-2, 2), dim={d})"),
    *_ops("reduce_bool", "a+", "D", "torch.any({0}, dim={d}, keepdim={kd})", "torch.all({0}, dim={d})",
          "torch.count_nonzero({0}, dim={d})"),
    # a reduction of a reduction: an inner result the compiler may keep in another dtype (a bf16 double
    # reduction), and the output dtype of reductions over narrow and integer inputs
    *_ops("reduce_twice", "n+", "", "torch.sum({0}, dim={d}).sum()", "torch.amax({0}, dim={d}).amin()",
          "torch.mean({0}.to({fdt}), dim={d}).sum()", "torch.amin({0}, dim={d}, keepdim=True).sum({d})",
          "({0}.sum({d}, keepdim=True) - {0}.amax({d}, keepdim=True)).sum()"),
    *_ops("reduce_full", "a", "", "{0}.sum()", "{0}.amax()", "{0}.amin()", "{0}.to({fdt}).mean()"),
    # a result dtype given to the op: the accumulation and the output in another dtype than the input
    # ({wdt}: never narrower than the input, so that no float result is rounded to fewer bits inside
    # the op, where a compiler may legitimately round once less; an integer or bool result is exact, or
    # discrete and so kept only where rounding cannot move it)
    *_ops("dtype_arg", "n+", "", "torch.cumsum({0}, dim={d}, dtype={wdt})",
          "torch.prod({0}.clamp(-2, 2), dim={d}, dtype={wdt})", "torch.prod({0}, dim={d}, dtype={idt})",
          "torch.prod({0}, dim={d}, dtype=f(torch.bool))", "torch.mean({0}, dim={dims}, dtype={wdt})",
          "torch.nansum({0}, dim={d}, dtype={wdt})"),
    *_ops("argreduce", "n+", "D", "torch.argmax({0}, dim={d}, keepdim={kd})", "torch.argmin({0}, dim={d})",
          "torch.max({0}, dim={d}).indices", "torch.min({0}, dim={d}, keepdim={kd}).values"),
    *_ops("scan", "n+", "", "torch.cumsum({0}, dim={d})", "torch.cummax({0}, dim={d}).values",
          "torch.cumprod({0}.clamp(-1, 1), dim={d})", "torch.logcumsumexp({0}.to({fdt}), dim={d})"),
    *_ops("softmax", "f+", "", "torch.softmax({0}, dim={d})", "torch.log_softmax({0}, dim={d})",
          "torch.softmax({0}, dim={d}, dtype={fdt})"),
    # views and layouts
    *_ops("view", "a+", "x", "{0}.transpose({d}, {e})", "{0}.flip({d})", "{0}.narrow({d}, 0, max(1, {n} // 2))",
          "{0}.unsqueeze({d}).expand(*{0}.shape[:{d}], 3, *{0}.shape[{d}:])", "{0}.reshape(-1)",
          "{0}.flatten({d})", "{0}.contiguous()", "{0}.roll(1, {d})", "{0}[..., ::2]", "{0}.movedim({d}, 0)",
          "{0}.repeat(*([1] * ({0}.dim() - 1)), 2)", "{0}.unfold({d}, 1, 1)", "{0}.select({d}, 0)"),
    # views that need the strides eager has (a compiler that lays an intermediate out otherwise must
    # still give them, or fail to trace): .view of a dense result, the first dim kept
    *_ops("view_strided", "a+", "x", "{0}.view(-1)", "{0}.view({0}.shape[0], -1)",
          "{0}.view(*{0}.shape, 1).squeeze(-1)"),
    *_ops("view_2d", "a2", "x", "{0}.t()", "torch.tril({0})", "{0}.diagonal()"),
    *_ops("view_4d", "a4", "x", "{0}.contiguous(memory_format=torch.channels_last)", "{0}.permute(0, 2, 3, 1)"),
    # indexing and scatter (indices in range by construction)
    *_ops("index", "n+ i", "x", "{0}.index_select({d}, {1}.reshape(-1)[:8].to(torch.int64).remainder({n}))",
          "{0}[{1}.reshape(-1)[:8].to(torch.int64).remainder({0}.shape[0])]",
          "torch.gather({0}, {d}, torch.argsort({0}, dim={d}))"),
    *_ops("index_put", "n+ i", "",
          "{out} = {0}.clone()\n{out}[{1}.reshape(-1)[:8].to(torch.int64).remainder({0}.shape[0])] = {k}",
          "torch.zeros_like({0}).index_put_(({1}.reshape(-1)[:8].to(torch.int64).remainder({0}.shape[0]),), "
          "torch.ones((), dtype={0}.dtype), accumulate=True)",
          "{0}.index_fill({d}, {1}.reshape(-1)[:8].to(torch.int64).remainder({n}), {k})",
          "torch.take({0}, {1}.reshape(-1)[:8].to(torch.int64).remainder({0}.numel()))"),
    *_ops("mask", "n b", "x", "{0}.masked_fill({1}, 0)"),
    *_ops("scatter", "n+", "", "torch.zeros_like({0}).scatter_add({d}, torch.argsort({0}, dim={d}), {0})",
          "{0}.scatter_reduce({d}, torch.argsort({0}, dim={d}), {0}, reduce='amax')",
          "{0}.index_add({d}, torch.arange({n}).flip(0), {0})"),
    *_ops("data_dependent", "n+", "", "torch.nonzero({0} > 0)", "{0}[{0} > 0]", "{0} * {0}.amax().item()"),
    # in-place on a fresh clone, through a view
    *_ops("inplace", "n+", "", "{out} = {0}.clone()\n{out}.narrow({d}, 0, 1).mul_(2)",
          "{out} = {0}.clone()\n{out}.add_(1)", "{out} = {0}.clone()\n{out}.transpose(0, -1).clamp_(min=0)"),
    # pooling, interpolation, small convolutions, matmul
    *_ops("pool", "f4", "", "torch.nn.functional.max_pool2d({0}, 2, ceil_mode=True)",
          "torch.nn.functional.avg_pool2d({0}, 2, ceil_mode=True, count_include_pad=False)",
          "torch.nn.functional.adaptive_avg_pool2d({0}, 3)"),
    *_ops("interpolate", "f4", "", "torch.nn.functional.interpolate({0}, scale_factor=2, mode='nearest')",
          "torch.nn.functional.interpolate({0}, size=(5, 3), mode='bilinear', align_corners=False)",
          "torch.nn.functional.interpolate({0}, size=(3, 2), mode='bilinear', antialias=True)",
          "torch.nn.functional.interpolate({0}, scale_factor=1.5, mode='bicubic', align_corners=True)"),
    *_ops("conv", "f4", "", "torch.nn.functional.conv2d({0}, {w:conv}, padding=1)"),
    *_ops("matmul", "f2", "", "{0} @ {w:mm}", "torch.nn.functional.linear({0}, {w:mm}.t())"),
]

# How often a step is of each family (default 1): short programs spend their few steps where
# inductor's bugs have been: reductions and their output dtypes, integer and floor division,
# casts and promotion between mixed dtypes, scans; large ops (whose compile is slow and whose
# lowering is mostly an extern call) less.
FEATURE_WEIGHTS = {
    "reduce": 4, "reduce_twice": 3, "reduce_bool": 3, "reduce_full": 2, "argreduce": 2, "scan": 2,
    "int_div": 3, "int_scalar": 2, "float_floordiv": 3, "cast": 2, "cast_float": 2, "binary": 3,
    "view": 2, "promote": 2, "promote_scalar": 2, "dtype_arg": 2, "join": 1.5, "view_strided": 1.5,
    "index_put": 1.5, "bool_shift": 0.5,
    "interpolate": 1, "conv": 0.5, "matmul": 0.5, "pool": 0.5, "inplace": 0.5,
}
