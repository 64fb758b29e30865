"""Each op's RTL facet == its integer semantics, exactly: one- and few-op graphs traced into
da4ml's adder graph (compiler/rtl/trace.py), checked by the back end's own check
(:func:`check_program`, 2,000 full-range samples) and again here, the program's outputs
against :func:`run_ir` on the project's full-range samples (extremes first).

Variants: padding, strides, groups, 1D / 2D / 3D, per-channel constants, signed and unsigned
inputs, odd sizes, every rounding mode of the divisions; ops without an RTL form are refused
in one line naming the node and ``--backend hls``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("da4ml")

from da4ml.trace import comb_trace  # noqa: E402

from tessera.compiler.errors import UnsupportedModelError  # noqa: E402
from tessera.compiler.exact.rounding import Rounding, div_round  # noqa: E402
from tessera.compiler.ir.types import FixedType  # noqa: E402
from tessera.compiler.ops import (avgpool, conv, convtranspose, crop, depthtospace, flatten, globalavgpool,  # noqa: E402
                                  interpolate, leakyrelu, lut, maximum, maxpool, merge, pad, quant, relu, staircase,
                                  transpose, upsample)
from tessera.compiler.reference.interpret import run_ir  # noqa: E402
from tessera.compiler.rtl.builder import DaBuilder  # noqa: E402
from tessera.compiler.rtl.check import check_program  # noqa: E402
from tessera.compiler.rtl.trace import trace  # noqa: E402
from tessera.compiler.samples import input_samples  # noqa: E402

MODES = [m.value for m in Rounding if m is not Rounding.HALF_EVEN]


def assert_rtl_exact(graph, n: int = 400):
    """The traced program equals the exact semantics (the back end's check, then ours)."""
    traced = trace(graph)
    program = traced.program()
    check_program(traced, program)
    codes = input_samples(graph, n)
    got = program.predict(codes.reshape(len(codes), -1).astype(np.float64))
    want = run_ir(graph, codes).reshape(len(codes), -1)
    assert np.array_equal(got, want), f"{int(np.sum(got != want))} of {want.size} values differ"
    return traced


def q(width: int, frac: int, signed: bool = True, mode: str = "ROUND", narrow: bool = False) -> quant.Attrs:
    return quant.Attrs(FixedType(width, frac, signed), narrow, mode)


def weights(rng, shape, bits: int = 5) -> np.ndarray:
    return rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size=shape, dtype=np.int64)


# -- convolution ------------------------------------------------------------------------------

CONVS = [  # (input shape, weight shape, strides, pads, group, signed input)
    ((3, 11), (4, 3, 3), (1,), (1, 1), 1, True),
    ((4, 13), (4, 2, 3), (2,), (1, 0), 2, False),
    ((4, 9), (4, 1, 4), (3,), (0, 2), 4, True),  # depthwise, even kernel, odd stride
    ((3, 6, 5), (4, 3, 3, 3), (2, 1), (1, 0, 1, 2), 1, True),
    ((2, 7, 6), (3, 2, 2, 3), (1, 2), (0, 0, 0, 0), 1, False),
    ((4, 5, 5), (6, 2, 3, 3), (1, 1), (1, 1, 1, 1), 2, True),
    ((3, 5, 6), (3, 1, 3, 3), (2, 2), (1, 1, 0, 0), 3, False),  # depthwise 2D
    ((2, 4, 3, 5), (2, 2, 2, 2, 3), (1, 1, 2), (1, 0, 0, 0, 1, 1), 1, True),  # 3D
]


@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv(make_graph, make_type, rng, case):
    shape, wshape, strides, pads, group, signed = CONVS[case]
    w = weights(rng, wshape)
    w[0] = 15  # an extreme filter drives the accumulator to its bound
    bias = rng.integers(-200, 200, size=wshape[0]) if case % 2 == 0 else None
    attrs = conv.Attrs(w, FixedType(5, 3, True), bias, FixedType(9, 6, True) if bias is not None else None, strides,
                       pads, group)
    assert_rtl_exact(make_graph(make_type(5, 2, signed, shape), ("conv", attrs)))


def test_conv_relu_requant_chain(make_graph, make_type, rng):
    attrs = conv.Attrs(weights(rng, (3, 2, 3, 3)), FixedType(5, 4, True), None, None, (1, 1), (1, 1, 1, 1))
    assert_rtl_exact(make_graph(make_type(4, 3, False, (2, 5, 4)), ("conv", attrs), ("relu", relu.Attrs()),
                                ("requant", q(4, 2, False))))


# -- pooling ----------------------------------------------------------------------------------

MAXPOOLS = [  # (input shape, kernel, strides, pads)
    ((2, 9), (3,), (2,), ()),
    ((2, 8), (2,), (2,), (1, 1)),
    ((3, 7, 6), (2, 2), (2, 2), ()),
    ((2, 7, 6), (3, 2), (2, 1), (1, 0, 1, 1)),
    ((2, 5, 5), (3, 3), (1, 1), (1, 1, 1, 1)),
    ((1, 3, 4, 5), (2, 2, 3), (1, 2, 2), (0, 1, 1, 1, 0, 1)),
]


@pytest.mark.parametrize("case", range(len(MAXPOOLS)))
@pytest.mark.parametrize("signed", [True, False])
def test_maxpool(make_graph, make_type, case, signed):
    shape, kernel, strides, pads = MAXPOOLS[case]
    assert_rtl_exact(make_graph(make_type(5, 1, signed, shape), ("maxpool", maxpool.Attrs(kernel, strides, pads))))


DILATED = [  # (input shape, kernel, strides, pads, dilations)
    ((2, 13), (3,), (1,), (2, 1), (3,)),
    ((2, 8, 9), (3, 2), (2, 1), (2, 1, 1, 2), (2, 3)),
    ((1, 5, 6, 7), (2, 2, 2), (1, 2, 1), (1, 0, 1, 0, 1, 1), (2, 3, 2)),
]


@pytest.mark.parametrize("case", range(len(DILATED)))
def test_dilated_pools(make_graph, make_type, case):
    """Taps ``dilation`` apart: a max tree of the real taps; the average's window sums and divisors."""
    shape, kernel, strides, pads, dilations = DILATED[case]
    assert_rtl_exact(make_graph(make_type(5, 1, True, shape), ("maxpool", maxpool.Attrs(kernel, strides, pads, dilations))))
    if len(kernel) > 1:
        attrs = avgpool.Attrs(kernel, strides, pads, False, q(6, 3, True, "HALF_UP"), dilations)
        assert_rtl_exact(make_graph(make_type(6, 2, True, shape), ("avgpool", attrs)))


AVGPOOLS = [  # (input shape, kernel, strides, pads, count_include_pad)
    ((2, 6, 6), (2, 2), (2, 2), (0, 0, 0, 0), True),  # divisor 4: the rounded shift
    ((2, 7, 6), (3, 2), (2, 2), (1, 0, 1, 1), True),  # divisor 6
    ((2, 7, 6), (3, 2), (2, 2), (1, 0, 1, 1), False),  # divisors 2, 3, 4, 6
    ((2, 5, 5), (3, 3), (1, 1), (1, 1, 1, 1), False),  # divisors 4, 6, 9
    ((1, 3, 4, 5), (3, 2, 3), (1, 2, 2), (1, 0, 1, 1, 0, 1), False),  # 3D
]


@pytest.mark.parametrize("case", range(len(AVGPOOLS)))
@pytest.mark.parametrize("mode", ["ROUND", "HALF_UP", "FLOOR", "CEIL"])
def test_avgpool(make_graph, make_type, case, mode):
    shape, kernel, strides, pads, include = AVGPOOLS[case]
    attrs = avgpool.Attrs(kernel, strides, pads, include, q(6, 3, True, mode))
    assert_rtl_exact(make_graph(make_type(6, 2, True, shape), ("avgpool", attrs)))


@pytest.mark.parametrize("out_frac,signed,narrow", [(0, True, False), (5, False, False), (4, True, True)])
def test_avgpool_output_grids(make_graph, make_type, out_frac, signed, narrow):
    """Outputs finer and coarser than the input grid, saturating, narrow."""
    attrs = avgpool.Attrs((3, 3), (2, 2), (1, 1, 1, 1), False, q(5, out_frac, signed, "HALF_DOWN", narrow))
    assert_rtl_exact(make_graph(make_type(7, 3, True, (2, 7, 7)), ("avgpool", attrs)))


@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 3, 5), (2, 2, 3, 3)])
@pytest.mark.parametrize("mode", ["ROUND", "HALF_UP", "DOWN", "UP"])
def test_globalavgpool(make_graph, make_type, shape, mode):
    attrs = globalavgpool.Attrs(q(6, 3, True, mode))
    assert_rtl_exact(make_graph(make_type(6, 2, True, shape), ("globalavgpool", attrs)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("divisor", [3, 5, 6, 7, 12, 27, 16])
def test_division_by_a_constant_every_mode(mode, divisor):
    """The builder's exact ``R(x / d)`` over a whole signed range (the average pools'
    fallback where no proven multiply-shift exists)."""
    b = DaBuilder()
    inp, (codes,) = b.inputs([1], [(True, 10)])
    y = b.div_round(np.asarray(codes, dtype=object), divisor, Rounding(mode))
    x = np.arange(-512, 512, dtype=np.int64)
    got = comb_trace(inp, list(y)).predict(x[:, None].astype(np.float64))[:, 0]
    assert np.array_equal(got, div_round(x, divisor, mode))


# -- merges -----------------------------------------------------------------------------------


def _two_branches(make_dag, x, a_type: quant.Attrs, b_type: quant.Attrs, op: str, attrs):
    return make_dag(x, [("a", "requant", ["x"], a_type), ("b", "requant", ["x"], b_type), ("m", op, ["a", "b"], attrs)])


@pytest.mark.parametrize("attrs", [merge.Attrs(), merge.Attrs((1,), (-1,)), merge.Attrs((1, 3, 2), (-2, 1, 5)),
                                   merge.Attrs((2,), (1, 1, 1))])
def test_add(make_dag, make_type, attrs):
    g = _two_branches(make_dag, make_type(8, 4, True, (3, 2, 3)), q(5, 2), q(4, 3, False), "add", attrs)
    assert_rtl_exact(g)


def test_concat_channels(make_dag, make_type):
    x = make_type(7, 3, True, (2, 3, 3))
    g = make_dag(x, [("a", "requant", ["x"], q(5, 1)), ("b", "crop", ["x"], crop.Attrs((0, 0), (3, 3), 1, 1)),
                     ("m", "concat", ["a", "b"], merge.Attrs())])
    assert_rtl_exact(g)


def test_concat_features(make_dag, make_type):
    g = _two_branches(make_dag, make_type(8, 4, True, (4, 3)), q(5, 2), q(4, 4, False), "concat",
                      merge.Attrs(features=True))
    assert_rtl_exact(g)


@pytest.mark.parametrize("minimum", [False, True])
def test_maximum(make_dag, make_type, minimum):
    g = _two_branches(make_dag, make_type(8, 4, True, (2, 5)), q(5, 1), q(4, 3, False), "maximum",
                      maximum.Attrs(minimum))
    assert_rtl_exact(g)


# -- data movement ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape,op,attrs", [
    ((2, 3, 5), "flatten", flatten.Attrs()),
    ((3, 4, 5), "transpose", transpose.Attrs()),
    ((2, 3, 4, 2), "transpose", transpose.Attrs()),
    ((4, 5, 6), "crop", crop.Attrs((1, 2), (3, 3), 1, 2)),
    ((3, 5), "crop", crop.Attrs((2,), (3,))),
    ((2, 5), "upsample", upsample.Attrs((3,))),
    ((2, 3, 2), "upsample", upsample.Attrs((2, 3))),
    ((1, 2, 2, 3), "upsample", upsample.Attrs((2, 1, 2))),
    ((12, 3, 2), "depthtospace", depthtospace.Attrs(2)),
    ((18, 2, 3), "depthtospace", depthtospace.Attrs(3, crd=True)),
    ((2, 7), "pad", pad.Attrs((2, 3), pad.PadMode.REFLECT)),
    ((2, 4, 5), "pad", pad.Attrs((1, 2, 3, 1), pad.PadMode.EDGE)),
    ((1, 3, 3, 4), "pad", pad.Attrs((2, 0, 1, 1, 2, 0), pad.PadMode.REFLECT)),
])
def test_data_movement(make_graph, make_type, shape, op, attrs):
    assert_rtl_exact(make_graph(make_type(6, 2, True, shape), (op, attrs)))


# -- activations ------------------------------------------------------------------------------


@pytest.mark.parametrize("code,frac", [(1, 3), (13, 5), (-3, 2), (5, 1), (0, 0)])
@pytest.mark.parametrize("signed", [True, False])
def test_leakyrelu(make_graph, make_type, code, frac, signed):
    g = make_graph(make_type(6, 2, signed, (7,)), ("leakyrelu", leakyrelu.Attrs(code, frac)))
    assert_rtl_exact(g)


@pytest.mark.parametrize("function,params,out,signed", [
    ("sigmoid", (), q(6, 6, False), True),
    ("tanh", (), q(5, 4, True, "HALF_UP"), True),
    ("hardswish", (), q(6, 3, True), False),
    ("elu", (1.0,), q(6, 4, True, "FLOOR"), True),
])
def test_lut(make_graph, make_type, function, params, out, signed):
    attrs = lut.Attrs(function, out, params)
    assert_rtl_exact(make_graph(make_type(7, 4, signed, (2, 3)), ("lut", attrs)))


def test_lut_after_a_narrower_range(make_graph, make_type):
    """The table spans the reachable codes of a ReLU's output only."""
    attrs = lut.Attrs("sigmoid", q(8, 8, False))
    assert_rtl_exact(make_graph(make_type(6, 3, True, (5,)), ("relu", relu.Attrs()), ("lut", attrs)))


STAIRS = [  # (function, out, lines as (a, b, knee))
    ("tanh", q(5, 4), [(Fraction(1, 64), Fraction(1, 8), 1)]),
    ("sigmoid", q(6, 6, False, "FLOOR"), [(Fraction(-1, 32), Fraction(0), 1), (Fraction(3, 128), Fraction(-1, 4), 1)]),
    ("tanh", q(4, 3, True, "HALF_UP"), [(Fraction(1, 16), Fraction(0), Fraction(1, 4)),
                                         (Fraction(-1, 8), Fraction(1, 2), 1)]),
]


@pytest.mark.parametrize("case", range(len(STAIRS)))
def test_staircase(make_graph, make_type, case):
    function, out, lines = STAIRS[case]
    attrs = staircase.Attrs(function, out, tuple(staircase.Line(a, b, Fraction(k)) for a, b, k in lines))
    assert_rtl_exact(make_graph(make_type(9, 0, True, (len(lines), 3)), ("staircase", attrs)))


def test_staircase_of_too_many_thresholds_is_refused(make_graph, make_type):
    attrs = staircase.Attrs("tanh", q(12, 11), (staircase.Line(Fraction(1, 256), Fraction(0)),))
    g = make_graph(make_type(12, 0, True, (2,)), ("staircase", attrs))
    with pytest.raises(UnsupportedModelError, match=r"^node 'n0_staircase': a staircase of \d+ thresholds per "
                                                    r"channel .*; --backend hls supports it$"):
        trace(g)


# -- refusals ---------------------------------------------------------------------------------


TRANSPOSED = [  # (input shape, weight shape (c_in, c_out, *k), strides, pads, output padding)
    ((3, 5), (3, 2, 3), (2,), (1, 0), (1,)),
    ((2, 4, 3), (2, 3, 3, 2), (2, 1), (0, 1, 1, 0), ()),
    ((2, 3, 3), (2, 2, 2, 2), (2, 2), (0, 0, 0, 0), (1, 0)),
]


@pytest.mark.parametrize("case", range(len(TRANSPOSED)))
def test_convtranspose(make_graph, make_type, rng, case):
    shape, wshape, strides, pads, extra = TRANSPOSED[case]
    attrs = convtranspose.Attrs(weights(rng, wshape), FixedType(5, 3, True), rng.integers(-40, 40, size=wshape[1]),
                                FixedType(8, 5, True), strides, pads, extra)
    assert_rtl_exact(make_graph(make_type(6, 2, case != 1, shape), ("convtranspose", attrs), ("relu", relu.Attrs())))


def test_interpolate(make_graph, make_type):
    """Bilinear, 3 -> 5 per axis with weights over 4 and a clamped edge, then 2 -> 2 (identity)."""
    axis = interpolate.Axis(((0, 1), (0, 1), (1, 2), (1, 2), (2, 2)), ((4, 0), (2, 2), (4, 0), (1, 3), (4, 0)), 4)
    attrs = interpolate.Attrs((axis, interpolate.Axis.identity(2)))
    assert_rtl_exact(make_graph(make_type(7, 3, True, (2, 3, 2)), ("interpolate", attrs), ("relu", relu.Attrs())))


def test_an_op_without_an_rtl_form_is_refused_in_one_line(make_graph, make_type, rnn_builders, rng):
    g = make_graph(make_type(8, 6, True, (4, 3)), ("lstm", rnn_builders["lstm"](rng, 3, 2, "ternary")))
    with pytest.raises(UnsupportedModelError) as err:
        trace(g)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("node 'n0_lstm': op 'lstm' has no RTL form") and message.endswith("--backend hls supports it")
