"""Benchmark of the quantized 3D CNNs (paper 1): accuracy, size and cost.

Trains each 3D model with the defaults of :func:`tessera.models.train3d.train_cnn3d`
(seed 0; reused from --work when its metrics.json is there), then writes
docs/results/cnn3d.json, cnn3d.md and cnn3d.png with:

* CosmoFlow (both variants): validation MSE of the exported (BN-free) model on the
  normalized targets, per parameter, against the MSE of predicting the training mean;
* 3D U-Net: Dice per class and mean on held-out MNI152 patches, before and after BN folding;
* parameters and multiply-accumulates per sample at the trained size and at the published
  size (128^3 inputs, width 1);
* the op types of each exported QONNX graph.

    python bench/cnn3d.py                         # all three (about 15-25 min on 2 cores)
    python bench/cnn3d.py --models unet3d --work runs/cnn3d
"""

from __future__ import annotations

import argparse
import json
import platform
from collections import Counter
from pathlib import Path

import numpy as np

from tessera.models.cnn3d import analytic_macs, build_cnn3d, count_params
from tessera.models.data.cosmology import PARAM_NAMES
from tessera.models.train3d import MODELS, train_cnn3d

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = {"cosmoflow": (128, 4, 4), "cosmoflow-mlperf": (128, 4, 4), "unet3d": (128, 1, 3)}


def op_summary(onnx_path: Path) -> dict:
    import onnx

    ops = [n.op_type for n in onnx.load(str(onnx_path)).graph.node]
    compact = []  # run-length encoded op sequence
    for op in ops:
        if compact and compact[-1][0] == op:
            compact[-1][1] += 1
        else:
            compact.append([op, 1])
    return {"counts": dict(Counter(ops)),
            "sequence": " ".join(op if n == 1 else f"{op}x{n}" for op, n in compact)}


def export_check(out: Path) -> dict:
    """Rebuild the trained model from checkpoint.pt, fold BN, and compare it with the QONNX
    graph executed by qonnx on test_inputs.npy (max abs difference)."""
    import warnings

    import onnx
    import torch
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    from tessera.models.train3d import load_folded

    folded = load_folded(out / "checkpoint.pt")
    x = np.load(out / "test_inputs.npy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = ModelWrapper(onnx.load(str(out / "model.onnx"))).transform(InferShapes())
        diffs = []
        for i in range(len(x)):
            got = execute_onnx(w, {"input": x[i:i + 1]})["output"]
            with torch.no_grad():
                ref = folded(torch.from_numpy(x[i:i + 1])).numpy()
            diffs.append(float(np.abs(got - ref).max()))
    return {"n_inputs": int(len(x)), "max_abs_diff": max(diffs)}


def summary_stats_reference(cosmology_config: dict) -> dict:
    """Per-parameter validation MSE of (a) the train-mean predictor and (b) a least-squares
    linear fit on 12 hand-made summary statistics per sample (per channel: std and mean of
    log1p(counts), std of the 8^3-voxel block means): how much of the targets a simple
    estimator can recover from the same data and split."""
    from tessera.models.data.cosmology import CosmologyConfig, load_cosmology

    cfg = dict(cosmology_config)
    cfg["redshifts"] = tuple(cfg["redshifts"])
    xt, yt, xv, yv = load_cosmology(CosmologyConfig(**cfg), progress=False)

    def feats(x):
        n, c, s = x.shape[0], x.shape[1], x.shape[2]
        b = s // 8 if s >= 16 else 1
        blocks = x.reshape(n, c, b, s // b, b, s // b, b, s // b).mean(axis=(3, 5, 7))
        return np.concatenate([x.std(axis=(2, 3, 4)), x.mean(axis=(2, 3, 4)),
                               blocks.std(axis=(2, 3, 4))], axis=1)

    ft, fv = feats(xt), feats(xv)
    mu, sd = ft.mean(0), ft.std(0) + 1e-12
    a = np.c_[(ft - mu) / sd, np.ones(len(ft))]
    w = np.linalg.lstsq(a, yt, rcond=None)[0]
    pred = np.c_[(fv - mu) / sd, np.ones(len(fv))] @ w
    lin = ((pred - yv) ** 2).mean(axis=0)
    base = ((yv - yt.mean(axis=0)) ** 2).mean(axis=0)
    return {"baseline_per_param": base.tolist(), "baseline": float(base.mean()),
            "linear_stats_per_param": lin.tolist(), "linear_stats": float(lin.mean())}


def bench_one(name: str, work: Path) -> dict:
    out = work / name
    if not (out / "metrics.json").is_file():
        train_cnn3d(name, out, progress=False)
    m = json.loads((out / "metrics.json").read_text())
    size, cin, nout = PUBLISHED[name]
    full = build_cnn3d(name, width=1.0, input_size=size, in_channels=cin, n_out=nout)
    row = {
        "model": name, "size": m["size"], "width": m["width"], "epochs": m["epochs"],
        "n_train": m["n_train"], "n_val": m["n_val"], "n_params": m["n_params"],
        "macs": m["macs_per_sample"], "published_params": count_params(full),
        "published_macs": analytic_macs(full, size), "train_seconds": m["train_seconds"],
        "metric": m["metric"], "final_exported": m["final_exported"],
        "final_unfolded": m["final_unfolded"], "ops": op_summary(out / "model.onnx"),
        "model_options": m.get("model_options", {}), "export_check": export_check(out),
    }
    if m["task"] == "regression":
        row["baseline_mse"] = m["baseline_val_mse_train_mean"]
        row["mse_reduction_vs_mean"] = m["mse_reduction_vs_mean"]
        row["reference"] = summary_stats_reference(m["cosmology_config"])
    return row


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reg = [r for r in rows if "baseline_mse" in r]
    seg = [r for r in rows if "baseline_mse" not in r]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    ax = axes[0]
    xs = np.arange(len(PARAM_NAMES))
    wbar = 0.8 / max(1, len(reg))
    for i, r in enumerate(reg):
        ax.bar(xs + i * wbar, r["final_exported"]["val_mse_per_param"], wbar, label=r["model"])
    if reg:
        ref = reg[0]["reference"]
        ax.scatter(xs + wbar * (len(reg) - 1) / 2, ref["baseline_per_param"], marker="_",
                   s=900, color="k", label="train-mean predictor", zorder=3)
        ax.scatter(xs + wbar * (len(reg) - 1) / 2, ref["linear_stats_per_param"], marker="x",
                   color="k", label="linear fit on 12 summary stats", zorder=3)
    ax.set_xticks(xs + wbar * (len(reg) - 1) / 2, PARAM_NAMES)
    ax.set_ylabel("validation MSE (normalized)")
    ax.legend(fontsize=8)
    ax = axes[1]
    for r in seg:
        d = r["final_exported"]["val_dice_per_class"]
        ax.bar(["background", "grey", "white"], d, label=r["model"])
        ax.axhline(0.8, color="grey", ls="--")
    ax.set_ylim(0, 1)
    ax.set_ylabel("validation Dice (exported model)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(rows: list[dict]) -> str:
    lines = ["# 3D CNNs (paper 1): quantized CosmoFlow and 3D U-Net", "",
             "Generated by `python bench/cnn3d.py`; measured on "
             f"{platform.machine()} / Python {platform.python_version()}, CPU, "
             "`torch.set_num_threads(1)`, seed 0, shared 2-core machine (times are noisy).",
             "", "## Accuracy of the exported (BN-folded) models", "",
             "| model | input | width | train / val | epochs | metric | baseline | training |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "baseline_mse" in r:
            metric = (f"val MSE {r['metric']:.4f} "
                      f"({100 * r['mse_reduction_vs_mean']:.1f} % below baseline)")
            base = f"train-mean MSE {r['baseline_mse']:.4f}"
        else:
            d = r["final_exported"]["val_dice_per_class"]
            metric = (f"mean Dice {r['metric']:.3f} (bg {d[0]:.3f}, grey {d[1]:.3f}, "
                      f"white {d[2]:.3f})")
            base = f"before BN folding: {r['final_unfolded']['val_dice_mean']:.3f}"
        opts = ", ".join(f"{k}={v}" for k, v in r["model_options"].items())
        lines.append(f"| {r['model']}{' (' + opts + ')' if opts else ''} | {r['size']}^3 | "
                     f"{r['width']:g} | {r['n_train']} / "
                     f"{r['n_val']} | {r['epochs']} | {metric} | {base} | "
                     f"{r['train_seconds']:.0f} s |")
    lines += ["", "Per-parameter validation MSE (normalized targets in [-1, 1]; the two "
              "reference rows use the same data and split):", "",
              "| model | " + " | ".join(PARAM_NAMES) + " | mean |",
              "|---|" + "---|" * (len(PARAM_NAMES) + 1)]
    reg = [r for r in rows if "baseline_mse" in r]
    for r in reg:
        v = r["final_exported"]["val_mse_per_param"]
        lines.append(f"| {r['model']} | " + " | ".join(f"{x:.4f}" for x in v)
                     + f" | {np.mean(v):.4f} |")
    if reg:
        ref = reg[0]["reference"]
        for label, key in (("train-mean predictor", "baseline"),
                           ("linear fit on 12 summary statistics", "linear_stats")):
            v = ref[key + "_per_param"]
            lines.append(f"| {label} | " + " | ".join(f"{x:.4f}" for x in v)
                         + f" | {ref[key]:.4f} |")
        lines += ["", "Summary statistics: per channel the std and mean of log1p(counts) and "
                  "the std of the 8^3-voxel block means, standardized, least squares on the "
                  "training split.  See docs/cnn3d.md for the discussion."]
    lines += ["", "## Size and cost", "",
              "MACs: convolutions, transposed convolutions and dense layers, one sample.", "",
              "| model | params (trained config) | MACs (trained config) | "
              "params (128^3, width 1) | MACs (128^3, width 1) |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['n_params']:,} | {r['macs']:,} | "
                     f"{r['published_params']:,} | {r['published_macs']:,} |")
    lines += ["", "## Export check", "",
              "The trained checkpoint, BN folded in torch, against `model.onnx` executed by "
              "qonnx (`execute_onnx`) on `test_inputs.npy`:", "",
              "| model | inputs | max abs difference |", "|---|---|---|"]
    for r in rows:
        e = r["export_check"]
        lines.append(f"| {r['model']} | {e['n_inputs']} | {e['max_abs_diff']:.3g} |")
    lines += ["", "## Exported QONNX op sequences", ""]
    for r in rows:
        lines += [f"**{r['model']}**: " + ", ".join(
            f"{k} {v}" for k, v in sorted(r["ops"]["counts"].items())), "",
            "```", r["ops"]["sequence"], "```", ""]
    lines += ["![results](cnn3d.png)", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "cnn3d")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    a = p.parse_args(argv)
    rows = [bench_one(name, a.work) for name in a.models]
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "cnn3d.json").write_text(json.dumps(rows, indent=2) + "\n")
    plot(rows, a.out / "cnn3d.png")
    (a.out / "cnn3d.md").write_text(markdown(rows))
    for r in rows:
        print(r["model"], r["metric"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
