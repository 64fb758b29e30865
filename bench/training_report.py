"""Writes docs/results/training.md from the measured JSON files of the training companion:
training_equivalence.json and training_equivalence_seeds.json (bench/training_equivalence.py), training_memory.json
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
           "tensor (for gradients and parameters: the worst tensor; *L2*: the largest `||a-b|| / ||b||` over the "
           "gradient tensors); one step = first step's outputs, loss, every parameter gradient, input gradient; "
           "params = every parameter after the last of `steps` optimizer steps (Adam, or SGD with momentum 0.9; "
           "activation-scale statistics phase shortened to 10 steps, so 20 steps cover both brevitas phases).  "
           "Rows *threads 1 vs 2*: two single-process runs that differ only in the number of threads -- the "
           "float32 noise floor of the same measure.", "",
           "| model | volume | data x spatial | ranks | dtype | optimizer | steps | output | loss | param grads (worst) "
           "| param grads L2 | input grad | params after |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["spec"]
        params = _e(r["params_after"]["max_rel"]) if r["steps"] > 1 else "-"
        mesh = s["grid"] if s["grid"].startswith("threads") else f"{s['data']} x {s['grid']}"
        l2 = _e(r["grads"]["l2_rel"]) if "l2_rel" in r["grads"] else "-"
        out.append(f"| {s['model']} | {'x'.join(map(str, s['extent']))} | {mesh} | {r['world']} | "
                   f"{s['dtype']} | {s.get('optimizer', 'adam')} | {r['steps']} | {_e(r['output']['max_rel'])} | "
                   f"{_e(r['loss']['max_rel'])} | {_e(r['grads']['max_rel'])} ({r['grads']['worst']}) | {l2} | "
                   f"{_e(r['input_grad']['max_rel'])} | {params} |")
    return out + [""]


def equivalence_seeds(rows) -> list[str]:
    out = ["### The first float32 step over seeds", "",
           "`python bench/training_equivalence.py --seeds-sweep " + " ".join(str(s) for s in sorted({r["seed"] for r in rows}))
           + "`: the brevitas models' first float32 step for several initial weights and mini-batches, sharded vs "
           "single-process, next to two single-process runs with 1 and 2 threads (same measure), and each float32 "
           "run's distance from the float64 single-process step from the same weights and data (the worst of output, "
           "every gradient and the input gradient).", "",
           "| model | data x spatial | seed | sharded: output | grads (worst) | input grad | threads 1 vs 2: output "
           "| grads (worst) | input grad | sharded vs float64 | single vs float64 |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        d, t = r["sharded"], r["threads"]
        out.append(f"| {r['model']} | {r['data']} x {r['grid']} | {r['seed']} | {_e(d['output']['max_rel'])} | "
                   f"{_e(d['grads']['max_rel'])} ({d['grads']['worst']}) | {_e(d['input_grad']['max_rel'])} | "
                   f"{_e(t['output']['max_rel'])} | {_e(t['grads']['max_rel'])} ({t['grads']['worst']}) | "
                   f"{_e(t['input_grad']['max_rel'])} | {_e(r['vs_float64']['sharded']['all'])} | "
                   f"{_e(r['vs_float64']['single']['all'])} |")
    worst = lambda x: max(x["grads"]["max_rel"], x["input_grad"]["max_rel"], x["output"]["max_rel"])  # noqa: E731
    n_ok = sum(worst(r["sharded"]) <= 1e-5 for r in rows)
    n_t = sum(worst(r["threads"]) <= 1e-5 for r in rows)
    return out + ["", f"Within 1e-5 (output, every gradient, input gradient): sharded vs single-process in {n_ok} of "
                  f"{len(rows)} cases; single-process 1 vs 2 threads in {n_t} of {len(rows)}; from the float64 step: "
                  f"sharded in {sum(r['vs_float64']['sharded']['all'] <= 1e-5 for r in rows)}, single-process in "
                  f"{sum(r['vs_float64']['single']['all'] <= 1e-5 for r in rows)} of {len(rows)}.", ""]


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
    crop = d.get("crop", 32)
    per = (64 // crop) ** 3
    extra = ("" if crop == 32 else f" --crop {crop}") + ("" if name == "training_science" else f" --name {name}")
    out = [f"### {crop}^3 crops, {d['epochs']} epochs", "",
           f"`python bench/training_science.py --seeds {' '.join(str(s) for s in sorted({r['seed'] for r in d['runs']}))} "
           f"--epochs {d['epochs']}{extra}` -- {d['n_universes']} synthetic universes (data seed {d['data_seed']}), "
           f"CosmoFlow width {d['width']}, lr {d['lr']}, {d['epochs']} epochs, permutation + flip augmentation.  "
           f"64^3: whole volumes split over 2 ranks (1 x 2x1x1), batch 8; crops: the {per} non-overlapping {crop}^3 "
           f"crops of every universe, 2 data-parallel ranks, batch {8 * per} (same voxels per step, same steps per "
           "epoch).  Validation: the same held-out universes; the crop model per crop and on the mean of a "
           f"universe's {per} crop predictions.", "",
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
                f"{u.mean():.4f} +- {u.std(ddof=1) if len(u) > 1 else 0:.4f} (mean +- sample std; medians {np.median(f):.4f}, "
                f"{np.median(c):.4f}, {np.median(u):.4f}).  The 64^3 model is "
                f"lower than the per-crop error in {int((f < c).sum())} of {len(seeds)} seeds and lower than the "
                f"universe-averaged crop predictions in {int((f < u).sum())} of {len(seeds)}.  Paired by seed, "
                f"64^3 minus per-crop: {(f - c).mean():+.4f} +- {(f - c).std(ddof=1) if len(f) > 1 else 0:.4f}; "
                f"64^3 minus universe-averaged crops: {(f - u).mean():+.4f} +- {(f - u).std(ddof=1) if len(f) > 1 else 0:.4f}."]
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
    if (eqs := _load("training_equivalence_seeds.json")) is not None:
        lines += equivalence_seeds(eqs)
    if (mem := _load("training_memory.json")) is not None:
        lines += memory(mem)
    lines += ["## 3. I/O", "", "Measured by the tests (tests/training/test_io.py, tests/training/test_trainer.py): "
              "each rank's bytes read inside the volume dataset equal its hyperslab exactly (any grid, odd sizes, "
              "a halo-widened block, augmented blocks that wrap); in a 2 x 2x1x1 torchrun training every rank read "
              "6 x its 13,824-byte block and nothing else of the volumes.", ""]
    sci = [(p.stem, json.loads(p.read_text())) for p in sorted(RES.glob("training_science*.json"))]
    if sci:
        lines += ["## 4. Whole 64^3 volumes vs crops", ""]
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
