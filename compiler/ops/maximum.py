"""Elementwise maximum (or minimum) of two code tensors of the same shape (ONNX ``Max`` /
``Min`` of two branches; the frontend's exact form of a LeakyReLU / PReLU on a real-valued
tensor before its Quant: ``Q(max(v, alpha v)) = max(Q(v), Q(alpha v))`` for the monotone
quantizer ``Q``).

Inputs of different fixed-point types are aligned to ``frac = max(f1, f2)`` by exact left
shifts, as the merges do (:mod:`.merge`); the result is one of the aligned codes, so nothing
rounds.  Lowers to hls4ml's own ``Merge`` layer (``maximum`` / ``minimum``, both io types),
whose comparison and cast of ``ap_fixed`` values are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base import OpDef, Trait, check_width
from .base.cost import elementwise_work


@dataclass(frozen=True)
class Attrs:
    minimum: bool = False  # the elementwise minimum instead


def _aligned(x: np.ndarray, t: TensorType, frac: int) -> np.ndarray:
    return np.asarray(x, dtype=np.int64) << np.int64(frac - t.ftype.frac)


class Maximum(OpDef[Attrs]):
    name = "maximum"
    traits = frozenset({Trait.MERGE, Trait.RANGE_EXACT})

    def infer(self, attrs: Attrs, ins, node):
        a, b = ins
        if a.shape != b.shape:
            raise UnsupportedModelError(f"node '{node}': {'Min' if attrs.minimum else 'Max'} of shapes {a.shape} and "
                                        f"{b.shape} (no broadcasting)")
        f = max(a.ftype.frac, b.ftype.frac)
        lo1, hi1, lo2, hi2 = (v << (f - t.ftype.frac) for t in (a, b) for v in (t.lo, t.hi))
        pick = min if attrs.minimum else max
        return check_width(TensorType.from_range(a.shape, pick(lo1, lo2), pick(hi1, hi2), f), node,
                           "Min" if attrs.minimum else "Max")

    def semantics(self, attrs: Attrs, xs, ins, out):
        f = out.ftype.frac
        pick = np.minimum if attrs.minimum else np.maximum
        return pick(_aligned(xs[0], ins[0], f), _aligned(xs[1], ins[1], f))

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        parts = [builder.op("Mul", [x, builder.const(np.array(1 << (out.ftype.frac - t.ftype.frac), dtype=np.int64))])
                 for x, t in zip(xs, ins)]
        return builder.op("Min" if attrs.minimum else "Max", parts)

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        a, b = (rtl.shift_left(x, out.ftype.frac - t.ftype.frac) for x, t in zip(xs, ins))
        return rtl.minimum(a, b) if attrs.minimum else rtl.maximum(a, b)

    def lower(self, attrs: Attrs, hls, node, ins, out):
        if hls.flat_perm(node.inputs[0]).tolist() != hls.flat_perm(node.inputs[1]).tolist():
            raise UnsupportedModelError(f"node '{node.name}': Max / Min of tensors in different layouts")
        hls.add_layer(node, {"class_name": "Merge", "op": "minimum" if attrs.minimum else "maximum"},
                      {"result": out.ftype.hls()})

    def cost(self, attrs: Attrs, ins, out, io):
        return elementwise_work(out, io, 2)  # a comparator and a multiplexer per bit


OP = Maximum()
