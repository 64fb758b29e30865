"""Overlapped-tile plans: a block grid over the spatial segment's output, what each block
reads and computes (the grid for a budget and the cut: :mod:`.choose`).

Every number is derived from the spans of :mod:`.regions` with the same rules
:func:`.execute.run_block` executes, so the plan equals the executed schedule's counts
(tested): per block the MACs it computes (each op's own MAC rule on the local shapes it
runs), the input voxels it reads, its halo (read voxels outside its own share of the input,
the input divided by the same grid) and its peak working set (the largest layer input +
output, at the values' byte widths).  The redundant compute of the plan is the blocks' MACs
over the unpartitioned MACs, minus one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..ops import OPS
from .execute import local_type, reads_neighbours, type_bytes, unpadded
from .regions import Span, grid_blocks, input_span, required_spans


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
        if not OPS[node.op].spatial:
            if len(node.inputs) != 1:
                raise UnsupportedModelError(f"node '{node.name}' ({node.op}) ends the spatial segment with two inputs")
            return node.inputs[0]
    return graph.output


def node_cost(graph: Graph, node, spans: dict[str, Span]) -> tuple[int, int]:
    """(MACs, working-set bytes) of one node on its output span: what run_block executes."""
    vol = lambda s: int(np.prod([b - a for a, b in s]))  # noqa: E731
    span = spans[node.output]
    out_t = graph.values[node.output]
    macs = 0
    if reads_neighbours(node):
        x_t = local_type(graph.values[node.inputs[0]], tuple(b - a for a, b in input_span(node, span)))
        macs = OPS[node.op].macs(unpadded(node, len(span)), [x_t], local_type(out_t, tuple(b - a for a, b in span)))
    nbytes = sum(vol(spans[v]) * graph.values[v].shape[0] * type_bytes(graph.values[v]) for v in node.inputs)
    return macs, nbytes + vol(span) * out_t.shape[0] * type_bytes(out_t)


def _block_costs(graph: Graph, spans: dict[str, Span]) -> tuple[int, int]:
    """(MACs, peak working-set bytes) of running the nodes whose outputs have spans."""
    costs = [node_cost(graph, n, spans) for n in graph.nodes if n.output in spans]
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


__all__ = ["BlockPlan", "Plan", "PlanTotals", "node_cost", "plan_overlapped", "segment_output"]
