"""The typed graph the compiler works on: single input, single output, ops in topological order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .types import TensorType


@dataclass
class Node:
    """One op application: ``output = op(inputs...)`` with op-specific ``attrs`` (a dataclass)."""

    name: str
    op: str
    inputs: list[str]
    output: str
    attrs: Any


@dataclass
class Graph:
    """Values are named tensors with types; nodes are kept in topological order."""

    input: str
    output: str
    values: dict[str, TensorType] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    #: The graph input's float-to-code quantizer (the model's input Quant node).
    input_quant: Any = None
    #: The original ONNX input/output names and shapes (batch included) for the user.
    onnx_input: str = "x"
    onnx_output: str = "y"
    #: IR value -> the name of the ONNX node whose (first) output it is: where the
    #: independent executor's values are compared with ours, node by node.
    origin: dict[str, str] = field(default_factory=dict)

    def type_of(self, value: str) -> TensorType:
        return self.values[value]

    def producer(self, value: str) -> Node | None:
        for node in self.nodes:
            if node.output == value:
                return node
        return None

    def consumers(self, value: str) -> list[Node]:
        return [n for n in self.nodes if value in n.inputs]
