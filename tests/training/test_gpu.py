"""The training companion on CUDA (marker ``gpu``; skipped where torch sees no CUDA device).

The same checks as on CPU, on the GPU: one float64 step of the sharded CosmoFlow and U-Net
equals the single-process step on the same device (NCCL with a GPU per rank, else gloo with
the ranks sharing the GPU, transfers staged through host memory), the trainer runs, resumes
and exports on CUDA, the calibration measures the GPU.  The full-size figures are
``bench/gpu_check.sh`` (docs/results/gpu_check.md).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from tessera.training.check import EquivalenceSpec, run_equivalence
from tessera.training.mesh import SpatialGrid as G

pytestmark = [pytest.mark.gpu, pytest.mark.dist,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch sees none)")]


def _check(r: dict) -> None:
    for key in ("output", "loss", "input_grad", "grads"):
        assert r[key]["max_rel"] <= 1e-5, (key, r[key])
    assert all(d.startswith("cuda") for d in r["devices"])
    want = "nccl" if torch.cuda.device_count() >= r["world"] else "gloo"
    assert r["backend"] == want and (r["staged_ops"] > 0) == (want == "gloo")


@pytest.mark.parametrize("data,grid", [(1, G(2, 1, 1)), (2, G(1, 2, 1))], ids=["1x2x1x1", "2x1x2x1"])
def test_cosmoflow_step_on_the_gpu_equals_single_process(data, grid):
    _check(run_equivalence(EquivalenceSpec("cosmoflow", (11, 11, 11), data=data, grid=grid, width=0.125, steps=1,
                                           dtype="float64", device="cuda")))


def test_unet_step_on_the_gpu_equals_single_process():
    _check(run_equivalence(EquivalenceSpec("unet3d", (16, 16, 16), grid=G(1, 1, 2), width=0.0625, steps=1,
                                           dtype="float64", device="cuda")))


def _torchrun(args: list[str]) -> subprocess.CompletedProcess:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "--master-port",
                           str(port), "-m", "tessera.cli", *args], capture_output=True, text=True, env=env, timeout=600)


def test_trainer_on_cuda_resumes_and_exports(tmp_path):
    from tessera.models.data.cosmology import write_sample

    rng = np.random.default_rng(0)
    data, out = tmp_path / "data", tmp_path / "run"
    for i in range(8):
        write_sample(data / f"univ_{i:06d}.h5", rng.gamma(1.0, 1.0, size=(12, 12, 12, 4)).astype(np.float32),
                     rng.uniform(-1, 1, 4).astype(np.float32))
    (data / "manifest.json").write_text(json.dumps({"config": {"n_samples": 8, "size": 12, "samples_per_cosmology": 1}}))
    args = ["train", "cosmoflow", "--data-dir", str(data), "--width", "0.125", "--batch-size", "2", "-o", str(out),
            "--device", "cuda"]
    r = _torchrun(args + ["--epochs", "1"])
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["mesh"]["device"].startswith("cuda") and m["mesh"]["backend"] == "nccl"
    assert m["cuda"]["max_memory_allocated_per_rank"][0] > 0
    r = _torchrun(args + ["--epochs", "2", "--resume"])
    assert r.returncode == 0, r.stderr[-2000:]
    m2 = json.loads((out / "metrics.json").read_text())
    assert m2["resumed_from"]["step"] == len(m["step_loss"]) and m2["step_loss"][:len(m["step_loss"])] == m["step_loss"]
    assert (out / "model.onnx").stat().st_size > 0


def test_calibrate_on_cuda(tmp_path):
    from tessera.cli import main as cli
    from tessera.training.perfmodel import Calibration, choose, model_spec

    out = tmp_path / "cal.json"
    r = CliRunner().invoke(cli, ["calibrate", "--quick", "--device", "cuda", "--width", "0.125", "--size", "16",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    cal = Calibration.load(out)
    assert cal.device == "cuda" and cal.gpus == torch.cuda.device_count() and cal.threads == [1]
    assert choose(cal, model_spec("cosmoflow", 0.125, 16), 2, 4).chosen.step_s > 0
