"""Performance model of data x spatial parallel training: per-layer step time and memory per
rank, machine parameters from microbenchmarks, and the decomposition chooser.

A training step of one rank (docs/perfmodel.md) is

    T = f_over * (sum_layers t_layer(work) + t_adam + t_io) + sum_comm (alpha_P * msgs + beta_P * bytes)

* ``t_layer``: the measured time of that layer kind and shape (forward + backward, the code
  path the sharded trainer runs) at the rank's work -- FLOPs for convolutions and dense
  layers, elements for the rest -- interpolated between microbenchmark points
  (:class:`Curve`); the rank's work comes from its block of
  :func:`tessera.compiler.partition.plan.grid_blocks` (through :func:`.halo.blocks`) and the
  local batch (the replicated tail: the whole mini-batch on every rank).
* communication: halo exchanges (the exchange plans of :func:`.halo.plan_exchange` on the
  needs of :mod:`tessera.compiler.partition.regions`, forward and the transposed backward),
  BatchNorm and activation-statistic collectives, the gather before the tail, the gradient
  all-reduce; each with an alpha-beta model measured at that number of processes.
* ``f_over = max(1, ranks * threads / cores)``: ranks share the cores (oversubscription).

Memory per rank: activations autograd saves (bytes per element measured per layer kind with
saved-tensor hooks, on the rank's block) + received halos + parameters, gradients and Adam's
two moments + the input batch.

Everything is measured by :func:`calibrate` (a short microbenchmark) and stored as JSON.
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from ..compiler.errors import TesseraError
from ..compiler.partition.regions import window_input
from .halo import blocks, plan_exchange, span_size
from .mesh import SpatialGrid

__all__ = ["Calibration", "CalibrationError", "Curve", "LayerSpec", "ModelSpec", "PlanError", "Prediction",
           "calibrate", "candidates", "choose", "default_calibration_path", "model_spec", "predict"]

CALIBRATION_VERSION = 1
F32 = 4


class CalibrationError(TesseraError):
    """No usable calibration (missing file, wrong version, a layer kind never measured)."""

    exit_code = 2


class PlanError(TesseraError):
    """No data x spatial decomposition fits the constraints."""

    exit_code = 2


# --- measured curves ---------------------------------------------------------------------


@dataclass(frozen=True)
class Curve:
    """Seconds as a function of work, from measured ``(work, seconds)`` points: linear
    between points, the smallest point's time below it (per-call overhead), and above the
    largest the chord slope from the smallest to the largest point (the marginal seconds
    per unit of work; with one point, its time scaled by work)."""

    points: tuple[tuple[float, float], ...]

    def seconds(self, work: float) -> float:
        if work <= 0:
            return 0.0
        pts = sorted(self.points)
        w = [p[0] for p in pts]
        t = list(np.maximum.accumulate([p[1] for p in pts]))  # more work never takes less time
        if work <= w[0]:
            return t[0]
        if work >= w[-1]:
            if len(w) == 1:
                return t[-1] * work / w[-1]
            slope = max(0.0, (t[-1] - t[0]) / (w[-1] - w[0]))
            return t[-1] + (work - w[-1]) * slope
        return float(np.interp(work, w, t))


@dataclass(frozen=True)
class Link:
    """Alpha-beta model of one collective at one process count: ``alpha + beta * bytes``."""

    alpha: float
    beta: float

    def seconds(self, nbytes: float, messages: int = 1) -> float:
        return messages * self.alpha + nbytes * self.beta


def _fit_link(points: Sequence[tuple[float, float]]) -> Link:
    """Least squares of ``t = alpha + beta * bytes`` (both clamped at >= 0)."""
    b = np.array([p[0] for p in points], dtype=float)
    t = np.array([p[1] for p in points], dtype=float)
    a_mat = np.stack([np.ones_like(b), b], 1)
    (alpha, beta), *_ = np.linalg.lstsq(a_mat, t, rcond=None)
    if beta < 0:
        alpha, beta = float(np.mean(t)), 0.0
    if alpha < 0:
        alpha, beta = 0.0, float(np.sum(b * t) / np.sum(b * b))
    return Link(float(alpha), float(beta))


# --- layers of a model ----------------------------------------------------------------------


@dataclass(frozen=True)
class OpKind:
    """A layer kind: how its work is counted and whether it is sharded through a halo."""

    name: str
    work_unit: str  # "flop" or "element"
    halo: bool      # a fused halo exchange (conv, pooling)


#: Layer kinds of the model; :func:`_kind_of` maps module types to them (explicit, in order).
OP_KINDS: dict[str, OpKind] = {k.name: k for k in (
    OpKind("conv3d", "flop", True),
    OpKind("batchnorm", "element", False),         # DistBatchNorm3d (the sharded part)
    OpKind("batchnorm_native", "element", False),  # torch's BatchNorm3d (the replicated tail)
    OpKind("leaky_relu", "element", False),
    OpKind("act_quant", "element", False),
    OpKind("avgpool", "element", True),
    OpKind("maxpool", "element", True),
    OpKind("dense", "flop", False),
)}


@dataclass(frozen=True)
class LayerSpec:
    """One module of the model as the trainer runs it.  ``in_extent`` / ``out_extent``: the
    global spatial extents (``()`` after flatten); ``signature``: the calibration key."""

    index: int
    name: str
    kind: str
    signature: str
    c_in: int
    c_out: int
    in_extent: tuple[int, ...]
    out_extent: tuple[int, ...]
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    groups: int = 1
    n_params: int = 0
    in_tail_candidate: bool = True  # in net.features (may be cut to the tail)

    def macs_per_voxel(self) -> int:
        """Multiply-accumulates per output voxel (conv) or per row (dense)."""
        if self.kind == "conv3d":
            return self.c_out * self.c_in * math.prod(self.kernel) // self.groups
        if self.kind == "dense":
            return self.c_in * self.c_out
        return 0


@dataclass
class ModelSpec:
    """The layers of a CosmoFlow model (``name``, ``width``, input ``size``) in run order."""

    name: str
    width: float
    size: int
    layers: list[LayerSpec]
    n_params: int
    features: int  # number of modules in net.features (the cut runs over these)
    modules: dict[int, nn.Module] = field(default_factory=dict, repr=False)

    @property
    def extent(self) -> tuple[int, int, int]:
        return (self.size,) * 3


SPATIAL_KINDS = ("conv3d", "avgpool", "maxpool")


def _t3(v) -> tuple[int, int, int]:
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),) * 3


def _kind_of(m: nn.Module, tail: bool) -> str | None:
    if isinstance(m, nn.Conv3d):
        return "conv3d"
    if isinstance(m, nn.BatchNorm3d):
        return "batchnorm_native" if tail else "batchnorm"
    if isinstance(m, nn.LeakyReLU):
        return "leaky_relu"
    if type(m).__name__ == "QuantIdentity":
        return "act_quant"
    if isinstance(m, nn.AvgPool3d):
        return "avgpool"
    if isinstance(m, nn.MaxPool3d):
        return "maxpool"
    if isinstance(m, nn.Linear):
        return "dense"
    if isinstance(m, (nn.Flatten, nn.Dropout)):
        return None
    raise CalibrationError(f"the performance model has no layer kind for {type(m).__name__}")


def _signature(kind: str, m: nn.Module, c: int) -> str:
    if kind == "conv3d":
        return f"conv3d/{m.in_channels}/{m.out_channels}/{'x'.join(map(str, _t3(m.kernel_size)))}/" \
               f"{'x'.join(map(str, _t3(m.stride)))}"
    if kind in ("batchnorm", "batchnorm_native"):
        return f"{kind}/{c}"
    if kind == "dense":
        return f"dense/{m.in_features}/{m.out_features}"
    return kind


def model_spec(name: str, width: float | None = None, size: int | None = None) -> ModelSpec:
    """Build ``name`` (as :func:`tessera.training.trainer.train_distributed` does: the
    :data:`~tessera.models.train3d.DEFAULTS` options) and list its layers."""
    from ..models.cnn3d import build_cnn3d
    from ..models.train3d import DEFAULTS
    from .spatial import SpatialModel

    if name not in ("cosmoflow", "cosmoflow-mlperf"):
        raise PlanError(f"the performance model covers cosmoflow and cosmoflow-mlperf, not {name!r}")
    d = DEFAULTS[name]
    width = float(width or d["width"])
    size = int(size or d["size"])
    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = build_cnn3d(name, width=width, input_size=size, in_channels=4, n_out=4, **d.get("options", {}))
    layers: list[LayerSpec] = []
    modules: dict[int, nn.Module] = {}
    e: tuple[int, ...] = (size,) * 3
    c = 4
    seq = [("input_quant", net.input_quant, False)] + \
        [(f"features.{i}", m, False) for i, m in enumerate(net.features)] + \
        [("flatten", net.flatten, True)] + [(f"head.{i}", m, True) for i, m in enumerate(net.head)]
    for name_i, m, head in seq:
        kind = _kind_of(m, tail=False)
        if isinstance(m, nn.Flatten):
            c, e = c * math.prod(e), ()
            continue
        if kind is None:
            continue
        out = SpatialModel._out_extent(m, e) if e else e
        c_out = m.out_channels if kind == "conv3d" else (m.out_features if kind == "dense" else c)
        k = s = p = ()
        if kind in SPATIAL_KINDS:
            k, p = _t3(m.kernel_size), _t3(m.padding)
            s = _t3(m.stride or m.kernel_size) if kind != "conv3d" else _t3(m.stride)
        n_params = sum(q.numel() for q in m.parameters())
        idx = len(layers)
        layers.append(LayerSpec(idx, name_i, kind, _signature(kind, m, c), c if kind != "dense" else m.in_features,
                                c_out, e, out, k, s, p, getattr(m, "groups", 1) if kind == "conv3d" else 1,
                                n_params, in_tail_candidate=name_i.startswith("features.")))
        modules[idx] = m
        c, e = c_out, out
    return ModelSpec(name, width, size, layers, sum(q.numel() for q in net.parameters()), len(net.features),
                     modules)


def tail_start(spec: ModelSpec, grid: SpatialGrid) -> int:
    """Index (into ``spec.layers``) of the first layer of the replicated tail: the rule of
    :class:`~tessera.training.spatial.SpatialModel` (gather before the first spatial layer
    whose output would leave a rank without voxels, else before flatten)."""
    g = grid.dims
    if any(a > n for a, n in zip(g, spec.extent)):
        raise PlanError(f"spatial grid {grid} is finer than the input {'x'.join(map(str, spec.extent))}")
    for lay in spec.layers:
        if not lay.in_tail_candidate:
            if lay.name.startswith("head."):
                return lay.index
            continue
        if lay.kind in SPATIAL_KINDS and any(a > n for a, n in zip(g, lay.out_extent)):
            return lay.index
    return len(spec.layers)


# --- calibration ----------------------------------------------------------------------------


@dataclass
class Calibration:
    """Measured machine parameters (JSON: :meth:`save` / :meth:`load`).

    ``compute[threads][signature]``: ``(work, seconds)`` points of forward + backward;
    ``saved[signature]``: ``(bytes per element of the layer input, fixed bytes)`` autograd
    keeps; ``p2p`` / ``allreduce`` / ``allgather[ranks]``: ``(alpha s, beta s/byte)``;
    ``io``: seconds per sample read (``sample_alpha`` + ``sample_beta`` * bytes) and per
    target read; ``adam[threads]``: ``(parameters, seconds)`` points of an optimizer step."""

    cores: int
    threads: list[int]
    compute: dict[str, dict[str, list[list[float]]]]
    saved: dict[str, list[float]]
    p2p: dict[str, list[float]]
    allreduce: dict[str, list[float]]
    allgather: dict[str, list[float]]
    io: dict[str, float]
    adam: dict[str, list[list[float]]]
    meta: dict = field(default_factory=dict)
    version: int = CALIBRATION_VERSION

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> "Calibration":
        path = Path(path)
        if not path.is_file():
            raise CalibrationError(f"no calibration at {path}: run `tessera calibrate` (or pass --calibration)")
        data = json.loads(path.read_text())
        if data.get("version") != CALIBRATION_VERSION:
            raise CalibrationError(f"{path}: calibration version {data.get('version')} != {CALIBRATION_VERSION}; "
                                   f"run `tessera calibrate` again")
        return cls(**data)

    # lookups
    def _threads_key(self, threads: int) -> str:
        ok = [t for t in self.threads if t <= threads] or [min(self.threads)]
        return str(max(ok))

    def curve(self, signature: str, kind: str, threads: int) -> Curve:
        table = self.compute[self._threads_key(threads)]
        if signature in table:
            return Curve(tuple(map(tuple, table[signature])))
        # an unmeasured shape: the kind's points pooled (per unit of work)
        pts = [tuple(p) for sig, ps in table.items() if sig.split("/")[0] == kind for p in ps]
        if not pts:
            raise CalibrationError(f"the calibration has no measurement of {kind} layers; "
                                   f"run `tessera calibrate --model` with this model")
        by_w: dict[float, list[float]] = {}
        for w, t in pts:
            by_w.setdefault(w, []).append(t)
        return Curve(tuple((w, float(np.median(ts))) for w, ts in by_w.items()))

    def saved_fit(self, signature: str, kind: str) -> tuple[float, float]:
        if signature in self.saved:
            return tuple(self.saved[signature])
        fits = [v for s, v in self.saved.items() if s.split("/")[0] == kind]
        if not fits:
            raise CalibrationError(f"the calibration has no memory measurement of {kind} layers")
        return float(np.median([f[0] for f in fits])), float(np.median([f[1] for f in fits]))

    def link(self, table: str, ranks: int) -> Link:
        """The alpha-beta model at ``ranks`` processes (measured, else extrapolated from the
        largest measured count: latency by log2(P), bandwidth term by (P-1)/P)."""
        tab = getattr(self, table)
        if str(ranks) in tab:
            return Link(*tab[str(ranks)])
        if not tab:
            raise CalibrationError(f"the calibration has no {table} measurement")
        pm = max(int(k) for k in tab)
        a, b = tab[str(pm)]
        if table == "p2p":
            return Link(a, b)
        return Link(a * math.log2(max(ranks, 2)) / math.log2(pm), b * ((ranks - 1) / ranks) / ((pm - 1) / pm))

    def adam_seconds(self, n_params: int, threads: int) -> float:
        return Curve(tuple(map(tuple, self.adam[self._threads_key(threads)]))).seconds(n_params)


def default_calibration_path() -> Path:
    """``<cache>/perfmodel/calibration.json`` (the project's cache root: ``$TESSERA_CACHE`` or
    ``~/.cache/tessera``)."""
    from ..models.data.cache import cache_dir

    return cache_dir() / "perfmodel" / "calibration.json"


# --- prediction -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerTime:
    name: str
    kind: str
    tail: bool
    work: float
    flops: float
    compute_s: float
    comm_s: float
    saved_bytes: float
    halo_bytes: float


@dataclass
class Prediction:
    """Predicted step of one decomposition (the slowest spatial rank)."""

    data: int
    grid: str
    ranks: int
    threads: int
    oversubscription: float
    step_s: float
    compute_s: float
    comm_s: float
    io_s: float
    adam_s: float
    mem_bytes: int
    mem: dict
    flops: float
    layers: list[LayerTime] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.data} x {self.grid}"

    def to_dict(self, layers: bool = False) -> dict:
        d = asdict(self)
        if not layers:
            d.pop("layers")
        d["label"] = self.label
        return d


def _vol(span) -> int:
    return math.prod(span_size(span))


def _exchange(lay: LayerSpec, grid: SpatialGrid, s: int):
    """The halo exchange of spatial rank ``s`` for a sharded conv / pool (the needs of
    :func:`tessera.compiler.partition.regions.window_input`, as SpatialModel plans them)."""
    g = grid.dims
    ins, outs = blocks(lay.in_extent, g), blocks(lay.out_extent, g)
    k, st, p = lay.kernel, lay.stride, lay.padding
    needs = [tuple(window_input(a, b, k[d], st[d], p[d]) for d, (a, b) in enumerate(o)) for o in outs]
    if lay.kind == "conv3d":  # SpatialModel clips conv needs to the volume (padding is the layer's own)
        needs = [tuple((max(0, lo), min(n, hi)) for (lo, hi), n in zip(nd, lay.in_extent)) for nd in needs]
    return plan_exchange(ins, needs, lay.in_extent, s, lambda q: q)


def _percentile_m(n: int, q: float = 99.999) -> int:
    """Elements each rank contributes to the activation statistic (training/halo.py)."""
    k = int(math.floor(0.01 * q * n + 0.5))
    return n - k + 1


def threads_for(ranks: int, cores: int) -> int:
    """Threads per rank the plan (and the benchmark) uses: the cores shared out, at least 1."""
    return max(1, cores // ranks)


def predict(cal: Calibration, spec: ModelSpec, data: int, grid: SpatialGrid, batch: int,
            threads: int | None = None, act_stats: bool = True, slowest: bool = True):
    """Predicted step time and memory per rank of ``data x grid`` for a global mini-batch
    ``batch``: the slowest spatial rank's :class:`Prediction` (``slowest=False``: the list of
    every spatial rank's).  ``act_stats``: the activation quantizers are in their statistics
    phase (the first ``ACT_STATS_STEPS`` steps: a percentile collective per quantizer)."""
    if batch < data:
        raise PlanError(f"global batch {batch} is smaller than {data} data replicas")
    ranks = data * grid.size
    threads = threads or threads_for(ranks, cal.cores)
    over = max(1.0, ranks * threads / cal.cores)
    b_loc = -(-batch // data)
    cut = tail_start(spec, grid)
    # the data replica with the most samples, every spatial rank of it
    ranks_pred = [_predict_rank(cal, spec, data, grid, batch, b_loc, threads, over, cut, s, act_stats)
                  for s in range(grid.size)]
    if not slowest:
        return ranks_pred
    worst = max(ranks_pred, key=lambda p: p.step_s)
    heaviest = max(ranks_pred, key=lambda p: p.mem_bytes)
    worst.mem_bytes, worst.mem = heaviest.mem_bytes, heaviest.mem  # the cap applies to every rank
    return worst


def _predict_rank(cal, spec, data, grid, batch, b_loc, threads, over, cut, s, act_stats) -> Prediction:
    ranks = data * grid.size
    S = grid.size
    world_link = cal.link("allreduce", ranks) if ranks > 1 else None
    p2p = cal.link("p2p", ranks) if S > 1 else None
    layers: list[LayerTime] = []
    flops = 0.0
    act_bytes = fixed_bytes = halo_total = 0.0
    sharded_params = 0
    for lay in spec.layers:
        tail = lay.index >= cut
        nb = batch if tail else b_loc
        if tail or not lay.in_extent:
            in_vox = math.prod(lay.in_extent) if lay.in_extent else 1
            out_vox = math.prod(lay.out_extent) if lay.out_extent else 1
        else:
            in_vox = _vol(blocks(lay.in_extent, grid.dims)[s])
            out_vox = _vol(blocks(lay.out_extent, grid.dims)[s])
        kind = OP_KINDS[lay.kind]
        fl = 2.0 * nb * out_vox * lay.macs_per_voxel()
        flops += fl
        elements = nb * lay.c_in * in_vox
        work = fl if kind.work_unit == "flop" else elements
        sig = lay.signature
        if tail and lay.kind == "batchnorm":
            sig = sig.replace("batchnorm/", "batchnorm_native/")
        kname = "batchnorm_native" if tail and lay.kind == "batchnorm" else lay.kind
        t_c = cal.curve(sig, kname, threads).seconds(work)
        bpe, fixed = cal.saved_fit(sig, kname)
        saved = bpe * elements
        fixed_bytes += fixed
        comm = 0.0
        halo_b = 0.0
        if not tail:
            sharded_params += lay.n_params
            if kind.halo and S > 1:
                ex = _exchange(lay, grid, s)
                rb = sum(_vol(b) for _, b in ex.recvs) * lay.c_in * nb * F32
                sb = sum(_vol(b) for _, b in ex.sends) * lay.c_in * nb * F32
                msgs = max(len(ex.recvs), len(ex.sends))
                # forward exchange and its transpose in backward
                comm += 2 * p2p.seconds(max(rb, sb), msgs) if msgs else 0.0
                halo_b = rb
                saved += rb  # the fused layer keeps the received boxes for backward
            if lay.kind == "batchnorm" and ranks > 1:
                comm += world_link.seconds((2 * lay.c_in + 1) * 8) + world_link.seconds(2 * lay.c_in * 8)
            if lay.kind == "act_quant" and ranks > 1 and act_stats:
                n_glob = batch * lay.c_in * (math.prod(lay.in_extent) if lay.in_extent else 1)
                ag = cal.link("allgather", ranks)
                comm += 3 * world_link.seconds(8) + ag.seconds(_percentile_m(n_glob) * F32 * ranks)
        act_bytes += saved
        halo_total += halo_b
        layers.append(LayerTime(lay.name, kname, tail, work, fl, t_c, comm, saved, halo_b))
    # the gather before the tail: spatial (point-to-point) then the data group's all_gather
    gather_s = 0.0
    if cut < len(spec.layers):
        lay = spec.layers[cut]
        whole = math.prod(lay.in_extent) if lay.in_extent else 1
        own = _vol(blocks(lay.in_extent, grid.dims)[s]) if lay.in_extent else 1
        if S > 1:
            gather_s += p2p.seconds((whole - own) * lay.c_in * b_loc * F32, S - 1)
        if data > 1:
            ag = cal.link("allgather", data)
            gather_s += ag.seconds(8 * data) + ag.seconds(batch * lay.c_in * whole * F32)
    grad_s = world_link.seconds(sharded_params * F32) if ranks > 1 else 0.0
    adam_s = cal.adam_seconds(spec.n_params, threads)
    # input: this rank's block of its samples (read + augmented), the targets of the whole batch
    blk = blocks(spec.extent, grid.dims)[s]
    in_bytes = b_loc * _vol(blk) * 4 * F32
    io_s = b_loc * cal.io["sample_alpha"] + in_bytes * cal.io["sample_beta"] + batch * cal.io["target_alpha"]
    compute = sum(lt.compute_s for lt in layers)
    comm = sum(lt.comm_s for lt in layers) + gather_s + grad_s
    step = over * (compute + adam_s + io_s) + comm
    n = spec.n_params
    mem = {"activations": int(act_bytes), "halo": int(halo_total), "weights_derived": int(fixed_bytes),
           "params": n * F32, "grads": n * F32, "adam": 2 * n * F32, "input": int(in_bytes)}
    return Prediction(data, str(grid), ranks, threads, over, step, compute, comm, io_s, adam_s,
                      int(sum(v for k, v in mem.items() if k != "halo")), mem, flops, layers)


# --- the chooser ----------------------------------------------------------------------------


def _factorizations(n: int) -> list[tuple[int, int, int]]:
    return [(a, b, n // (a * b)) for a in range(1, n + 1) if n % a == 0
            for b in range(1, n // a + 1) if (n // a) % b == 0]


def candidates(spec: ModelSpec, ranks: int, batch: int) -> list[tuple[int, SpatialGrid]]:
    """Every ``(data, grid)`` with ``data * grid.size == ranks`` that the trainer accepts
    (``data <= batch``, the grid no finer than the input)."""
    out = []
    for d in range(1, ranks + 1):
        if ranks % d or d > batch:
            continue
        for g in _factorizations(ranks // d):
            if all(a <= n for a, n in zip(g, spec.extent)):
                out.append((d, SpatialGrid(*g)))
    return out


@dataclass
class Plan:
    ranks: int
    mem_cap: int | None
    batch: int
    predictions: list[Prediction]
    chosen: Prediction

    def feasible(self, p: Prediction) -> bool:
        return self.mem_cap is None or p.mem_bytes <= self.mem_cap


def choose(cal: Calibration, spec: ModelSpec, ranks: int, batch: int, mem_cap: int | None = None,
           threads: int | None = None) -> Plan:
    """Predict every candidate decomposition of ``ranks``; the fastest whose memory per rank
    fits ``mem_cap`` (bytes).  :class:`PlanError` when there is no candidate or none fits."""
    cands = candidates(spec, ranks, batch)
    if not cands:
        raise PlanError(f"no data x spatial decomposition of {ranks} ranks fits a {spec.size}^3 input "
                        f"and a global batch of {batch}")
    preds = [predict(cal, spec, d, g, batch, threads) for d, g in cands]
    ok = [p for p in preds if mem_cap is None or p.mem_bytes <= mem_cap]
    if not ok:
        low = min(preds, key=lambda p: p.mem_bytes)
        raise PlanError(f"no decomposition of {ranks} ranks fits {_fmt_bytes(mem_cap)} per rank: the most frugal "
                        f"({low.label}) needs {_fmt_bytes(low.mem_bytes)}; use more ranks, a smaller batch or "
                        f"a larger --mem")
    return Plan(ranks, mem_cap, batch, preds, _fastest(ok))


def _fastest(preds: list[Prediction]) -> Prediction:
    """The fastest prediction; among equal predictions (splits that differ only by which
    axis is cut: the model sees the same volumes) the one cut along the outermost axes:
    ``(N, C, D, H, W)`` tensors and the ``(D, H, W, C)`` sample files are row-major, so D-slabs
    are contiguous in memory and on disk (halo boxes need no strided packing, convolutions
    keep whole W rows), W-slabs the most fragmented."""
    t = min(p.step_s for p in preds)
    tied = [p for p in preds if p.step_s <= t * (1 + 1e-6)]
    return max(tied, key=lambda p: tuple(int(x) for x in p.grid.split("x")))


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"


# --- microbenchmarks ----------------------------------------------------------------------------


def _median_time(fn: Callable[[], None], min_reps: int, budget_s: float) -> float:
    fn()  # warm-up (allocations, brevitas' first-call work)
    ts: list[float] = []
    while len(ts) < min_reps or (sum(ts) < budget_s and len(ts) < 25):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(statistics.median(ts))


def _local_mesh():
    from .mesh import Mesh

    return Mesh(data=1, grid=SpatialGrid(), rank=0, device=torch.device("cpu"), data_group=None,
                spatial_group=None, world_group=None)


def _quant_input(shape, requires_grad: bool):
    """A brevitas QuantTensor input (what the model's convs and dense layers receive)."""
    from brevitas.nn import QuantIdentity

    from ..models.quant import Int8ActPow2

    q = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True)
    with torch.no_grad():
        qt = q(torch.rand(*shape) * 2)
    return qt.set(value=qt.value.detach().requires_grad_(requires_grad))


def _layer_runner(lay: LayerSpec, module: nn.Module, kind: str, extent: int, batch: int):
    """(fn running forward + backward once, work, input elements) for ``module`` on a block
    of ``extent``^3 (or ``batch`` rows): the code path of the trainer (sharded layers through
    :class:`SpatialModel` on one rank; the tail's native BatchNorm and dense layers plain)."""
    from .spatial import SpatialModel

    m = copy.deepcopy(module)
    m.train()
    if kind == "batchnorm_native" and not isinstance(m, nn.BatchNorm3d):
        raise CalibrationError("batchnorm_native needs a BatchNorm3d")
    if kind == "batchnorm_native" and type(m) is not nn.BatchNorm3d:
        fresh = nn.BatchNorm3d(m.num_features)
        m = fresh
    if kind == "dense":
        inp = _quant_input((batch, lay.c_in), True)
        work = 2.0 * batch * lay.c_in * lay.c_out
        run = m
        elements = batch * lay.c_in
    else:
        shape = (batch, lay.c_in, extent, extent, extent)
        first = lay.index == 0  # the input quantizer: its input needs no gradient
        inp = _quant_input(shape, True) if kind == "conv3d" else torch.rand(*shape).requires_grad_(not first)
        run = m if kind == "batchnorm_native" else SpatialModel(nn.Sequential(m), _local_mesh(), (extent,) * 3)
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
                   batches_dense: Sequence[int] = (1, 4, 16, 64)) -> tuple[dict, dict, dict]:
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
                    fn, work, elements = _layer_runner(lay, spec.modules[lay.index], kind, e, b)
                    sec = _median_time(fn, min_reps, budget_s)
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
            adam[str(t)] = [[float(spec.n_params), _bench_adam(spec, budget_s)]]
    finally:
        torch.set_num_threads(old)
    return compute, saved, adam


def _bench_adam(spec: ModelSpec, budget_s: float) -> float:
    """An Adam step (+ zero_grad) over parameters of the model's shapes."""
    shapes = [tuple(p.shape) for m in spec.modules.values() for p in m.parameters()]
    params = [nn.Parameter(torch.randn(s)) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.Adam(params, lr=1e-3)

    def fn():
        opt.step()
        for p in params:
            p.grad = torch.randn_like(p) if p.grad is None else p.grad

    return _median_time(fn, 5, budget_s)


def _bench_io(size: int, n_files: int = 4) -> dict[str, float]:
    """Seconds per sample read by the trainer's reader (its block of an augmented sample,
    :mod:`tessera.training.trainer`) at block edges size/4, size/2, size, and per target read."""
    from ..models.data.cosmology import write_sample
    from .trainer import _Samples, augment_index, read_sample_target

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i in range(n_files):
            write_sample(folder / f"univ_{i:06d}.h5", rng.random((size, size, size, 4), dtype=np.float32),
                         np.zeros(4, dtype=np.float32))
        pts = []
        for e in sorted({max(1, size // 4), max(1, size // 2), size}):
            samples = _Samples(folder, n_files, ((0, e), (0, e), (0, e)), size, val_fraction=0.25)
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
    link = _fit_link(pts)
    return {"sample_alpha": link.alpha, "sample_beta": link.beta, "target_alpha": float(np.median(tt[2:])),
            "points": [list(p) for p in pts]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _comm_worker(rank: int, world: int, port: int, sizes: list[int], reps: int, out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    res: dict[str, list] = {"p2p": [], "allreduce": [], "allgather": []}
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for nbytes in sizes:
        n = max(1, nbytes // F32)
        a, b = torch.ones(n), torch.empty(n)
        parts = [torch.empty(max(1, n // world)) for _ in range(world)]
        mine = torch.ones(max(1, n // world))
        ops = {
            "p2p": lambda: [r.wait() for r in dist.batch_isend_irecv(
                [dist.P2POp(dist.isend, a, nxt), dist.P2POp(dist.irecv, b, prv)])],
            "allreduce": lambda: dist.all_reduce(a),
            "allgather": lambda: dist.all_gather(parts, mine),
        }
        for name, op in ops.items():
            ts = []
            for r in range(reps + 2):
                dist.barrier()
                t0 = time.perf_counter()
                op()
                ts.append(time.perf_counter() - t0)
            dist.barrier()
            # every rank's time; the step waits for the slowest
            t = torch.tensor(ts[2:], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            res[name].append((n * F32, float(t.median())))
    if rank == 0:
        Path(out).write_text(json.dumps(res))
    dist.barrier()
    dist.destroy_process_group()


def _bench_comm(ranks: Sequence[int], sizes: Sequence[int], reps: int) -> dict[str, dict[str, list[float]]]:
    import torch.multiprocessing as mp

    out: dict[str, dict[str, list[float]]] = {"p2p": {}, "allreduce": {}, "allgather": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for p in ranks:
            path = str(Path(tmp) / f"comm{p}.json")
            mp.spawn(_comm_worker, args=(p, _free_port(), list(sizes), reps, path), nprocs=p, join=True)
            res = json.loads(Path(path).read_text())
            for name, pts in res.items():
                link = _fit_link(pts)
                out[name][str(p)] = [link.alpha, link.beta]
    return out


def calibrate(model: str = "cosmoflow", width: float | None = None, size: int | None = None,
              ranks: Sequence[int] = (2, 4), quick: bool = False, log: Callable[[str], None] = lambda s: None
              ) -> Calibration:
    """Measure the machine: every layer shape of ``model`` (forward + backward, at 1 and all
    cores' threads), an Adam step, the sample reader, and gloo point-to-point, all-reduce and
    all-gather at ``ranks`` processes.  ``quick``: fewer sizes, one thread count, two ranks
    (tests)."""
    cores = os.cpu_count() or 1
    spec = model_spec(model, width, size)
    threads = [1] if quick else sorted({1, cores})
    extents = (2, 3, 4) if quick else (2, 4, 8, 16, 32)
    t0 = time.perf_counter()
    log(f"compute: {len(_unique_layers(spec))} layer shapes of {model} (width {spec.width:g}), threads {threads}")
    # each point: the median of >= 5 calls and of as many as fit 0.1 s (up to 25): single
    # points of 3 calls differed by up to 2x between two calibrations on a shared machine
    compute, saved, adam = _bench_compute(spec, threads, extents, 0.02 if quick else 0.3,
                                          0.005 if quick else 0.1, log, min_reps=3 if quick else 5,
                                          batches=() if quick else (2, 4, 8))
    t1 = time.perf_counter()
    log(f"io: the sample reader at {spec.size}^3")
    io = _bench_io(min(spec.size, 16) if quick else spec.size)
    t2 = time.perf_counter()
    ranks = [2] if quick else sorted(set(ranks))
    log(f"communication: gloo at {ranks} processes")
    comm = _bench_comm(ranks, [8, 4096, 65536] if quick else [8, 4096, 65536, 1 << 20],
                       5 if quick else 20)
    t3 = time.perf_counter()
    meta = {"model": model, "width": spec.width, "size": spec.size, "quick": quick, "torch": torch.__version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": {"compute": round(t1 - t0, 2),
                                                                      "io": round(t2 - t1, 2),
                                                                      "comm": round(t3 - t2, 2)},
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}
    return Calibration(cores=cores, threads=threads, compute=compute, saved=saved, p2p=comm["p2p"],
                       allreduce=comm["allreduce"], allgather=comm["allgather"], io=io, adam=adam, meta=meta)
