"""The residual Add of two differently scaled tensors, exactly (issue: real-world models).

A Brevitas default-quantizer residual block adds two tensors with unrelated float scales.
The frontend aligns them with positive integer weights ``k1 * q1 + k2 * q2`` (per channel
where the real scales differ per channel) and the Quant after the Add becomes one proven
``rescale``; what cannot be aligned within the exact widths is refused in one line.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tessera.compiler import api
from tessera.compiler.errors import UnsupportedModelError

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified


def brevitas_residual(path, quantized_branch=True, seed=0):
    """A Brevitas residual CNN with default quantizers (8-bit float-scale input, 4-bit
    weights and ReLU, BatchNorm with drawn statistics), exported with brevitas' exporter:
    ``relu(q(bn(conv(h))) + h)``, the two addends with different float scales."""
    import torch
    from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantReLU
    from torch import nn

    from tessera.models.train import export_model

    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = QuantIdentity(return_quant_tensor=True)
            self.conv1 = QuantConv2d(1, 4, 3, padding=1, weight_bit_width=4)
            self.bn1 = nn.BatchNorm2d(4)
            self.relu1 = QuantReLU(bit_width=4, return_quant_tensor=True)
            self.conv2 = QuantConv2d(4, 4, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(4)
            self.branch = QuantIdentity(return_quant_tensor=False) if quantized_branch else nn.Identity()
            self.relu2 = QuantReLU(return_quant_tensor=True)
            self.fc = QuantLinear(4 * 8 * 8, 5, bias=True)

        def forward(self, x):
            h = self.relu1(self.bn1(self.conv1(self.inp(x))))
            return self.fc(torch.flatten(self.relu2(self.branch(self.bn2(self.conv2(h))) + h), 1))

    torch.manual_seed(seed)
    model = Residual()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(-1.5, 1.5)
    return export_model(model, torch.randn(1, 1, 8, 8), path)


def per_channel_residual(path):
    """``Quant(c * (x @ W) + x)``: a power-of-two layer scaled per channel by dyadic
    constants, added to its own input; the Add's weights differ per channel."""
    r = np.random.default_rng(3)
    c = np.array([0.5, 0.75, 1.25, 1.5, 0.375, 1.0])
    inits = [_f("W", r.normal(0, 0.3, (6, 6))), _f("s_x", 2.0**-4), _f("s_w", 2.0**-3), _f("zero", 0.0), _f("b8", 8.0),
             _f("b4", 4.0), _f("c", c), _f("s_y", 0.0371)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("W", "s_w", "zero", "b4", "Wq", narrow=1),
             helper.make_node("MatMul", ["xq", "Wq"], ["mm"], name="MatMul_1"),
             helper.make_node("Mul", ["mm", "c"], ["scaled"], name="Mul_1"),
             helper.make_node("Add", ["scaled", "xq"], ["sum"], name="Add_1"),
             _quant("sum", "s_y", "zero", "b8", "y")]
    return _save(path, nodes, inits, (6,), (6,))


def _add(g):
    (add,) = [n for n in g.nodes if n.op == "add"]
    return add


def test_brevitas_residual_of_differently_scaled_tensors_is_exact(tmp_path):
    g = _exact_and_independent(brevitas_residual(tmp_path / "m.onnx"), 500)
    add = _add(g)
    assert len(add.attrs.k1) == len(add.attrs.k2) == 1 and not add.attrs.unit  # one float scale each, unrelated
    assert g.producer(add.output) is add and any(n.op == "rescale" and n.inputs == [add.output] for n in g.nodes)


def test_per_channel_alignment_is_exact(tmp_path):
    g = _exact_and_independent(per_channel_residual(tmp_path / "m.onnx"), 2000)
    add = _add(g)
    assert len(set(zip(add.attrs.k1, add.attrs.k2))) > 1  # the weights differ per channel


def test_unalignable_residual_is_refused_in_one_line(tmp_path):
    """A BatchNorm output in flight (float64 rationals) cannot be aligned with a float32
    scale within the exact widths: refused, naming the Add, both sources and the fix."""
    path = brevitas_residual(tmp_path / "m.onnx", quantized_branch=False)
    with pytest.raises(UnsupportedModelError) as exc:
        api.load_model(path)
    text = str(exc.value)
    assert "\n" not in text and "'/Add'" in text and "BatchNormalization" in text and "QuantIdentity" in text


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("model", ["brevitas", "per_channel"])
def test_residual_csim_equals_reference_and_users_model(tmp_path, model, io_type):
    path = (brevitas_residual if model == "brevitas" else per_channel_residual)(tmp_path / "m.onnx")
    csim_verified(path, tmp_path / "prj", io_type, 300, 5 if model == "brevitas" else 6)
