"""Fixed-point types and value ranges of the typed IR.

A tensor holds integer *codes* ``q``; its real value is ``q * 2**-frac``.  Every tensor
also carries the inclusive code range ``[lo, hi]`` that any input the declared input
types allow can produce; widths are derived from those ranges, so no accumulator can
overflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

#: Widest integer code the compiler handles: the float64 bridge to the C-simulation
#: and the float64 requantization in the onnxruntime reference are exact below 2**53.
MAX_WIDTH = 52

#: Most elements one tensor of one sample may hold: HLS array indices are C ``int``.
MAX_ELEMENTS = 2**31 - 1


def bits_for_range(lo: int, hi: int) -> tuple[int, bool]:
    """Smallest (width, signed) two's-complement/unsigned type holding every code in [lo, hi]."""
    lo, hi = int(lo), int(hi)
    if lo > hi:
        raise ValueError(f"empty range [{lo}, {hi}]")
    if lo >= 0:
        return max(1, hi.bit_length()), False
    width = max((-lo - 1).bit_length(), hi.bit_length() if hi > 0 else 0) + 1
    return width, True


@dataclass(frozen=True)
class FixedType:
    """``width`` bits, ``frac`` fractional bits (may be negative or exceed width), signedness."""

    width: int
    frac: int
    signed: bool

    @property
    def int_bits(self) -> int:
        """hls4ml/ap_fixed integer bits I in ``ap_fixed<W, I>`` (sign bit included)."""
        return self.width - self.frac

    @property
    def min_code(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max_code(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    def hls(self, rounding: str = "TRN", saturation: str = "WRAP") -> str:
        """hls4ml precision string, e.g. ``fixed<8,3,RND_CONV,SAT_SYM>``."""
        base = "fixed" if self.signed else "ufixed"
        return f"{base}<{self.width},{self.int_bits},{rounding},{saturation}>"

    def describe(self) -> str:
        return f"{'s' if self.signed else 'u'}{self.width}.f{self.frac}"

    @staticmethod
    def for_range(lo: int, hi: int, frac: int) -> "FixedType":
        width, signed = bits_for_range(lo, hi)
        return FixedType(width, frac, signed)


@dataclass(frozen=True)
class TensorType:
    """Shape (without batch), fixed-point type and the reachable code range."""

    shape: tuple[int, ...]
    ftype: FixedType
    lo: int
    hi: int

    @property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1

    @staticmethod
    def from_range(shape: tuple[int, ...], lo: int, hi: int, frac: int) -> "TensorType":
        return TensorType(tuple(int(s) for s in shape), FixedType.for_range(lo, hi, frac), int(lo), int(hi))


def dyadic_parts(scale: Fraction) -> tuple[int, int]:
    """``(frac, mult)`` with ``scale == mult * 2**-frac``, ``mult`` odd; ``ValueError`` when the
    scale is no dyadic rational (every float is one)."""
    num, den = scale.numerator, scale.denominator
    if den & (den - 1):
        raise ValueError(f"scale {scale} is not a dyadic rational")
    frac = den.bit_length() - 1
    while num % 2 == 0:
        num //= 2
        frac -= 1
    return frac, num


def dyadic_codes(values: np.ndarray, max_frac: int = 40) -> tuple[np.ndarray, int]:
    """Exact integer codes and the smallest ``frac`` with ``values == codes * 2**-frac``.

    Raises ``ValueError`` when the values are not dyadic within ``max_frac`` fractional bits
    (i.e. they are not fixed-point numbers at all).
    """
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError("contains NaN or Inf")
    nonzero = v[v != 0]
    if nonzero.size == 0:
        return np.zeros(v.shape, dtype=np.int64), 0
    # Start from the coarsest grid the largest value allows and refine until exact.
    frac = -int(np.floor(np.log2(np.max(np.abs(nonzero))))) - 1
    while frac <= max_frac:
        scaled = np.ldexp(v, frac)
        if np.all(scaled == np.round(scaled)):
            return scaled.astype(np.int64), frac
        frac += 1
    raise ValueError(f"values are not fixed-point numbers with at most {max_frac} fractional bits")


def power_of_two_exponent(scale: np.ndarray) -> np.ndarray | None:
    """Integer exponents e with ``scale == 2**e`` elementwise, or None if any scale is not a power of two."""
    s = np.asarray(scale, dtype=np.float64)
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        return None
    mant, exp = np.frexp(s)
    if not np.all(mant == 0.5):
        return None
    return (exp - 1).astype(np.int64)
