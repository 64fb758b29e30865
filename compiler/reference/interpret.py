"""Run the IR with each op's numpy integer semantics (the definition the others must equal)."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, pack
from ..ops import OPS


def widen(ranges: dict[str, tuple[int, int]], value: str, codes: np.ndarray) -> None:
    """Widen ``ranges[value]``, the (min, max) code seen so far, by ``codes`` (none: unchanged)."""
    if codes.size == 0:
        return
    lo, hi = int(codes.min()), int(codes.max())
    if value in ranges:
        lo, hi = min(lo, ranges[value][0]), max(hi, ranges[value][1])
    ranges[value] = (lo, hi)


def run_ir(graph: Graph, codes: np.ndarray, keep: set[str] | None = None,
           ranges: dict[str, tuple[int, int]] | None = None) -> np.ndarray | dict[str, np.ndarray]:
    """The output codes of ``graph`` on input ``codes`` (packed: ``ir.graph.pack``); with
    ``keep``, a dict of the codes of those values (and the outputs) instead.  With ``ranges``,
    each input's and node output's (min, max) code on these samples is widened into it as the
    value is computed (no array is kept for it)."""
    env = {v: np.asarray(c, dtype=np.int64) for v, c in zip(graph.inputs, graph.split_inputs(codes))}
    if ranges is not None:
        for v in graph.inputs:
            widen(ranges, v, env[v])
    outputs = set(graph.outputs)
    kept = {v: env[v] for v in graph.inputs if keep is not None and v in keep}
    last = {v: i for i, node in enumerate(graph.nodes) for v in node.inputs}
    for i, node in enumerate(graph.nodes):
        ins = [graph.values[v] for v in node.inputs]
        env[node.output] = OPS[node.op].semantics(node.attrs, [env[v] for v in node.inputs], ins, graph.values[node.output])
        if ranges is not None:
            widen(ranges, node.output, env[node.output])
        if keep is not None and node.output in keep:
            kept[node.output] = env[node.output]
        for v in set(node.inputs):  # a value no later node reads is released
            if last[v] == i and v not in outputs:
                del env[v]
    if keep is None:
        return pack([env[v] for v in graph.outputs])
    kept.update((v, env[v]) for v in graph.outputs)
    return kept
