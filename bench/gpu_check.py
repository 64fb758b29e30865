"""One CosmoFlow training step per rank on the sharded model, timed: the GPU check.

Launched by ``bench/gpu_check.sh`` under ``torchrun``.  With CUDA: NCCL process groups, one
GPU per rank, ``torch.cuda.max_memory_allocated`` per rank.  With ``--cpu``: gloo, and the
saved-activation bytes and peak RSS of the process instead.  Writes one JSON object
(every rank's step times and memory) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="gloo on CPU instead of NCCL on CUDA")
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--width", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=2, help="global mini-batch")
    p.add_argument("--data-parallel", type=int, default=1)
    p.add_argument("--spatial", default="1x1x1")
    p.add_argument("--steps", type=int, default=5, help="timed steps after one warm-up step")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)

    import torch.distributed as dist

    from tessera.models.cnn3d import cosmoflow
    from tessera.training.mesh import init_mesh, parse_grid
    from tessera.training.spatial import SpatialModel, shard_batch

    if not a.cpu and not torch.cuda.is_available():
        print("gpu_check: no CUDA device (use --cpu for the gloo path)", file=sys.stderr)
        return 3
    mesh = init_mesh(a.data_parallel, parse_grid(a.spatial), backend="gloo" if a.cpu else "nccl")
    dev = mesh.device
    torch.manual_seed(0)
    net = cosmoflow(a.width, a.size, 4, 4, dropout=0.0, batchnorm=True).to(dev)
    sm = SpatialModel(net, mesh, (a.size,) * 3)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    blk = sm.input_block()
    n_local = len(range(a.batch)[shard_batch(a.batch, mesh.data, mesh.data_index)])
    g = torch.Generator().manual_seed(1 + mesh.rank)
    x = (torch.rand((n_local, 4, *[b - e for e, b in blk]), generator=g) * 2.0).to(dev)
    y = torch.zeros(a.batch, 4, device=dev)
    times = []
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for step in range(a.steps + 1):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(sm(x), y, reduction="sum") / y.numel()
        loss.backward()
        sm.reduce_gradients()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        if step:
            times.append(time.perf_counter() - t0)
    rec = {"rank": mesh.rank, "device": str(dev), "step_s_median": statistics.median(times), "step_s": times,
           "block": blk, "n_local": n_local}
    if dev.type == "cuda":
        rec["cuda_max_memory_allocated_MiB"] = torch.cuda.max_memory_allocated(dev) / 2**20
        rec["gpu"] = torch.cuda.get_device_name(dev)
    else:
        rec["rss_peak_delta_MiB"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    recs = [None] * mesh.world
    dist.all_gather_object(recs, rec)
    if mesh.is_main:
        out = {"backend": dist.get_backend(), "world": mesh.world, "data_parallel": mesh.data,
               "spatial": str(mesh.grid), "size": a.size, "width": a.width, "batch": a.batch,
               "torch": torch.__version__, "ranks": recs}
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps({k: v for k, v in out.items() if k != "ranks"}))
        for r in recs:
            mem = r.get("cuda_max_memory_allocated_MiB", r.get("rss_peak_delta_MiB"))
            print(f"rank {r['rank']} {r['device']}: step {r['step_s_median']:.3f} s, memory {mem:.0f} MiB")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
