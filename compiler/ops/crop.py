"""Crop: a box of a tensor (``y = x[:, c0:c0+k, a0:a0+n0, a1:a1+n1, ...]``), 0D to 3D maps.

The partitioner inserts it where a block's local value is larger than one consumer needs (a
skip connection read by a deeper path with a larger halo, or a transposed convolution /
upsampling whose local output overhangs the block); an ONNX ``Slice`` with step 1 is one too
(channels and spatial axes).  Every output code is a copy of an input code, so the type is
unchanged; codes with a real meaning per channel keep their channels' meanings.  The reference is
onnxruntime's ``Slice``; 3D (and 2D as depth 1) lowers to ``TesseraCrop3D``
(``hls_templates/crop``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    channel_start: int = 0
    channels: int | None = None  # the channels kept from channel_start (None: every channel)

    def channel_range(self, x: TensorType) -> tuple[int, int]:
        return self.channel_start, x.shape[0] - self.channel_start if self.channels is None else self.channels


@dataclass(frozen=True)
class CropConfig(LayerConfig):
    template: ClassVar[str] = "crop/config.tpl"
    in_depth: int
    in_height: int
    in_width: int
    n_chan: int
    start_chan: int
    out_chan: int
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
        output_shape=map_shape(attr_shape(*(f"out_{d}" for d in DIMS)), "out_chan"), attributes=("spatial_dims",)),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        spatial = x.shape[1:]
        c0, k = attrs.channel_range(x)
        if not (len(spatial) == len(attrs.starts) == len(attrs.sizes) <= 3) or any(
                a < 0 or n < 1 or a + n > s for a, n, s in zip(attrs.starts, attrs.sizes, spatial)) or \
                c0 < 0 or k < 1 or c0 + k > x.shape[0]:
            raise UnsupportedModelError(f"node '{node}': crop {attrs.starts}+{attrs.sizes} (channels {c0}+{k}) outside "
                                        f"input {x.shape}")
        return TensorType((k, *attrs.sizes), x.ftype, x.lo, x.hi)

    def carry_scale(self, attrs: Attrs, meaning, ins):
        if meaning.channels == 1:
            return meaning
        c0, k = attrs.channel_range(ins[0])
        pick = lambda v: v if len(v) == 1 else v[c0:c0 + k]  # noqa: E731
        return replace(meaning, scale=pick(meaning.scale), zero=pick(meaning.zero))

    def semantics(self, attrs: Attrs, xs, ins, out):
        c0, k = attrs.channel_range(ins[0])
        sl = tuple(slice(a, a + n) for a, n in zip(attrs.starts, attrs.sizes))
        return xs[0][(slice(None), slice(c0, c0 + k)) + sl]

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        c0, k = attrs.channel_range(ins[0])
        sl = tuple(slice(a, a + n) for a, n in zip(attrs.starts, attrs.sizes))
        return np.asarray(xs[0], dtype=object)[(slice(c0, c0 + k),) + sl]

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        c0, k = attrs.channel_range(ins[0])
        axes = np.arange(1, 2 + len(attrs.starts), dtype=np.int64)
        starts = np.array((c0, *attrs.starts), dtype=np.int64)
        return builder.op("Slice", [xs[0], builder.const(starts),
                                    builder.const(starts + np.array((k, *attrs.sizes), dtype=np.int64)), builder.const(axes)])

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        if hls.flat_perm(node.inputs[0]).tolist() != hls.layout_perm(x.shape, Layout.CHANNELS).tolist():
            raise UnsupportedModelError(f"node '{node.name}': a crop or Slice of a tensor that is not stored channels-last "
                                        "(a recurrent sequence) is not supported")
        n = len(attrs.starts)
        spatial = (1,) * (3 - n) + x.shape[1:]
        starts = (0,) * (3 - n) + attrs.starts
        sizes = (1,) * (3 - n) + attrs.sizes
        c0, k = attrs.channel_range(x)
        layer = {"class_name": "TesseraCrop3D", "n_chan": x.shape[0], "start_chan": c0, "out_chan": k, "spatial_dims": n}
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
