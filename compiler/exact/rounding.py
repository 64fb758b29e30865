"""Rounding, defined once: the QONNX rounding modes and one decision table.

Every rounding in Tessera is ``R(n / d)`` for ``d > 0``: the floor quotient ``q`` plus one
when the mode says so.  Whether it does is decided by :data:`ROUND_UP` from five facts
about the division (:class:`Fact`): the remainder is above, or exactly at, half the divisor;
the dividend is negative; the division is inexact; ``q`` is odd.  The table is the whole
definition.  Its back ends evaluate the same table:

* :func:`div_round` / :func:`shift_round` on int64 codes (the integer semantics of every op),
* :func:`round_float` on float64 values that are exact (the model's input quantizer on real
  data, quantized constants, lookup tables),
* the onnxruntime reference (``reference.model.OnnxBuilder``), through :func:`round_up` with
  ONNX nodes as the booleans,
* C++: ``hls_templates/common/nnet_tessera_rounding.h`` (``tessera_round_up``) implements the
  same table for every Tessera kernel; :attr:`Rounding.cpp` names its enumerators, and the
  C-simulation tests check it against :func:`div_round` for every mode.

QONNX's ``ROUND`` is half to even (as is ``HALF_EVEN``); ``DOWN`` rounds toward zero and
``UP`` away from it; ``HALF_UP`` / ``HALF_DOWN`` break ties away from / toward zero.
"""

from __future__ import annotations

import itertools

from enum import Enum, StrEnum
from typing import Callable, Generic, Protocol, TypeVar

import numpy as np


class Rounding(StrEnum):
    """A QONNX ``Quant`` rounding mode (the value is QONNX's name)."""

    ROUND = "ROUND"
    HALF_EVEN = "HALF_EVEN"
    FLOOR = "FLOOR"
    CEIL = "CEIL"
    DOWN = "DOWN"
    UP = "UP"
    HALF_UP = "HALF_UP"
    HALF_DOWN = "HALF_DOWN"

    @classmethod
    def parse(cls, text: object) -> "Rounding":
        """The mode named ``text`` (any case); ``ValueError`` naming the known ones otherwise."""
        try:
            return cls(str(text).upper())
        except ValueError:
            raise ValueError(f"unknown rounding mode {str(text).upper()} (QONNX modes: "
                             f"{', '.join(m.value for m in cls)})") from None

    @property
    def ap_fixed(self) -> str | None:
        """The ap_fixed quantization mode that rounds the same way (None: ap_fixed has none)."""
        return _AP_FIXED[self]

    @property
    def cpp(self) -> str:
        """The enumerator of ``nnet_tessera_rounding.h`` (``tessera_rounding``) for this mode."""
        return _CPP[self]


class Fact(Enum):
    """What is known about ``n / d`` (``d > 0``) after the floor division ``q, r = divmod(n, d)``."""

    ABOVE_HALF = "2r > d"
    AT_HALF = "2r == d"
    NEGATIVE = "n < 0"
    INEXACT = "r > 0"
    ODD = "q is odd"


#: Whether ``floor(n / d)`` rounds up: any of the terms holds, a term being all of its
#: (fact, truth) pairs.  An empty tuple: never (FLOOR).
ROUND_UP: dict[Rounding, tuple[tuple[tuple[Fact, bool], ...], ...]] = {
    Rounding.ROUND: (((Fact.ABOVE_HALF, True),), ((Fact.AT_HALF, True), (Fact.ODD, True))),
    Rounding.HALF_EVEN: (((Fact.ABOVE_HALF, True),), ((Fact.AT_HALF, True), (Fact.ODD, True))),
    Rounding.FLOOR: (),
    Rounding.CEIL: (((Fact.INEXACT, True),),),
    Rounding.DOWN: (((Fact.NEGATIVE, True), (Fact.INEXACT, True)),),
    Rounding.UP: (((Fact.NEGATIVE, False), (Fact.INEXACT, True)),),
    Rounding.HALF_UP: (((Fact.ABOVE_HALF, True),), ((Fact.AT_HALF, True), (Fact.NEGATIVE, False))),
    Rounding.HALF_DOWN: (((Fact.ABOVE_HALF, True),), ((Fact.AT_HALF, True), (Fact.NEGATIVE, True))),
}

_AP_FIXED = {Rounding.ROUND: "RND_CONV", Rounding.HALF_EVEN: "RND_CONV", Rounding.FLOOR: "TRN",
             Rounding.DOWN: "TRN_ZERO", Rounding.HALF_UP: "RND_INF", Rounding.HALF_DOWN: "RND_ZERO",
             Rounding.CEIL: None, Rounding.UP: None}
_CPP = {Rounding.ROUND: "TESSERA_ROUND", Rounding.HALF_EVEN: "TESSERA_ROUND", Rounding.FLOOR: "TESSERA_FLOOR",
        Rounding.CEIL: "TESSERA_CEIL", Rounding.DOWN: "TESSERA_DOWN", Rounding.UP: "TESSERA_UP",
        Rounding.HALF_UP: "TESSERA_HALF_UP", Rounding.HALF_DOWN: "TESSERA_HALF_DOWN"}
#: The enumerators of ``tessera_rounding`` in the C++ header, in declaration order.
CPP_ENUM = ("TESSERA_ROUND", "TESSERA_FLOOR", "TESSERA_CEIL", "TESSERA_DOWN", "TESSERA_UP", "TESSERA_HALF_UP",
            "TESSERA_HALF_DOWN")

B = TypeVar("B")


class Logic(Protocol, Generic[B]):
    """Boolean operations of a back end (numpy arrays, ONNX node names, ...)."""

    def and_(self, a: B, b: B) -> B: ...

    def or_(self, a: B, b: B) -> B: ...

    def not_(self, a: B) -> B: ...


def round_up(mode: Rounding, fact: Callable[[Fact], B], logic: Logic[B]) -> B | None:
    """The table's decision for ``mode`` on one back end; ``fact(f)`` gives the back end's
    value of each fact (called only for those the mode needs, in the table's order).
    None when the mode never rounds up."""
    out = None
    for term in ROUND_UP[Rounding(mode)]:
        t = None
        for f, truth in term:
            v = fact(f) if truth else logic.not_(fact(f))
            t = v if t is None else logic.and_(t, v)
        out = t if out is None else logic.or_(out, t)
    return out


class _NumpyLogic:
    def and_(self, a, b):
        return a & b

    def or_(self, a, b):
        return a | b

    def not_(self, a):
        return ~a


NUMPY = _NumpyLogic()


def _decide(mode: Rounding, q: np.ndarray, facts: dict[Fact, Callable[[], np.ndarray]]) -> np.ndarray:
    up = round_up(mode, lambda f: facts[f](), NUMPY)
    return q if up is None else q + up.astype(q.dtype)


def div_round(num: np.ndarray, den: np.ndarray | int, mode: Rounding | str) -> np.ndarray:
    """Exact ``R(num / den)`` on int64 integers (``den > 0``)."""
    num = np.asarray(num, dtype=np.int64)
    den = np.asarray(den, dtype=np.int64)
    q = np.floor_divide(num, den)
    r = num - q * den  # 0 <= r < den
    twice = 2 * r
    return _decide(Rounding(mode), q, {
        Fact.ABOVE_HALF: lambda: twice > den, Fact.AT_HALF: lambda: twice == den, Fact.NEGATIVE: lambda: num < 0,
        Fact.INEXACT: lambda: r > 0, Fact.ODD: lambda: (q & 1) == 1})


class _PythonLogic:
    def and_(self, a, b):
        return a and b

    def or_(self, a, b):
        return a or b

    def not_(self, a):
        return not a


PYTHON = _PythonLogic()


def _decisions(mode: Rounding) -> frozenset[tuple[bool, ...]]:
    """The fact combinations (in :class:`Fact`'s order) on which the table rounds ``mode`` up."""
    combos = itertools.product((False, True), repeat=len(Fact))
    return frozenset(c for c in combos if round_up(mode, lambda f, c=c: c[list(Fact).index(f)], PYTHON))


#: The table's decisions, enumerated once per mode (evaluated on Python integers by lookup).
_ROUNDS_UP = {mode: _decisions(mode) for mode in Rounding}


def div_round_int(num: int, den: int, mode: Rounding | str) -> int:
    """Exact ``R(num / den)`` on Python integers of any size (``den > 0``): the same table."""
    num, den = int(num), int(den)
    q, r = divmod(num, den)
    facts = (2 * r > den, 2 * r == den, num < 0, r > 0, q % 2 == 1)  # Fact's order
    return q + 1 if facts in _ROUNDS_UP[Rounding(mode)] else q


def shift_round(x: np.ndarray, shift: int, mode: Rounding | str) -> np.ndarray:
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


def round_float(v: np.ndarray, mode: Rounding | str) -> np.ndarray:
    """``R(v)`` of float64 values (divisor 1), exactly: ``q = floor(v)`` and the facts come
    from comparisons of ``v`` with ``q`` and ``q + 1/2``, exact for ``|v| < 2**52`` (``v - q``
    is not: -0.49999999999999994 + 1 rounds to 0.5); from 2**52 on every float64 is an
    integer.  Infinities stay infinite (no fact holds), for the caller's clip."""
    v = np.asarray(v, dtype=np.float64)
    q = np.floor(v)
    fine = np.abs(v) < 2.0**52  # (then q + 1/2 is exact too)
    half = np.where(fine, q + 0.5, np.inf)
    return _decide(Rounding(mode), q, {
        Fact.ABOVE_HALF: lambda: fine & (v > half), Fact.AT_HALF: lambda: fine & (v == half),
        Fact.NEGATIVE: lambda: v < 0, Fact.INEXACT: lambda: v > q, Fact.ODD: lambda: np.mod(q, 2.0) == 1.0})


__all__ = ["CPP_ENUM", "Fact", "Logic", "ROUND_UP", "Rounding", "div_round", "div_round_int", "round_float", "round_up", "shift_round"]
