"""Which input voxels an output block reads, through a DAG of 3D CNN layers.

A *span* is a half-open box ``((a0, b0), (a1, b1), ...)`` over a value's spatial dims
(``(C, D, H, W)`` -> ``(D, H, W)``).  Each spatial op maps the span of its output to the span
of its input that it reads (``OpDef.input_span``, from the per-dimension rules of
:mod:`..exact.spans`, unclipped: indices outside ``[0, size)`` are the op's zero padding);
:func:`required_spans` walks the graph backwards from one value and returns, for every value
it depends on, the bounding box of all that is read (clipped to the value's extent).  A
block's halo is its required input span minus its own part.

This is the one definition of halo arithmetic: the partition planner and the training
companion's spatial sharding (``training/``) both use it.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph, Node
from ..ops import OPS
from ..exact.spans import Span, transposed_input, upsample_input, window_input


def input_span(node: Node, span: Span) -> Span:
    """The (unclipped) span of ``node``'s inputs that its output ``span`` reads."""
    op = OPS[node.op]
    if not op.spatial:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op}) mixes spatial positions and cannot be partitioned")
    return op.input_span(node.attrs, span)


def clip(span: Span, extent: tuple[int, ...]) -> Span:
    """``span`` within ``[0, extent)`` per dim (possibly empty)."""
    return tuple((max(a, 0), min(b, n)) for (a, b), n in zip(span, extent))


def _clip_nonempty(span: Span, extent: tuple[int, ...]) -> Span | None:
    out = clip(span, extent)
    return None if any(lo >= hi for lo, hi in out) else out


def _union(a: Span | None, b: Span | None) -> Span | None:
    if a is None:
        return b
    if b is None:
        return a
    return tuple((min(x[0], y[0]), max(x[1], y[1])) for x, y in zip(a, b))


def required_spans(graph: Graph, value: str, span: Span) -> dict[str, Span]:
    """For ``span`` of ``value``: the clipped bounding box read from every value it depends
    on (``value`` itself included); values that nothing in the span reads are absent."""
    extent = lambda v: graph.values[v].shape[1:]  # noqa: E731
    need: dict[str, Span | None] = {value: _clip_nonempty(span, extent(value))}
    order = {n.output: i for i, n in enumerate(graph.nodes)}
    for node in sorted((n for n in graph.nodes if n.output in order), key=lambda n: -order[n.output]):
        out_span = need.get(node.output)
        if out_span is None:
            continue
        in_span = input_span(node, out_span)
        for v in node.inputs:
            need[v] = _union(need.get(v), _clip_nonempty(in_span, extent(v)))
    return {v: s for v, s in need.items() if s is not None}


def grid_blocks(extent: tuple[int, ...], grid: tuple[int, ...]) -> list[tuple[tuple[int, ...], Span]]:
    """The blocks of ``grid`` over ``extent`` (sizes differ by at most one: any extent)."""
    if len(grid) != len(extent) or any(g < 1 for g in grid):
        raise UnsupportedModelError(f"grid {'x'.join(map(str, grid))} does not fit a {len(extent)}D volume")
    if any(g > n for g, n in zip(grid, extent)):
        raise UnsupportedModelError(f"grid {'x'.join(map(str, grid))} has more blocks than voxels ({'x'.join(map(str, extent))})")
    return [(idx, tuple((n * i // k, n * (i + 1) // k) for n, i, k in zip(extent, idx, grid)))
            for idx in np.ndindex(*grid)]


__all__ = ["Span", "clip", "grid_blocks", "input_span", "required_spans", "transposed_input", "upsample_input",
           "window_input"]
