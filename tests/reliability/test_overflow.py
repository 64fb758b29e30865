"""Overflow proof check: property tests that drive weights and inputs to their extreme codes
and compare every op's int64 integer semantics with arbitrary-precision Python integers.

For each generated case (hypothesis, derandomized so CI is reproducible):

* the worst-case inputs of every output element are built (``hi`` where the element's
  coefficient is positive, ``lo`` where negative, and the reverse);
* an independent oracle computes the op on Python ``int`` (object arrays: no width limit);
* the int64 reference equals the oracle (no int64 overflow inside the reference), every
  value lies in the inferred code range, the inferred type holds that range, and for the
  linear ops the range is attained (the derived accumulator is no wider than needed) and
  contains every partial sum in hls4ml's accumulation order (so the HLS accumulator of that
  width cannot overflow mid-sum either);
* recurrent cells run on an arbitrary-precision back end that records every named
  intermediate, each of which must lie in the interval the HLS type was derived from.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.ir.types import MAX_WIDTH, FixedType, TensorType
from tessera.compiler.ops import conv, convtranspose, dense, leakyrelu, merge, quant
from tessera.compiler.reference.interpret import run_ir

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def full(width, frac, signed, shape) -> TensorType:
    t = FixedType(width, frac, signed)
    return TensorType(tuple(shape), t, t.min_code, t.max_code)


def edge(lo: int, hi: int):
    """Integers in [lo, hi], the bounds themselves drawn often."""
    return st.one_of(st.sampled_from([lo, hi]), st.integers(lo, hi))


@st.composite
def fixed(draw, max_width=16):
    return FixedType(draw(edge(1, max_width)), draw(st.integers(-6, 14)), draw(st.booleans()))


@st.composite
def codes(draw, shape, ftype: FixedType):
    """Integer codes of ``ftype``, mostly its extremes."""
    lo, hi = ftype.min_code, ftype.max_code
    n = int(np.prod(shape))
    pick = draw(st.lists(st.sampled_from(["lo", "hi", "any"]), min_size=n, max_size=n))
    seed = draw(st.integers(0, 2**32 - 1))
    rnd = np.random.default_rng(seed).integers(lo, hi, size=n, endpoint=True)
    out = np.array([lo if p == "lo" else hi if p == "hi" else int(r) for p, r in zip(pick, rnd)], dtype=np.int64)
    return out.reshape(shape)


def obj(a) -> np.ndarray:
    return np.asarray(a, dtype=np.int64).astype(object)


def check_range(values, t: TensorType) -> None:
    v = np.asarray(values, dtype=object)
    assert t.ftype.min_code <= t.lo and t.hi <= t.ftype.max_code, t
    assert t.ftype.width <= MAX_WIDTH
    assert v.min() >= t.lo and v.max() <= t.hi, (v.min(), v.max(), t)


def worst_case_inputs(g, t_in: TensorType) -> np.ndarray:
    """For a linear op ``y = M x + c`` (codes): per output element, the input maximizing and
    the one minimizing it.  ``M`` is measured with impulses through the op (the construction
    of test inputs only; the values are then checked against the independent oracle)."""
    n_in = int(np.prod(t_in.shape))
    v = t_in.hi if t_in.hi != 0 else t_in.lo
    impulses = np.zeros((n_in + 1, n_in), dtype=np.int64)
    impulses[np.arange(n_in), np.arange(n_in)] = v
    y = run_ir(g, impulses.reshape(-1, *t_in.shape)).reshape(n_in + 1, -1)
    m = (y[:-1] - y[-1]) // v  # (n_in, n_out)
    hi_in = np.where(m.T > 0, t_in.hi, t_in.lo)
    lo_in = np.where(m.T > 0, t_in.lo, t_in.hi)
    return np.concatenate([hi_in, lo_in]).reshape(-1, *t_in.shape)


def check_linear(g, oracle, partial_sums=None, tight=True) -> None:
    t_in, out = g.values[g.input], g.values[g.output]
    x = worst_case_inputs(g, t_in)
    want = oracle(obj(x))
    got = run_ir(g, x)
    assert np.array_equal(got.astype(object), want), "int64 reference differs from the arbitrary-precision oracle"
    check_range(want, out)
    if tight:
        assert max(want.max(), 0) == out.hi and min(want.min(), 0) == out.lo, "inferred range is not attained"
    if partial_sums is not None:
        check_range(partial_sums(obj(x)), out)


def bias_of(attrs, facc: int, n_out: int) -> np.ndarray:
    if attrs.bias is None:
        return np.zeros(n_out, dtype=object)
    return obj(attrs.bias) * (2 ** (facc - attrs.btype.frac))


# --- dense ------------------------------------------------------------------------------


@SETTINGS
@given(data=st.data())
def test_dense_accumulator_never_overflows(make_graph, data):
    n_in, n_out = data.draw(st.integers(1, 10)), data.draw(st.integers(1, 4))
    xt, wt = data.draw(fixed()), data.draw(fixed(12))
    w = data.draw(codes((n_in, n_out), wt))
    bias, bt = None, None
    if data.draw(st.booleans()):
        bt = data.draw(fixed(16))
        bias = data.draw(codes((n_out,), bt))
    g = make_graph(full(xt.width, xt.frac, xt.signed, (n_in,)), ("dense", dense.Attrs(w, wt, bias, bt)))
    out = g.values[g.output]
    shift = out.ftype.frac - xt.frac - wt.frac
    b = bias_of(g.nodes[0].attrs, out.ftype.frac, n_out)

    def oracle(x):
        return x.dot(obj(w)) * (2**shift) + b

    def partial_sums(x):  # hls4ml: acc = bias; acc += x[i] * w[i] for i in order
        terms = x[:, :, None] * obj(w)[None] * (2**shift)
        return np.cumsum(terms, axis=1) + b

    check_linear(g, oracle, partial_sums)


# --- convolutions -----------------------------------------------------------------------


def conv_oracle(x, w, strides, pads, out_shape):
    """Direct convolution on Python ints: one tensordot per kernel offset."""
    n = w.ndim - 2
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple((pads[i], pads[n + i]) for i in range(n)), constant_values=0)
    acc = np.zeros((x.shape[0], w.shape[0], *out_shape), dtype=object)
    for k in itertools.product(*(range(s) for s in w.shape[2:])):
        sl = tuple(slice(k[i], k[i] + strides[i] * (out_shape[i] - 1) + 1, strides[i]) for i in range(n))
        part = np.tensordot(xp[(slice(None), slice(None)) + sl], w[(slice(None), slice(None)) + k], axes=([1], [1]))
        acc += np.moveaxis(part, -1, 1)
    return acc


def convtranspose_oracle(x, w, strides, pads, out_shape):
    """Direct transposed convolution on Python ints: scatter every input by every tap."""
    n = w.ndim - 2
    ins = x.shape[2:]
    full_shape = tuple(strides[i] * (ins[i] - 1) + w.shape[2 + i] for i in range(n))
    acc = np.zeros((x.shape[0], w.shape[1], *full_shape), dtype=object)
    for k in itertools.product(*(range(s) for s in w.shape[2:])):
        sl = tuple(slice(k[i], k[i] + strides[i] * (ins[i] - 1) + 1, strides[i]) for i in range(n))
        part = np.tensordot(x, w[(slice(None), slice(None)) + k], axes=([1], [0]))  # (N, *ins, c_out)
        acc[(slice(None), slice(None)) + sl] += np.moveaxis(part, -1, 1)
    crop = tuple(slice(pads[i], pads[i] + out_shape[i]) for i in range(n))
    return acc[(slice(None), slice(None)) + crop]


@SETTINGS
@given(data=st.data(), rank=st.sampled_from([1, 2, 3]), transposed=st.booleans())
def test_conv_accumulator_never_overflows(make_graph, data, rank, transposed):
    cin, cout = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(rank))
    strides = tuple(data.draw(st.integers(1, 2)) for _ in range(rank))
    pads = tuple(data.draw(st.integers(0, k - 1)) for k in kernel * 2)
    spatial = tuple(data.draw(st.integers(max(k, 2), 4 if rank == 3 else 5)) for k in kernel)
    xt, wt = data.draw(fixed(12)), data.draw(fixed(10))
    wshape = (cin, cout, *kernel) if transposed else (cout, cin, *kernel)
    w = data.draw(codes(wshape, wt))
    bt = data.draw(fixed(14))
    bias = data.draw(codes((cout,), bt)) if data.draw(st.booleans()) else None
    mod = convtranspose if transposed else conv
    g = make_graph(full(xt.width, xt.frac, xt.signed, (cin, *spatial)),
                   ("convtranspose" if transposed else "conv", mod.Attrs(w, wt, bias, bt if bias is not None else None,
                                                                         strides, pads)))
    out = g.values[g.output]
    shift = out.ftype.frac - xt.frac - wt.frac
    b = bias_of(g.nodes[0].attrs, out.ftype.frac, cout).reshape(cout, *(1,) * rank)
    fn = convtranspose_oracle if transposed else conv_oracle

    def oracle(x):
        return fn(x, obj(w), strides, pads, out.shape[1:]) * (2**shift) + b

    # the range is derived from whole windows: attained when some output's window lies
    # inside the unpadded input (else it is a safe over-estimate)
    interior = not transposed and all(
        any(0 <= o * strides[i] - pads[i] and o * strides[i] - pads[i] + kernel[i] <= spatial[i]
            for o in range(out.shape[1 + i])) for i in range(rank))
    check_linear(g, oracle, tight=interior)


# --- elementwise ------------------------------------------------------------------------


def _sign(q) -> int:
    return -1 if q < 0 else 1


ROUND = {"ROUND": round, "HALF_EVEN": round,  # Fraction rounds half to even
         "FLOOR": math.floor, "CEIL": math.ceil, "DOWN": math.trunc,
         "UP": lambda q: _sign(q) * math.ceil(abs(q)),
         "HALF_UP": lambda q: _sign(q) * math.floor(abs(q) + Fraction(1, 2)),
         "HALF_DOWN": lambda q: _sign(q) * math.ceil(abs(q) - Fraction(1, 2))}


def quant_oracle(code: int, in_frac: int, q: quant.Attrs) -> int:
    """QONNX Quant on one exact rational: round, then clip to the quantizer's codes."""
    v = Fraction(int(code)) * Fraction(2) ** (q.out.frac - in_frac)
    return min(max(ROUND[q.rounding](v), q.qmin), q.qmax)


def test_quant_oracle_rounding_modes():
    """The oracle's rounding modes themselves on 2.5, 2.75, -2.5, -2.75, 4.5."""
    want = {"ROUND": [2, 3, -2, -3, 4], "HALF_EVEN": [2, 3, -2, -3, 4], "FLOOR": [2, 2, -3, -3, 4],
            "CEIL": [3, 3, -2, -2, 5], "DOWN": [2, 2, -2, -2, 4], "UP": [3, 3, -3, -3, 5],
            "HALF_UP": [3, 3, -3, -3, 5], "HALF_DOWN": [2, 3, -2, -3, 4]}
    assert set(want) == set(ROUND)
    for mode, expected in want.items():
        q = quant.Attrs(FixedType(8, 0, True), False, mode)
        assert [quant_oracle(c, 2, q) for c in (10, 11, -10, -11, 18)] == expected, mode


@SETTINGS
@given(data=st.data(), mode=st.sampled_from(sorted(ROUND)))
def test_requant_never_overflows(make_graph, data, mode):
    """Wide inputs (up to 52 bits) shifted by up to 40 bits either way, every rounding mode."""
    xt = FixedType(data.draw(edge(1, MAX_WIDTH)), data.draw(st.integers(-10, 40)), data.draw(st.booleans()))
    out = FixedType(data.draw(edge(1, 24)), xt.frac + data.draw(edge(-80, 80)), data.draw(st.booleans()))
    narrow = data.draw(st.booleans()) and out.signed and out.width > 1
    q = quant.Attrs(out, narrow, mode)
    x = data.draw(codes((8,), xt))
    x[:2] = (xt.min_code, xt.max_code)
    g = make_graph(full(xt.width, xt.frac, xt.signed, (8,)), ("requant", q))
    got = run_ir(g, x[None])[0]
    want = np.array([quant_oracle(c, xt.frac, q) for c in x], dtype=object)
    assert np.array_equal(got.astype(object), want), (got, want)
    check_range(want, g.values[g.output])


@SETTINGS
@given(data=st.data())
def test_leakyrelu_and_add_never_overflow(make_dag, data):
    xt = FixedType(data.draw(st.integers(1, 24)), data.draw(st.integers(-6, 20)), True)
    alpha = leakyrelu.Attrs(data.draw(st.integers(-(1 << 12), 1 << 12)), data.draw(st.integers(0, 16)))
    rt = FixedType(data.draw(st.integers(1, 24)), data.draw(st.integers(-6, 20)), data.draw(st.booleans()))
    g = make_dag(full(xt.width, xt.frac, xt.signed, (6,)),
                 [("lr", "leakyrelu", ["x"], alpha), ("r", "relu", ["x"], None),
                  ("rq", "requant", ["r"], quant.Attrs(rt, False, "ROUND")), ("sum", "add", ["lr", "rq"], merge.Attrs())])
    x = data.draw(codes((6,), xt))
    x[:2] = (xt.min_code, xt.max_code)
    env = {"lr": g.values["lr"], "rq": g.values["rq"], "sum": g.values["sum"]}
    got = run_ir(g, x[None])[0]
    lr = [int(c) * (2**alpha.alpha_frac) if c >= 0 else int(c) * alpha.alpha_code for c in x]
    rq = [quant_oracle(max(int(c), 0), xt.frac, quant.Attrs(rt, False, "ROUND")) for c in x]
    f = env["sum"].ftype.frac
    want = np.array([a * 2 ** (f - env["lr"].ftype.frac) + b * 2 ** (f - env["rq"].ftype.frac) for a, b in zip(lr, rq)],
                    dtype=object)
    check_range(np.array(lr, dtype=object), env["lr"])
    assert np.array_equal(got.astype(object), want)
    check_range(want, env["sum"])
    # the worst case of the sum: both operands at their extremes of the same sign
    assert env["sum"].hi >= max(want) and env["sum"].lo <= min(want)


# --- recurrent cells ----------------------------------------------------------------------


class ExactArith:
    """Arbitrary-precision back end of the cell programs: Python ints in object arrays;
    records the reached range of every named intermediate."""

    def __init__(self):
        self.reached: dict[str, tuple[int, int]] = {}

    def record(self, name, x):
        lo, hi = int(np.min(x.v)), int(np.max(x.v))
        old = self.reached.get(name, (lo, hi))
        self.reached[name] = (min(old[0], lo), max(old[1], hi))

    def const(self, c):
        return obj(c)

    def matmul(self, x, w):
        return np.asarray(x, dtype=object).dot(obj(w).T)

    def conv(self, x, w):
        k = w.shape[-1]
        p = k // 2
        return conv_oracle(np.asarray(x, dtype=object), obj(w), (1, 1), (p, p, p, p), x.shape[2:])

    def add(self, a, b):
        return a + b

    def mul(self, a, b):
        return a * b

    def shl(self, a, k):
        return a * (2**k)

    def requant(self, a, in_frac, q):
        return np.vectorize(lambda c: quant_oracle(c, in_frac, q), otypes=[object])(a)

    def lut(self, a, table, lo):
        idx = np.asarray(a, dtype=object) - lo
        assert idx.min() >= 0 and idx.max() < len(table), "table index out of the table"
        return obj(table)[idx.astype(np.int64)]


@pytest.mark.parametrize("op", ["lstm", "gru", "convlstm"])
@pytest.mark.parametrize("kind", ["binary", "ternary", "quaternary", "int8"])
def test_recurrent_intermediates_stay_in_their_types(make_graph, make_type, rnn_builders, op, kind):
    """Extreme input sequences (all lo, all hi, alternating, random extremes) through the
    cell on Python ints: every named intermediate stays within the interval its HLS type
    was derived from, and the int64 reference equals the exact run."""
    from tessera.compiler.ops import OPS
    from tessera.compiler.ops.cells.program import Fx

    rng = np.random.default_rng(hash((op, kind)) % 2**32)
    if op == "convlstm":
        attrs = rnn_builders[op](rng, 2, 3, kind=kind, forecaster_steps=2)
        shape = (3, 2, 4, 4)
    else:
        attrs = rnn_builders[op](rng, 5, 4, kind)
        shape = (6, 5)
    g = make_graph(make_type(8, 6, True, shape), (op, attrs))
    t_in = g.values[g.input]
    n = 12
    x = np.where(rng.random((n, *shape)) < 0.5, t_in.lo, t_in.hi)
    x[0], x[1] = t_in.lo, t_in.hi
    x[2] = np.where(np.arange(shape[0]).reshape(-1, *(1,) * (len(shape) - 1)) % 2 == 0, t_in.lo, t_in.hi)
    cell = OPS[op]
    A = ExactArith()
    steps = [Fx(obj(x[:, t]), t_in.ftype.frac) for t in range(shape[0])]
    if op == "convlstm":  # encoder then forecaster, recorded under their own names
        from tessera.compiler.ops.cells.program import Prefixed
        from tessera.compiler.ops.convlstm import cell_step, handover

        enc, fc = attrs.encoder, attrs.forecaster
        zeros = np.zeros((n, enc.hidden, *shape[2:]), dtype=object)
        state = [Fx(zeros, enc.out.out.frac), Fx(zeros.copy(), enc.cell.out.frac)]
        for xt in steps:
            state = cell_step(Prefixed(A, "enc_"), enc, xt, state)
        state = handover(A, enc, fc, state)
        hs = []
        for _ in range(attrs.steps_out):
            state = cell_step(Prefixed(A, "fc_"), fc, None, state)
            hs.append(state[0])
    else:
        hs = cell._run(A, attrs, steps, cell._initial(attrs, [], lambda v: np.broadcast_to(obj(v), (n, *v.shape)).copy()))
    want = np.stack([h.v for h in hs], axis=1) if attrs.return_sequences else hs[-1].v
    assert np.array_equal(run_ir(g, x).astype(object), want)
    ranges = cell.analyze(attrs, t_in).ranges
    assert A.reached and set(A.reached) <= set(ranges), set(A.reached) - set(ranges)
    for name, (lo, hi) in A.reached.items():
        rlo, rhi = ranges[name]
        assert rlo <= lo and hi <= rhi, (name, (lo, hi), (rlo, rhi))



@SETTINGS
@given(data=st.data(), rank=st.sampled_from([1, 2, 3]), mode=st.sampled_from(["ROUND", "FLOOR", "HALF_UP", "DOWN"]))
def test_avgpool_never_overflows(make_graph, data, rank, mode):
    """The window sum (up to 40-bit inputs) and its scaling by the output's grid, exact."""
    from tessera.compiler.ops import avgpool

    kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(rank))
    strides = tuple(data.draw(st.integers(1, 2)) for _ in range(rank))
    pads = tuple(data.draw(st.integers(0, k // 2)) for k in kernel * 2)
    spatial = tuple(data.draw(st.integers(k, 4)) for k in kernel)
    xt = FixedType(data.draw(edge(1, 40)), data.draw(st.integers(-8, 30)), data.draw(st.booleans()))
    out = FixedType(data.draw(edge(2, 24)), xt.frac + data.draw(edge(-64, 64)), True)
    attrs = avgpool.Attrs(kernel, strides, pads, data.draw(st.booleans()), quant.Attrs(out, False, mode))
    try:
        g = make_graph(full(xt.width, xt.frac, xt.signed, (2, *spatial)), ("avgpool", attrs))
    except UnsupportedModelError as exc:  # refused, naming the node: never a wrong result
        assert "n0_avgpool" in str(exc) and "int64" in str(exc)
        assert (int(np.prod(kernel)) << xt.width).bit_length() + abs(out.frac - xt.frac) > 62
        return
    x = np.stack([np.full((2, *spatial), xt.min_code), np.full((2, *spatial), xt.max_code),
                  data.draw(codes((2, *spatial), xt))])
    got = run_ir(g, x)
    osp = g.values[g.output].shape[1:]
    padded = np.pad(obj(x), ((0, 0), (0, 0)) + tuple((pads[i], pads[rank + i]) for i in range(rank)))
    inside = np.pad(np.ones(spatial, dtype=np.int64), tuple((pads[i], pads[rank + i]) for i in range(rank)))
    want = np.empty(got.shape, dtype=object)
    for o in itertools.product(*(range(s) for s in osp)):
        win = tuple(slice(o[i] * strides[i], o[i] * strides[i] + kernel[i]) for i in range(rank))
        count = int(np.prod(kernel)) if attrs.count_include_pad else int(inside[win].sum())
        for n_, c in itertools.product(range(len(x)), range(2)):
            total = int(padded[(n_, c) + win].sum())
            want[(n_, c) + o] = min(max(
                ROUND[mode](Fraction(total, count) * Fraction(2) ** (out.frac - xt.frac)), attrs.out.qmin), attrs.out.qmax)
    assert np.array_equal(got.astype(object), want)
    check_range(want, g.values[g.output])
