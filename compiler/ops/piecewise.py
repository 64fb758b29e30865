"""Piecewise: the exact requantization primitive on sub-domains of the codes, for outputs of any width.

``y[c, ...] = pieces_c(x[c, ...])``: on each sub-domain of channel ``c``'s codes one
:class:`..exact.requant.Step` ``clamp(R(slope * x + offset))`` (:class:`..exact.pieces.Pieces`;
one per channel, axis 0, or one for every element).  The frontend builds it where a Quant of
more than :data:`WIDEST_THRESHOLDS` levels (a 16-bit quantizer) ends a value in flight, which
:mod:`.rescale` would hold as one threshold per level: one piece (a float-scaled 16-bit
QuantIdentity after a layer, after a linear Resize's exact sums), or two per channel where a
LeakyRelu / PRelu bent the line (the codes where the real value is negative, and the rest).

- ``semantics``: the definition, :meth:`..exact.requant.Step.exact` of the piece each code
  lies in, on Python integers (each distinct code once).
- the hardware form (:func:`implementation`, :func:`..exact.pieces.layer_segments`): every
  piece's segments, ``clamp(R((M x + C) / 2**shift))`` on a sub-domain, one shift and one
  rounding for the layer: the steps' own mode where their constants are dyadic (exact by
  construction), else the floor of a multiply-shift proven equal to the step on its
  sub-domain from the arithmetic (no level enumerated).  Refused in one line where neither
  exists: half-even ties of both parities (no floor form), or products beyond 64 bits.
- ``onnx_reference``: the segments as int64 ONNX: the segment by comparisons, its ``M`` and
  ``C`` gathered, the rounding of the division by ``2**shift``, the clamp.
- ``lower``: ``TesseraPiecewise`` (``hls_templates/piecewise``): the segment by compare and
  count, one multiply, add and rounding shift per element.
- ``rtl``: each segment's multiply-shift on the code clamped into its sub-domain, added, less
  constants selected by comparisons (a sum of constant multiplications: da4ml's adder graphs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..exact.pieces import NoExactForm, Pieces, Segment, Segments, layer_segments
from ..exact.requant import MAX_THRESHOLDS
from ..exact.rounding import Rounding
from ..ir.types import FixedType, TensorType
from .base import OpDef, Trait
from .base.cost import Work, bits, lanes
from .base.extension import Extension, KernelCall, LayerConfig, Weight, elementwise_shape
from .base.requantization import LISTED_CHANNELS, Requantization
from .rescale import hls_channels

#: Most levels :mod:`.rescale` holds as thresholds; a wider output is this op's.
WIDEST_THRESHOLDS = MAX_THRESHOLDS


def wide(qmin: int, qmax: int) -> bool:
    """Whether an output of codes ``[qmin, qmax]`` is beyond :mod:`.rescale`'s thresholds."""
    return qmax - qmin > WIDEST_THRESHOLDS


@dataclass(frozen=True, eq=False)
class Attrs:
    functions: tuple[Pieces, ...]  # one per channel (axis 0), or one for every element
    out: FixedType  # the codes' type (integer codes: frac 0)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Implementation:
    """Every channel's segments, padded to as many as the channel with the most: a padding
    segment starts above every reachable code (``hi + 1``) and is never chosen."""

    segments: Segments
    starts: np.ndarray  # (C, K) int64: the first code of each segment
    mult: np.ndarray  # (C, K) Python integers
    add: np.ndarray  # (C, K)
    qmin: np.ndarray  # (C, K)
    qmax: np.ndarray  # (C, K)


def implementation(attrs: Attrs, x: TensorType, node: str = "") -> Implementation:
    """The proven segments of every channel over the reachable codes (cached)."""
    key = (x.lo, x.hi)
    if key not in attrs._cache:
        try:
            found = layer_segments(attrs.functions, x.lo, x.hi)
        except NoExactForm as exc:
            raise UnsupportedModelError(f"node '{node}': a {attrs.out.width}-bit requantization of the codes "
                                        f"[{x.lo}, {x.hi}] has no exact multiply-shift form: {exc}") from None
        attrs._cache[key] = _padded(found, x.hi + 1)
    return attrs._cache[key]


def _padded(found: Segments, above: int) -> Implementation:
    k = found.most
    rows = [list(c) + [Segment(above, above, c[-1].form, c[-1].qmin, c[-1].qmax)] * (k - len(c)) for c in found.channels]
    table = lambda get, dtype=object: np.array([[get(s) for s in r] for r in rows], dtype=dtype)  # noqa: E731
    return Implementation(found, table(lambda s: s.lo, np.int64), table(lambda s: s.form.mult),
                          table(lambda s: s.form.add), table(lambda s: s.qmin, np.int64), table(lambda s: s.qmax, np.int64))


@dataclass(frozen=True)
class PiecewiseConfig(LayerConfig):
    template: ClassVar[str] = "piecewise/config.tpl"
    n_in: int
    n_chan: int
    n_seg: int
    shift: int
    rounding: str  # nnet::tessera_rounding's enumerator
    qmin: int
    qmax: int
    out_bits: int
    start_t: str
    mult_t: str
    add_t: str
    accum_t: str  # the product mult * x + add


@dataclass(frozen=True)
class PiecewiseCall(KernelCall):
    template: ClassVar[str] = "piecewise/function.tpl"
    start: str
    mult: str
    add: str


def _channels(attrs: Attrs, x: TensorType, values: np.ndarray) -> np.ndarray:
    """(C, K) parameters broadcast over one sample's ``x.shape`` + (K,)."""
    k = values.shape[1]
    if len(attrs.functions) == 1:
        return np.broadcast_to(values.reshape(k), tuple(x.shape) + (k,))
    return np.broadcast_to(values.reshape((-1,) + (1,) * (len(x.shape) - 1) + (k,)), tuple(x.shape) + (k,))


class Piecewise(OpDef[Attrs]):
    name = "piecewise"
    traits = frozenset({Trait.ELEMENTWISE})
    extensions = (Extension(
        "TesseraPiecewise", "Exact requantization on sub-domains of the codes: the segment by comparisons, then one "
        "proven multiply and rounding shift.", "piecewise", "nnet_tessera_piecewise.h",
        config=PiecewiseConfig, call=PiecewiseCall, output_shape=elementwise_shape,
        weights=(Weight("start", "s{index}"), Weight("mult", "m{index}"), Weight("add", "a{index}"))),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if len(attrs.functions) > 1 and (not x.shape or x.shape[0] != len(attrs.functions)):
            raise UnsupportedModelError(f"node '{node}': {len(attrs.functions)} per-channel requantizations for a tensor "
                                        f"of shape {list(x.shape)}")
        implementation(attrs, x, node)
        ends = [s.exact(v) for f in attrs.functions for a, b, s in f.on(x.lo, x.hi) for v in (a, b)]  # monotone pieces
        return TensorType(x.shape, attrs.out, min(ends), max(ends))

    def semantics(self, attrs: Attrs, xs, ins, out):
        codes = np.asarray(xs[0], dtype=np.int64)
        if len(attrs.functions) == 1:
            return attrs.functions[0].codes(codes)
        y = np.empty_like(codes)
        for c, f in enumerate(attrs.functions):
            y[:, c] = f.codes(codes[:, c])
        return y

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        # the segment k = #{j >= 1 : x >= start_j}, then clamp(R((M_k x + C_k) / 2**shift)) in int64
        x = ins[0]
        impl = implementation(attrs, x)
        rank = len(x.shape) + 1
        const = lambda v: builder.const(np.asarray(v, dtype=np.int64))  # noqa: E731
        table = lambda v: const(_channels(attrs, x, np.asarray(v, dtype=np.int64))[None])  # noqa: E731  (1, *shape, K)
        u = builder.op("Unsqueeze", [xs[0], const([rank])])  # (N, *shape, 1)
        if impl.starts.shape[1] > 1:
            above = builder.op("Cast", [builder.op("GreaterOrEqual", [u, table(impl.starts[:, 1:])])], to="int64")
            segment = builder.op("ReduceSum", [above, const([rank])], keepdims=1)
        else:
            segment = builder.op("Mul", [u, const(0)])

        def pick(values):  # each element's constant of its segment
            every = builder.op("Expand", [table(values), builder.op("Shape", [segment])])
            return builder.op("Squeeze", [builder.op("GatherElements", [every, segment], axis=rank), const([rank])])

        y = builder.op("Add", [builder.op("Mul", [xs[0], pick(impl.mult)]), pick(impl.add)])
        if impl.segments.shift:
            y = builder.int_shift_round(y, impl.segments.shift, impl.segments.rounding)
        return builder.op("Min", [builder.op("Max", [y, pick(impl.qmin)]), pick(impl.qmax)])

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """Each segment on the code clamped into its sub-domain: for a code in segment ``j`` the
        others give their value at the nearer end, constants that are taken off again, the
        segments below ``j`` selected by comparisons (one constant per boundary)."""
        x = ins[0]
        impl = implementation(attrs, x)
        each = lambda v: _channels(attrs, x, np.asarray(v, dtype=object))  # noqa: E731
        k = impl.starts.shape[1]
        ends = np.concatenate([impl.starts[:, 1:] - 1, np.full((len(impl.starts), 1), x.hi)], axis=1)
        ends = np.maximum(ends, impl.starts)  # padding segments: [hi + 1, hi + 1]
        value = lambda at: each([[_segment_value(impl, c, j, int(at[c, j])) for j in range(k)]  # noqa: E731
                                 for c in range(len(impl.starts))])
        starts, stops, bottom, top = each(impl.starts), each(ends), value(impl.starts), value(ends)
        total = None
        for j in range(k):
            y = _rounded(rtl, rtl.clamp(xs[0], starts[..., j], stops[..., j]), impl, each, j)
            total = y if total is None else rtl.add(total, y)
        if k == 1:
            return total
        result = rtl.sub(total, rtl.const(bottom[..., 1:].sum(axis=-1)))
        for j in range(1, k):
            above = rtl.count_at_least(xs[0], starts[..., j:j + 1])
            result = rtl.sub(result, rtl.scale(above, top[..., j - 1] - bottom[..., j]))
        return result

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        impl = implementation(attrs, x, node.name)
        if len(np.unique(impl.qmin)) != 1 or len(np.unique(impl.qmax)) != 1:
            raise UnsupportedModelError(f"node '{node.name}': per-channel output ranges are not supported in HLS")
        chans = len(attrs.functions)
        order = hls_channels(node, x, chans, hls.flat_perm(node.inputs[0]))
        start, mult, add = impl.starts[order], impl.mult[order], impl.add[order]
        for name, v in (("mult", mult), ("add", add)):
            if any(abs(int(a)) >= 2**53 for a in v.ravel()):
                raise UnsupportedModelError(f"node '{node.name}': the proven {name} constant needs more than 53 bits")
        width = lambda v: max(int(abs(int(a))).bit_length() for a in np.asarray(v).ravel()) + 1  # noqa: E731
        prod = max(impl.segments.product_bits(), x.ftype.width + 2)
        layer = {"class_name": "TesseraPiecewise", "n_in": int(x.size), "n_chan": chans, "n_seg": int(start.shape[1]),
                 "shift": impl.segments.shift, "rounding": impl.segments.rounding.cpp,
                 "qmin": int(impl.qmin.min()), "qmax": int(impl.qmax.max()), "out_bits": out.ftype.width,
                 "start_data": start.astype(np.float64).ravel(), "mult_data": mult.astype(np.float64).ravel(),
                 "add_data": add.astype(np.float64).ravel()}
        precision = {"start": f"fixed<{width(start)},{width(start)}>", "mult": f"fixed<{width(mult)},{width(mult)}>",
                     "add": f"fixed<{width(add)},{width(add)}>", "accum": f"fixed<{prod},{prod}>",
                     "result": out.ftype.hls()}
        hls.add_layer(node, layer, precision)

    def form(self, attrs: Attrs, ins, out) -> str:
        impl = implementation(attrs, ins[0])
        s = impl.segments
        return (f"piecewise multiply-shift: {s.most} segment(s) per channel, shift {s.shift}, "
                f"{s.rounding.value.lower()} rounding, {s.product_bits()}-bit product")

    def requantization(self, attrs: Attrs, ins, out) -> Requantization:
        x = ins[0]
        s = implementation(attrs, x).segments
        listed = s.channels[:LISTED_CHANNELS]
        proven = any(g.proven for c in s.channels for g in c)
        why = ("proven at compile time without enumerating levels: on each segment the floor's error stays within "
               "the exact step's least and greatest remainders at both ends of the sub-domain" if proven else
               "exact by construction: the steps' constants are dyadic, R((M x + C) / 2^s) is their definition")
        return Requantization(
            "piecewise multiply-shift", f"clamp(R((M_k x + C_k) / 2^{s.shift}), qmin, qmax) on segment k",
            len(s.channels), tuple("; ".join(f"[{g.lo}, {g.hi}]: M = {g.form.mult}, C = {g.form.add}" for g in c)
                                   for c in listed), why)

    def cost(self, attrs: Attrs, ins, out, io) -> Work:
        """One multiplier (code x constant), an adder, the rounding and a clamp per lane, and a
        comparator per segment boundary; constants per channel and segment."""
        x = ins[0]
        impl = implementation(attrs, x)
        n, steps = lanes(out, io)
        mult_bits = max(abs(int(m)) for m in impl.mult.ravel()).bit_length() + 1
        prod = impl.segments.product_bits()
        k = impl.starts.shape[1]
        return Work(macs=0, mults=n, steps=steps, x_bits=x.ftype.width, w_bits=mult_bits, acc_bits=prod, lanes=n,
                    lut_per_lane=prod + bits(out) + (k - 1) * (x.ftype.width + 2), ff_per_lane=bits(out),
                    weight_bits=impl.mult.size * (mult_bits + prod + x.ftype.width + 2), out_bits=out.size * bits(out))


def _segment_value(impl: Implementation, c: int, j: int, at: int) -> int:
    """Segment ``j`` of channel ``c`` at the code ``at`` (its own form, the layer's rounding)."""
    s = impl.segments
    seg = s.channels[c][min(j, len(s.channels[c]) - 1)]
    return Segment(at, at, seg.form, seg.qmin, seg.qmax, s.rounding)(at)


def _rounded(rtl, x, impl: Implementation, each, j: int):
    """``clamp(R((M_j x + C_j) / 2**shift))`` of segment ``j`` on the builder."""
    s = impl.segments
    if s.rounding is Rounding.FLOOR:
        y = rtl.multiply_shift(x, each(impl.mult)[..., j], each(impl.add)[..., j], s.shift)
    else:
        y = rtl.round_shift(rtl.add(rtl.scale(x, each(impl.mult)[..., j]), rtl.const(each(impl.add)[..., j])), s.shift,
                            s.rounding)
    return rtl.clamp(y, each(impl.qmin)[..., j], each(impl.qmax)[..., j])


OP = Piecewise()
