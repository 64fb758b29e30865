"""Writes docs/results/training.md from the measured JSON files of the training companion:
training_equivalence.json (bench/training_equivalence.py), training_memory.json
(bench/training_memory.py), training_science.json (bench/training_science.py),
gpu_check_cpu.json / gpu_check.json (bench/gpu_check.sh)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

RES = Path(__file__).resolve().parents[1] / "docs" / "results"


def _load(name):
    p = RES / name
    return json.loads(p.read_text()) if p.is_file() else None


def _e(v: float) -> str:
    return "0" if v == 0 else f"{v:.1e}"


def equivalence(rows) -> list[str]:
    out = ["## 1. Equivalence with single-process training", "",
           "`python bench/training_equivalence.py` (gloo, CPU processes; the single-process run starts from the "
           "same weights and mini-batch of 4 samples).  Largest relative difference `max|a-b| / max|b|` per "
           "tensor (for gradients and parameters: the worst tensor); one step = first step's outputs, loss, every "
           "parameter gradient, input gradient; params = every parameter after the last of `steps` Adam steps "
           "(activation-scale statistics phase shortened to 10 steps, so 20 steps cover both brevitas phases).  "
           "Rows *threads 1 vs 2*: two single-process runs that differ only in the number of threads -- the "
           "float32 noise floor of the same measure.", "",
           "| model | volume | data x spatial | ranks | dtype | steps | output | loss | param grads (worst) | input grad | params after |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["spec"]
        params = _e(r["params_after"]["max_rel"]) if r["steps"] > 1 else "-"
        mesh = s["grid"] if s["grid"].startswith("threads") else f"{s['data']} x {s['grid']}"
        out.append(f"| {s['model']} | {'x'.join(map(str, s['extent']))} | {mesh} | {r['world']} | "
                   f"{s['dtype']} | {r['steps']} | {_e(r['output']['max_rel'])} | {_e(r['loss']['max_rel'])} | "
                   f"{_e(r['grads']['max_rel'])} ({r['grads']['worst']}) | {_e(r['input_grad']['max_rel'])} | {params} |")
    return out + [""]


def memory(rows) -> list[str]:
    out = ["## 2. Activation memory per rank", "",
           "`python bench/training_memory.py` (CosmoFlow width 1, BatchNorm, batch 1; P = 1 is the unsharded "
           "model as single-process training runs it).  *saved* = bytes of the storages autograd keeps for the "
           "backward pass, per sample (measured at batch 2 minus batch 1), on the rank that keeps the most; "
           "*halo* = the voxels that rank received from others and keeps; *tail* = what the replicated dense tail "
           "keeps; *RSS* = growth of the process's peak resident set over one step (includes transient buffers, "
           "library work space and allocator slack: not divided by P).", "",
           "| volume | P | grid | saved [MiB] | single / P [MiB] | halo [MiB] | saved / (single/P) | saved / (single/P + halo + tail) | RSS peak growth [MiB] | step [s] |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['size']}^3 | {r['P']} | {r['grid']} | {r['max_saved_MiB']:.1f} | {r['ideal_MiB']:.1f} | "
                   f"{r['max_halo_MiB']:.2f} | {r['ratio_to_ideal']:.3f} | {r['ratio_to_ideal_plus_halo_and_tail']:.3f} | "
                   f"{r['max_rss_peak_delta_MiB']:.0f} | {r['step_s']:.1f} |")
    return out + ["", "![memory](training_memory.png)", ""]


def science(d, name) -> list[str]:
    extra = "" if name == "training_science" else f" --name {name}"
    out = [f"### {d['epochs']} epochs", "",
           f"`python bench/training_science.py --seeds {' '.join(str(s) for s in sorted({r['seed'] for r in d['runs']}))} "
           f"--epochs {d['epochs']}{extra}` -- {d['n_universes']} synthetic universes (data seed {d['data_seed']}), "
           f"CosmoFlow width {d['width']}, lr {d['lr']}, {d['epochs']} epochs, permutation + flip augmentation.  "
           "64^3: whole volumes split over 2 ranks (1 x 2x1x1), batch 8; crops: the 8 octants of every universe, "
           "2 data-parallel ranks, batch 64 (same voxels per step, same steps per epoch).  Validation: the same "
           "held-out universes; the crop model per crop and on the mean of a universe's 8 crop predictions.", "",
           "| setting | seed | train samples | validation MSE (per sample) | per-universe mean of crops | train-mean predictor | training [s] |",
           "|---|---|---|---|---|---|---|"]
    for r in d["runs"]:
        uni = f"{r['val_mse_universe_mean']:.4f}" if "val_mse_universe_mean" in r else "-"
        out.append(f"| {r['setting']} | {r['seed']} | {r['n_train']} | {r['val_mse']:.4f} | {uni} | {r['baseline']:.4f} | "
                   f"{r['train_seconds']:.0f} |")
    full = {r["seed"]: r["val_mse"] for r in d["runs"] if r["setting"] == "64^3"}
    crop = {r["seed"]: r for r in d["runs"] if r["setting"] != "64^3"}
    seeds = sorted(set(full) & set(crop))
    if seeds:
        import numpy as np

        f = np.array([full[k] for k in seeds])
        c = np.array([crop[k]["val_mse"] for k in seeds])
        u = np.array([crop[k]["val_mse_universe_mean"] for k in seeds])
        out += ["", f"Over {len(seeds)} seeds: 64^3 {f.mean():.4f} +- {f.std(ddof=1) if len(f) > 1 else 0:.4f}, "
                f"crops per crop {c.mean():.4f} +- {c.std(ddof=1) if len(c) > 1 else 0:.4f}, crops averaged per universe "
                f"{u.mean():.4f} +- {u.std(ddof=1) if len(u) > 1 else 0:.4f} (mean +- sample std).  The 64^3 model is "
                f"lower than the per-crop error in {int((f < c).sum())} of {len(seeds)} seeds and lower than the "
                f"universe-averaged crop predictions in {int((f < u).sum())} of {len(seeds)}."]
    return out + ["", f"![science]({name}.png)", ""]


def gpu(d, label) -> list[str]:
    out = [f"## 5. GPU check script ({label})", "",
           f"backend {d['backend']}, {d['data_parallel']} x {d['spatial']} ranks, CosmoFlow {d['size']}^3 width "
           f"{d['width']}, batch {d['batch']}, torch {d['torch']}", "", "| rank | device | step [s] | memory [MiB] |",
           "|---|---|---|---|"]
    for r in d["ranks"]:
        mem = r.get("cuda_max_memory_allocated_MiB", r.get("rss_peak_delta_MiB"))
        out.append(f"| {r['rank']} | {r['device']} | {r['step_s_median']:.3f} | {mem:.0f} |")
    return out + [""]


def main() -> int:
    lines = ["# Training companion: measured results", "",
             "Hybrid data + spatial parallel training (docs/training.md).  Every number below is read from the "
             "JSON files next to this page, written by the benchmark named in each section.", ""]
    if (eq := _load("training_equivalence.json")) is not None:
        lines += equivalence(eq)
    if (mem := _load("training_memory.json")) is not None:
        lines += memory(mem)
    lines += ["## 3. I/O", "", "Measured by the tests (tests/training/test_io.py, tests/training/test_trainer.py): "
              "each rank's bytes read inside the volume dataset equal its hyperslab exactly (any grid, odd sizes, "
              "a halo-widened block, augmented blocks that wrap); in a 2 x 2x1x1 torchrun training every rank read "
              "6 x its 13,824-byte block and nothing else of the volumes.", ""]
    sci = [(p.stem, json.loads(p.read_text())) for p in sorted(RES.glob("training_science*.json"))]
    if sci:
        lines += ["## 4. Whole 64^3 volumes vs 32^3 crops", ""]
        for name, d in sci:
            lines += science(d, name)
    if (g := _load("gpu_check.json")) is not None:
        lines += gpu(g, "CUDA / NCCL")
    if (g := _load("gpu_check_cpu.json")) is not None:
        lines += gpu(g, "run here with --cpu: gloo; the CUDA / NCCL path was not run, no GPU was available")
    (RES / "training.md").write_text("\n".join(lines).rstrip() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
