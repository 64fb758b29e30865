"""A monotone nonlinearity of a real-valued accumulator rounded by its Quant (compiler/ops/staircase.py)
and the exactly rounded float64 of a real line (compiler/exact/doubles.py).

- the float64 of ``a x + b`` is the correctly rounded value of the exact rational (ties included);
- the staircase equals its definition (the function of that float64, then the Quant) at every
  code of the range, per channel, for rising and falling lines, knees and clips, float-scale
  outputs; the onnxruntime reference (the binary search as ONNX ops) equals it;
- a function that is not monotone over the range, a range beyond what the compiler evaluates
  and constants too wide for one rounding are refused in one line.
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.exact.doubles import line_fits, nearest_doubles
from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import quant, staircase
from tessera.compiler.ops.lut import function_codes
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model


def _float32(r: random.Random, lo: float, hi: float) -> Fraction:
    return Fraction(float(np.float32(r.uniform(lo, hi))))


def test_nearest_doubles_round_the_exact_line_once():
    r = random.Random(3)
    checked = 0
    for _ in range(400):
        a = _float32(r, -1, 1) * _float32(r, 0, 1e-3)  # a product of two float32 scales: 48 bits
        b = _float32(r, -3, 3) * Fraction(1, 2 ** r.randint(0, 12))
        codes = np.array([r.randint(-2**22, 2**22) for _ in range(64)] + [0, 1, -1], dtype=np.int64)
        assert line_fits(a, b, int(codes.min()), int(codes.max()))
        assert np.array_equal(nearest_doubles(a, b, codes), [float(a * int(x) + b) for x in codes])
        checked += 1
    # exact halfway cases round to even: 2**53 + 1 and 2**53 + 3 are ties
    a, b = Fraction(1), Fraction(2**53)
    assert nearest_doubles(a, b, np.array([1, 3])).tolist() == [float(2**53), float(2**53 + 4)]
    assert checked == 400


def test_a_line_too_wide_for_one_rounding_does_not_fit():
    a = Fraction(2**60 + 1, 2**200)
    b = Fraction(1, 2**300)
    assert not line_fits(a, b, -2**20, 2**20)
    with pytest.raises(ValueError):
        nearest_doubles(a, b, np.array([5]))


def _definition(attrs: staircase.Attrs, codes: np.ndarray, chans: int) -> np.ndarray:
    """The function of the exactly rounded input, then the Quant, element by element."""
    lines = attrs.lines if len(attrs.lines) > 1 else attrs.lines * chans
    out = np.empty_like(codes)
    for c in range(chans):
        out[:, c] = function_codes(attrs.function, attrs.out, lines[c].values(codes[:, c].ravel()), attrs.mult,
                                   attrs.params).reshape(codes[:, c].shape)
    return out


CASES = [  # (function, params, output type, mult, lines as (a, b, knee, lo, hi))
    ("tanh", (), quant.Attrs(FixedType(12, 11, True), False, "ROUND"), 1,
     [(Fraction(3, 1024) * Fraction(float(np.float32(0.7))), Fraction(float(np.float32(1 / 7))), 1, None, None)]),
    ("sigmoid", (), quant.Attrs(FixedType(8, 8, False), False, "FLOOR"), 1,
     [(Fraction(-5, 1024), Fraction(0), 1, None, None), (Fraction(float(np.float32(2 / 331))), Fraction(-1, 4), 1, None,
                                                           None)]),
    ("tanh", (), quant.Attrs(FixedType(10, 9, True), True, "HALF_UP"), 3,
     [(Fraction(1, 512), Fraction(0), Fraction(float(np.float32(0.2))), None, None),
      (Fraction(-1, 256), Fraction(1, 2), Fraction(float(np.float32(0.2))), Fraction(-1, 2), Fraction(3, 4))]),
    ("softsign", (), quant.Attrs(FixedType(6, 5, True), False, "ROUND"), 1,
     [(Fraction(1, 128), Fraction(0), 1, Fraction(0), None)]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_staircase_is_its_definition_at_every_code(make_graph, make_type, case):
    function, params, out, mult, lines = CASES[case]
    lines = tuple(staircase.Line(a, b, Fraction(k), lo, hi) for a, b, k, lo, hi in lines)
    x = make_type(13, 0, True, (len(lines), 3))
    attrs = staircase.Attrs(function, out, lines, params, mult)
    g = make_graph(x, ("staircase", attrs))
    every = np.arange(x.lo, x.hi + 1, dtype=np.int64)
    codes = np.stack([np.stack([np.roll(every, k) for k in range(3)], axis=-1)] * len(lines), axis=1)
    want = _definition(attrs, codes, len(lines))
    assert np.array_equal(run_ir(g, codes), want)
    assert np.array_equal(OrtReference(reference_model(g)).run(codes), want)
    y = g.values[g.output]
    assert (y.lo, y.hi) == (int(want.min()), int(want.max()))


def test_a_falling_line_reads_its_codes_negated(make_type):
    x = make_type(10, 0, True, (2,))
    attrs = staircase.Attrs("tanh", quant.Attrs(FixedType(8, 7, True), False, "ROUND"),
                            (staircase.Line(Fraction(-1, 64), Fraction(0)),))
    st = staircase.steps(attrs, x)
    assert st.signs.tolist() == [-1] and st.base.tolist() == [int(function_codes("tanh", attrs.out, np.array([-511 / 64]))[0])]
    assert st.thresholds.shape[1] + 1 == 1 << st.search_steps


def test_a_function_that_is_not_monotone_over_the_range_is_refused(make_graph, make_type):
    # HardSwish dips below zero between -3 and 0: over [-4, 4] it falls, then rises
    attrs = staircase.Attrs("hardswish", quant.Attrs(FixedType(8, 5, True), False, "ROUND"),
                            (staircase.Line(Fraction(1, 64), Fraction(0)),))
    with pytest.raises(UnsupportedModelError, match=r"node 'n0_staircase': hardswish .* is not monotone over the reachable codes"):
        make_graph(make_type(9, 0, True, (4,)), ("staircase", attrs))


def test_a_line_of_no_dyadic_rational_is_refused(make_graph, make_type):
    attrs = staircase.Attrs("tanh", quant.Attrs(FixedType(8, 7, True), False, "ROUND"),
                            (staircase.Line(Fraction(1, 3 * 64), Fraction(0)),))
    with pytest.raises(UnsupportedModelError, match=r"has a denominator that is no power of 2: no exact float64"):
        make_graph(make_type(9, 0, True, (4,)), ("staircase", attrs))


def test_a_range_beyond_what_the_compiler_evaluates_is_refused(make_graph, make_type):
    attrs = staircase.Attrs("tanh", quant.Attrs(FixedType(8, 7, True), False, "ROUND"),
                            (staircase.Line(Fraction(1, 2**20), Fraction(0)),))
    with pytest.raises(UnsupportedModelError, match=r"tanh of an accumulator of 268435456 codes x 1 channels is beyond"):
        make_graph(make_type(28, 0, True, (4,)), ("staircase", attrs))
