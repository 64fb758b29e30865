"""verify against the user's model itself: a frontend that misreads the model fails it, and so
does a C-simulation library built from sources that have changed since."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from tessera.cli import main
from tessera.compiler.frontend.handlers import linear as linear_handlers
from tessera.compiler.ops.base.linear import LinearOp

pytestmark = pytest.mark.csim


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.output


def verify(model, prj, tmp_path, *extra):
    report = tmp_path / "report.json"
    code, text = run("verify", model, prj, "--samples", "300", "--report", report, *extra)
    return code, text, json.loads(report.read_text())


def _gemm_model(path):
    """Quant(x) -> Gemm(transB=1, a square weight) -> Quant: misreading transB keeps every shape."""
    rng = np.random.default_rng(3)
    c = lambda name, v: numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)  # noqa: E731
    q = lambda i, o, s: helper.make_node("Quant", [i, s, "zp", "b8"], [o], domain="qonnx.custom_op.general",  # noqa: E731
                                         name=f"Quant_{o}", signed=1, narrow=0, rounding_mode="ROUND")
    nodes = [q("x", "xq", "s_in"), q("W", "Wq", "s_w"), helper.make_node("Gemm", ["xq", "Wq", "b"], ["g"], name="gemm",
                                                                          transB=1), q("g", "y", "s_out")]
    g = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
                          [c("W", rng.integers(-60, 60, size=(5, 5)) * 2.0**-6), c("b", rng.integers(-9, 9, size=5) * 2.0**-10),
                           c("s_in", 2.0**-4), c("s_w", 2.0**-6), c("s_out", 2.0**-3), c("zp", 0.0), c("b8", 8.0)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_correct_reading_passes(tmp_path):
    model = _gemm_model(tmp_path / "m.onnx")
    assert run("compile", model, "-o", tmp_path / "prj")[0] == 0
    code, text, rep = verify(model, tmp_path / "prj", tmp_path)
    assert code == 0, text
    ind = rep["independent"]
    assert ind["equal"] == ind["outputs"] == 300 * 5 and ind["differing_outputs"] == 0
    lines = text.strip().splitlines()
    assert lines[-2].startswith("independent check: 1500/1500 outputs equal the user's model")
    assert lines[-1] == "verified: 300 samples, 1500 outputs, 0 mismatches"


def test_ignoring_transB_fails_verify(tmp_path, monkeypatch):
    """The frontend misreads on purpose: C-simulation == our reference (both from the same
    wrong IR), and only the independent executor sees that it is not the user's model."""
    model = _gemm_model(tmp_path / "m.onnx")
    real = linear_handlers.attribute
    monkeypatch.setattr(linear_handlers, "attribute", lambda node, name, default=None: 0 if name == "transB" else
                        real(node, name, default))
    assert run("compile", model, "-o", tmp_path / "prj")[0] == 0
    code, text, rep = verify(model, tmp_path / "prj", tmp_path)
    assert code == 1, text
    assert rep["mismatches"] == 0 and rep["independent"]["differing_outputs"] > 0
    assert "Traceback" not in text
    line, last = text.strip().splitlines()[-2:]
    assert line.startswith("independent check: FAILED") and "first differing node: 'gemm'" in line, line
    # the last line is the verdict: the failing check, never 'verified'
    assert last == f"FAILED: independent check: {rep['independent']['differing_outputs']} of 1500 outputs differ " \
                   "(300 samples)", last


def test_dropping_a_bias_fails_verify(tmp_path, make_qonnx_mlp, monkeypatch):
    """A folded bias Add silently dropped: named as the first differing ONNX node."""
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    monkeypatch.setattr(LinearOp, "with_bias", lambda self, attrs, codes, btype: attrs)
    assert run("compile", model, "-o", tmp_path / "prj")[0] == 0
    code, text, rep = verify(model, tmp_path / "prj", tmp_path)
    line, last = text.strip().splitlines()[-2:]
    assert code == 1 and "first differing node: 'Add_0'" in line, text
    assert last == f"FAILED: independent check: {rep['independent']['differing_outputs']} of {rep['outputs']} outputs " \
                   "differ (300 samples)", last
    assert rep["mismatches"] == 0 and rep["independent"]["differing_outputs"] > 0


def test_edited_source_is_rebuilt_and_fails(tmp_path, make_qonnx_mlp):
    """A verified project whose defines.h is edited (rounding AP_RND_CONV -> AP_TRN): the
    library is rebuilt from the changed sources (its hash differs), and verify fails."""
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    prj = tmp_path / "prj"
    assert run("compile", model, "-o", prj, "--tb-samples", "16")[0] == 0
    code, text, _ = verify(model, prj, tmp_path)
    assert code == 0, text
    defines = prj / "firmware" / "defines.h"
    defines.write_text(defines.read_text().replace("AP_RND_CONV", "AP_TRN"))
    code, text, rep = verify(model, prj, tmp_path)
    assert code == 1 and rep["mismatches"] > 0, text  # the library that verified would give 0
