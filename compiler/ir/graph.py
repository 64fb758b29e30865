"""The typed graph the compiler works on: single input, single output, ops in topological order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .meaning import CodeScale, InputMap
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
    #: values whose codes are not fixed point: real = (code - zero) * scale (ir.meaning)
    scales: dict[str, CodeScale] = field(default_factory=dict)
    #: the input's quantizer on real data when it is not ``input_quant``'s fixed point
    input_map: InputMap | None = None
    #: a trailing Softmax the design stops before (its name): the output is its logits
    softmax: str | None = None
    #: the declared type of a float input no Quant reads (``--input-type``), as given
    input_type: str | None = None
    #: the model file's input shape (batch excluded) when the design's input is its reshape
    model_input_shape: tuple[int, ...] | None = None

    def real(self, value: str, codes: np.ndarray) -> np.ndarray:
        """float64 real values (the user's model's) of a value's int codes ``(N, *shape)``."""
        cs = self.scales.get(value)
        if cs is None:
            return np.ldexp(np.asarray(codes, dtype=np.float64), -self.values[value].ftype.frac)
        return cs.real(codes, self.values[value].shape)

    def input_real(self, codes: np.ndarray) -> np.ndarray:
        """A real input per input code: the centre of the values the input's quantizer maps to it."""
        if self.input_map is None:
            return np.ldexp(np.asarray(codes, dtype=np.float64), -self.values[self.input].ftype.frac)
        return self.input_map.centers(codes)

    def type_of(self, value: str) -> TensorType:
        return self.values[value]

    def producer(self, value: str) -> Node | None:
        for node in self.nodes:
            if node.output == value:
                return node
        return None

    def consumers(self, value: str) -> list[Node]:
        return [n for n in self.nodes if value in n.inputs]
