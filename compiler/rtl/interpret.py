"""An exact interpreter of da4ml's traced programs, on integers, vectorized over samples:
the executor of the check (:mod:`.check`) that a design equals the exact semantics.

It runs a ``CombLogic`` (or a pipeline's stages, one after another) as da4ml 0.6.0's
reference interpreter (``CombLogic.__call__``, one sample at a time in Python floats) defines
each opcode, but on integer arrays: every value is held as ``value * 2**G`` (``G``: the finest
fractional bit any op of the program has), in int64 where every value of the program fits in
62 bits and in Python integers otherwise.  It does not use da4ml's compiled interpreter
(``predict``), which wraps signed values wider than 32 bits wrongly: it refused correct
designs of wide multiply-shifts (tests/rtl/test_interpret.py keeps a program that shows it).
"""

from __future__ import annotations

import numpy as np


def _kif(qint) -> tuple[int, int, int]:
    from da4ml.types import minimal_kif

    k, i, f = minimal_kif(qint)
    return int(k), int(i), int(f)


def _frac(step: float) -> int:
    """Fractional bits of a power-of-two step (0 for a zero step)."""
    return int(-np.log2(step)) if step > 0 else 0


def _twos(t, bits: int, signed: int):
    """The integer ``t``'s low ``bits`` bits read as a ``bits``-bit number, two's complement when ``signed``."""
    if bits <= 0:
        return t * 0
    bias = (1 << (bits - 1)) * signed
    return (t + bias) % (1 << bits) - bias


class _Units:
    """Integers ``N = value * 2**G`` of one program's values."""

    def __init__(self, g: int, exact_int64: bool):
        self.g = g
        self.dtype = np.int64 if exact_int64 else object

    def scale(self, n, shift: int):
        """``n * 2**shift``, exactly (a right shift must drop no set bit)."""
        if shift >= 0:
            return n * (1 << shift)
        div = 1 << -shift
        if np.any(n % div):
            raise AssertionError("a value off the program's grid")
        return n // div

    def floor_to(self, n, f: int):
        """``floor(value * 2**f)`` (``f <= G``)."""
        return n // (1 << (self.g - f))

    def at(self, t, f: int):
        """The units of ``t * 2**-f``."""
        return t * (1 << (self.g - f))


def _units(programs) -> _Units:
    """The common units of ``programs``: the finest step, and int64 when every value fits."""
    g, peak = 0, 1.0
    for program in programs:
        for op in program.ops:
            g = max(g, _frac(op.qint.step))
            peak = max(peak, abs(op.qint.min), abs(op.qint.max))
    return _Units(g, peak * 2.0 ** (g + 4) < 2.0**62)


def _msb_mux(ops, op, buf, u: _Units):
    id_c = op.data & 0xFFFFFFFF
    shift = (op.data >> 32) & 0xFFFFFFFF
    shift = shift if shift < 0x80000000 else shift - 0x100000000
    qk = ops[id_c].qint
    if qk.min < 0:
        take0 = buf[id_c] < 0
    else:  # the key's top bit: value >= 2**(i - 1), i.e. N >= 2**(i - 1 + G)
        _, i, _ = _kif(qk)
        e = i - 1 + u.g
        take0 = buf[id_c] >= (1 << e) if e >= 0 else buf[id_c] * (1 << -e) >= 1
    v1 = -buf[op.id1] if op.opcode == -6 else buf[op.id1]
    return np.where(take0, buf[op.id0], u.scale(v1, shift))


def _unary_bit(ops, op, buf, u: _Units):
    qf = ops[op.id0].qint
    v = buf[op.id0] if op.opcode == 9 else -buf[op.id0]
    k, i, f = _kif(qf) if qf.min != 0 or qf.max != 0 else (0, 1, 0)
    a = u.scale(v, _frac(qf.step) - u.g)  # round(v / step): exact on the grid
    if op.data == 0:
        kk, ii, ff = _kif(op.qint)
        return u.at(_twos((~a) % (1 << (k + i + f)), kk + ii + ff, kk), ff)
    if op.data == 1:
        return u.at((a != 0).astype(u.dtype), 0)
    want = qf.max if qf.min >= 0 else -1
    return u.at((a == want).astype(u.dtype), 0)


def _binary_bit(ops, op, buf, u: _Units):
    inv0, inv1 = (op.data >> 32) & 1, (op.data >> 33) & 1
    shift = ((int(op.data) & 0xFFFFFFFF) + (1 << 31)) % (1 << 32) - (1 << 31)
    v0 = -buf[op.id0] if inv0 else buf[op.id0]
    v1 = u.scale(-buf[op.id1] if inv1 else buf[op.id1], shift)
    step = min(ops[op.id0].qint.step, ops[op.id1].qint.step * 2.0**shift)
    a, b = (u.scale(v, _frac(step) - u.g) for v in (v0, v1))
    code = (op.data >> 56) & 0xFF
    t = a & b if code == 0 else a | b if code == 1 else a ^ b
    k, i, f = _kif(op.qint)
    return u.at(_twos(t, k + i + f, k), f)


def _lookup(program, op, buf, u: _Units):
    table = program.lookup_tables[op.data]
    qin = program.ops[op.id0].qint
    index = (buf[op.id0] - int(round(qin.min * 2**u.g))) // int(round(qin.step * 2**u.g))
    k, i, f = (int(v) for v in table.spec.out_kif)
    codes = np.asarray(table.table, dtype=np.int64)[np.asarray(index, dtype=np.int64)].astype(u.dtype)
    return u.at(_twos(codes, k + i + f, k), f)


def _step(program, op, buf, inp, u: _Units):
    """One op's values (``buf``: the values before it)."""
    ops, c = program.ops, op.opcode
    if c == -1:
        return inp[op.id0]
    if c in (0, 1):
        term = u.scale(buf[op.id1], op.data)
        return buf[op.id0] + term if c == 0 else buf[op.id0] - term
    if c in (2, -2):
        _, i, f = _kif(op.qint)
        v = buf[op.id0] if c == 2 else -buf[op.id0]
        t = u.floor_to(np.maximum(v, 0), f) % (1 << (i + f)) if i + f > 0 else u.floor_to(v, f) * 0
        return u.at(t, f)
    if c in (3, -3):
        k, i, f = _kif(op.qint)
        v = buf[op.id0] if c == 3 else -buf[op.id0]
        return u.at(_twos(u.floor_to(v, f), k + i + f, k), f)
    if c == 4:
        return buf[op.id0] + u.at(int(op.data), _frac(op.qint.step))
    if c == 5:
        return np.full(len(inp[0]) if len(inp) else 1, u.at(int(op.data), _frac(op.qint.step)), dtype=u.dtype)
    if c in (6, -6):
        return _msb_mux(ops, op, buf, u)
    if c == 7:
        return u.scale(buf[op.id0] * buf[op.id1], -u.g)
    if c == 8:
        return _lookup(program, op, buf, u)
    if c in (9, -9):
        return _unary_bit(ops, op, buf, u)
    if c == 10:
        return _binary_bit(ops, op, buf, u)
    raise ValueError(f"da4ml opcode {c} is unknown to Tessera's interpreter")


def _last_uses(program) -> list[int]:
    """For each op, the last op that reads it (outputs: past the end)."""
    last = list(range(len(program.ops)))
    for j, op in enumerate(program.ops):
        reads = [op.id0, op.id1] + ([op.data & 0xFFFFFFFF] if abs(op.opcode) == 6 else [])
        for r in reads:
            if 0 <= r < j and op.opcode != -1:
                last[r] = j
    for idx in program.out_idxs:
        if idx >= 0:
            last[idx] = len(program.ops)
    return last


def _run(program, inp: list, u: _Units) -> list:
    """One CombLogic on ``inp`` (one array per input, in units) -> its outputs (in units);
    each op's values are dropped after the last op that reads them."""
    inp = [u.scale(v, s) for v, s in zip(inp, program.inp_shifts)]
    buf: list = []
    free: dict[int, list[int]] = {}
    for i, j in enumerate(_last_uses(program)):
        free.setdefault(j, []).append(i)
    for j, op in enumerate(program.ops):
        buf.append(_step(program, op, buf, inp, u))
        for i in free.get(j, ()):
            buf[i] = None
    n = len(inp[0]) if inp else 0
    zero = np.zeros(n, dtype=u.dtype)
    return [zero if idx < 0 else u.scale(-buf[idx] if neg else buf[idx], shift)
            for idx, shift, neg in zip(program.out_idxs, program.out_shifts, program.out_negs)]


def run_program(codes: np.ndarray, *programs) -> np.ndarray:
    """``programs`` (a CombLogic, or a pipeline's stages in order) on integer input codes
    ``(N, n_in)`` -> their integer output codes ``(N, n_out)``."""
    u = _units(programs)
    codes = np.asarray(codes, dtype=np.int64).reshape(len(codes), -1)
    values = [u.at(codes[:, j].astype(u.dtype), 0) for j in range(codes.shape[1])]
    for program in programs:
        values = _run(program, values, u)
    out = np.stack([np.asarray(u.scale(v, -u.g)) for v in values], axis=1) if values else np.zeros((len(codes), 0))
    return out.astype(np.int64)


__all__ = ["run_program"]
