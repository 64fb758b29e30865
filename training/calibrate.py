"""The microbenchmarks that calibrate the training performance model (:mod:`.perfmodel`,
docs/perfmodel.md): forward + backward of every layer shape of a model at several work
sizes and thread counts (the code path the sharded trainer runs), the bytes autograd saves
per element, an Adam step, the HDF5 sample reader, and gloo point-to-point / all-reduce /
all-gather latency and bandwidth at several process counts.  :func:`calibrate` runs them all
and returns a :class:`.perfmodel.Calibration`.
"""

from __future__ import annotations

import copy
import json
import math
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from .mesh import SpatialGrid
from .perfmodel import F32, Calibration, CalibrationError, LayerSpec, ModelSpec, fit_link, model_spec

__all__ = ["calibrate"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_time(fn: Callable[[], None], min_reps: int, budget_s: float,
                 device: torch.device = torch.device("cpu")) -> float:
    """Median wall time of ``fn`` (on CUDA: until the device has finished its work)."""
    fn()  # warm-up (allocations, brevitas' first-call work, cuDNN's algorithm choice)
    _sync(device)
    ts: list[float] = []
    while len(ts) < min_reps or (sum(ts) < budget_s and len(ts) < 25):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        ts.append(time.perf_counter() - t0)
    return float(statistics.median(ts))


def _local_mesh(device: torch.device = torch.device("cpu")):
    from .mesh import Mesh

    return Mesh(data=1, grid=SpatialGrid(), rank=0, device=device, data_group=None,
                spatial_group=None, world_group=None)


def _quant_input(shape, requires_grad: bool, device: torch.device = torch.device("cpu")):
    """A brevitas QuantTensor input (what the model's convs and dense layers receive)."""
    from brevitas.nn import QuantIdentity

    from ..models.quant import Int8ActPow2

    q = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True).to(device)
    with torch.no_grad():
        qt = q(torch.rand(*shape, device=device) * 2)
    return qt.set(value=qt.value.detach().requires_grad_(requires_grad))


def _layer_runner(lay: LayerSpec, module: nn.Module, kind: str, extent: int, batch: int,
                  device: torch.device = torch.device("cpu")):
    """(fn running forward + backward once, work, input elements) for ``module`` on a block
    of ``extent``^3 (or ``batch`` rows): the code path of the trainer (sharded layers through
    :class:`SpatialModel` on one rank; the tail's native BatchNorm and dense layers plain)."""
    from .spatial import SpatialModel

    m = copy.deepcopy(module).to(device)
    m.train()
    if kind == "batchnorm_native" and not isinstance(m, nn.BatchNorm3d):
        raise CalibrationError("batchnorm_native needs a BatchNorm3d")
    if kind == "batchnorm_native" and type(m) is not nn.BatchNorm3d:
        fresh = nn.BatchNorm3d(m.num_features).to(device)
        m = fresh
    if kind == "dense":
        inp = _quant_input((batch, lay.c_in), True, device)
        work = 2.0 * batch * lay.c_in * lay.c_out
        run = m
        elements = batch * lay.c_in
    else:
        shape = (batch, lay.c_in, extent, extent, extent)
        first = lay.index == 0  # the input quantizer: its input needs no gradient
        inp = _quant_input(shape, True, device) if kind == "conv3d" else \
            torch.rand(*shape, device=device).requires_grad_(not first)
        run = m if kind == "batchnorm_native" else SpatialModel(nn.Sequential(m), _local_mesh(device), (extent,) * 3)
        out_e = SpatialModel._out_extent(m, (extent,) * 3)
        work = 2.0 * batch * math.prod(out_e) * lay.macs_per_voxel() if kind == "conv3d" \
            else float(batch * lay.c_in * extent ** 3)
        elements = batch * lay.c_in * extent ** 3

    def fn():
        out = run(inp)
        v = out.value if hasattr(out, "value") and not isinstance(out, torch.Tensor) else out
        v.sum().backward()

    return fn, work, elements


def _saved_bytes(fn) -> int:
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        if st.nbytes():
            seen.setdefault(st.data_ptr(), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def _unique_layers(spec: ModelSpec) -> dict[str, tuple[LayerSpec, str]]:
    """One representative layer per calibration signature (tail BatchNorm as native too)."""
    out: dict[str, tuple[LayerSpec, str]] = {}
    for lay in spec.layers:
        out.setdefault(lay.signature, (lay, lay.kind))
        if lay.kind == "batchnorm":
            out.setdefault(lay.signature.replace("batchnorm/", "batchnorm_native/"), (lay, "batchnorm_native"))
    return out


def _bench_compute(spec: ModelSpec, threads: Sequence[int], extents: Sequence[int], max_call_s: float,
                   budget_s: float, log, min_reps: int = 3, batches: Sequence[int] = (2, 4, 8),
                   batches_dense: Sequence[int] = (1, 4, 16, 64),
                   device: torch.device = torch.device("cpu")) -> tuple[dict, dict, dict]:
    compute: dict[str, dict[str, list[list[float]]]] = {}
    saved: dict[str, list[float]] = {}
    adam: dict[str, list[list[float]]] = {}
    uniq = _unique_layers(spec)
    old = torch.get_num_threads()
    try:
        for t in threads:
            torch.set_num_threads(t)
            table: dict[str, list[list[float]]] = {}
            for sig, (lay, kind) in uniq.items():
                pts = []
                mem_pts = []
                # (extent, batch): blocks up to the model's input, then larger batches of the
                # largest block, so that the curve covers the work of real layers (batch
                # 8 at 32^3) by interpolation rather than extrapolation; dense: rows
                if kind == "dense":
                    sizes = [(1, b) for b in batches_dense]
                else:
                    ext = [e for i, e in enumerate(extents) if e <= spec.size or i < 3]
                    sizes = [(e, 1) for e in ext] + [(ext[-1], b) for b in batches]
                prev = 0.0
                for i, (e, b) in enumerate(sizes):
                    grow = (e ** 3 * b) / (sizes[i - 1][0] ** 3 * sizes[i - 1][1]) if i else 1.0
                    # the three smallest sizes always (a curve needs its overhead and a slope), then
                    # larger ones while a call stays short
                    if i >= 3 and prev * grow > max_call_s:
                        break
                    fn, work, elements = _layer_runner(lay, spec.modules[lay.index], kind, e, b, device)
                    sec = _median_time(fn, min_reps, budget_s, device)
                    pts.append([work, sec])
                    if t == threads[0]:
                        mem_pts.append((elements, _saved_bytes(fn)))
                    prev = sec
                table[sig] = pts
                if mem_pts:
                    if len(mem_pts) >= 2:
                        (e0, b0), (e1, b1) = mem_pts[-2], mem_pts[-1]
                        slope = (b1 - b0) / (e1 - e0) if e1 != e0 else b1 / e1
                        saved[sig] = [float(slope), float(max(0.0, b1 - slope * e1))]
                    else:
                        saved[sig] = [float(mem_pts[0][1] / mem_pts[0][0]), 0.0]
                log(f"  {t} thread(s) {sig}: " + ", ".join(f"{w:.3g}->{s * 1e3:.2f}ms" for w, s in pts))
            compute[str(t)] = table
            adam[str(t)] = [[float(spec.n_params), _bench_adam(spec, budget_s, device)]]
    finally:
        torch.set_num_threads(old)
    return compute, saved, adam


def _bench_adam(spec: ModelSpec, budget_s: float, device: torch.device = torch.device("cpu")) -> float:
    """An Adam step (+ zero_grad) over parameters of the model's shapes."""
    shapes = [tuple(p.shape) for m in spec.modules.values() for p in m.parameters()]
    params = [nn.Parameter(torch.randn(s, device=device)) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.Adam(params, lr=1e-3)

    def fn():
        opt.step()
        for p in params:
            p.grad = torch.randn_like(p) if p.grad is None else p.grad

    return _median_time(fn, 5, budget_s, device)


def _bench_io(size: int, n_files: int = 4) -> dict[str, float]:
    """Seconds per sample read by the trainer's reader (its block of an augmented sample,
    :mod:`tessera.training.trainer`) at block edges size/4, size/2, size, and per target read."""
    from ..models.data.cosmology import write_sample
    from .samples import Samples, augment_index, read_sample_target

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i in range(n_files):
            write_sample(folder / f"univ_{i:06d}.h5", rng.random((size, size, size, 4), dtype=np.float32),
                         np.zeros(4, dtype=np.float32))
        pts = []
        for e in sorted({max(1, size // 4), max(1, size // 2), size}):
            samples = Samples(folder, n_files, ((0, e), (0, e), (0, e)), size, val_fraction=0.25)
            ts = []
            for k in range(12):
                sym = augment_index(size, np.random.default_rng([7, k]), True)
                t0 = time.perf_counter()
                samples.read([k % n_files], lambda i, sym=sym: sym)
                ts.append(time.perf_counter() - t0)
            pts.append((e ** 3 * 4 * F32, float(np.median(ts[2:]))))
        tt = []
        for k in range(20):
            t0 = time.perf_counter()
            read_sample_target(samples, k % n_files)
            tt.append(time.perf_counter() - t0)
    link = fit_link(pts)
    return {"sample_alpha": link.alpha, "sample_beta": link.beta, "target_alpha": float(np.median(tt[2:])),
            "points": [list(p) for p in pts]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _comm_worker(rank: int, world: int, port: int, sizes: list[int], reps: int, out: str,
                 device: str = "cpu") -> None:
    """The trainer's transfers (:mod:`.comm`) on ``device`` tensors: on CUDA with the backend
    the trainer picks (NCCL with a GPU per rank, else gloo staged through host memory)."""
    import torch.distributed as dist

    from . import comm
    from .mesh import resolve_device

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    backend, dev = resolve_device(None if device == "cuda" else "gloo", device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend)
    res: dict[str, list] = {"p2p": [], "allreduce": [], "allgather": [], "backend": backend}
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for nbytes in sizes:
        n = max(1, nbytes // F32)
        a, b = torch.ones(n, device=dev), torch.empty(n, device=dev)
        parts = [torch.empty(max(1, n // world), device=dev) for _ in range(world)]
        mine = torch.ones(max(1, n // world), device=dev)
        ops = {
            "p2p": lambda: comm.send_recv([(nxt, a)], [(prv, b)]),
            "allreduce": lambda: comm.all_reduce(a),
            "allgather": lambda: comm.all_gather(parts, mine),
        }
        for name, op in ops.items():
            ts = []
            for r in range(reps + 2):
                dist.barrier()
                t0 = time.perf_counter()
                op()
                _sync(dev)
                ts.append(time.perf_counter() - t0)
            dist.barrier()
            # every rank's time; the step waits for the slowest
            t = torch.tensor(ts[2:], dtype=torch.float64, device=comm.bookkeeping_device())
            comm.all_reduce(t, op=dist.ReduceOp.MAX)
            res[name].append((n * F32, float(t.cpu().median())))
    if rank == 0:
        Path(out).write_text(json.dumps(res))
    dist.barrier()
    dist.destroy_process_group()


def _bench_comm(ranks: Sequence[int], sizes: Sequence[int], reps: int,
                device: str = "cpu") -> tuple[dict[str, dict[str, list[float]]], dict[str, str]]:
    """Alpha-beta fits per collective and process count, and the backend of each count."""
    import torch.multiprocessing as mp

    out: dict[str, dict[str, list[float]]] = {"p2p": {}, "allreduce": {}, "allgather": {}}
    backends: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in ranks:
            path = str(Path(tmp) / f"comm{p}.json")
            mp.spawn(_comm_worker, args=(p, _free_port(), list(sizes), reps, path, device), nprocs=p, join=True)
            res = json.loads(Path(path).read_text())
            backends[str(p)] = res.pop("backend")
            for name, pts in res.items():
                link = fit_link(pts)
                out[name][str(p)] = [link.alpha, link.beta]
    return out, backends


def calibrate(model: str = "cosmoflow", width: float | None = None, size: int | None = None,
              ranks: Sequence[int] = (2, 4), quick: bool = False, log: Callable[[str], None] = lambda s: None,
              device: str = "cpu") -> Calibration:
    """Measure the machine: every layer shape of ``model`` (forward + backward, at 1 and all
    cores' threads), an Adam step, the sample reader, and gloo point-to-point, all-reduce and
    all-gather at ``ranks`` processes.  ``quick``: fewer sizes, one thread count, two ranks
    (tests).

    ``device='cuda'``: the layers and the Adam step on the GPU (one thread count: the CPU
    threads only launch its kernels; blocks up to the model's input edge, where a GPU's
    time per voxel settles), the transfers on CUDA tensors with the backend the trainer
    takes (:func:`.mesh.resolve_device`: gloo staged through host memory when the ranks
    share GPUs); the reader stays on the host."""
    if device not in ("cpu", "cuda"):
        raise CalibrationError(f"device {device!r}: expected cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        raise CalibrationError("--device cuda: no CUDA device is visible")
    cuda = device == "cuda"
    dev = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    cores = os.cpu_count() or 1
    spec = model_spec(model, width, size)
    threads = [1] if quick or cuda else sorted({1, cores})
    extents = (2, 3, 4) if quick else (2, 4, 8, 16, 32, 64, 128) if cuda else (2, 4, 8, 16, 32)
    t0 = time.perf_counter()
    log(f"compute: {len(_unique_layers(spec))} layer shapes of {model} (width {spec.width:g}) on {dev}, "
        f"threads {threads}")
    # each point: the median of >= 5 calls and of as many as fit 0.1 s (up to 25): single
    # points of 3 calls differed by up to 2x between two calibrations on a shared machine
    compute, saved, adam = _bench_compute(spec, threads, extents, 0.02 if quick else 0.3,
                                          0.005 if quick else 0.1, log, min_reps=3 if quick else 5,
                                          batches=() if quick else (2, 4, 8), device=dev)
    t1 = time.perf_counter()
    log(f"io: the sample reader at {spec.size}^3")
    io = _bench_io(min(spec.size, 16) if quick else spec.size)
    t2 = time.perf_counter()
    ranks = [2] if quick else sorted(set(ranks))
    log(f"communication: {device} tensors at {ranks} processes")
    sizes = [8, 4096, 65536] if quick else [8, 4096, 65536, 1 << 20] + ([1 << 22] if cuda else [])
    comm, backends = _bench_comm(ranks, sizes, 5 if quick else 20, device)
    t3 = time.perf_counter()
    meta = {"model": model, "width": spec.width, "size": spec.size, "quick": quick, "torch": torch.__version__,
            "device": str(dev), "device_name": torch.cuda.get_device_name(dev) if cuda else None,
            "comm_backends": backends,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": {"compute": round(t1 - t0, 2),
                                                                      "io": round(t2 - t1, 2),
                                                                      "comm": round(t3 - t2, 2)},
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
    return Calibration(cores=cores, threads=threads, compute=compute, saved=saved, p2p=comm["p2p"],
                       allreduce=comm["allreduce"], allgather=comm["allgather"], io=io, adam=adam, meta=meta,
                       device=device, gpus=torch.cuda.device_count() if cuda else 0)
