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

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import Layout, OpDef, Trait
from .extension import Extension
from .work import Memory, Work, bits, prod


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


class DepthToSpace(OpDef[Attrs]):
    name = "depthtospace"
    traits = frozenset({Trait.RANGE_EXACT, Trait.CODE_SELECT})
    extensions = (Extension(
        "TesseraDepthToSpace", "DepthToSpace / PixelShuffle: channel blocks moved onto the grid, channels-last.",
        "depthtospace", "nnet_tessera_depth_to_space.h", config_keys=("in_height", "in_width", "n_chan", "block", "crd"),
        output_shape=lambda layer: [layer.get_attr("in_height") * layer.get_attr("block"),
                                    layer.get_attr("in_width") * layer.get_attr("block"), layer.get_attr("n_chan")],
        attributes=("in_height", "in_width", "n_chan", "block", "crd")),)

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        b = attrs.block
        if len(x.shape) != 3:
            raise UnsupportedModelError(f"node '{node}': DepthToSpace needs a (C, H, W) input, got {x.shape}")
        if b < 1 or x.shape[0] % (b * b):
            raise UnsupportedModelError(f"node '{node}': {x.shape[0]} channels are not a multiple of blocksize^2 = {b * b}")
        return TensorType((x.shape[0] // (b * b), x.shape[1] * b, x.shape[2] * b), x.ftype, x.lo, x.hi)

    def semantics(self, attrs: Attrs, xs, ins, out):
        x = np.asarray(xs[0])
        (c_in, h, w) = ins[0].shape
        view, perm = _split(attrs, c_in)
        return x.reshape(len(x), *view, h, w).transpose(perm).reshape(len(x), *out.shape)

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        (c_in, h, w) = ins[0].shape
        view, perm = _split(attrs, c_in)
        y = builder.op("Reshape", [xs[0], builder.const(np.array([-1, *view, h, w], dtype=np.int64))])
        y = builder.op("Transpose", [y], perm=list(perm))
        return builder.op("Reshape", [y, builder.const(np.array([-1, *out.shape], dtype=np.int64))])

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        layer = {"class_name": "TesseraDepthToSpace", "in_height": x.shape[1], "in_width": x.shape[2],
                 "n_chan": out.shape[0], "block": attrs.block, "crd": int(attrs.crd)}
        hls.add_layer(node, layer, {"result": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs: Attrs, ins, out, io):
        """One output pixel (all channels) per step; io_stream keeps one input row."""
        x = ins[0]
        return Work(macs=0, steps=prod(out.shape[1:]), lanes=out.shape[0], lut_per_lane=bits(x), ff_per_lane=bits(x),
                    line_buffer=(Memory(1, x.shape[2], x.shape[0] * bits(x)),) if io == "io_stream" else (),  # row[W] words
                    out_bits=out.size * bits(out))


OP = DepthToSpace()
