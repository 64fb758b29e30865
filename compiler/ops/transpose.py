"""Swap of the first two axes of a sample, ONNX ``Transpose(perm=[0, 2, 1, ...])``.

Used around per-frame layers of frame sequences: ``(T, C, H, W) <-> (C, T, H, W)``.  Both
layouts are stored channels-last per frame in HLS ((T, H, W, C)), so the lowering emits no
layer: the output is the input's buffer with a relabelled index map.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import OpDef
from .work import layout_work


@dataclass(frozen=True)
class Attrs:
    pass


class Transpose(OpDef[Attrs]):
    name = "transpose"

    def infer(self, attrs, ins, node):
        (x,) = ins
        if len(x.shape) < 2:
            raise UnsupportedModelError(f"node '{node}': Transpose needs at least two axes, got {x.shape}")
        return TensorType((x.shape[1], x.shape[0], *x.shape[2:]), x.ftype, x.lo, x.hi)

    def semantics(self, attrs, xs, ins, out):
        return np.swapaxes(xs[0], 1, 2)

    def onnx_reference(self, attrs, builder, xs, ins, out):
        return builder.op("Transpose", [xs[0]], perm=[0, 2, 1, *range(3, len(ins[0].shape) + 1)])

    def lower(self, attrs, hls, node, ins, out):
        hls.alias(node, relabel(hls.flat_perm(node.inputs[0]), ins[0].shape))

    def cost(self, attrs, ins, out, io):
        return layout_work()


def relabel(perm_in: np.ndarray, in_shape: tuple[int, ...]) -> np.ndarray:
    """The output's index map: buffer position k holds input element ``perm_in[k]``, which
    is output element ``swap(perm_in[k])``."""
    idx = np.arange(int(np.prod(in_shape))).reshape(in_shape)
    out_of_in = np.empty(idx.size, dtype=np.int64)
    out_of_in[np.swapaxes(idx, 0, 1).ravel()] = np.arange(idx.size)
    return out_of_in[perm_in]


OP = Transpose()
