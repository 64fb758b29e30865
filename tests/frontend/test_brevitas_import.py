"""Brevitas exports (QONNX and QCDQ) import into the IR whose exact reference equals the export."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
from brevitas import nn as qnn

from tessera.compiler.pipeline import compile_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.samples import sample_codes
from tessera.compiler.verdict import Execution
from tessera.compiler.verify import user_model_agreement
from tessera.models.quant import Int8ActPow2, Int8WeightPow2, Int16Bias, Uint8ActPow2
from tessera.models.train import export_model


def check(path, n=200):
    g = compile_ir(path)
    codes = sample_codes(g.values[g.input], n)
    ref = OrtReference(reference_model(g)).run(codes)
    assert np.array_equal(ref, run_ir(g, codes))
    agree = user_model_agreement(path, g, codes[:50], ref[:50])
    return g, agree


def test_conv3d_tanh_export_imports_exactly(tmp_path, brevitas_kit):
    Net3d, calibrated = brevitas_kit
    model = calibrated(Net3d(), (2, 4, 4, 4))
    path = export_model(model, torch.randn(1, 2, 4, 4, 4), tmp_path / "m.onnx")
    g, agree = check(path)
    assert [n.op for n in g.nodes] == ["conv", "relu", "requant", "maxpool", "flatten", "dense", "requant", "lut"]
    assert agree.execution is Execution.RAN and agree.differing_outputs == 0, agree


def test_tanh_on_an_accumulator_is_a_staircase_equal_to_the_file(tmp_path, brevitas_kit):
    """Tanh directly on the dense layer's accumulator (19 bits: no table holds it) and its Quant:
    thresholds over every reachable accumulator value, equal to the file in float64."""
    Net3d, calibrated = brevitas_kit
    model = Net3d()
    model.qi = nn.Identity()
    model = calibrated(model, (2, 4, 4, 4))
    path = export_model(model, torch.randn(1, 2, 4, 4, 4), tmp_path / "m.onnx")
    g, agree = check(path)
    assert [n.op for n in g.nodes][-2:] == ["dense", "staircase"]
    assert agree.execution is Execution.RAN and agree.differing_outputs == 0, agree


def test_qcdq_export_imports_exactly(tmp_path, brevitas_kit):
    _, calibrated = brevitas_kit
    from brevitas.export import export_onnx_qcdq

    model = calibrated(nn.Sequential(
        qnn.QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True),
        qnn.QuantLinear(6, 5, weight_quant=Int8WeightPow2, bias_quant=Int16Bias, return_quant_tensor=True),
        qnn.QuantReLU(act_quant=Uint8ActPow2, return_quant_tensor=True),
        qnn.QuantLinear(5, 2, weight_quant=Int8WeightPow2, bias_quant=Int16Bias, return_quant_tensor=True),
        qnn.QuantIdentity(act_quant=Int8ActPow2)), (6,))
    path = tmp_path / "qcdq.onnx"
    export_onnx_qcdq(model, torch.randn(1, 6), str(path), dynamo=False)
    import onnx

    assert any(n.op_type == "QuantizeLinear" for n in onnx.load(str(path)).graph.node)
    g, agree = check(path)
    assert [n.op for n in g.nodes] == ["dense", "relu", "requant", "dense", "requant"]
    assert agree.tool == "onnxruntime" and agree.execution is Execution.RAN and agree.differing_outputs == 0, agree
