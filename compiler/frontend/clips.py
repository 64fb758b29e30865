"""``Clip`` (and ReLU) on real values: mixin of the importer (``qonnx_import._Importer``).

A Quant's rounding is monotone, so ``R(clip(u, L, H)) = clip(R(u), R(L), R(H))``: a real clip
between a layer and its Quant, or on the input before its Quant, becomes that Quant's clamp
bounds, exactly (ReLU is the clip to ``[0, inf)``).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import onnx

from ..errors import UnsupportedModelError
from ..ops.rounding import Rounding, div_round_int


def compose_clip(inner: tuple, outer: tuple) -> tuple:
    """``clip(clip(v, *inner), *outer)`` as one ``clip(v, lo, hi)`` (None: unbounded)."""
    c, d = outer

    def clamp(v):
        if c is not None and v < c:
            v = c
        return d if d is not None and v > d else v

    return (c if inner[0] is None else clamp(inner[0])), (d if inner[1] is None else clamp(inner[1]))


def clip_codes(scale: Fraction, zero: Fraction, rounding: Rounding, qmin: int, qmax: int, bounds: tuple) -> tuple[int, int]:
    """A Quant's code range after a real clip to ``bounds``: ``clamp(R(b / scale + zero), qmin, qmax)``
    for each bound (the Quant's own range where unbounded)."""
    codes = []
    for b, q in zip(bounds, (qmin, qmax)):
        if b is None:
            codes.append(q)
            continue
        v = b / scale + zero
        codes.append(min(max(div_round_int(v.numerator, v.denominator, rounding), qmin), qmax))
    return codes[0], codes[1]


class Clips:
    """``on_Clip``."""

    def on_Clip(self, node: onnx.NodeProto) -> None:
        """``clip(x, min, max)`` between a layer and its Quant (the value in flight), or on the
        input before its Quant (a bound of the input's quantizer)."""
        if self.opset < 11:
            bounds = [self.attr(node, "min"), self.attr(node, "max")]
        else:
            bounds = [self.const_or_none(node.input[i], node) if len(node.input) > i else None for i in (1, 2)]
        if any(b is not None and np.asarray(b).size != 1 for b in bounds):
            raise UnsupportedModelError(f"node '{node.name}' (Clip): min / max must be one number each")
        lo, hi = (None if b is None else Fraction(float(np.asarray(b, dtype=np.float64).ravel()[0])) for b in bounds)
        if lo is not None and hi is not None and lo > hi:
            raise UnsupportedModelError(f"node '{node.name}' (Clip): min {float(lo)} is above max {float(hi)}")
        x = node.input[0]
        if x == self.pending_input:
            self.pre_clip = compose_clip(self.pre_clip, (lo, hi))
            self.pending_input = node.output[0]
            return
        f = self.as_affine(x, node)
        lo, hi = compose_clip((f.lo, f.hi), (lo, hi))
        self.env[node.output[0]] = replace(f, lo=lo, hi=hi, source=node.name)
