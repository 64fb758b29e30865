"""Equivalence check: sharded training over real processes == single-process training.

:func:`run_equivalence` launches ``data x spatial`` processes (``torch.multiprocessing``,
gloo on CPU), runs one training step and ``steps`` Adam steps of a model on a fixed batch in
both forms, and returns the largest relative differences (``max |a - b| / max |b|`` per
tensor) of the first step's outputs, loss, every parameter gradient and the input gradient,
and of every parameter after the last step.  Used by the tests and ``bench/training_equivalence.py``.

Models (:data:`CHECK_MODELS`): ``'layers'`` (plain torch: odd-size stride-2 convs, average
and max pooling, transposed conv, nearest upsampling, BatchNorm; output per voxel),
``'cosmoflow'`` (brevitas, BatchNorm, dense tail after the gather), ``'unet3d'`` (brevitas,
per-voxel output, skip concatenations).
"""

from __future__ import annotations

import os
import socket
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .mesh import SpatialGrid
from .spatial import use_shared_percentile

__all__ = ["CHECK_MODELS", "EquivalenceSpec", "run_equivalence", "run_thread_noise"]


def _layers_net(cin: int = 2) -> nn.Module:
    return nn.Sequential(
        nn.Conv3d(cin, 4, 3, padding=1, bias=False), nn.BatchNorm3d(4), nn.LeakyReLU(0.125),
        nn.Conv3d(4, 4, 3, stride=2, padding=1), nn.ReLU(),
        nn.AvgPool3d(3, stride=1, padding=1, count_include_pad=True),
        nn.ConvTranspose3d(4, 3, 3, stride=2, padding=1), nn.LeakyReLU(0.125),
        nn.MaxPool3d(2, stride=2), nn.Conv3d(3, 3, (3, 1, 2), padding=(1, 0, 1)),
        nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv3d(3, 2, 5, padding=2))


#: name -> builder(width, extent) -> (model, input channels)
CHECK_MODELS: dict[str, Callable[[float, tuple[int, int, int]], tuple[nn.Module, int]]] = {
    "layers": lambda width, extent: (_layers_net(2), 2),
    "cosmoflow": lambda width, extent: (_cosmoflow(width, extent), 4),
    "unet3d": lambda width, extent: (_unet(width), 1),
}


def _cosmoflow(width, extent):
    from ..models.cnn3d import cosmoflow

    if len(set(extent)) != 1:
        raise ValueError("CosmoFlow takes cubic volumes")
    return cosmoflow(width, extent[0], 4, 4, dropout=0.0, batchnorm=True)


def _unet(width):
    from ..models.cnn3d import unet3d

    return unet3d(width, 1, 3)


@dataclass(frozen=True)
class EquivalenceSpec:
    """One check: ``model`` at ``extent`` (global D, H, W), mini-batch ``batch`` split over
    ``data`` replicas, each sample over ``grid``; ``stats_steps``: the activation quantizers'
    statistics phase is shortened to this many steps so that the learned-scale phase is
    reached within ``steps``.

    ``device``: ``'cpu'`` (gloo) or ``'cuda'``: both runs on the GPU(s), the ranks on NCCL one
    per GPU when there are enough, else on gloo sharing them (:func:`.mesh.resolve_device`).
    ``host_staging``: stage every transfer through host copies even on CPU (the path CUDA
    tensors take under gloo, :mod:`.comm`)."""

    model: str
    extent: tuple[int, int, int]
    data: int = 1
    grid: SpatialGrid = SpatialGrid()
    batch: int = 4
    width: float = 0.125
    steps: int = 20
    lr: float = 1e-3
    seed: int = 0
    stats_steps: int = 10
    record_step: int = 0
    optimizer: str = "adam"
    warm_steps: int = 0
    dtype: str = "float32"
    bn_stats: str = "global"
    device: str = "cpu"
    host_staging: bool = False

    @property
    def world(self) -> int:
        return self.data * self.grid.size


def _build(spec: EquivalenceSpec) -> tuple[nn.Module, int]:
    from brevitas.core.scaling.standalone import ParameterFromRuntimeStatsScaling

    net, cin = CHECK_MODELS[spec.model](spec.width, spec.extent)
    net = net.to(getattr(torch, spec.dtype))
    for m in net.modules():
        if isinstance(m, ParameterFromRuntimeStatsScaling):
            m.collect_stats_steps = spec.stats_steps
    return net, cin


def _load_fresh(net: nn.Module, state: dict) -> None:
    """Load the state of a freshly built net: brevitas leaves the activation scales of a net
    that has not trained yet out of its state_dict (they are still to be collected)."""
    missing, unexpected = net.load_state_dict(state, strict=False)
    bad = [k for k in missing if not k.endswith("scaling_impl.value")] + list(unexpected)
    if bad:
        raise KeyError(f"state does not fit the model: {bad[:3]}")


def _single(spec: EquivalenceSpec, state: dict) -> nn.Module:
    """The single-process form that sharded training equals, from ``state``: the shared
    percentile statistic goes in after the load (brevitas rebuilds its quantizers on
    ``load_state_dict``, which would bring its own statistic back)."""
    torch.manual_seed(spec.seed)
    net, _ = _build(spec)
    _load_fresh(net, state)
    return use_shared_percentile(net)


def _steps(model: nn.Module, params: dict[str, nn.Parameter], x: torch.Tensor,
           y: torch.Tensor, count: int, spec: EquivalenceSpec, after_backward=None,
           loss_total=None) -> dict:
    """``spec.steps`` Adam steps on one batch; the first step's tensors and final params."""
    opt = (torch.optim.Adam(params.values(), lr=spec.lr) if spec.optimizer == "adam"
           else torch.optim.SGD(params.values(), lr=spec.lr, momentum=0.9))
    rec: dict = {}
    losses = []
    for step in range(spec.steps):
        opt.zero_grad(set_to_none=True)
        x.grad = None
        model.train()
        out = model(x)
        loss = (out - y).pow(2).sum() / count
        loss.backward()
        if after_backward is not None:
            after_backward()
        losses.append(float(loss_total(loss.detach()) if loss_total else loss.detach()))
        if step == spec.record_step:
            rec = {**rec, "out": out.detach().clone(),
                   "loss": (loss_total(loss.detach()) if loss_total else loss.detach()).clone(),
                   "grads": {n: p.grad.detach().clone() for n, p in params.items() if p.grad is not None},
                   "input_grad": x.grad.detach().clone()}
        opt.step()
    rec["params"] = {n: p.detach().clone() for n, p in params.items()}
    rec["losses"] = losses
    return rec


def _worker(rank: int, spec: EquivalenceSpec, port: int, folder: str) -> None:
    import torch.distributed as dist

    from . import comm
    from .halo import blocks
    from .mesh import init_mesh
    from .spatial import SpatialModel, shard_batch

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(spec.world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(spec.world))
    torch.set_num_threads(1)
    comm.STAGE_ALWAYS = spec.host_staging
    _deterministic(spec.device)
    mesh = init_mesh(spec.data, spec.grid, backend=None if spec.device == "cuda" else "gloo", device=spec.device)
    try:
        init = torch.load(Path(folder) / "init.pt", weights_only=False)
        net, _ = _build(spec)
        _load_fresh(net, init["state"])
        net.to(mesh.device)
        sm = SpatialModel(net, mesh, spec.extent, bn_stats=spec.bn_stats)
        x, y = init["x"].to(mesh.device), init["y"].to(mesh.device)
        bs = shard_batch(len(x), mesh.data, mesh.data_index)
        blk = sm.input_block()
        sl = (bs, slice(None)) + tuple(slice(a, b) for a, b in blk)
        xl = x[sl].clone().requires_grad_(True)
        per_voxel = y.dim() == 5
        oblk = blocks(y.shape[2:], mesh.grid.dims)[mesh.spatial_index] if per_voxel else None
        # a dense tail runs on the whole mini-batch on every rank
        yl = y[(bs, slice(None)) + tuple(slice(a, b) for a, b in oblk)].clone() if per_voxel else y.clone()

        def total(v):
            v = v.clone()
            if per_voxel:
                comm.all_reduce(v, group=mesh.world_group)
            return v

        rec = _steps(sm, dict(sm.net.named_parameters()), xl, yl, y.numel(), spec,
                     sm.reduce_gradients, total)
        rec.update(rank=rank, batch=(bs.start, bs.stop), block=blk, out_block=oblk, per_voxel=per_voxel,
                   backend=dist.get_backend(), device=str(mesh.device), staged=dict(comm.STAGED))
        torch.save(_to_cpu(rec), Path(folder) / f"rank{rank}.pt")
    finally:
        dist.barrier()
        dist.destroy_process_group()


def _to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    return obj


def _deterministic(device: str) -> None:
    """cuDNN's deterministic algorithms (a step's float64 sums in one fixed order)."""
    if device == "cuda":
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """``max |a - b| / max |b|`` (the absolute difference where ``b`` is all zero)."""
    scale = float(b.abs().max()) if b.numel() else 0.0
    diff = float((a - b).abs().max()) if b.numel() else 0.0
    return diff / scale if scale > 0 else diff


def _rel2(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a - b||_2 / ||b||_2``."""
    scale = float(b.double().norm())
    diff = float((a.double() - b.double()).norm())
    return diff / scale if scale > 0 else diff


def _problem(spec: EquivalenceSpec) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """The mini-batch, targets and initial state of a check (after ``warm_steps``
    single-process steps, which put the quantizers in their learned phase)."""
    torch.manual_seed(spec.seed)
    net, cin = _build(spec)
    use_shared_percentile(net)
    g = torch.Generator().manual_seed(spec.seed + 1)
    dtype = getattr(torch, spec.dtype)
    x = (torch.rand((spec.batch, cin, *spec.extent), generator=g) * 2.0).to(dtype)
    with torch.no_grad():
        shape = net.eval()(x[:1]).shape
    y = (torch.randn((spec.batch, *shape[1:]), generator=g) * 0.5).to(dtype)
    if spec.warm_steps:
        _steps(net, dict(net.named_parameters()), x.clone().requires_grad_(True), y, y.numel(),
               EquivalenceSpec(**{**asdict(spec), "grid": spec.grid, "steps": spec.warm_steps}))
    return x, y, {k: v.clone() for k, v in net.state_dict().items()}


def run_thread_noise(spec: EquivalenceSpec, threads: tuple[int, int] = (1, 2)) -> dict:
    """The same comparison between two *single-process* runs that differ only in the number
    of intra-op threads (so in the order of floating-point reductions): the noise floor of
    the measure at ``spec.dtype``."""
    x, y, state = _problem(spec)
    recs = []
    before = torch.get_num_threads()
    try:
        for t in threads:
            torch.set_num_threads(t)
            n = _single(spec, state)
            recs.append(_steps(n, dict(n.named_parameters()), x.clone().requires_grad_(True), y, y.numel(), spec))
    finally:
        torch.set_num_threads(before)
    a, b = recs
    rep = {"spec": {**asdict(spec), "grid": "threads %d vs %d" % threads}, "steps": spec.steps}
    for key in ("out", "loss", "input_grad"):
        rep["output" if key == "out" else key] = {"max_rel": _rel(a[key], b[key]), "l2_rel": _rel2(a[key], b[key])}
    for key, name in (("grads", "grads"), ("params", "params_after")):
        worst = max(((_rel(a[key][n], t), n) for n, t in b[key].items()), default=(0.0, ""))
        rep[name] = {"max_rel": worst[0], "worst": worst[1]}
    return rep


def _float64_first_step(spec: EquivalenceSpec, state: dict, x: torch.Tensor, y: torch.Tensor) -> dict:
    """The recorded step of the single-process form in float64 from the same (float32)
    weights and data: the exact result, to float32's resolution."""
    s64 = EquivalenceSpec(**{**asdict(spec), "grid": spec.grid, "dtype": "float64", "steps": spec.record_step + 1})
    net = _single(s64, {k: (v.double() if v.is_floating_point() else v) for k, v in state.items()})
    return _steps(net, dict(net.named_parameters()), x.double().requires_grad_(True), y.double(), y.numel(), s64)


def _worst_vs(truth: dict, out: torch.Tensor, grads: list[dict], gin: torch.Tensor) -> dict:
    """Largest ``max |a - b| / max |b|`` of the output, every gradient and the input gradient
    against ``truth``."""
    worst = {"output": _rel(out.double(), truth["out"]), "input_grad": _rel(gin.double(), truth["input_grad"]),
             "grads": max(_rel(g[n].double(), t) for g in grads for n, t in truth["grads"].items())}
    worst["all"] = max(worst.values())
    return worst


def run_equivalence(spec: EquivalenceSpec, exact: bool = False) -> dict:
    """Run ``spec`` distributed and single-process; the largest relative differences.
    ``exact``: also both runs' distance from the float64 single-process step
    (``report['vs_float64']``)."""
    import torch.multiprocessing as mp

    x, y, state = _problem(spec)
    with tempfile.TemporaryDirectory(prefix="tessera-eq-") as folder:
        torch.save({"state": state, "x": x, "y": y}, Path(folder) / "init.pt")
        # CUDA cannot be used in a forked child of a process that has initialised it
        mp.start_processes(_worker, args=(spec, _free_port(), folder), nprocs=spec.world,
                           join=True, start_method="spawn" if spec.device == "cuda" else "fork")
        ranks = [torch.load(Path(folder) / f"rank{r}.pt", weights_only=False) for r in range(spec.world)]
    # single-process reference from the same initial state, on the same device
    _deterministic(spec.device)
    dev = torch.device(spec.device)
    ref_net = _single(spec, state).to(dev)
    xr = x.clone().to(dev).requires_grad_(True)
    ref = _to_cpu(_steps(ref_net, dict(ref_net.named_parameters()), xr, y.to(dev), y.numel(), spec))
    # reassemble the sharded outputs and input gradient
    out = torch.zeros_like(ref["out"])
    gin = torch.zeros_like(ref["input_grad"])
    for r in ranks:
        bs = slice(*r["batch"])
        sl = (bs, slice(None)) + tuple(slice(a, b) for a, b in r["block"])
        gin[sl] = r["input_grad"]
        if r["per_voxel"]:
            out[(bs, slice(None)) + tuple(slice(a, b) for a, b in r["out_block"])] = r["out"]
        else:
            out = r["out"]
    report = {"spec": {**asdict(spec), "grid": str(spec.grid)}, "world": spec.world,
              "steps": spec.steps, "n_params": len(ref["params"]), "backend": ranks[0]["backend"],
              "devices": sorted({r["device"] for r in ranks}), "staged_ops": sum(r["staged"]["ops"] for r in ranks)}
    for key, a, b in (("output", out, ref["out"]), ("loss", ranks[0]["loss"], ref["loss"]),
                      ("input_grad", gin, ref["input_grad"])):
        report[key] = {"max_rel": _rel(a, b), "l2_rel": _rel2(a, b)}
    for key in ("grads", "params"):
        worst = {"max_rel": 0.0, "l2_rel": 0.0, "worst": ""}
        for r in ranks:
            if set(r[key]) != set(ref[key]):
                raise AssertionError(f"rank {r['rank']}: {key} names differ from the single-process run")
            for n, t in ref[key].items():
                e = _rel(r[key][n], t)
                if e >= worst["max_rel"]:
                    worst.update(max_rel=e, worst=n)
                worst["l2_rel"] = max(worst["l2_rel"], _rel2(r[key][n], t))
        report["grads" if key == "grads" else "params_after"] = worst
    report["loss_curve_max_rel"] = max(abs(a - b) / abs(b) for a, b in zip(ranks[0]["losses"], ref["losses"]))
    if exact:
        truth = _float64_first_step(spec, state, x, y)
        report["vs_float64"] = {"sharded": _worst_vs(truth, out, [r["grads"] for r in ranks], gin),
                                "single": _worst_vs(truth, ref["out"], [ref["grads"]], ref["input_grad"])}
    return report
