"""The float64 nearest to a real line on integer codes, exactly and vectorised.

A nonlinearity evaluated in float64 (a Tanh read from a layer's accumulator, say) must be
given *the* float64 of its exact real input ``v = a * x + b`` (``a``, ``b`` dyadic rationals:
every float constant is one), not a float64 product that rounds twice: then its result is
one function of ``x``, the same on every machine.  With ``a = P / 2**e``, ``b = Q / 2**e``,
the numerator ``N = P x + Q`` is split at bit ``s`` into ``N = H 2**s + L`` where ``H`` and
``L`` are integers below ``2**53``: both are exact float64 values, ``H 2**s`` is exact, and
IEEE addition rounds their exact sum once, to nearest even.  Scaling by ``2**-e`` is exact
(the results are normal numbers).  :func:`line_fits` says whether the split exists over a
domain; :func:`nearest_doubles` computes it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

#: Integers below this are exact float64 values.
EXACT_INT = 1 << 53


def _parts(a: Fraction, b: Fraction) -> tuple[int, int, int]:
    """``(P, Q, e)`` with ``a = P / 2**e`` and ``b = Q / 2**e``; ``ValueError`` for a
    rational that is not dyadic."""
    for v in (a, b):
        if v.denominator & (v.denominator - 1):
            raise ValueError(f"{v} is not a dyadic rational")
    e = max(a.denominator, b.denominator).bit_length() - 1
    return int(a * 2**e), int(b * 2**e), e


def _split(p: int, q: int, extent: int) -> int | None:
    """The bit ``s`` at which ``p x + q`` splits into two exact halves for ``|x| <= extent``, or None."""
    for s in range(52, -1, -1):
        p_hi, p_lo = p >> s, p & ((1 << s) - 1)
        q_hi, q_lo = q >> s, q & ((1 << s) - 1)
        if p_lo * extent + q_lo < EXACT_INT and abs(p_hi) * extent + abs(q_hi) < EXACT_INT:
            return s
    return None


def line_fits(a: Fraction, b: Fraction, lo: int, hi: int) -> bool:
    """Whether :func:`nearest_doubles` can evaluate ``a x + b`` exactly for every ``x`` in ``[lo, hi]``."""
    try:
        p, q, _ = _parts(a, b)
    except ValueError:
        return False
    return _split(p, q, max(abs(lo), abs(hi))) is not None


def nearest_doubles(a: Fraction, b: Fraction, codes: np.ndarray) -> np.ndarray:
    """The float64 nearest to ``a * x + b`` (ties to even) for every integer ``x`` in ``codes``."""
    x = np.asarray(codes, dtype=np.int64)
    p, q, e = _parts(a, b)
    s = _split(p, q, int(np.abs(x).max()) if x.size else 0)
    if s is None:
        raise ValueError(f"{a} * x + {b} has too many significant bits to evaluate exactly")
    mask = (1 << s) - 1
    high = (p >> s) * x + (q >> s)  # |.| < 2**53: exact in int64 and in float64
    low = (p & mask) * x + (q & mask)
    total = np.ldexp(high.astype(np.float64), s) + low.astype(np.float64)  # the one rounding
    result = np.ldexp(total, -e)
    if np.any((result != 0) & (np.abs(result) < np.finfo(np.float64).tiny)):
        raise ValueError(f"{a} * x + {b} reaches subnormal float64 values")
    return result


__all__ = ["line_fits", "nearest_doubles"]
