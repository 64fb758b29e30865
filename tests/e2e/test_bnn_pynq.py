"""``brevitas_examples.bnn_pynq`` (shipped inside brevitas: FINN's TFC / SFC / LFC / CNV), exported
with brevitas' ``export_qonnx`` at random initialisation with BatchNorm statistics drawn away
from the identity: the exact reference equals the integer semantics and the exported file
run independently in float64 on every output; one MLP and one CNN also C-simulate."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tessera.compiler import api
from tessera.compiler.independent import independent_check
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes
from tessera.models.bnn_pynq import export_bnn_pynq


def export(name: str, path) -> str:
    return str(export_bnn_pynq(name, path))


@pytest.mark.parametrize("name,samples", [("tfc_1w1a", 300)] + [  # the default run keeps one model
    pytest.param(n, s, marks=pytest.mark.slow) for n, s in [("tfc_2w2a", 300), ("sfc_1w2a", 200), ("cnv_1w1a", 8), ("cnv_2w2a", 8)]])
def test_bnn_pynq_export_is_exact(tmp_path, name, samples):
    path = export(name, tmp_path / f"{name}.onnx")
    g = api.load_model(path)
    codes = sample_codes(g.values[g.input], samples, seed=2)
    ref = OrtReference(reference_model(g)).run(codes)
    assert np.array_equal(ref, run_ir(g, codes))
    rep = independent_check(onnx.load(path), g, codes, ref)
    assert rep.passed and rep.differing_outputs == 0, rep.line()
    assert rep.equal == rep.outputs == ref.size == samples * 10


@pytest.mark.csim
@pytest.mark.parametrize("name,io_type,samples", [("tfc_2w2a", "io_parallel", 200),  # the default run keeps the MLP
                                                  pytest.param("cnv_1w2a", "io_stream", 4, marks=pytest.mark.slow)])
def test_bnn_pynq_csim_verifies(tmp_path, name, io_type, samples):
    path = export(name, tmp_path / f"{name}.onnx")
    prj = api.compile_model(path, tmp_path / "prj", api.CompileOptions(io_type=io_type, tb_samples=8)).project
    rep = api.verify_project(path, prj, api.VerifyOptions(samples=samples))
    assert rep.mismatches == 0 and rep.outputs == samples * 10
    assert rep.independent.equal == rep.independent.outputs == rep.outputs
    assert rep.passed


@pytest.mark.slow
def test_resnet18_4w4a_is_exact(tmp_path):
    """bnn_pynq's ResNet-18 (residual adds of float-scaled codes, BatchNorm, TruncAvgPool as
    AveragePool + Trunc; 11.2 M weights, so no C-simulation here), its float input declared
    as fixed<8,1>: equal to the exported file on every output."""
    from tessera.models.bnn_pynq import INPUT_TYPES, RESNET18

    path = export(RESNET18, tmp_path / "r18.onnx")
    g = api.load_model(path, INPUT_TYPES[RESNET18])
    ops = [n.op for n in g.nodes]
    assert ops.count("add") == 8 and ops[-4:] == ["conv", "rescale", "flatten", "dense"]  # window sum + Trunc
    codes = sample_codes(g.values[g.input], 6, seed=2)
    ref = OrtReference(reference_model(g)).run(codes)
    assert np.array_equal(ref, run_ir(g, codes))
    rep = independent_check(onnx.load(path), g, codes, ref)
    assert rep.passed and rep.differing_outputs == 0, rep.line()
    assert rep.equal == rep.outputs == ref.size == 6 * 10


@pytest.mark.csim
@pytest.mark.slow
def test_tfc_trained_on_digits_csim_verifies(tmp_path):
    """TFC 2W2A after three epochs on the real digits (BatchNorm statistics from training):
    C-simulated on 200 random inputs and the 1,000 real test digits, every output equal to
    the exact reference and to the exported file."""
    from tessera.models.data.digits import load_digits

    path = str(export_bnn_pynq("tfc_2w2a", tmp_path / "tfc.onnx", epochs=3))
    data = tmp_path / "digits.npy"
    np.save(data, load_digits()[2])
    prj = api.compile_model(path, tmp_path / "prj", api.CompileOptions(io_type="io_parallel", tb_samples=8)).project
    rep = api.verify_project(path, prj, api.VerifyOptions(samples=200, data=data))
    assert rep.mismatches == 0 and rep.outputs == (200 + 1000) * 10
    assert rep.independent.equal == rep.independent.outputs == rep.outputs
    assert rep.passed
