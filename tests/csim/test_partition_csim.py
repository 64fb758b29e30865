"""Partitioned projects through the CLI: `compile --partition` writes one project per
distinct block kernel (or layer kernel for halo exchange) plus the tail; `emulate` runs the
blocks' C-simulations in worker processes and `verify` finds 0 mismatches against the exact
reference of the whole model; the C++ host (overlap mode) does the same tiling in C++; the
io_stream kernels and tail pass `tessera check`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler.project import Manifest
from tessera.models.train import export_model

pytestmark = pytest.mark.csim


@pytest.fixture(scope="module")
def conv3d_model(tmp_path_factory, brevitas_kit):
    net3d, calibrated = brevitas_kit
    model = calibrated(net3d(), (2, 4, 4, 4))
    path = export_model(model, torch.randn(1, 2, 4, 4, 4), tmp_path_factory.mktemp("m") / "m.onnx")
    return model, path


@pytest.mark.parametrize("mode,grid,io_type", [("overlap", "2x1x1", "parallel"), ("overlap", "2x2x1", "stream"),
                                               ("exchange", "1x2x1", "parallel")])
def test_partitioned_project_verifies(tmp_path, conv3d_model, mode, grid, io_type):
    model, path = conv3d_model
    runner = CliRunner()
    prj = tmp_path / "prj"
    r = runner.invoke(main, ["compile", str(path), "-o", str(prj), "--io-type", io_type, "--partition", grid,
                             "--partition-mode", mode])
    assert r.exit_code == 0, r.output
    m = Manifest.read(prj).partition
    assert m.grid == tuple(int(v) for v in grid.split("x")) and m.tail == "tail" and m.mode == mode
    n_blocks = int(np.prod(m.grid))
    if mode == "overlap":  # the corner blocks differ by their padding: one kernel each
        assert len(m.kernels) == n_blocks
    x = torch.randn(12, 2, 4, 4, 4)
    np.save(tmp_path / "x.npy", x.numpy())
    r = runner.invoke(main, ["emulate", str(prj), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
                             "--workers", "2"])
    assert r.exit_code == 0, r.output
    with torch.no_grad():
        expected = model(x).numpy().astype(np.float64)  # brevitas' float32 forward of the same model
    assert np.array_equal(np.load(tmp_path / "y.npy"), expected)
    r = runner.invoke(main, ["verify", str(path), str(prj), "--samples", "200", "--user-samples", "0",
                             "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["mismatches"] == 0 and rep["samples"] == 200
    # the C++ host (same schedule: tiles, kernel runs, exchanges, stitching, tail) agrees too
    tb = rep["testbench"]
    assert tb["passed"] is True and tb["line"].startswith("tessera-host: 4 samples") and tb["line"].endswith(" 0 mismatches")
    if io_type == "stream":  # every kernel and the tail pass the checks C-simulation cannot give
        r = runner.invoke(main, ["check", str(prj), "--json", str(tmp_path / "check.json")])
        assert r.exit_code == 0, r.output
        checks = json.loads((tmp_path / "check.json").read_text())
        assert len(checks) == len(m.folders())
        for c in checks.values():
            assert c["ok"] and c["synthesis_syntax"]["ok"] and c["lint"] == [] and c["fifo"]["ok"]
            assert c["fifo"]["applicable"] and c["fifo"]["fifos"]


def test_partition_auto_without_budget_asks_the_performance_model(tmp_path, conv3d_model):
    """`--partition auto` without --onchip-budget: the estimator's chooser decides; this small
    model fits the U250 whole, so the project is not partitioned."""
    _, path = conv3d_model
    r = CliRunner().invoke(main, ["compile", str(path), "-o", str(tmp_path / "p"), "--partition", "auto"])
    assert r.exit_code == 0, r.output
    assert "fits xcu250 (estimate): compiling without blocks" in r.output
    assert Manifest.read(tmp_path / "p").partition is None


def test_partition_errors_are_one_line(tmp_path, conv3d_model):
    _, path = conv3d_model
    runner = CliRunner()
    r = runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "a"), "--partition", "8x1x1"])
    assert r.exit_code != 0 and "more blocks than layer" in r.output and "Traceback" not in r.output
    r = runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "b"), "--onchip-budget", "10B"])
    assert r.exit_code != 0 and "no block grid fits 10 bytes" in r.output and "at layer '" in r.output
    r = runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "c"), "--partition", "2x2"])
    assert r.exit_code != 0 and "AxBxC" in r.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cosmoflow_64_partitioned_csim(tmp_path, cnn3d_export):
    """Quantized CosmoFlow (width 1/16) at 64^3 x 4 in 2x2x1 overlapped blocks: the block
    kernels' C-simulations, run by the Python host in 2 workers and by the C++ host, equal
    the whole model's exact onnxruntime reference on every output."""
    from tessera.compiler.lower.hls4ml_lower import HlsOptions
    from tessera.compiler.partition.project import write_partitioned_project
    from tessera.compiler.partition.runtime import Partition
    from tessera.compiler.sim.partitioned import PartitionedSim
    from tessera.compiler.reference.model import OrtReference, reference_model
    from tessera.compiler.samples import sample_codes

    g, path = cnn3d_export("cosmoflow", 64)
    part = Partition.plan(g, (2, 2, 1), "overlap")
    prj = write_partitioned_project(g, path, tmp_path / "prj", HlsOptions(io_type="io_parallel"), part, tb_samples=2)
    sim = PartitionedSim(prj, workers=2)
    x = sample_codes(g.values[g.input], 3, seed=5)
    got = sim.run_codes(x)
    assert np.array_equal(got, OrtReference(reference_model(g)).run(x))
    status, line = sim.testbench()
    assert status == 0 and line == "tessera-host: 2 samples, 4 kernel runs, 0 mismatches", line
