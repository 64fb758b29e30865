"""Rescale: the exact requantization primitive as an op (:mod:`..exact.requant`).

``y[c, ...] = clamp(R(slope_c * x[c, ...] + offset_c), qmin, qmax)`` on integer codes, one
:class:`..exact.requant.Step` per channel (axis 0) or one for the whole tensor.  The frontend builds
it wherever real constants act between a layer and the Quant that ends it: float (and
per-channel) scales, a folded BatchNorm, Mul/Add/Sub/Div by constants, zero points, a ReLU
(which only raises ``qmin``), a BipolarQuant (``bipolar``: codes {0, 1} for {-1, +1}).

- ``semantics``: the thresholds of the exact definition (:func:`..exact.requant.thresholds`, every
  threshold placed by evaluating the rational function exactly), applied by comparison.
- ``onnx_reference``: the same thresholds as ONNX comparisons (``GreaterOrEqual`` and a
  count), integer-exact.
- ``lower``: ``TesseraRescale`` (``hls_templates/rescale``) in the form :func:`form` chose and
  proved: one multiply, add and shift per element, or thresholds for 1-2 bit outputs and
  where no multiply-shift fits in 64 bits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType, bits_for_range
from ..exact.requant import MAX_THRESHOLDS, THRESHOLD_FORM_MAX, MultiplyShift, Step, apply_thresholds, multiply_shift, thresholds
from .base import OpDef, Trait
from .base.extension import Extension, KernelCall, LayerConfig, Weight, elementwise_shape
from .base.cost import Work, bits, lanes
from .base.requantization import LISTED_CHANNELS, Requantization, listed_thresholds


class Form(Enum):
    MULTIPLY_SHIFT = 0
    THRESHOLDS = 1


@dataclass(frozen=True)
class Implementation:
    """The proven hardware form of every channel over the reachable input range."""

    form: Form
    signs: np.ndarray  # (C,) +1 / -1: the direction of each channel's step
    thresholds: np.ndarray  # (C, K) int64, K = qmax - qmin
    steps: tuple[MultiplyShift, ...] = ()  # multiply-shift form: one per channel, one shift

    @property
    def shift(self) -> int:
        return self.steps[0].shift if self.steps else 0

    def describe(self, lo: int, hi: int) -> str:
        if self.form == Form.THRESHOLDS:
            return f"thresholds: {self.thresholds.shape[1]} per channel"
        mult = max(abs(s.mult) for s in self.steps)
        prod = max(s.product_bits(lo, hi) for s in self.steps)
        return f"multiply-shift: {mult.bit_length() + 1}-bit multiplier, shift {self.shift}, {prod}-bit product"


@dataclass(frozen=True, eq=False)
class Attrs:
    steps: tuple[Step, ...]  # one per channel (axis 0), or one for every element
    out: FixedType  # the codes' type (integer codes: frac 0)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def qmin(self) -> int:
        return min(s.qmin for s in self.steps)

    @property
    def qmax(self) -> int:
        return max(s.qmax for s in self.steps)


def out_type(qmin: int, qmax: int) -> FixedType:
    width, signed = bits_for_range(qmin, qmax)
    return FixedType(width, 0, signed)


def implementation(attrs: Attrs, x: TensorType, node: str = "") -> Implementation:
    """Thresholds of every channel and the chosen, proven hardware form (cached)."""
    key = (x.lo, x.hi)
    if key in attrs._cache:
        return attrs._cache[key]
    levels = attrs.steps[0].levels
    if any(s.levels != levels for s in attrs.steps):
        raise UnsupportedModelError(f"node '{node}': its channels' codes span {sorted({s.levels + 1 for s in attrs.steps})} "
                                    "levels (per-channel bounds, e.g. a ReLU of codes with per-channel zero points); one "
                                    "count for every channel is supported")
    if levels > MAX_THRESHOLDS:
        raise UnsupportedModelError(f"node '{node}': a {out_type(attrs.qmin, attrs.qmax).width}-bit output after real "
                                    f"scaling has {levels} levels; at most {MAX_THRESHOLDS} are supported")
    st = [thresholds(s, x.lo, x.hi) for s in attrs.steps]
    signs = np.array([s for s, _ in st], dtype=np.int64)
    thr = np.array([[int(v) for v in t] for _, t in st], dtype=np.int64).reshape(len(st), levels)
    impl = Implementation(Form.THRESHOLDS, signs, thr)
    if levels > THRESHOLD_FORM_MAX:
        found = [multiply_shift(s, x.lo, x.hi, t) for s, t in zip(attrs.steps, st)]
        if all(f is not None for f in found):
            shift = max(f.shift for f in found)
            found = [MultiplyShift(f.mult << (shift - f.shift), f.add << (shift - f.shift), shift) for f in found]
            impl = Implementation(Form.MULTIPLY_SHIFT, signs, thr, tuple(found))
    attrs._cache[key] = impl
    return impl


@dataclass(frozen=True)
class RescaleConfig(LayerConfig):
    template: ClassVar[str] = "rescale/config.tpl"
    n_in: int
    n_chan: int
    levels: int
    shift: int
    form_code: int  # nnet::TESSERA_RESCALE_* (the order of Form)
    qmin: int
    qmax: int
    out_bits: int
    mult_t: str
    add_t: str
    thr_t: str
    accum_t: str  # the product mult * x + add


@dataclass(frozen=True)
class RescaleCall(KernelCall):
    template: ClassVar[str] = "rescale/function.tpl"
    mult: str
    add: str
    thr: str


class Rescale(OpDef[Attrs]):
    name = "rescale"
    traits = frozenset({Trait.ELEMENTWISE})
    extensions = (Extension(
        "TesseraRescale", "Exact requantization clamp(R(slope_c x + offset_c)): proven multiply-shift or thresholds.",
        "rescale", "nnet_tessera_rescale.h",
        config=RescaleConfig, call=RescaleCall, output_shape=elementwise_shape,
        weights=(Weight("mult", "m{index}"), Weight("add", "a{index}"), Weight("thr", "t{index}"))),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if len(attrs.steps) > 1 and (not x.shape or x.shape[0] != len(attrs.steps)):
            raise UnsupportedModelError(f"node '{node}': {len(attrs.steps)} per-channel scales for a tensor of shape {x.shape}")
        impl = implementation(attrs, x, node)
        ends = [s.exact(v) for s in attrs.steps for v in (x.lo, x.hi)]
        del impl
        return TensorType(x.shape, attrs.out, min(ends), max(ends))

    def _per_channel(self, attrs: Attrs, x: TensorType, values: np.ndarray) -> np.ndarray:
        """A (C,) parameter broadcast against (N, *shape) codes."""
        return values.reshape((1, -1) + (1,) * (len(x.shape) - 1)) if len(attrs.steps) > 1 else values.reshape(())

    def semantics(self, attrs: Attrs, xs, ins, out):
        x = ins[0]
        impl = implementation(attrs, x)
        codes = np.asarray(xs[0], dtype=np.int64)
        if len(attrs.steps) == 1:
            return apply_thresholds(int(impl.signs[0]), impl.thresholds[0], attrs.steps[0].qmin, codes)
        y = np.empty_like(codes)
        for c, s in enumerate(attrs.steps):
            y[:, c] = apply_thresholds(int(impl.signs[c]), impl.thresholds[c], s.qmin, codes[:, c])
        return y

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        # sign * x >= t_k for every threshold, counted: integer comparisons, exact
        x = ins[0]
        impl = implementation(attrs, x)
        rank = len(x.shape) + 1
        signs = self._per_channel(attrs, x, impl.signs)
        u = builder.op("Mul", [xs[0], builder.const(np.asarray(signs, dtype=np.int64))])
        u = builder.op("Unsqueeze", [u, builder.const(np.array([rank], dtype=np.int64))])
        k = impl.thresholds.shape[1]
        t = impl.thresholds.reshape(((1, -1) + (1,) * (len(x.shape) - 1) if len(attrs.steps) > 1 else (1,) * rank) + (k,))
        ge = builder.op("Cast", [builder.op("GreaterOrEqual", [u, builder.const(t.astype(np.int64))])], to="int64")
        count = builder.op("ReduceSum", [ge, builder.const(np.array([rank], dtype=np.int64))], keepdims=0)
        qmin = self._per_channel(attrs, x, np.array([s.qmin for s in attrs.steps], dtype=np.int64))
        return builder.op("Add", [count, builder.const(np.asarray(qmin, dtype=np.int64))])

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """The proven form the HLS kernel uses: one multiply, add and shift per element, or
        a compare-and-count of the thresholds."""
        x = ins[0]
        impl = implementation(attrs, x)
        each = lambda values: _channels(attrs, x, np.asarray(values, dtype=object))  # noqa: E731
        qmin, qmax = each([s.qmin for s in attrs.steps]), each([s.qmax for s in attrs.steps])
        if impl.form == Form.MULTIPLY_SHIFT:
            y = rtl.multiply_shift(xs[0], each([s.mult for s in impl.steps]), each([s.add for s in impl.steps]),
                                   impl.shift)
            return rtl.clamp(y, qmin, qmax)
        u = rtl.scale(xs[0], each(impl.signs))
        t = _channels(attrs, x, impl.thresholds.astype(object), (impl.thresholds.shape[1],))
        return rtl.add(rtl.count_at_least(u, t), rtl.const(qmin))

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        impl = implementation(attrs, x, node.name)
        chans = len(attrs.steps)
        if len({s.qmin for s in attrs.steps}) != 1 or len({s.qmax for s in attrs.steps}) != 1:
            raise UnsupportedModelError(f"node '{node.name}': per-channel output ranges are not supported in HLS")
        if impl.form == Form.MULTIPLY_SHIFT:
            mult = np.array([s.mult for s in impl.steps], dtype=object)
            add = np.array([s.add for s in impl.steps], dtype=object)
            thr = np.zeros((chans, 1), dtype=np.int64)
            prod = max(s.product_bits(x.lo, x.hi) for s in impl.steps)
        else:
            mult, add, thr = impl.signs.astype(object), np.zeros(chans, dtype=object), impl.thresholds
            peak = max(abs(x.lo), abs(x.hi), int(np.abs(thr).max()) if thr.size else 0)
            prod = peak.bit_length() + 2
        prod = max(prod, x.ftype.width + 2)
        order = hls_channels(node, x, chans, hls.flat_perm(node.inputs[0]))
        mult, add, thr = mult[order], add[order], thr[order]
        width = lambda v: max(int(abs(int(a))).bit_length() for a in np.asarray(v).ravel()) + 1  # noqa: E731
        for name, v in (("mult", mult), ("add", add)):
            if any(abs(int(a)) >= 2**53 for a in np.asarray(v).ravel()):
                raise UnsupportedModelError(f"node '{node.name}': the proven {name} constant needs more than 53 bits")
        layer = {"class_name": "TesseraRescale", "n_in": int(x.size), "n_chan": chans, "levels": int(thr.shape[1]),
                 "shift": impl.shift, "form_code": impl.form.value,  # nnet::TESSERA_RESCALE_* (same order)
                 "qmin": attrs.qmin, "qmax": attrs.qmax, "out_bits": out.ftype.width,
                 "mult_data": np.asarray(mult, dtype=np.float64), "add_data": np.asarray(add, dtype=np.float64),
                 "thr_data": thr.astype(np.float64).ravel()}
        precision = {"mult": f"fixed<{width(mult)},{width(mult)}>", "add": f"fixed<{width(add)},{width(add)}>",
                     "thr": f"fixed<{width(thr)},{width(thr)}>", "accum": f"fixed<{prod},{prod}>",
                     "result": out.ftype.hls()}
        hls.add_layer(node, layer, precision)

    def form(self, attrs: Attrs, ins, out) -> str:
        return implementation(attrs, ins[0]).describe(ins[0].lo, ins[0].hi)

    def requantization(self, attrs: Attrs, ins, out) -> Requantization:
        x = ins[0]
        impl = implementation(attrs, x)
        listed = range(min(len(attrs.steps), LISTED_CHANNELS))
        if impl.form == Form.MULTIPLY_SHIFT:
            return Requantization(
                "multiply-shift", f"clamp((M x + C) >> {impl.shift}, {attrs.qmin}, {attrs.qmax})", len(attrs.steps),
                tuple(f"M = {impl.steps[c].mult}, C = {impl.steps[c].add}" for c in listed),
                f"proven at compile time: equals the exact clamp(R(N / D)) at every threshold and at both ends of "
                f"the accumulator's range [{x.lo}, {x.hi}]")
        return Requantization(
            "thresholds", f"{f'{attrs.qmin} + ' if attrs.qmin else ''}#{{k : s x >= t_k}}", len(attrs.steps),
            tuple(f"s = {int(impl.signs[c]):+d}, t = {listed_thresholds(impl.thresholds[c])}" for c in listed),
            f"exact: each threshold placed by evaluating the exact clamp(R(N / D)) on [{x.lo}, {x.hi}]")

    def cost(self, attrs: Attrs, ins, out, io) -> Work:
        """Multiply-shift: one multiplier (accumulator x constant), an adder and a clamp per
        lane; thresholds: one comparator per threshold per lane.  Constants per channel."""
        x = ins[0]
        impl = implementation(attrs, x)
        n, steps = lanes(out, io)
        chans = len(attrs.steps)
        if impl.form == Form.MULTIPLY_SHIFT:
            mult_bits = max(abs(s.mult) for s in impl.steps).bit_length() + 1
            prod = max(s.product_bits(x.lo, x.hi) for s in impl.steps)
            return Work(macs=0, mults=n, steps=steps, x_bits=x.ftype.width, w_bits=mult_bits, acc_bits=prod, lanes=n,
                        lut_per_lane=prod + bits(out), ff_per_lane=bits(out), weight_bits=chans * (mult_bits + prod),
                        out_bits=out.size * bits(out))
        k = impl.thresholds.shape[1]
        return Work(macs=0, steps=steps, lanes=n, lut_per_lane=k * (x.ftype.width + 2) + bits(out), ff_per_lane=bits(out),
                    weight_bits=chans * k * (x.ftype.width + 2), out_bits=out.size * bits(out))


def _channels(attrs: Attrs, x: TensorType, values: np.ndarray, tail: tuple[int, ...] = ()) -> np.ndarray:
    """Parameters per channel (axis 0; or the one step's) broadcast over one sample's
    ``x.shape`` (+ ``tail``, the parameters' own trailing axes)."""
    if len(attrs.steps) == 1:
        return np.broadcast_to(values.reshape(tail), tuple(x.shape) + tail)
    return np.broadcast_to(values.reshape((-1,) + (1,) * (len(x.shape) - 1) + tail), tuple(x.shape) + tail)


def hls_channels(node, x: TensorType, chans: int, perm: np.ndarray) -> np.ndarray:
    """The order of the per-channel parameters as the kernel reads them: channel ``k % n_chan``
    at hls4ml position ``k``.  A channels-last map keeps ONNX's channel order; a vector with one
    step per element (a flattened map's per-channel constants spread over its elements) takes
    its layout's order; any other layout is refused."""
    if chans == 1:
        return np.zeros(1, dtype=np.int64)
    channel = perm // (x.size // chans)  # the ONNX channel (axis 0) at each hls4ml position
    if np.array_equal(channel, np.arange(x.size) % chans):
        return np.arange(chans)
    if chans == x.size:
        return channel
    raise UnsupportedModelError(f"node '{node.name}': per-channel requantization of a {list(x.shape)} tensor whose "
                                "channels are not the fastest-varying index in hls4ml's layout")


OP = Rescale()
