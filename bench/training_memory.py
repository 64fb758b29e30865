"""Acceptance 2 of the training companion: activation memory per rank versus the number of
spatial ranks P, CosmoFlow at 64^3 and 128^3.

For each P in 2, 4, 8 (grids 2x1x1, 2x2x1, 2x2x2) P gloo processes run one training step
(forward + backward, batch 1) of the sharded CosmoFlow, and for P = 1 one process the
unsharded model as single-process training runs it; measured on every rank:

* ``saved_bytes``: activation bytes per sample: the bytes of all storages autograd saves for
  the backward pass during a forward pass (``torch.autograd.graph.saved_tensors_hooks``, each
  storage once), measured at batch 2 minus batch 1 -- the activation memory a step holds at
  its peak, the figure spatial parallelism divides (what does not grow with the batch --
  quantized weights, scales -- is ``weight_bytes``, held whole by every rank);
* ``halo_bytes``: the part of it that is halo (the halo-extended inputs the sharded convs
  and pools save, minus their own blocks) -- computed from the exchange plans;
* ``tail_bytes``: saved by the replicated dense tail (after the gather);
* ``rss_peak_delta``: the process's peak resident set growth over the step (``ru_maxrss``;
  includes transient buffers, allocator slack and library work space).

torch's caching allocator statistics exist on CUDA only; on CPU these are what can be
measured.  Writes ``docs/results/training_memory.json`` and ``.png`` and the memory table of
``docs/results/training.md`` is written from them.

    python bench/training_memory.py [--width 1.0] [--sizes 64 128]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path

import torch

GRIDS = {1: (1, 1, 1), 2: (2, 1, 1), 4: (2, 2, 1), 8: (2, 2, 2)}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, grid, size, width, port, folder):
    import torch.distributed as dist

    from tessera.models.cnn3d import cosmoflow
    from tessera.training.mesh import SpatialGrid, init_mesh
    from tessera.training.spatial import SpatialModel

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    mesh = init_mesh(1, SpatialGrid(*grid), backend="gloo")
    torch.manual_seed(0)
    net = cosmoflow(width, size, 4, 4, dropout=0.0, batchnorm=True)
    plain = world == 1  # the single-rank figure: the unsharded model as it trains single-process
    sm = net if plain else SpatialModel(net, mesh, (size,) * 3)
    blk = ((0, size),) * 3 if plain else sm.input_block()
    g = torch.Generator().manual_seed(1)
    tail = [net.flatten, net.head] if plain else sm.tail_modules
    flag = {"tail": False}
    hook = tail[0].register_forward_pre_hook(lambda m, a: flag.__setitem__("tail", True))

    def saved(batch: int, backward: bool):
        """Bytes of the storages autograd saves in a forward pass of ``batch`` samples (each
        storage once), and of those saved by the tail."""
        seen: dict[int, int] = {}
        tail_keys: set[int] = set()
        flag["tail"] = False

        def pack(t):
            st = t.untyped_storage()
            if st.nbytes() and st.data_ptr() not in seen:
                seen[st.data_ptr()] = st.nbytes()
                if flag["tail"]:
                    tail_keys.add(st.data_ptr())
            return t

        x = torch.rand((batch, 4, *[b - a for a, b in blk]), generator=g) * 2.0
        t0 = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = sm(x)
        t1 = time.perf_counter()
        if backward:
            (out.square().sum() / out.numel()).backward()
            if not plain:
                sm.reduce_gradients()
        t2 = time.perf_counter()
        return sum(seen.values()), sum(seen[k] for k in tail_keys), t1 - t0, t2 - t1

    dist.barrier()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    s1, tail1, fwd, bwd = saved(1, True)
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    net.zero_grad(set_to_none=True)
    s2, tail2, _, _ = saved(2, False)
    hook.remove()
    halo = 0  # voxels received from other ranks, saved by the conv / pool that read them
    for key, (ex, _) in ({} if plain else {k: v for k, v in sm.exchanges.items() if k[0] != "gather"}).items():
        if key[0] == "gather":
            continue
        m = next(m for m in net.modules() if id(m) == key[0])
        c = m.in_channels if hasattr(m, "in_channels") else _pool_channels(net, m)
        halo += ex.halo_voxels * c * 4
    # activations grow with the batch, weight-derived tensors (quantized weights, scales) do not
    rec = {"rank": rank, "block": blk, "saved_bytes": s2 - s1, "tail_bytes": tail2 - tail1,
           "weight_bytes": 2 * s1 - s2, "halo_bytes": halo, "rss_peak_delta": (rss1 - rss0) * 1024,
           "forward_s": fwd, "backward_s": bwd, "n_params": sum(p.numel() for p in net.parameters())}
    torch.save(rec, Path(folder) / f"r{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


def _pool_channels(net, pool) -> int:
    c = None
    for m in net.features:
        if isinstance(m, torch.nn.Conv3d):
            c = m.out_channels
        if m is pool:
            return c
    raise KeyError("pool not in features")


def measure(size: int, width: float, p: int) -> list[dict]:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(_worker, args=(p, GRIDS[p], size, width, _port(), folder), nprocs=p, join=True,
                           start_method="fork")
        return [torch.load(Path(folder) / f"r{r}.pt") for r in range(p)]


def _plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for size in sorted({r["size"] for r in rows}):
        rs = [r for r in rows if r["size"] == size]
        ps = [r["P"] for r in rs]
        ax.plot(ps, [r["max_saved_MiB"] for r in rs], marker="o", label=f"{size}^3 measured (max rank)")
        ax.plot(ps, [rs[0]["max_saved_MiB"] / p for p in ps], ls="--", color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(xlabel="spatial ranks P", ylabel="saved activations per rank [MiB]",
           title="CosmoFlow activation memory per rank (dashed: 1/P)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "results")
    a = ap.parse_args(argv)
    rows = []
    for size in a.sizes:
        base = None
        for p in a.ranks:
            recs = measure(size, a.width, p)
            mx = max(recs, key=lambda r: r["saved_bytes"])
            row = {"size": size, "width": a.width, "P": p, "grid": "x".join(map(str, GRIDS[p])),
                   "max_saved_MiB": mx["saved_bytes"] / 2**20,
                   "max_halo_MiB": max(r["halo_bytes"] for r in recs) / 2**20,
                   "tail_MiB": mx["tail_bytes"] / 2**20, "single_rank_halo_note": "P=1 is the unsharded model",
                   "weight_derived_MiB": mx["weight_bytes"] / 2**20,
                   "max_rss_peak_delta_MiB": max(r["rss_peak_delta"] for r in recs) / 2**20,
                   "step_s": max(r["forward_s"] + r["backward_s"] for r in recs), "ranks": recs}
            if base is None:
                base = row["max_saved_MiB"]
            row["ideal_MiB"] = base / p
            row["ratio_to_ideal"] = row["max_saved_MiB"] / row["ideal_MiB"]
            row["ratio_to_ideal_plus_halo_and_tail"] = row["max_saved_MiB"] / (
                row["ideal_MiB"] + row["max_halo_MiB"] + row["tail_MiB"] * (1 - 1 / p))
            rows.append(row)
            print(f"{size}^3 P={p}: max saved {row['max_saved_MiB']:.1f} MiB (1/P: {row['ideal_MiB']:.1f}, halo "
                  f"{row['max_halo_MiB']:.1f}, tail {row['tail_MiB']:.2f}), RSS peak +{row['max_rss_peak_delta_MiB']:.0f} "
                  f"MiB, step {row['step_s']:.1f} s", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "training_memory.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    _plot(rows, a.out / "training_memory.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
