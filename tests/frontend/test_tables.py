"""Nonlinearities followed by a Quant, as one lookup table over the input's codes: ONNX
``HardSigmoid``, ``HardSwish``, ``Elu``, ``Selu``, ``Celu``, ``Softsign``, ``Softplus`` and
``ThresholdedRelu`` beside ``Sigmoid`` / ``Tanh`` (each function in float64 with the model's
float32 attributes, then the Quant's rounding: docs/bit-exact.md).  The exact reference equals
the file run in float64 on every output of every input code, and the C-simulation equals the
reference."""

from __future__ import annotations

import pytest
from onnx import helper

from tessera.compiler import api
from tessera.compiler.errors import ModelLoadError

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line

FUNCTIONS = [("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}), ("Elu", {}),
             ("Elu", {"alpha": 0.7}), ("Selu", {}), ("Celu", {"alpha": 1.5}), ("Softsign", {}), ("Softplus", {}),
             ("ThresholdedRelu", {"alpha": 0.5})]


def _table(path, op: str, attrs: dict, out_scale: float = 0.03125):
    """Quant(x, 2**-4, 8 bits) -> ``op`` -> Quant(2**-5, 8 bits)."""
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("s_y", out_scale)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), helper.make_node(op, ["xq"], ["f"], name="f", **attrs),
             _quant("f", "s_y", "zero", "b8", "y")]
    return _save(path, nodes, inits, [16], [16], opset=14)


@pytest.mark.parametrize("op,attrs", FUNCTIONS, ids=[f"{op}{'-' + str(a) if a else ''}" for op, a in FUNCTIONS])
def test_a_nonlinearity_before_its_quant_is_one_exact_table(tmp_path, op, attrs):
    g = _exact_and_independent(_table(tmp_path / "m.onnx", op, attrs), 3000)
    (node,) = g.nodes
    assert node.op == "lut" and node.attrs.function == op.lower()


def test_a_nonlinearity_without_its_quant_is_refused_in_one_line(tmp_path):
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0)]
    path = _save(tmp_path / "m.onnx", [_quant("x", "s_x", "zero", "b8", "xq"),
                                       helper.make_node("HardSwish", ["xq"], ["y"], name="f")], inits, [16], [16], opset=14)
    refused_in_one_line(path, r"node 'f' \(HardSwish\): a nonlinearity must be followed by a Quant to be exact")


@pytest.mark.csim
def test_table_csim_equals_reference_and_users_model(tmp_path):
    csim_verified(_table(tmp_path / "m.onnx", "HardSwish", {}), tmp_path / "prj", "io_parallel", 300, 16)


def _float_table(path, op: str, in_scale: float, out_scale: float):
    """Quant(x, in_scale) -> ``op`` -> Quant(out_scale): brevitas' default float-scale
    activation quantizers around a QuantSigmoid / QuantTanh."""
    inits = [_f("s_x", in_scale), _f("zero", 0.0), _f("b8", 8.0), _f("s_y", out_scale)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), helper.make_node(op, ["xq"], ["f"], name="f"),
             _quant("f", "s_y", "zero", "b8", "y")]
    return _save(path, nodes, inits, [16], [16], opset=14)


@pytest.mark.parametrize("op,in_scale,out_scale", [("Sigmoid", 0.0371, 0.00392), ("Tanh", 0.0625, 0.0079),
                                                   ("HardSwish", 0.0213, 0.0625), ("Elu", 0.0371, 0.0213)])
def test_a_table_between_float_scales_is_exact(tmp_path, op, in_scale, out_scale):
    g = _exact_and_independent(_float_table(tmp_path / "m.onnx", op, in_scale, out_scale), 3000)
    (node,) = g.nodes
    assert node.op == "lut" and (node.attrs.mult == 1) == (out_scale == 0.0625)  # 2**-4: a grid
    assert (node.attrs.in_scale is None) == (in_scale == 0.0625)


@pytest.mark.csim
def test_float_scale_table_csim_equals_reference_and_users_model(tmp_path):
    csim_verified(_float_table(tmp_path / "m.onnx", "Sigmoid", 0.0371, 0.00392), tmp_path / "prj", "io_stream", 300, 16)


def test_an_operator_the_models_opset_lacks_is_refused_in_one_line(tmp_path):
    """HardSwish exists from opset 14: a file declaring opset 13 is not a valid model."""
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("s_y", 0.03125)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), helper.make_node("HardSwish", ["xq"], ["f"], name="f"),
             _quant("f", "s_y", "zero", "b8", "y")]
    path = _save(tmp_path / "m.onnx", nodes, inits, [16], [16], opset=13)
    with pytest.raises(ModelLoadError, match=r"fails ONNX validation: No Op registered for HardSwish with "
                                             r"domain_version of 13") as info:
        api.load_model(path)
    assert "\n" not in str(info.value)
