"""LeakyReLU with an exact dyadic slope: ``x >= 0 ? x : alpha * x``.

``alpha = a * 2**-fa`` (``a`` an integer, found exactly from the float attribute); the
result has ``fx + fa`` fractional bits, so nothing rounds.  A power-of-two slope (e.g. 1/8)
keeps the width growth to ``fa`` bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.types import FixedType, TensorType
from .base import OpDef, Trait, check_width
from .base.cost import elementwise_work


@dataclass(frozen=True)
class Attrs:
    alpha_code: int
    alpha_frac: int

    @property
    def alpha_type(self) -> FixedType:
        return FixedType.for_range(min(self.alpha_code, 0), max(self.alpha_code, 0), self.alpha_frac)


class LeakyRelu(OpDef[Attrs]):
    name = "leakyrelu"
    traits = frozenset({Trait.ELEMENTWISE, Trait.RANGE_EXACT})

    def infer(self, attrs: Attrs, ins, node):
        (x,) = ins
        a, fa = attrs.alpha_code, attrs.alpha_frac
        cands = [x.lo << fa if x.lo >= 0 else x.lo * a, x.hi << fa if x.hi >= 0 else x.hi * a, 0]
        return check_width(TensorType.from_range(x.shape, min(cands), max(cands), x.ftype.frac + fa), node, "LeakyRelu")

    def semantics(self, attrs: Attrs, xs, ins, out):
        x = xs[0].astype(np.int64)
        return np.where(x >= 0, x << np.int64(attrs.alpha_frac), x * np.int64(attrs.alpha_code))

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        pos = builder.op("Mul", [builder.op("Max", [xs[0], builder.const(np.array(0, dtype=np.int64))]),
                           builder.const(np.array(1 << attrs.alpha_frac, dtype=np.int64))])
        neg = builder.op("Mul", [builder.op("Min", [xs[0], builder.const(np.array(0, dtype=np.int64))]),
                           builder.const(np.array(attrs.alpha_code, dtype=np.int64))])
        return builder.op("Add", [pos, neg])

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        """``(max(x, 0) << fa) + alpha_code * min(x, 0)``: one of the two terms is zero."""
        zero = rtl.const(0)
        pos = rtl.shift_left(rtl.maximum(xs[0], zero), attrs.alpha_frac)
        return rtl.add(pos, rtl.scale(rtl.minimum(xs[0], zero), attrs.alpha_code))

    def lower(self, attrs: Attrs, hls, node, ins, out):
        hls.add_layer(
            node,
            {"class_name": "LeakyReLU", "activation": "leaky_relu",
             "activ_param": float(np.ldexp(float(attrs.alpha_code), -attrs.alpha_frac))},
            {"result": out.ftype.hls(), "param": attrs.alpha_type.hls()},
        )

    def cost(self, attrs, ins, out, io):
        return elementwise_work(out, io, 2)


OP = LeakyRelu()
