"""Wide requantizations (compiler/exact/pieces.py) and the piecewise op (compiler/ops/piecewise.py).

- the remainder counts (``floor_sum``, ``residues``) equal brute force;
- a step's segments equal the exact rational definition on every integer of the domain, for
  every rounding mode, dyadic and float32-derived slopes, 3- to 16-bit outputs, without
  placing one threshold; the proof accepts only forms that are equal everywhere;
- half-even ties of both parities without dyadic constants are refused in one line;
- the op's integer semantics == the onnxruntime reference == its RTL trace == the
  definition on full-range inputs, for PRelu-like bends per channel (negative slopes
  included), a LeakyRelu-like bend, one step and dyadic steps, at 16-bit outputs;
- what users write -- a 16-bit Quant after a per-channel PRelu or a LeakyRelu of a layer,
  after a linear Resize, after a Sigmoid -- compiles to it (or to a table keyed by the input's
  codes) and equals the user's file run in float64 on every output.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler import api
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.exact import requant
from tessera.compiler.exact.pieces import (Floor, NoExactForm, Pieces, fit, floor_sum, holds, layer_segments,
                                           residues, segments)
from tessera.compiler.exact.requant import MultiplyShift, Step
from tessera.compiler.exact.rounding import Rounding
from tessera.compiler.independent import independent_check
from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import piecewise
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import input_samples, sample_codes

WIDE = (-(1 << 15), (1 << 15) - 1)


def _f32(v: float) -> Fraction:
    return Fraction(float(np.float32(v)))


def _random_step(r: random.Random, bits: int | None = None) -> Step:
    bits = bits or r.choice([3, 8, 12, 16])
    qmin, qmax = r.choice([(0, (1 << bits) - 1), (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)])
    kind = r.random()
    if kind < 0.3:  # dyadic: ties on the integers
        slope = Fraction(r.randint(-7, 7), 2 ** r.randint(0, 6))
    elif kind < 0.5:  # small denominators
        slope = Fraction(r.randint(-30, 30), r.randint(1, 30))
    else:  # float32 scale ratios, as a float-scaled layer has
        slope = _f32(r.uniform(-1, 1) * r.uniform(0, 1)) / _f32(r.uniform(0.001, 2))
    offset = Fraction(r.randint(-3000, 3000), r.choice([1, 2, 4, 3, 7, 1024]))
    return Step(slope, offset, r.choice(list(Rounding)), qmin, qmax)


def test_remainder_counts_equal_brute_force():
    r = random.Random(1)
    for _ in range(400):
        m, a, b = r.randint(1, 200), r.randint(-500, 500), r.randint(-500, 500)
        lo = r.randint(-100, 100)
        hi = lo + r.randint(0, 150)
        rs = [(a * u + b) % m for u in range(lo, hi + 1)]
        assert residues(a, b, m, lo, hi) == (min(rs), max(rs))
        n = r.randint(0, 50)
        assert floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n))


def _values(seg, xs: np.ndarray) -> np.ndarray:
    """A segment on int64 codes, in Python integers (products beyond 64 bits)."""
    return np.array([seg(int(x)) for x in xs], dtype=np.int64)


@pytest.mark.parametrize("seed", range(2))
def test_segments_equal_the_definition_on_every_code(seed):
    r = random.Random(seed)
    found = 0
    for _ in range(50):
        step = _random_step(r)
        lo, hi = -r.randint(0, 1000), r.randint(0, 1000)
        for shift_rounds in (True, False):
            try:
                segs = segments(step, lo, hi, shift_rounds)
            except NoExactForm:
                continue
            found += 1
            assert segs[0].lo == lo and segs[-1].hi == hi and all(s.hi + 1 == t.lo for s, t in zip(segs, segs[1:]))
            for s in segs:
                xs = np.arange(s.lo, s.hi + 1)
                assert np.array_equal(_values(s, xs), Pieces((), (step,)).codes(xs)), (step, s)
    assert found >= 80  # most steps have one


@pytest.mark.parametrize("seed", range(2))
def test_sixteen_bit_floors_proven_from_the_arithmetic_equal_the_definition_on_every_code(seed):
    """Steps reaching thousands of 16-bit levels (every mode, float32-derived and small
    denominators, rising and falling): the floors :func:`fit` proves, split at ``n = 0`` where
    the mode says so, equal the definition on every code."""
    r = random.Random(10 + seed)
    proven = split = 0
    for _ in range(40):
        slope = (_f32(r.uniform(3, 40)) / _f32(r.uniform(0.5, 2)) if r.random() < 0.6 else
                 Fraction(r.randint(7, 200), r.randint(1, 9))) * r.choice([-1, 1])
        step = Step(slope, Fraction(r.randint(-30000, 30000), r.choice([1, 2, 3, 7, 1024])), r.choice(list(Rounding)),
                    *r.choice([WIDE, (0, (1 << 16) - 1)]))
        lo, hi = -r.randint(0, 2000), r.randint(0, 2000)
        try:
            segs = segments(step, lo, hi, shift_rounds=False)
        except NoExactForm:
            continue
        proven += abs(step.exact(lo) - step.exact(hi)) > requant.MAX_THRESHOLDS
        split += len(segs) > 1
        for s in segs:
            xs = np.arange(s.lo, s.hi + 1)
            assert np.array_equal(_values(s, xs), Pieces((), (step,)).codes(xs)), (step, s)
    assert proven >= 20 and split >= 2


def test_a_sixteen_bit_step_over_a_wide_accumulator_places_no_threshold(monkeypatch):
    """65,535 levels on 2**17 codes: proven from the arithmetic, :func:`requant.thresholds`
    never called (no threshold enumerated: no assertion on time, which a busy machine moves);
    then checked on every code."""
    monkeypatch.setattr(requant, "thresholds", lambda *a, **k: pytest.fail("a threshold was enumerated"))
    step = Step(_f32(0.0123) * _f32(0.37) / _f32(0.000871), Fraction(-77, 3), Rounding.ROUND, *WIDE)
    lo, hi = -(1 << 16), (1 << 16) - 1
    segs = segments(step, lo, hi)
    assert len(segs) == 1 and segs[0].proven
    xs = np.arange(lo, hi + 1)
    got = np.clip((xs.astype(object) * segs[0].form.mult + segs[0].form.add) >> segs[0].form.shift, *WIDE)
    assert np.array_equal(got.astype(np.int64), Pieces((), (step,)).codes(xs))


def test_the_proof_accepts_only_forms_equal_everywhere():
    r = random.Random(5)
    checked = 0
    for _ in range(300):
        form = Floor(r.randint(1, 40), r.randint(-200, 200), r.randint(1, 60))
        lo, hi = r.randint(-300, 0), r.randint(0, 300)
        ms = fit(form, lo, hi, (lo, hi))
        assert ms is not None and holds(form, ms, lo, hi)
        assert all((ms.mult * u + ms.add) >> ms.shift == (form.num * u + form.add) // form.den for u in range(lo, hi + 1))
        for mult, add in ((ms.mult, ms.add - 1), (ms.mult, ms.add + 1), (ms.mult + 1, ms.add), (ms.mult - 1, ms.add)):
            other = MultiplyShift(mult, add, ms.shift)
            if holds(form, other, lo, hi):  # sound: whatever the proof accepts is equal everywhere
                checked += 1
                assert all((mult * u + add) >> ms.shift == (form.num * u + form.add) // form.den for u in range(lo, hi + 1))
    off = MultiplyShift(1, -1, 0)  # floor(u) - 1 is never floor(u)
    assert not holds(Floor(1, 0, 1), off, -5, 5)
    assert checked > 0


def test_half_even_ties_of_both_parities_have_no_floor_form_and_are_refused_in_one_line(make_graph, make_type):
    # 5 x / 6 - 1/2 is halfway at every x = 0 (mod 6), between -1 and 0, 4 and 5, 9 and 10, ...
    step = Step(Fraction(5, 6), Fraction(-1, 2), Rounding.ROUND, *WIDE)
    with pytest.raises(NoExactForm, match="ties of both parities"):
        layer_segments([Pieces((), (step,))], -600, 600)
    with pytest.raises(UnsupportedModelError, match=r"^node 'n0_piecewise': a 16-bit requantization of the codes "
                                                    r"\[-2048, 2047\] has no exact multiply-shift form: its ROUND "
                                                    r"ties of both parities [^\n]*$"):
        make_graph(make_type(12, 0, True, (3,)), ("piecewise", piecewise.Attrs((Pieces((), (step,)),),
                                                                              FixedType(16, 0, True))))
    dyadic = Step(Fraction(5, 8), Fraction(-1, 2), Rounding.ROUND, *WIDE)  # its own rounding: the definition
    (seg,) = segments(dyadic, -600, 600)
    assert seg.rounding is Rounding.ROUND and all(seg(x) == dyadic.exact(x) for x in range(-600, 601))


def _bend(a: Fraction, b: Fraction, knee: Fraction, scale: Fraction, mode=Rounding.ROUND, q=WIDE) -> Pieces:
    """The 16-bit Quant of ``leaky(a x + b)``: the bent step below real 0, the line from it."""
    line, bent = Step(a / scale, b / scale, mode, *q), Step(a * knee / scale, b * knee / scale, mode, *q)
    if a > 0:
        return Pieces((math.ceil(-b / a),), (bent, line))
    return Pieces((math.floor(-b / a) + 1,), (line, bent))


FUNCTIONS = {
    "prelu_per_channel": tuple(_bend(_f32(a), Fraction(b, 7), _f32(k), _f32(0.00123))
                               for a, b, k in ((0.013, 5, 0.2), (-0.021, -3, -0.3), (0.007, 0, 0.05))),
    "leakyrelu": (_bend(_f32(0.0031), Fraction(11, 5), _f32(0.1), _f32(0.000173), Rounding.HALF_UP),),
    "one_step": (Pieces((), (Step(_f32(0.37) / _f32(0.0021) / 16, Fraction(0), Rounding.ROUND, *WIDE),)),),
    "dyadic_down": tuple(Pieces((), (Step(Fraction(c, 8), Fraction(-1, 2), Rounding.DOWN, *WIDE),)) for c in (3, -5, 7)),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_piecewise_semantics_equal_the_onnx_reference_the_rtl_and_the_definition(make_graph, make_type, name):
    functions = FUNCTIONS[name]
    x = make_type(13, 0, True, (len(functions), 5))
    g = make_graph(x, ("piecewise", piecewise.Attrs(functions, FixedType(16, 0, True))))
    codes = np.concatenate([np.broadcast_to(np.arange(x.lo, x.hi + 1)[:, None, None], (x.hi - x.lo + 1, *x.shape)),
                            sample_codes(x, 50, seed=1)])  # every code of every channel
    want = np.stack([functions[c].codes(codes[:, c]) for c in range(len(functions))], axis=1)
    assert np.array_equal(run_ir(g, codes), want)
    assert np.array_equal(OrtReference(reference_model(g)).run(codes), want)
    out = g.values[g.output]
    assert (out.lo, out.hi) == (int(want.min()), int(want.max()))  # every code reached: the range is exact
    assert piecewise.OP.form(g.nodes[0].attrs, [x], out).startswith("piecewise multiply-shift")
    assert piecewise.OP.requantization(g.nodes[0].attrs, [x], out).channels == len(functions)
    pytest.importorskip("da4ml")
    from tessera.compiler.rtl.check import check_program
    from tessera.compiler.rtl.interpret import run_program
    from tessera.compiler.rtl.trace import trace

    traced = trace(g)
    program = traced.program()
    check_program(traced, program)
    got = run_program(codes, program)  # Tessera's exact interpreter of da4ml's ops (products beyond 32 bits)
    assert np.array_equal(got, want.reshape(len(codes), -1))


# -- what users write -------------------------------------------------------------------------
def _model(path, shape, middle, inits, opset=13):
    """Quant(x) (8 bits, float scale) -> ``middle`` nodes ("h" in, "m" out) -> 16-bit Quant -> y."""
    q = lambda x, out, s, b: helper.make_node("Quant", [x, s, "zero", b], [out], name=f"Quant_{out}",  # noqa: E731
                                              domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND")
    consts = {"s_x": 0.0371, "zero": 0.0, "b8": 8.0, "s_y": 0.000213, "b16": 16.0, **inits}
    g = helper.make_graph([q("x", "h", "s_x", "b8"), *middle, q("m", "y", "s_y", "b16")], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *shape])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", *(f"d{i}" for i in range(len(shape)))])],
                          [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                            helper.make_opsetid("qonnx.custom_op.general", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _conv(c_out: int, c_in: int) -> tuple[list, dict]:
    w = np.random.default_rng(3).integers(-7, 8, size=(c_out, c_in, 3, 3)) * 0.031
    q = helper.make_node("Quant", ["w", "s_w", "zero", "b4"], ["wq"], name="Quant_w", domain="qonnx.custom_op.general",
                         signed=1, narrow=1, rounding_mode="ROUND")
    return [q, helper.make_node("Conv", ["h", "wq", "bias"], ["c"], name="Conv_0", pads=[1, 1, 1, 1])], \
        {"w": w, "s_w": 0.031, "b4": 4.0, "bias": np.linspace(-0.4, 0.3, c_out)}


def _prelu(path):
    nodes, inits = _conv(3, 2)
    nodes.append(helper.make_node("PRelu", ["c", "slope"], ["m"], name="PRelu_0"))
    return _model(path, (2, 4, 4), nodes, {**inits, "slope": np.array([0.21, -0.3, 0.05]).reshape(3, 1, 1)})


def _leakyrelu(path):
    nodes, inits = _conv(2, 2)
    nodes.append(helper.make_node("LeakyRelu", ["c"], ["m"], name="LeakyRelu_0", alpha=0.1))
    return _model(path, (2, 4, 4), nodes, inits)


def _bilinear(path):
    nodes = [helper.make_node("Resize", ["h", "roi", "scales"], ["m"], name="Resize_0", mode="linear",
                              coordinate_transformation_mode="half_pixel")]
    return _model(path, (2, 3, 4), nodes, {"roi": np.zeros(0), "scales": [1.0, 1.0, 2.0, 2.0]})


def _sigmoid(path):
    return _model(path, (6,), [helper.make_node("Sigmoid", ["h"], ["m"], name="Sigmoid_0")], {})


@pytest.mark.parametrize("build,op", [(_prelu, "piecewise"), (_leakyrelu, "piecewise"), (_bilinear, "piecewise"),
                                      (_sigmoid, "lut")])
def test_a_sixteen_bit_quant_after_what_users_write_equals_the_file(tmp_path, build, op):
    path = build(tmp_path / "m.onnx")
    g = api.load_model(path)
    assert g.nodes[-1].op == op and g.values[g.output].ftype.width == 16
    codes = input_samples(g, 300, seed=2)
    ref = OrtReference(reference_model(g)).run(codes)
    assert np.array_equal(ref, run_ir(g, codes))
    assert int(ref.max()) - int(ref.min()) > 4095  # beyond what thresholds hold
    rep = independent_check(onnx.load(str(path)), g, codes, ref)
    assert rep.passed and rep.differing_outputs == 0 and rep.equal + rep.undecidable_outputs == rep.outputs, rep.line()
