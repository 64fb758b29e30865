"""Zoo model -> Brevitas QAT (briefly) -> QONNX -> compile -> g++ C-sim -> verify == reference."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tessera.cli import main
from tessera.models.train import train_model

pytestmark = [pytest.mark.csim]

CASES = [("jet_mlp_w8a8", "parallel")] + [  # the default run keeps one model
    pytest.param(name, io_type, marks=pytest.mark.slow) for name, io_type in [
        ("jet_mlp_w8a8", "stream"),
        ("jet_mlp_w4a4", "parallel"),
        ("digits_cnn_w8a8", "stream"),
        ("digits_cnn_binary", "parallel"),
        ("digits_cnn_ternary", "stream"),
        ("digits_cnn_w4a4", "parallel"),
    ]]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = train_model(name, tmp_path_factory.mktemp(name), epochs=1, progress=False)
        return cache[name]

    return get


@pytest.mark.parametrize("name,io_type", CASES)
def test_zoo_model_verifies_bit_exactly(trained, tmp_path, name, io_type):
    res = trained(name)
    runner = CliRunner()
    prj = tmp_path / "prj"
    r = runner.invoke(main, ["compile", str(res.onnx_path), "-o", str(prj), "--io-type", io_type, "--tb-samples", "16"])
    assert r.exit_code == 0, r.output
    report = tmp_path / "report.json"
    r = runner.invoke(main, ["verify", str(res.onnx_path), str(prj), "--samples", "300", "--data",
                             str(res.test_inputs_path), "--user-samples", "20", "--report", str(report)])
    rep = json.loads(report.read_text())
    assert r.exit_code == 0, r.output
    assert r.output.strip().splitlines()[-1] == f"verified: {rep['samples']} samples, {rep['outputs']} outputs, 0 mismatches"
    assert rep["mismatches"] == 0 and rep["first_mismatches"] == []
    assert rep["samples"] == 300 + rep["data_samples"] and rep["data_samples"] > 0
    assert rep["reference_vs_integer_semantics_mismatches"] == 0
    assert rep["testbench"]["passed"] is True
