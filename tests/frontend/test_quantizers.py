"""Every quantizer users write, exactly (compiler/frontend/handlers/quantizers.py, real.py):
scales and zero points per channel on activations, zero points on weights (integer or not),
real zero points on activations, every QONNX rounding mode and unsigned narrow range on
activation Quants, qonnx 1.0's ``IntQuant``, and the ops that read scaled codes (ReLU with a
zero point, Transpose, MaxPool, Flatten, a layer folding per-channel input scales into its
weights).

Each graph: the exact onnxruntime reference equals the integer semantics, and equals the
user's file run independently in float64 on every output of 2,000 random full-range inputs.
The C-simulation of the same constructs is the conformance suite's (tests/conformance)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line

ACT, WEIGHT = 2.0 ** -4, 2.0 ** -5


def _mlp(path, mid_quant, *, w2_scale="sw", w2_zero="zero", in_shape=(6,), hidden=5, relu=False, int_quant=False):
    """Quant(x) -> MatMul(W1) -> [Relu] -> ``mid_quant(src, out)`` -> MatMul(W2, its own scale and zero
    point) -> Quant(y): the middle quantizer is the construct under test."""
    r = np.random.default_rng(hidden)
    inits = [_f("s_in", ACT), _f("sw", WEIGHT), _f("zero", 0.0), _f("b8", 8.0), _f("b4", 4.0), _f("s_y", 0.0437),
             _f("W1", r.integers(-15, 16, (in_shape[0], hidden)) * WEIGHT),
             _f("W2", r.integers(-15, 16, (hidden, 3)) * WEIGHT), _f("sw2", np.float32(0.0313)),
             _f("zw2", np.array([[3.0, -2.0, 0.0]], dtype=np.float32)), _f("zw2f", 0.375)]
    nodes = [_quant("x", "s_in", "zero", "b8", "xq"), _quant("W1", "sw", "zero", "b4", "W1q"),
             _quant("W2", w2_scale, w2_zero, "b8", "W2q"), helper.make_node("MatMul", ["xq", "W1q"], ["mm"], name="MatMul_1")]
    src = "mm"
    if relu:
        nodes.append(helper.make_node("Relu", ["mm"], ["r"], name="Relu_1"))
        src = "r"
    inits += mid_quant(nodes, src, "h")
    nodes += [helper.make_node("MatMul", ["h", "W2q"], ["mm2"], name="MatMul_2"), _quant("mm2", "s_y", "zero", "b8", "y")]
    if int_quant:
        for n in nodes:
            n.op_type = "IntQuant" if n.op_type == "Quant" else n.op_type
    return _save(path, nodes, inits, in_shape, (3,))


def _plain(scale=ACT, zero=0.0, bits=8.0, signed=1, narrow=0, mode="ROUND"):
    """A middle quantizer with these parameters (per channel where given as arrays)."""
    def add(nodes, src, out):
        nodes.append(_quant(src, "s_mid", "z_mid", "b_mid", out, signed=signed, narrow=narrow, mode=mode))
        return [_f("s_mid", scale), _f("z_mid", zero), _f("b_mid", bits)]
    return add


@pytest.mark.parametrize("mode", ["CEIL", "UP"])
def test_rounding_modes_ap_fixed_lacks_are_the_primitive(tmp_path, mode):
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", _plain(2.0 ** -3, mode=mode)))
    assert [n.op for n in g.nodes] == ["dense", "rescale", "dense", "rescale"]
    assert g.nodes[1].attrs.out.frac == 3  # codes on the power-of-two grid, no real scale recorded
    assert g.nodes[1].output not in g.scales


def test_unsigned_narrow_range_is_the_primitive(tmp_path):
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", _plain(2.0 ** -3, bits=4.0, signed=0, narrow=1), relu=True))
    assert g.values[g.nodes[2].output].hi == 14  # 4-bit unsigned narrow: codes 0..14


def test_per_channel_activation_scales_and_zero_points(tmp_path):
    """A per-channel Quant after a layer, read by a layer that folds each input channel's scale
    into exact integer weights (and its zero point into the offset)."""
    scales = np.array([0.11, 0.023, 0.07, 0.25, 0.0625], dtype=np.float32)
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", _plain(scales, np.array([0, 3, -2, 1, 0.0]), bits=5.0)))
    rescale, dense2 = g.nodes[1], g.nodes[2]
    assert len(rescale.attrs.steps) == 5 and g.scales[rescale.output].channels == 5
    assert int(np.abs(dense2.attrs.weight).max()) > 255  # weights times their input channel's integer factor


def test_real_zero_point_on_an_activation(tmp_path):
    """qonnx allows any real zero point: (q - z) * s with z = 0.79 is an affine map, exact."""
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", _plain(0.0371, 0.79, bits=4.0, signed=0)))
    assert g.scales[g.nodes[1].output].zero == (pytest.approx(0.79, abs=1e-7),)


@pytest.mark.parametrize("w2_zero", ["zw2", "zw2f"])
def test_zero_points_on_weights(tmp_path, w2_zero):
    """Asymmetric weights: the integer weight is q - z (per output channel, or a real z: its
    binary fraction moved into the scale)."""
    _exact_and_independent(_mlp(tmp_path / "m.onnx", _plain(), w2_scale="sw2", w2_zero=w2_zero))


def test_int_quant_is_quant(tmp_path):
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", _plain(0.0371), w2_scale="sw2", int_quant=True))
    assert [n.op for n in g.nodes] == ["dense", "rescale", "dense", "rescale"]


@pytest.mark.parametrize("zero", [3.0, 0.79])
def test_relu_of_codes_with_a_zero_point_read_by_a_quant(tmp_path, zero):
    """Quant(zero point z) -> Relu -> Quant: the clip max(q, z) folds into the second Quant."""
    def add(nodes, src, out):
        nodes += [_quant(src, "s_mid", "z_mid", "b8", "hz", signed=0), helper.make_node("Relu", ["hz"], ["hr"], name="Relu_z"),
                  _quant("hr", "s_mid2", "zero", "b4", out, signed=0)]
        return [_f("s_mid", 0.0371), _f("z_mid", zero), _f("s_mid2", 0.0913)]
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", add))
    assert [n.op for n in g.nodes] == ["dense", "rescale", "rescale", "dense", "rescale"]


def test_relu_of_codes_with_an_integer_zero_point_read_by_a_layer(tmp_path):
    """Quant(zero point 3) -> Relu -> MatMul: max(q, 3) on codes, the primitive's clamp."""
    def add(nodes, src, out):
        nodes += [_quant(src, "s_mid", "z_mid", "b8", "hz", signed=0), helper.make_node("Relu", ["hz"], [out], name="Relu_z")]
        return [_f("s_mid", 0.0371), _f("z_mid", 3.0)]
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", add))
    relu = g.nodes[2]
    assert relu.op == "rescale" and relu.attrs.steps[0].qmin == 3 and g.scales[relu.output].zero == (3,)


def test_relu_of_codes_with_a_real_zero_point_read_by_a_layer_is_refused(tmp_path):
    def add(nodes, src, out):
        nodes += [_quant(src, "s_mid", "z_mid", "b8", "hz", signed=0), helper.make_node("Relu", ["hz"], [out], name="Relu_z")]
        return [_f("s_mid", 0.0371), _f("z_mid", 0.79)]
    refused_in_one_line(_mlp(tmp_path / "m.onnx", add), r"node 'Relu_z' \(Relu\): on codes with zero point 0.79.*real 0")


def _conv_graph(path, act_scale, zero, between, out_shape, transpose_weight=None):
    """Quant(x, (2, 4, 4)) -> Conv 3x3 pad 1 -> Quant(per-channel scale) -> ``between`` -> Quant(y)."""
    r = np.random.default_rng(1)
    inits = [_f("s_in", ACT), _f("sw", WEIGHT), _f("zero", 0.0), _f("b8", 8.0), _f("b4", 4.0), _f("s_y", 0.0437),
             _f("Wc", r.integers(-15, 16, (3, 2, 3, 3)) * WEIGHT), _f("s_c", act_scale), _f("z_c", zero)]
    nodes = [_quant("x", "s_in", "zero", "b8", "xq"), _quant("Wc", "sw", "zero", "b4", "Wcq"),
             helper.make_node("Conv", ["xq", "Wcq"], ["c"], name="Conv_1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             _quant("c", "s_c", "z_c", "b8", "cq", signed=0)]
    inits += between(nodes, "cq", "m", r)
    nodes.append(_quant("m", "s_y", "zero", "b8", "y"))
    return _save(path, nodes, inits, (2, 4, 4), out_shape)


def test_per_channel_codes_through_maxpool_flatten_and_a_dense_layer(tmp_path):
    """A MaxPool selects codes (its scale per channel carried), a Flatten spreads the channels'
    scales over the flat vector, the Dense layer folds them into its weights."""
    def between(nodes, src, out, r):
        nodes += [helper.make_node("MaxPool", [src], ["mp"], name="MaxPool_1", kernel_shape=[2, 2], strides=[2, 2]),
                  helper.make_node("Flatten", ["mp"], ["fl"], name="Flatten_1", axis=1),
                  _quant("Wd", "sw", "zero", "b4", "Wdq"), helper.make_node("MatMul", ["fl", "Wdq"], [out], name="MatMul_d")]
        return [_f("Wd", r.integers(-15, 16, (12, 4)) * WEIGHT)]
    scales = np.array([0.031, 0.0077, 0.125], dtype=np.float32).reshape(1, 3, 1, 1)
    g = _exact_and_independent(_conv_graph(tmp_path / "m.onnx", scales, np.array([1.0, 0, 2]).reshape(1, 3, 1, 1),
                                           between, (4,)))
    assert [n.op for n in g.nodes] == ["conv", "rescale", "maxpool", "flatten", "dense", "rescale"]
    assert g.scales[g.nodes[3].output].channels == 12


def test_transpose_of_float_scaled_codes(tmp_path):
    """qonnx's quant constant folding test: a Transpose of float-scaled codes moves them."""
    def between(nodes, src, out, r):
        nodes += [helper.make_node("Transpose", [src], ["t"], name="Transpose_1", perm=[0, 2, 1, 3]),
                  _quant("Wt", "sw", "zero", "b4", "Wtq"),
                  helper.make_node("Conv", ["t", "Wtq"], [out], name="Conv_t", kernel_shape=[1, 1])]
        return [_f("Wt", r.integers(-15, 16, (2, 4, 1, 1)) * WEIGHT)]
    g = _exact_and_independent(_conv_graph(tmp_path / "m.onnx", 0.0371, 5.0, between, (2, 3, 4)))
    assert g.scales[g.nodes[2].output].scale == g.scales[g.nodes[1].output].scale


def test_what_cannot_carry_or_fold_a_scale_is_refused_in_one_line(tmp_path):
    per_channel = np.array([0.031, 0.0077, 0.125], dtype=np.float32).reshape(1, 3, 1, 1)

    def transpose(nodes, src, out, r):
        nodes.append(helper.make_node("Transpose", [src], [out], name="Transpose_1", perm=[0, 2, 1, 3]))
        return []
    refused_in_one_line(_conv_graph(tmp_path / "t.onnx", per_channel, 0.0, transpose, (4, 3, 4)),
                        r"node 'Transpose_1' \(Transpose\) reads codes with per-channel scales or zero points")

    def transposed_conv(nodes, src, out, r):
        nodes += [_quant("Wt", "sw", "zero", "b4", "Wtq"),
                  helper.make_node("ConvTranspose", [src, "Wtq"], [out], name="ConvT", kernel_shape=[2, 2], strides=[2, 2])]
        return [_f("Wt", r.integers(-15, 16, (3, 2, 2, 2)) * WEIGHT)]
    # each output of a stride-2 transposed convolution reads one of the four taps: the zero
    # point's correction differs by position (it was wrong before this refusal); an integer
    # zero point is taken out of the codes first (test_a_zero_point_before_a_padded_or_
    # transposed_convolution_leaves_the_codes), a real one cannot be
    refused_in_one_line(_conv_graph(tmp_path / "ct.onnx", 0.0371, 2.5, transposed_conv, (2, 8, 8)),
                        r"node 'ConvT' \(ConvTranspose\): a zero point 2.5 on a padded or transposed")

    def dense(nodes, src, out, r):
        nodes += [helper.make_node("Flatten", [src], ["fl"], name="Flatten_1", axis=1),
                  _quant("Wd", "sw", "zero", "b4", "Wdq"), helper.make_node("MatMul", ["fl", "Wdq"], [out], name="MatMul_d")]
        return [_f("Wd", r.integers(-15, 16, (48, 4)) * WEIGHT)]
    # scales 2**45 apart: 49-bit weights, an accumulator past the 52 bits; 2**60 apart: weights past them
    for spread, message in ((2.0 ** -45, r"node 'MatMul_d': the accumulator needs \d+ bits.*: folding the per-channel "
                             "scales of its input into 49-bit integer weights"),
                            (2.0 ** -60, r"node 'MatMul_d' \(MatMul\): folding the per-channel scales of its input "
                             r"into integer weights needs multiples up to \d+")):
        far_apart = np.array([1.0, spread, 0.3], dtype=np.float32).reshape(1, 3, 1, 1)
        refused_in_one_line(_conv_graph(tmp_path / "d.onnx", far_apart, 0.0, dense, (4,)), message)


@pytest.mark.parametrize("stride", [1, 2])
def test_a_zero_point_before_a_padded_or_transposed_convolution_leaves_the_codes(tmp_path, stride):
    """Codes with zero point 3 (an unsigned Quant) read by a transposed convolution, or by a
    3x3 convolution padded by 1: the padding's zeros and the scattered sums read real zeros
    only on codes ``q - 3`` -- an exact 1x1 depthwise convolution of weight 1 and bias -3
    first, then the layer on the shifted codes (MelGAN's preprocessed input, ``(mel + 5) / 5``
    before a padded Conv1d, is such a case)."""
    def layer(nodes, src, out, r):
        if stride == 1:
            nodes += [_quant("Wt", "sw", "zero", "b4", "Wtq"),
                      helper.make_node("Conv", [src, "Wtq"], [out], name="Conv_2", kernel_shape=[3, 3], pads=[1] * 4)]
            return [_f("Wt", r.integers(-15, 16, (2, 3, 3, 3)) * WEIGHT)]
        nodes += [_quant("Wt", "sw", "zero", "b4", "Wtq"),
                  helper.make_node("ConvTranspose", [src, "Wtq"], [out], name="ConvT", kernel_shape=[2, 2],
                                   strides=[2, 2])]
        return [_f("Wt", r.integers(-15, 16, (3, 2, 2, 2)) * WEIGHT)]
    g = _exact_and_independent(_conv_graph(tmp_path / "m.onnx", 0.0371, 3.0, layer, (2, 4 * stride, 4 * stride)))
    shift = next(n for n in g.nodes if n.name.endswith("/zero_point"))
    assert shift.op == "conv" and shift.attrs.bias.tolist() == [-3, -3, -3]
    if stride == 2:
        csim_verified(tmp_path / "m.onnx", tmp_path / "prj", "io_stream", 100, 2 * 8 * 8)


def test_trunc_with_a_zero_point_rounds_its_ties_exactly(tmp_path):
    """Trunc(zero point 1/2) of an accumulator on its scale's grid: every inner value is a tie,
    half to even by the accumulator's parity, so the inner rounding is not integer-linear: a
    rescale of its own, then the Trunc's FLOOR by 4; its output's zero point is 1/8."""
    def add(nodes, src, out):
        nodes.append(helper.make_node("Trunc", [src, "s_acc", "half", "b16", "s_t", "b8"], [out], name="Trunc_1",
                                      domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="FLOOR"))
        return [_f("s_acc", ACT * WEIGHT), _f("half", 0.5), _f("b16", 16.0), _f("s_t", 4 * ACT * WEIGHT)]
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", add, in_shape=(1,)))
    assert [n.op for n in g.nodes] == ["dense", "rescale", "rescale", "dense", "rescale"]
    assert g.nodes[1].name == "Trunc_1/round_half_even" and g.scales[g.nodes[2].output].zero == (0.125,)
    # a wider sum: the inner rounding has more levels (10454) than the rescale's thresholds hold: the
    # piecewise op, whose dyadic step is R((2 acc + 1) / 2) itself, half to even on the shift
    wide = _exact_and_independent(_mlp(tmp_path / "w.onnx", add))
    assert [n.op for n in wide.nodes] == ["dense", "piecewise", "rescale", "dense", "rescale"]


def test_a_preprocessed_declared_input_before_a_padded_convolution(tmp_path):
    """MelGAN's first layer: ``(mel + 5) / 5`` on a float input declared ``fixed<16,6>``, then a
    Conv1d padded by 3: the codes' zero point (-5 * 2**10) is taken out by a 1x1 convolution
    whose offset lies on the input's grid (it was read on the integer grid, 2**10 times too
    large: every output differed from the file)."""
    r = np.random.default_rng(4)
    inits = [_f("five", 5.0), _f("Wc", r.integers(-15, 16, (3, 4, 7)) * WEIGHT), _f("sw", WEIGHT), _f("zero", 0.0),
             _f("b4", 4.0), _f("b8", 8.0), _f("s_y", 0.0437)]
    nodes = [helper.make_node("Add", ["x", "five"], ["shifted"], name="Add_0"),
             helper.make_node("Div", ["shifted", "five"], ["mel"], name="Div_0"),
             _quant("Wc", "sw", "zero", "b4", "Wcq"),
             helper.make_node("Conv", ["mel", "Wcq"], ["c"], name="Conv_1", kernel_shape=[7], pads=[3, 3]),
             _quant("c", "s_y", "zero", "b8", "y")]
    path = _save(tmp_path / "m.onnx", nodes, inits, (4, 6), (3, 6))
    g = _exact_and_independent(path, n=300, input_type="fixed<16,6>")
    shift = next(n for n in g.nodes if n.name.endswith("/zero_point"))
    assert shift.attrs.bias.tolist() == [5 << 10] * 4 and shift.attrs.btype.frac == 10
