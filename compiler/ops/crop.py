"""Crop: a box of a tensor, every axis with a positive step (``y = x[:, c0:c0+k*cs:cs,
a0:a0+n0*s0:s0, ...]``), 0D to 3D maps and recurrent sequences.

The partitioner inserts it where a block's local value is larger than one consumer needs (a
skip connection read by a deeper path with a larger halo, or a transposed convolution /
upsampling whose local output overhangs the block); an ONNX ``Slice`` with positive steps is
one too (channels and spatial axes, the steps of a sequence), and a ``Gather`` of one index.
Every output code is a copy of an input code, so the type is unchanged; codes with a real
meaning per channel keep their channels' meanings.  The reference is onnxruntime's ``Slice``;
3D (and 2D as depth 1) lowers to ``TesseraCrop3D`` (``hls_templates/crop``), and so does a
``(T, F)`` sequence, stored step by step: the kernel's width walks its steps and its channels
are the sequence's features (the stream form reads one word per step).
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
    sizes: tuple[int, ...]  # the positions kept per spatial dim
    channel_start: int = 0
    channels: int | None = None  # the channels kept from channel_start (None: every channel)
    steps: tuple[int, ...] = ()  # per spatial dim (none: every step 1)
    channel_step: int = 1

    def channel_range(self, x: TensorType) -> tuple[int, int]:
        return self.channel_start, x.shape[0] - self.channel_start if self.channels is None else self.channels

    def spatial_steps(self) -> tuple[int, ...]:
        return self.steps or (1,) * len(self.starts)

    def slices(self, x: TensorType) -> tuple[slice, ...]:
        """The box on one sample's axes: channels, then each spatial axis."""
        c0, k = self.channel_range(x)
        firsts, counts, steps = (c0, *self.starts), (k, *self.sizes), (self.channel_step, *self.spatial_steps())
        return tuple(slice(a, a + (n - 1) * s + 1, s) for a, n, s in zip(firsts, counts, steps))


@dataclass(frozen=True)
class CropConfig(LayerConfig):
    template: ClassVar[str] = "crop/config.tpl"
    in_depth: int
    in_height: int
    in_width: int
    n_chan: int
    start_chan: int
    out_chan: int
    step_chan: int
    start_depth: int
    start_height: int
    start_width: int
    out_depth: int
    out_height: int
    out_width: int
    step_depth: int
    step_height: int
    step_width: int


@dataclass(frozen=True)
class CropCall(KernelCall):
    template: ClassVar[str] = "crop/function.tpl"


class Crop(OpDef[Attrs]):
    name = "crop"
    traits = frozenset({Trait.RANGE_EXACT, Trait.CODE_SELECT})
    extensions = (Extension(
        "TesseraCrop3D", "A box of a channels-last tensor or of a sequence, positive steps on each axis.", "crop",
        "nnet_tessera_crop3d.h", config=CropConfig, call=CropCall,
        output_shape=map_shape(attr_shape(*(f"out_{d}" for d in DIMS)), "out_chan"), attributes=("spatial_dims",)),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        spatial = x.shape[1:]
        c0, k = attrs.channel_range(x)
        steps = attrs.spatial_steps()
        if not (len(spatial) == len(attrs.starts) == len(attrs.sizes) == len(steps) <= 3) or any(
                a < 0 or n < 1 or t < 1 or a + (n - 1) * t >= s
                for a, n, t, s in zip(attrs.starts, attrs.sizes, steps, spatial)) or \
                c0 < 0 or k < 1 or attrs.channel_step < 1 or c0 + (k - 1) * attrs.channel_step >= x.shape[0]:
            raise UnsupportedModelError(f"node '{node}': crop {attrs.starts}+{attrs.sizes} steps {steps} (channels "
                                        f"{c0}+{k} step {attrs.channel_step}) outside input {x.shape}")
        return TensorType((k, *attrs.sizes), x.ftype, x.lo, x.hi)

    def carry_scale(self, attrs: Attrs, meaning, ins):
        if meaning.channels == 1:
            return meaning
        channels = attrs.slices(ins[0])[0]
        pick = lambda v: v if len(v) == 1 else v[channels]  # noqa: E731
        return replace(meaning, scale=pick(meaning.scale), zero=pick(meaning.zero))

    def semantics(self, attrs: Attrs, xs, ins, out):
        return xs[0][(slice(None),) + attrs.slices(ins[0])]

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        return np.asarray(xs[0], dtype=object)[attrs.slices(ins[0])]

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        box = attrs.slices(ins[0])
        axes = np.arange(1, 1 + len(box), dtype=np.int64)
        starts, ends, steps = (np.array(v, dtype=np.int64) for v in zip(*((b.start, b.stop, b.step) for b in box)))
        return builder.op("Slice", [xs[0], builder.const(starts), builder.const(ends), builder.const(axes),
                                    builder.const(steps)])

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        held = hls.flat_perm(node.inputs[0]).tolist()
        if held == hls.layout_perm(x.shape, Layout.CHANNELS).tolist():
            layer = _channels_last_box(attrs, x)
            layout = Layout.CHANNELS
        elif len(x.shape) == 2 and held == list(range(x.size)):
            layer = _sequence_box(attrs, x)
            layout = Layout.FLAT
        else:
            raise UnsupportedModelError(f"node '{node.name}': a crop or Slice of a tensor stored neither channels-last "
                                        "nor step by step is not supported")
        hls.add_layer(node, {"class_name": "TesseraCrop3D", **layer}, {"result": out.ftype.hls()}, layout=layout)

    def cost(self, attrs: Attrs, ins, out, io):
        """A box of the input: wires in io_parallel; io_stream reads every input word and
        forwards those inside the box (a word register per channel)."""
        x = ins[0]
        if io == "io_parallel":
            return Work(macs=0, steps=0, out_bits=out.size * bits(out))
        return Work(macs=0, steps=prod(x.shape[1:]), lanes=x.shape[0], ff_per_lane=bits(x))


def _channels_last_box(attrs: Attrs, x: TensorType) -> dict:
    """The kernel's box of a (C, *spatial) map stored channels-last (depth and height 1 below 3D)."""
    n = len(attrs.starts)
    pad = (1,) * (3 - n)
    spatial, starts, sizes = pad + x.shape[1:], (0,) * (3 - n) + attrs.starts, pad + attrs.sizes
    steps = pad + attrs.spatial_steps()
    c0, k = attrs.channel_range(x)
    layer = {"n_chan": x.shape[0], "start_chan": c0, "out_chan": k, "step_chan": attrs.channel_step, "spatial_dims": n}
    for i, d in enumerate(DIMS):
        layer[f"in_{d}"], layer[f"start_{d}"], layer[f"out_{d}"], layer[f"step_{d}"] = \
            spatial[i], starts[i], sizes[i], steps[i]
    return layer


def _sequence_box(attrs: Attrs, x: TensorType) -> dict:
    """The kernel's box of a (T, F) sequence stored step by step: a 1D map whose width is the
    steps (the op's axis 0) and whose channels are the features (the op's spatial axis)."""
    c0, k = attrs.channel_range(x)
    (f0,), (m,), (fs,) = attrs.starts, attrs.sizes, attrs.spatial_steps()
    layer = {"n_chan": x.shape[1], "start_chan": f0, "out_chan": m, "step_chan": fs, "spatial_dims": 1}
    for d in DIMS:
        layer[f"in_{d}"], layer[f"start_{d}"], layer[f"out_{d}"], layer[f"step_{d}"] = 1, 0, 1, 1
    layer.update(in_width=x.shape[0], start_width=c0, out_width=k, step_width=attrs.channel_step)
    return layer


OP = Crop()
