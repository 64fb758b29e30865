"""A design estimate: per-layer resources, initiation interval and latency for given reuse
factors, io type, strategy and block grid, summed over the graph and checked against a part.

Per layer with reuse factor R (docs/estimate.md has the sources):

* multipliers ``n = ceil(mults / R) - zeros // R`` (hls4ml's ``multiplier_limit``, ops/base/cost.py; a kernel
  with several ALLOCATION regions, the recurrent cells: the sum over its regions plus one per
  product outside them, ``Work.multipliers``), DSPs ``n x tiles``
  for wide products, LUTs ``n x (LUTs per product + accumulator bits)`` plus the
  non-multiply lanes; FFs ``n x (x + w + accumulator bits)`` plus lanes, plus the output
  array in io_parallel;
* initiation interval ``II = steps x R`` cycles, latency ``II + depth`` with
  ``depth = 2 + ceil(log2(taps))`` (one product stage, the adder tree, one output stage);
* on-chip RAM: recurrent states and tables, io_stream line buffers, and the weights with
  the Resource strategy (with the Latency strategy they are constants in the fabric,
  ``ceil(bits / 64)`` LUTs).

A graph with a block grid runs its leading spatial segment once per block on hardware
sized for the largest block (its local shapes, halo included) and the rest once; the
sample's II is ``max(blocks x segment II, head II)``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph, Node
from ..ir.types import TensorType
from ..ops import OPS
from ..ops.base.weights import Codebook
from ..ops.base.cost import LUT6_BITS, Memory, Work
from ..partition import Plan, choose_cut, plan_overlapped, required_spans
from .parts import DSP_A_BITS, DSP_B_BITS, Part

IO_TYPES = ("io_parallel", "io_stream")
#: A product whose operand widths sum to at most this many bits is built from LUTs (an
#: assumption following the hls4ml studies, see docs/estimate.md), wider ones use DSP48E2s.
LUT_MULT_MAX_BITS = 10


def mult_cost(kind: str, x_bits: int, w_bits: int) -> tuple[str, int, int]:
    """(dsp | lut, LUTs per multiplier, DSP48E2s per multiplier) of one product.

    Codebook weights multiply by sign selection (binary, ternary) plus a one-bit shift
    (quaternary): a conditional negation of x, about one LUT per bit.  Narrow integer
    products (operand widths summing to <= LUT_MULT_MAX_BITS) are LUT array multipliers,
    about x_bits * w_bits LUTs.  Wider products use DSP48E2 slices (27 x 18 bits), tiled.
    """
    if Codebook(kind).storage_bits is not None:
        return "lut", x_bits + (1 if kind == Codebook.QUATERNARY else 0), 0
    if x_bits + w_bits <= LUT_MULT_MAX_BITS:
        return "lut", x_bits * w_bits, 0
    tiles = min(math.ceil(x_bits / DSP_A_BITS) * math.ceil(w_bits / DSP_B_BITS),
                math.ceil(x_bits / DSP_B_BITS) * math.ceil(w_bits / DSP_A_BITS))
    return "dsp", 0, tiles


def node_work(node: Node, ins: list[TensorType], out: TensorType, io: str) -> Work:
    """The op's cost facet: what the node's kernel does for one sample."""
    return OPS[node.op].cost(node.attrs, ins, out, io)


def without_padding(node: Node, rank: int) -> Node:
    """The node with its zero padding removed (``rank`` spatial dims): a block's local input
    span already holds the padding (zero-filled), as the overlapped-tile execution runs it."""
    return dataclasses.replace(node, attrs=OPS[node.op].with_pads(node.attrs, (0,) * (2 * rank)))
STRATEGIES = ("latency", "resource")
RESOURCES = ("dsp", "lut", "ff", "bram18")


@dataclass
class LayerEstimate:
    node: str
    op: str
    reuse: int
    blocks: int  # times the layer runs per sample (blocks of the grid, or 1)
    macs: int  # per sample, whole graph (the op's MAC rule on the full shapes)
    mults: int
    multipliers: int
    mult_kind: str
    dsp: int
    lut: int
    ff: int
    bram18: int  # RAMB18 tiles (Vitis reports' BRAM_18K)
    ii: int  # cycles per sample the layer is busy (all blocks)
    latency: int  # cycles of one pass (one block)
    depth: int
    fill: int
    cost_per_multiplier: int  # DSPs (dsp kind) or LUTs (lut kind) of one multiplier and its accumulation

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Design:
    part: Part
    io_type: str
    strategy: str
    clock_ns: float
    utilization_limit: float
    grid: tuple[int, ...] | None
    layers: list[LayerEstimate] = field(default_factory=list)
    redundant_fraction: float = 0.0
    cut: str | None = None  # the value the block grid partitions (end of the segment)
    segment_macs: int | None = None  # the plan's blocks' MACs (per sample)
    plan: Plan | None = None  # the partition planner's plan of the grid

    @property
    def n_blocks(self) -> int:
        return int(np.prod(self.grid)) if self.grid else 1

    @property
    def totals(self) -> dict[str, int]:
        return {k: int(sum(getattr(layer, k) for layer in self.layers)) for k in RESOURCES}

    @property
    def utilization(self) -> dict[str, float]:
        cap = self.part.capacity()
        return {k: (v / cap[k] if cap[k] else (math.inf if v else 0.0)) for k, v in self.totals.items()}

    @property
    def fits(self) -> bool:
        return all(u <= self.utilization_limit for u in self.utilization.values())

    @property
    def ii(self) -> int:
        return max([layer.ii for layer in self.layers] + [1])

    @property
    def latency(self) -> int:
        """Cycles from a sample's first input to its last output.  io_parallel layers run one
        after another; io_stream layers overlap, so the slowest one plus every layer's buffer
        fill and pipeline depth.  Blocks run back to back: (blocks - 1) x segment II more."""
        seg = [layer for layer in self.layers if layer.blocks > 1]
        per_block_ii = max([layer.ii // layer.blocks for layer in seg] + [0])
        extra = (self.n_blocks - 1) * per_block_ii
        if self.io_type == "io_parallel":
            return extra + sum(layer.latency for layer in self.layers)
        slowest = max([layer.latency - layer.depth - layer.fill for layer in self.layers] + [1])
        return extra + slowest + sum(layer.depth + layer.fill for layer in self.layers)

    @property
    def macs(self) -> int:
        return int(sum(layer.macs for layer in self.layers))

    @property
    def executed_macs(self) -> int:
        """MACs per sample as run: the plan's blocks (halo recompute included) for the
        segment, the other layers once."""
        if self.segment_macs is None:
            return self.macs
        return int(self.segment_macs + sum(layer.macs for layer in self.layers if layer.blocks == 1))

    @property
    def samples_per_s(self) -> float:
        return 1e9 / (self.clock_ns * self.ii)

    def roofline(self) -> dict:
        """The design's MACs per cycle against the part's compute roofline for the same mix
        of multiplier kinds: for each kind k (DSP, LUT), peak_k = capacity_k / (cost_k x f_k)
        with cost_k the MAC-weighted resource per parallel multiplier and f_k that kind's
        share of the MACs; the roofline is the smallest peak_k (the first resource to run
        out when the whole part is spent on this mix)."""
        achieved = self.macs / self.ii
        by_kind: dict[str, list[tuple[int, float]]] = {}
        for layer in self.layers:
            if layer.mults and layer.macs:
                by_kind.setdefault(layer.mult_kind, []).append((layer.macs, layer.cost_per_multiplier))
        total = sum(m for rows in by_kind.values() for m, _ in rows)
        peaks = {}
        cap = {"dsp": self.part.dsp, "lut": self.part.lut}
        for kind, rows in by_kind.items():
            share = sum(m for m, _ in rows) / total
            cost = sum(m * c for m, c in rows) / sum(m for m, _ in rows)
            peaks[kind] = cap[kind] / (cost * share) if cost > 0 else math.inf
        peak = min(peaks.values()) if peaks else math.inf
        return {"achieved_macs_per_cycle": achieved, "peak_macs_per_cycle": peak,
                "peak_by_kind": peaks, "percent": 100.0 * achieved / peak if peak not in (0, math.inf) else 0.0}

    def to_dict(self) -> dict:
        u = self.utilization
        return {
            "estimate": True,
            "note": "analytical estimate (docs/estimate.md), not a synthesis or implementation result",
            "part": {"key": self.part.key, "name": self.part.name, "device": self.part.device,
                     "capacity": self.part.capacity(), "source": self.part.source},
            "io_type": self.io_type, "strategy": self.strategy, "clock_ns": self.clock_ns,
            "utilization_limit": self.utilization_limit,
            "grid": list(self.grid) if self.grid else None, "blocks": self.n_blocks, "cut": self.cut,
            "redundant_fraction": self.redundant_fraction,
            "totals": self.totals, "utilization": {k: (v if math.isfinite(v) else None) for k, v in u.items()},
            "fits": self.fits, "ii_cycles": self.ii, "latency_cycles": self.latency,
            "samples_per_s": self.samples_per_s, "macs_per_sample": self.macs,
            "executed_macs_per_sample": self.executed_macs, "roofline": self.roofline(),
            "reuse": {layer.node: layer.reuse for layer in self.layers if layer.mults},
            "layers": [layer.to_dict() for layer in self.layers],
        }


@dataclass
class LayerWork:
    node: str
    op: str
    work: Work
    blocks: int
    full_macs: int


def layer_works(graph: Graph, io_type: str, plan: Plan | None = None) -> list[LayerWork]:
    """Each node's :class:`Work`; with a block plan, the nodes of its segment (up to
    ``plan.value``) on the largest block's local shapes (halo included, the padding inside
    the span) and run once per block."""
    if io_type not in IO_TYPES:
        raise UnsupportedModelError(f"io type must be one of {', '.join(IO_TYPES)}, got {io_type}")
    full = {n.name: node_work(n, [graph.values[v] for v in n.inputs], graph.values[n.output], io_type) for n in graph.nodes}
    if plan is None or len(plan.blocks) == 1:
        return [LayerWork(n.name, n.op, full[n.name], 1, full[n.name].macs) for n in graph.nodes]
    largest = max(plan.blocks, key=lambda b: (b.input_voxels, b.macs))
    spans = required_spans(graph, plan.value, largest.block)
    local = {v: TensorType((t.shape[0], *(b - a for a, b in spans[v])), t.ftype, t.lo, t.hi) if v in spans else t
             for v, t in graph.values.items()}
    out = []
    for n in graph.nodes:
        if n.output in spans:
            w = node_work(without_padding(n, len(local[n.output].shape) - 1), [local[v] for v in n.inputs],
                          local[n.output], io_type)
            out.append(LayerWork(n.name, n.op, w, len(plan.blocks), full[n.name].macs))
        else:
            out.append(LayerWork(n.name, n.op, full[n.name], 1, full[n.name].macs))
    return out


def layer_estimate(lw: LayerWork, reuse: int, io_type: str, strategy: str) -> LayerEstimate:
    w = lw.work
    if strategy not in STRATEGIES:
        raise UnsupportedModelError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy}")
    r = reuse if w.reusable else 1
    n = w.multipliers(r)
    mult_kind, lut_per_mult, dsp_per_mult = mult_cost(w.weight_kind, w.x_bits, w.w_bits) if w.mults else ("none", 0, 0)
    dsp = n * dsp_per_mult
    lut = n * (lut_per_mult + w.acc_bits) + w.lanes * w.lut_per_lane
    ff = n * (w.x_bits + w.w_bits + w.acc_bits) + w.lanes * w.ff_per_lane
    memories = w.memories(io_type)
    if io_type == "io_parallel":
        ff += w.out_bits
    if strategy == "resource":  # hls4ml's ARRAY_RESHAPE block factor = ceil(weights / R): R words
        memories += (Memory(1, r, math.ceil(w.weight_bits / r)),) if w.weight_bits else ()
    else:
        lut += math.ceil(w.weight_bits / LUT6_BITS)
    ff += sum(m.register_bits for m in memories)
    lut += sum(m.srl_luts + m.lutram_luts for m in memories)
    depth = (2 + math.ceil(math.log2(max(w.taps, 1)))) if w.mults else (1 if w.steps else 0)
    ii = w.steps * r
    return LayerEstimate(
        node=lw.node, op=lw.op, reuse=r, blocks=lw.blocks, macs=lw.full_macs,
        mults=w.mults,
        multipliers=n, mult_kind=mult_kind, dsp=dsp, lut=lut, ff=ff,
        bram18=sum(m.bram18 for m in memories), ii=ii * lw.blocks, latency=ii + depth + w.fill_steps * r, depth=depth,
        fill=w.fill_steps * r,
        cost_per_multiplier=dsp_per_mult if mult_kind == "dsp" else lut_per_mult + w.acc_bits)


def estimate(graph: Graph, part: Part, reuse: dict[str, int] | int = 1, io_type: str = "io_parallel",
             strategy: str = "latency", grid: tuple[int, ...] | None = None, clock_ns: float = 5.0,
             utilization: float = 0.8, plan: Plan | None = None, works: list[LayerWork] | None = None) -> Design:
    """The design estimate for the given reuse factors (one for all layers, or per node
    name), unpartitioned or on a block grid (an overlapped-tile plan up to the cut
    ``tessera compile`` makes, ``choose_cut``, or ``plan`` as given)."""
    if plan is None and grid is not None and int(np.prod(grid)) > 1:
        plan = plan_overlapped(graph, tuple(grid), choose_cut(graph, tuple(grid)))
    if plan is not None and len(plan.blocks) == 1:
        plan = None
    lws = works if works is not None else layer_works(graph, io_type, plan)
    d = Design(part, io_type, strategy, clock_ns, utilization, plan.grid if plan else None,
               redundant_fraction=plan.redundant_fraction if plan else 0.0, cut=plan.value if plan else None,
               segment_macs=sum(b.macs for b in plan.blocks) if plan else None, plan=plan)
    for lw in lws:
        r = reuse.get(lw.node, 1) if isinstance(reuse, dict) else reuse
        d.layers.append(layer_estimate(lw, r, io_type, strategy))
    return d


__all__ = ["Design", "IO_TYPES", "LUT_MULT_MAX_BITS", "LayerEstimate", "LayerWork", "RESOURCES", "STRATEGIES", "estimate",
           "layer_estimate", "layer_works", "mult_cost", "node_work"]
