"""Run the IR with each op's numpy integer semantics (the definition the others must equal)."""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph
from ..ops import OPS


def run_ir(graph: Graph, codes: np.ndarray) -> np.ndarray:
    env = {graph.input: np.asarray(codes, dtype=np.int64)}
    for node in graph.nodes:
        ins = [graph.values[v] for v in node.inputs]
        env[node.output] = OPS[node.op].reference(node.attrs, [env[v] for v in node.inputs], ins, graph.values[node.output])
    return env[graph.output]
