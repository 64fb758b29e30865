"""verify must catch a one-LSB weight change and a changed rounding mode in a generated project."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tessera.compiler.cli import main

pytestmark = pytest.mark.csim


@pytest.fixture
def project(tmp_path, make_qonnx_mlp):
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    r = CliRunner().invoke(main, ["compile", str(model), "-o", str(tmp_path / "prj"), "--tb-samples", "32"])
    assert r.exit_code == 0, r.output
    return model, tmp_path / "prj"


def run_verify(model, prj, tmp_path):
    report = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["verify", str(model), str(prj), "--samples", "400", "--report", str(report)])
    return r, json.loads(report.read_text())


def test_clean_project_verifies(project, tmp_path):
    r, rep = run_verify(*project, tmp_path)
    assert r.exit_code == 0, r.output
    assert rep["mismatches"] == 0 and rep["outputs"] == 400 * 4


def test_one_lsb_weight_change_is_caught(project, tmp_path):
    model, prj = project
    wfile = prj / "firmware" / "weights" / "w2.txt"
    values = [float(v) for v in wfile.read_text().split(",")]
    values[0] += 2.0**-6  # one LSB of the s7.f6 weights
    wfile.write_text(", ".join(f"{v:.6f}" for v in values))
    r, rep = run_verify(model, prj, tmp_path)
    assert r.exit_code == 1
    assert rep["mismatches"] > 0 and rep["first_mismatches"]
    assert rep["testbench"].startswith("FAILED")
    assert r.output.strip().splitlines()[-1].startswith("verified: 400 samples, 1600 outputs, ")


def test_changed_rounding_mode_is_caught(project, tmp_path):
    model, prj = project
    defines = prj / "firmware" / "defines.h"
    text = defines.read_text()
    assert "AP_RND_CONV" in text
    defines.write_text(text.replace("AP_RND_CONV", "AP_TRN"))
    for lib in (prj / "firmware").glob("*.so"):
        lib.unlink()
    r, rep = run_verify(model, prj, tmp_path)
    assert r.exit_code == 1 and rep["mismatches"] > 0


@pytest.mark.parametrize("reuse", [2, 4])
def test_reuse_factor_project_verifies(tmp_path, make_qonnx_mlp, reuse):
    model = make_qonnx_mlp(tmp_path / "m.onnx")
    prj = tmp_path / "prj"
    r = CliRunner().invoke(main, ["compile", str(model), "-o", str(prj), "--reuse", str(reuse), "--io-type", "stream"])
    assert r.exit_code == 0, r.output
    params = (prj / "firmware" / "parameters.h").read_text()
    assert f"reuse_factor = {reuse};" in params
    for f in ("build_prj.tcl", "firmware/tessera_model.cpp", "tb_data/tb_input_features.dat",
              "tb_data/tessera_expected_codes.txt", "tessera_tb.cpp", "reference.onnx", "tessera.json"):
        assert (prj / f).is_file(), f
    r, rep = run_verify(model, prj, tmp_path)
    assert r.exit_code == 0 and rep["mismatches"] == 0, r.output
