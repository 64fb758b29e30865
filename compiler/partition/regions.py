"""Which input voxels an output block reads, through a DAG of 3D CNN layers.

A *span* is a half-open box ``((a0, b0), (a1, b1), ...)`` over a value's spatial dims
(``(C, D, H, W)`` -> ``(D, H, W)``).  :func:`input_span` maps the span of an op's output to
the span of its input that the op reads for it (unclipped: indices outside ``[0, size)``
are the op's zero padding); :func:`required_spans` walks the graph backwards from one value
and returns, for every value it depends on, the bounding box of all that is read (clipped
to the value's extent).  A block's halo is its required input span minus its own part.

One registry (:data:`SPAN_RULES`) holds the rule of each spatial op; elementwise ops and
merges map a span to itself.  This is the one definition of halo arithmetic: the partition
planner and the training companion's spatial sharding both use it.
"""

from __future__ import annotations

from typing import Callable

from ..errors import UnsupportedModelError
from ..ir.graph import Graph, Node

Span = tuple[tuple[int, int], ...]


# --- per-dimension rules: outputs [a, b) read inputs [lo, hi) (unclipped) ---------------

def window_input(a: int, b: int, k: int, s: int, p: int) -> tuple[int, int]:
    """Outputs [a, b) of a window op (kernel k, stride s, begin padding p) read inputs
    [a*s - p, (b-1)*s - p + k)."""
    return a * s - p, (b - 1) * s - p + k


def transposed_input(a: int, b: int, k: int, s: int, p: int) -> tuple[int, int]:
    """Outputs [a, b) of a transposed convolution: output o gathers inputs i with
    o + p - kk = i * s, kk in [0, k)."""
    return -((-(a + p - k + 1)) // s), (b - 1 + p) // s + 1


def upsample_input(a: int, b: int, f: int) -> tuple[int, int]:
    """Outputs [a, b) of nearest upsampling by f read inputs [a // f, (b-1) // f + 1)."""
    return a // f, (b - 1) // f + 1


def _conv(node: Node, span: Span) -> Span:
    a = node.attrs
    k = a.weight.shape[2:]
    return tuple(window_input(lo, hi, k[i], a.strides[i], a.pads[i]) for i, (lo, hi) in enumerate(span))


def _pool(node: Node, span: Span) -> Span:
    a = node.attrs
    pads = getattr(a, "pads", (0,) * (2 * len(a.kernel)))
    return tuple(window_input(lo, hi, a.kernel[i], a.strides[i], pads[i]) for i, (lo, hi) in enumerate(span))


def _convtranspose(node: Node, span: Span) -> Span:
    a = node.attrs
    k = a.weight.shape[2:]
    return tuple(transposed_input(lo, hi, k[i], a.strides[i], a.pads[i]) for i, (lo, hi) in enumerate(span))


def _upsample(node: Node, span: Span) -> Span:
    f = node.attrs.factors
    return tuple(upsample_input(lo, hi, f[i]) for i, (lo, hi) in enumerate(span))


def _same(node: Node, span: Span) -> Span:
    return span


#: op -> rule mapping an output span to the input span it reads (every input alike).
SPAN_RULES: dict[str, Callable[[Node, Span], Span]] = {
    "conv": _conv,
    "maxpool": _pool,
    "avgpool": _pool,
    "convtranspose": _convtranspose,
    "upsample": _upsample,
    "relu": _same,
    "leakyrelu": _same,
    "requant": _same,
    "lut": _same,
    "add": _same,
    "concat": _same,
}


def input_span(node: Node, span: Span) -> Span:
    rule = SPAN_RULES.get(node.op)
    if rule is None:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op}) mixes spatial positions and cannot be partitioned")
    return rule(node, span)


def _clip(span: Span, extent: tuple[int, ...]) -> Span | None:
    out = tuple((max(lo, 0), min(hi, n)) for (lo, hi), n in zip(span, extent))
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
    need: dict[str, Span | None] = {value: _clip(span, extent(value))}
    order = {n.output: i for i, n in enumerate(graph.nodes)}
    for node in sorted((n for n in graph.nodes if n.output in order), key=lambda n: -order[n.output]):
        out_span = need.get(node.output)
        if out_span is None:
            continue
        in_span = input_span(node, out_span)
        for v in node.inputs:
            need[v] = _union(need.get(v), _clip(in_span, extent(v)))
    return {v: s for v, s in need.items() if s is not None}
