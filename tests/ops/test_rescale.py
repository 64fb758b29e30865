"""The exact requantization primitive (compiler/exact/requant.py) and its op (compiler/ops/rescale.py).

- thresholds and the proven multiply-shift equal the exact rational definition on every
  integer of the domain, for every rounding mode, bipolar steps, negative and zero slopes,
  ties, and float32-derived slopes (checked exhaustively, not sampled);
- a multiply-shift that is off by one somewhere fails the proof;
- the op's integer semantics equal the exact onnxruntime reference (per-tensor and
  per-channel), and its inferred range is the exact one.
"""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from tessera.compiler.ir.types import TensorType
from tessera.compiler.ops import rescale
from tessera.compiler.exact.requant import (MultiplyShift, Step, apply_thresholds, float_thresholds, multiply_shift, prove,
                                         thresholds)
from tessera.compiler.exact.rounding import Rounding
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes


def _random_step(r: random.Random) -> Step:
    mode = r.choice(list(Rounding))
    if r.random() < 0.15:
        return Step(Fraction(r.randint(-9, 9), r.randint(1, 40)), Fraction(r.randint(-30, 30), r.choice([1, 2, 3])), mode,
                    0, 1, bipolar=True)
    bits = r.randint(1, 8)
    qmin, qmax = r.choice([(0, (1 << bits) - 1), (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)])
    if r.random() < 0.3:  # dyadic slopes: ties on the integers
        slope = Fraction(r.randint(-7, 7), 2 ** r.randint(0, 6))
    else:  # float32 scale ratios, as a float-scaled layer has
        num = float(np.float32(r.uniform(-1, 1)) * np.float32(r.uniform(0, 1)))
        slope = Fraction(num) / Fraction(float(np.float32(r.uniform(0.01, 2))))
    return Step(slope, Fraction(r.randint(-100, 100), r.choice([1, 2, 4, 3, 7])), mode, qmin, qmax)


@pytest.mark.parametrize("seed", range(4))
def test_thresholds_and_multiply_shift_equal_the_definition_everywhere(seed):
    r = random.Random(seed)
    found = 0
    for _ in range(60):
        step = _random_step(r)
        lo, hi = -r.randint(0, 1500), r.randint(0, 1500)
        xs = np.arange(lo, hi + 1)
        want = np.array([step.exact(int(x)) for x in xs])
        sign, t = thresholds(step, lo, hi)
        assert np.array_equal(apply_thresholds(sign, t, step.qmin, xs), want), step
        ms = multiply_shift(step, lo, hi, (sign, t))
        if ms is None:
            continue
        found += 1
        assert np.array_equal(np.array([ms(int(x), step.qmin, step.qmax) for x in xs]), want), (step, ms)
    assert found >= 30  # most steps have a multiply-shift form


def test_half_even_ties_that_alternate_have_no_multiply_shift_but_thresholds():
    # x / 2 rounded half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2 ... no single floor((Mx + C) >> s)
    step = Step(Fraction(1, 2), Fraction(0), Rounding.ROUND, -128, 127)
    assert multiply_shift(step, -100, 100) is None
    sign, t = thresholds(step, -100, 100)
    xs = np.arange(-100, 101)
    assert np.array_equal(apply_thresholds(sign, t, -128, xs), [step.exact(int(x)) for x in xs])


def test_proof_rejects_an_off_by_one_form():
    step = Step(Fraction(3, 7), Fraction(1, 5), Rounding.ROUND, -8, 7)
    ms = multiply_shift(step, -20, 20)
    assert ms is not None and prove(step, ms, -20, 20)
    bad = MultiplyShift(ms.mult, ms.add + (1 << ms.shift), ms.shift)  # every unclamped output one too high
    assert any(bad(x, -8, 7) != step.exact(x) for x in range(-20, 21))
    assert not prove(step, bad, -20, 20)


def test_float_thresholds_quantize_real_inputs_exactly():
    scale = Fraction(float(np.float32(0.8298504)))
    step = Step(1 / scale, Fraction(0), Rounding.ROUND, -127, 127)
    t = float_thresholds(step)
    x = np.random.default_rng(0).normal(size=5000) * 40
    x = np.concatenate([x, t, np.nextafter(t, -np.inf)])  # every boundary and its predecessor
    got = -127 + np.searchsorted(t, x, side="right")
    assert np.array_equal(got, [step.exact(Fraction(float(v))) for v in x])


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("mode", ["ROUND", "FLOOR", "HALF_UP", "UP"])
def test_rescale_semantics_equal_the_onnx_reference(make_graph, make_type, per_channel, mode):
    r = random.Random(7)
    x = make_type(10, 0, True, (4, 3, 5))
    chans = 4 if per_channel else 1
    steps = tuple(Step(Fraction(float(np.float32(r.uniform(-0.2, 0.2)))), Fraction(r.randint(-50, 50), 3), Rounding(mode),
                       -8, 7) for _ in range(chans))
    g = make_graph(x, ("rescale", rescale.Attrs(steps, rescale.out_type(-8, 7))))
    codes = sample_codes(x, 200, seed=2)
    want = run_ir(g, codes)
    assert np.array_equal(OrtReference(reference_model(g)).run(codes), want)
    c = np.arange(chans).reshape(1, -1, 1, 1) if per_channel else 0
    exact = np.vectorize(lambda v, ch: steps[ch].exact(int(v)))(codes, c if per_channel else np.zeros_like(codes))
    assert np.array_equal(want, exact)
    out = g.values[g.output]
    ends = [s.exact(v) for s in steps for v in (x.lo, x.hi)]
    assert (out.lo, out.hi) == (min(ends), max(ends))


def test_rescale_bipolar_is_the_sign(make_graph, make_type):
    x = make_type(8, 0, True, (6,))
    steps = (Step(Fraction(float(np.float32(0.37))), Fraction(-3, 2), Rounding.ROUND, 0, 1, bipolar=True),)
    g = make_graph(x, ("rescale", rescale.Attrs(steps, rescale.out_type(0, 1))))
    codes = np.arange(-128, 128).reshape(-1, 1).repeat(6, axis=1)
    want = (Fraction(float(np.float32(0.37))) * codes.astype(object) - Fraction(3, 2)) >= 0
    assert np.array_equal(run_ir(g, codes), want.astype(np.int64))
    assert np.array_equal(OrtReference(reference_model(g)).run(codes), want.astype(np.int64))


def test_implementation_chooses_thresholds_for_two_bit_outputs_and_multiply_shift_above():
    x = TensorType((8,), rescale.out_type(-512, 511), -512, 511)
    two = rescale.Attrs((Step(Fraction(1, 37), Fraction(0), Rounding.ROUND, -1, 1),), rescale.out_type(-1, 1))
    eight = rescale.Attrs((Step(Fraction(1, 37), Fraction(0), Rounding.ROUND, -128, 127),), rescale.out_type(-128, 127))
    assert rescale.implementation(two, x).form == rescale.Form.THRESHOLDS
    assert rescale.implementation(eight, x).form == rescale.Form.MULTIPLY_SHIFT
