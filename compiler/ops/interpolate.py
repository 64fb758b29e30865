"""Linear interpolation (ONNX Resize, mode linear: bilinear in 2D), 1D, 2D or 3D, on integer codes.

Along each spatial axis every output reads two inputs (their indices clamped to the axis, as
ONNX's edge handling does) with exact rational weights ``w0 / D`` and ``w1 / D`` that sum to
1 (the frontend computes them from the file's coordinate transformation); over the axes the
weights multiply.  So the op is linear with integer weights: its output codes are the
integer sums ``sum w0|w1 ... * x`` and carry the common denominator ``prod D`` as a real
scale the Quant after it (or the graph output) applies -- no rounding here.  Weights are
non-negative, so the output range is the input's times ``prod D``, exactly.

The reference gathers the two inputs of each axis, multiplies by the integer weights and
adds, in int64; the HLS kernel (``hls_templates/interpolate``) does the same per output
element from the same index and weight tables (a 1D or 2D map as a volume of unit axes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType, bits_for_range
from .base import Layout, OpDef, Trait
from .base.cost import Memory, Work, bits, prod
from .base.extension import DIMS, Extension, KernelCall, LayerConfig, Weight, map_shape

#: Widest output code (bits): the reference accumulates in int64.
MAX_WIDTH = 62


@dataclass(frozen=True)
class Axis:
    """One spatial axis: per output index the two input indices read and their integer
    weights (summing to ``denominator``)."""

    sources: tuple[tuple[int, int], ...]
    weights: tuple[tuple[int, int], ...]
    denominator: int

    @classmethod
    def identity(cls, n: int) -> "Axis":
        return cls(tuple((i, i) for i in range(n)), ((1, 0),) * n, 1)


@dataclass(frozen=True)
class Attrs:
    axes: tuple[Axis, ...]  # one per spatial axis

    @property
    def denominator(self) -> int:
        return math.prod(a.denominator for a in self.axes)


@dataclass(frozen=True)
class InterpolateConfig(LayerConfig):
    template: ClassVar[str] = "interpolate/config.tpl"
    in_depth: int
    in_height: int
    in_width: int
    out_depth: int
    out_height: int
    out_width: int
    n_chan: int
    out_bits: int
    accum_t: str
    index_t: str
    weight_t: str


@dataclass(frozen=True)
class InterpolateCall(KernelCall):
    template: ClassVar[str] = "interpolate/function.tpl"
    index: str
    weight: str


class Interpolate(OpDef[Attrs]):
    name = "interpolate"
    traits = frozenset({Trait.RANGE_EXACT, Trait.MAP})
    extensions = (Extension(
        "TesseraInterpolate3D", "Linear interpolation with integer weights per axis (exact sums), channels-last.",
        "interpolate", "nnet_tessera_interpolate.h", config=InterpolateConfig, call=InterpolateCall,
        output_shape=map_shape(lambda layer: [layer.get_attr(f"out_{d}") for d in DIMS], "n_chan"),
        weights=(Weight("index", "i{index}"), Weight("weight", "w{index}")), attributes=("spatial_dims",)),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if len(x.shape) != len(attrs.axes) + 1 or len(attrs.axes) > 3:
            raise UnsupportedModelError(f"node '{node}': {len(attrs.axes)} interpolated axes for input {list(x.shape)}")
        for a, n in zip(attrs.axes, x.shape[1:]):
            if any(not 0 <= i < n for pair in a.sources for i in pair):
                raise UnsupportedModelError(f"node '{node}': an interpolation reads outside an axis of length {n}")
        d = attrs.denominator
        lo, hi = x.lo * d, x.hi * d
        width, signed = bits_for_range(lo, hi)
        if width > MAX_WIDTH:
            raise UnsupportedModelError(f"node '{node}': linear interpolation weights with denominator {d} need "
                                        f"{width}-bit sums (at most {MAX_WIDTH})")
        return TensorType((x.shape[0], *(len(a.sources) for a in attrs.axes)), FixedType(width, 0, signed), lo, hi)

    def semantics(self, attrs: Attrs, xs, ins, out):
        y = np.asarray(xs[0], dtype=np.int64)
        for k, a in enumerate(attrs.axes):
            src, wt = np.asarray(a.sources, dtype=np.int64), np.asarray(a.weights, dtype=np.int64)
            shape = [1] * y.ndim
            shape[2 + k] = len(src)
            y = (np.take(y, src[:, 0], axis=2 + k) * wt[:, 0].reshape(shape) +
                 np.take(y, src[:, 1], axis=2 + k) * wt[:, 1].reshape(shape))
        return y

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """:meth:`semantics` axis by axis: the two inputs each output reads, times their
        integer weights (constant multiplications), added."""
        y = np.asarray(xs[0], dtype=object)
        for k, a in enumerate(attrs.axes):
            src, wt = np.asarray(a.sources, dtype=np.int64), np.asarray(a.weights, dtype=np.int64)
            shape = [1] * y.ndim
            shape[1 + k] = len(src)
            terms = [rtl.scale(np.take(y, src[:, j], axis=1 + k), np.broadcast_to(
                wt[:, j].reshape(shape), np.take(y, src[:, j], axis=1 + k).shape)) for j in range(2)]
            y = rtl.add(*terms)
        return y

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        y = xs[0]
        rank = len(ins[0].shape) + 1
        for k, a in enumerate(attrs.axes):
            src, wt = np.asarray(a.sources, dtype=np.int64), np.asarray(a.weights, dtype=np.int64)
            shape = [1] * rank
            shape[2 + k] = len(src)
            terms = [builder.op("Mul", [builder.op("Gather", [y, builder.const(src[:, j])], axis=2 + k),
                                        builder.const(wt[:, j].reshape(shape))]) for j in range(2)]
            y = builder.op("Add", terms)
        return y

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        n = len(attrs.axes)
        if not np.array_equal(hls.flat_perm(node.inputs[0]), hls.layout_perm(x.shape, Layout.CHANNELS)):
            raise UnsupportedModelError(f"node '{node.name}': linear interpolation of a {list(x.shape)} map stored in "
                                        "ONNX order is not supported")
        axes = (Axis.identity(1),) * (3 - n) + attrs.axes
        spatial = (1,) * (3 - n) + x.shape[1:]
        index = np.concatenate([np.asarray(a.sources, dtype=np.int64).ravel() for a in axes])
        weight = np.concatenate([np.asarray(a.weights, dtype=np.int64).ravel() for a in axes])
        layer = {"class_name": "TesseraInterpolate3D", "n_chan": x.shape[0], "spatial_dims": n,
                 "out_bits": out.ftype.width, "index_data": index.astype(np.float64),
                 "weight_data": weight.astype(np.float64)}
        for i, d in enumerate(DIMS):
            layer[f"in_{d}"], layer[f"out_{d}"] = spatial[i], len(axes[i].sources)
        ibits = max(int(index.max()).bit_length(), 1) + 1
        wbits = max(int(weight.max()).bit_length(), 1) + 1
        precision = {"index": f"fixed<{ibits},{ibits}>", "weight": f"fixed<{wbits},{wbits}>",
                     "accum": f"fixed<{out.ftype.width + 1},{out.ftype.width + 1}>", "result": out.ftype.hls()}
        hls.add_layer(node, layer, precision, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        """Per output element ``2**axes`` products of a code by a small constant, summed."""
        x = ins[0]
        terms = 1 << len(attrs.axes)
        wbits = max(max(w for pair in a.weights for w in pair).bit_length() for a in attrs.axes)
        stream = io == "io_stream"
        return Work(macs=0, steps=prod(out.shape[1:]), lanes=x.shape[0], lut_per_lane=terms * (bits(x) + wbits),
                    ff_per_lane=bits(out), weight_bits=sum(4 * len(a.sources) * 16 for a in attrs.axes),
                    line_buffer=(Memory(1, prod(x.shape[1:]), x.shape[0] * bits(x)),) if stream else (),
                    out_bits=out.size * bits(out))


OP = Interpolate()
