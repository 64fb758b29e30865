"""verify must catch a one-LSB weight change and a changed rounding mode in a generated project."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tessera.cli import main

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
    assert rep["testbench"]["passed"] is False
    last = r.output.strip().splitlines()[-1]  # the verdict names each failing check with its count
    assert last.startswith(f"FAILED: C-simulation: {rep['mismatches']} of 1600 outputs differ from the exact reference; "
                           f"testbench: {rep['testbench']['line']}"), last
    assert last.endswith(" (400 samples)") and "independent check" not in last, last


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


def _rebuild(prj):
    for lib in (prj / "firmware").glob("*.so"):
        lib.unlink()


def test_one_bit_narrower_accumulator_is_caught(project, tmp_path):
    """The dense accumulator one integer bit narrower than inferred: the extreme samples
    overflow it (it wraps), and verify sees it."""
    import re

    model, prj = project
    defines = prj / "firmware" / "defines.h"
    text = defines.read_text()
    m = re.search(r"typedef ap_fixed<(\d+),(\d+)> (\w+_dense_accum_t);", text)
    assert m, text
    w, i, name = int(m.group(1)), int(m.group(2)), m.group(3)
    defines.write_text(text.replace(m.group(0), f"typedef ap_fixed<{w - 1},{i - 1}> {name};"))
    _rebuild(prj)
    r, rep = run_verify(model, prj, tmp_path)
    assert r.exit_code == 1 and rep["mismatches"] > 0, r.output


def test_one_lut_entry_is_caught(tmp_path, make_qonnx_mlp):
    """One entry of a tanh lookup table changed by one LSB: the entry verify's samples reach
    least often (but at least once) is picked, so the test shows every reached entry counts."""
    import numpy as np

    from tessera.compiler.pipeline import compile_ir
    from tessera.compiler.reference.interpret import run_ir
    from tessera.compiler.samples import sample_codes

    model = make_qonnx_mlp(tmp_path / "m.onnx", insert=("Tanh", {}))
    prj = tmp_path / "prj"
    r = CliRunner().invoke(main, ["compile", str(model), "-o", str(prj), "--tb-samples", "16"])
    assert r.exit_code == 0, r.output
    g = compile_ir(model)
    k = next(i for i, n in enumerate(g.nodes) if n.op == "lut")
    lut_in = g.values[g.nodes[k].inputs[0]]
    g.output, g.nodes = g.nodes[k].inputs[0], g.nodes[:k]
    reached = run_ir(g, sample_codes(g.values[g.input], 400, seed=0)).ravel() - lut_in.lo
    counts = np.bincount(reached, minlength=lut_in.hi - lut_in.lo + 1)
    entry = int(np.argmin(np.where(counts > 0, counts, counts.max() + 1)))
    assert counts[entry] >= 1
    table = next((prj / "firmware" / "weights").glob("t*.txt"))
    values = [float(v) for v in table.read_text().split(",")]
    assert len(values) == len(counts)
    values[entry] += 2.0**-3 if values[entry] < 1.5 else -(2.0**-3)  # one LSB of the ufixed<4,1> output
    table.write_text(", ".join(f"{v:.6f}" for v in values))
    r, rep = run_verify(model, prj, tmp_path)
    assert r.exit_code == 1 and 0 < rep["mismatches"], r.output
