"""``brevitas_examples.super_resolution``'s ESPCN x2 (shipped inside brevitas), exported with
brevitas' ``export_qonnx`` at random initialisation with drawn BatchNorm statistics: its last
convolution's real-valued output goes through the PixelShuffle (``DepthToSpace``) before any
Quant.  The exact reference equals the integer semantics and the exported file run
independently in float64 on every output, for both exported quantizer configurations."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tessera.compiler import api
from tessera.compiler.independent import independent_check
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes
from tessera.models.super_resolution import ESPCN, IMAGE, export_espcn


@pytest.mark.parametrize("name", ESPCN)
def test_espcn_export_is_exact(tmp_path, name):
    path = str(export_espcn(name, tmp_path / f"{name}.onnx"))
    g = api.load_model(path)
    ops = [n.op for n in g.nodes]
    assert ops.count("conv") == 4 and "depthtospace" in ops
    assert g.values[g.output].shape == (IMAGE[0], 2 * IMAGE[1], 2 * IMAGE[2])
    codes = sample_codes(g.values[g.input], 6, seed=3)
    ref = OrtReference(reference_model(g)).run(codes)
    assert np.array_equal(ref, run_ir(g, codes))
    rep = independent_check(onnx.load(path), g, codes, ref)
    assert rep.passed and rep.differing_outputs == 0, rep.line()
    assert rep.equal == rep.outputs == ref.size
    assert np.unique(ref).size > 20  # not a constant image
