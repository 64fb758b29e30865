"""Performance model of data x spatial parallel training: per-layer step time and memory per
rank, machine parameters from microbenchmarks, and the decomposition chooser.

A training step of one rank (docs/perfmodel.md) is

    T = f_over * (sum_layers t_layer(work) + t_adam) + f_host * t_io + sum_comm (alpha_P * msgs + beta_P * bytes)

* ``t_layer``: the measured time of that layer kind and shape (forward + backward, the code
  path the sharded trainer runs) at the rank's work -- FLOPs for convolutions and dense
  layers, elements for the rest -- interpolated between microbenchmark points
  (:class:`Curve`); the rank's work comes from its block of
  :func:`tessera.compiler.partition.regions.grid_blocks` (through :func:`.halo.blocks`) and the
  local batch (the replicated tail: the whole mini-batch on every rank).
* communication: halo exchanges (the exchange plans of :func:`.halo.plan_exchange` on the
  needs of :mod:`tessera.compiler.partition.regions`, forward and the transposed backward),
  BatchNorm and activation-statistic collectives, the gather before the tail, the gradient
  all-reduce; each with an alpha-beta model measured at that number of processes.
* ``f_over = f_host = max(1, ranks * threads / cores)``: ranks share the cores
  (oversubscription); on a CUDA calibration ``f_over = max(1, ranks / gpus)`` (ranks sharing
  a GPU take turns on it) and ``f_host = max(1, ranks / cores)`` (:func:`sharing`).

Memory per rank: activations autograd saves (bytes per element measured per layer kind with
saved-tensor hooks, on the rank's block) + received halos + parameters, gradients and Adam's
two moments + the input batch.

Everything is measured by :func:`.calibrate.calibrate` (a short microbenchmark, its own
module) and stored as JSON (:class:`Calibration`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..compiler.partition.regions import window_input
from .halo import blocks, plan_exchange, span_size
from .mesh import SpatialGrid
from .modelspec import OP_KINDS, CalibrationError, LayerSpec, ModelSpec, PlanError, model_spec, tail_start

__all__ = ["OP_KINDS", "Calibration", "CalibrationError", "Curve", "LayerSpec", "Link", "ModelSpec", "PlanError", "Prediction",
           "candidates", "choose", "default_calibration_path", "fastest", "fit_link", "format_bytes", "model_spec",
           "predict", "sharing"]

CALIBRATION_VERSION = 1
F32 = 4


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


def fit_link(points: Sequence[tuple[float, float]]) -> Link:
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


# --- calibration ----------------------------------------------------------------------------


@dataclass
class Calibration:
    """Measured machine parameters (JSON: :meth:`save` / :meth:`load`).

    ``compute[threads][signature]``: ``(work, seconds)`` points of forward + backward;
    ``saved[signature]``: ``(bytes per element of the layer input, fixed bytes)`` autograd
    keeps; ``p2p`` / ``allreduce`` / ``allgather[ranks]``: ``(alpha s, beta s/byte)``;
    ``io``: seconds per sample read (``sample_alpha`` + ``sample_beta`` * bytes) and per
    target read; ``adam[threads]``: ``(parameters, seconds)`` points of an optimizer step;
    ``device`` / ``gpus``: where the layers and the optimizer step were measured (a CUDA
    calibration has one thread count)."""

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
    #: where the layers ran: ``'cpu'``, or ``'cuda'`` on ``gpus`` GPUs
    device: str = "cpu"
    gpus: int = 0

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
    io_oversubscription: float = 1.0

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


def sharing(cal: Calibration, ranks: int, threads: int) -> tuple[float, float]:
    """``(compute, host)`` slow-down factors of ``ranks`` processes sharing the machine:
    on CPU both are ``ranks * threads / cores`` (at least 1); on CUDA the layers and the
    optimizer step of ranks sharing a GPU take turns on it (``ranks / gpus``), and the
    reader shares the cores."""
    host = max(1.0, ranks * threads / cal.cores)
    if cal.device == "cuda":
        return max(1.0, ranks / max(1, cal.gpus)), max(1.0, ranks / cal.cores)
    return host, host


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
    over = sharing(cal, ranks, threads)
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
    over, over_io = over
    step = over * (compute + adam_s) + over_io * io_s + comm
    n = spec.n_params
    mem = {"activations": int(act_bytes), "halo": int(halo_total), "weights_derived": int(fixed_bytes),
           "params": n * F32, "grads": n * F32, "adam": 2 * n * F32, "input": int(in_bytes)}
    return Prediction(data, str(grid), ranks, threads, over, step, compute, comm, io_s, adam_s,
                      int(sum(v for k, v in mem.items() if k != "halo")), mem, flops, layers, over_io)


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
        raise PlanError(f"no decomposition of {ranks} ranks fits {format_bytes(mem_cap)} per rank: the most frugal "
                        f"({low.label}) needs {format_bytes(low.mem_bytes)}; use more ranks, a smaller batch or "
                        f"a larger --mem")
    return Plan(ranks, mem_cap, batch, preds, fastest(ok))


def fastest(preds: list[Prediction]) -> Prediction:
    """The fastest prediction; among equal predictions (splits that differ only by which
    axis is cut: the model sees the same volumes) the one cut along the outermost axes:
    ``(N, C, D, H, W)`` tensors and the ``(D, H, W, C)`` sample files are row-major, so D-slabs
    are contiguous in memory and on disk (halo boxes need no strided packing, convolutions
    keep whole W rows), W-slabs the most fragmented."""
    t = min(p.step_s for p in preds)
    tied = [p for p in preds if p.step_s <= t * (1 + 1e-6)]
    return max(tied, key=lambda p: tuple(int(x) for x in p.grid.split("x")))


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"
