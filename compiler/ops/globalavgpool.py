"""Global average pooling followed by its ``Quant``, as one exact op (ONNX ``GlobalAveragePool``,
2D or 3D).

``y[c] = clip(R(S_c * 2**(fy - fx) / n))``: ``S_c`` is the exact sum of channel ``c``'s codes
over all ``n`` positions and ``R`` the Quant's rounding mode.  As for :mod:`.avgpool`, an
average is not a fixed-point number (``n`` need not be a power of two), so the compiler fuses
the pool with the ``Quant`` that follows it and rounds the exact rational ``S_c / n`` once
(:func:`..exact.rounding.div_round`).  Output ``(C, 1, 1[, 1])``, as ONNX keeps the spatial axes.
The onnxruntime reference sums in int64 (``ReduceSum``) and divides exactly in float64; the
HLS kernel (``hls_templates/globalavgpool``) sums each channel exactly, then applies the
multiply-shift proven equal to the exact rounding for every sum the input type allows
(:func:`division`, the average pool's :func:`.avgpool.proven_divisions`); only where none
fits 64 bits does it perform the integer division (``tessera_div_round_to``), still exact.  It mixes every position, so the partitioner
ends a spatial segment before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from ..exact.requant import MultiplyShift
from .avgpool import AverageDivision, describe, divide_rtl, divisor_shifts, proven_divisions, sum_type
from .base import Layout, OpDef, check_width
from .base.extension import Extension, KernelCall, out_shape_attr
from .quant import Attrs as QuantAttrs
from ..exact.rounding import div_round
from .base.cost import Work, bits, prod


@dataclass(frozen=True)
class Attrs:
    out: QuantAttrs  # the Quant that follows the pool


def _sum_type(x: TensorType) -> TensorType:
    return sum_type(x, prod(x.shape[1:]), (x.shape[0],))


def division(attrs: Attrs, x: TensorType) -> MultiplyShift | None:
    """The proven multiply-shift of the channel average (every sum of ``x``'s codes over all
    positions), or None where the kernel divides."""
    n, s = prod(x.shape[1:]), _sum_type(x)
    table = proven_divisions(attrs.out, x, s.lo, s.hi, [n])
    return None if table is None else table[n]


@dataclass(frozen=True)
class GlobalAvgPoolConfig(AverageDivision):
    template: ClassVar[str] = "globalavgpool/config.tpl"
    n_pixels: int
    n_filt: int
    mult: int
    add: int


@dataclass(frozen=True)
class GlobalAvgPoolCall(KernelCall):
    template: ClassVar[str] = "globalavgpool/function.tpl"


class GlobalAvgPool(OpDef[Attrs]):
    name = "globalavgpool"
    extensions = (Extension(
        "TesseraGlobalAvgPool", "Global average pooling fused with its Quant: exact channel sums, one exact rounding.",
        "globalavgpool", "nnet_tessera_globalavgpool.h",
        config=GlobalAvgPoolConfig, call=GlobalAvgPoolCall, output_shape=out_shape_attr),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if len(x.shape) not in (3, 4):
            raise UnsupportedModelError(f"node '{node}': GlobalAveragePool expects a (C, H, W) or (C, D, H, W) input, "
                                        f"got {x.shape}")
        n = prod(x.shape[1:])
        check_width(_sum_type(x), node, "the channel sum")
        up, down = divisor_shifts(attrs.out, x)
        if (n * max(abs(x.lo), abs(x.hi))).bit_length() + up > 52 or n.bit_length() + down > 52:
            raise UnsupportedModelError(
                f"node '{node}': GlobalAveragePool output grid 2**-{attrs.out.out.frac} is {abs(up - down)} bits away from "
                f"the input's 2**-{x.ftype.frac}: the scaled channel sums would exceed 2**52 (requantize closer to the "
                f"input grid)")
        ends = div_round(np.array([x.lo, x.hi], dtype=np.int64) << np.int64(up), 1 << down, attrs.out.rounding)
        lo, hi = (int(v) for v in np.clip(ends, attrs.out.qmin, attrs.out.qmax))  # averages stay within [x.lo, x.hi]
        return TensorType((x.shape[0], *(1,) * (len(x.shape) - 1)), attrs.out.out, lo, hi)

    def semantics(self, attrs: Attrs, xs, ins, out):
        x = ins[0]
        axes = tuple(range(2, 2 + len(x.shape) - 1))
        sums = xs[0].astype(np.int64).sum(axis=axes, keepdims=True)
        up, down = divisor_shifts(attrs.out, x)
        y = div_round(sums << np.int64(up), np.int64(prod(x.shape[1:])) << np.int64(down), attrs.out.rounding)
        return np.clip(y, attrs.out.qmin, attrs.out.qmax)

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """Each channel's sum, then the average pool's division (:func:`.avgpool.divide_rtl`)."""
        x = ins[0]
        sums = rtl.reduce_sum(np.asarray(xs[0], dtype=object).reshape(x.shape[0], -1), axis=-1)
        n, ms = prod(x.shape[1:]), division(attrs, x)
        y = divide_rtl(rtl, attrs.out, x, sums, np.full(x.shape[0], n), None if ms is None else {n: ms})
        return np.asarray(y, dtype=object).reshape(out.shape)

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        # int64 sums are exact; every scaled sum and the divisor are integers below 2**52
        # (checked by infer), so float64 holds them exactly for the exact division
        x = ins[0]
        axes = np.arange(2, 2 + len(x.shape) - 1, dtype=np.int64)
        sums = builder.op("Cast", [builder.op("ReduceSum", [xs[0], builder.const(axes)], keepdims=1)], to="double")
        up, down = divisor_shifts(attrs.out, x)
        num = builder.op("Mul", [sums, builder.const(np.array(float(1 << up)))])
        y = builder.div_round(num, builder.const(np.array(float(prod(x.shape[1:]) << down))), attrs.out.rounding)
        y = builder.op("Clip", [y, builder.const(np.array(float(attrs.out.qmin))), builder.const(np.array(float(attrs.out.qmax)))])
        return builder.op("Cast", [y], to="int64")

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        if attrs.out.narrow and not attrs.out.out.signed:
            raise UnsupportedModelError(f"node '{node.name}': unsigned narrow-range Quant is not supported")
        up, down = divisor_shifts(attrs.out, x)
        s = _sum_type(x)
        proven = division(attrs, x)
        ms = proven or MultiplyShift(0, 0, 0)
        width = lambda v: abs(v).bit_length() + 1  # noqa: E731
        prod_bits = max(ms.product_bits(s.lo, s.hi), s.ftype.width + 2)
        layer = {"class_name": "TesseraGlobalAvgPool", "n_pixels": prod(x.shape[1:]), "n_filt": x.shape[0],
                 "num_shift": up, "den_shift": down, "rounding": attrs.out.rounding.cpp, "qmin": attrs.out.qmin,
                 "qmax": attrs.out.qmax, "sum_bits": s.ftype.width, "out_bits": attrs.out.out.width,
                 "mult": ms.mult, "add": ms.add, "shift": ms.shift,
                 "form_code": 1 if proven is None else 0,  # nnet::TESSERA_AVG_* (multiply-shift, division)
                 "out_shape": [*out.shape[1:], out.shape[0]]}  # channels-last (1, 1[, 1], C)
        hls.add_layer(node, layer, {"result": out.ftype.hls(), "accum": s.ftype.hls(), "prod": f"fixed<{prod_bits},{prod_bits}>",
                                    "mult": f"fixed<{width(ms.mult)},{width(ms.mult)}>",
                                    "add": f"fixed<{width(ms.add)},{width(ms.add)}>"}, layout=Layout.CHANNELS)

    def form(self, attrs: Attrs, ins, out) -> str:
        ms = division(attrs, ins[0])
        return describe(None if ms is None else {prod(ins[0].shape[1:]): ms})

    def cost(self, attrs: Attrs, ins, out, io):
        """One input pixel per iteration in both io types: C adders (and, at the end, one
        multiply-shift per channel)."""
        x = ins[0]
        return Work(macs=0, steps=prod(x.shape[1:]), lanes=x.shape[0], lut_per_lane=_sum_type(x).ftype.width,
                    ff_per_lane=_sum_type(x).ftype.width, out_bits=out.size * bits(out))


OP = GlobalAvgPool()
