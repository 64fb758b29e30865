"""Run the IR with each op's numpy integer semantics (the definition the others must equal)."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph
from ..ops import OPS


def run_ir(graph: Graph, codes: np.ndarray) -> np.ndarray:
    env = {graph.input: np.asarray(codes, dtype=np.int64)}
    last = {v: i for i, node in enumerate(graph.nodes) for v in node.inputs}
    for i, node in enumerate(graph.nodes):
        ins = [graph.values[v] for v in node.inputs]
        env[node.output] = OPS[node.op].semantics(node.attrs, [env[v] for v in node.inputs], ins, graph.values[node.output])
        for v in set(node.inputs):  # a value no later node reads is released
            if last[v] == i and v != graph.output:
                del env[v]
    return env[graph.output]
