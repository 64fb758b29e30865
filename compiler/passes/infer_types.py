"""Precision inference: every value's fixed-point type and code range, input to output."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UnsupportedModelError, first_line
from ..ir.graph import Graph
from ..ir.types import MAX_ELEMENTS
from ..ops import OPS
from .manager import PassResult


@dataclass(frozen=True)
class InferTypes:
    name: str = "infer-types"

    def apply(self, graph: Graph) -> PassResult:
        before = dict(graph.values)
        for node in graph.nodes:
            ins = [graph.values[v] for v in node.inputs]
            try:
                graph.values[node.output] = OPS[node.op].infer(node.attrs, ins, node.name)
            except (ValueError, IndexError, TypeError, ArithmeticError) as exc:
                raise UnsupportedModelError(f"node '{node.name}' ({node.op}): inconsistent shapes or values: "
                                            f"{first_line(exc)}") from None
            shape = graph.values[node.output].shape
            if math.prod(shape) > MAX_ELEMENTS:
                raise UnsupportedModelError(f"node '{node.name}' ({node.op}): output shape {list(shape)} has "
                                            f"{math.prod(shape):,} elements, more than the {MAX_ELEMENTS:,} a design can index")
        return PassResult(graph, graph.values != before)
