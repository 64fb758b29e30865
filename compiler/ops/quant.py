"""QONNX ``Quant`` on activations: requantize codes to a new fixed-point type.

Semantics (QONNX spec, zero point 0, power-of-two scales): ``y = clip(R(x * 2**(fy - fx)),
min_int, max_int)`` with ``R`` the node's rounding mode.  Clipping before or after rounding
is the same because the bounds are integers.  Here ``R`` is implemented on integers with
shifts, independently of the float64 onnxruntime form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from .base import OpDef

#: QONNX rounding modes -> ap_fixed quantization modes (None: no ap_fixed equivalent).
HLS_ROUNDING = {
    "ROUND": "RND_CONV",  # half to even
    "HALF_EVEN": "RND_CONV",
    "FLOOR": "TRN",
    "DOWN": "TRN_ZERO",  # toward zero
    "HALF_UP": "RND_INF",  # ties away from zero
    "HALF_DOWN": "RND_ZERO",  # ties toward zero
    "CEIL": None,
    "UP": None,  # away from zero
}


def min_int(signed: bool, narrow: bool, bits: int) -> int:
    if signed:
        return -(1 << (bits - 1)) + (1 if narrow else 0)
    return 0


def max_int(signed: bool, narrow: bool, bits: int) -> int:
    if signed:
        return (1 << (bits - 1)) - 1
    return (1 << bits) - 1 - (1 if narrow else 0)


def div_round(num: np.ndarray, den: np.ndarray | int, mode: str) -> np.ndarray:
    """Exact ``R(num / den)`` on int64 integers (``den > 0``) with a QONNX rounding mode."""
    num = np.asarray(num, dtype=np.int64)
    den = np.asarray(den, dtype=np.int64)
    q = np.floor_divide(num, den)
    r = num - q * den  # 0 <= r < den
    twice, neg = 2 * r, num < 0
    if mode in ("ROUND", "HALF_EVEN"):
        up = (twice > den) | ((twice == den) & ((q & 1) == 1))
    elif mode == "FLOOR":
        up = np.zeros_like(r, dtype=bool)
    elif mode == "CEIL":
        up = r > 0
    elif mode == "DOWN":
        up = neg & (r > 0)
    elif mode == "UP":
        up = ~neg & (r > 0)
    elif mode == "HALF_UP":
        up = np.where(neg, twice > den, twice >= den)
    elif mode == "HALF_DOWN":
        up = np.where(neg, twice >= den, twice > den)
    else:
        raise ValueError(f"unknown rounding mode {mode}")
    return q + up.astype(np.int64)


def shift_round(x: np.ndarray, shift: int, mode: str) -> np.ndarray:
    """Exact ``R(x / 2**shift)`` on int64 codes (``shift <= 0`` is an exact left shift)."""
    x = np.asarray(x, dtype=np.int64)
    if shift <= 0:
        return x << np.int64(-shift)
    if shift > 62:
        # 2**shift overflows int64; for |x| < 2**61 (every code and cell intermediate:
        # MAX_CELL_WIDTH = 62 bits) x / 2**62 already lies in (-1/2, 1/2), where each mode's
        # result depends on the sign of x only, exactly as for the larger divisor
        if x.size and int(np.abs(x).max()) >= 1 << 61:
            raise ValueError("shift_round: |x| >= 2**61 with a shift beyond 62 bits")
        shift = 62
    return div_round(x, np.int64(1) << np.int64(shift), mode)


@dataclass(frozen=True)
class Attrs:
    out: FixedType  # declared output type (bit width, scale, signedness)
    narrow: bool
    rounding: str

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


class Requant(OpDef):
    name = "requant"

    def infer(self, attrs: Attrs, ins: list[TensorType], node: str) -> TensorType:
        (x,) = ins
        lo, hi = (int(v) for v in requantize(attrs, np.array([x.lo, x.hi]), x.ftype.frac))
        return TensorType(x.shape, attrs.out, lo, hi)

    def reference(self, attrs, xs, ins, out):
        return requantize(attrs, xs[0], ins[0].ftype.frac)

    def emit_onnx(self, attrs: Attrs, b, xs, ins, out):
        # Exact in float64: |codes| < 2**52 and the scaling is a power of two.
        v = b.op("Cast", [xs[0]], to="double")
        shift = attrs.out.frac - ins[0].ftype.frac
        if shift != 0:
            v = b.op("Mul", [v, b.const(np.array(2.0**shift))])
        v = b.round(v, attrs.rounding)
        v = b.op("Clip", [v, b.const(np.array(float(attrs.qmin))), b.const(np.array(float(attrs.qmax)))])
        return b.op("Cast", [v], to="int64")

    def lower(self, attrs: Attrs, hl, node, ins, out):
        rnd = HLS_ROUNDING.get(attrs.rounding)
        if rnd is None:
            raise UnsupportedModelError(
                f"node '{node.name}': rounding mode {attrs.rounding} has no ap_fixed equivalent"
            )
        if attrs.narrow and not attrs.out.signed:
            raise UnsupportedModelError(f"node '{node.name}': unsigned narrow-range Quant has no ap_fixed saturation mode")
        sat = "SAT_SYM" if attrs.narrow else "SAT"
        hl.add_layer(
            node,
            {"class_name": "Activation", "activation": "linear"},
            {"result": attrs.out.hls(rnd, sat)},
        )


OP = Requant()


_FLOAT_ROUND = {
    "ROUND": np.round,  # numpy rounds half to even
    "HALF_EVEN": np.round,
    "FLOOR": np.floor,
    "CEIL": np.ceil,
    "DOWN": np.trunc,
    "UP": lambda v: np.sign(v) * np.ceil(np.abs(v)),
    "HALF_UP": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5),
    "HALF_DOWN": lambda v: np.sign(v) * np.ceil(np.abs(v) - 0.5),
}


def quantize_float(attrs: Attrs, x: np.ndarray) -> np.ndarray:
    """The model's input ``Quant`` on real-valued data: float -> int64 codes (exact in float64)."""
    v = np.ldexp(np.asarray(x, dtype=np.float64), attrs.out.frac)
    return np.clip(_FLOAT_ROUND[attrs.rounding](v), attrs.qmin, attrs.qmax).astype(np.int64)
