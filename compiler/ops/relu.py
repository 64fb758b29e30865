"""ReLU on codes: ``max(x, 0)``; the type keeps its fractional bits and becomes unsigned."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.types import TensorType
from .base import OpDef, Trait
from .base.cost import elementwise_work


@dataclass(frozen=True)
class Attrs:
    pass


class Relu(OpDef[Attrs]):
    name = "relu"
    traits = frozenset({Trait.ELEMENTWISE, Trait.RANGE_EXACT})

    def infer(self, attrs, ins, node):
        (x,) = ins
        return TensorType.from_range(x.shape, max(x.lo, 0), max(x.hi, 0), x.ftype.frac)

    def semantics(self, attrs, xs, ins, out):
        return np.maximum(xs[0], 0)

    def onnx_reference(self, attrs, builder, xs, ins, out):
        return builder.op("Max", [xs[0], builder.const(np.array(0, dtype=np.int64))])

    has_rtl = True

    def rtl(self, attrs, rtl, xs, ins, out):
        return rtl.maximum(xs[0], rtl.const(0))

    def lower(self, attrs, hls, node, ins, out):
        hls.add_layer(node, {"class_name": "Activation", "activation": "relu"}, {"result": out.ftype.hls()})

    def cost(self, attrs, ins, out, io):
        return elementwise_work(out, io, 1)


OP = Relu()
