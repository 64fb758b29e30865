"""Preprocessing of the input by constants per channel (a mean / std normalization, shape
[1, C, 1, 1]), folded into the design's input (compiler/frontend/real.py: preprocess_input;
ir/meaning.py: InputMap.channel_steps): before the model's first Quant, one step of the
primitive per channel on the real input; before a layer reading a typed input (FINN's UINT8
image), a scale and zero point per channel of the input codes, folded into its weights.

Each graph: the exact onnxruntime reference equals the integer semantics, and equals the
user's file run independently in float64 on every output.  FINN's MobileNet-v1 form in
C-simulation is the conformance suite's (finn_mobilenet_preprocessing)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import helper

from tessera.compiler.api import CompileOptions, VerifyOptions, compile_model, verify_project
from tessera.compiler.ir.meaning import InputMap

from .test_real_constants import _exact_and_independent, _f, _quant, _save, refused_in_one_line

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 3, 1, 1)


def _normalized(path, quantize_input=True, pads=(0, 0, 0, 0), clip_first=False):
    """x -> [Clip] -> x / 255 -> - mean_c -> / 0.226 -> [Quant, 8 bits, scale 0.0371] -> Conv 3x3
    (4-bit weights) -> Quant."""
    r = np.random.default_rng(7)
    inits = [_f("k255", 255.0), _f("mean", MEAN), _f("std", 0.226), _f("s_in", 0.0371), _f("zero", 0.0),
             _f("b8", 8.0), _f("b4", 4.0), _f("sw", 2.0 ** -3), _f("W", r.integers(-7, 8, (4, 3, 3, 3)) * 2.0 ** -3),
             _f("s_y", 0.173), _f("lo", 0.0), _f("hi", 200.0)]
    nodes, x = [], "x"
    if clip_first:
        nodes.append(helper.make_node("Clip", ["x", "lo", "hi"], ["xc"], name="Clip_0"))
        x = "xc"
    nodes += [helper.make_node("Div", [x, "k255"], ["x1"], name="Div_0"),
              helper.make_node("Sub", ["x1", "mean"], ["x2"], name="Sub_0"),
              helper.make_node("Div", ["x2", "std"], ["x3"], name="Div_1"), _quant("W", "sw", "zero", "b4", "Wq")]
    src = "x3"
    if quantize_input:
        nodes.append(_quant("x3", "s_in", "zero", "b8", "xq"))
        src = "xq"
    nodes += [helper.make_node("Conv", [src, "Wq"], ["c"], name="Conv_0", kernel_shape=[3, 3], pads=list(pads)),
              _quant("c", "s_y", "zero", "b8", "y")]
    out = (4, 6 + pads[0] + pads[2], 6 + pads[1] + pads[3])
    return _save(path, nodes, inits, (3, 8, 8), out, annotate=None if quantize_input else "UINT8")


def test_mean_std_per_channel_before_the_input_quant(tmp_path):
    """One step of the primitive per channel: code = clamp(R((x / 255 - mean_c) / std / s))."""
    g = _exact_and_independent(_normalized(tmp_path / "m.onnx"), n=300)
    steps = g.input_map.channel_steps
    assert g.input_map.step is None and len(steps) == 3 and len({s.offset for s in steps}) == 3
    assert InputMap.from_json(g.input_map.to_json()) == g.input_map
    x = np.random.default_rng(0).uniform(-20, 280, (4, 3, 8, 8))
    mean, std, s = ([Fraction(float(v)) for v in np.ravel(a)] for a in (MEAN, np.float32(0.226), np.float32(0.0371)))
    exact = [[min(max(round((Fraction(float(v)) / 255 - mean[c]) / std[0] / s[0]), -128), 127)
              for v in x[:, c].ravel()] for c in range(3)]  # Python rounds a Fraction half to even
    assert np.array_equal(g.input_map.codes(x), np.array(exact).reshape(3, 4, 8, 8).transpose(1, 0, 2, 3))


def test_mean_std_per_channel_on_a_typed_input(tmp_path):
    """FINN's form: a UINT8 input, its preprocessing a scale and zero point per channel of the
    codes, folded into the convolution's weights and offset."""
    g = _exact_and_independent(_normalized(tmp_path / "m.onnx", quantize_input=False), n=300)
    meaning = g.scales[g.input]
    assert meaning.channels == 3 and len(set(meaning.zero)) == 3 and g.input_map.step is None


def test_padded_convolution_of_a_normalized_input_is_refused(tmp_path):
    """Real 0 (the padding) is code 255 * mean_c of a UINT8 input: no code."""
    refused_in_one_line(_normalized(tmp_path / "m.onnx", quantize_input=False, pads=(1, 1, 1, 1)),
                        r"node 'Conv_0' \(Conv\): a zero point .* on a padded")


def test_a_clip_before_a_per_channel_preprocessing_is_refused(tmp_path):
    refused_in_one_line(_normalized(tmp_path / "m.onnx", clip_first=True),
                        r"node 'Sub_0' \(Sub\): a ReLU/Clip of the input before a preprocessing per channel")


@pytest.mark.csim
def test_per_channel_input_quantizer_in_c_simulation(tmp_path):
    """The project's manifest carries the per-channel steps: emulate and verify quantize real
    inputs with them; the C-simulation equals the reference and the file in float64."""
    path = _normalized(tmp_path / "m.onnx")
    result = compile_model(path, tmp_path / "prj", CompileOptions(tb_samples=4))
    report = verify_project(path, result.project, VerifyOptions(samples=100, user_samples=0, require_independent=True))
    assert report.passed and report.mismatches == 0, report.verdict()
    assert report.independent.equal == report.outputs
    m = onnx.load(str(path))
    assert [n.op_type for n in m.graph.node][:3] == ["Div", "Sub", "Div"]
