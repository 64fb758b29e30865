"""Run the IR with each op's numpy integer semantics (the definition the others must equal)."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph
from ..ops import OPS


def run_ir(graph: Graph, codes: np.ndarray, keep: set[str] | None = None) -> np.ndarray | dict[str, np.ndarray]:
    """The output codes of ``graph`` on input ``codes``; with ``keep``, a dict of the codes of
    those values (and the output) instead."""
    env = {graph.input: np.asarray(codes, dtype=np.int64)}
    kept = {}
    last = {v: i for i, node in enumerate(graph.nodes) for v in node.inputs}
    if keep is not None and graph.input in keep:
        kept[graph.input] = env[graph.input]
    for i, node in enumerate(graph.nodes):
        ins = [graph.values[v] for v in node.inputs]
        env[node.output] = OPS[node.op].semantics(node.attrs, [env[v] for v in node.inputs], ins, graph.values[node.output])
        if keep is not None and node.output in keep:
            kept[node.output] = env[node.output]
        for v in set(node.inputs):  # a value no later node reads is released
            if last[v] == i and v != graph.output:
                del env[v]
    if keep is None:
        return env[graph.output]
    kept[graph.output] = env[graph.output]
    return kept
