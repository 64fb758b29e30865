"""Spatial partitioning of full-width CosmoFlow at 128^3 x 4 (issue: partitioned 3D CNN
blocks; papers 1-2): emulation wall time and peak memory versus block grid for both modes
(overlapped tiles, per-layer halo exchange), the planner's predicted versus the executed
schedule's halo bytes, redundant compute and per-block on-chip bytes, and a check that
every partitioned run equals the unpartitioned integer reference bit for bit.

The kernels are the integer reference of each block / layer graph (the C-simulation of
the full-width 128^3 block kernels is too slow for 2 cores); each configuration runs in a
fresh process whose peak resident memory (and its workers') is read from the kernel.
The model is the published architecture (width 1, 4 input channels) with He-initialised
weights and warmed BatchNorm statistics, folded and exported by the same code as trained
models; the input is random full-range codes.  Writes docs/results/partition.json, .md
and .png.

    python bench/partition.py                       # about 30-60 min on 2 cores
    python bench/partition.py --size 64 --width 0.25 --grids 1x1x1,2x1x1   # quick look
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GRIDS = "1x1x1,2x1x1,2x2x1,2x2x2,4x2x2,4x4x2"


def export(size: int, width: float, path: Path) -> Path:
    import torch

    from tessera.models.cnn3d import build_cnn3d, fold_batchnorm
    from tessera.models.train3d import export_cnn3d

    torch.manual_seed(0)
    m = build_cnn3d("cosmoflow", width=width, input_size=size, in_channels=4, n_out=4)
    x = torch.rand(2, 4, size, size, size, generator=torch.Generator().manual_seed(0))
    m.train()
    with torch.no_grad():
        m(x)
    m = fold_batchnorm(m.eval())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export_cnn3d(m, x[:1], path)


def _peak_rss_mb() -> tuple[float, float]:
    """(this process's, its largest worker's) peak resident memory in MiB; the workers are
    fresh (spawned) children, reaped when the run's pool shuts down, so theirs is what the
    blocks they ran needed (plus the interpreter and imports)."""
    import resource

    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def run_one(model: str, codes: str, grid: str, mode: str, workers: int, out: str) -> None:
    """One configuration in this (fresh) process; writes a JSON row to ``out``."""
    from tessera.compiler.api import load_model
    from tessera.compiler.partition import Partition, parse_grid
    from tessera.compiler.reference.interpret import run_ir

    g = load_model(model)
    x = np.load(codes)
    row = {"grid": grid, "mode": mode, "workers": workers}
    t0 = time.perf_counter()
    if grid == "none":
        import tracemalloc

        tracemalloc.start()
        y = run_ir(g, x)
        row["traced_peak_bytes"] = tracemalloc.get_traced_memory()[1] + x.nbytes
        tracemalloc.stop()
    else:
        p = Partition.plan(g, parse_grid(grid), mode)
        plan = p.report()
        stats = {}
        y = p.run(x, workers=workers, stats=stats)
        bpv = g.values[g.input].shape[0] * ((g.values[g.input].ftype.width + 7) // 8)
        row["largest_block_traced_peak_bytes"] = max(s["peak_bytes_traced"] for s in stats.values())
        row.update(cut=p.cut, cut_shape=list(g.values[p.cut].shape), blocks=len(plan.blocks),
                   redundant_compute=plan.redundant_fraction, predicted_halo_bytes=int(plan.halo_bytes),
                   max_block_bytes=int(plan.max_block_bytes), segment_macs=int(plan.full_macs),
                   block_macs=int(sum(b.macs for b in plan.blocks)))
        if mode == "overlap":  # the input regions the blocks were given
            row["measured_halo_bytes"] = int(sum(s["halo_voxels"] for s in stats.values()) * bpv)
        else:  # every layer's halo received from neighbours, at each value's width
            row["measured_halo_bytes"] = int(sum(s.get("halo_bytes", 0) for s in stats.values()))
            row["measured_halo_voxels"] = int(sum(s["halo_voxels"] for s in stats.values()))
            row["predicted_halo_voxels"] = int(sum(b.halo_voxels for b in plan.blocks))
    row["seconds"] = time.perf_counter() - t0
    row["peak_rss_mb"], row["worker_peak_rss_mb"] = _peak_rss_mb()
    np.save(Path(out).with_suffix(".npy"), y)
    Path(out).write_text(json.dumps(row))


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = next(r for r in rows if r["grid"] == "none")
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for mode, marker in (("overlap", "o"), ("exchange", "s")):
        rs = [r for r in rows if r["mode"] == mode]
        xs = [r["blocks"] for r in rs]
        ax[0].plot(xs, [r["seconds"] for r in rs], marker=marker, label=mode)
        ax[1].plot(xs, [r["peak_rss_mb"] for r in rs], marker=marker, label=f"{mode}: peak RSS, host process")
        ax[1].plot(xs, [r["largest_block_traced_peak_bytes"] / 2**20 for r in rs], marker=marker, ls="--",
                   label=f"{mode}: largest block's arrays (traced peak)")
        ax[1].plot(xs, [r["max_block_bytes"] / 2**20 for r in rs], marker=marker, ls=":",
                   label=f"{mode}: planned on-chip bytes per block")
        ax[2].plot(xs, [r["predicted_halo_bytes"] / 2**20 for r in rs], marker=marker, ls="-", label=f"{mode}: planner")
        ax[2].plot(xs, [r["measured_halo_bytes"] / 2**20 for r in rs], marker="x", ls="none", color="k",
                   label="executed" if mode == "exchange" else None)
    ax[0].axhline(base["seconds"], color="gray", ls="--", label="unpartitioned")
    ax[1].axhline(base["peak_rss_mb"], color="gray", ls="--", label="unpartitioned: peak RSS")
    ax[1].axhline(base["traced_peak_bytes"] / 2**20, color="gray", ls=":", label="unpartitioned: arrays (traced peak)")
    for a, t in zip(ax, ("emulation wall time (s)", "memory (MiB)", "halo bytes (MiB)")):
        a.set_xscale("log", base=2)
        a.set_xlabel("blocks")
        a.set_title(t)
        a.legend(fontsize=7)
    ax[1].set_yscale("log")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--grids", default=GRIDS)
    ap.add_argument("--modes", default="overlap,exchange")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "partition")
    ap.add_argument("--one", nargs=6, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        model, codes, grid, mode, workers, out = a.one
        run_one(model, codes, grid, mode, int(workers), out)
        return 0
    from tessera.compiler.api import load_model
    from tessera.compiler.samples import sample_codes

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = export(a.size, a.width, tmp / "cosmoflow.onnx")
        g = load_model(model)
        np.save(tmp / "x.npy", sample_codes(g.values[g.input], 1, seed=0))
        configs = [("none", "-")] + [(gr, m) for m in a.modes.split(",") for gr in a.grids.split(",")]
        ref = None
        for grid, mode in configs:
            out = tmp / f"{grid}_{mode}.json"
            subprocess.run([sys.executable, __file__, "--one", str(model), str(tmp / "x.npy"), grid, mode,
                            str(a.workers), str(out)], check=True)
            row = json.loads(out.read_text())
            y = np.load(out.with_suffix(".npy"))
            if ref is None:
                ref = y
            row["equal_to_unpartitioned"] = bool(np.array_equal(y, ref))
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"model": f"CosmoFlow width {a.width:g}, {a.size}^3 x 4 channels (He init, warmed BatchNorm, folded)",
              "samples": 1, "kernels": "integer reference of each block/layer graph", "workers": a.workers,
              "machine": f"{platform.machine()}, {__import__('os').cpu_count()} CPUs (shared)",
              "rows": rows}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    plot(rows, a.out.with_suffix(".png"), result["model"])
    lines = [f"# Partitioned emulation: {result['model']}", "",
             f"Measured by `python bench/partition.py` (1 sample, random full-range input codes, {a.workers} worker "
             "processes, kernels = the integer reference of each block / layer graph; wall times on a shared "
             "2-core machine). Every partitioned output was compared with the unpartitioned run: `equal` is `==` on "
             "every output.", "",
             "| grid | mode | blocks | cut (C, D, H, W) | seconds | peak RSS MiB host / worker | largest block's arrays MiB "
             "| planned on-chip bytes/block | redundant compute | halo bytes planned | halo bytes executed | equal |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["grid"] == "none":
            lines.append(f"| unpartitioned | - | 1 | - | {r['seconds']:.1f} | {r['peak_rss_mb']:.0f} / - | "
                         f"{r['traced_peak_bytes'] / 2**20:.0f} | - | - | - | - | - |")
            continue
        lines.append(f"| {r['grid']} | {r['mode']} | {r['blocks']} | {tuple(r['cut_shape'])} | {r['seconds']:.1f} | "
                     f"{r['peak_rss_mb']:.0f} / {r['worker_peak_rss_mb']:.0f} | "
                     f"{r['largest_block_traced_peak_bytes'] / 2**20:.0f} | {r['max_block_bytes']:,} | {100 * r['redundant_compute']:.2f} % | "
                     f"{r['predicted_halo_bytes']:,} | {r['measured_halo_bytes']:,} | {r['equal_to_unpartitioned']} |")
    lines += ["", "Peak RSS (int64 codes in numpy, not the FPGA's bytes): *host* is the emulating process, which "
              "holds the full input, stitches the blocks and runs the gathered tail on the whole cut value "
              "(and, in exchange mode, holds every block's boxes: it emulates all devices); *worker* is the largest "
              "fresh worker process that ran blocks (0 when one block ran in the host; most of it is the interpreter and "
              "the imported libraries). *Largest block's arrays*: the peak of the memory allocated while one block "
              "(overlap) or one layer of one block (exchange) ran, traced by tracemalloc (numpy arrays included), plus "
              "its input; for the unpartitioned row, the whole model's run. Planned bytes per block are "
              "the planner's on-chip working set at the values' fixed-point widths (largest layer input + output of "
              "one block).", ""]
    a.out.with_suffix(".md").write_text("\n".join(lines))
    print(f"wrote {a.out.with_suffix('.json')}, .md, .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
