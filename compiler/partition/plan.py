"""Overlapped-tile plans: a block grid over the spatial segment's output, what each block
reads and computes, and the grid for an on-chip memory budget.

Every number is derived from the spans of :mod:`.regions` with the same rules
:func:`.execute.run_block` executes, so the plan equals the executed schedule's counts
(tested): per block the MACs it computes (each op's own MAC rule on the local shapes it
runs), the input voxels it reads, its halo (read voxels outside its own share of the input,
the input divided by the same grid) and its peak working set (the largest layer input +
output, at the values' byte widths).  The redundant compute of the plan is the blocks' MACs
over the unpartitioned MACs, minus one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..ops import OPS
from .execute import SCATTER_OPS, WINDOW_OPS, _local_type, _no_pads, type_bytes
from .regions import SPAN_RULES, Span, input_span, required_spans


@dataclass
class BlockPlan:
    index: tuple[int, ...]
    block: Span
    input_span: Span
    macs: int
    input_voxels: int
    halo_voxels: int
    peak_bytes: int


class PlanTotals:
    """What both modes' plans report from their blocks (``macs``, ``peak_bytes`` each)."""

    @property
    def redundant_fraction(self) -> float:
        return sum(b.macs for b in self.blocks) / self.full_macs - 1.0 if self.full_macs else 0.0

    @property
    def max_block_bytes(self) -> int:
        return max(b.peak_bytes for b in self.blocks)


@dataclass
class Plan(PlanTotals):
    value: str  # the partitioned segment's output
    grid: tuple[int, ...]
    blocks: list[BlockPlan] = field(default_factory=list)
    full_macs: int = 0
    halo_bytes: int = 0


def segment_output(graph: Graph) -> str:
    """The last value of the leading spatial segment: the input of the first op that mixes
    positions (Flatten, Dense), or the graph output."""
    for node in graph.nodes:
        if node.op not in SPAN_RULES:
            if len(node.inputs) != 1:
                raise UnsupportedModelError(f"node '{node.name}' ({node.op}) ends the spatial segment with two inputs")
            return node.inputs[0]
    return graph.output


def grid_blocks(extent: tuple[int, ...], grid: tuple[int, ...]) -> list[tuple[tuple[int, ...], Span]]:
    """The blocks of ``grid`` over ``extent`` (sizes differ by at most one: any extent)."""
    if len(grid) != len(extent) or any(g < 1 for g in grid):
        raise UnsupportedModelError(f"grid {'x'.join(map(str, grid))} does not fit a {len(extent)}D volume")
    if any(g > n for g, n in zip(grid, extent)):
        raise UnsupportedModelError(f"grid {'x'.join(map(str, grid))} has more blocks than voxels ({'x'.join(map(str, extent))})")
    return [(idx, tuple((n * i // k, n * (i + 1) // k) for n, i, k in zip(extent, idx, grid)))
            for idx in np.ndindex(*grid)]


def _node_cost(graph: Graph, node, spans: dict[str, Span]) -> tuple[int, int]:
    """(MACs, working-set bytes) of one node on its output span: what run_block executes."""
    vol = lambda s: int(np.prod([b - a for a, b in s]))  # noqa: E731
    span = spans[node.output]
    out_t = graph.values[node.output]
    macs = 0
    if node.op in WINDOW_OPS or node.op in SCATTER_OPS:
        x_t = _local_type(graph.values[node.inputs[0]], tuple(b - a for a, b in input_span(node, span)))
        macs = OPS[node.op].macs(_no_pads(node), [x_t], _local_type(out_t, tuple(b - a for a, b in span)))
    nbytes = sum(vol(spans[v]) * graph.values[v].shape[0] * type_bytes(graph.values[v]) for v in node.inputs)
    return macs, nbytes + vol(span) * out_t.shape[0] * type_bytes(out_t)


def _block_costs(graph: Graph, spans: dict[str, Span]) -> tuple[int, int]:
    """(MACs, peak working-set bytes) of running the nodes whose outputs have spans."""
    costs = [_node_cost(graph, n, spans) for n in graph.nodes if n.output in spans]
    return sum(c[0] for c in costs), max(c[1] for c in costs)


def plan_overlapped(graph: Graph, grid: tuple[int, ...], value: str | None = None) -> Plan:
    value = value or segment_output(graph)
    extent = graph.values[value].shape[1:]
    x = graph.values[graph.input]
    plan = Plan(value, tuple(grid))
    full = required_spans(graph, value, tuple((0, n) for n in extent))
    plan.full_macs = _block_costs(graph, full)[0]
    own = dict(grid_blocks(x.shape[1:], grid))
    for idx, block in grid_blocks(extent, grid):
        spans = required_spans(graph, value, block)
        s_in = spans[graph.input]
        macs, peak = _block_costs(graph, spans)
        read = int(np.prod([b - a for a, b in s_in]))
        mine = own[idx]
        inter = int(np.prod([max(0, min(b, d) - max(a, c)) for (a, b), (c, d) in zip(s_in, mine)]))
        plan.blocks.append(BlockPlan(idx, block, s_in, macs, read, read - inter, peak))
    plan.halo_bytes = sum(b.halo_voxels for b in plan.blocks) * x.shape[0] * type_bytes(x)
    return plan


def _grid_candidates(extent: tuple[int, ...], max_blocks: int) -> list[tuple[int, ...]]:
    """Grids of 1, 2, 3 and powers of two blocks per dim (at most the extent), fewest blocks
    first, then the most even."""
    per_dim = [sorted({k for k in (1, 2, 3, *(2 ** i for i in range(2, 13))) if k <= n}) for n in extent]
    grids = [g for g in itertools.product(*per_dim) if np.prod(g) <= max_blocks]
    return sorted(grids, key=lambda g: (int(np.prod(g)), max(g) - min(g), g))


def grid_for_budget(graph: Graph, budget_bytes: int, mode: str = "overlap", max_blocks: int = 4096):
    """The plan (overlapped tiles, or halo exchange) with the fewest blocks, then the least
    redundant compute, whose every block's working set and the gathered tail's fit
    ``budget_bytes``; the segment is cut per grid (:func:`.specialise.choose_cut`).  A clear error naming the layer
    that needs more when even the finest grid does not fit."""
    from .exchange import plan_exchange
    from .specialise import choose_cut, tail_bytes

    planner = plan_overlapped if mode == "overlap" else plan_exchange
    best, frugal = None, None  # frugal: (need, plan, cut) of the grid needing the least
    for g in _grid_candidates(graph.values[graph.input].shape[1:], max_blocks):
        if best is not None and np.prod(g) > np.prod(best.grid):
            break
        try:
            cut = choose_cut(graph, g, mode)
            p = planner(graph, g, cut)
        except UnsupportedModelError:
            continue  # this grid cannot be carried through the layers: try the next
        need = max(p.max_block_bytes, tail_bytes(graph, cut))
        if frugal is None or need < frugal[0]:
            frugal = (need, p, cut)
        if need <= budget_bytes and (best is None or p.redundant_fraction < best.redundant_fraction):
            best = p
    if best is None:
        if frugal is None:
            raise UnsupportedModelError("no block grid can partition this model")
        need, p, cut = frugal
        grid_txt = "x".join(map(str, p.grid))
        if tail_bytes(graph, cut) > p.max_block_bytes:
            raise UnsupportedModelError(
                f"no block grid fits {budget_bytes} bytes: the best ({grid_txt}) still gathers {need} bytes for the "
                f"layers after '{graph.producer(cut).name}' (the unpartitioned tail)")
        worst = max(p.blocks, key=lambda b: b.peak_bytes)
        spans = required_spans(graph, p.value, worst.block)
        layer = max((n for n in graph.nodes if n.output in spans), key=lambda n: _node_cost(graph, n, spans)[1])
        raise UnsupportedModelError(
            f"no block grid fits {budget_bytes} bytes: the most frugal ({grid_txt}) needs {need} bytes, most at "
            f"layer '{layer.name}' ({layer.op})")
    return best


__all__ = ["BlockPlan", "Plan", "grid_blocks", "grid_for_budget", "plan_overlapped", "segment_output"]
