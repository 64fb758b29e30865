"""The RTL builder: exact integer arithmetic on symbolic codes, traced by da4ml into adder
graphs (:class:`~..ops.base.RtlBuilder`, the facet every op's ``rtl`` uses).

An array is a numpy object array of da4ml ``FixedVariable`` values shaped as the IR value;
each holds an integer *code* (da4ml's real value of the variable is the code itself: the
fixed-point scale lives in the IR type, never in the hardware).  Every method is exact on
integers: sums and products by integer constants widen, nothing wraps, and the only
roundings are :meth:`DaBuilder.round_shift` and :meth:`DaBuilder.div_round` (by a constant),
which decide each rounding by the one table of :mod:`..exact.rounding` (facts of the
remainder, evaluated as comparisons of bits).

da4ml is imported by this module: the RTL back end's optional dependency
(``pip install tessera[rtl]``); :func:`require_da4ml` says so in one line.
"""

from __future__ import annotations

import numpy as np

from ..errors import ToolchainError, UnsupportedModelError
from ..exact.rounding import Fact, Rounding, div_round, round_up, shift_round

#: The largest |weight| da4ml's constant matrix solver takes exactly (it reads float32).
MAX_WEIGHT = 1 << 24


def require_da4ml():
    """da4ml's tracing modules, or one line saying how to install them."""
    try:
        from da4ml import trace  # noqa: F401
    except ImportError:
        raise ToolchainError("the RTL back end needs da4ml: pip install 'tessera[rtl]'") from None
    return trace


class _BitLogic:
    """The rounding table's booleans as 0/1 variables, combined by arithmetic (da4ml's bit
    operators carry its scaling factors inconsistently across its interpreters), or Python
    bools where a fact is known (no tie at an odd divisor)."""

    def and_(self, a, b):
        if isinstance(a, bool) or isinstance(b, bool):
            return (b if a else False) if isinstance(a, bool) else (a if b else False)
        return (a + b - 1.0).relu()

    def or_(self, a, b):
        if isinstance(a, bool) or isinstance(b, bool):
            return (True if a else b) if isinstance(a, bool) else (True if b else a)
        return 1.0 - (1.0 - a - b).relu()

    def not_(self, a):
        return (not a) if isinstance(a, bool) else 1.0 - a


BITS = _BitLogic()


def _elementwise(fn, *arrays) -> np.ndarray:
    """``fn`` applied element by element over broadcast object arrays (an array, 0-d included)."""
    return np.asarray(np.frompyfunc(fn, len(arrays), 1)(*arrays), dtype=object)


def _ints(values) -> np.ndarray:
    """Integer constants as an object array of Python ints (exact, any size)."""
    return np.vectorize(int, otypes=[object])(np.asarray(values, dtype=object)) if np.size(values) else \
        np.asarray(values, dtype=object)


def _tree(fn, items: list):
    """``fn`` folded pairwise over ``items`` (a balanced tree: the shortest adder chain)."""
    while len(items) > 1:
        items = [fn(items[i], items[i + 1]) if i + 1 < len(items) else items[i] for i in range(0, len(items), 2)]
    return items[0]


def _floor(v, shift: int):
    """``floor(v / 2**shift)`` of one variable (``shift > 0``): drop the low bits, no wrap."""
    scaled = v * 2.0**-shift
    k, i, _ = scaled.kif
    return scaled.quantize(k, max(i, 0) + 1, 0, "WRAP", "TRN")


def _at_least(v, t: int):
    """1 where ``v >= t``, else 0 (a 0/1 variable: the sign of ``v - t``)."""
    return 1.0 - (v - float(t)).is_negative()


def _remainder(v, q, shift: int):
    """``v - q * 2**shift`` in ``[0, 2**shift)``: the low bits of ``v`` where they hold it."""
    k, i, _ = v.kif
    if shift <= i:
        return v.quantize(0, shift, 0, "WRAP", "TRN")
    return v - q * 2.0**shift


def _floor_div(v, divisor: int):
    """``floor(v / divisor)`` of one variable (``divisor > 1``): with ``base = floor(low /
    divisor)`` and ``u = v - base * divisor`` in ``[0, top]``, ``floor(u * m / 2**s)`` where
    ``m = ceil(2**s / divisor)`` and ``s`` the least with ``(m * divisor - 2**s) * top < 2**s``;
    then ``u * m / 2**s = u / divisor + e`` with ``0 <= e < 1 / divisor``, which never
    crosses the next integer (Granlund and Montgomery's reciprocal)."""
    base = int(v.low) // divisor
    top = int(v.high) - base * divisor
    s = 0
    while (-(-(1 << s) // divisor) * divisor - (1 << s)) * top >= 1 << s:
        s += 1
    u = v - float(base * divisor) if base else v
    return _floor(u * float(-(-(1 << s) // divisor)), s) + float(base)


class DaBuilder:
    """Traces the ops' integer semantics with da4ml (``hwconf``: its adder model)."""

    def __init__(self, hwconf=None):
        trace = require_da4ml()
        self.hwconf = hwconf if hwconf is not None else trace.HWConfig(1, -1, -1)
        self._trace = trace
        self.node = ""

    # -- values -----------------------------------------------------------------------------
    def inputs(self, sizes: list[int], types: list[tuple[bool, int]]):
        """The design's input variables and, per input port, its codes: ``types`` each
        (signed, width); every element quantized to its port's integer type."""
        total = sum(sizes)
        inp = self._trace.FixedVariableArrayInput((total,), hwconf=self.hwconf)
        kif_k, kif_i = [], []
        for size, (signed, width) in zip(sizes, types):
            kif_k += [int(signed)] * size
            kif_i += [width - int(signed)] * size
        codes = inp.quantize(k=np.array(kif_k), i=np.array(kif_i), f=np.zeros(total, dtype=np.int64))
        ends = np.cumsum([0, *sizes])
        return inp, [codes._vars[a:b] for a, b in zip(ends[:-1], ends[1:])]

    def const(self, values) -> np.ndarray:
        """Constant codes (integers) as variables."""
        return _elementwise(self._constant, _ints(values))

    def _constant(self, value: int):
        return self._trace.FixedVariable.from_const(float(value), hwconf=self.hwconf)

    # -- arithmetic -----------------------------------------------------------------------
    def matmul(self, x, weight: np.ndarray):
        """``x @ weight`` over the last axis of ``x`` (integer weights): da4ml's constant
        matrix-vector product, its adder graph found once for every row (a convolution's
        positions) on the columns' widest intervals, and applied to each row.  Weights of
        :data:`MAX_WEIGHT` or more (the solver reads float32) are split into 20-bit digits,
        one product each, shifted and summed."""
        weight = np.asarray(weight, dtype=np.int64)
        x = np.asarray(x, dtype=object)
        rows = x.reshape(-1, x.shape[-1])
        if weight.size and int(np.abs(weight).max()) >= MAX_WEIGHT:
            low = ((weight + (1 << 19)) % (1 << 20)) - (1 << 19)  # balanced digits: |low| <= 2**19
            high = (weight - low) >> 20
            out = self.add(self.matmul(rows, low), self.shift_left(self.matmul(rows, high), 20))
        else:
            out = self._solved(rows, weight)
        return np.asarray(out, dtype=object).reshape(x.shape[:-1] + weight.shape[1:])

    def _solved(self, rows: np.ndarray, weight: np.ndarray) -> np.ndarray:
        from da4ml.cmvm import solve
        from da4ml.types import QInterval

        fixed = self._trace.FixedVariable
        rows = np.asarray([[v if isinstance(v, fixed) else self._constant(int(v)) for v in row] for row in rows],
                          dtype=object)
        if rows.shape[0] == 1:
            arr = self._trace.FixedVariableArray(rows, hwconf=self.hwconf)
            return np.asarray((arr @ weight.astype(np.float64))._vars, dtype=object)
        qints = [QInterval(float(min(v.low for v in col)), float(max(v.high for v in col)),
                           float(min(v.step for v in col))) for col in rows.T]
        latencies = [float(max(v.latency for v in col)) for col in rows.T]
        program = solve(np.ascontiguousarray(weight.astype(np.float32)), qintervals=qints, latencies=latencies,
                        adder_size=self.hwconf.adder_size, carry_size=self.hwconf.carry_size)
        return np.asarray([np.asarray(program(list(row)), dtype=object) for row in rows], dtype=object)

    def add(self, a, b):
        return _elementwise(lambda u, v: u + v, a, b)

    def sub(self, a, b):
        return _elementwise(lambda u, v: u - v, a, b)

    def scale(self, x, factor):
        """``x * factor`` for integer constants (shifts and adds)."""
        return _elementwise(lambda u, k: u * float(k) if k else self._constant(0), x, _ints(factor))

    def shift_left(self, x, shift: int):
        """``x * 2**shift`` (``shift >= 0``): wiring only."""
        return _elementwise(lambda u: u * 2.0**shift, x) if shift else x

    def maximum(self, a, b):
        return _elementwise(lambda u, v: u.max_of(v) if hasattr(u, "max_of") else v.max_of(u), a, b)

    def minimum(self, a, b):
        return _elementwise(lambda u, v: u.min_of(v) if hasattr(u, "min_of") else v.min_of(u), a, b)

    def clamp(self, x, lo, hi):
        """``min(max(x, lo), hi)`` for integer bounds (scalars or arrays broadcast to ``x``)."""
        return _elementwise(lambda u, a, b: u.max_of(float(a)).min_of(float(b)), x, _ints(lo), _ints(hi))

    # -- rounding ----------------------------------------------------------------------------
    def floor_shift(self, x, shift: int):
        """``floor(x / 2**shift)``; a left shift for ``shift <= 0``."""
        if shift <= 0:
            return self.shift_left(x, -shift)
        return _elementwise(lambda u: _floor(u, shift), x)

    def round_shift(self, x, shift: int, mode: Rounding):
        """``R(x / 2**shift)``, ``R`` the QONNX mode: the floor quotient, plus one where the
        rounding table (:data:`..exact.rounding.ROUND_UP`) says so, from the remainder's bits."""
        if shift <= 0:
            return self.shift_left(x, -shift)
        return _elementwise(lambda u: self._round_one(u, shift, Rounding(mode)), x)

    def _round_one(self, v, shift: int, mode: Rounding):
        if v.low == v.high:  # a constant: da4ml folds it
            return self._constant(int(shift_round(np.array([int(v.low)]), shift, mode)[0]))
        q = _floor(v, shift)
        r = _remainder(v, q, shift)
        # the remainder's top bit (2r >= 2**shift) and whether a bit below it is set
        top = _floor(r, shift - 1) if shift > 1 else r
        below = _at_least(r.quantize(0, shift - 1, 0, "WRAP", "TRN"), 1) if shift > 1 else None
        above = BITS.and_(top, below) if below is not None else False
        at = top - above if below is not None else top
        inexact = top + below - above if below is not None else top
        return self._up(v, q, {Fact.ABOVE_HALF: lambda: above, Fact.AT_HALF: lambda: at,
                               Fact.INEXACT: lambda: inexact}, mode)

    def _rounded(self, v, q, r, divisor: int, mode: Rounding):
        """``R(v / divisor)`` from the floor quotient ``q`` and the remainder ``r`` in
        ``[0, divisor)``: plus one where the rounding table says so."""
        half = divisor // 2
        return self._up(v, q, {
            Fact.ABOVE_HALF: lambda: _at_least(r, half + 1),
            Fact.AT_HALF: lambda: _at_least(r, half) - _at_least(r, half + 1) if divisor % 2 == 0 else False,
            Fact.INEXACT: lambda: _at_least(r, 1),
        }, mode)

    def _up(self, v, q, facts: dict, mode: Rounding):
        """``q`` plus the rounding table's decision from the remainder's ``facts`` (the sign of
        ``v`` and the parity of ``q`` added here)."""
        facts = {**facts, Fact.NEGATIVE: lambda: v.is_negative(), Fact.ODD: lambda: q.quantize(0, 1, 0, "WRAP", "TRN")}
        up = round_up(mode, lambda f: facts[f](), BITS)
        if isinstance(up, bool) or up is None:
            return q + 1.0 if up else q
        return q + up

    def div_round(self, x, divisor: int, mode: Rounding):
        """``R(x / divisor)`` for a positive integer constant, ``R`` the QONNX mode:
        :meth:`round_shift` for a power of two, else the floor quotient by a reciprocal
        multiply-shift (exact on the variable's interval, :func:`_floor_div`) and the
        rounding table's facts of the remainder."""
        divisor = int(divisor)
        if divisor < 1:
            raise ValueError(f"div_round by {divisor}")
        if divisor & (divisor - 1) == 0:
            return self.round_shift(x, divisor.bit_length() - 1, mode)
        return _elementwise(lambda u: self._div_one(u, divisor, Rounding(mode)), x)

    def _div_one(self, v, divisor: int, mode: Rounding):
        if v.low == v.high:
            return self._constant(int(div_round(np.array([int(v.low)]), divisor, mode)[0]))
        q = _floor_div(v, divisor)
        r = (v - q * float(divisor)).quantize(0, (divisor - 1).bit_length(), 0, "WRAP", "TRN")  # in [0, divisor)
        return self._rounded(v, q, r, divisor, mode)

    def multiply_shift(self, x, mult, add, shift: int):
        """``floor((mult * x + add) / 2**shift)`` for integer constants (per element, broadcast)."""
        product = self.add(self.scale(x, mult), self.const(np.broadcast_to(_ints(add), np.shape(x))))
        return self.floor_shift(product, shift)

    def count_at_least(self, x, thresholds):
        """``#{k : x >= t[..., k]}`` per element (``thresholds``: ``x``'s shape + (K,))."""
        t = _ints(thresholds)
        out = np.empty(np.shape(x), dtype=object)
        for idx in np.ndindex(out.shape):
            v = x[idx]
            out[idx] = _tree(lambda a, b: a + b, [_at_least(v, k) for k in t[idx]]) if t[idx].size else self._constant(0)
        return out

    def lookup(self, x, table: np.ndarray, lo: int):
        """``table[x - lo]`` per element (``table``: integer codes for every ``x`` of the
        value's range; da4ml's table spans the variable's own interval, clipped into it)."""
        table = np.asarray(table, dtype=np.int64)

        def one(v):
            if v.low == v.high:
                return self._constant(int(table[min(max(int(v.low) - lo, 0), len(table) - 1)]))
            codes = np.arange(int(v.low), int(v.high) + 1, int(v.step))
            return v.lookup(table[np.clip(codes - lo, 0, len(table) - 1)].astype(np.float64))

        return _elementwise(one, x)

    # -- moving values ------------------------------------------------------------------------
    def gather(self, x, index: np.ndarray):
        """``x.ravel()[index]`` with ``-1`` for a constant zero (padding)."""
        flat = np.asarray(x, dtype=object).ravel()
        zero = self._constant(0)
        index = np.asarray(index, dtype=np.int64)
        out = np.empty(index.shape, dtype=object)
        out.ravel()[:] = [zero if i < 0 else flat[i] for i in index.ravel()]
        return out

    def reduce_sum(self, x, axis: int):
        return np.apply_along_axis(lambda v: _tree(lambda a, b: a + b, list(v)), axis, np.asarray(x, dtype=object))

    def reduce_max(self, x, axis: int):
        return np.apply_along_axis(lambda v: _tree(lambda a, b: a.max_of(b), list(v)), axis,
                                   np.asarray(x, dtype=object))

    def concat(self, xs: list, axis: int):
        return np.concatenate([np.asarray(x, dtype=object) for x in xs], axis=axis)


__all__ = ["BITS", "DaBuilder", "MAX_WEIGHT", "require_da4ml"]
