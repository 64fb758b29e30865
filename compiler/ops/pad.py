"""Pad by copies (ONNX ``Pad`` of mode ``reflect`` or ``edge`` on the spatial axes), 1D, 2D or 3D.

Every output code is a copy of an input code: ``reflect`` mirrors the input at each end
without repeating the edge (output ``begin - j`` copies input ``j``), ``edge`` repeats the
edge code; so the type and the code range are the input's, and codes with a real meaning
(float scales, zero points, per channel) keep it -- unlike a zero pad, no new value appears.
``reflect`` needs every pad below the axis length (ONNX's one mirroring; onnxruntime refuses
more), refused otherwise in one line.  The reference is onnxruntime's ``Pad`` on the int64
codes.  It lowers to ``TesseraPad`` (``hls_templates/pad``) in both io types: io_parallel
copies, io_stream keeps a ring of the last ``max(front, back) + 1`` input planes (rows of a 2D
map, words of a 1D signal; one plane for ``edge``) and writes each output plane once the plane
it copies has arrived.  Not a window op for the partitioner: a padded block would mirror its
own border, not the volume's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import Layout, OpDef, Trait
from .base.cost import Memory, Work, bits, prod
from .base.extension import Extension, KernelCall, LayerConfig, out_shape_attr


class PadMode(Enum):
    """ONNX ``Pad`` modes that copy codes (numpy's ``np.pad`` modes of the same names)."""

    REFLECT = "reflect"
    EDGE = "edge"

    @property
    def cpp(self) -> str:
        """The kernel's ``nnet::tessera_pad_mode`` enumerator."""
        return f"TESSERA_PAD_{self.name}"


@dataclass(frozen=True)
class Attrs:
    pads: tuple[int, ...]  # begins of each spatial axis, then ends
    mode: PadMode

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        n = len(self.pads) // 2
        return tuple((self.pads[i], self.pads[n + i]) for i in range(n))


def ring_planes(attrs: Attrs) -> int:
    """Input planes (along the first spatial axis) the io_stream kernel keeps."""
    front, back = attrs.pairs[0]
    return max(front, back) + 1 if attrs.mode is PadMode.REFLECT else 1


def source_index(attrs: Attrs, shape: tuple[int, ...]) -> np.ndarray:
    """``(C, *padded)``: the flat index into a ``(C, *spatial)`` value that each output copies."""
    idx = np.arange(prod(shape)).reshape(shape)
    return np.pad(idx, ((0, 0),) + attrs.pairs, mode=attrs.mode.value)


@dataclass(frozen=True)
class PadConfig(LayerConfig):
    template: ClassVar[str] = "pad/config.tpl"
    in_depth: int
    in_height: int
    in_width: int
    n_chan: int
    out_depth: int
    out_height: int
    out_width: int
    pad_front: int
    pad_top: int
    pad_left: int
    mode: str  # nnet::tessera_pad_mode's enumerator
    ring_planes: int


@dataclass(frozen=True)
class PadCall(KernelCall):
    template: ClassVar[str] = "pad/function.tpl"


class Pad(OpDef[Attrs]):
    name = "pad"
    traits = frozenset({Trait.MAP, Trait.RANGE_EXACT, Trait.CODE_SELECT})
    extensions = (Extension(
        "TesseraPad", "Reflect or edge padding of a channels-last map: copies of input codes.", "pad",
        "nnet_tessera_pad.h", config=PadConfig, call=PadCall, output_shape=out_shape_attr),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        spatial = x.shape[1:]
        if not 1 <= len(spatial) <= 3 or len(attrs.pads) != 2 * len(spatial) or min(attrs.pads) < 0:
            raise UnsupportedModelError(f"node '{node}': Pad pads {list(attrs.pads)} on input {x.shape}; 1D to 3D "
                                        "maps with non-negative spatial pads are supported")
        if attrs.mode is PadMode.REFLECT:
            for axis, ((front, back), n) in enumerate(zip(attrs.pairs, spatial)):
                if max(front, back) >= n:
                    raise UnsupportedModelError(
                        f"node '{node}': Pad mode=reflect pads={list(attrs.pads)}: pad {max(front, back)} on spatial "
                        f"axis {axis} of length {n} (reflect pads must be below the length)")
        shape = tuple(n + a + b for n, (a, b) in zip(spatial, attrs.pairs))
        return TensorType((x.shape[0], *shape), x.ftype, x.lo, x.hi)

    def semantics(self, attrs: Attrs, xs, ins, out):
        return np.pad(xs[0], ((0, 0), (0, 0)) + attrs.pairs, mode=attrs.mode.value)

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        return rtl.gather(xs[0], source_index(attrs, ins[0].shape))

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        n = len(attrs.pairs)
        pads = np.array([0, 0, *attrs.pads[:n], 0, 0, *attrs.pads[n:]], dtype=np.int64)
        return builder.op("Pad", [xs[0], builder.const(pads)], mode=attrs.mode.value)

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        if hls.flat_perm(node.inputs[0]).tolist() != hls.layout_perm(x.shape, Layout.CHANNELS).tolist():
            raise UnsupportedModelError(f"node '{node.name}': a Pad of a tensor that is not stored channels-last "
                                        "(a recurrent sequence) is not supported")
        n = len(attrs.pairs)
        lift = lambda v, one: tuple(v) + (one,) * (3 - n)  # noqa: E731 - trailing unit axes keep the raster order
        spatial, padded, begins = lift(x.shape[1:], 1), lift(out.shape[1:], 1), lift(attrs.pads[:n], 0)
        layer = {"class_name": "TesseraPad", "n_chan": x.shape[0], "mode": attrs.mode.cpp,
                 "ring_planes": ring_planes(attrs), "out_shape": [*out.shape[1:], out.shape[0]]}
        for d, i_, o_ in zip(("depth", "height", "width"), spatial, padded):
            layer[f"in_{d}"], layer[f"out_{d}"] = i_, o_
        layer.update(pad_front=begins[0], pad_top=begins[1], pad_left=begins[2])
        hls.add_layer(node, layer, {"result": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        """Copies: wires in io_parallel; io_stream writes one word per iteration from a ring of
        input planes, filled for the planes the first output plane waits for."""
        x = ins[0]
        if io == "io_parallel":
            return Work(macs=0, steps=0, out_bits=out.size * bits(out))
        plane = prod(x.shape[2:])
        ring = Memory(x.shape[0], ring_planes(attrs) * plane, bits(x))
        first = attrs.pairs[0][0] + 1 if attrs.mode is PadMode.REFLECT else 1
        return Work(macs=0, steps=prod(out.shape[1:]), lanes=x.shape[0], ff_per_lane=bits(x), line_buffer=(ring,),
                    fill_steps=first * plane, out_bits=out.size * bits(out))


OP = Pad()
