"""Quantization-aware training and QONNX export of the 3D CNNs (CosmoFlow, 3D U-Net).

``train_cnn3d(model, out_dir)`` trains one of ``'cosmoflow'``, ``'cosmoflow-mlperf'``,
``'unet3d'`` (see :mod:`tessera.models.cnn3d`) on its data set
(:mod:`tessera.models.data.cosmology` / :mod:`tessera.models.data.brain`) and writes into
``out_dir``:

* ``model.onnx``        -- QONNX export (batch 1) of the trained model in eval mode, with
  BatchNorm folded into the convolutions (:func:`tessera.models.cnn3d.fold_batchnorm`);
* ``checkpoint.pt``     -- ``{'model': state_dict, 'optimizer': ..., 'epoch': ...}`` after
  every epoch (the unfolded training model);
* ``metrics.json``      -- per-epoch losses and validation metrics, final metrics of the
  exported (folded) model, sizes, MACs, timings, versions;
* ``learning_curve.png`` -- train loss and validation metric per epoch;
* ``test_inputs.npy`` / ``test_targets.npy`` -- a few validation inputs exactly as fed to
  the model, and their targets (regression targets or voxel labels).

Small defaults that finish in minutes on 2 CPU cores; the published sizes are
``size=128, width=1`` (CosmoFlow) -- far beyond a CPU.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .cnn3d import build_cnn3d, count_macs, count_params, fold_batchnorm
from .runs import atomic_path, deterministic, plot_learning_curve, progress_bar, save_json, save_npy, versions
from .train import export_model, optimizer_step

__all__ = ["DEFAULTS", "Train3DResult", "dice_per_class", "export_cnn3d", "load_folded", "refold_export", "train_cnn3d",
           "main"]

MODELS = ("cosmoflow", "cosmoflow-mlperf", "unet3d")

#: Per-model defaults (overridable by keyword): sized for a few minutes on 2 CPU cores.
#: The CosmoFlow runs add BatchNorm after every conv (folded into the conv at export) and
#: drop dropout: without BN the small quantized CosmoFlow collapsed to a constant
#: prediction (width 1/4, 32^3, 4 epochs, dropout 0: validation MSE 0.416 = the
#: train-mean predictor's 0.416; with BN: 0.270).
DEFAULTS = {
    "cosmoflow": dict(epochs=40, width=0.25, size=32, n_samples=1024, batch_size=8, lr=2e-3,
                      options=dict(batchnorm=True, dropout=0.0)),
    "cosmoflow-mlperf": dict(epochs=40, width=0.25, size=32, n_samples=1024, batch_size=8,
                             lr=2e-3, options=dict(batchnorm=True, dropout=0.0)),
    "unet3d": dict(epochs=8, width=0.125, size=24, n_samples=128, batch_size=4, lr=3e-3),
}


@dataclass
class Train3DResult:
    """Paths and metrics of one :func:`train_cnn3d` run.

    ``metric`` is the validation MSE (CosmoFlow, normalized targets) or the mean Dice over
    the 3 classes (U-Net) of the *exported* (BN-folded) model; ``baseline`` is the MSE of
    predicting the training mean (CosmoFlow) or ``nan``.
    """

    model: str
    out_dir: Path
    onnx_path: Path
    checkpoint_path: Path
    metrics_path: Path
    plot_path: Path
    test_inputs_path: Path
    test_targets_path: Path
    metric: float
    baseline: float
    metrics: dict = field(default_factory=dict)
    train_losses: list[float] = field(default_factory=list)
    val_metrics: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    total_seconds: float = 0.0
    device: str = "cpu"


def dice_per_class(pred: np.ndarray, target: np.ndarray, n_classes: int) -> list[float]:
    """Dice ``2|P & G| / (|P| + |G|)`` per class over all voxels (1.0 when both empty)."""
    out = []
    for c in range(n_classes):
        p, g = pred == c, target == c
        denom = int(p.sum()) + int(g.sum())
        out.append(1.0 if denom == 0 else 2.0 * int((p & g).sum()) / denom)
    return out


@torch.no_grad()
def _predict(model: nn.Module, x: torch.Tensor, batch: int) -> torch.Tensor:
    model.eval()
    return torch.cat([model(x[i:i + batch]) for i in range(0, len(x), batch)])


def _evaluate(kind: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int,
              n_classes: int, baseline_mean: np.ndarray | None) -> dict:
    out = _predict(model, x, batch)
    if kind == "regression":
        err = (out - y).pow(2).mean(dim=0).cpu().numpy()
        return {"val_mse": float(err.mean()), "val_mse_per_param": err.tolist()}
    pred = out.argmax(dim=1).cpu().numpy()
    dice = dice_per_class(pred, y.cpu().numpy(), n_classes)
    return {"val_dice_per_class": dice, "val_dice_mean": float(np.mean(dice)),
            "val_dice_foreground": float(np.mean(dice[1:])),
            "val_voxel_accuracy": float((pred == y.cpu().numpy()).mean())}


def export_cnn3d(model: nn.Module, example_input: torch.Tensor, path: str | Path) -> Path:
    """:func:`tessera.models.train.export_model` (QONNX, TorchScript exporter, batch 1),
    then replace every ``Identity`` node whose input is an initializer by a copy of that
    initializer.

    The TorchScript exporter de-duplicates equal initializers (e.g. the all-zero biases of
    a freshly initialised model, or equal folded biases) and re-creates the duplicates
    with ``Identity`` nodes; afterwards the graph contains only the compute ops.
    """
    import onnx
    from onnx import numpy_helper

    
    path = export_model(model, example_input, path)
    m = onnx.load(str(path))
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    aliases = [n for n in g.node if n.op_type == "Identity" and n.input[0] in inits]
    if aliases:
        for n in aliases:
            g.initializer.append(numpy_helper.from_array(
                numpy_helper.to_array(inits[n.input[0]]), n.output[0]))
            g.node.remove(n)
        with atomic_path(Path(path)) as tmp:
            onnx.save(m, str(tmp))
    return Path(path)


def load_folded(checkpoint: str | Path) -> nn.Module:
    """The model of a :func:`train_cnn3d` checkpoint, rebuilt from its stored config, with
    BatchNorm folded (:func:`fold_batchnorm`), in eval mode on the CPU: the network that
    ``model.onnx`` holds.  The 3D models are fully convolutional up to their dense head, so
    a U-Net can be exported at another input size than it was trained on."""
    ck = torch.load(Path(checkpoint), map_location="cpu", weights_only=False)
    c = ck["config"]
    net = build_cnn3d(c["model"], width=c["width"], input_size=c["size"],
                      in_channels=c["in_channels"], n_out=c["n_out"], **c.get("options", {}))
    net.load_state_dict(ck["model"])
    return fold_batchnorm(net.eval())


def _load_data(model: str, size: int, n_samples: int, data_seed: int, progress: bool,
               data_options: dict):
    if model == "unet3d":
        from .data.brain import load_brain_patches

        n_val = max(8, n_samples // 4)
        b = load_brain_patches(n_train=n_samples, n_val=n_val, patch=size, seed=data_seed,
                               **data_options)
        return b.x_train, b.y_train, b.x_val, b.y_val, {
            "dataset": "MNI152 2009a (nilearn 0.14.1 wheel), 3-class patches",
            "resolution_mm": 2, "y_split": b.y_split}
    from .data.cosmology import CosmologyConfig, load_cosmology

    cfg = CosmologyConfig(n_samples=n_samples, size=size, seed=data_seed, **data_options)
    xt, yt, xv, yv = load_cosmology(cfg, progress=progress)
    return xt, yt, xv, yv, {"dataset": "synthetic Zel'dovich/CAMB cosmology volumes",
                            "cosmology_config": asdict(cfg)}


def train_cnn3d(
    model: str,
    out_dir: str | Path,
    epochs: int | None = None,
    seed: int = 0,
    size: int | None = None,
    width: float | None = None,
    progress: bool = True,
    *,
    n_samples: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    data_seed: int = 0,
    device: str | None = None,
    threads: int | None = 1,
    n_test_inputs: int = 4,
    model_options: dict | None = None,
    data_options: dict | None = None,
    augment: bool = True,
) -> Train3DResult:
    """Train a quantized 3D CNN with QAT, fold BN, export to QONNX and write artefacts.

    Args:
        model: ``'cosmoflow'``, ``'cosmoflow-mlperf'`` or ``'unet3d'``.
        out_dir: output folder (created; existing files replaced).
        epochs, size, width, n_samples, batch_size, lr: ``None`` -> :data:`DEFAULTS`.
            ``size`` is the input edge (CosmoFlow volume / U-Net patch), ``n_samples``
            the number of generated volumes (CosmoFlow, train + validation) or of training
            patches (U-Net; plus ``n_samples // 4`` validation patches).
        seed: weights and batch order; ``data_seed``: the data set.
        device: default CUDA when available, else CPU.
        threads: ``torch.set_num_threads`` during training (restored after); ``None``
            leaves it alone.
        model_options: builder options (CosmoFlow: ``batchnorm``, ``dropout``);
            ``None`` -> ``DEFAULTS[model]['options']``.
        data_options: extra fields of :class:`~tessera.models.data.cosmology.CosmologyConfig`
            (e.g. ``samples_per_cosmology``) or keywords of
            :func:`~tessera.models.data.brain.load_brain_patches` (e.g. ``val_fraction``).

        augment: CosmoFlow: redraw each training volume every epoch under a random exact
            symmetry of the periodic box (axis permutation, flips, periodic shift;
            :func:`tessera.models.data.cosmology.augment`).  The U-Net always augments.

    Adam, cosine learning-rate decay; MSE loss (CosmoFlow) or cross-entropy (U-Net, with
    random flips and intensity jitter of the training patches each epoch).
    """
    if model not in MODELS:
        raise KeyError(f"unknown 3D model {model!r}; known: {', '.join(MODELS)}")
    t_start = time.perf_counter()
    d = DEFAULTS[model]
    epochs = int(d["epochs"] if epochs is None else epochs)
    size = int(d["size"] if size is None else size)
    width = float(d["width"] if width is None else width)
    n_samples = int(d["n_samples"] if n_samples is None else n_samples)
    batch_size = int(d["batch_size"] if batch_size is None else batch_size)
    lr = float(d["lr"] if lr is None else lr)
    options = dict(d.get("options", {}) if model_options is None else model_options)
    if epochs < 1:
        raise ValueError("epochs must be >= 1")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    kind = "segmentation" if model == "unet3d" else "regression"
    prev_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        x_tr, y_tr, x_va, y_va, data_info = _load_data(model, size, n_samples, data_seed,
                                                         progress, dict(data_options or {}))
        in_ch = int(x_tr.shape[1])
        n_out = 3 if kind == "segmentation" else int(y_tr.shape[1])
        baseline = None
        if kind == "regression":
            mean = y_tr.mean(axis=0, keepdims=True)
            baseline = float(((y_va - mean) ** 2).mean())
        with deterministic(seed):
            net = build_cnn3d(model, width=width, input_size=size, in_channels=in_ch,
                              n_out=n_out, **options).to(dev)
            n_params = count_params(net)
            macs = count_macs(net, x_tr.shape[1:])
            xv = torch.from_numpy(np.ascontiguousarray(x_va)).to(dev)
            yv = torch.from_numpy(np.ascontiguousarray(y_va)).to(dev)
            gen = torch.Generator().manual_seed(seed)
            aug_rng = np.random.default_rng(seed)
            steps = math.ceil(len(x_tr) / batch_size)
            opt = torch.optim.Adam(net.parameters(), lr=lr)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(
                opt, T_max=epochs * steps, eta_min=lr * 0.02)
            loss_fn = nn.functional.mse_loss if kind == "regression" else \
                nn.functional.cross_entropy
            train_losses, val_hist, val_metric = [], [], []
            t_train = time.perf_counter()
            with progress_bar(progress) as bar:
                task = bar.add_task(model, total=epochs * steps, status="") if bar else None
                for epoch in range(epochs):
                    if kind == "segmentation":
                        from .data.brain import augment

                        xe, ye = augment(x_tr, y_tr, aug_rng)
                    elif augment:
                        from .data.cosmology import augment as cosmo_augment

                        xe, ye = cosmo_augment(x_tr, aug_rng), y_tr
                    else:
                        xe, ye = x_tr, y_tr
                    xe_t = torch.from_numpy(np.ascontiguousarray(xe))
                    ye_t = torch.from_numpy(np.ascontiguousarray(ye))
                    perm = torch.randperm(len(xe_t), generator=gen)
                    net.train()
                    losses = []
                    for s in range(0, len(perm), batch_size):
                        idx = perm[s:s + batch_size]
                        out = net(xe_t[idx].to(dev))
                        value = optimizer_step(loss_fn(out, ye_t[idx].to(dev)), opt, sched)
                        losses.append(value)
                        if bar:
                            bar.update(task, advance=1, status=f"loss {value:.4f}")
                    train_losses.append(float(np.mean(losses)))
                    ev = _evaluate(kind, net, xv, yv, batch_size, n_out, None)
                    val_hist.append(ev)
                    val_metric.append(ev["val_mse"] if kind == "regression"
                                      else ev["val_dice_mean"])
                    state = {"model": {k: v.detach().cpu() for k, v in net.state_dict().items()},
                             "optimizer": opt.state_dict(), "epoch": epoch + 1,
                             "config": {"model": model, "width": width, "size": size,
                                        "in_channels": in_ch, "n_out": n_out,
                                        "options": options}}
                    with atomic_path(out_dir / "checkpoint.pt") as tmp:
                        torch.save(state, tmp)
                    if bar:
                        bar.update(task, description=f"{model} [{epoch + 1}/{epochs}]",
                                   status=f"loss {train_losses[-1]:.4f} val "
                                   f"{val_metric[-1]:.4f}")
            train_seconds = time.perf_counter() - t_train

            net.eval()
            final_unfolded = _evaluate(kind, net, xv, yv, batch_size, n_out, None)
            exported = fold_batchnorm(net)
            final = _evaluate(kind, exported, xv, yv, batch_size, n_out, None)
    finally:
        if threads is not None:
            torch.set_num_threads(prev_threads)

    paths = {
        "onnx_path": out_dir / "model.onnx",
        "checkpoint_path": out_dir / "checkpoint.pt",
        "metrics_path": out_dir / "metrics.json",
        "plot_path": out_dir / "learning_curve.png",
        "test_inputs_path": out_dir / "test_inputs.npy",
        "test_targets_path": out_dir / "test_targets.npy",
    }
    export_cnn3d(exported, torch.from_numpy(np.ascontiguousarray(x_va[:1])), paths["onnx_path"])
    save_npy(paths["test_inputs_path"],
              np.ascontiguousarray(x_va[:n_test_inputs], dtype=np.float32))
    save_npy(paths["test_targets_path"], np.ascontiguousarray(y_va[:n_test_inputs]))
    metric = final["val_mse"] if kind == "regression" else final["val_dice_mean"]
    plot_learning_curve(paths["plot_path"], f"{model} (width {width:g}, {size}^3)", train_losses,
          val_metric, "validation MSE" if kind == "regression" else "validation mean Dice",
          baseline)
    total_seconds = time.perf_counter() - t_start
    metrics = {
        "model": model, "task": kind, **data_info,
        "epochs": epochs, "augment": bool(augment) if kind == "regression" else True, "seed": seed, "data_seed": data_seed, "size": size,
        "width": width, "model_options": options, "n_samples": n_samples,
        "batch_size": batch_size, "lr": lr,
        "device": str(dev), "threads": threads,
        "n_train": int(len(x_tr)), "n_val": int(len(x_va)),
        "n_params": n_params, "macs_per_sample": macs,
        "train_loss": train_losses, "val": val_hist,
        "baseline_val_mse_train_mean": baseline,
        "final_unfolded": final_unfolded, "final_exported": final,
        "metric": metric,
        "train_seconds": round(train_seconds, 3), "seconds": round(total_seconds, 3),
        "versions": versions(),
    }
    if kind == "regression":
        metrics["mse_reduction_vs_mean"] = 1.0 - metric / baseline
    save_json(paths["metrics_path"], metrics)
    return Train3DResult(
        model=model, out_dir=out_dir, metric=metric,
        baseline=float("nan") if baseline is None else baseline, metrics=metrics,
        train_losses=train_losses, val_metrics=val_metric, train_seconds=train_seconds,
        total_seconds=total_seconds, device=str(dev), **paths)


def refold_export(out_dir: str | Path, progress: bool = False) -> dict:
    """Re-fold, re-evaluate and re-export a finished :func:`train_cnn3d` run from its
    ``checkpoint.pt`` (after a change of :func:`~tessera.models.cnn3d.fold_batchnorm`):
    rewrites ``model.onnx`` and the exported-model entries of ``metrics.json``
    (``final_exported``, ``metric``, ``mse_reduction_vs_mean``) on the same validation data.
    Returns the updated metrics."""
    out_dir = Path(out_dir)
    metrics = json.loads((out_dir / "metrics.json").read_text())
    kind = metrics["task"]
    data_options = {}
    if kind == "regression":
        cfg = dict(metrics["cosmology_config"])
        data_options = {k: (tuple(v) if isinstance(v, list) else v) for k, v in cfg.items()
                        if k not in ("n_samples", "size", "seed")}
    _, _, x_va, y_va, _ = _load_data(metrics["model"], metrics["size"], metrics["n_samples"],
                                     metrics["data_seed"], progress, data_options)
    folded = load_folded(out_dir / "checkpoint.pt")
    n_out = 3 if kind == "segmentation" else int(y_va.shape[1])
    final = _evaluate(kind, folded, torch.from_numpy(np.ascontiguousarray(x_va)),
                      torch.from_numpy(np.ascontiguousarray(y_va)), metrics["batch_size"], n_out, None)
    export_cnn3d(folded, torch.from_numpy(np.ascontiguousarray(x_va[:1])), out_dir / "model.onnx")
    metrics["final_exported"] = final
    metrics["metric"] = final["val_mse"] if kind == "regression" else final["val_dice_mean"]
    if kind == "regression":
        metrics["mse_reduction_vs_mean"] = 1.0 - metrics["metric"] / metrics["baseline_val_mse_train_mean"]
    metrics["exported_by"] = "refold_export (BatchNorm folded again from checkpoint.pt)"
    save_json(out_dir / "metrics.json", metrics)
    return metrics


def main(argv: list[str] | None = None) -> int:
    """``python -m tessera.models.train3d MODEL OUT_DIR [--epochs N] [--size S] ...``."""
    import argparse

    p = argparse.ArgumentParser(description="Train and export one quantized 3D CNN.")
    p.add_argument("model", choices=MODELS)
    p.add_argument("out_dir", type=Path)
    p.add_argument("--epochs", type=int)
    p.add_argument("--size", type=int)
    p.add_argument("--width", type=float)
    p.add_argument("--n-samples", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    r = train_cnn3d(a.model, a.out_dir, epochs=a.epochs, seed=a.seed, size=a.size,
                    width=a.width, progress=not a.quiet, n_samples=a.n_samples,
                    threads=a.threads)
    extra = f" (train-mean predictor {r.baseline:.4f})" if r.model != "unet3d" else ""
    print(f"{r.model}: metric {r.metric:.4f}{extra}, {r.train_seconds:.1f} s training "
          f"-> {r.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
