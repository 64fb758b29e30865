"""The public QONNX model zoo, as users bring it (``../shared/third_party/qonnx_model_zoo``
beside the checkout, or ``$TESSERA_THIRD_PARTY/qonnx_model_zoo``): legacy custom-op domains
without opset imports, opset 9/11, float input preprocessing, BatchNormalization,
BipolarQuant, a ``finn_datatype`` BIPOLAR input, float and per-channel scales, a trailing
Softmax.  Each file compiles, its g++ C-simulation equals the exact reference on every
output, and the exact reference equals the user's own file run independently in float64.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tessera.compiler import api
from tessera.compiler.verdict import Execution

ROOT = Path(__file__).resolve().parents[2]
ZOO = Path(os.environ.get("TESSERA_THIRD_PARTY", ROOT.parent / "shared" / "third_party")) / "qonnx_model_zoo" / "models"

#: (file, declared input type of a float input no Quant reads)
MODELS = {
    "TFC_1W1A": ("MNIST/Brevitas_FINN_TFC/TFC/TFC_1W1A.onnx", None),
    "TFC_1W2A": ("MNIST/Brevitas_FINN_TFC/TFC/TFC_1W2A.onnx", None),
    "TFC_2W2A": ("MNIST/Brevitas_FINN_TFC/TFC/TFC_2W2A.onnx", None),
    "jettagging": ("JetTagging/QKeras_hls4ml_3layer/qkeras_jettagging.onnx", "fixed<16,6>"),
    "unsw_nb15": ("UNSW_NB15/unsw_nb15_mlp_w2a2/unsw_nb15-mlp-w2a2.onnx", None),
    "kwsmlp": ("GSCV2/kwsmlp_w3a3/kwsmlp_w3a3.onnx", None),
}

needs_zoo = pytest.mark.skipif(not ZOO.is_dir(), reason=f"the QONNX model zoo is not at {ZOO} (set TESSERA_THIRD_PARTY)")


@needs_zoo
@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_imports_with_exact_requantization(name):
    path, input_type = MODELS[name]
    g = api.load_model(ZOO / path, input_type)
    ops = [n.op for n in g.nodes]
    assert ops.count("dense") == 4, ops
    if name != "jettagging":  # float scales / BatchNorm: every layer ends in the exact primitive
        assert ops.count("rescale") == 3 + (name == "unsw_nb15"), ops


@needs_zoo
def test_float_input_without_a_quant_is_refused_in_one_line_without_a_declared_type():
    from tessera.compiler.errors import UnsupportedModelError

    with pytest.raises(UnsupportedModelError, match=r"feeds MatMul node .*--input-type") as exc:
        api.load_model(ZOO / MODELS["jettagging"][0])
    assert "\n" not in str(exc.value)


@needs_zoo
@pytest.mark.csim
@pytest.mark.parametrize("name,io_type", [("TFC_1W1A", "io_parallel")] + [  # the default run keeps one model
    pytest.param(n, io, marks=pytest.mark.slow) for n, io in
    [(n, "io_parallel") for n in sorted(MODELS) if n != "TFC_1W1A"] + [(n, "io_stream") for n in ("TFC_1W1A", "jettagging", "kwsmlp")]])
def test_zoo_model_verifies_bit_exactly(tmp_path, name, io_type):
    path, input_type = MODELS[name]
    prj = api.compile_model(ZOO / path, tmp_path / "prj", api.CompileOptions(io_type=io_type, input_type=input_type)).project
    rep = api.verify_project(ZOO / path, prj, api.VerifyOptions(samples=300))
    assert rep.outputs == 300 * {"jettagging": 5, "unsw_nb15": 1, "kwsmlp": 12}.get(name, 10)
    assert rep.mismatches == 0
    assert rep.reference_vs_integer_semantics_mismatches == 0
    ind = rep.independent
    assert ind.execution is Execution.RAN
    assert ind.equal == ind.outputs == rep.outputs, ind
    assert rep.passed
