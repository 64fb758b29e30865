"""The distributed trainer as documented: torchrun + `tessera train cosmoflow --data-parallel
--spatial`, per-rank bytes read, checkpoints that resume, the ONNX export."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from tessera.cli import main as cli
from tessera.models.data.cosmology import write_sample


def _folder(tmp_path, n=12, size=12):
    rng = np.random.default_rng(0)
    d = tmp_path / "data"
    for i in range(n):
        write_sample(d / f"univ_{i:06d}.h5", rng.gamma(1.0, 1.0, size=(size,) * 3 + (4,)).astype(np.float32),
                     rng.uniform(-1, 1, 4).astype(np.float32))
    (d / "manifest.json").write_text(json.dumps({"config": {"n_samples": n, "size": size, "samples_per_cosmology": 1}}))
    return d


def _torchrun(args, nproc):
    import socket

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    with socket.socket() as s:  # other test runs may share the machine: no fixed port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
                           "--master-port", str(port), "-m", "tessera.cli", *args],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.dist
def test_torchrun_train_reads_hyperslabs_resumes_and_exports(tmp_path):
    data, out = _folder(tmp_path), tmp_path / "run"
    args = ["train", "cosmoflow", "--data-parallel", "2", "--spatial", "2x1x1", "--data-dir", str(data),
            "--width", "0.125", "--batch-size", "4", "--epochs", "1", "-o", str(out)]
    r = _torchrun(args, 4)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["mesh"] == {"data": 2, "spatial": "2x1x1", "world": 4, "backend": "gloo", "device": "cpu"}
    # 10 training universes in steps of 4, 4, 2 and 2 validation ones, split over 2 replicas:
    # every rank reads 6 samples' hyperslabs (augmented reads may take a wrapped block in
    # several boxes), each its 6 x 12 x 12 block x 4 channels x 4 bytes, nothing else of the volume
    block = 6 * 12 * 12 * 4 * 4
    for rank in m["bytes_read_per_rank"]:
        assert rank["data_bytes"] == 6 * block
    assert len(m["train_loss"]) == 1 and np.isfinite(m["metric"])
    r = _torchrun(args[:-4] + ["--epochs", "2", "-o", str(out), "--resume"], 4)
    assert r.returncode == 0, r.stderr[-2000:]
    m2 = json.loads((out / "metrics.json").read_text())
    assert m2["train_loss"][0] == m["train_loss"][0] and len(m2["train_loss"]) == 2

    # the export goes straight into the compiler, and its exact reference equals the model
    from tessera.compiler.pipeline import compile_ir
    from tessera.compiler.reference.interpret import run_ir
    from tessera.compiler.samples import sample_codes
    from tessera.compiler.verdict import Execution
    from tessera.compiler.verify import user_model_agreement

    g = compile_ir(out / "model.onnx")
    codes = sample_codes(g.values[g.input], 8)
    agree = user_model_agreement(out / "model.onnx", g, codes, run_ir(g, codes))
    assert agree.execution is Execution.RAN and agree.differing_outputs == 0, agree


def test_a_mesh_without_torchrun_is_a_usage_error():
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"}
    r = CliRunner().invoke(cli, ["train", "cosmoflow", "--data-parallel", "2", "--spatial", "2x1x1"], env=env)
    assert r.exit_code == 2 and "torchrun --nproc-per-node 4" in r.output


def test_bad_spatial_grid_is_a_one_line_error():
    r = CliRunner().invoke(cli, ["train", "cosmoflow", "--spatial", "2xa"])
    assert r.exit_code == 2 and "expected AxBxC" in r.output


@pytest.mark.dist
def test_torchrun_trains_the_unet_sharded(tmp_path):
    out = tmp_path / "unet"
    r = _torchrun(["train", "unet3d", "--spatial", "2x1x1", "--size", "16", "--width", "0.0625", "--n-samples", "8",
                   "--batch-size", "2", "--epochs", "1", "-o", str(out)], 2)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["task"] == "segmentation" and m["mesh"]["world"] == 2
    assert 0.0 <= m["metric"] <= 1.0 and len(m["val"][0]["val_dice_per_class"]) == 3
    from tessera.compiler.pipeline import compile_ir

    assert compile_ir(out / "model.onnx").nodes  # the export goes into the compiler
