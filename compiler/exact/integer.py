"""Exact integer arithmetic on numpy arrays: intervals of dot products, balanced 7-bit limbs,
and contractions that are exact in float64 where a bound proves it (else int64)."""

from __future__ import annotations

import numpy as np


def int8_limbs(w: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """Balanced radix-128 digits of integer codes: ``w == sum(limb << shift)`` with every
    limb in [-64, 63] (an int8), one limb per 7 bits of ``w``.  Lets an integer-only ONNX
    kernel (ConvInteger: 8-bit operands) compute a product with wider weights exactly, one
    pass per limb."""
    rest = np.asarray(w, dtype=np.int64)
    limbs, shift = [], 0
    while True:
        digit = ((rest + 64) & 127) - 64
        limbs.append((digit.astype(np.int8), shift))
        rest = (rest - digit) >> 7
        shift += 7
        if not rest.any():
            return limbs


def interval_dot(w: np.ndarray, lo: int, hi: int, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact min and max of sum(w * x) over every x in [lo, hi]^n, reduced along ``axis``."""
    w = np.asarray(w, dtype=object)
    a, b = w * int(lo), w * int(hi)
    mx = np.where(w >= 0, b, a)
    mn = np.where(w >= 0, a, b)
    return mn.sum(axis=axis), mx.sum(axis=axis)


#: Below this every integer is a float64, and so is every partial sum of products whose
#: absolute values add up to less than it, whatever the order of summation.
F64_EXACT = 1 << 53


def exact_einsum(spec: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.einsum(spec, a, b)`` of two integer arrays, exactly, as int64.

    When max|a| * sum|b| < 2**53 (a bound on every output's sum of |products|, hence on each
    of its partial sums), float64 holds every product and partial sum exactly in any order,
    and the contraction runs through BLAS (several times faster than numpy's integer
    einsum, the same integers on every CPU and thread count); otherwise int64."""
    a64, b64 = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)

    def peak(v: np.ndarray) -> int:  # as Python ints: abs(-2**63) does not fit int64
        return max(-int(v.min()), int(v.max())) if v.size else 0

    peak_a, peak_b = peak(a64), peak(b64)
    if peak_b * b64.size < 1 << 62:  # the int64 sum of |b| cannot overflow
        mass_b = int(np.abs(b64).sum())
    else:
        mass_b = int(np.abs(b64.astype(object)).sum())
    if peak_a * mass_b < F64_EXACT:
        return np.einsum(spec, a64.astype(np.float64), b64.astype(np.float64), optimize=True).astype(np.int64)
    return np.einsum(spec, a64, b64, optimize=False)


__all__ = ["F64_EXACT", "exact_einsum", "int8_limbs", "interval_dot"]
