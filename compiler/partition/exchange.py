"""Per-layer halo exchange: every block owns one box of every value of the spatial segment
and, before each layer, receives from its neighbours the halo its own output box reads
(as multi-device spatial parallelism does; papers 1-2).  Nothing is computed twice.

Ownership is aligned with the layers: the blocks of the segment's output are the grid's
(sizes differ by at most one), and each value's boundaries follow from its consumers' by
their strides (a window op with stride s: boundary b -> b*s; a transposed convolution or
upsampling by f: b -> b/f, which must be an integer; elementwise ops and merges keep it),
so a block owns the inputs of the windows that start in its output box.  A grid whose
boundaries cannot be carried through a layer (an upsampling boundary that is not a multiple
of its factor; two consumers that disagree; a block left without voxels) is refused with an
error naming that layer.

The plan (halo voxels and bytes received, MACs, per-block on-chip bytes) is counted from
the same spans the execution (:func:`run_exchange`) uses, and tested equal to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..ops import OPS, Trait
from .execute import reads_neighbours, run_node, type_bytes
from .plan import PlanTotals, node_cost
from .regions import Span, clip, input_span

Boundaries = tuple[tuple[int, ...], ...]  # per dim: 0 = b0 < b1 < ... < bk = extent


def _grid_boundaries(extent: tuple[int, ...], grid: tuple[int, ...]) -> Boundaries:
    return tuple(tuple(n * i // k for i in range(k + 1)) for n, k in zip(extent, grid))


def _carry(node, bounds: Boundaries, extent: tuple[int, ...], grid_txt: str) -> Boundaries:
    """Boundaries of ``node``'s input from those of its output."""
    op = OPS[node.op]
    out = []
    for d, bs in enumerate(bounds):
        inner = bs[1:-1]
        if Trait.WINDOW in op.traits:
            s = op.spatial_stride(node.attrs)[d]
            inner = tuple(b * s for b in inner)
        elif Trait.SCATTER in op.traits:
            f = op.spatial_stride(node.attrs)[d]
            bad = [b for b in inner if b % f]
            if bad:
                raise UnsupportedModelError(
                    f"grid {grid_txt} breaks the alignment of layer '{node.name}' ({node.op}, factor {f}): a block "
                    f"boundary at {bad[0]} along dim {d} is not a multiple of {f}")
            inner = tuple(b // f for b in inner)
        out.append((0, *inner, extent[d]))
    return tuple(out)


def ownership(graph: Graph, value: str, grid: tuple[int, ...]) -> dict[str, Boundaries]:
    """Block boundaries of every value ``value`` depends on within the segment."""
    grid_txt = "x".join(map(str, grid))
    extent = lambda v: graph.values[v].shape[1:]  # noqa: E731
    if any(k > n for k, n in zip(grid, extent(value))):
        raise UnsupportedModelError(f"grid {grid_txt} has more blocks than voxels ({'x'.join(map(str, extent(value)))})")
    own: dict[str, Boundaries] = {value: _grid_boundaries(extent(value), grid)}
    order = {n.output: i for i, n in enumerate(graph.nodes)}
    stop = order[value]
    for node in sorted((n for n in graph.nodes if order[n.output] <= stop), key=lambda n: -order[n.output]):
        if node.output not in own:
            continue
        for v in node.inputs:
            b = _carry(node, own[node.output], extent(v), grid_txt)
            for d, bs in enumerate(b):
                if any(lo >= hi for lo, hi in zip(bs, bs[1:])):
                    raise UnsupportedModelError(
                        f"grid {grid_txt} leaves a block without voxels along dim {d} at the input of layer "
                        f"'{node.name}' ({node.op}, {'x'.join(map(str, extent(v)))})")
            if v in own and own[v] != b:
                raise UnsupportedModelError(
                    f"grid {grid_txt}: layer '{node.name}' ({node.op}) needs block boundaries {b} on '{v}', another "
                    f"consumer needs {own[v]}")
            own[v] = b
    return own


def block_box(bounds: Boundaries, idx: tuple[int, ...]) -> Span:
    return tuple((bs[i], bs[i + 1]) for bs, i in zip(bounds, idx))


def _vox(span: Span) -> int:
    return int(np.prod([b - a for a, b in span]))


def _overlap(a: Span, b: Span) -> int:
    return int(np.prod([max(0, min(y, w) - max(x, v)) for (x, y), (v, w) in zip(a, b)]))


def tile(graph: Graph, node, out_box: Span) -> list[Span]:
    """Per input of ``node``: the region a block reads for its output box (own part + halo)."""
    if reads_neighbours(node):
        need = input_span(node, out_box)
        return [clip(need, graph.values[v].shape[1:]) for v in node.inputs]
    return [out_box for _ in node.inputs]


@dataclass
class ExchangeBlock:
    index: tuple[int, ...]
    block: Span  # its box of the segment output
    macs: int = 0
    halo_voxels: int = 0  # received from neighbours, summed over layers
    halo_bytes: int = 0
    peak_bytes: int = 0  # the largest layer's tile(s) + own output box


@dataclass
class ExchangePlan(PlanTotals):
    value: str
    grid: tuple[int, ...]
    blocks: list[ExchangeBlock] = field(default_factory=list)
    full_macs: int = 0

    @property
    def halo_bytes(self) -> int:
        return sum(b.halo_bytes for b in self.blocks)


def _segment_nodes(graph: Graph, value: str, own: dict) -> list:
    nodes = []
    for n in graph.nodes:
        if n.output in own:
            nodes.append(n)
        if n.output == value:
            break
    return nodes


def plan_exchange(graph: Graph, grid: tuple[int, ...], value: str) -> ExchangePlan:
    own = ownership(graph, value, grid)
    nodes = _segment_nodes(graph, value, own)
    plan = ExchangePlan(value, tuple(grid))
    whole = {v: tuple((0, n) for n in graph.values[v].shape[1:]) for v in own}
    plan.full_macs = sum(node_cost(graph, n, whole)[0] for n in nodes)
    for idx in np.ndindex(*grid):
        eb = ExchangeBlock(idx, block_box(own[value], idx))
        for n in nodes:
            out_box = block_box(own[n.output], idx)
            tiles = tile(graph, n, out_box)
            spans = {n.output: out_box}
            spans.update({v: t for v, t in zip(n.inputs, tiles)})
            macs, nbytes = node_cost(graph, n, spans)
            if len(set(n.inputs)) < len(n.inputs):  # x + x: one tile held once
                nbytes -= _vox(tiles[0]) * graph.values[n.inputs[0]].shape[0] * type_bytes(graph.values[n.inputs[0]])
            eb.macs += macs
            eb.peak_bytes = max(eb.peak_bytes, nbytes)
            for v, t in dict(zip(n.inputs, tiles)).items():
                halo = _vox(t) - _overlap(t, block_box(own[v], idx))
                eb.halo_voxels += halo
                eb.halo_bytes += halo * graph.values[v].shape[0] * type_bytes(graph.values[v])
        plan.blocks.append(eb)
    return plan


def run_exchange(graph: Graph, value: str, grid: tuple[int, ...], x: np.ndarray,
                 stats: dict | None = None, layer_fn=None) -> np.ndarray:
    """Codes of ``value`` computed layer by layer, each block from its own boxes plus the
    halo it receives from the blocks that own it.  ``layer_fn(node, items)``, with items
    ``[(idx, local, out_box)]`` (``local``: input value -> (array, span)), returns every
    block's output box of one layer (default: the integer reference per block); ``stats``
    receives per block (keyed by index) the MACs, halo voxels received and peak bytes that
    the execution moved."""
    own = ownership(graph, value, grid)
    nodes = _segment_nodes(graph, value, own)
    blocks = list(np.ndindex(*grid))
    # every value is held only as its owners' boxes
    held: dict[str, dict] = {graph.input: {}}
    for idx in blocks:
        box = block_box(own[graph.input], idx)
        held[graph.input][idx] = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in box)]

    def assemble(v: str, want: Span, idx) -> tuple[np.ndarray, int]:
        """``want`` of ``v`` gathered from its owners, and the voxels received from others."""
        t = graph.values[v]
        buf = np.zeros((len(x), t.shape[0], *(b - a for a, b in want)), dtype=np.int64)
        received = 0
        for j in blocks:
            box = block_box(own[v], j)
            inter = tuple((max(a, c), min(b, d)) for (a, b), (c, d) in zip(box, want))
            if any(lo >= hi for lo, hi in inter):
                continue
            src = tuple(slice(lo - a, hi - a) for (lo, hi), (a, _) in zip(inter, box))
            dst = tuple(slice(lo - c, hi - c) for (lo, hi), (c, _) in zip(inter, want))
            buf[(slice(None), slice(None)) + dst] = held[v][j][(slice(None), slice(None)) + src]
            if j != idx:
                received += _vox(inter)
        return buf, received

    uses = {}
    for n in nodes:
        for v in set(n.inputs):
            uses[v] = uses.get(v, 0) + 1
    for n in nodes:
        items, moved = [], []
        for idx in blocks:
            out_box = block_box(own[n.output], idx)
            local, received, rbytes, nbytes = {}, 0, 0, 0
            for v, t in zip(n.inputs, tile(graph, n, out_box)):
                if v not in local:  # x + x: one tile
                    buf, got = assemble(v, t, idx)
                    local[v] = (buf, t)
                    per_voxel = graph.values[v].shape[0] * type_bytes(graph.values[v])
                    received += got
                    rbytes += got * per_voxel
                    nbytes += _vox(t) * per_voxel
            items.append((idx, local, out_box))
            moved.append((received, rbytes, nbytes))
        if layer_fn is not None:
            outs = layer_fn(n, items)
        else:
            outs = [run_node(graph, n, local, out_box,
                              None if stats is None else stats.setdefault(idx, {"macs": 0, "halo_voxels": 0, "peak_bytes": 0}))
                    for idx, local, out_box in items]
        held[n.output] = {}
        for (idx, _, _), (received, rbytes, nbytes), y in zip(items, moved, outs):
            if stats is not None:
                st = stats.setdefault(idx, {})
                for k in ("macs", "halo_voxels", "peak_bytes"):
                    st.setdefault(k, 0)
                st["halo_voxels"] += received
                st["halo_bytes"] = st.get("halo_bytes", 0) + rbytes
                st["peak_bytes"] = max(st["peak_bytes"], nbytes + int(np.prod(y.shape[1:])) * type_bytes(graph.values[n.output]))
            held[n.output][idx] = y
        for v in set(n.inputs):  # a value no later layer reads is dropped
            uses[v] -= 1
            if uses[v] == 0 and v != value:
                del held[v]
    out = np.zeros((len(x), *graph.values[value].shape), dtype=np.int64)
    for idx in blocks:
        box = block_box(own[value], idx)
        out[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in box)] = held[value][idx]
    return out


__all__ = ["ExchangeBlock", "ExchangePlan", "block_box", "ownership", "plan_exchange", "run_exchange", "tile"]
