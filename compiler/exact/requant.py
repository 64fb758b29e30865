"""The one exact requantization primitive: ``y = clamp(R(slope * x + offset), qmin, qmax)``.

Every float32/float64 constant is a dyadic rational, so whatever real constants act between
two quantizers (weight and input scales, a bias, BatchNorm's folded affine, Mul/Add/Sub/Div
by constants, zero points) and the Quant that ends them, the code a Quant produces is
``clamp(R(N / D))`` with ``N = A * x + B`` an integer-linear function of the integer
accumulator ``x`` and ``D > 0``: here ``slope = A / D`` and ``offset = B / D`` as exact
:class:`fractions.Fraction` values and ``R`` a QONNX rounding mode (:mod:`.rounding`, one
table).  A bipolar quantizer (QONNX ``BipolarQuant``, 1-bit signed ``Quant``) is the step
``y = [slope * x + offset >= 0]`` with codes {0, 1} standing for {-1, +1}.

:meth:`Step.exact` is the definition.  Over an integer domain ``[lo, hi]`` (the reachable
accumulator range) the function is monotone in ``x`` (the direction of ``slope``), so it is
entirely described by its *thresholds*: for increasing steps ``y(x) = qmin + #{k : x >= t_k}``
(:func:`thresholds`, computed from :meth:`Step.exact` at every step, ties and modes
included).  Hardware computes it as one integer multiply, add and arithmetic shift
``clamp((M * x + C) >> s)`` (:func:`multiply_shift`): ``M, C, s`` are constructed from the
thresholds' constraints and :func:`prove` checks the integer form at every threshold and its
predecessor and at both ends of the domain; two monotone step functions that agree there
agree on the whole domain.  Where no multiply-shift exists within the width limit (e.g.
ties that alternate under half-even rounding) the thresholds themselves are the hardware
form (compare and count, FINN's MultiThreshold), chosen also for outputs of at most 2 bits.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .rounding import Rounding, div_round_int

#: Widest ``M * x + C`` the multiply-shift form may use (bits, sign included).
MAX_PRODUCT_BITS = 64
#: Most thresholds (output codes - 1) a threshold form or the exact reference enumerates.
MAX_THRESHOLDS = 4095
#: Outputs with at most this many thresholds use the threshold form (1-2 bit outputs).
THRESHOLD_FORM_MAX = 3


@dataclass(frozen=True)
class Step:
    """``clamp(R(slope * x + offset), qmin, qmax)``, or ``[slope * x + offset >= 0]`` when bipolar."""

    slope: Fraction
    offset: Fraction
    rounding: Rounding
    qmin: int
    qmax: int
    bipolar: bool = False

    @functools.cached_property
    def integers(self) -> tuple[int, int, int]:
        """``(A, B, D)`` with ``slope = A / D`` and ``offset = B / D`` (integer evaluation, no gcds)."""
        den = math.lcm(self.slope.denominator, self.offset.denominator)
        return int(self.slope * den), int(self.offset * den), den

    def exact(self, x: int | Fraction) -> int:
        if isinstance(x, Fraction):
            num, den = (v := self.slope * x + self.offset).numerator, v.denominator
        else:
            a, b, den = self.integers
            num = a * int(x) + b
        if self.bipolar:
            return 1 if num >= 0 else 0
        y = div_round_int(num, den, self.rounding)
        return min(max(y, self.qmin), self.qmax)

    @property
    def direction(self) -> int:
        return (self.slope > 0) - (self.slope < 0)

    @property
    def levels(self) -> int:
        """Number of thresholds (output codes minus one)."""
        return self.qmax - self.qmin


def _increasing(step: Step, sign: int):
    """The step as an increasing function of ``sign * x`` (sign = -1 for decreasing steps)."""
    return lambda u: step.exact(sign * u)


def _boundary(step: Step, k: int) -> Fraction:
    """Where ``slope * u + offset`` crosses into level ``k`` (within one step for every mode)."""
    return (Fraction(0) if step.bipolar else Fraction(k) - Fraction(1, 2)) - step.offset


def _first(f, k: int, lo: int, hi: int, guess: int, span: int) -> int:
    """The smallest integer ``u`` in ``[lo, hi + 1]`` with ``f(u) >= k`` (``f`` non-decreasing;
    ``hi + 1``: none), searched by bisection from a bracket around ``guess``."""
    if lo < guess <= hi and f(guess) >= k > f(guess - 1):  # the guess is right (round-to-nearest modes)
        return guess
    a, b = max(lo, guess - span), min(hi + 1, guess + span)
    if a > lo and f(a) >= k:
        a = lo
    if b <= hi and f(b) < k:
        b = hi + 1
    if f(a) >= k:
        return a
    while b - a > 1:  # invariant: f(a) < k, and f(b) >= k or b == hi + 1
        m = (a + b) // 2
        if f(m) >= k:
            b = m
        else:
            a = m
    return b


def thresholds(step: Step, lo: int, hi: int) -> tuple[int, np.ndarray]:
    """``(sign, t)``: for every ``x`` in ``[lo, hi]``, ``step.exact(x) == qmin + #{k : sign * x >= t[k]}``.

    ``t`` is non-decreasing, each value clipped to the domain of ``u = sign * x``
    (``[ulo, uhi + 1]``; ``uhi + 1`` means never reached).  Exact: every threshold is placed
    by evaluating :meth:`Step.exact`."""
    sign = -1 if step.direction < 0 else 1
    ulo, uhi = (lo, hi) if sign > 0 else (-hi, -lo)
    search = _LevelSearch.of(step, sign)
    out = [search.start(k, ulo, uhi) for k in range(step.qmin + 1, step.qmax + 1)]
    return sign, np.array(out, dtype=object)


def level_start(step: Step, k: int, lo: int, hi: int) -> int:
    """The smallest ``u`` in ``[ulo, uhi]`` with ``step.exact(sign * u) >= k`` (``uhi + 1``:
    none), ``sign`` the step's direction and ``[ulo, uhi]`` the domain ``[lo, hi]`` of ``u =
    sign * x``: one threshold of :func:`thresholds`, placed the same way."""
    sign = -1 if step.direction < 0 else 1
    ulo, uhi = (lo, hi) if sign > 0 else (-hi, -lo)
    return _LevelSearch.of(step, sign).start(k, ulo, uhi)


@dataclass(frozen=True)
class _LevelSearch:
    """Where an increasing step (of ``u = sign * x``) reaches each level: a guess from the
    rational boundary, then :func:`_first`'s bracketed bisection on the exact definition."""

    step: Step
    sign: int
    slope: Fraction  # of u
    span: int
    a: int  # slope * den, of u
    b: int
    den: int

    @classmethod
    def of(cls, step: Step, sign: int) -> "_LevelSearch":
        slope = step.slope * sign
        a, b, den = step.integers
        return cls(step, sign, slope, 2 + (math.ceil(1 / slope) if slope else 0), a * sign, b, den)

    def start(self, k: int, ulo: int, uhi: int) -> int:
        f = _increasing(self.step, self.sign)
        if self.slope == 0:
            return ulo if f(ulo) >= k else uhi + 1
        # ceil(_boundary(step, k) / slope) in integers: boundary * den = (2k - 1) den / 2 - b
        num, div = (-self.b, self.a) if self.step.bipolar else ((2 * k - 1) * self.den - 2 * self.b, 2 * self.a)
        guess = min(max(-(-num // div), ulo), uhi + 1)
        return _first(f, k, ulo, uhi, guess, self.span)


@dataclass(frozen=True)
class MultiplyShift:
    """``y = clamp((mult * x + add) >> shift, qmin, qmax)`` (arithmetic shift: floor)."""

    mult: int
    add: int
    shift: int

    def __call__(self, x: int, qmin: int, qmax: int) -> int:
        return min(max((self.mult * x + self.add) >> self.shift, qmin), qmax)

    def product_bits(self, lo: int, hi: int) -> int:
        """Signed bits of ``mult * x + add`` over ``[lo, hi]``."""
        peak = max(abs(self.mult * lo + self.add), abs(self.mult * hi + self.add), abs(self.add))
        return peak.bit_length() + 1


def _add_interval(mult: int, shift: int, levels: list[tuple[int, int]], ulo: int, uhi: int,
                  first: int, last: int, qmin: int, qmax: int) -> tuple[int, int] | None:
    """The interval of ``add`` making ``(mult * u + add) >> shift`` match the thresholds."""
    one = 1 << shift
    lo_c, hi_c = -(1 << 200), 1 << 200
    for k, t in levels:  # interior jumps: value >= k at t, < k at t - 1
        lo_c = max(lo_c, k * one - mult * t)
        hi_c = min(hi_c, k * one - mult * (t - 1) - 1)
        if lo_c > hi_c:
            return None
    if first > qmin:  # at the bottom of the domain the value must already reach `first`
        lo_c = max(lo_c, first * one - mult * ulo)
    if last < qmax:  # and at the top stay below last + 1
        hi_c = min(hi_c, (last + 1) * one - mult * uhi - 1)
    return (lo_c, hi_c) if lo_c <= hi_c else None


def multiply_shift(step: Step, lo: int, hi: int, sign_t: tuple[int, np.ndarray] | None = None,
                   most_shift: int | None = None) -> MultiplyShift | None:
    """The narrowest proven ``M, C, s`` with ``clamp((M x + C) >> s) == step.exact(x)`` on
    ``[lo, hi]``, or None when none fits :data:`MAX_PRODUCT_BITS`; shifts up to ``most_shift``
    (default: below the product's width less the domain's, enough for slopes from 1 up)."""
    sign_t = sign_t if sign_t is not None else thresholds(step, lo, hi)
    width = max(abs(lo), abs(hi), 1).bit_length()
    jumps = _Jumps.of(step, lo, hi, sign_t)
    for shift in range(0, MAX_PRODUCT_BITS - width if most_shift is None else most_shift + 1):
        for mult in _mults(step, sign_t[0], shift):
            ms = _fit(step, lo, hi, sign_t, shift, mult, jumps)
            if ms is not None:
                return ms
    return None


def _mults(step: Step, sign: int, shift: int) -> list[int]:
    """The candidate multipliers at ``shift``: ``slope * 2**shift`` rounded both ways (of ``sign * x``)."""
    exact = step.slope * sign * (1 << shift)
    return [m for m in sorted({math.floor(exact), math.ceil(exact)}) if m >= 0]


@dataclass(frozen=True)
class _Jumps:
    """A step's thresholds as :func:`_add_interval` reads them: the interior jumps ``(level,
    u)``, the domain of ``u = sign * x`` and the values at its ends."""

    levels: list[tuple[int, int]]
    ulo: int
    uhi: int
    first: int
    last: int

    @classmethod
    def of(cls, step: Step, lo: int, hi: int, sign_t: tuple[int, np.ndarray]) -> "_Jumps":
        sign, t = sign_t
        ulo, uhi = (lo, hi) if sign > 0 else (-hi, -lo)
        f = _increasing(step, sign)
        return cls([(step.qmin + 1 + i, int(v)) for i, v in enumerate(t) if ulo < v <= uhi], ulo, uhi, f(ulo), f(uhi))


def _fit(step: Step, lo: int, hi: int, sign_t: tuple[int, np.ndarray], shift: int, mult: int,
         jumps: _Jumps | None = None) -> MultiplyShift | None:
    """The proven multiply-shift with this multiplier (of ``sign * x``) and shift, if one exists."""
    sign = sign_t[0]
    j = jumps or _Jumps.of(step, lo, hi, sign_t)
    c = _add_interval(mult, shift, j.levels, j.ulo, j.uhi, j.first, j.last, step.qmin, step.qmax)
    if c is None:
        return None
    ms = MultiplyShift(mult * sign, c[0], shift)
    return ms if ms.product_bits(lo, hi) <= MAX_PRODUCT_BITS and prove(step, ms, lo, hi, sign_t) else None


def shared_multiply_shift(steps: list[Step], lo: int, hi: int,
                          sign_ts: list[tuple[int, np.ndarray]] | None = None) -> tuple[int, list[int], int] | None:
    """``(M, [C_k], s)``: one multiplier and shift for steps of one slope that differ in
    their offsets (a bias per row), each ``clamp((M x + C_k) >> s) == steps[k].exact(x)``
    proven on ``[lo, hi]``; None when none fits :data:`MAX_PRODUCT_BITS`.  ``sign_ts``: the
    steps' :func:`thresholds`, when the caller has them."""
    if len({s.slope for s in steps}) != 1:
        raise ValueError("the steps must share one slope")
    sign_ts = sign_ts if sign_ts is not None else [thresholds(s, lo, hi) for s in steps]
    if len({st[0] for st in sign_ts}) != 1:
        return None
    width = max(abs(lo), abs(hi), 1).bit_length()
    jumps = [_Jumps.of(s, lo, hi, st) for s, st in zip(steps, sign_ts)]
    for shift in range(0, MAX_PRODUCT_BITS - width):
        for mult in _mults(steps[0], sign_ts[0][0], shift):
            fits = []
            for s, st, j in zip(steps, sign_ts, jumps):
                fits.append(_fit(s, lo, hi, st, shift, mult, j))
                if fits[-1] is None:
                    break
            else:
                return fits[0].mult, [f.add for f in fits], shift
    return None


def prove(step: Step, ms: MultiplyShift, lo: int, hi: int, sign_t: tuple[int, np.ndarray] | None = None) -> bool:
    """Whether the multiply-shift equals the step on every integer of ``[lo, hi]``: both are
    monotone in the same direction, so agreeing at both ends and on both sides of every
    threshold inside the domain is agreeing everywhere."""
    sign, t = sign_t if sign_t is not None else thresholds(step, lo, hi)
    points = {lo, hi}
    for v in t:
        x = sign * int(v)
        for p in (x, x - sign):
            if lo <= p <= hi:
                points.add(p)
    if step.slope != 0 and ms.mult != 0 and (ms.mult > 0) != (step.slope > 0):
        return False
    return all(ms(p, step.qmin, step.qmax) == step.exact(p) for p in points)


def apply_thresholds(sign: int, t: np.ndarray, qmin: int, x: np.ndarray) -> np.ndarray:
    """``qmin + #{k : sign * x >= t[k]}`` on int64 codes (``t`` sorted)."""
    tt = np.asarray([int(v) for v in t], dtype=np.int64)
    return qmin + np.searchsorted(tt, sign * np.asarray(x, dtype=np.int64), side="right").astype(np.int64)


def _key(x: float) -> int:
    """float64 -> an integer with the same order (for bisection over floats)."""
    b = int(np.float64(x).view(np.int64))
    return b if b >= 0 else -(b & 0x7FFFFFFFFFFFFFFF)


def _unkey(k: int) -> float:
    return float(np.int64(k if k >= 0 else (-k) | -0x8000000000000000).view(np.float64))


def float_thresholds(step: Step) -> np.ndarray:
    """For a step on real (float64) inputs: the smallest float64 reaching each level, so that
    ``step.exact(x) == qmin + #{k : x >= t[k]}`` for every finite float64 ``x`` (increasing
    steps; bisection over the ordered float64 values, each probe evaluated exactly)."""
    if step.direction <= 0:
        raise ValueError("float thresholds need an increasing step")
    f = lambda key: step.exact(Fraction(_unkey(key)))  # noqa: E731
    lo_key, hi_key = _key(-np.finfo(np.float64).max), _key(np.finfo(np.float64).max)
    width = 2 / step.slope
    out = []
    for k in range(step.qmin + 1, step.qmax + 1):
        guess = _boundary(step, k) / step.slope
        a, b = _key(float(guess - width)), _key(float(guess + width))
        if f(a) >= k:
            a = lo_key
        if f(b) < k:
            b = hi_key
        while b - a > 1:  # f(a) < k <= f(b)
            m = (a + b) // 2
            if f(m) >= k:
                b = m
            else:
                a = m
        out.append(_unkey(b))
    return np.array(out, dtype=np.float64)


def fraction(v: float | np.floating) -> Fraction:
    """The exact rational value of a float (refuses NaN/Inf)."""
    return Fraction(float(v))


__all__ = ["MAX_PRODUCT_BITS", "MAX_THRESHOLDS", "MultiplyShift", "Step", "THRESHOLD_FORM_MAX", "apply_thresholds",
           "float_thresholds", "fraction", "level_start", "multiply_shift", "prove", "thresholds"]
