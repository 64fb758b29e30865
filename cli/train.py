"""``tessera models``, ``train`` and ``demo``: the model zoo, quantization-aware training
(zoo models, the quantized RNNs, the 3D CNNs, distributed under torchrun) and the whole flow
on a small default.  torch and brevitas are imported by the commands that train, so that the
compiler's commands start without them."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click
from rich.table import Table

from ..compiler import api
from ..compiler.errors import DataError, UnsupportedModelError
from .app import EXIT_MISMATCH, ConsoleObserver, console, handle_errors, main, out
from .compile import print_verify_report


def _train(name: str, out_dir: Path, epochs, seed):
    from ..models.data.cache import DataUnavailable
    from ..models.train import train_model
    from ..models.zoo import ZOO

    if name not in ZOO:
        raise UnsupportedModelError(f"unknown model '{name}'; choose one of: {', '.join(ZOO)}")
    try:
        return train_model(name, out_dir, epochs=epochs, seed=seed, progress=console.is_terminal)
    except DataUnavailable as exc:
        raise DataError(str(exc)) from None


@main.command()
@handle_errors
def models():
    """List the model zoo."""
    from ..models.zoo import ZOO

    table = Table(title="tessera model zoo")
    for col in ("name", "data", "input", "epochs", "description"):
        table.add_column(col)
    for name, spec in ZOO.items():
        table.add_row(name, spec.dataset, str(tuple(spec.input_shape)), str(spec.epochs), spec.description)
    out.print(table)


CNN3D_MODELS = ("cosmoflow", "cosmoflow-mlperf", "unet3d")


def _distributed(data_parallel: int, spatial: str) -> bool:
    """The distributed trainer runs under torchrun (``WORLD_SIZE`` set) or when a mesh
    larger than one rank is asked for (which then has to come from torchrun)."""
    from ..training.mesh import parse_grid

    world = data_parallel * parse_grid(spatial).size
    if "WORLD_SIZE" in os.environ:
        return True
    if world > 1:
        raise click.UsageError(f"--data-parallel {data_parallel} --spatial {spatial} needs {world} processes: "
                               f"torchrun --nproc-per-node {world} -m tessera.cli train ...")
    return False


@main.command()
@click.argument("name")
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), help="Folder for model.onnx, checkpoint, metrics.")
@click.option("--epochs", type=int, help="Epochs (default: the model's).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--cell", type=click.Choice(["lstm", "gru", "convlstm"]), help="rnn: the recurrent cell.")
@click.option("--weights", type=click.Choice(["fp", "binary", "ternary", "quaternary"]), help="rnn: weight quantization.")
@click.option("--task", type=click.Choice(["sentiment", "moving-digits"]), help="rnn: the task (default from the cell).")
@click.option("--size", type=int, help="3D CNNs: input edge (volume / patch size).")
@click.option("--width", type=float, help="3D CNNs: channel width multiplier.")
@click.option("--data-parallel", "data_parallel", type=int, default=1, show_default=True,
              help="3D CNNs under torchrun: data-parallel replicas.")
@click.option("--spatial", default="1x1x1", show_default=True,
              help="3D CNNs under torchrun: split of each sample along D x H x W (e.g. 2x2x1).")
@click.option("--n-samples", "n_samples", type=int, help="3D CNNs: volumes generated (train + validation).")
@click.option("--batch-size", "batch_size", type=int, help="3D CNNs: global mini-batch.")
@click.option("--lr", type=float, help="3D CNNs: learning rate.")
@click.option("--data-dir", "data_dir", type=click.Path(path_type=Path), help="Distributed: folder of HDF5 samples.")
@click.option("--resume", is_flag=True, help="Distributed: continue from the checkpoint in --output.")
@click.option("--checkpoint-every", "checkpoint_every", type=int, help="Distributed: also checkpoint every N steps.")
@click.option("--collective-timeout", "timeout_s", type=float,
              help="Distributed: seconds a rank waits for the others before the job fails (default 600).")
@click.option("--backend", type=click.Choice(["gloo", "nccl"]),
              help="Distributed: default nccl with a GPU per rank, else gloo (ranks may share a GPU).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), help="Distributed: default cuda when available, else cpu.")
@click.option("--bn-stats", "bn_stats", type=click.Choice(["global", "replica"]),
              help="Distributed: BatchNorm statistics over all ranks (default) or each data replica's spatial group.")
@handle_errors
def train(name, out_dir, epochs, seed, cell, weights, task, size, width, data_parallel, spatial, n_samples,
          batch_size, lr, data_dir, resume, backend, device, bn_stats, checkpoint_every, timeout_s):
    """Quantization-aware training, exported to QONNX.

    NAME is a zoo model (see `tessera models`), `rnn` (with --cell and --weights), or one of
    the 3D CNNs cosmoflow, cosmoflow-mlperf, unet3d (with --size/--width).  Under torchrun the
    3D CNNs train data x spatial parallel (--data-parallel, --spatial; docs/training.md).
    """
    from ..models.data.cache import DataUnavailable

    rnn_opts, cnn_opts = (cell, weights, task), (size, width)
    if name != "rnn" and any(v is not None for v in rnn_opts):
        raise click.UsageError("--cell/--weights/--task apply to `tessera train rnn` only")
    dist_opts = (n_samples, batch_size, lr, data_dir, backend, device, bn_stats, checkpoint_every, timeout_s)
    if name not in CNN3D_MODELS and (any(v is not None for v in cnn_opts + dist_opts) or resume
                                     or data_parallel != 1 or spatial != "1x1x1"):
        raise click.UsageError(f"--size/--width/--data-parallel/--spatial/... apply to the 3D CNNs "
                               f"({', '.join(CNN3D_MODELS)}) only")
    if name in CNN3D_MODELS and not _distributed(data_parallel, spatial) and \
            (any(v is not None for v in dist_opts) or resume):
        raise click.UsageError("--n-samples/--batch-size/--lr/--data-dir/--resume/--backend/--device/--bn-stats need the distributed "
                               "trainer: launch with torchrun (docs/training.md)")
    try:
        if name == "rnn":
            from ..models.rnn.train import train_rnn_cli

            if cell is None or weights is None:
                raise click.UsageError("`tessera train rnn` needs --cell and --weights")
            train_rnn_cli(cell, weights, task=task, epochs=epochs, seed=seed, output=out_dir, progress=console.is_terminal)
        elif name in CNN3D_MODELS and _distributed(data_parallel, spatial):
            from ..training.mesh import parse_grid
            from ..training.trainer import DistTrainConfig, train_distributed

            cfg = DistTrainConfig(name, out_dir or Path("runs") / name, data=data_parallel, grid=parse_grid(spatial),
                                  epochs=epochs, size=size, width=width, n_samples=n_samples, batch_size=batch_size,
                                  lr=lr, seed=seed, data_dir=data_dir, resume=resume, backend=backend, device=device,
                                  bn_stats=bn_stats or "global", checkpoint_every=checkpoint_every,
                                  **({"timeout_s": timeout_s} if timeout_s else {}))
            res = train_distributed(cfg, progress=console.is_terminal)
            if res.metrics:
                out.print(f"trained {name} on {data_parallel} x {spatial} ranks: validation MSE {res.metric:.4f} "
                          f"(train-mean predictor {res.baseline:.4f}) -> {cfg.out_dir}")
        elif name in CNN3D_MODELS:
            from ..models.train3d import train_cnn3d

            res = train_cnn3d(name, out_dir or Path("runs") / name, epochs=epochs, seed=seed, size=size, width=width,
                              progress=console.is_terminal)
            out.print(f"trained {name} -> {res.onnx_path}")
        else:
            res = _train(name, out_dir or Path("runs") / name, epochs, seed)
            out.print(f"trained {name}: test accuracy {res.final_test_accuracy:.4f} in {res.train_seconds:.1f} s -> {res.onnx_path}")
    except DataUnavailable as exc:
        raise DataError(str(exc)) from None


@main.command()
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=Path("runs/demo"), show_default=True)
@click.option("--model", "name", default="digits_cnn_w8a8", show_default=True, help="Zoo model to train and deploy.")
@click.option("--epochs", type=int, help="Training epochs (default: the zoo's).")
@click.option("--io-type", type=click.Choice(["parallel", "stream"]), default="parallel", show_default=True)
@click.option("--samples", type=int, default=1000, show_default=True, help="Random full-range inputs to verify.")
@handle_errors
def demo(out_dir, name, epochs, io_type, samples):
    """The whole flow on a small default: train, export, compile, emulate, verify."""
    import numpy as np

    from ..models import train as _needs_train_extra  # noqa: F401  (without torch: one line before any output)

    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    console.rule(f"1/4 train {name}")
    res = _train(name, out_dir / "model", epochs, 0)
    scales = "float scales, BatchNorm" if name.endswith("_float") else "power-of-two scales"
    out.print(f"trained {name} (quantization-aware, {scales}): test accuracy {res.final_test_accuracy:.4f}")
    console.rule("2/4 compile to an HLS project (hls4ml, Vitis back end)")
    options = api.CompileOptions(io_type=f"io_{io_type}", force=True)
    prj = api.compile_model(res.onnx_path, out_dir / "hls_project", options, ConsoleObserver()).project
    out.print(f"project: {prj}")
    console.rule("3/4 emulate the real test set in C-simulation (g++)")
    # real outputs (logits): per-channel offsets make codes unordered
    real = api.emulate(prj, res.test_inputs_path, observer=ConsoleObserver())
    labels = np.load(res.test_labels_path)
    acc = float(np.mean(np.argmax(real.reshape(len(real), -1), axis=1) == labels))
    out.print(f"C-simulation accuracy on the {len(real)} held-out test samples: {acc:.4f}")
    console.rule("4/4 verify bit-exactly: C-simulation == exact reference == the exported model itself")
    rep = api.verify_project(res.onnx_path, prj, api.VerifyOptions(samples=samples, data=res.test_inputs_path),
                             ConsoleObserver())
    report = out_dir / "verify_report.json"
    report.write_text(json.dumps({**rep.to_dict(), "csim_test_accuracy": acc}, indent=1))
    out.print(f"report: {report}  ({time.perf_counter() - t0:.0f} s in all)")
    if not print_verify_report(rep):
        sys.exit(EXIT_MISMATCH)
