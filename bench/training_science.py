"""Acceptance 4 of the training companion: larger samples train a better CosmoFlow.

Paper 1's headline effect: training on whole large volumes (spatially split over ranks)
reaches a lower validation error than training on small crops of the same universes.  Here,
on the synthesized Zel'dovich/CAMB volumes (``tessera.models.data.cosmology``, 64^3, one
cosmology per universe, the last 20 % of the universes held out):

* **64^3**: whole volumes, CosmoFlow with its input at 64^3, each sample split over 2 ranks
  (``--spatial 2x1x1``), global mini-batch 8 volumes;
* **32^3 crops** (``--crop C`` for another edge): the 8 non-overlapping 32^3 octants of every
  universe as samples, the same CosmoFlow builder at 32^3, 2 data-parallel ranks, global
  mini-batch 64 crops (8 x (64/C)^3 for edge C; the same
  voxels per step, hence the same number of optimizer steps per epoch);

same width, learning rate, schedule, epochs and augmentation (random axis permutations and
flips; no periodic shifts, which crops do not have), for each seed.  The crop model is
scored per crop and, fairer to it, on the mean of its 8 crop predictions per universe.

Runs ``torchrun`` (gloo, CPU) for every (setting, seed) and writes
``docs/results/training_science.json`` and ``.png`` (``--name`` for another pair).

    python bench/training_science.py --seeds 0 1 --epochs 6 [--width 0.25]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _worker(a) -> int:
    from tessera.training.mesh import parse_grid
    from tessera.training.trainer import DistTrainConfig, train_distributed

    cfg = DistTrainConfig("cosmoflow", Path(a.out), data=a.data, grid=parse_grid(a.spatial), epochs=a.epochs,
                          width=a.width, batch_size=a.batch, lr=a.lr, seed=a.seed, data_dir=Path(a.data_dir),
                          augment=True, shifts=False, threads=1, export=False, max_steps=a.max_steps)
    train_distributed(cfg, progress=False)
    return 0


def _launch(out: Path, data_dir: Path, data: int, spatial: str, batch: int, a, seed: int) -> dict:
    if (out / "metrics.json").is_file():
        return json.loads((out / "metrics.json").read_text())
    import socket

    world = data * int(np.prod([int(v) for v in spatial.split("x")]))
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world), "--master-port",
           str(port), str(Path(__file__).resolve()), "--worker", "--out", str(out),
           "--data-dir", str(data_dir), "--data", str(data), "--spatial", spatial, "--batch", str(batch),
           "--epochs", str(a.epochs), "--width", str(a.width), "--lr", str(a.lr), "--seed", str(seed)]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    m = json.loads((out / "metrics.json").read_text())
    m["wall_seconds"] = round(time.perf_counter() - t, 1)
    (out / "metrics.json").write_text(json.dumps(m))
    return m


def _per_universe(m: dict, per: int) -> float:
    """MSE of the mean prediction over each universe's crops."""
    from tessera.training.samples import read_sample_target_path

    idx = np.asarray(m["val_indices"])
    pred = np.asarray(m["val_predictions"])
    folder = Path(m["config"]["data_dir"])
    errs = []
    for u in np.unique(idx // per):
        rows = idx // per == u
        y = read_sample_target_path(folder / f"univ_{idx[rows][0]:06d}.h5")
        errs.append((pred[rows].mean(axis=0) - y) ** 2)
    return float(np.mean(errs))


def _plot(rows, path: Path, crop: int = 32) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.set_yscale("log")  # early epochs swing by an order of magnitude
    for r in rows:
        style = "-" if r["setting"] == "64^3" else "--"
        ax.plot(np.arange(1, len(r["val_curve"]) + 1), r["val_curve"], style, marker="o", ms=3,
                label=f"{r['setting']} seed {r['seed']}")
    if rows:
        ax.axhline(rows[0]["baseline"], color="grey", ls=":", label="train-mean predictor")
    ax.set(xlabel="epoch", ylabel="validation MSE (per sample)", title=f"CosmoFlow: whole 64^3 volumes vs {crop}^3 crops")
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--max-steps", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--out")
    p.add_argument("--data-dir")
    p.add_argument("--data", type=int, default=1)
    p.add_argument("--spatial", default="1x1x1")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--width", type=float, default=0.25)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--n-samples", type=int, default=320)
    p.add_argument("--crop", type=int, default=32, help="crop edge (a divisor of 64); batch 8 x (64/crop)^3 crops")
    p.add_argument("--data-seed", type=int, default=7)
    p.add_argument("--runs", type=Path, default=None, help="run folders (default: the data cache)")
    p.add_argument("--results", type=Path, default=ROOT / "docs" / "results")
    p.add_argument("--name", default="training_science", help="result files NAME.json / NAME.png")
    a = p.parse_args(argv)
    if a.crop < 1 or 64 % a.crop:
        p.error(f"--crop {a.crop}: expected a divisor of the 64^3 volume's edge (8, 16 or 32)")
    if a.worker:
        return _worker(a)

    from tessera.models.data.cache import cache_dir
    from tessera.models.data.cosmology import CosmologyConfig, generate_cosmology
    from tessera.training.samples import write_crops

    full = generate_cosmology(None, CosmologyConfig(n_samples=a.n_samples, size=64, seed=a.data_seed))
    per = (64 // a.crop) ** 3
    crops = write_crops(full, full.parent / f"crops{a.crop}_of_{full.name}", a.crop)
    runs = a.runs or cache_dir() / "training_science" / f"w{a.width:g}_e{a.epochs}_lr{a.lr:g}"
    rows = []
    for seed in a.seeds:
        for setting, folder, data, spatial, batch in (("64^3", full, 1, "2x1x1", 8),
                                                      (f"{a.crop}^3 crops", crops, 2, "1x1x1", 8 * per)):
            m = _launch(runs / f"{setting.split()[0].replace('^', '')}_{'crops' if 'crops' in setting else 'full'}_s{seed}",
                        folder, data, spatial, batch, a, seed)
            row = {"setting": setting, "seed": seed, "val_mse": m["metric"], "baseline": m["baseline_val_mse_train_mean"],
                   "val_curve": [v["val_mse"] for v in m["val"]], "train_loss": m["train_loss"],
                   "n_train": m["n_train"], "n_val": m["n_val"], "mesh": m["mesh"], "batch_size": m["batch_size"],
                   "train_seconds": m["train_seconds"], "step_seconds_median": m["step_seconds_median"]}
            if "crops" in setting:
                row["val_mse_universe_mean"] = _per_universe(m, per)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("val_curve", "train_loss", "mesh")}), flush=True)
    out = {"epochs": a.epochs, "width": a.width, "lr": a.lr, "n_universes": a.n_samples, "data_seed": a.data_seed,
           "crop": a.crop, "runs": rows}
    a.results.mkdir(parents=True, exist_ok=True)
    (a.results / f"{a.name}.json").write_text(json.dumps(out, indent=1) + "\n")
    _plot(rows, a.results / f"{a.name}.png", a.crop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
