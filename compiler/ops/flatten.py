"""Flatten (ONNX Flatten axis=1 / Reshape to (N, -1)): codes unchanged, NCHW order.

In hls4ml the tensor is channels-last; the lowering records the resulting order so the
next Dense reads its weight rows in that order (no data movement in hardware).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.meaning import CodeScale
from ..ir.types import TensorType
from .base import OpDef, Trait
from .base.cost import layout_work


@dataclass(frozen=True)
class Attrs:
    pass


class Flatten(OpDef[Attrs]):
    name = "flatten"
    traits = frozenset({Trait.RESHAPE, Trait.CODE_SELECT})

    def infer(self, attrs, ins, node):
        (x,) = ins
        return TensorType((x.size,), x.ftype, x.lo, x.hi)

    def semantics(self, attrs, xs, ins, out):
        return xs[0].reshape(xs[0].shape[0], -1)

    def carry_scale(self, attrs, meaning, ins):
        """Per-channel scales become one per element of the flat vector (NCHW order)."""
        if meaning.channels == 1:
            return meaning
        per = math.prod(ins[0].shape[1:])
        return CodeScale(tuple(v for v in meaning.scale for _ in range(per if len(meaning.scale) > 1 else 1)),
                         tuple(v for v in meaning.zero for _ in range(per if len(meaning.zero) > 1 else 1)))

    def onnx_reference(self, attrs, builder, xs, ins, out):
        return builder.op("Flatten", [xs[0]], axis=1)

    has_rtl = True

    def rtl(self, attrs, rtl, xs, ins, out):
        return np.asarray(xs[0], dtype=object).reshape(-1)

    def lower(self, attrs, hls, node, ins, out):
        hls.add_layer(node, {"class_name": "Reshape", "target_shape": [int(out.size)]}, {"result": out.ftype.hls()})

    def cost(self, attrs, ins, out, io):
        return layout_work()


OP = Flatten()
