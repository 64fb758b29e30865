"""Swap of the first two axes of a sample, ONNX ``Transpose(perm=[0, 2, 1, ...])``.

Around per-frame layers of frame sequences, ``(T, C, H, W) <-> (C, T, H, W)``, both layouts
are stored channels-last per frame in HLS ((T, H, W, C)), so the lowering emits no layer: the
output is the input's buffer with a relabelled index map.  Anywhere else (channels swapped
with a spatial axis of a map, ``(C, H, W) -> (H, C, W)``) the relabelled buffer is not the
channels-last layout the layers after it read: the codes are moved, by hls4ml's
``Transpose`` layer, into the output's channels-last order.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import Layout, OpDef, Trait
from .base.cost import layout_work


@dataclass(frozen=True)
class Attrs:
    pass


class Transpose(OpDef[Attrs]):
    name = "transpose"
    traits = frozenset({Trait.CODE_SELECT})

    def infer(self, attrs, ins, node):
        (x,) = ins
        if len(x.shape) < 2:
            raise UnsupportedModelError(f"node '{node}': Transpose needs at least two axes, got {x.shape}")
        return TensorType((x.shape[1], x.shape[0], *x.shape[2:]), x.ftype, x.lo, x.hi)

    def semantics(self, attrs, xs, ins, out):
        return np.swapaxes(xs[0], 1, 2)

    def carry_scale(self, attrs, meaning, ins):
        """One scale for every element moves with the codes; per-channel ones would leave axis 0."""
        return meaning if meaning.channels == 1 else None

    def onnx_reference(self, attrs, builder, xs, ins, out):
        return builder.op("Transpose", [xs[0]], perm=[0, 2, 1, *range(3, len(ins[0].shape) + 1)])

    has_rtl = True

    def rtl(self, attrs, rtl, xs, ins, out):
        return np.swapaxes(np.asarray(xs[0], dtype=object), 0, 1)

    def lower(self, attrs, hls, node, ins, out):
        held = hls.flat_perm(node.inputs[0])
        moved = relabel(held, ins[0].shape)
        if any(np.array_equal(moved, hls.layout_perm(out.shape, lay)) for lay in (Layout.CHANNELS, Layout.SEQUENCE)):
            hls.alias(node, moved)
            return
        axes = buffer_axes(held, ins[0].shape)
        if axes is None:
            raise UnsupportedModelError(f"node '{node.name}': Transpose of a tensor held in no axis order of its shape "
                                        f"{ins[0].shape}; not supported")
        rank = len(out.shape)
        swap = (1, 0, *range(2, rank))  # output axis k is input axis swap[k]
        order = [swap[k] for k in (*range(1, rank), 0)]  # the input's axes in the output's channels-last order
        hls.add_layer(node, {"class_name": "Transpose", "perm": [axes.index(a) for a in order]},
                      {"result": out.ftype.hls()}, layout=Layout.CHANNELS)

    def cost(self, attrs, ins, out, io):
        return layout_work()


def relabel(perm_in: np.ndarray, in_shape: tuple[int, ...]) -> np.ndarray:
    """The output's index map: buffer position k holds input element ``perm_in[k]``, which
    is output element ``swap(perm_in[k])``."""
    idx = np.arange(int(np.prod(in_shape))).reshape(in_shape)
    out_of_in = np.empty(idx.size, dtype=np.int64)
    out_of_in[np.swapaxes(idx, 0, 1).ravel()] = np.arange(idx.size)
    return out_of_in[perm_in]


def buffer_axes(perm: np.ndarray, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The axes of ``shape`` in the order a buffer holding ONNX elements ``perm`` walks them
    (``perm`` is the array of ``shape`` transposed by them), None when it is no such order."""
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    return next((axes for axes in permutations(range(len(shape))) if np.array_equal(idx.transpose(axes).ravel(), perm)),
                None)


OP = Transpose()
