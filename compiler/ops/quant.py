"""QONNX ``Quant`` on activations: requantize codes to a new fixed-point type.

Semantics (QONNX spec, zero point 0, power-of-two scales): ``y = clip(R(x * 2**(fy - fx)),
min_int, max_int)`` with ``R`` the node's rounding mode (:mod:`..exact.rounding`).  Clipping before
or after rounding is the same because the bounds are integers.  Here ``R`` is implemented on
integers with shifts, independently of the float64 onnxruntime form.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from .base import IoType, OpDef, Trait
from ..exact.requant import Step
from ..exact.rounding import Rounding, round_float, shift_round
from . import rescale
from .base.cost import Work, elementwise_work
from .base.requantization import Requantization


def min_int(signed: bool, narrow: bool, bits: int) -> int:
    if signed:
        return -(1 << (bits - 1)) + (1 if narrow else 0)
    return 0


def max_int(signed: bool, narrow: bool, bits: int) -> int:
    if signed:
        return (1 << (bits - 1)) - 1
    return (1 << bits) - 1 - (1 if narrow else 0)


@dataclass(frozen=True)
class Attrs:
    out: FixedType  # declared output type (bit width, scale, signedness)
    narrow: bool
    rounding: Rounding

    def __post_init__(self):
        object.__setattr__(self, "rounding", Rounding.parse(self.rounding))

    @property
    def qmin(self) -> int:
        return min_int(self.out.signed, self.narrow, self.out.width)

    @property
    def qmax(self) -> int:
        return max_int(self.out.signed, self.narrow, self.out.width)


def requantize(attrs: Attrs, x: np.ndarray, in_frac: int) -> np.ndarray:
    shift = in_frac - attrs.out.frac
    x = np.asarray(x, dtype=np.int64)
    if shift < 0:
        # A left shift by k: every |x| >= bound lands beyond the output's codes (|code| < 2**53)
        # and saturates the same way, so x is clipped to +-bound first and the int64 shift
        # cannot overflow (bound << k <= 2**53 + 2**61).
        k = -shift
        if k >= 62:  # any non-zero code saturates
            return np.clip(np.sign(x) << np.int64(62), attrs.qmin, attrs.qmax)
        bound = (max(abs(attrs.qmin), abs(attrs.qmax)) >> k) + 1
        x = np.clip(x, -bound, bound)
    y = shift_round(x, shift, attrs.rounding)
    return np.clip(y, attrs.qmin, attrs.qmax)


def quantize_float(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    """The model's input ``Quant`` on real-valued data: float -> int64 codes (exact in float64)."""
    v = np.ldexp(np.asarray(x, dtype=np.float64), attrs.out.frac)
    return np.clip(round_float(v, attrs.rounding), attrs.qmin, attrs.qmax).astype(np.int64)


def hls_precision(attrs: Attrs, node: str) -> str:
    """The ap_fixed type that rounds and saturates like the Quant; refuses modes it lacks."""
    rnd = attrs.rounding.ap_fixed
    if rnd is None:
        raise UnsupportedModelError(f"node '{node}': rounding mode {attrs.rounding} has no ap_fixed equivalent")
    if attrs.narrow and not attrs.out.signed:
        raise UnsupportedModelError(f"node '{node}': unsigned narrow-range Quant has no ap_fixed saturation mode")
    return attrs.out.hls(rnd, "SAT_SYM" if attrs.narrow else "SAT")


class Requant(OpDef[Attrs]):
    name = "requant"
    traits = frozenset({Trait.ELEMENTWISE})

    def infer(self, attrs: Attrs, ins: list[TensorType], node: str) -> TensorType:
        (x,) = ins
        lo, hi = (int(v) for v in requantize(attrs, np.array([x.lo, x.hi]), x.ftype.frac))
        return TensorType(x.shape, attrs.out, lo, hi)

    def semantics(self, attrs, xs, ins, out):
        return requantize(attrs, xs[0], ins[0].ftype.frac)

    def onnx_reference(self, attrs: Attrs, builder, xs, ins, out):
        # Exact in float64: |codes| < 2**52 and the scaling is a power of two.
        v = builder.op("Cast", [xs[0]], to="double")
        shift = attrs.out.frac - ins[0].ftype.frac
        if shift != 0:
            v = builder.op("Mul", [v, builder.const(np.array(2.0**shift))])
        v = builder.round(v, attrs.rounding)
        v = builder.op("Clip", [v, builder.const(np.array(float(attrs.qmin))), builder.const(np.array(float(attrs.qmax)))])
        return builder.op("Cast", [v], to="int64")

    has_rtl = True

    def rtl(self, attrs: Attrs, rtl, xs, ins, out):
        y = rtl.round_shift(xs[0], ins[0].ftype.frac - attrs.out.frac, attrs.rounding)
        return rtl.clamp(y, attrs.qmin, attrs.qmax)

    def lower(self, attrs: Attrs, hls, node, ins, out):
        if hls.held_int_bits(node.inputs[0]) < -attrs.out.frac:
            # ap_fixed's conversion would read the input's bit at the output's rounding position,
            # above the input's MSB (Xilinx's ap_private asserts): the requantization primitive
            # reads the input's codes instead
            step = Step(Fraction(2) ** (attrs.out.frac - ins[0].ftype.frac), Fraction(0), attrs.rounding, attrs.qmin,
                        attrs.qmax)
            rescale.OP.lower(rescale.Attrs((step,), attrs.out), hls, node, ins, out)
            return
        hls.add_layer(node, {"class_name": "Activation", "activation": "linear"},
                     {"result": hls_precision(attrs, node.name)})

    def cost(self, attrs, ins, out, io: IoType) -> Work:
        return elementwise_work(out, io, 2)

    def requantization(self, attrs: Attrs, ins, out) -> Requantization:
        shift = ins[0].ftype.frac - attrs.out.frac
        moved = f"R(x / 2^{shift})" if shift > 0 else (f"x * 2^{-shift}" if shift < 0 else "x")
        return Requantization("shift", f"clamp({moved}, {attrs.qmin}, {attrs.qmax})", 1,
                              (f"shift {shift}, rounding {attrs.rounding.value}",),
                              "exact by construction: a power-of-two scale, rounded by the one rounding table")


OP = Requant()
