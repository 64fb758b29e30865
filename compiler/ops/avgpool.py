"""Average pooling followed by its ``Quant``, as one exact op (2D or 3D).

``y = clip(R(S * 2**(fy - fx) / n))`` where ``S`` is the window sum of codes (zero padding)
and ``n`` the divisor: the kernel volume (``count_include_pad=1``) or the number of valid
elements (``count_include_pad=0``).  ``n`` is generally not a power of two (CosmoFlow's
3x3x3 windows: 27), so an average is not a fixed-point number; the compiler therefore fuses
the pool with the ``Quant`` that follows it and rounds the exact rational ``S / n`` once,
with the Quant's rounding mode (:func:`.rounding.div_round`).  The HLS kernel
(``hls_templates/avgpool``) sums exactly and performs the same integer division
(``tessera_div_round`` of ``hls_templates/common/nnet_tessera_rounding.h``).  A window op
for the partitioner, except that a padded average whose divisor excludes the padding cannot
be tiled (its divisor depends on where the volume ends).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType, bits_for_range
from .base import Layout, OpDef, Trait, check_width
from .conv import windows
from .extension import DIMS
from .maxpool import pool3d_extension, pool_work
from .quant import Attrs as QuantAttrs
from .rounding import div_round
from .spans import window_span


@dataclass(frozen=True)
class Attrs:
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...]  # begins then ends
    count_include_pad: bool
    out: QuantAttrs


def out_spatial(attrs: Attrs, spatial) -> tuple[int, ...]:
    n = len(attrs.kernel)
    return tuple((spatial[i] + attrs.pads[i] + attrs.pads[n + i] - attrs.kernel[i]) // attrs.strides[i] + 1 for i in range(n))


def divisors(attrs: Attrs, spatial) -> np.ndarray:
    """The divisor of every output position (int64, shape = output spatial)."""
    n = len(attrs.kernel)
    osp = out_spatial(attrs, spatial)
    if attrs.count_include_pad:
        return np.full(osp, int(np.prod(attrs.kernel)), dtype=np.int64)
    counts = []
    for i in range(n):
        start = np.arange(osp[i]) * attrs.strides[i] - attrs.pads[i]
        lo, hi = np.maximum(start, 0), np.minimum(start + attrs.kernel[i], spatial[i])
        counts.append(hi - lo)
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


class AvgPool(OpDef[Attrs]):
    name = "avgpool"
    traits = frozenset({Trait.WINDOW})
    extensions = (pool3d_extension(
        "TesseraAvgPool3D", "Average pooling fused with its Quant: exact window sum, one exact rational rounding.",
        "avgpool", "nnet_tessera_avgpool.h",
        extra=("pad_front", "pad_top", "pad_left", "count_include_pad", "num_shift", "den_shift", "qmin", "qmax",
               "sum_bits", "out_bits"),
        texts=("rounding",), types=("accum",), config_types=lambda layer: {"accum_t": layer.get_attr("accum_t").name}),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        n = len(attrs.kernel)
        if len(x.shape) != n + 1:
            raise UnsupportedModelError(f"node '{node}': {n}D AveragePool expects a (C, {n} spatial) input, got {x.shape}")
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
        win = windows(np.pad(xs[0].astype(np.int64), pad), attrs.kernel, attrs.strides)
        win = win[(slice(None), slice(None)) + tuple(slice(0, s) for s in out.shape[1:])]
        sums = win.sum(axis=tuple(range(2 + n, 2 + 2 * n)))
        up, down = divisor_shifts(attrs.out, ins[0])
        y = div_round(sums << np.int64(up), divisors(attrs, ins[0].shape[1:]) << np.int64(down), attrs.out.rounding)
        return np.clip(y, attrs.out.qmin, attrs.out.qmax)

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        # Window sums: onnxruntime's AveragePool is float32 only.  avg * k rounds back to the
        # exact integer sum while |sum| < 2**20 (relative error of the float32 average <= 2**-23,
        # so the absolute error stays below 1/8); the compiler checks that bound first.
        x = ins[0]
        k = int(np.prod(attrs.kernel))
        if k * max(abs(x.lo), abs(x.hi)) >= 2**20:
            raise UnsupportedModelError(
                f"AveragePool window sums reach {k * max(abs(x.lo), abs(x.hi))}: beyond the exact float32 reference (2**20)")
        avg = builder.op("AveragePool", [builder.op("Cast", [xs[0]], to="float")], kernel_shape=list(attrs.kernel),
                   strides=list(attrs.strides), pads=list(attrs.pads), count_include_pad=1)
        sums = builder.op("Round", [builder.op("Mul", [builder.op("Cast", [avg], to="double"), builder.const(np.array(float(k)))])])
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
        up, down = divisor_shifts(attrs.out, x)
        k = int(np.prod(attrs.kernel))
        sum_t = sum_type(x, k)
        layer = {"class_name": "TesseraAvgPool3D", "n_filt": x.shape[0], "count_include_pad": bool(attrs.count_include_pad),
                 "num_shift": up, "den_shift": down, "rounding": attrs.out.rounding.cpp,
                 "qmin": attrs.out.qmin, "qmax": attrs.out.qmax, "sum_bits": sum_t.ftype.width,
                 "out_bits": attrs.out.out.width}
        for i, d in enumerate(DIMS):
            layer[f"in_{d}"], layer[f"out_{d}"] = spatial[i], osp[i]
            layer[f"pool_{d}"], layer[f"stride_{d}"] = kern[i], strides[i]
        layer.update(pad_front=pads[0], pad_top=pads[1], pad_left=pads[2])
        hls.add_layer(node, layer, {"result": out.ftype.hls(), "accum": sum_t.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        return pool_work(attrs.kernel, attrs.pads, ins[0], out, io,
                         extra_bits=max(1, math.ceil(math.log2(int(np.prod(attrs.kernel))))))

    def input_span(self, attrs: Attrs, span):
        return window_span(span, attrs.kernel, attrs.strides, attrs.pads)

    def with_pads(self, attrs: Attrs, pads):
        return dataclasses.replace(attrs, pads=tuple(pads))

    def tiling_refusal(self, attrs: Attrs) -> str | None:
        if not attrs.count_include_pad and any(attrs.pads):
            return "a padded average that excludes the padding from its divisor cannot be tiled"
        return None

    def spatial_stride(self, attrs: Attrs):
        return attrs.strides


OP = AvgPool()
