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

from tessera.models.brevitas_default import brevitas_residual

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


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
    text = refused_in_one_line(path)
    assert "'/Add'" in text and "BatchNormalization" in text and "QuantIdentity" in text


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("model", ["brevitas", "per_channel"])
def test_residual_csim_equals_reference_and_users_model(tmp_path, model, io_type):
    path = (brevitas_residual if model == "brevitas" else per_channel_residual)(tmp_path / "m.onnx")
    csim_verified(path, tmp_path / "prj", io_type, 300, 5 if model == "brevitas" else 6)
