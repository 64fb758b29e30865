"""Overlapped-tile execution: one output block of a graph segment computed from the input
region it reads (its block plus the accumulated halo), with the integer semantics of each
op on local arrays.  Bit-identical to the unpartitioned run by construction, and tested so.

Each op runs on exactly the input span it needs (:func:`.regions.input_span`), zero-filled
where that span leaves the volume (the op's own zero padding), with its padding set to 0:
window ops (conv, pools) then yield exactly the output span; scatter ops (transposed
convolutions, upsampling) yield a larger local output that is cropped.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph, Node
from ..ir.types import TensorType
from ..ops import OPS, Trait
from .regions import Span, input_span, required_spans


def local_type(t: TensorType, spatial: tuple[int, ...]) -> TensorType:
    """``t`` on a block of ``spatial`` extent (same type and code range)."""
    return TensorType((t.shape[0], *spatial), t.ftype, t.lo, t.hi)


def type_bytes(t: TensorType) -> int:
    """Bytes per element of a value held on chip: its fixed-point width rounded up to bytes."""
    return (t.ftype.width + 7) // 8


def reads_neighbours(node: Node) -> bool:
    """Whether the node's output pixels read more than their own position (window, scatter)."""
    return bool(OPS[node.op].traits & {Trait.WINDOW, Trait.SCATTER})


def refuse_untileable(node: Node) -> None:
    """Refuse an op whose padding a block may not replace (e.g. an average whose divisor
    excludes the padding)."""
    reason = OPS[node.op].tiling_refusal(node.attrs)
    if reason is not None:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op}): {reason}")


def unpadded(node: Node, rank: int):
    """The node's attributes with its padding removed (the local input holds it, zero-filled)."""
    refuse_untileable(node)
    return OPS[node.op].with_pads(node.attrs, (0,) * (2 * rank))


def _gather(data: np.ndarray, have: Span, want: Span) -> np.ndarray:
    """``data`` (N, C, *span ``have``) re-cut to span ``want``, zeros outside ``have``."""
    out = np.zeros((*data.shape[:2], *(b - a for a, b in want)), dtype=data.dtype)
    src, dst = [slice(None)] * 2, [slice(None)] * 2
    for (ha, hb), (wa, wb) in zip(have, want):
        lo, hi = max(ha, wa), min(hb, wb)
        if lo >= hi:
            return out
        src.append(slice(lo - ha, hi - ha))
        dst.append(slice(lo - wa, hi - wa))
    out[tuple(dst)] = data[tuple(src)]
    return out


def run_node(graph: Graph, node: Node, local: dict, span: Span, stats: dict | None = None) -> np.ndarray:
    """``node``'s output codes on ``span`` from the local arrays ``local`` (value -> (array,
    its span)); ``stats['macs']`` counts the MACs it ran."""
    op = OPS[node.op]
    out_t = graph.values[node.output]
    ins_t = [graph.values[v] for v in node.inputs]
    size = tuple(b - a for a, b in span)
    if reads_neighbours(node):
        need = input_span(node, span)
        data, have = local[node.inputs[0]]
        x = _gather(data, have, need)
        attrs = unpadded(node, len(span))
        x_t = local_type(ins_t[0], x.shape[2:])
        if stats is not None:
            stats["macs"] = stats.get("macs", 0) + op.macs(attrs, [x_t], local_type(out_t, size))
        if Trait.WINDOW in op.traits:
            return op.semantics(attrs, [x], [x_t], local_type(out_t, size))
        y = op.semantics(attrs, [x], [x_t], local_type(out_t, (0,) * len(span)))
        origin = op.scatter_origin(node.attrs, need)
        crop = tuple(slice(a - o, b - o) for (a, b), o in zip(span, origin))
        return y[(slice(None), slice(None)) + crop]
    xs = [_gather(*local[v], span) for v in node.inputs]
    return op.semantics(node.attrs, xs, [local_type(t, x.shape[2:]) for t, x in zip(ins_t, xs)], local_type(out_t, size))


def run_block(graph: Graph, value: str, block: Span, x: np.ndarray, stats: dict | None = None) -> np.ndarray:
    """Codes of ``value`` on ``block`` (clipped to the volume), computed only from the input
    span the block reads; ``x``: full input codes ``(N, C, D, H, W)``.  ``stats``, when
    given, receives what the execution did: ``macs`` (per sample, counted by each op's own
    rule on the local shapes it ran), ``input_voxels`` read and ``peak_bytes`` (the largest
    layer working set: its local input and output arrays at their types' byte widths)."""
    spans = required_spans(graph, value, block)
    if graph.input not in spans:
        raise UnsupportedModelError(f"value '{value}' does not depend on the graph input")
    local = {graph.input: (_gather(x, tuple((0, n) for n in x.shape[2:]), spans[graph.input]), spans[graph.input])}
    if stats is not None:
        stats["input_voxels"] = int(np.prod([b - a for a, b in spans[graph.input]]))
    for node in graph.nodes:
        if node.output in spans:
            y = run_node(graph, node, local, spans[node.output], stats)
            local[node.output] = (y, spans[node.output])
            if stats is not None:
                arrays = [(local[v][0], graph.values[v]) for v in node.inputs] + [(y, graph.values[node.output])]
                ws = sum(int(np.prod(a.shape[1:])) * type_bytes(t) for a, t in arrays)
                stats["peak_bytes"] = max(stats.get("peak_bytes", 0), ws)
        if node.output == value:
            break
    return local[value][0]


__all__ = ["local_type", "reads_neighbours", "refuse_untileable", "run_block", "run_node", "type_bytes", "unpadded"]
