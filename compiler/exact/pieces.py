"""Wide requantizations: the primitive on integer sub-domains, proven without enumerating levels.

A :class:`.requant.Step` with a 16-bit output has 65,535 thresholds; :mod:`.requant` places
every one of them and proves its multiply-shift at each.  Here the same equality is proven
from the arithmetic instead, in a number of operations that grows with the bits of the
constants and not with the levels:

* On a sub-domain where every tie and every inexact division rounds the same way (read from
  the one rounding table, :func:`.rounding.round_up`), ``R(n / D)`` with ``n = A x + B`` is one
  floor ``floor((P u + Q) / E)`` of ``u = sign * x`` (:class:`Floor`: the floor, the ceiling,
  or round-to-nearest with ties up or down).  Modes that look at the sign of ``n`` (``DOWN``,
  ``UP``, ``HALF_UP``, ``HALF_DOWN``) are split where ``n`` changes sign, when one floor cannot
  serve both sides; ties that alternate (half-even with ties of both parities in the domain)
  have no floor form, and :func:`segments` says so (:class:`NoExactForm`).
* ``floor((M u + C) / 2**s) == floor((P u + Q) / E)`` for every ``u`` of ``[lo, hi]`` when
  the error ``e(u) = (M u + C) / 2**s - (P u + Q) / E`` stays in ``[-rmin / E, 1 - rmax / E)``,
  ``rmin`` and ``rmax`` the least and greatest remainder ``(P u + Q) mod E`` on ``[lo, hi]``
  (then ``e(u) + r(u) / E``, the floor's fractional part, stays in ``[0, 1)``).  ``e`` is
  linear, so the bound holds everywhere once it holds at both ends; :func:`residues` finds
  ``rmin`` and ``rmax`` exactly by bisection over counts of remainders, each count a sum of
  floors (:func:`floor_sum`, the Euclid-like recursion of AtCoder's library).
* The clamp to ``[qmin, qmax]`` only needs the floors to agree where the step is not
  saturated, plus one code on each side: both are monotone the same way.

Two shorter roads come first: a step whose constants are dyadic (``D = 2**k``) is
``R((A x + B) / 2**k)`` itself, the rounding mode applied to the shift (exact by construction,
ties included); a step whose codes reach at most :data:`.requant.MAX_THRESHOLDS` levels is
proven by :func:`.requant.multiply_shift` at each of them.

A :class:`Pieces` is a function of codes that is a different step on consecutive
sub-domains (a LeakyRelu / PRelu bent line, one step each side of real 0); :func:`segments`
gives each step's exact multiply-shifts, a :class:`Segment` each, :func:`layer_segments`
every channel's at one shift and one rounding.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, replace
from enum import Enum
from fractions import Fraction
from typing import Sequence

import numpy as np

from .requant import MAX_PRODUCT_BITS, MAX_THRESHOLDS, MultiplyShift, Step, level_start, multiply_shift
from .rounding import PYTHON, Fact, Rounding, div_round_int, round_up

#: Largest shift of a wide multiply-shift (``2**shift`` stays an int64 for the ONNX reference).
MAX_SHIFT = 62


@dataclass(frozen=True)
class Pieces:
    """``steps[k]`` on the codes from ``starts[k - 1]`` up to ``starts[k] - 1`` (``starts``
    ascending; the first step from -inf, the last to +inf)."""

    starts: tuple[int, ...]
    steps: tuple[Step, ...]

    def __post_init__(self):
        if len(self.steps) != len(self.starts) + 1 or list(self.starts) != sorted(self.starts):
            raise ValueError(f"{len(self.steps)} steps need {len(self.steps) - 1} ascending starts, got {self.starts}")

    def exact(self, x: int) -> int:
        return self.steps[bisect.bisect_right(self.starts, x)].exact(x)

    def on(self, lo: int, hi: int) -> list[tuple[int, int, Step]]:
        """``(lo_k, hi_k, step_k)`` of every piece that holds codes of ``[lo, hi]``, ascending."""
        bounds = [-math.inf, *self.starts, math.inf]
        out = []
        for k, step in enumerate(self.steps):
            a, b = max(lo, bounds[k]), min(hi, bounds[k + 1] - 1)
            if a <= b:
                out.append((int(a), int(b), step))
        return out

    def codes(self, x: np.ndarray) -> np.ndarray:
        """The definition on int64 codes: each distinct code evaluated exactly once."""
        values, index = np.unique(np.asarray(x, dtype=np.int64), return_inverse=True)
        y = np.array([self.exact(int(v)) for v in values], dtype=np.int64)
        return y[index].reshape(np.shape(x))


@dataclass(frozen=True)
class Segment:
    """``clamp(R((mult * x + add) / 2**shift), qmin, qmax)`` on the codes ``[lo, hi]``: ``R``
    the floor for a proven multiply-shift (:func:`fit`, :func:`.requant.multiply_shift`), the
    step's own mode where the step's constants are dyadic (exact by construction), None where
    nothing rounds (a constant)."""

    lo: int
    hi: int
    form: MultiplyShift
    qmin: int
    qmax: int
    rounding: Rounding | None = Rounding.FLOOR
    proven: bool = False  # a floor proven equal to the step, not the definition itself

    def __call__(self, x: int) -> int:
        y = div_round_int(self.form.mult * x + self.form.add, 1 << self.form.shift, self.rounding or Rounding.FLOOR)
        return min(max(y, self.qmin), self.qmax)

    def product_bits(self) -> int:
        return self.form.product_bits(self.lo, self.hi)

    def shifted(self, shift: int) -> "Segment":
        """The same function with a larger shift: ``mult`` and ``add`` scaled, so the rational
        ``(mult x + add) / 2**shift`` and every rounding of it are unchanged."""
        up = shift - self.form.shift
        return replace(self, form=MultiplyShift(self.form.mult << up, self.form.add << up, shift))


@dataclass(frozen=True)
class Segments:
    """Every channel's segments over one input range (ascending, covering it), with one shift
    and one rounding for all: what a layer computes."""

    channels: tuple[tuple[Segment, ...], ...]
    shift: int
    rounding: Rounding

    @property
    def most(self) -> int:
        """Segments of the channel with the most."""
        return max(len(c) for c in self.channels)

    def product_bits(self) -> int:
        return max(s.product_bits() for c in self.channels for s in c)


# -- counting remainders ---------------------------------------------------------------------
def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """``sum(floor((a * i + b) / m) for i in range(n))`` for ``m > 0``, ``n >= 0``, in
    ``O(log m)`` steps (AtCoder Library's ``floor_sum``; any integers ``a``, ``b``)."""
    total = 0
    if a < 0 or a >= m:
        total += n * (n - 1) // 2 * (a // m)
        a %= m
    if b < 0 or b >= m:
        total += n * (b // m)
        b %= m
    while True:
        if a >= m:
            total += n * (n - 1) // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        top = a * n + b
        if top < m:
            return total
        n, b = divmod(top, m)
        m, a = a, m


def _count_below(n: int, m: int, a: int, b: int, t: int) -> int:
    """``#{i < n : (a i + b) mod m < t}`` for ``0 < t <= m``: ``floor(w / m) - floor((w - t) / m)``
    is 1 exactly when ``w mod m < t``."""
    return floor_sum(n, m, a, b) - floor_sum(n, m, a, b - t)


def _least_residue(n: int, m: int, a: int, b: int) -> int:
    """``min((a i + b) mod m for i in range(n))`` (``n >= 1``), by bisection on the count."""
    lo, hi = 0, m - 1  # the answer lies in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if _count_below(n, m, a, b, mid + 1) > 0:
            hi = mid
        else:
            lo = mid + 1
    return lo


def residues(a: int, b: int, m: int, lo: int, hi: int) -> tuple[int, int]:
    """The least and greatest ``(a u + b) mod m`` over ``u`` in ``[lo, hi]`` (``m > 0``)."""
    n, b0 = hi - lo + 1, a * lo + b
    least = _least_residue(n, m, a, b0)
    # m - 1 - (w mod m) == (-w - 1) mod m: the greatest residue of w is the least of -w - 1
    return least, m - 1 - _least_residue(n, m, -a, -b0 - 1)


# -- one floor for a sub-domain --------------------------------------------------------------
class Kind(Enum):
    """How a floor form adds to ``q = floor(n / D)``: never, when inexact, from half up, above half."""

    FLOOR = "floor"
    CEIL = "ceil"
    HALF_UP = "nearest, ties up"
    HALF_DOWN = "nearest, ties down"


@dataclass(frozen=True)
class Floor:
    """``floor((num * u + add) / den)``."""

    num: int
    add: int
    den: int

    @classmethod
    def of(cls, kind: Kind, a: int, b: int, d: int) -> "Floor":
        """``kind`` of ``(a u + b) / d``."""
        return {Kind.FLOOR: cls(a, b, d), Kind.CEIL: cls(a, b + d - 1, d),
                Kind.HALF_UP: cls(2 * a, 2 * b + d, 2 * d), Kind.HALF_DOWN: cls(2 * a, 2 * b + d - 1, 2 * d)}[kind]


def _decision(step: Step, above: bool, at: bool, negative: bool) -> bool | None:
    """Whether the mode rounds an inexact ``n / D`` up, from the table; None where it depends
    on the parity of the quotient."""
    facts = {Fact.ABOVE_HALF: above, Fact.AT_HALF: at, Fact.NEGATIVE: negative, Fact.INEXACT: True}
    both = {bool(round_up(step.rounding, lambda f, odd=odd: facts.get(f, odd), PYTHON)) for odd in (False, True)}
    return both.pop() if len(both) == 1 else None


def _ties(a: int, b: int, d: int, lo: int, hi: int) -> list[int]:
    """The first, second and last ``u`` of ``[lo, hi]`` where ``(a u + b) / d`` lies halfway
    between integers (``2 (a u + b) + d == 0 mod 2 d``), fewer where there are fewer."""
    m, c = 2 * d, -(2 * b + d)
    g = math.gcd(2 * a, m)
    if c % g:
        return []
    period = m // g
    first = (c // g) * pow(2 * a // g, -1, period) % period if period > 1 else 0
    first = lo + (first - lo) % period
    if first > hi:
        return []
    last = first + (hi - first) // period * period
    return sorted({first, min(first + period, last), last})


def _kinds(step: Step, sign: int, lo: int, hi: int, negative: bool) -> set[Kind]:
    """The floor forms equal to the step's rounding on ``u`` in ``[lo, hi]``, where ``n = A x +
    B`` has one sign (``negative``)."""
    a, b, d = step.integers
    a *= sign
    if residues(a, b, d, lo, hi)[1] == 0:  # every division exact: nothing rounds
        return set(Kind)
    below, above = _decision(step, False, False, negative), _decision(step, True, False, negative)
    if below is None or above is None or (below and not above):
        return set()
    ups = {div_round_int(a * u + b, d, step.rounding) - (a * u + b) // d for u in _ties(a, b, d, lo, hi)}
    if below == above:  # the floor or the ceiling: a tie must round as every inexact division does
        return {Kind.CEIL if below else Kind.FLOOR} if ups <= {int(below)} else set()
    return {Kind.HALF_UP, Kind.HALF_DOWN} - ({Kind.HALF_DOWN} if 1 in ups else set()) - \
        ({Kind.HALF_UP} if 0 in ups else set())


def _parts(step: Step, sign: int, lo: int, hi: int) -> list[tuple[int, int, Kind]] | None:
    """``[lo, hi]`` (of ``u``) as one or two parts, each with one floor form: split where ``n``
    turns non-negative when no form serves both sides; None when a part has none."""
    a, b, _ = step.integers
    zero = -(b // (a * sign))  # the first u with n >= 0
    parts = [(p, q, neg) for p, q, neg in ((lo, min(hi, zero - 1), True), (max(lo, zero), hi, False)) if p <= q]
    kinds = [_kinds(step, sign, p, q, neg) for p, q, neg in parts]
    common = set.intersection(*kinds)
    if common:
        return [(lo, hi, _preferred(common))]
    if not all(kinds):
        return None
    return [(p, q, _preferred(k)) for (p, q, _), k in zip(parts, kinds)]


def _preferred(kinds: set[Kind]) -> Kind:
    return next(k for k in Kind if k in kinds)


# -- the multiply-shift of one floor ---------------------------------------------------------
def fit(form: Floor, lo: int, hi: int, span: tuple[int, int]) -> MultiplyShift | None:
    """The narrowest ``M >= 0, C, s`` with ``floor((M u + C) / 2**s) == floor((P u + Q) / E)``
    on ``[lo, hi]``, proven by :func:`holds`, whose ``M u + C`` fits :data:`..requant.MAX_PRODUCT_BITS`
    on ``span`` (the codes it will see); None when none does."""
    p, q, e = form.num, form.add, form.den
    rmin, rmax = residues(p, q, e, lo, hi)
    low, high = Fraction(-rmin, e), Fraction(e - rmax, e)  # e(u) must stay in [low, high)
    for shift in range(MAX_SHIFT + 1):
        one = 1 << shift
        exact = Fraction(p * one, e)
        for mult in sorted({math.floor(exact), math.ceil(exact)}):
            alpha = Fraction(mult, one) - Fraction(p, e)
            least = low - min(alpha * lo, alpha * hi) + Fraction(q, e)
            below = high - max(alpha * lo, alpha * hi) + Fraction(q, e)  # C / 2**s must be < this
            add = math.ceil(least * one)
            ms = MultiplyShift(mult, add, shift)
            if mult >= 0 and Fraction(add, one) < below and holds(form, ms, lo, hi):
                return ms if ms.product_bits(*span) <= MAX_PRODUCT_BITS else None
    return None


def holds(form: Floor, ms: MultiplyShift, lo: int, hi: int) -> bool:
    """Whether ``floor((M u + C) / 2**s) == floor((P u + Q) / E)`` for every ``u`` in ``[lo, hi]``:
    the error ``e(u)`` is linear, so it lies in ``[-rmin / E, 1 - rmax / E)`` everywhere when
    it does at both ends; then ``e(u) + r(u) / E`` is in ``[0, 1)`` for every ``u``."""
    rmin, rmax = residues(form.num, form.add, form.den, lo, hi)
    for u in (lo, hi):
        error = Fraction(ms.mult * u + ms.add, 1 << ms.shift) - Fraction(form.num * u + form.add, form.den)
        if not Fraction(-rmin, form.den) <= error < Fraction(form.den - rmax, form.den):
            return False
    return True


# -- a step's segments -----------------------------------------------------------------------
class NoExactForm(ValueError):
    """Why a step has no exact segments (a phrase, for a one-line refusal)."""


def segments(step: Step, lo: int, hi: int, shift_rounds: bool = True) -> list[Segment]:
    """The step on the codes ``[lo, hi]`` as exact segments, ascending in ``x``: with dyadic
    constants (``shift_rounds``) ``R((A x + B) / 2**k)`` itself; where the codes reach at most
    :data:`..requant.MAX_THRESHOLDS` levels, :func:`..requant.multiply_shift` (proven at each
    of them); else proven floors, one or two where the rounding differs on each side of ``n =
    0``.  :class:`NoExactForm` where no floor form exists (half-even ties of both parities) or
    no multiply-shift fits :data:`..requant.MAX_PRODUCT_BITS`."""
    if step.bipolar:
        raise ValueError("a bipolar step has one threshold: requant.thresholds holds it")
    sign = -1 if step.direction < 0 else 1
    ulo, uhi = (lo, hi) if sign > 0 else (-hi, -lo)
    first, last = step.exact(sign * ulo), step.exact(sign * uhi)
    if first == last:  # constant on the domain (a zero slope, or saturated)
        return [Segment(lo, hi, MultiplyShift(0, first, 0), step.qmin, step.qmax, None)]
    a, b, d = step.integers
    if shift_rounds and d & (d - 1) == 0 and d.bit_length() - 1 <= MAX_SHIFT:
        dyadic = Segment(lo, hi, MultiplyShift(a, b, d.bit_length() - 1), step.qmin, step.qmax, step.rounding)
        if dyadic.product_bits() <= MAX_PRODUCT_BITS:
            return [dyadic]
    if last - first <= MAX_THRESHOLDS:  # few levels reached: each threshold proves the form
        # the same function on [lo, hi], its bounds one beyond the codes reached (where they
        # are not the step's own): the form's floor stays in [first, last], so the step's
        # clamp leaves it as the narrower one does
        reached = replace(step, qmin=first - 1 if first > step.qmin else step.qmin,
                          qmax=last + 1 if last < step.qmax else step.qmax)
        ms = multiply_shift(reached, lo, hi, most_shift=MAX_SHIFT)  # small slopes need long shifts
        if ms is not None:
            return [Segment(lo, hi, ms, step.qmin, step.qmax, proven=True)]
    # where the step is not saturated, and one code beyond on each side (monotone: both agree there)
    core = (max(ulo, level_start(step, step.qmin + 1, lo, hi) - 1), min(uhi, level_start(step, step.qmax, lo, hi)))
    parts = _parts(step, sign, *core)
    if parts is None:
        raise NoExactForm(f"its {step.rounding.value} ties of both parities between codes {sign * core[0]} and "
                          f"{sign * core[1]} have no floor form")
    found = []
    for i, (p, q, kind) in enumerate(parts):
        span = (ulo if i == 0 else p, uhi if i == len(parts) - 1 else q)
        ms = fit(Floor.of(kind, a * sign, b, d), p, q, span)
        if ms is None:
            raise NoExactForm(f"no multiply-shift exact on its {q - p + 1} unsaturated codes fits {MAX_PRODUCT_BITS} "
                              "bits; requantize the accumulator to fewer bits first")
        x_span = span if sign > 0 else (-span[1], -span[0])
        found.append(Segment(*x_span, MultiplyShift(ms.mult * sign, ms.add, ms.shift), step.qmin, step.qmax,
                             proven=True))
    return found if sign > 0 else found[::-1]


def piece_segments(pieces: Pieces, lo: int, hi: int, shift_rounds: bool = True) -> list[Segment]:
    """Every piece's segments over the codes ``[lo, hi]``, ascending."""
    return list(itertools.chain.from_iterable(segments(step, a, b, shift_rounds) for a, b, step in pieces.on(lo, hi)))


def layer_segments(functions: Sequence[Pieces], lo: int, hi: int) -> Segments:
    """Every channel's segments with one shift and one rounding: the steps' own rounding where
    every one is dyadic, else floors (:class:`NoExactForm` where there are none)."""
    why = None
    for shift_rounds in (True, False):
        try:
            found = [piece_segments(f, lo, hi, shift_rounds) for f in functions]
        except NoExactForm as exc:
            why = exc
            continue
        modes = {s.rounding for f in found for s in f} - {None}
        if len(modes) > 1:
            continue
        shift = max(s.form.shift for f in found for s in f)
        layer = Segments(tuple(tuple(s.shifted(shift) for s in f) for f in found), shift,
                         modes.pop() if modes else Rounding.FLOOR)
        if layer.product_bits() <= MAX_PRODUCT_BITS:
            return layer
        why = NoExactForm(f"its segments' multiply-shifts at one shift ({shift}) need more than {MAX_PRODUCT_BITS} bits")
    raise why


__all__ = ["Floor", "Kind", "MAX_SHIFT", "NoExactForm", "Pieces", "Segment", "Segments", "fit", "floor_sum", "holds",
           "layer_segments", "piece_segments", "residues", "segments"]
