"""Precision inference: every value's fixed-point type and code range, input to output."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph


@dataclass(frozen=True)
class InferTypes:
    name: str = "infer-types"

    def apply(self, graph: Graph):
        from . import PassResult
        from ..ops import OPS

        before = dict(graph.values)
        for node in graph.nodes:
            ins = [graph.values[v] for v in node.inputs]
            graph.values[node.output] = OPS[node.op].infer(node.attrs, ins, node.name)
        return PassResult(graph, graph.values != before)
