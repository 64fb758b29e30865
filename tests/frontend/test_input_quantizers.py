"""The graph input's quantizers (frontend/handlers/quantizers.py and qcdq.py, state.py:
quantize_input, shared_input.py): a scale and zero point per channel or per element of a
vector, as QONNX Quant and as QuantizeLinear / DequantizeLinear; one input quantized twice (or
three times), differently.

Real inputs at every rounding tie of every quantizer, one float64 either side of it, and
beyond the ranges: the design's codes (the input map, then the integer semantics) equal the
user's file run in float64 by the independent executor, on every output.  Verify's samples are
the middles of the codes' intervals and never reach a tie: these tests do.  What cannot be
exact is refused in one line.  The models in C-simulation are the conformance suite's
(tests/conformance/inputs.py)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler import api
from tessera.compiler.independent import IndependentExecutor, output_differences
from tessera.compiler.ir.meaning import InputMap
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import input_samples

from .test_real_constants import refused_in_one_line

DOMAIN = "qonnx.custom_op.general"


def _const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _quant(x, out, scale, zero, bits, signed=1, narrow=0, mode="ROUND"):
    return helper.make_node("Quant", [x, scale, zero, bits], [out], domain=DOMAIN, name=f"Quant_{out}", signed=signed,
                            narrow=narrow, rounding_mode=mode)


def _save(path, nodes, inits, shape, outputs, opset=13):
    """A model of input ``x`` of per-sample ``shape`` and the named outputs, of the same shape."""
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *shape])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, *shape]) for o in outputs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, 1)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def _around(ties: np.ndarray) -> np.ndarray:
    """Each tie, and the float64 either side of it."""
    return np.concatenate([ties, np.nextafter(ties, -np.inf), np.nextafter(ties, np.inf)])


def _qonnx_codes(x: np.ndarray, scale, zero, lo: int, hi: int, rounding) -> np.ndarray:
    """QONNX's Quant codes ``clamp(R(x / s + z), lo, hi)`` in exact rationals (Python's: ``round``
    of a Fraction is half to even, ``math.floor`` / ``math.ceil``), element by element."""
    x, scale, zero = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.float64(scale), np.float64(zero))
    out = [min(max(rounding(Fraction(float(v)) / Fraction(float(s)) + Fraction(float(z))), lo), hi)
           for v, s, z in zip(x.ravel(), scale.ravel(), zero.ravel())]
    return np.array(out, dtype=np.int64).reshape(x.shape)


def _reference_equals_semantics(g) -> None:
    """The exact onnxruntime reference == the integer semantics on verify's samples."""
    samples = input_samples(g, 50, seed=3)
    assert np.array_equal(OrtReference(reference_model(g)).run(samples), run_ir(g, samples))


def _per_channel_model(path, scales, zeros):
    """One 8-bit unsigned Quant of a (3, 2, 2) input, a scale and zero point per channel (C, 1, 1)."""
    inits = [_const("s", np.reshape(scales, (3, 1, 1))), _const("z", np.reshape(zeros, (3, 1, 1))), _const("b", 8.0)]
    return _save(path, [_quant("x", "y", "s", "z", "b", signed=0)], inits, (3, 2, 2), ["y"])


def test_a_quantizer_per_channel_at_its_ties(tmp_path):
    scales = np.array([2.0 ** -3, 2.0 ** -5, np.float32(0.0371)])
    zeros = np.array([3.0, 128.0, 17.0])
    g = api.load_model(_per_channel_model(tmp_path / "m.onnx", scales, zeros))
    ties = [_around(np.concatenate([(np.arange(-1, 257) - z + 0.5) * s, [-1e9, 1e9]])) for s, z in zip(scales, zeros)]
    x = np.stack(ties, axis=1)[:, :, None, None].repeat(2, axis=2).repeat(2, axis=3)
    exact = _qonnx_codes(x, scales.reshape(1, 3, 1, 1), zeros.reshape(1, 3, 1, 1), 0, 255, round)
    assert np.array_equal(g.input_map.codes(x), exact)
    steps = g.input_map.channel_steps
    assert len(steps) == 3 and len({s.slope for s in steps}) == 3 and (g.input_map.lo, g.input_map.hi) == (0, 255)
    assert g.scales[g.input].channels == 3 and InputMap.from_json(g.input_map.to_json()) == g.input_map
    samples = input_samples(g, 50, seed=3)  # verify's codes span every channel's whole range
    assert all((samples[:, c].min(), samples[:, c].max()) == (0, 255) for c in range(3))
    _reference_equals_semantics(g)


def test_a_quantizer_per_element_of_a_vector_at_its_ties(tmp_path):
    """qonnx's channelwise Quant on the graph input ((1, 10) scale and zero point, real), read by a
    MatMul: each feature its own step; at the ties of each feature's codes."""
    rs = np.random.RandomState(0)
    scale, zero = rs.rand(1, 10).astype(np.float32), rs.rand(1, 10).astype(np.float32)
    inits = [_const("s", scale), _const("z", zero), _const("b", 4.0), _const("w", np.eye(10))]
    nodes = [_quant("x", "xq", "s", "z", "b", narrow=1),
             helper.make_node("MatMul", ["xq", "w"], ["y"], name="MatMul_0")]
    g = api.load_model(_save(tmp_path / "m.onnx", nodes, inits, (10,), ["y"]))
    x = _around((np.arange(-9.0, 9.0)[:, None] - zero + 0.5) * scale)
    assert np.array_equal(g.input_map.codes(x), _qonnx_codes(x, scale, zero, -7, 7, round))
    assert len(g.input_map.channel_steps) == 10 and g.scales[g.input].channels == 10
    _reference_equals_semantics(g)


def test_a_qcdq_pair_per_element_with_an_odd_zero_point_at_its_ties(tmp_path):
    """ONNX adds the zero point after rounding half to even (131: ties go the other way than
    QONNX's): one code range for every feature, each feature's scale its own.  Power-of-two
    scales, so that the file in float64 decides every tie exactly too."""
    scale = 2.0 ** -np.arange(1, 11)
    inits = [_const("s", scale), _const("z", 131, np.uint8), _const("w", np.eye(10))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="QuantizeLinear_x", axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="DequantizeLinear_x", axis=1),
             helper.make_node("MatMul", ["d", "w"], ["y"], name="MatMul_0")]
    path = _save(tmp_path / "m.onnx", nodes, inits, (10,), ["y"])
    g = api.load_model(path)
    x = _around((np.arange(-140, 140)[:, None] + 0.5) * scale)
    codes = g.input_map.codes(x)
    assert np.array_equal(codes + 131, np.clip(_qonnx_codes(x, scale, 0, -2 ** 20, 2 ** 20, round) + 131, 0, 255))
    theirs = IndependentExecutor(onnx.load(str(path))).run(x)
    assert not output_differences(g, theirs, run_ir(g, codes)).any()
    assert (g.input_map.lo, g.input_map.hi) == (-131, 124) and g.scales[g.input].channels == 10
    _reference_equals_semantics(g)


def _three_quantizers(path):
    """The (4,) input read by three Quants, each a graph output: 4 bits on 2**-3 (ROUND), 8 bits
    on 2**-5 (FLOOR) and 3 unsigned bits of scale 0.0371 with zero point 2 (CEIL)."""
    inits = [_const("s1", 2.0 ** -3), _const("s2", 2.0 ** -5), _const("s3", 0.0371), _const("z0", 0.0),
             _const("z3", 2.0), _const("b4", 4.0), _const("b8", 8.0), _const("b3", 3.0)]
    nodes = [_quant("x", "y1", "s1", "z0", "b4"), _quant("x", "y2", "s2", "z0", "b8", mode="FLOOR"),
             _quant("x", "y3", "s3", "z3", "b3", signed=0, mode="CEIL")]
    return _save(path, nodes, inits, (4,), ["y1", "y2", "y3"])


def test_an_input_quantized_three_times_at_every_tie(tmp_path):
    """The design's input is the cell of the real line; each quantizer a table of it, equal to
    QONNX's definition at and either side of every quantizer's every threshold."""
    s3 = float(np.float32(0.0371))
    ties = np.concatenate([(np.arange(-9, 9) + 0.5) * 2.0 ** -3, np.arange(-130, 130) * 2.0 ** -5,
                           (np.arange(-3, 7) - 2) * s3, [-1e300, 1e300, 0.0]])
    x = np.resize(_around(ties), (-(-3 * len(ties) // 4), 4))
    g = api.load_model(_three_quantizers(tmp_path / "m.onnx"))
    out = g.split_outputs(run_ir(g, g.input_map.codes(x)))
    exact = [_qonnx_codes(x * 8, 1, 0, -8, 7, round), _qonnx_codes(x * 32, 1, 0, -128, 127, math.floor),
             _qonnx_codes(x, s3, 2, 0, 7, math.ceil)]
    for ours, theirs in zip(out, exact):
        assert np.array_equal(ours, theirs)
    cells = g.input_map.cuts
    assert len(g.nodes) == 3 and g.values[g.input].hi == len(cells)
    assert InputMap.from_json(g.input_map.to_json()) == g.input_map
    sampled = g.split_outputs(run_ir(g, input_samples(g, 200, seed=1)))
    assert [(int(c.min()), int(c.max())) for c in sampled] == [(-8, 7), (-128, 127), (0, 7)]  # verify reaches each code
    _reference_equals_semantics(g)


def test_an_input_quantized_twice_per_channel_is_refused(tmp_path):
    inits = [_const("s", np.array([0.1, 0.2, 0.3]).reshape(3, 1, 1)), _const("s2", 2.0 ** -3), _const("z", 0.0),
             _const("b", 8.0)]
    nodes = [_quant("x", "y1", "s", "z", "b"), _quant("x", "y2", "s2", "z", "b")]
    refused_in_one_line(_save(tmp_path / "m.onnx", nodes, inits, (3, 2, 2), ["y1", "y2"]),
                        r"node 'Quant_y2' quantizes the graph input that node 'Quant_y1' quantizes, differently, "
                        r"and 'Quant_y1' is no one quantizer .* quantized per channel")


def test_an_input_quantized_twice_at_sixteen_bits_is_refused_before_any_threshold_is_searched(tmp_path):
    """Two 16-bit quantizers: up to 131,071 cells, more than a table holds; refused from the
    code counts alone (searching 131,070 float64 thresholds first once took minutes)."""
    inits = [_const("s", 2.0 ** -8), _const("s2", 0.003), _const("z", 0.0), _const("b", 16.0)]
    nodes = [_quant("x", "y1", "s", "z", "b"), _quant("x", "y2", "s2", "z", "b")]
    refused_in_one_line(_save(tmp_path / "m.onnx", nodes, inits, (4,), ["y1", "y2"]),
                        r"node 'Quant_y2' quantizes the graph input that node 'Quant_y1' quantizes, differently: "
                        r"its 2 quantizers have 131,071 codes in all, .* more than the 65,536 a table holds")


def test_a_quantizer_varying_over_the_positions_of_a_map_is_refused(tmp_path):
    inits = [_const("s", np.linspace(0.1, 0.5, 12).reshape(1, 3, 2, 2)), _const("z", 0.0), _const("b", 8.0)]
    refused_in_one_line(_save(tmp_path / "m.onnx", [_quant("x", "y", "s", "z", "b")], inits, (3, 2, 2), ["y"]),
                        r"node 'Quant_y' \(Quant\): scale of shape \[1, 3, 2, 2\] varies over the positions")


def test_a_relu_before_a_quantizer_per_channel_is_refused_where_the_ranges_differ(tmp_path):
    inits = [_const("s", np.array([0.1, 0.2, 0.3]).reshape(3, 1, 1)),
             _const("z", np.array([0.0, 5.0, -3.0]).reshape(3, 1, 1)), _const("b", 8.0)]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="Relu_0"), _quant("r", "y", "s", "z", "b")]
    refused_in_one_line(_save(tmp_path / "m.onnx", nodes, inits, (3, 2, 2), ["y"]),
                        r"node 'Quant_y' \(Quant\): a ReLU/Clip of the input before a quantizer per channel")
