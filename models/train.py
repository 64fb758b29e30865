"""Quantization-aware training and QONNX export of the zoo models.

``train_model(name, out_dir)`` trains zoo model ``name`` (see :mod:`tessera.models.zoo`)
on its data set and writes into ``out_dir``:

* ``model.onnx``       -- QONNX export (``brevitas.export.export_qonnx``, TorchScript
  exporter, batch size 1) of the trained model in eval mode;
* ``checkpoint.pt``    -- the model ``state_dict`` (load into ``build_model(name)``);
* ``metrics.json``     -- per-epoch train loss and test accuracy, final test accuracy,
  timings, seeds, versions;
* ``test_inputs.npy``  -- float32 test-split inputs, exactly as fed to the model;
* ``test_labels.npy``  -- int64 test-split labels.

Every file is written atomically (temporary file in ``out_dir`` + rename).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from .data import load_dataset
from .runs import atomic_path, deterministic, progress_bar, save_json, save_npy, versions
from .zoo import ModelSpec, build_model, get_spec

ONNX_INPUT_NAME = "input"
ONNX_OUTPUT_NAME = "output"

__all__ = [
    "ONNX_INPUT_NAME",
    "ONNX_OUTPUT_NAME",
    "TrainResult",
    "evaluate",
    "export_model",
    "main",
    "result_dict",
    "train_epoch",
    "train_model",
]


@dataclass
class TrainResult:
    """Paths and metrics of one :func:`train_model` run."""

    name: str
    out_dir: Path
    onnx_path: Path
    checkpoint_path: Path
    metrics_path: Path
    test_inputs_path: Path
    test_labels_path: Path
    final_test_accuracy: float
    train_losses: list[float] = field(default_factory=list)
    test_accuracies: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    total_seconds: float = 0.0
    device: str = "cpu"


# ---------------------------------------------------------------------------------------
# Small atomic-write helpers
# ---------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------


def export_model(model: nn.Module, example_input: torch.Tensor, path: str | Path) -> Path:
    """Export ``model`` to QONNX at ``path`` (atomically) and return the path.

    The model is exported in eval mode on the CPU with brevitas' TorchScript-based QONNX
    exporter (``dynamo=False``; brevitas defaults to the dynamo exporter on torch >= 2.9).
    The graph has exactly one input, named ``"input"`` with the shape of ``example_input``
    (use batch size 1), and one output named ``"output"``; weights and biases are
    initializers only (brevitas would otherwise also list them as graph inputs).  The
    model's training mode and device are restored afterwards.
    """
    with warnings.catch_warnings():
        # import-time noise of brevitas.export's dependencies, irrelevant to QONNX export
        warnings.filterwarnings("ignore", message="brevitas.fx is deprecated")
        warnings.filterwarnings("ignore", message="fast_hadamard_transform package not found")
        from brevitas.export import export_qonnx

    path = Path(path)
    was_training = model.training
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    model.eval()
    model.cpu()
    try:
        with atomic_path(path) as tmp, torch.no_grad():
            export_qonnx(
                model, example_input.detach().cpu().float(), str(tmp), dynamo=False,
                input_names=[ONNX_INPUT_NAME], output_names=[ONNX_OUTPUT_NAME],
                keep_initializers_as_inputs=False)
    finally:
        model.to(device)
        model.train(was_training)
    return path


# ---------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------


def optimizer_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer,
                   scheduler: torch.optim.lr_scheduler.LRScheduler | None = None, what: str = "training") -> float:
    """Backward, step (and scheduler step); returns the loss value, refusing NaN/Inf."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    value = float(loss.detach())
    if not math.isfinite(value):
        raise FloatingPointError(f"{what} diverged: loss={value}")
    return value


def train_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    generator: torch.Generator,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    on_batch: Callable[[float], None] | None = None,
) -> list[float]:
    """One shuffled pass over ``(x, y)`` with cross-entropy loss; returns per-batch losses.

    ``x`` / ``y`` must already be on the model's device; the shuffle uses ``generator``
    (CPU) so it is reproducible on any device.
    """
    model.train()
    perm = torch.randperm(len(x), generator=generator).to(x.device)
    losses = []
    for start in range(0, len(x), batch_size):
        idx = perm[start:start + batch_size]
        logits = model(x[idx])
        value = optimizer_step(nn.functional.cross_entropy(logits, y[idx]), optimizer, scheduler)
        losses.append(value)
        if on_batch is not None:
            on_batch(value)
    return losses


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1000) -> float:
    """Top-1 accuracy of ``model`` (eval mode) on ``(x, y)``; training mode is restored."""
    was_training = model.training
    model.eval()
    correct = 0
    for start in range(0, len(x), batch_size):
        pred = model(x[start:start + batch_size]).argmax(dim=1)
        correct += int((pred == y[start:start + batch_size]).sum())
    model.train(was_training)
    return correct / max(len(x), 1)


def train_model(
    name: str,
    out_dir: Path,
    epochs: int | None = None,
    seed: int = 0,
    progress: bool = True,
    *,
    data_seed: int = 0,
    device: str | None = None,
) -> TrainResult:
    """Train zoo model ``name`` with QAT, export it and write the artefacts to ``out_dir``.

    Args:
        name: a key of :data:`tessera.models.zoo.ZOO`.
        out_dir: output folder (created if needed); existing files are replaced.
        epochs: number of epochs; ``None`` uses the zoo default.
        seed: seeds weight initialisation and batch order (``torch.manual_seed`` and
            deterministic algorithms).
        progress: show a rich progress bar.
        data_seed: seeds the data set's train/test split (fixed by default so that all
            training seeds share one test set).
        device: torch device; default CUDA when available, else CPU.

    Adam with a cosine learning-rate decay over all steps, cross-entropy loss.
    """
    t_start = time.perf_counter()
    spec: ModelSpec = get_spec(name)
    epochs = spec.epochs if epochs is None else int(epochs)
    if epochs < 1:
        raise ValueError("epochs must be >= 1")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))

    x_train, y_train, x_test, y_test = load_dataset(spec.dataset, seed=data_seed)
    x_train = np.ascontiguousarray(x_train, dtype=np.float32)
    x_test = np.ascontiguousarray(x_test, dtype=np.float32)
    if tuple(x_train.shape[1:]) != spec.input_shape:
        raise ValueError(f"{name}: data shape {x_train.shape[1:]} != {spec.input_shape}")

    with deterministic(seed):
        model = build_model(name).to(dev)
        xt, yt = torch.from_numpy(x_train).to(dev), torch.from_numpy(y_train).to(dev)
        xv, yv = torch.from_numpy(x_test).to(dev), torch.from_numpy(y_test).to(dev)
        gen = torch.Generator().manual_seed(seed)
        steps_per_epoch = math.ceil(len(xt) / spec.batch_size)
        optimizer = torch.optim.Adam(model.parameters(), lr=spec.lr)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=epochs * steps_per_epoch, eta_min=spec.lr * 0.02)

        train_losses: list[float] = []
        test_accs: list[float] = []
        t_train = time.perf_counter()
        with progress_bar(progress) as bar:
            task = None
            if bar is not None:
                task = bar.add_task(name, total=epochs * steps_per_epoch, status="")

            def on_batch(loss: float) -> None:
                if bar is not None:
                    bar.update(task, advance=1, status=f"loss {loss:.3f}")

            for epoch in range(epochs):
                losses = train_epoch(
                    model, optimizer, xt, yt, spec.batch_size, gen, scheduler, on_batch)
                train_losses.append(float(np.mean(losses)))
                test_accs.append(evaluate(model, xv, yv))
                if bar is not None:
                    bar.update(task, description=f"{name} [{epoch + 1}/{epochs}]",
                               status=f"loss {train_losses[-1]:.3f} acc {test_accs[-1]:.3f}")
        train_seconds = time.perf_counter() - t_train

        model.eval()
        final_acc = evaluate(model, xv, yv)

    paths = {
        "onnx_path": out_dir / "model.onnx",
        "checkpoint_path": out_dir / "checkpoint.pt",
        "metrics_path": out_dir / "metrics.json",
        "test_inputs_path": out_dir / "test_inputs.npy",
        "test_labels_path": out_dir / "test_labels.npy",
    }
    export_model(model, torch.from_numpy(x_test[:1]), paths["onnx_path"])
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    with atomic_path(paths["checkpoint_path"]) as tmp:
        torch.save(state, tmp)
    save_npy(paths["test_inputs_path"], x_test)
    save_npy(paths["test_labels_path"], np.asarray(y_test, dtype=np.int64))
    total_seconds = time.perf_counter() - t_start

    metrics = {
        "name": name,
        "dataset": spec.dataset,
        "description": spec.description,
        "epochs": epochs,
        "seed": seed,
        "data_seed": data_seed,
        "batch_size": spec.batch_size,
        "lr": spec.lr,
        "device": str(dev),
        "n_params": int(sum(p.numel() for p in model.parameters())),
        "n_train": int(len(x_train)),
        "n_test": int(len(x_test)),
        "train_loss": train_losses,
        "test_accuracy": test_accs,
        "final_test_accuracy": final_acc,
        "train_seconds": round(train_seconds, 3),
        "seconds": round(total_seconds, 3),
        "versions": versions(),
    }
    save_json(paths["metrics_path"], metrics)
    return TrainResult(
        name=name,
        out_dir=out_dir,
        final_test_accuracy=final_acc,
        train_losses=train_losses,
        test_accuracies=test_accs,
        train_seconds=train_seconds,
        total_seconds=total_seconds,
        device=str(dev),
        **paths,
    )


def result_dict(result: TrainResult) -> dict:
    """:class:`TrainResult` as a JSON-friendly dict (paths as strings)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(result).items()}


def main(argv: list[str] | None = None) -> int:
    """``python -m tessera.models.train NAME OUT_DIR [--epochs N] [--seed S] [--quiet]``."""
    import argparse

    from .zoo import ZOO

    parser = argparse.ArgumentParser(description="Train and export one tessera zoo model.")
    parser.add_argument("name", choices=sorted(ZOO))
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    result = train_model(args.name, args.out_dir, epochs=args.epochs, seed=args.seed,
                         progress=not args.quiet)
    print(f"{result.name}: test accuracy {result.final_test_accuracy:.4f} "
          f"({result.train_seconds:.1f} s training) -> {result.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
