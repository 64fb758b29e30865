"""The typed graph the compiler works on: its input and output ports, ops in topological order.

A design has one or several inputs and outputs (:class:`InputPort`, :class:`OutputPort`, in
the model file's order).  Where one array must carry every input (or output) of a sample --
the exact reference, the C-simulation's bridge, the testbench's rows -- the ports are
*packed*: one port is its own array ``(N, *shape)``; several are the flat concatenation of
each port's values in ONNX order, ``(N, sum of sizes)`` (:meth:`Graph.pack`,
:meth:`Graph.unpack`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UnsupportedModelError
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
class InputPort:
    """One design input: its IR value, the model file's input name, the float-to-code
    quantizer (the model's input Quant), its map on real data when that is not the
    quantizer's fixed point, and the file's input shape (batch excluded) when the design's
    input is its reshape."""

    value: str
    onnx_name: str = "x"
    quant: Any = None
    input_map: InputMap | None = None
    model_shape: tuple[int, ...] | None = None


@dataclass
class OutputPort:
    """One design output: its IR value and the model file's output name."""

    value: str
    onnx_name: str = "y"


def pack(arrays: list[np.ndarray]) -> np.ndarray:
    """Each port's ``(N, *shape)`` -> one array: the port itself, or several flattened side by side."""
    if len(arrays) == 1:
        return arrays[0]
    n = len(arrays[0])
    return np.concatenate([np.asarray(a).reshape(n, -1) for a in arrays], axis=1)


def unpack(packed: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """:func:`pack`'s inverse for ports of per-sample ``shapes``."""
    packed = np.asarray(packed)
    if len(shapes) == 1:
        return [packed]
    n, ends = len(packed), np.cumsum([0, *(int(np.prod(s)) for s in shapes)])
    flat = packed.reshape(n, -1)
    if flat.shape[1] != ends[-1]:
        raise ValueError(f"{flat.shape[1]} values per sample, the ports hold {ends[-1]}")
    return [flat[:, a:b].reshape(n, *s) for a, b, s in zip(ends[:-1], ends[1:], shapes)]


def packed_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The per-sample shape of :func:`pack`'s array."""
    return tuple(shapes[0]) if len(shapes) == 1 else (sum(int(np.prod(s)) for s in shapes),)


class Graph:
    """Values are named tensors with types; nodes are kept in topological order.  ``input`` /
    ``output`` (and the input port's fields) name the one port of a single-input or
    single-output design: asking them of a design with several is refused in one line."""

    def __init__(self, input: str = "", output: str = "", values: dict[str, TensorType] | None = None,
                 nodes: list[Node] | None = None, *, input_quant: Any = None, onnx_input: str = "x",
                 onnx_output: str = "y") -> None:
        self.input_ports: list[InputPort] = [InputPort(input, onnx_input, input_quant)] if input else []
        self.output_ports: list[OutputPort] = [OutputPort(output, onnx_output)] if output else []
        self.values: dict[str, TensorType] = {} if values is None else values
        self.nodes: list[Node] = [] if nodes is None else nodes
        #: IR value -> the name of the ONNX node whose (first) output it is: where the
        #: independent executor's values are compared with ours, node by node.
        self.origin: dict[str, str] = {}
        #: values whose codes are not fixed point: real = (code - zero) * scale (ir.meaning)
        self.scales: dict[str, CodeScale] = {}
        #: accumulators real constants act on before the op that reads them (a Quant's rescale,
        #: a table): their codes alone are no value of the user's model, so not compared with it
        self.in_flight: set[str] = set()
        #: a trailing Softmax the design stops before (its name): the output is its logits
        self.softmax: str | None = None
        #: the declared type of a float input no Quant reads (``--input-type``), as given
        self.input_type: str | None = None
        #: the model file's outputs that are constants (not computed from the input): not ports
        self.constant_outputs: list[str] = []

    # -- the ports ------------------------------------------------------------------------
    @property
    def inputs(self) -> list[str]:
        return [p.value for p in self.input_ports]

    @property
    def outputs(self) -> list[str]:
        return [p.value for p in self.output_ports]

    @staticmethod
    def _sole(ports: list, what: str):
        if len(ports) != 1:
            raise UnsupportedModelError(f"the design has {len(ports)} {what} ({', '.join(p.onnx_name for p in ports)}); "
                                        "this step handles one")
        return ports[0]

    def _sole_input(self) -> InputPort:
        return self._sole(self.input_ports, "inputs")

    def _sole_output(self) -> OutputPort:
        return self._sole(self.output_ports, "outputs")

    @property
    def input(self) -> str:
        return self._sole_input().value

    @input.setter
    def input(self, value: str) -> None:
        self._set_sole(self.input_ports, InputPort, value)

    @property
    def output(self) -> str:
        return self._sole_output().value

    @output.setter
    def output(self, value: str) -> None:
        self._set_sole(self.output_ports, OutputPort, value)

    def _set_sole(self, ports: list, port_type: type, value: str) -> None:
        """The one port's value (a new port where there is none)."""
        if ports:
            self._sole(ports, "ports").value = value
        else:
            ports.append(port_type(value))

    @property
    def input_quant(self) -> Any:
        return self._sole_input().quant

    @input_quant.setter
    def input_quant(self, attrs: Any) -> None:
        self._sole_input().quant = attrs

    @property
    def input_map(self) -> InputMap | None:
        return self._sole_input().input_map

    @property
    def model_input_shape(self) -> tuple[int, ...] | None:
        return self._sole_input().model_shape

    @property
    def onnx_input(self) -> str:
        return self._sole_input().onnx_name

    @property
    def onnx_output(self) -> str:
        return self._sole_output().onnx_name

    def input_shapes(self) -> list[tuple[int, ...]]:
        return [tuple(self.values[v].shape) for v in self.inputs]

    def output_shapes(self) -> list[tuple[int, ...]]:
        return [tuple(self.values[v].shape) for v in self.outputs]

    def split_inputs(self, codes: np.ndarray) -> list[np.ndarray]:
        """Packed input codes -> each input port's ``(N, *shape)``."""
        return unpack(codes, self.input_shapes())

    def split_outputs(self, codes: np.ndarray) -> list[np.ndarray]:
        """Packed output codes -> each output port's ``(N, *shape)``."""
        return unpack(codes, self.output_shapes())

    # -- real values -------------------------------------------------------------------
    def real(self, value: str, codes: np.ndarray) -> np.ndarray:
        """float64 real values (the user's model's) of a value's int codes ``(N, *shape)``."""
        cs = self.scales.get(value)
        if cs is None:
            return np.ldexp(np.asarray(codes, dtype=np.float64), -self.values[value].ftype.frac)
        return cs.real(codes, self.values[value].shape)

    def output_real(self, codes: np.ndarray) -> np.ndarray:
        """The real values of packed output codes, packed the same way."""
        return pack([self.real(v, c) for v, c in zip(self.outputs, self.split_outputs(codes))])

    def input_real(self, codes: np.ndarray) -> np.ndarray | list[np.ndarray]:
        """A real input per input code (the centre of the values the input's quantizer maps to
        it): for one input its array, for several a list in port order."""
        reals = [self._port_real(p, c) for p, c in zip(self.input_ports, self.split_inputs(codes))]
        return reals[0] if len(reals) == 1 else reals

    def _port_real(self, port: InputPort, codes: np.ndarray) -> np.ndarray:
        if port.input_map is None:
            return np.ldexp(np.asarray(codes, dtype=np.float64), -self.values[port.value].ftype.frac)
        return port.input_map.centers(codes)

    def type_of(self, value: str) -> TensorType:
        return self.values[value]

    def producer(self, value: str) -> Node | None:
        for node in self.nodes:
            if node.output == value:
                return node
        return None

    def consumers(self, value: str) -> list[Node]:
        return [n for n in self.nodes if value in n.inputs]
