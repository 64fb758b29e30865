"""Average pooling followed by its ``Quant``, as one exact op (2D or 3D, dilated or not).

``y = clip(R(S * 2**(fy - fx) / n))`` where ``S`` is the window sum of codes (zero padding)
and ``n`` the divisor: the kernel volume (``count_include_pad=1``) or the number of valid
elements (``count_include_pad=0``).  A dilated window (ONNX opset 19) sums its taps
``dilation`` apart, and counts its valid taps.  ``n`` is generally not a power of two (CosmoFlow's
3x3x3 windows: 27), so an average is not a fixed-point number; the compiler therefore fuses
the pool with the ``Quant`` that follows it and rounds the exact rational ``S / n`` once,
with the Quant's rounding mode (:func:`..exact.rounding.div_round`).  The HLS kernel
(``hls_templates/avgpool``) sums exactly, then divides by the exact requantization
primitive (:mod:`..exact.requant`): for every divisor the window can have, a multiply-shift
``clamp((mult[n] * S + add[n]) >> shift)`` proven equal to ``R(S * 2**(fy - fx) / n)`` for
every sum the input type allows (:func:`division`); only where no multiply-shift fits 64
bits does it fall back to the integer division (``tessera_div_round`` of
``hls_templates/common/nnet_tessera_rounding.h``), still exact.  A window op
for the partitioner, except that a padded average whose divisor excludes the padding cannot
be tiled (its divisor depends on where the volume ends).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType, bits_for_range
from ..exact.requant import MultiplyShift, Step, multiply_shift
from .base import Layout, OpDef, Trait, check_width
from .base.extension import DIMS, KernelCall, LayerConfig, Weight
from .maxpool import (DilatedWindow, Pool3dSizes, onnxruntime_pool, pool3d_extension, pool_work, tap_index, tap_slices,
                      tap_windows, valid_taps)
from .quant import Attrs as QuantAttrs
from ..exact.rounding import div_round
from ..exact.spans import window_span


@dataclass(frozen=True)
class Attrs(DilatedWindow):
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...]  # begins then ends
    count_include_pad: bool
    out: QuantAttrs
    dilations: tuple[int, ...] = ()  # per spatial dim; () for none (every dilation 1)


def out_spatial(attrs: Attrs, spatial) -> tuple[int, ...]:
    n = len(attrs.kernel)
    return tuple((spatial[i] + attrs.pads[i] + attrs.pads[n + i] - attrs.span[i]) // attrs.strides[i] + 1 for i in range(n))


def divisors(attrs: Attrs, spatial) -> np.ndarray:
    """The divisor of every output position (int64, shape = output spatial)."""
    n = len(attrs.kernel)
    osp = out_spatial(attrs, spatial)
    if attrs.count_include_pad:
        return np.full(osp, int(np.prod(attrs.kernel)), dtype=np.int64)
    counts = [valid_taps(spatial[i], attrs.kernel[i], attrs.strides[i], attrs.pads[i], attrs.dilation[i], osp[i])
              for i in range(n)]
    return np.prod(np.stack(np.meshgrid(*counts, indexing="ij")), axis=0).astype(np.int64)


def divisor_shifts(q: QuantAttrs, x: TensorType) -> tuple[int, int]:
    """(numerator shift, denominator shift) so that an average of ``x``'s codes requantized
    by ``q`` is ``R((S << up) / (n << down))`` (``S``: the sum, ``n``: the divisor)."""
    d = q.out.frac - x.ftype.frac
    return max(d, 0), max(-d, 0)


def sum_type(x: TensorType, count: int, shape: tuple[int, ...] = (1,)) -> TensorType:
    """The exact sum of ``count`` codes of ``x``, always signed: the kernels read the sum's raw
    bits as an ``ap_int`` (``tessera_div_round_to``), so an unsigned sum would lose its top bit."""
    lo, hi = min(x.lo * count, 0), max(x.hi * count, 0)
    width, _ = bits_for_range(min(lo, -1), hi)
    return TensorType(shape, FixedType(width, x.ftype.frac, True), lo, hi)


def proven_divisions(q: QuantAttrs, x: TensorType, lo: int, hi: int, counts) -> dict[int, MultiplyShift] | None:
    """Per divisor ``n`` in ``counts``: the multiply-shift (one shift for all) proven equal to
    ``clamp(R((S << up) / (n << down)))`` for every sum ``S`` in ``[lo, hi]`` of codes of ``x``
    requantized by ``q``; None when some divisor has none within 64 bits, or its constants need
    more than 53 bits (the weight files carry them as float64)."""
    up, down = divisor_shifts(q, x)
    found = {}
    for n in sorted({int(v) for v in counts}):
        ms = multiply_shift(Step(Fraction(1 << up, n << down), Fraction(0), q.rounding, q.qmin, q.qmax), lo, hi)
        if ms is None:
            return None
        found[n] = ms
    shift = max(m.shift for m in found.values())
    table = {n: MultiplyShift(m.mult << (shift - m.shift), m.add << (shift - m.shift), shift) for n, m in found.items()}
    if any(abs(v) >= 2**53 for m in table.values() for v in (m.mult, m.add)):
        return None
    return table


def describe(table: dict[int, MultiplyShift] | None) -> str:
    """The division's form, for ``inspect``."""
    if table is None:
        return "integer division (no multiply-shift within 64 bits)"
    ms = list(table.values())
    return (f"multiply-shift: {len(ms)} divisor{'s' if len(ms) > 1 else ''}, shift {ms[0].shift}, "
            f"{max(abs(m.mult) for m in ms).bit_length() + 1}-bit multipliers")


def division(attrs: Attrs, x: TensorType) -> dict[int, MultiplyShift] | None:
    """:func:`proven_divisions` for every divisor of the pool, on every window sum of at most
    ``k`` codes of ``x`` (padding adds zeros)."""
    k = int(np.prod(attrs.kernel))
    return proven_divisions(attrs.out, x, min(k * x.lo, 0), max(k * x.hi, 0), divisors(attrs, x.shape[1:]).ravel())


def divide_rtl(rtl, q: QuantAttrs, x: TensorType, sums, counts: np.ndarray,
               table: dict[int, MultiplyShift] | None) -> np.ndarray:
    """``clamp(R((S << up) / (n << down)))`` of the symbolic sums ``S`` of codes of ``x``, ``n``
    their divisors (``counts``, shaped as the sums), as the kernels compute it: the proven
    multiply-shift of each divisor (``table``), else the exact division by the constant."""
    if table is not None:
        pick = lambda field: np.vectorize(lambda n: getattr(table[int(n)], field), otypes=[object])(counts)  # noqa: E731
        y = rtl.multiply_shift(sums, pick("mult"), pick("add"), next(iter(table.values())).shift)
    else:
        up, down = divisor_shifts(q, x)
        scaled, y = rtl.shift_left(sums, up), np.empty(np.shape(counts), dtype=object)
        for n in np.unique(counts):
            y[counts == n] = rtl.div_round(scaled[counts == n], int(n) << down, q.rounding)
    return rtl.clamp(y, q.qmin, q.qmax)


@dataclass(frozen=True)
class AverageDivision(LayerConfig):
    """What the config templates of the average pools share: the exact sum's division by the
    count onto the Quant (multiply-shift or division form) and its types."""

    num_shift: int
    den_shift: int
    rounding: str  # nnet::tessera_rounding's enumerator
    qmin: int
    qmax: int
    sum_bits: int
    out_bits: int
    shift: int
    form_code: int  # nnet::TESSERA_AVG_* (multiply-shift, division)
    accum_t: str
    prod_t: str
    mult_t: str
    add_t: str


@dataclass(frozen=True)
class AvgPool3dConfig(Pool3dSizes, AverageDivision):
    template: ClassVar[str] = "avgpool/config.tpl"
    pad_front: int
    pad_top: int
    pad_left: int
    count_include_pad: bool
    max_count: int


@dataclass(frozen=True)
class AvgPool3dCall(KernelCall):
    template: ClassVar[str] = "avgpool/function.tpl"
    mult: str
    add: str


def _pooled_sums(attrs: Attrs, builder, x: str, xt: TensorType) -> str:
    """Window sums (float64) from onnxruntime's AveragePool, which is float32 only: avg * k
    rounds back to the exact integer sum while |sum| < 2**20 (relative error of the float32
    average <= 2**-23, so the absolute error stays below 1/8); checked first."""
    k = int(np.prod(attrs.kernel))
    if k * max(abs(xt.lo), abs(xt.hi)) >= 2**20:
        raise UnsupportedModelError(
            f"AveragePool window sums reach {k * max(abs(xt.lo), abs(xt.hi))}: beyond the exact float32 reference (2**20)")
    avg = builder.op("AveragePool", [builder.op("Cast", [x], to="float")], kernel_shape=list(attrs.kernel),
                     strides=list(attrs.strides), pads=list(attrs.pads), count_include_pad=1)
    return builder.op("Round", [builder.op("Mul", [builder.op("Cast", [avg], to="double"), builder.const(np.array(float(k)))])])


def _tap_sums(attrs: Attrs, builder, x: str, out: TensorType) -> str:
    """Window sums (float64) of a dilated pool, or one padded as much as its kernel: its taps'
    slices of the zero-padded codes (:func:`.maxpool.tap_slices`), added in int64."""
    taps = tap_slices(builder, x, attrs.kernel, attrs.strides, attrs.pads, attrs.dilation, out.shape[1:])
    total = taps[0]
    for tap in taps[1:]:  # ONNX's Sum takes floats only
        total = builder.op("Add", [total, tap])
    return builder.op("Cast", [total], to="double")


class AvgPool(OpDef[Attrs]):
    name = "avgpool"
    traits = frozenset({Trait.WINDOW})
    extensions = (pool3d_extension(
        "TesseraAvgPool3D", "Average pooling fused with its Quant: exact window sum, one exact rational rounding.",
        "avgpool", "nnet_tessera_avgpool.h",
        AvgPool3dConfig, AvgPool3dCall, weights=(Weight("mult", "m{index}"), Weight("add", "a{index}"))),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        n = len(attrs.kernel)
        if len(x.shape) != n + 1:
            raise UnsupportedModelError(f"node '{node}': {n}D AveragePool expects a (C, {n} spatial) input, got {x.shape}")
        if len(attrs.dilation) != n or min(attrs.dilation) < 1:
            raise UnsupportedModelError(f"node '{node}': invalid AveragePool dilations {attrs.dilations}")
        osp = out_spatial(attrs, x.shape[1:])
        if min(osp) < 1:
            raise UnsupportedModelError(f"node '{node}': AveragePool window larger than input {x.shape}")
        if int(divisors(attrs, x.shape[1:]).min()) < 1:
            raise UnsupportedModelError(f"node '{node}': AveragePool has windows entirely in the padding")
        k = int(np.prod(attrs.kernel))
        check_width(sum_type(x, k, x.shape), node, "the window sum")
        up, down = divisor_shifts(attrs.out, x)
        if (k * max(abs(x.lo), abs(x.hi))).bit_length() + up > 62 or k.bit_length() + down > 62:
            raise UnsupportedModelError(
                f"node '{node}': AveragePool output grid 2**-{attrs.out.out.frac} is {abs(up - down)} bits away from the "
                f"input's 2**-{x.ftype.frac}: the scaled window sums would exceed int64 (requantize closer to the input grid)")
        ends = div_round(np.array([x.lo, x.hi], dtype=np.int64) << np.int64(up), 1 << down, attrs.out.rounding)
        lo, hi = (int(v) for v in np.clip(ends, attrs.out.qmin, attrs.out.qmax))  # averages stay within [x.lo, x.hi]
        return TensorType((x.shape[0], *osp), attrs.out.out, lo, hi)

    def semantics(self, attrs: Attrs, xs, ins, out):
        n = len(attrs.kernel)
        pad = ((0, 0), (0, 0)) + tuple((attrs.pads[i], attrs.pads[n + i]) for i in range(n))
        win = tap_windows(np.pad(xs[0].astype(np.int64), pad), attrs.kernel, attrs.strides, attrs.dilation)
        win = win[(slice(None), slice(None)) + tuple(slice(0, s) for s in out.shape[1:])]
        sums = win.sum(axis=tuple(range(2 + n, 2 + 2 * n)))
        up, down = divisor_shifts(attrs.out, ins[0])
        y = div_round(sums << np.int64(up), divisors(attrs, ins[0].shape[1:]) << np.int64(down), attrs.out.rounding)
        return np.clip(y, attrs.out.qmin, attrs.out.qmax)

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """Window sums of the taps (the padding: constant zeros), then :func:`divide_rtl`."""
        x = ins[0]
        idx = tap_index(x.shape, attrs.kernel, attrs.strides, attrs.pads, attrs.dilation,
                        out.shape[1:]).reshape(*out.shape, -1)
        sums = rtl.reduce_sum(rtl.gather(xs[0], idx), axis=-1)
        counts = np.broadcast_to(divisors(attrs, x.shape[1:]), out.shape)
        return divide_rtl(rtl, attrs.out, x, sums, counts, division(attrs, x))

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        x = ins[0]
        sums = _pooled_sums(attrs, builder, xs[0], x) if onnxruntime_pool(attrs.kernel, attrs.pads, attrs.dilations) \
            else _tap_sums(attrs, builder, xs[0], out)
        up, down = divisor_shifts(attrs.out, x)
        num = builder.op("Mul", [sums, builder.const(np.array(float(1 << up)))])
        den = (divisors(attrs, x.shape[1:]) << down).astype(np.float64)
        y = builder.div_round(num, builder.const(den.reshape((1,) * 2 + den.shape)), attrs.out.rounding)
        y = builder.op("Clip", [y, builder.const(np.array(float(attrs.out.qmin))), builder.const(np.array(float(attrs.out.qmax)))])
        return builder.op("Cast", [y], to="int64")

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        n = len(attrs.kernel)
        if attrs.out.narrow and not attrs.out.out.signed:
            raise UnsupportedModelError(f"node '{node.name}': unsigned narrow-range Quant is not supported")
        kern = (1,) * (3 - n) + attrs.kernel
        strides = (1,) * (3 - n) + attrs.strides
        spatial = (1,) * (3 - n) + x.shape[1:]
        osp = (1,) * (3 - n) + out.shape[1:]
        pads = (0,) * (3 - n) + attrs.pads[:n]
        dilation = (1,) * (3 - n) + attrs.dilation
        up, down = divisor_shifts(attrs.out, x)
        k = int(np.prod(attrs.kernel))
        sum_t = sum_type(x, k)
        table = division(attrs, x)
        mult, add = np.zeros(k + 1, dtype=object), np.zeros(k + 1, dtype=object)
        for count, ms in (table or {}).items():
            mult[count], add[count] = ms.mult, ms.add
        prod = max([ms.product_bits(sum_t.lo, sum_t.hi) for ms in (table or {}).values()] + [sum_t.ftype.width + 2])
        width = lambda v: max(int(abs(int(a))).bit_length() for a in v) + 1  # noqa: E731
        layer = {"class_name": "TesseraAvgPool3D", "n_filt": x.shape[0], "spatial_dims": n,
                 "count_include_pad": bool(attrs.count_include_pad),
                 "num_shift": up, "den_shift": down, "rounding": attrs.out.rounding.cpp,
                 "qmin": attrs.out.qmin, "qmax": attrs.out.qmax, "sum_bits": sum_t.ftype.width,
                 "out_bits": attrs.out.out.width, "max_count": k,
                 "shift": next(iter(table.values())).shift if table else 0,
                 "form_code": 0 if table else 1,  # nnet::TESSERA_AVG_* (multiply-shift, division)
                 "mult_data": mult.astype(np.float64), "add_data": add.astype(np.float64)}
        for i, d in enumerate(DIMS):
            layer[f"in_{d}"], layer[f"out_{d}"] = spatial[i], osp[i]
            layer[f"pool_{d}"], layer[f"stride_{d}"], layer[f"dilation_{d}"] = kern[i], strides[i], dilation[i]
        layer.update(pad_front=pads[0], pad_top=pads[1], pad_left=pads[2])
        hls.add_layer(node, layer, {"result": out.ftype.hls(), "accum": sum_t.ftype.hls(), "prod": f"fixed<{prod},{prod}>",
                                    "mult": f"fixed<{width(mult)},{width(mult)}>", "add": f"fixed<{width(add)},{width(add)}>"},
                      layout=Layout.CHANNELS)

    def form(self, attrs: Attrs, ins, out) -> str:
        return describe(division(attrs, ins[0]))

    def cost(self, attrs: Attrs, ins, out, io):
        return pool_work(attrs.kernel, attrs.strides, attrs.pads, ins[0], out, io,
                         extra_bits=max(1, math.ceil(math.log2(int(np.prod(attrs.kernel))))), span=attrs.span)

    def input_span(self, attrs: Attrs, span):
        return window_span(span, attrs.span, attrs.strides, attrs.pads)

    def with_pads(self, attrs: Attrs, pads):
        return dataclasses.replace(attrs, pads=tuple(pads))

    def tiling_refusal(self, attrs: Attrs) -> str | None:
        if not attrs.count_include_pad and any(attrs.pads):
            return "a padded average that excludes the padding from its divisor cannot be tiled"
        return None

    def spatial_stride(self, attrs: Attrs):
        return attrs.strides


OP = AvgPool()
