"""Overlapped-tile execution: one output block of a graph segment computed from the input
region it reads (its block plus the accumulated halo), with the integer reference of each
op on local arrays.  Bit-identical to the unpartitioned run by construction, and tested so.

Each op runs on exactly the input span it needs (:func:`.regions.input_span`), zero-filled
where that span leaves the volume (the op's own zero padding), with its padding set to 0:
window ops (conv, pools) then yield exactly the output span; transposed convolutions and
upsampling yield a larger local output that is cropped.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph, Node
from ..ir.types import TensorType
from ..ops import OPS
from .regions import Span, input_span, required_spans

WINDOW_OPS = {"conv", "maxpool", "avgpool"}
SCATTER_OPS = {"convtranspose", "upsample"}


def _local_type(t: TensorType, spatial: tuple[int, ...]) -> TensorType:
    return TensorType((t.shape[0], *spatial), t.ftype, t.lo, t.hi)


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


def _no_pads(node: Node):
    a = node.attrs
    if node.op == "avgpool" and not a.count_include_pad and any(a.pads):
        raise UnsupportedModelError(
            f"node '{node.name}' (avgpool): a padded average that excludes the padding from its divisor cannot be tiled")
    return dataclasses.replace(a, pads=(0,) * len(a.pads)) if hasattr(a, "pads") else a


def _run_node(graph: Graph, node: Node, local: dict, span: Span, stats: dict | None = None) -> np.ndarray:
    out_t = graph.values[node.output]
    ins_t = [graph.values[v] for v in node.inputs]
    if node.op in WINDOW_OPS or node.op in SCATTER_OPS:
        need = input_span(node, span)
        data, have = local[node.inputs[0]]
        x = _gather(data, have, need)
        attrs = _no_pads(node)
        x_t = _local_type(ins_t[0], x.shape[2:])
        if stats is not None:
            y_t = _local_type(out_t, tuple(b - a for a, b in span))
            stats["macs"] = stats.get("macs", 0) + OPS[node.op].macs(attrs, [x_t], y_t)
        if node.op in WINDOW_OPS:
            return OPS[node.op].reference(attrs, [x], [x_t], _local_type(out_t, tuple(b - a for a, b in span)))
        y = OPS[node.op].reference(attrs, [x], [x_t], _local_type(out_t, (0,) * len(span)))
        if node.op == "upsample":
            origin = [lo * f for (lo, _), f in zip(need, node.attrs.factors)]
        else:  # convtranspose: local output index 0 is global need * stride - pad
            origin = [lo * s - p for (lo, _), s, p in zip(need, node.attrs.strides, node.attrs.pads)]
        crop = tuple(slice(a - o, b - o) for (a, b), o in zip(span, origin))
        return y[(slice(None), slice(None)) + crop]
    xs = [_gather(*local[v], span) for v in node.inputs]
    return OPS[node.op].reference(node.attrs, xs, [_local_type(t, x.shape[2:]) for t, x in zip(ins_t, xs)],
                                  _local_type(out_t, tuple(b - a for a, b in span)))


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
            y = _run_node(graph, node, local, spans[node.output], stats)
            local[node.output] = (y, spans[node.output])
            if stats is not None:
                arrays = [(local[v][0], graph.values[v]) for v in node.inputs] + [(y, graph.values[node.output])]
                ws = sum(int(np.prod(a.shape[1:])) * type_bytes(t) for a, t in arrays)
                stats["peak_bytes"] = max(stats.get("peak_bytes", 0), ws)
        if node.output == value:
            break
    return local[value][0]


def type_bytes(t: TensorType) -> int:
    """Bytes per element of a value held on chip: its fixed-point width rounded up to bytes."""
    return (t.ftype.width + 7) // 8
