"""Nearest-neighbour upsampling by integer factors (ONNX Resize, mode nearest), 1D, 2D or 3D.

Every output code is a copy of one input code, so the type is unchanged.  The reference
uses onnxruntime's int32 ``Resize`` (codes must fit 31 bits); 3D lowers to the
``TesseraUpsample3D`` extension (``hls_templates/upsample``), 2D as depth 1, 1D as depth and
height 1.  A scatter op for the partitioner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import Layout, OpDef, Trait
from .base.extension import DIMS, Extension, KernelCall, LayerConfig, map_shape
from ..exact.spans import upsample_input
from .base.cost import Memory, Work, bits, prod


@dataclass(frozen=True)
class Attrs:
    factors: tuple[int, ...]  # per spatial dim


@dataclass(frozen=True)
class UpsampleConfig(LayerConfig):
    template: ClassVar[str] = "upsample/config.tpl"
    in_depth: int
    in_height: int
    in_width: int
    n_chan: int
    factor_depth: int
    factor_height: int
    factor_width: int


@dataclass(frozen=True)
class UpsampleCall(KernelCall):
    template: ClassVar[str] = "upsample/function.tpl"


class Upsample(OpDef[Attrs]):
    name = "upsample"
    traits = frozenset({Trait.SCATTER, Trait.RANGE_EXACT, Trait.CODE_SELECT})
    extensions = (Extension(
        "TesseraUpsample3D", "Nearest-neighbour upsampling by integer factors, channels-last.", "upsample",
        "nnet_tessera_upsample.h", config=UpsampleConfig, call=UpsampleCall,
        output_shape=map_shape(lambda layer: [layer.get_attr(f"in_{d}") * layer.get_attr(f"factor_{d}") for d in DIMS],
                               "n_chan"), attributes=("spatial_dims",)),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        if len(x.shape) != len(attrs.factors) + 1 or min(attrs.factors) < 1:
            raise UnsupportedModelError(f"node '{node}': upsampling factors {attrs.factors} do not fit input {x.shape}")
        if x.ftype.width > 31:
            raise UnsupportedModelError(f"node '{node}': upsampling {x.ftype.width}-bit codes (the reference handles 31)")
        return TensorType((x.shape[0], *(s * f for s, f in zip(x.shape[1:], attrs.factors))), x.ftype, x.lo, x.hi)

    def semantics(self, attrs: Attrs, xs, ins, out):
        y = xs[0]
        for i, f in enumerate(attrs.factors):
            y = np.repeat(y, f, axis=2 + i)
        return y

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        y = np.asarray(xs[0], dtype=object)
        for i, f in enumerate(attrs.factors):
            y = np.repeat(y, f, axis=1 + i)
        return y

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        scales = np.array([1.0, 1.0, *attrs.factors], dtype=np.float32)
        y = builder.op("Resize", [builder.op("Cast", [xs[0]], to="int32"), "", builder.const(scales)], mode="nearest",
                 nearest_mode="floor", coordinate_transformation_mode="asymmetric")
        return builder.op("Cast", [y], to="int64")

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        n = len(attrs.factors)
        spatial = (1,) * (3 - n) + x.shape[1:]
        factors = (1,) * (3 - n) + attrs.factors
        layer = {"class_name": "TesseraUpsample3D", "n_chan": x.shape[0], "spatial_dims": n}
        for i, d in enumerate(DIMS):
            layer[f"in_{d}"], layer[f"factor_{d}"] = spatial[i], factors[i]
        hls.add_layer(node, layer, {"result": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        x = ins[0]
        stream = io == "io_stream"
        return Work(macs=0, steps=prod(out.shape[1:]), lanes=x.shape[0], lut_per_lane=bits(x), ff_per_lane=bits(x),
                    line_buffer=(Memory(1, prod(x.shape[2:]), x.shape[0] * bits(x)),) if stream else (),  # plane[H*W] words
                    out_bits=out.size * bits(out))

    def input_span(self, attrs: Attrs, span):
        return tuple(upsample_input(lo, hi, attrs.factors[i]) for i, (lo, hi) in enumerate(span))

    def spatial_stride(self, attrs: Attrs):
        return attrs.factors

    def scatter_origin(self, attrs: Attrs, have):
        return tuple(lo * f for (lo, _), f in zip(have, attrs.factors))


OP = Upsample()
