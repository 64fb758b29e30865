"""DepthToSpace (PixelShuffle): channel blocks moved onto the spatial grid, ONNX ``DepthToSpace``.

Input ``(C * b * b, H, W)``, output ``(C, H * b, W * b)``; output ``(c, h * b + i, w * b + j)``
is input channel ``(i * b + j) * C + c`` (mode ``DCR``, the default) or ``c * b * b + i * b + j``
(``CRD``, PyTorch's ``PixelShuffle``) at ``(h, w)``.  Every output code is a copy of one input
code.  The reference is the ONNX definition itself, int64 ``Reshape`` / ``Transpose`` /
``Reshape``; the lowering is ``TesseraDepthToSpace`` (``hls_templates/depthtospace``),
channels-last, both io types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import Layout, OpDef, Trait
from .base.extension import Extension, KernelCall, LayerConfig
from .base.cost import Memory, Work, bits, prod


@dataclass(frozen=True)
class Attrs:
    block: int
    crd: bool = False  # mode CRD (column-row-depth); DCR otherwise


def _split(attrs: Attrs, c_in: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ONNX definition: the (N, ...) 6D view of the input and the transpose of it."""
    b, c = attrs.block, c_in // (attrs.block * attrs.block)
    if attrs.crd:
        return (c, b, b), (0, 1, 4, 2, 5, 3)
    return (b, b, c), (0, 3, 4, 1, 5, 2)


@dataclass(frozen=True)
class DepthToSpaceConfig(LayerConfig):
    template: ClassVar[str] = "depthtospace/config.tpl"
    in_height: int
    in_width: int
    n_chan: int
    block: int
    crd: bool


@dataclass(frozen=True)
class DepthToSpaceCall(KernelCall):
    template: ClassVar[str] = "depthtospace/function.tpl"


class DepthToSpace(OpDef[Attrs]):
    name = "depthtospace"
    traits = frozenset({Trait.RANGE_EXACT, Trait.CODE_SELECT})
    extensions = (Extension(
        "TesseraDepthToSpace", "DepthToSpace / PixelShuffle: channel blocks moved onto the grid, channels-last.",
        "depthtospace", "nnet_tessera_depth_to_space.h", config=DepthToSpaceConfig, call=DepthToSpaceCall,
        output_shape=lambda layer: [layer.get_attr("in_height") * layer.get_attr("block"),
                                    layer.get_attr("in_width") * layer.get_attr("block"), layer.get_attr("n_chan")]),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        b = attrs.block
        if len(x.shape) != 3:
            raise UnsupportedModelError(f"node '{node}': DepthToSpace needs a (C, H, W) input, got {x.shape}")
        if b < 1 or x.shape[0] % (b * b):
            raise UnsupportedModelError(f"node '{node}': {x.shape[0]} channels are not a multiple of blocksize^2 = {b * b}")
        return TensorType((x.shape[0] // (b * b), x.shape[1] * b, x.shape[2] * b), x.ftype, x.lo, x.hi)

    def carry_scale(self, attrs: Attrs, meaning, ins):
        """One scale for every element moves with the codes; per-channel ones would be moved
        apart from their channels."""
        return meaning if meaning.channels == 1 else None

    def semantics(self, attrs: Attrs, xs, ins, out):
        x = np.asarray(xs[0])
        (c_in, h, w) = ins[0].shape
        view, perm = _split(attrs, c_in)
        return x.reshape(len(x), *view, h, w).transpose(perm).reshape(len(x), *out.shape)

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        (c_in, h, w) = ins[0].shape
        view, perm = _split(attrs, c_in)  # batch-first: drop its axis
        return np.asarray(xs[0], dtype=object).reshape(*view, h, w).transpose([p - 1 for p in perm[1:]]).reshape(out.shape)

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        (c_in, h, w) = ins[0].shape
        view, perm = _split(attrs, c_in)
        y = builder.op("Reshape", [xs[0], builder.const(np.array([-1, *view, h, w], dtype=np.int64))])
        y = builder.op("Transpose", [y], perm=list(perm))
        return builder.op("Reshape", [y, builder.const(np.array([-1, *out.shape], dtype=np.int64))])

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        layer = {"class_name": "TesseraDepthToSpace", "in_height": x.shape[1], "in_width": x.shape[2],
                 "n_chan": out.shape[0], "block": attrs.block, "crd": bool(attrs.crd)}
        hls.add_layer(node, layer, {"result": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        """One output pixel (all channels) per step; io_stream keeps one input row."""
        x = ins[0]
        return Work(macs=0, steps=prod(out.shape[1:]), lanes=out.shape[0], lut_per_lane=bits(x), ff_per_lane=bits(x),
                    line_buffer=(Memory(1, x.shape[2], x.shape[0] * bits(x)),) if io == "io_stream" else (),  # row[W] words
                    out_bits=out.size * bits(out))


OP = DepthToSpace()
