"""``Clip`` and ReLU on real values, exactly (issue: real-world models).

PyTorch's ``ReLU6`` and ``Hardtanh`` export as ``Clip``.  Between a layer and its Quant, or on
the input before its first Quant, the clip's real bounds become the Quant's clamp (its rounding
is monotone: ``R(clip(u, L, H)) = clip(R(u), R(L), R(H))``), so nothing is approximated.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper


from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


def brevitas_hardtanh(path, seed=0):
    """QuantIdentity, QuantConv2d 4-bit, BatchNorm, ``nn.Hardtanh(-0.3, 0.4)`` (exported as
    Clip, bounds off the Quant's grid), QuantIdentity, QuantLinear: Brevitas defaults."""
    import torch
    from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear
    from torch import nn

    from tessera.models.train import export_model

    torch.manual_seed(seed)
    model = nn.Sequential(QuantIdentity(return_quant_tensor=True), QuantConv2d(1, 3, 3, weight_bit_width=4, bias=False),
                          nn.BatchNorm2d(3), nn.Hardtanh(-0.3, 0.4), QuantIdentity(return_quant_tensor=True),
                          nn.Flatten(), QuantLinear(3 * 4 * 4, 4, bias=True))
    with torch.no_grad():
        model[2].running_var.uniform_(0.5, 2.0)
        model[2].weight.uniform_(0.5, 1.5)
    return export_model(model, torch.randn(1, 1, 6, 6), path)


def _rescale_bounds(g):
    steps = [n.attrs.steps for n in g.nodes if n.op == "rescale"]
    return [(s.qmin, s.qmax) for st in steps for s in st]


def test_brevitas_hardtanh_clip_is_exact(tmp_path):
    import onnx

    path = brevitas_hardtanh(tmp_path / "m.onnx")
    assert any(n.op_type == "Clip" for n in onnx.load(str(path)).graph.node)
    g = _exact_and_independent(path, 1000)
    lo, hi = _rescale_bounds(g)[0]
    assert -128 < lo < 0 < hi < 127  # the clip narrowed the 8-bit Quant's clamp


@pytest.mark.parametrize("opset", [9, 13])
def test_clip_of_the_input_before_its_quant_is_exact(tmp_path, opset):
    """``Quant(0.5 * clip(x - 3, -0.7, 1.1))`` on a real input: preprocessing, a clip, more
    preprocessing (the bounds carried through it), folded into the input's quantizer; opset
    9's Clip carries its bounds as attributes."""
    inits = [_f("three", 3.0), _f("half", 0.5), _f("s", 0.0371), _f("zero", 0.0), _f("b6", 6.0), _f("lo", -0.7),
             _f("hi", 1.1)]
    sub = helper.make_node("Sub", ["x", "three"], ["p"], name="sub")
    clip = helper.make_node("Clip", ["p"], ["c"], name="clip", min=-0.7, max=1.1) if opset < 11 else \
        helper.make_node("Clip", ["p", "lo", "hi"], ["c"], name="clip")
    mul = helper.make_node("Mul", ["c", "half"], ["h"], name="mul")
    path = _save(tmp_path / "m.onnx", [sub, clip, mul, _quant("h", "s", "zero", "b6", "y")], inits, (5,), (5,),
                 opset=opset)
    g = _exact_and_independent(path, 2000)
    assert (g.input_map.lo, g.input_map.hi) == (-9, 15)  # R(-0.35 / s), R(0.55 / s) inside [-32, 31]
    codes = g.input_map.codes(np.linspace(-3, 9, 4001))
    assert codes.min() == -9 and codes.max() == 15


def test_relu_of_the_input_before_its_quant_is_exact(tmp_path):
    inits = [_f("s", 2.0**-4), _f("zero", 0.0), _f("b5", 5.0)]
    path = _save(tmp_path / "m.onnx", [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                                       _quant("r", "s", "zero", "b5", "y")], inits, (4,), (4,))
    g = _exact_and_independent(path, 500)
    assert (g.input_map.lo, g.input_map.hi) == (0, 15)


def test_a_clip_no_quant_reads_is_refused_in_one_line(tmp_path):
    inits = [_f("s", 2.0**-4), _f("zero", 0.0), _f("b8", 8.0), _f("W", np.eye(4)), _f("lo", 0.0), _f("hi", 0.5)]
    nodes = [_quant("x", "s", "zero", "b8", "xq"), _quant("W", "s", "zero", "b8", "Wq"),
             helper.make_node("MatMul", ["xq", "Wq"], ["m"], name="mm"),
             helper.make_node("Clip", ["m", "lo", "hi"], ["y"], name="clip")]
    refused_in_one_line(_save(tmp_path / "m.onnx", nodes, inits, (4,), (4,)),
                        r"node 'clip': a ReLU/Clip/LeakyRelu at the graph output without a Quant")


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_clip_csim_equals_reference_and_users_model(tmp_path, io_type):
    csim_verified(brevitas_hardtanh(tmp_path / "m.onnx"), tmp_path / "prj", io_type, 300, 4)
