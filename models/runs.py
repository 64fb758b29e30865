"""What every training run shares: files written atomically (a kill never leaves half a
file), deterministic seeding, the progress bar, the library versions recorded in metrics, and
the learning-curve plot."""

from __future__ import annotations

import json
import os
import platform
import random
import tempfile
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

__all__ = ["atomic_path", "deterministic", "plot_learning_curve", "progress_bar", "save_json", "save_npy", "versions"]


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` (same suffix); on success flush it to disk
    (``fsync``), rename it to ``path`` and flush the folder entry, so ``path`` is always either
    the old file or the whole new one, also after a kill or a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o644)  # mkstemp creates 0600
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
        try:
            dfd = os.open(path.parent, os.O_RDONLY)
        except OSError:  # a folder that cannot be opened (some platforms): the rename stands
            dfd = None
        if dfd is not None:
            try:
                os.fsync(dfd)
            except OSError:
                pass
            finally:
                os.close(dfd)
    finally:
        tmp_path.unlink(missing_ok=True)


def save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)


def save_json(path: Path, obj) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2) + "\n")


@contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """Seed python / numpy / torch and force deterministic kernels; restore flags after."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    prev_alg = torch.are_deterministic_algorithms_enabled()
    prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    prev_cudnn = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(prev_alg, warn_only=prev_warn)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = prev_cudnn


def progress_bar(enabled: bool):
    if not enabled:
        return nullcontext(None)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )


def versions() -> dict[str, str]:
    import brevitas

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "brevitas": brevitas.__version__,
        "numpy": np.__version__,
    }


def plot_learning_curve(path: Path, title: str, losses: list[float], vals: list[float], val_label: str,
          baseline: float | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
    ep = np.arange(1, len(losses) + 1)
    ax[0].plot(ep, losses, marker="o")
    ax[0].set_xlabel("epoch")
    ax[0].set_ylabel("train loss")
    ax[0].set_yscale("log")
    ax[1].plot(ep, vals, marker="o", label="model")
    if baseline is not None:
        ax[1].axhline(baseline, color="grey", ls="--", label="train-mean predictor")
        ax[1].legend()
    ax[1].set_xlabel("epoch")
    ax[1].set_ylabel(val_label)
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
