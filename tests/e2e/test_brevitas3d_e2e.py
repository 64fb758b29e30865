"""A Brevitas 3D CNN (Conv3d, MaxPool3d, Linear, Tanh table) through the CLI: compile, emulate, verify."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from tessera.cli import main
from tessera.models.train import export_model

pytestmark = pytest.mark.csim


@pytest.mark.parametrize("io_type", ["parallel", "stream"])
def test_brevitas_conv3d_model_verifies(tmp_path, brevitas_kit, io_type):
    net3d, calibrated = brevitas_kit
    model = calibrated(net3d(), (2, 4, 4, 4))
    path = export_model(model, torch.randn(1, 2, 4, 4, 4), tmp_path / "m.onnx")
    runner = CliRunner()
    r = runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "prj"), "--io-type", io_type])
    assert r.exit_code == 0, r.output
    x = torch.randn(16, 2, 4, 4, 4)
    np.save(tmp_path / "x.npy", x.numpy())
    r = runner.invoke(main, ["emulate", str(tmp_path / "prj"), "--input", str(tmp_path / "x.npy"), "--output",
                             str(tmp_path / "y.npy")])
    assert r.exit_code == 0, r.output
    with torch.no_grad():
        expected = model(x).numpy().astype(np.float64)  # brevitas float32 forward
    got = np.load(tmp_path / "y.npy")
    assert got.shape == expected.shape
    assert np.array_equal(got, expected), np.abs(got - expected).max()
    r = runner.invoke(main, ["verify", str(path), str(tmp_path / "prj"), "--samples", "300", "--data", str(tmp_path / "x.npy"),
                             "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["mismatches"] == 0 and rep["samples"] == 316
