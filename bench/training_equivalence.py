"""Acceptance 1 of the training companion: sharded training (real processes, gloo) equals
single-process training.

For every configuration of :data:`CONFIGS` (2, 4 and 8 ranks; spatial splits along 1, 2 and
3 dims; data x spatial mixes; odd volume sizes; stride-2 layers) runs
:func:`tessera.training.check.run_equivalence`, then the same comparison between two
single-process runs with 1 and 2 threads (the float32 noise floor,
:func:`~tessera.training.check.run_thread_noise`), and writes the largest relative differences
(``max |a - b| / max |b|`` per tensor, the worst tensor reported) to
``docs/results/training_equivalence.json``.

    python bench/training_equivalence.py
    python bench/training_equivalence.py --seeds-sweep 0 1 2 3

``--seeds-sweep``: instead, the first float32 step of the brevitas models for each seed (the
initial weights and mini-batch), sharded vs single-process next to single-process with 1 vs 2
threads, and both runs' distance from the float64 step, into
``docs/results/training_equivalence_seeds.json``.  In float32 a quantizer's
rounding is a step: a sum reordered (by sharding, or by another thread count) moves a value
by an ulp, and one that sits at a rounding boundary lands on the other side.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tessera.training.check import EquivalenceSpec, run_equivalence, run_thread_noise
from tessera.training.mesh import SpatialGrid

G = SpatialGrid
#: (model, extent, data replicas, grid, dtype, steps[, optimizer])
CONFIGS = [
    ("layers", (12, 10, 9), 1, G(2, 1, 1), "float32", 20),
    ("layers", (12, 10, 9), 2, G(1, 1, 1), "float32", 20),
    ("layers", (12, 10, 9), 1, G(1, 2, 2), "float32", 20),
    ("layers", (12, 10, 9), 1, G(1, 1, 4), "float32", 20),
    ("layers", (12, 10, 9), 2, G(1, 2, 1), "float32", 20),
    ("layers", (12, 10, 9), 1, G(2, 2, 2), "float32", 20),
    ("layers", (12, 10, 9), 1, G(4, 2, 1), "float32", 20),
    ("layers", (12, 10, 9), 2, G(2, 1, 2), "float32", 20),
    ("cosmoflow", (11, 11, 11), 1, G(2, 1, 1), "float64", 1),
    ("cosmoflow", (11, 11, 11), 2, G(1, 1, 1), "float64", 1),
    ("cosmoflow", (11, 11, 11), 2, G(1, 2, 1), "float64", 1),
    ("cosmoflow", (11, 11, 11), 1, G(2, 2, 2), "float64", 1),
    ("unet3d", (16, 16, 16), 1, G(1, 1, 2), "float64", 20),
    ("unet3d", (16, 16, 16), 2, G(2, 2, 1), "float64", 20),
    ("cosmoflow", (11, 11, 11), 1, G(2, 1, 1), "float32", 20),
    ("cosmoflow", (11, 11, 11), 2, G(1, 1, 1), "float32", 20),
    ("cosmoflow", (11, 11, 11), 2, G(1, 2, 1), "float32", 20),
    ("cosmoflow", (11, 11, 11), 1, G(2, 2, 2), "float32", 20),
    ("unet3d", (16, 16, 16), 1, G(1, 1, 2), "float32", 20),
    ("unet3d", (16, 16, 16), 2, G(2, 2, 1), "float32", 20),
    # SGD with momentum: an update proportional to the gradient (Adam's first steps are
    # lr * g / (|g| + 1e-8), which turns float32 noise on near-zero gradients into whole steps)
    ("unet3d", (16, 16, 16), 1, G(1, 1, 2), "float32", 20, "sgd"),
    ("unet3d", (16, 16, 16), 2, G(2, 2, 1), "float32", 20, "sgd"),
    ("cosmoflow", (11, 11, 11), 2, G(1, 1, 1), "float32", 20, "sgd"),
]


def spec_of(model, extent, data, grid, dtype, steps, optimizer="adam") -> EquivalenceSpec:
    return EquivalenceSpec(model, extent, data=data, grid=grid, dtype=dtype, steps=steps, optimizer=optimizer,
                           width=0.125 if model == "cosmoflow" else 0.0625)


#: (model, extent, data replicas, grid) of the seeds sweep
SWEEP = [("cosmoflow", (11, 11, 11), 2, G(1, 1, 1)), ("cosmoflow", (11, 11, 11), 1, G(2, 1, 1)),
         ("unet3d", (16, 16, 16), 1, G(1, 1, 2)), ("unet3d", (16, 16, 16), 2, G(2, 2, 1))]


def seeds_sweep(seeds, out: Path) -> int:
    rows = []
    for model, extent, data, grid in SWEEP:
        for seed in seeds:
            spec = EquivalenceSpec(**{**spec_of(model, extent, data, grid, "float32", 1).__dict__, "seed": seed})
            d = run_equivalence(spec, exact=True)
            t = run_thread_noise(EquivalenceSpec(**{**spec.__dict__, "data": 1, "grid": G()}))
            row = {"model": model, "extent": extent, "data": data, "grid": str(grid), "seed": seed,
                   "sharded": {k: d[k] for k in ("output", "loss", "grads", "input_grad")},
                   "threads": {k: t[k] for k in ("output", "loss", "grads", "input_grad")},
                   "vs_float64": d["vs_float64"]}
            rows.append(row)
            print(f"{model:10s} D={data} S={grid} seed {seed}: sharded out {d['output']['max_rel']:.1e} grads "
                  f"{d['grads']['max_rel']:.1e} input {d['input_grad']['max_rel']:.1e} | threads 1 vs 2: out "
                  f"{t['output']['max_rel']:.1e} grads {t['grads']['max_rel']:.1e} input {t['input_grad']['max_rel']:.1e} | "
                  f"vs float64: sharded {d['vs_float64']['sharded']['all']:.1e} single {d['vs_float64']['single']['all']:.1e}",
                  flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "training_equivalence_seeds.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "results")
    p.add_argument("--seeds-sweep", type=int, nargs="+", metavar="SEED")
    a = p.parse_args(argv)
    if a.seeds_sweep:
        return seeds_sweep(a.seeds_sweep, a.out)
    rows = []
    for cfg in CONFIGS:
        t = time.perf_counter()
        r = run_equivalence(spec_of(*cfg))
        r["seconds"] = round(time.perf_counter() - t, 1)
        rows.append(r)
        print(f"{cfg[0]:10s} D={cfg[2]} S={cfg[3]} {cfg[4]} {cfg[5]:2d} {(cfg[6:] or ('adam',))[0]} steps: out {r['output']['max_rel']:.1e} "
              f"loss {r['loss']['max_rel']:.1e} grads {r['grads']['max_rel']:.1e} ({r['grads']['worst']}) "
              f"input {r['input_grad']['max_rel']:.1e} params {r['params_after']['max_rel']:.1e} "
              f"[{r['seconds']} s]", flush=True)
    # the noise floor: two single-process runs that differ only in the thread count
    for model, extent, opt in (("layers", (12, 10, 9), "adam"), ("cosmoflow", (11, 11, 11), "adam"),
                               ("unet3d", (16, 16, 16), "adam"), ("unet3d", (16, 16, 16), "sgd")):
        r = run_thread_noise(spec_of(model, extent, 1, G(), "float32", 20, opt))
        r["world"] = 1
        rows.append(r)
        print(f"{model:10s} single-process threads 1 vs 2: grads {r['grads']['max_rel']:.1e} input "
              f"{r['input_grad']['max_rel']:.1e} params {r['params_after']['max_rel']:.1e}", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "training_equivalence.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
