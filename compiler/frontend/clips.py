"""Real clips before a Quant (``Clip``, and ReLU as the clip to ``[0, inf)``).

A Quant's rounding is monotone, so ``R(clip(u, L, H)) = clip(R(u), R(L), R(H))``: a real clip
between a layer and its Quant, or on the input before its Quant, becomes that Quant's clamp
bounds, exactly.  The handlers are in ``handlers/elementwise.py``."""

from __future__ import annotations

from fractions import Fraction

from ..exact.rounding import Rounding, div_round_int


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


__all__ = ["clip_codes", "compose_clip"]
