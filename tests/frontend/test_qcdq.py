"""ONNX's QuantizeLinear / DequantizeLinear read by our own handlers (compiler/frontend/handlers/
qcdq.py) at every opset from 10, and run by the independent executor at every opset
(compiler/independent.py: onnx's evaluator has no DequantizeLinear below opset 19).

Each graph: the exact onnxruntime reference equals the integer semantics, and equals the
user's file run independently in float64 on every output of random full-range inputs (2,000;
200 for the convolutions).
The C-simulation of the same graphs is the conformance suite's (tests/conformance: qcdq_opset*,
brevitas_ort_qcdq_*)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler import api
from tessera.compiler.independent import IndependentExecutor

from ..conformance.cases import qcdq_opset
from .test_real_constants import _exact_and_independent, refused_in_one_line


@pytest.mark.parametrize("opset", range(10, 22))
def test_qcdq_at_every_opset_is_exact_and_runs_independently(tmp_path, opset):
    """uint8 input codes with an odd zero point, int8 (int4 at 21) weight codes per tensor (per
    output channel from 13) and an int32 bias through DequantizeLinear, a padded 3x3 conv, a
    ReLU and a uint8 output quantizer (narrowed to 4 bits by a Clip on its codes from 12)."""
    g = _exact_and_independent(qcdq_opset(opset)(tmp_path / "m.onnx"), n=200)
    assert [n.op for n in g.nodes] == ["conv", "rescale"]  # the ReLU clips in flight, for the quantizer
    conv = g.nodes[0]
    assert conv.attrs.weight.shape == (4, 3, 3, 3) and conv.attrs.pads == (1, 1, 1, 1)
    assert g.values[g.output].hi == (15 if opset >= 12 else 255)


def _int8(name, v, dtype=np.int8):
    return numpy_helper.from_array(np.asarray(v, dtype=dtype), name)


def _f(name, v):
    return numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)


def _save(path, nodes, inits, in_shape, out_shape, opset=13, x="x", y="y"):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, *in_shape])],
                          [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, *out_shape])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = max(8, helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))
    onnx.save(m, str(path))
    return path


def _pair(x, out, scale, zero, axis=None, clip=None):
    """QuantizeLinear -> [Clip on the codes] -> DequantizeLinear."""
    extra = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("QuantizeLinear", [x, scale, zero], [f"{out}_q"], name=f"QuantizeLinear_{out}", **extra)]
    codes = f"{out}_q"
    if clip:
        nodes.append(helper.make_node("Clip", [codes, *clip], [f"{out}_c"], name=f"Clip_{out}"))
        codes = f"{out}_c"
    nodes.append(helper.make_node("DequantizeLinear", [codes, scale, zero], [out], name=f"DequantizeLinear_{out}",
                                  **extra))
    return nodes


def _mlp(path, zero_in=131, per_channel_weights=True, middle=None, opset=13):
    """x -> QDQ(s 2**-4, uint8 zero point) -> MatMul(int8 codes, DequantizeLinear per column) ->
    ``middle`` (default: QDQ int8) -> MatMul -> QDQ int8."""
    r = np.random.default_rng(3)
    s_w = np.array([0.011, 0.0173, 0.0049, 0.0231, 0.02], dtype=np.float32) if per_channel_weights else np.float32(0.013)
    inits = [_f("s_x", 2.0 ** -4), _int8("z_x", zero_in, np.uint8), _int8("W1", r.integers(-127, 128, (6, 5))),
             _f("s_w1", s_w), _int8("z_w1", np.zeros(np.shape(s_w))), _int8("W2", r.integers(-127, 128, (5, 3))),
             _f("s_w2", 0.0113), _int8("z0", 0), _f("s_h", 0.0431), _f("s_y", 0.0173)]
    nodes = [*_pair("x", "xd", "s_x", "z_x"),
             helper.make_node("DequantizeLinear", ["W1", "s_w1", "z_w1"], ["W1d"], name="DequantizeLinear_W1", axis=1),
             helper.make_node("DequantizeLinear", ["W2", "s_w2", "z0"], ["W2d"], name="DequantizeLinear_W2"),
             helper.make_node("MatMul", ["xd", "W1d"], ["mm"], name="MatMul_1")]
    if middle is None:
        nodes += _pair("mm", "h", "s_h", "z0")
    else:
        inits += middle(nodes)
    nodes += [helper.make_node("MatMul", ["h", "W2d"], ["mm2"], name="MatMul_2"), *_pair("mm2", "y", "s_y", "z0")]
    return _save(path, nodes, inits, (6,), (3,), opset=opset)


def test_odd_zero_point_is_added_after_rounding_half_to_even(tmp_path):
    """ONNX: ``y = round_half_even(x / s) + z``; QONNX's Quant rounds ``x / s + z``: with an odd
    ``z`` the two differ on every tie.  Our input quantizer gives ONNX's codes on ties and
    between them."""
    path = _mlp(tmp_path / "m.onnx")
    g = _exact_and_independent(path)
    x = np.arange(-160.5, 160.5, 0.25).reshape(-1, 1) * 2.0 ** -4 * np.ones((1, 6))  # every fourth value a tie
    theirs = IndependentExecutor(onnx.load(str(path))).run_all(x)["xd_q"].astype(np.int64) - 131
    ours = g.input_map.codes(x)
    assert np.array_equal(ours, theirs)
    qonnx_rounding = np.clip(np.round(x / 2.0 ** -4 + 131), 0, 255) - 131  # numpy's round is half-even too
    assert np.any(qonnx_rounding != ours)  # the test can tell the two orders apart
    assert g.scales[g.input].zero == (0,) and (g.values[g.input].lo, g.values[g.input].hi) == (-131, 124)


def test_per_output_channel_conv_weights_keep_their_axis(tmp_path):
    """The form qonnx's QCDQToQuant turned into weights of the wrong shape (refused as
    ``kernel_shape=[1, 1] does not match the weights' [1, 16]``): DequantizeLinear axis 0 of
    (16, 8, 1, 1) int8 codes."""
    r = np.random.default_rng(0)
    inits = [_f("s_x", 0.0217), _int8("z_x", 0), _int8("W", r.integers(-127, 128, (16, 8, 1, 1))),
             _f("s_w", r.uniform(0.001, 0.01, 16)), _int8("z_w", np.zeros(16)), _f("s_y", 0.0731)]
    nodes = [*_pair("x", "xd", "s_x", "z_x"),
             helper.make_node("DequantizeLinear", ["W", "s_w", "z_w"], ["Wd"], name="DequantizeLinear_W", axis=0),
             helper.make_node("Conv", ["xd", "Wd"], ["c"], name="Conv_0", kernel_shape=[1, 1]),
             *_pair("c", "y", "s_y", "z_x")]
    g = _exact_and_independent(_save(tmp_path / "m.onnx", nodes, inits, (8, 3, 3), (16, 3, 3)))
    assert g.nodes[0].op == "conv" and g.nodes[0].attrs.weight.shape == (16, 8, 1, 1)


def test_per_channel_activation_quantizer(tmp_path):
    """A QDQ pair with one scale per channel (axis 1) between two layers: the primitive per
    channel, read by a layer that folds each channel's scale into its integer weights."""
    def middle(nodes):
        nodes += _pair("mm", "h", "s_hc", "z_hc", axis=1)
        return [_f("s_hc", [0.0431, 0.11, 0.0625, 0.023, 0.07]), _int8("z_hc", np.zeros(5))]
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", middle=middle))
    assert g.scales[g.nodes[1].output].channels == 5


def test_even_zero_points_per_channel(tmp_path):
    """Zero points per channel, every one even: ``round_half_even(v) + z == round_half_even(v + z)``."""
    def middle(nodes):
        nodes += _pair("mm", "h", "s_hc", "z_hc", axis=1)
        return [_f("s_hc", [0.0431, 0.11, 0.0625, 0.023, 0.07]), _int8("z_hc", [0, 2, -4, 6, 0])]
    _exact_and_independent(_mlp(tmp_path / "m.onnx", middle=middle))


def test_narrowing_clip_and_shifted_range(tmp_path):
    """A Clip on the codes to [3, 200] of a uint8 quantizer with zero point 101: codes -98..99
    (no bit width's range): a clip of the real value before the Quant."""
    def middle(nodes):
        nodes += _pair("mm", "h", "s_h", "z_h", clip=["c_lo", "c_hi"])
        return [_int8("z_h", 101, np.uint8), _int8("c_lo", 3, np.uint8), _int8("c_hi", 200, np.uint8)]
    g = _exact_and_independent(_mlp(tmp_path / "m.onnx", middle=middle))
    mid = g.values[g.nodes[1].output]
    assert (mid.lo, mid.hi) == (-98, 99)


def test_quantize_linear_of_constant_weights(tmp_path):
    """Brevitas' ``export_weight_q_node=True``: float weights -> QuantizeLinear -> Clip ->
    DequantizeLinear, per output channel, the division decided in exact rationals."""
    r = np.random.default_rng(1)
    s_w = np.array([3 * 2.0 ** -8, 5 * 2.0 ** -9, 7 * 2.0 ** -10], dtype=np.float32)  # float32 holds (k + 1/2) s
    w = (r.integers(-127, 127, (6, 3)) + np.where(r.random((6, 3)) < 0.5, 0.5, 0.0)) * s_w  # ties among them
    inits = [_f("s_x", 2.0 ** -4), _int8("z0", 0), _f("W", w), _f("s_w", s_w), _int8("z_w", np.zeros(3)),
             _int8("lo", -127), _int8("hi", 127), _f("s_y", 0.0173)]
    nodes = [*_pair("x", "xd", "s_x", "z0"), *_pair("W", "Wd", "s_w", "z_w", axis=1, clip=["lo", "hi"]),
             helper.make_node("MatMul", ["xd", "Wd"], ["mm"], name="MatMul_0"), *_pair("mm", "y", "s_y", "z0")]
    path = _save(tmp_path / "m.onnx", nodes, inits, (6,), (3,))
    g = _exact_and_independent(path)
    theirs = IndependentExecutor(onnx.load(str(path))).run_all(np.zeros((1, 6)))["Wd_c"]
    assert np.array_equal(g.nodes[0].attrs.weight, theirs)


@pytest.mark.parametrize("change,match", [
    (lambda m: m.graph.node[2].attribute.append(helper.make_attribute("block_size", 2)),
     r"node 'DequantizeLinear_W1' \(DequantizeLinear\): attribute block_size=2 is not supported"),
    (lambda m: (m.graph.initializer.append(_f("s_other", 0.5)), m.graph.node[1].input.__setitem__(1, "s_other")),
     r"node 'DequantizeLinear_xd' \(DequantizeLinear\): its scale / zero point / axis differ from those of "
     r"QuantizeLinear 'QuantizeLinear_xd'"),
    (lambda m: m.graph.node[4].input.__setitem__(0, "xd_q"),
     r"node 'MatMul_1' \(MatMul\)"),
])
def test_refused_in_one_line(tmp_path, change, match):
    path = _mlp(tmp_path / "m.onnx", opset=21)
    m = onnx.load(str(path))
    change(m)
    onnx.save(m, str(path))
    refused_in_one_line(path, match)


def test_odd_zero_points_that_differ_per_channel_are_refused(tmp_path):
    def middle(nodes):
        nodes += _pair("mm", "h", "s_hc", "z_hc", axis=1)
        return [_f("s_hc", [0.0431, 0.11, 0.0625, 0.023, 0.07]), _int8("z_hc", [0, 3, -4, 6, 0])]
    refused_in_one_line(_mlp(tmp_path / "m.onnx", middle=middle),
                        r"zero points \[-4, 0, 3, 6\] differ per channel and 3 is odd: round_half_even\(v\) \+ z")


def test_per_axis_along_a_non_channel_axis_is_refused(tmp_path):
    r = np.random.default_rng(0)
    inits = [_f("s_x", [0.02, 0.03, 0.05]), _int8("z_x", np.zeros(3)), _f("W", r.integers(-7, 8, (2, 2, 1, 1)) * 0.25),
             _f("s_y", 0.0731), _int8("z0", 0)]
    nodes = [*_pair("x", "xd", "s_x", "z_x", axis=2), helper.make_node("Conv", ["xd", "W"], ["c"], name="Conv_0",
                                                                          kernel_shape=[1, 1]),
             *_pair("c", "y", "s_y", "z0")]
    refused_in_one_line(_save(tmp_path / "m.onnx", nodes, inits, (2, 3, 3), (2, 3, 3)),
                        r"per-axis quantization of an activation along axis 2, not its channels")


def test_float8_codes_are_refused(tmp_path):
    path = _mlp(tmp_path / "m.onnx", opset=19)
    m = onnx.load(str(path))
    m.graph.initializer.append(helper.make_tensor("z_f8", TensorProto.FLOAT8E4M3FN, [], [0.0]))
    for n in m.graph.node[-2:]:
        n.input[2] = "z_f8"
    onnx.save(m, str(path))
    refused_in_one_line(path, r"node 'QuantizeLinear_y' \(QuantizeLinear\): codes of type FLOAT8E4M3FN are not "
                              r"supported")


def test_per_axis_scale_before_opset_13_is_refused(tmp_path):
    """A vector scale at opset 12 (no axis attribute yet: the checker refuses one)."""
    path = _mlp(tmp_path / "m.onnx", opset=12)
    m = onnx.load(str(path))
    del m.graph.node[2].attribute[:]
    onnx.save(m, str(path))
    refused_in_one_line(path, r"node 'DequantizeLinear_W1' \(DequantizeLinear\): a scale of shape \[5\] at opset 12")


def test_dequantize_linear_of_the_graph_input_is_refused(tmp_path):
    nodes = [helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="DequantizeLinear_x")]
    refused_in_one_line(_save(tmp_path / "m.onnx", nodes, [_f("s", 0.5)], (4,), (4,)),
                        r"node 'DequantizeLinear_x' \(DequantizeLinear\): its input '.*' is neither integer constants")


def test_the_compiled_design_reads_no_qonnx_transformation(tmp_path):
    """The handlers read the file's own nodes: no Quant in the cleaned model."""
    from tessera.compiler.frontend.clean import clean

    cleaned = clean(onnx.load(str(_mlp(tmp_path / "m.onnx"))))
    assert {n.op_type for n in cleaned.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    assert api.load_model(tmp_path / "m.onnx").nodes


def test_a_tie_at_a_quantize_linear_is_diagnosed_at_its_dequantize_linear(tmp_path):
    """Where the user's file and the exact values differ, the first differing node is the
    DequantizeLinear, with the QuantizeLinear's pre-rounding value ``x / y_scale``: here an
    exact tie (distance 0 to the boundary), which float64 cannot misplace but the diagnosis
    must see as one."""
    from tessera.compiler.independent import diagnose

    inits = [_f("s_x", 2.0 ** -4), _int8("z0", 0), _int8("W", np.ones((2, 1))), _f("s_w", 2.0 ** -3),
             _f("s_h", 2.0 ** -6)]
    nodes = [*_pair("x", "xd", "s_x", "z0"),
             helper.make_node("DequantizeLinear", ["W", "s_w", "z0"], ["Wd"], name="DequantizeLinear_W"),
             helper.make_node("MatMul", ["xd", "Wd"], ["mm"], name="MatMul_0"), *_pair("mm", "y", "s_h", "z0")]
    path = _save(tmp_path / "m.onnx", nodes, inits, (2,), (1,))
    g = api.load_model(path)
    executor = IndependentExecutor(onnx.load(str(path)))
    x = np.array([[3 * 2.0 ** -4, 0.0]])  # mm / s_h = 3 / 2: rounds half to even, to 2
    y = executor.run_all(x)["y"]
    assert y.ravel().tolist() == [2 * 2.0 ** -6]
    ir = next(v for v, n in g.origin.items() if n == "DequantizeLinear_y")
    (found,) = diagnose(executor, g, x, {ir: y + 2.0 ** -6})  # as if the tie had gone up
    assert found.at.node == "DequantizeLinear_y" and found.at.pre_rounding == 1.5 and found.undecidable
