"""Staircase: a monotone nonlinearity of a real-valued accumulator, rounded by its Quant.

A Tanh (Sigmoid, Softsign, ...) reading a layer's output before any Quant rounds it (MelGAN's
last layer: ``Quant(tanh(a * acc + b))`` on a convolution's accumulator) reads millions of
codes: no lookup table (:mod:`.lut`) holds them.  But the pair is a step function of the
accumulator ``x``: per channel ``y(x) = Quant(f(v))`` with ``v`` *the* float64 nearest to the
exact real ``clip(leaky(a x + b))`` (:func:`..exact.doubles.nearest_doubles`; a knee and a
clip as the value in flight carries them), ``f`` the function in float64 and the Quant's
exact rounding (:func:`.lut.function_codes`, the definition the tables use).

The compiler evaluates that definition at *every* reachable ``x`` of every channel (in
chunks; at most ``MAX_DOMAIN`` evaluations in all) and checks that it is monotone there;
then it is exactly ``base + #{k : u >= t_k}`` with ``u = sign * x`` and the sorted
thresholds ``t_k`` (a jump of ``j`` codes is ``j`` equal thresholds), padded to ``2**m - 1``
with a value above every reachable ``u``.  That count is a binary search of ``m`` steps:
in :meth:`Staircase.semantics` (``searchsorted``), in the onnxruntime reference (``m``
``Gather`` / ``LessOrEqual`` / ``Where`` steps) and in the kernel
(``hls_templates/staircase``), all reading the same thresholds.  Refused in one line: a
function that is not monotone over the range, a range too large to evaluate, constants
with too many significant bits for one float64 rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..exact.doubles import line_fits, nearest_doubles
from ..ir.types import FixedType, TensorType
from .base import OpDef, Trait
from .base.cost import Work, bits, lanes
from .base.extension import Extension, KernelCall, LayerConfig, Weight, elementwise_shape
from .lut import function_codes
from .quant import Attrs as QuantAttrs
from .rescale import hls_channels

#: Most accumulator values evaluated, over all channels.
MAX_DOMAIN = 1 << 26
#: Values evaluated at once.
CHUNK = 1 << 20
#: Most thresholds per channel the RTL back end compares against (one comparator each).
MAX_RTL_THRESHOLDS = 255


@dataclass(frozen=True)
class Line:
    """One channel's real input ``clip(leaky(a x + b), lo, hi)`` (``knee``: LeakyRelu's slope
    below 0, 1 for none; ``lo`` / ``hi``: None for no bound)."""

    a: Fraction
    b: Fraction
    knee: Fraction = Fraction(1)
    lo: Fraction | None = None
    hi: Fraction | None = None

    @property
    def dyadic(self) -> bool:
        return all(v.denominator & (v.denominator - 1) == 0 for v in (self.a, self.b, self.knee))

    def fits(self, lo: int, hi: int) -> bool:
        return line_fits(self.a, self.b, lo, hi) and line_fits(self.a * self.knee, self.b * self.knee, lo, hi)

    def values(self, codes: np.ndarray) -> np.ndarray:
        """The float64 nearest to the exact real input of every code (rounding is monotone, so
        the knee's choice and the clip commute with it)."""
        v = nearest_doubles(self.a, self.b, codes)
        if self.knee != 1:
            v = np.where(v >= 0, v, nearest_doubles(self.a * self.knee, self.b * self.knee, codes))
        if self.lo is not None:
            v = np.maximum(v, float(self.lo))
        if self.hi is not None:
            v = np.minimum(v, float(self.hi))
        return v


@dataclass(frozen=True, eq=False)
class Attrs:
    function: str  # a key of lut.FUNCTIONS
    out: QuantAttrs
    lines: tuple[Line, ...]  # one per channel (axis 0), or one for every element
    params: tuple[float, ...] = ()  # the function's attributes (the model's float32 values)
    mult: int = 1  # a float-scale output quantizer: scale ``mult * 2**-out.out.frac``
    _cache: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Steps:
    """Every channel's staircase over the reachable range: ``y = base + #{k : sign x >= thresholds[k]}``."""

    signs: np.ndarray  # (C,) +1 / -1
    base: np.ndarray  # (C,) the code at the smallest sign * x
    thresholds: np.ndarray  # (C, 2**m - 1) int64, ascending, padded above every reachable sign * x

    @property
    def search_steps(self) -> int:
        return (self.thresholds.shape[1] + 1).bit_length() - 1


def _channel_codes(attrs: Attrs, line: Line, lo: int, hi: int):
    """``(codes, outputs)`` of one channel over ``[lo, hi]``, chunk by chunk."""
    for start in range(lo, hi + 1, CHUNK):
        codes = np.arange(start, min(start + CHUNK, hi + 1), dtype=np.int64)
        yield codes, function_codes(attrs.function, attrs.out, line.values(codes), attrs.mult, attrs.params)


def _channel_steps(attrs: Attrs, line: Line, lo: int, hi: int, node: str) -> tuple[int, int, np.ndarray]:
    """``(sign, base, thresholds)`` of one channel, every reachable code evaluated."""
    ups, downs, first, last = [], [], None, None
    for codes, ys in _channel_codes(attrs, line, lo, hi):
        seq = ys if last is None else np.concatenate([[last], ys])
        at = codes if last is None else np.concatenate([[codes[0] - 1], codes])
        jumps = np.diff(seq)
        ups.append(np.repeat(at[1:], np.maximum(jumps, 0)))
        downs.append(np.repeat(at[:-1], np.maximum(-jumps, 0)))
        first = ys[0] if first is None else first
        last = ys[-1]
    ups, downs = np.concatenate(ups), np.concatenate(downs)
    if ups.size and downs.size:
        raise UnsupportedModelError(
            f"node '{node}': {attrs.function} of the accumulator, rounded by its Quant, is not monotone over the "
            f"reachable codes [{lo}, {hi}] (it rises at {int(ups[0])} and falls after {int(downs[0])}); no exact "
            "threshold form")
    if not downs.size:
        return 1, int(first), ups
    return -1, int(last), np.sort(-downs)  # rising in u = -x from the largest x


def steps(attrs: Attrs, x: TensorType, node: str = "") -> Steps:
    """The staircase of every channel (cached), every reachable code evaluated."""
    key = (x.lo, x.hi)
    if key in attrs._cache:
        return attrs._cache[key]
    span = (x.hi - x.lo + 1) * len(attrs.lines)
    if span > MAX_DOMAIN:
        raise UnsupportedModelError(f"node '{node}': {attrs.function} of an accumulator of {x.hi - x.lo + 1} codes "
                                    f"x {len(attrs.lines)} channels is beyond the {MAX_DOMAIN} values the compiler "
                                    "evaluates; quantize the accumulator first")
    for line in attrs.lines:
        if not line.fits(x.lo, x.hi):
            what = "needs more than 105 significant bits" if line.dyadic else "has a denominator that is no power of 2"
            raise UnsupportedModelError(f"node '{node}': the real input {float(line.a):.6g} * acc + {float(line.b):.6g} "
                                        f"of {attrs.function} over the codes [{x.lo}, {x.hi}] {what}: no exact "
                                        "float64 evaluation; requantize it (a Quant) first")
    found = [_channel_steps(attrs, line, x.lo, x.hi, node) for line in attrs.lines]
    count = max(1, max(t.size for _, _, t in found))
    width = 1 << count.bit_length()  # 2**m > count: 2**m - 1 >= count entries
    above = max(abs(x.lo), abs(x.hi)) + 1
    table = np.full((len(found), width - 1), above, dtype=np.int64)
    for c, (_, _, t) in enumerate(found):
        table[c, :t.size] = t
    result = Steps(np.array([s for s, _, _ in found], dtype=np.int64), np.array([b for _, b, _ in found], dtype=np.int64),
                   table)
    attrs._cache[key] = result
    return result


def _per_channel(attrs: Attrs, x: TensorType, values: np.ndarray) -> np.ndarray:
    """A (C,) parameter broadcast against (N, *shape) codes."""
    return values.reshape((1, -1) + (1,) * (len(x.shape) - 1)) if len(attrs.lines) > 1 else values.reshape(())


@dataclass(frozen=True)
class StaircaseConfig(LayerConfig):
    template: ClassVar[str] = "staircase/config.tpl"
    n_in: int
    n_chan: int
    n_thr: int
    out_bits: int
    sign_t: str
    code_t: str
    thr_t: str
    base_t: str


@dataclass(frozen=True)
class StaircaseCall(KernelCall):
    template: ClassVar[str] = "staircase/function.tpl"
    sign: str
    base: str
    thr: str


class Staircase(OpDef[Attrs]):
    name = "staircase"
    traits = frozenset({Trait.ELEMENTWISE})
    extensions = (Extension(
        "TesseraStaircase", "A monotone function of integer codes as thresholds: base + a binary search's count.",
        "staircase", "nnet_tessera_staircase.h", config=StaircaseConfig, call=StaircaseCall,
        output_shape=elementwise_shape,
        weights=(Weight("sign", "s{index}"), Weight("base", "b{index}"), Weight("thr", "t{index}"))),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if len(attrs.lines) > 1 and (not x.shape or x.shape[0] != len(attrs.lines)):
            raise UnsupportedModelError(f"node '{node}': {len(attrs.lines)} per-channel constants for a tensor of "
                                        f"shape {list(x.shape)}")
        st = steps(attrs, x, node)
        counts = (st.thresholds < max(abs(x.lo), abs(x.hi)) + 1).sum(axis=1)
        out = attrs.out.out if attrs.mult == 1 else FixedType(attrs.out.out.width, 0, attrs.out.out.signed)
        return TensorType(x.shape, out, int(st.base.min()), int((st.base + counts).max()))

    def semantics(self, attrs: Attrs, xs, ins, out):
        x = ins[0]
        st = steps(attrs, x)
        codes = np.asarray(xs[0], dtype=np.int64)
        if len(attrs.lines) == 1:
            return st.base[0] + np.searchsorted(st.thresholds[0], st.signs[0] * codes, side="right")
        y = np.empty_like(codes)
        for c in range(len(attrs.lines)):
            y[:, c] = st.base[c] + np.searchsorted(st.thresholds[c], st.signs[c] * codes[:, c], side="right")
        return y

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        # the kernel's binary search: m steps of Gather, LessOrEqual and Where on int64 codes
        x = ins[0]
        st = steps(attrs, x)
        width = st.thresholds.shape[1]
        const = lambda v: builder.const(np.asarray(v, dtype=np.int64))  # noqa: E731
        u = builder.op("Mul", [xs[0], const(_per_channel(attrs, x, st.signs))])
        row = const(_per_channel(attrs, x, np.arange(len(attrs.lines), dtype=np.int64) * width))
        table = const(st.thresholds.ravel())
        pos = const(np.zeros((1,) * (len(x.shape) + 1), dtype=np.int64))
        for k in reversed(range(st.search_steps)):
            step = 1 << k
            probe = builder.op("Add", [builder.op("Add", [pos, row]), const(step - 1)])
            take = builder.op("LessOrEqual", [builder.op("Gather", [table, probe], axis=0), u])
            pos = builder.op("Where", [take, builder.op("Add", [pos, const(step)]), pos])
        return builder.op("Add", [pos, const(_per_channel(attrs, x, st.base))])

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """``base + #{k : sign x >= t_k}``: one comparator per threshold (the padding, above
        every reachable ``sign x``, left out)."""
        x = ins[0]
        st = steps(attrs, x)
        count = int((st.thresholds < max(abs(x.lo), abs(x.hi)) + 1).sum(axis=1).max())
        if count > MAX_RTL_THRESHOLDS:
            raise UnsupportedModelError(f"node '{rtl.node}': a staircase of {count} thresholds per channel is beyond "
                                        f"the RTL back end's {MAX_RTL_THRESHOLDS} comparators; --backend hls supports it")
        lead = (1,) * (len(x.shape) - 1)
        chan = lambda v, tail=(): v.reshape((-1, *lead, *tail)) if len(attrs.lines) > 1 else v[0]  # noqa: E731
        thr = np.broadcast_to(chan(st.thresholds[:, :count], (count,)), (*x.shape, count))
        u = xs[0] if (st.signs == 1).all() else rtl.scale(xs[0], chan(st.signs))
        return rtl.add(rtl.count_at_least(u, thr), rtl.const(np.broadcast_to(chan(st.base), x.shape)))

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        st = steps(attrs, x, node.name)
        order = hls_channels(node, x, len(attrs.lines), hls.flat_perm(node.inputs[0]))
        signs, base, thr = st.signs[order], st.base[order], st.thresholds[order]
        width = lambda v: max(int(abs(int(a))).bit_length() for a in np.asarray(v).ravel()) + 1  # noqa: E731
        layer = {"class_name": "TesseraStaircase", "n_in": int(x.size), "n_chan": len(attrs.lines),
                 "n_thr": int(thr.shape[1]), "out_bits": out.ftype.width,
                 "sign_data": signs.astype(np.float64), "base_data": base.astype(np.float64),
                 "thr_data": thr.astype(np.float64).ravel()}
        precision = {"sign": "fixed<2,2>", "base": f"fixed<{width(base)},{width(base)}>",
                     "thr": f"fixed<{width(thr)},{width(thr)}>", "code": f"fixed<{x.ftype.width + 2},{x.ftype.width + 2}>",
                     "result": out.ftype.hls()}
        hls.add_layer(node, layer, precision)

    def form(self, attrs: Attrs, ins, out) -> str:
        st = steps(attrs, ins[0])
        return f"staircase: {st.thresholds.shape[1]} thresholds per channel, binary search in {st.search_steps} steps"

    def cost(self, attrs: Attrs, ins, out, io) -> Work:
        """A binary search per lane: ``m`` comparators of the code's width and a ROM of thresholds."""
        x = ins[0]
        st = steps(attrs, x)
        n, cycles = lanes(out, io)
        thr_bits = max(int(abs(int(v))).bit_length() for v in st.thresholds.ravel()) + 1
        return Work(macs=0, steps=cycles, lanes=n, lut_per_lane=st.search_steps * (x.ftype.width + 2) + bits(out),
                    ff_per_lane=bits(out), weight_bits=st.thresholds.size * thr_bits, out_bits=out.size * bits(out))


OP = Staircase()
