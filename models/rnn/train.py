"""Training of the quantized RNNs: ``train_rnn`` and the click-free CLI function ``train_rnn_cli``.

``train_rnn(cell, weights, task, out_dir)`` trains one model and writes into ``out_dir``:

* ``checkpoint.pt``        -- ``{"state_dict", "config", ...}`` of the selected model
  (sentiment: the epoch with the best validation accuracy; moving digits: the last epoch);
* ``metrics.json``         -- per-epoch train loss and validation / test metrics, the final
  test metrics, configuration, timings, versions;
* ``learning_curves.png``  -- train loss and the validation metric per epoch;
* ``vocab.json``           -- (sentiment) the token list (ids 2.. in order);
* ``cell.onnx`` (sentiment) or ``encoder.onnx`` + ``forecaster.onnx`` (moving digits) --
  the trained recurrent cells in the export forms of :mod:`tessera.models.rnn.export`
  (unless ``export=False``).

Tasks:

``sentiment`` (cells ``lstm``, ``gru``) -- :func:`tessera.models.data.sentiment.load_sentiment`
  (10,568 real movie-review sentences, 70/10/20 split); right-padded token ids with the
  classifier reading the hidden state at each sentence's last token (so padding never
  changes a prediction); batches bucketed by length; Adam, cosine decay, cross-entropy.
  Metric: accuracy.
``moving-digits`` (cell ``convlstm``) -- :func:`tessera.models.data.moving_digits.load_moving_digits`:
  the first ``in_frames`` frames in, the next ``out_frames`` predicted; loss: pixel-wise
  binary cross-entropy with logits.  Metrics, on ``sigmoid(logits)`` against the target
  frames in [0, 1]: **per-frame MSE** = sum over the frame's pixels of the squared error,
  averaged over predicted frames and sequences (the usual Moving MNIST convention), and
  **per-frame BCE** likewise; per-pixel means are reported too.

Defaults are sized for 2 CPU cores (a few minutes per run); larger settings are documented
in ``docs/rnn_quantization.md``.
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

from ..runs import atomic_path, deterministic, progress_bar, save_json, versions
from ..train import optimizer_step
from .quant import WEIGHT_KINDS

__all__ = ["DEFAULTS", "RNNTrainResult", "TASKS", "load_checkpoint", "train_rnn", "train_rnn_cli"]

TASKS = {"sentiment": ("lstm", "gru"), "moving-digits": ("convlstm",)}

#: Default hyper-parameters per task; any of them can be overridden with ``train_rnn(**kw)``.
DEFAULTS: dict[str, dict] = {
    "sentiment": {
        "epochs": 4, "batch_size": 64, "lr": 3e-3, "embed_dim": 32, "hidden_size": 64,
        "max_len": 50, "min_count": 2, "max_vocab": 20000, "stochastic": False,
    },
    "moving-digits": {
        "epochs": 3, "batch_size": 16, "lr": 3e-3, "hidden_channels": 16, "kernel_size": 3,
        "patch": 4, "n_train": 600, "n_test": 200, "n_frames": 20, "in_frames": 10,
        "size": 64, "n_digits": 2, "stochastic": False,
    },
}


@dataclass
class RNNTrainResult:
    """Outcome of one :func:`train_rnn` run (metrics as in ``metrics.json``)."""

    cell: str
    weights: str
    task: str
    out_dir: Path
    metrics_path: Path
    checkpoint_path: Path
    plot_path: Path
    onnx_paths: list[Path]
    test_metrics: dict[str, float]
    train_losses: list[float] = field(default_factory=list)
    val_curve: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    total_seconds: float = 0.0
    device: str = "cpu"


# ---------------------------------------------------------------------------------------
# sentiment
# ---------------------------------------------------------------------------------------


def _length_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator | None):
    """Index batches of similar lengths; shuffled (seeded) when ``rng`` is given."""
    n = len(lengths)
    order = rng.permutation(n) if rng is not None else np.arange(n)
    chunk = batch_size * 50
    batches = []
    for start in range(0, n, chunk):
        part = order[start:start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches += [part[i:i + batch_size] for i in range(0, len(part), batch_size)]
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


class _Sentiment:
    metric = "accuracy"
    higher_is_better = True

    def __init__(self, cfg: dict, data_seed: int, dev: torch.device) -> None:
        from ..data.sentiment import Vocab, encode_batch, load_sentiment

        data = load_sentiment(seed=data_seed)
        self.vocab = Vocab.build(data.train_texts, cfg["min_count"], cfg["max_vocab"])
        self.split = {}
        for name, texts, labels in (("train", data.train_texts, data.train_labels),
                                    ("val", data.val_texts, data.val_labels),
                                    ("test", data.test_texts, data.test_labels)):
            ids, lengths = encode_batch(self.vocab, texts, cfg["max_len"])
            self.split[name] = (torch.from_numpy(ids).to(dev), torch.from_numpy(lengths),
                                torch.from_numpy(labels).to(dev))
        self.cfg, self.dev = cfg, dev
        self.sizes = {k: int(len(v[2])) for k, v in self.split.items()}

    def build(self, cell: str, weights: str) -> nn.Module:
        from .networks import SentimentRNN

        return SentimentRNN(cell, weights, len(self.vocab), self.cfg["embed_dim"],
                            self.cfg["hidden_size"], stochastic=self.cfg["stochastic"])

    def n_batches(self) -> int:
        return math.ceil(self.sizes["train"] / self.cfg["batch_size"])

    def _batch(self, name, idx):
        ids, lengths, labels = self.split[name]
        t = int(lengths[idx].max())
        idx_t = torch.from_numpy(idx).to(self.dev)
        return ids[idx_t, :t], lengths[idx].to(self.dev), labels[idx_t]

    def train_batches(self, rng):
        lengths = self.split["train"][1].numpy()
        for idx in _length_batches(lengths, self.cfg["batch_size"], rng):
            tokens, lengths_b, y = self._batch("train", idx)
            yield (tokens, lengths_b), y

    @staticmethod
    def loss(model, inputs, y):
        return nn.functional.cross_entropy(model(*inputs), y)

    @torch.no_grad()
    def evaluate(self, model, name: str) -> dict[str, float]:
        was = model.training
        model.eval()
        lengths = self.split[name][1].numpy()
        correct = 0
        for idx in _length_batches(lengths, 256, None):
            tokens, lengths_b, y = self._batch(name, idx)
            correct += int((model(tokens, lengths_b).argmax(1) == y).sum())
        model.train(was)
        return {"accuracy": correct / max(self.sizes[name], 1)}

    def export(self, model, out_dir: Path) -> list[Path]:
        from .export import export_gru, export_lstm

        path = out_dir / "cell.onnx"
        if model.cell == "lstm":
            return [export_lstm(model.rnn, path)]
        return [export_gru(model.rnn, path)]

    def extra_files(self, out_dir: Path) -> None:
        with atomic_path(out_dir / "vocab.json") as tmp:
            tmp.write_text(json.dumps(self.vocab.to_json()) + "\n")


# ---------------------------------------------------------------------------------------
# moving digits
# ---------------------------------------------------------------------------------------


class _MovingDigits:
    metric = "mse_per_frame"
    higher_is_better = False

    def __init__(self, cfg: dict, data_seed: int, dev: torch.device) -> None:
        from ..data.moving_digits import load_moving_digits

        if not 0 < cfg["in_frames"] < cfg["n_frames"]:
            raise ValueError("in_frames must be between 1 and n_frames - 1")
        data = load_moving_digits(cfg["n_train"], cfg["n_test"], cfg["n_frames"], cfg["size"],
                                  cfg["n_digits"], seed=data_seed)
        self.split = {"train": torch.from_numpy(data.train), "test": torch.from_numpy(data.test)}
        self.cfg, self.dev = cfg, dev
        self.sizes = {k: int(len(v)) for k, v in self.split.items()}

    def build(self, cell: str, weights: str) -> nn.Module:
        from .networks import ConvLSTMForecaster

        return ConvLSTMForecaster(weights, self.cfg["hidden_channels"], self.cfg["kernel_size"],
                                  self.cfg["patch"], self.cfg["n_frames"] - self.cfg["in_frames"],
                                  stochastic=self.cfg["stochastic"])

    def n_batches(self) -> int:
        return math.ceil(self.sizes["train"] / self.cfg["batch_size"])

    def _frames(self, name, idx):
        seq = self.split[name][torch.as_tensor(idx)].to(self.dev).float().div_(255.0)
        seq = seq.unsqueeze(2)  # (N, T, 1, S, S)
        k = self.cfg["in_frames"]
        return seq[:, :k], seq[:, k:]

    def train_batches(self, rng):
        perm = rng.permutation(self.sizes["train"])
        bs = self.cfg["batch_size"]
        for start in range(0, len(perm), bs):
            x, y = self._frames("train", perm[start:start + bs])
            yield (x,), y

    @staticmethod
    def loss(model, inputs, y):
        return nn.functional.binary_cross_entropy_with_logits(model(*inputs), y)

    @torch.no_grad()
    def evaluate(self, model, name: str) -> dict[str, float]:
        was = model.training
        model.eval()
        sq = bce = 0.0
        frames = 0
        pixels = None
        for start in range(0, self.sizes[name], 32):
            x, y = self._frames(name, np.arange(start, min(start + 32, self.sizes[name])))
            logits = model(x).double()
            y = y.double()
            p = torch.sigmoid(logits)
            sq += float(((p - y) ** 2).sum())
            bce += float(nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="sum"))
            frames += y.shape[0] * y.shape[1]
            pixels = y.shape[-1] * y.shape[-2]
        model.train(was)
        return {"mse_per_frame": sq / frames, "bce_per_frame": bce / frames,
                "mse_per_pixel": sq / frames / pixels, "bce_per_pixel": bce / frames / pixels}

    def export(self, model, out_dir: Path) -> list[Path]:
        from .export import export_convlstm

        side = self.cfg["size"] // self.cfg["patch"]
        return [export_convlstm(model.encoder, out_dir / "encoder.onnx", self.cfg["in_frames"], side, side),
                export_convlstm(model.forecaster, out_dir / "forecaster.onnx",
                                self.cfg["n_frames"] - self.cfg["in_frames"], side, side)]

    def extra_files(self, out_dir: Path) -> None:
        pass


# ---------------------------------------------------------------------------------------
# the training loop
# ---------------------------------------------------------------------------------------


def _state(model: nn.Module) -> dict:
    """``state_dict`` without brevitas' lazily created ``_fast_cell`` duplicates (QuantLSTM
    builds them at its first eval-mode forward; they alias the cell's own quantizers)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items() if "._fast_cell." not in k}


def _load_state(model: nn.Module, state: dict) -> None:
    """Load a :func:`_state` dict; only ``_fast_cell`` aliases may be missing."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    bad = [k for k in missing if "._fast_cell." not in k] + list(unexpected)
    if bad:
        raise RuntimeError(f"checkpoint does not match the model: {bad[:5]}")
    fast = getattr(model, "rnn", None)
    for m in (fast.modules() if fast is not None else []):
        if hasattr(m, "_fast_cell"):
            m._fast_cell = None  # rebuilt from the loaded quantizers at the next eval forward


def load_checkpoint(path: str | Path, map_location: str = "cpu") -> nn.Module:
    """Rebuild the model saved by :func:`train_rnn` (eval mode)."""
    ckpt = torch.load(Path(path), map_location=map_location, weights_only=False)
    cfg, task = ckpt["config"], ckpt["task"]
    if task == "sentiment":
        from .networks import SentimentRNN

        vocab_size = ckpt["state_dict"]["embedding.weight"].shape[0]
        model = SentimentRNN(ckpt["cell"], ckpt["weights"], vocab_size, cfg["embed_dim"],
                             cfg["hidden_size"], stochastic=cfg["stochastic"])
    else:
        from .networks import ConvLSTMForecaster

        model = ConvLSTMForecaster(ckpt["weights"], cfg["hidden_channels"], cfg["kernel_size"],
                                   cfg["patch"], cfg["n_frames"] - cfg["in_frames"],
                                   stochastic=cfg["stochastic"])
    _load_state(model, ckpt["state_dict"])
    return model.eval()


def _plot_curves(path: Path, title: str, losses: list[float], val: list[float], metric: str,
                 val_label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = np.arange(1, len(losses) + 1)
    fig, ax1 = plt.subplots(figsize=(6, 3.6))
    ax1.plot(epochs, losses, "o-", color="tab:blue", label="train loss")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("train loss", color="tab:blue")
    ax2 = ax1.twinx()
    ax2.plot(epochs, val, "s-", color="tab:red", label=f"{val_label} {metric}")
    ax2.set_ylabel(f"{val_label} {metric}", color="tab:red")
    ax1.set_title(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def train_rnn(
    cell: str,
    weights: str,
    task: str,
    out_dir: str | Path,
    epochs: int | None = None,
    seed: int = 0,
    progress: bool = True,
    *,
    data_seed: int = 0,
    device: str | None = None,
    export: bool = True,
    threads: int | None = None,
    **overrides,
) -> RNNTrainResult:
    """Train one quantized RNN and write its artefacts (see module doc) to ``out_dir``.

    Args:
        cell: ``"lstm"`` or ``"gru"`` (task ``"sentiment"``), ``"convlstm"``
            (task ``"moving-digits"``).
        weights: ``"fp"``, ``"binary"``, ``"ternary"`` or ``"quaternary"``.
        task: ``"sentiment"`` or ``"moving-digits"``.
        out_dir: output folder (created; existing files replaced).
        epochs: ``None`` = the task default (:data:`DEFAULTS`).
        seed: weight initialisation, batch order and stochastic binarization.
        progress: rich progress bar.
        data_seed: data split / generation seed (fixed so that seeds share one test set).
        device: torch device; default CUDA when available, else CPU.
        export: write the ONNX export of the trained cells.
        threads: ``torch.set_num_threads`` for the run (restored afterwards).
        **overrides: any key of ``DEFAULTS[task]`` (e.g. ``hidden_size=128``,
            ``n_train=8000``, ``stochastic=True``).

    Raises:
        ValueError: bad cell / weights / task combination or unknown override.
        tessera.models.data.cache.DataUnavailable: data neither cached nor downloadable.
    """
    t_start = time.perf_counter()
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
    if cell not in TASKS[task]:
        raise ValueError(f"cell {cell!r} does not fit task {task!r} (use {', '.join(TASKS[task])})")
    if weights not in WEIGHT_KINDS:
        raise ValueError(f"unknown weights {weights!r}; known: {', '.join(WEIGHT_KINDS)}")
    unknown = set(overrides) - set(DEFAULTS[task])
    if unknown:
        raise ValueError(f"unknown option(s) for {task}: {', '.join(sorted(unknown))}")
    cfg = {**DEFAULTS[task], **overrides}
    cfg["epochs"] = int(cfg["epochs"] if epochs is None else epochs)
    if cfg["epochs"] < 1:
        raise ValueError("epochs must be >= 1")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    prev_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(int(threads))
    name = f"{cell}-{weights}"
    try:
        job = (_Sentiment if task == "sentiment" else _MovingDigits)(cfg, data_seed, dev)
        with deterministic(seed):
            model = job.build(cell, weights).to(dev)
            steps = cfg["epochs"] * job.n_batches()
            optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
                optimizer, T_max=steps, eta_min=cfg["lr"] * 0.05)
            rng = np.random.default_rng(seed)
            losses, val_curve, test_curve = [], [], []
            best, best_state, best_epoch = None, None, 0
            val_split = "val" if "val" in job.sizes else "test"
            t_train = time.perf_counter()
            with progress_bar(progress) as bar:
                task_id = bar.add_task(name, total=steps, status="") if bar is not None else None
                for epoch in range(cfg["epochs"]):
                    model.train()
                    batch_losses = []
                    for inputs, y in job.train_batches(rng):
                        value = optimizer_step(job.loss(model, inputs, y), optimizer, scheduler, what=name)
                        batch_losses.append(value)
                        if bar is not None:
                            bar.update(task_id, advance=1, status=f"loss {value:.4f}")
                    losses.append(float(np.mean(batch_losses)))
                    val = job.evaluate(model, val_split)[job.metric]
                    val_curve.append(val)
                    if val_split != "test":
                        test_curve.append(job.evaluate(model, "test")[job.metric])
                    better = best is None or (val > best if job.higher_is_better else val < best)
                    # sentiment: keep the best validation epoch; moving digits: the last one
                    if val_split == "test" or better:
                        best, best_epoch = val, epoch + 1
                        best_state = _state(model)
                    if bar is not None:
                        bar.update(task_id, description=f"{name} [{epoch + 1}/{cfg['epochs']}]",
                                   status=f"loss {losses[-1]:.4f} {val_split} {job.metric} {val:.4f}")
            train_seconds = time.perf_counter() - t_train
            _load_state(model, best_state)
            model.eval()
            test_metrics = job.evaluate(model, "test")

        ckpt = out_dir / "checkpoint.pt"
        with atomic_path(ckpt) as tmp:
            torch.save({"state_dict": {k: v.cpu() for k, v in _state(model).items()},
                        "cell": cell, "weights": weights, "task": task, "config": cfg,
                        "epoch": best_epoch}, tmp)
        job.extra_files(out_dir)
        onnx_paths = job.export(model, out_dir) if export else []
        plot = out_dir / "learning_curves.png"
        _plot_curves(plot, f"{name} ({task}, seed {seed})", losses, val_curve, job.metric,
                     val_split)
        total_seconds = time.perf_counter() - t_start
        metrics = {
            "cell": cell, "weights": weights, "task": task, "seed": seed,
            "data_seed": data_seed, "config": cfg, "device": str(dev),
            "n_params": int(sum(p.numel() for p in model.parameters())),
            "sizes": job.sizes, "metric": job.metric, "train_loss": losses,
            f"{val_split}_{job.metric}": val_curve,
            **({f"test_{job.metric}": test_curve} if test_curve else {}),
            "selected_epoch": best_epoch, "test": test_metrics,
            "onnx": [p.name for p in onnx_paths],
            "train_seconds": round(train_seconds, 3), "seconds": round(total_seconds, 3),
            "threads": torch.get_num_threads(), "versions": versions(),
        }
        metrics_path = out_dir / "metrics.json"
        save_json(metrics_path, metrics)
    finally:
        torch.set_num_threads(prev_threads)
    return RNNTrainResult(
        cell=cell, weights=weights, task=task, out_dir=out_dir, metrics_path=metrics_path,
        checkpoint_path=ckpt, plot_path=plot, onnx_paths=onnx_paths, test_metrics=test_metrics,
        train_losses=losses, val_curve=val_curve, train_seconds=train_seconds,
        total_seconds=total_seconds, device=str(dev))


def train_rnn_cli(cell: str, weights: str, task: str | None = None, epochs: int | None = None,
                  seed: int = 0, output: str | Path | None = None, progress: bool = True) -> dict:
    """Plain function behind ``tessera train rnn --cell --weights --task --epochs --seed -o``.

    ``task`` defaults to ``sentiment`` for lstm/gru and ``moving-digits`` for convlstm;
    ``output`` defaults to ``runs/rnn/<task>/<cell>-<weights>-s<seed>``.  Prints a one-line
    summary and returns the result as a JSON-friendly dict.
    """
    if task is None:
        task = "moving-digits" if cell == "convlstm" else "sentiment"
    out = Path(output) if output is not None else Path("runs") / "rnn" / task / f"{cell}-{weights}-s{seed}"
    res = train_rnn(cell, weights, task, out, epochs=epochs, seed=seed, progress=progress)
    summary = ", ".join(f"{k} {v:.4f}" for k, v in res.test_metrics.items())
    print(f"{cell}-{weights} on {task}: test {summary} ({res.train_seconds:.1f} s training) -> {out}")
    d = asdict(res)
    return {k: (str(v) if isinstance(v, Path) else [str(p) for p in v] if k == "onnx_paths" else v)
            for k, v in d.items()}


def main(argv: list[str] | None = None) -> int:
    """``python -m tessera.models.rnn.train --cell C --weights W [--task T] [--epochs N]
    [--seed S] [-o DIR] [--quiet]``."""
    import argparse

    p = argparse.ArgumentParser(description="Train one quantized RNN (paper 3 reproduction).")
    p.add_argument("--cell", required=True, choices=["lstm", "gru", "convlstm"])
    p.add_argument("--weights", required=True, choices=list(WEIGHT_KINDS))
    p.add_argument("--task", choices=list(TASKS), default=None)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default=None)
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    train_rnn_cli(a.cell, a.weights, a.task, a.epochs, a.seed, a.output, progress=not a.quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
