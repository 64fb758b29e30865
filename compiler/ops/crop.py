"""Crop: a box of a spatial tensor (``y = x[:, a0:a0+n0, a1:a1+n1, ...]``), 1D to 3D.

Not an ONNX op a model brings: the partitioner inserts it where a block's local value is
larger than one consumer needs (a skip connection read by a deeper path with a larger
halo, or a transposed convolution / upsampling whose local output overhangs the block).
Every output code is a copy of an input code, so the type is unchanged.  The reference is
onnxruntime's ``Slice``; 3D (and 2D as depth 1) lowers to ``TesseraCrop3D``
(``hls_templates/crop``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import Layout, OpDef, Trait
from .base.extension import DIMS, Extension, KernelCall, LayerConfig, attr_shape, map_shape
from .base.cost import Work, bits, prod


@dataclass(frozen=True)
class Attrs:
    starts: tuple[int, ...]  # per spatial dim
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class CropConfig(LayerConfig):
    template: ClassVar[str] = "crop/config.tpl"
    in_depth: int
    in_height: int
    in_width: int
    n_chan: int
    start_depth: int
    start_height: int
    start_width: int
    out_depth: int
    out_height: int
    out_width: int


@dataclass(frozen=True)
class CropCall(KernelCall):
    template: ClassVar[str] = "crop/function.tpl"


class Crop(OpDef[Attrs]):
    name = "crop"
    traits = frozenset({Trait.RANGE_EXACT, Trait.CODE_SELECT})
    extensions = (Extension(
        "TesseraCrop3D", "A box of a channels-last tensor (inserted by the spatial partitioner).", "crop",
        "nnet_tessera_crop3d.h", config=CropConfig, call=CropCall,
        output_shape=map_shape(attr_shape(*(f"out_{d}" for d in DIMS)), "n_chan"), attributes=("spatial_dims",)),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        spatial = x.shape[1:]
        if not (len(spatial) == len(attrs.starts) == len(attrs.sizes) <= 3) or any(
                a < 0 or n < 1 or a + n > s for a, n, s in zip(attrs.starts, attrs.sizes, spatial)):
            raise UnsupportedModelError(f"node '{node}': crop {attrs.starts}+{attrs.sizes} outside input {x.shape}")
        return TensorType((x.shape[0], *attrs.sizes), x.ftype, x.lo, x.hi)

    def semantics(self, attrs: Attrs, xs, ins, out):
        sl = tuple(slice(a, a + n) for a, n in zip(attrs.starts, attrs.sizes))
        return xs[0][(slice(None), slice(None)) + sl]

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        axes = np.arange(2, 2 + len(attrs.starts), dtype=np.int64)
        starts = np.array(attrs.starts, dtype=np.int64)
        return builder.op("Slice", [xs[0], builder.const(starts), builder.const(starts + np.array(attrs.sizes, dtype=np.int64)),
                              builder.const(axes)])

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        n = len(attrs.starts)
        spatial = (1,) * (3 - n) + x.shape[1:]
        starts = (0,) * (3 - n) + attrs.starts
        sizes = (1,) * (3 - n) + attrs.sizes
        layer = {"class_name": "TesseraCrop3D", "n_chan": x.shape[0], "spatial_dims": n}
        for i, d in enumerate(DIMS):
            layer[f"in_{d}"], layer[f"start_{d}"], layer[f"out_{d}"] = spatial[i], starts[i], sizes[i]
        hls.add_layer(node, layer, {"result": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        """A box of the input: wires in io_parallel; io_stream reads every input word and
        forwards those inside the box (a word register per channel)."""
        x = ins[0]
        if io == "io_parallel":
            return Work(macs=0, steps=0, out_bits=out.size * bits(out))
        return Work(macs=0, steps=prod(x.shape[1:]), lanes=x.shape[0], ff_per_lane=bits(x))


OP = Crop()
