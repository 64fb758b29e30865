"""IR -> an onnxruntime model that computes the exact integer codes.

The model takes int64 input codes ``[N, *shape]`` and returns int64 output codes.  Each
op builds its own nodes (``OpDef.onnx_reference``) with :class:`OnnxBuilder`: integer kernels
(MatMulInteger, ConvInteger, int64 MatMul) or float64 steps on integers below 2**52, which
are exact; every rounding is the decision table of :mod:`..exact.rounding`.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..ir.graph import Graph, packed_shape
from ..ops import OPS
from ..exact.rounding import Fact, Rounding, round_up

OPSET = 17
_DTYPES = {"int64": TensorProto.INT64, "bool": TensorProto.BOOL, "int32": TensorProto.INT32, "int8": TensorProto.INT8,
           "uint8": TensorProto.UINT8, "double": TensorProto.DOUBLE, "float": TensorProto.FLOAT}


class OnnxBuilder:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def _name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        out = self._name(op_type.lower())
        if op_type == "Cast":
            attrs["to"] = _DTYPES[attrs["to"]]
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def const(self, value: np.ndarray) -> str:
        name = self._name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    # -- booleans for the rounding table (rounding.round_up) -------------------------------

    def and_(self, a: str, b: str) -> str:
        return self.op("And", [a, b])

    def or_(self, a: str, b: str) -> str:
        return self.op("Or", [a, b])

    def not_(self, a: str) -> str:
        return self.op("Not", [a])

    def _rounded(self, q: str, mode: Rounding, facts: dict, as_number) -> str:
        """``q`` plus one where the rounding table says so; ``facts`` builds each fact's node
        on first use."""
        built: dict[Fact, str] = {}

        def fact(f: Fact) -> str:
            if f not in built:
                built[f] = facts[f]()
            return built[f]

        up = round_up(mode, fact, self)
        return q if up is None else self.op("Add", [q, as_number(up)])

    def _consts(self, dtype):
        """Constants of one dtype, each built once and only when used."""
        return functools.cache(lambda v: self.const(np.array(v, dtype=dtype)))

    def round(self, v: str, mode: Rounding) -> str:
        """``R(v)`` of float64 ``v`` holding exact values below 2**52: ``q = floor(v)``, the
        facts from exact comparisons of ``v`` with ``q`` and ``q + 1/2`` (not ``v - q``,
        which rounds for small negative values), then the rounding table decides."""
        c = self._consts(np.float64)
        q = self.op("Floor", [v])
        mid = functools.cache(lambda: self.op("Add", [q, c(0.5)]))
        return self._rounded(q, Rounding(mode), {
            Fact.ABOVE_HALF: lambda: self.op("Greater", [v, mid()]), Fact.AT_HALF: lambda: self.op("Equal", [v, mid()]),
            Fact.NEGATIVE: lambda: self.op("Less", [v, c(0.0)]), Fact.INEXACT: lambda: self.op("Greater", [v, q]),
            Fact.ODD: lambda: self.op("Equal", [self.op("Abs", [self.op("Mod", [q, c(2.0)], fmod=1)]), c(1.0)]),
        }, lambda up: self.op("Where", [up, c(1.0), c(0.0)]))

    def div_round(self, num: str, den: str, mode: Rounding) -> str:
        """Exact R(num / den) in float64 for integers below 2**52 (den > 0): floor, exact remainder
        with a one-step correction, then the rounding table on the remainder."""
        c = self._consts(np.float64)
        q = self.op("Floor", [self.op("Div", [num, den])])
        r = self.op("Sub", [num, self.op("Mul", [q, den])])
        low = self.op("Less", [r, c(0.0)])
        q = self.op("Sub", [q, self.op("Where", [low, c(1.0), c(0.0)])])
        r = self.op("Add", [r, self.op("Where", [low, den, c(0.0)])])
        high = self.op("Not", [self.op("Less", [r, den])])
        q = self.op("Add", [q, self.op("Where", [high, c(1.0), c(0.0)])])
        r = self.op("Sub", [r, self.op("Where", [high, den, c(0.0)])])
        twice = functools.cache(lambda: self.op("Mul", [r, c(2.0)]))
        return self._rounded(q, Rounding(mode), {
            Fact.ABOVE_HALF: lambda: self.op("Greater", [twice(), den]),
            Fact.AT_HALF: lambda: self.op("Equal", [twice(), den]),
            Fact.NEGATIVE: lambda: self.op("Less", [num, c(0.0)]), Fact.INEXACT: lambda: self.op("Greater", [r, c(0.0)]),
            Fact.ODD: lambda: self.op("Equal", [self.op("Abs", [self.op("Mod", [q, c(2.0)], fmod=1)]), c(1.0)]),
        }, lambda up: self.op("Where", [up, c(1.0), c(0.0)]))

    def int_shift_round(self, x: str, shift: int, mode: Rounding) -> str:
        """Exact R(x / 2**shift) on int64 codes of any width (shift > 0), integer ops only:
        ``Mod`` with the divisor's sign gives 0 <= r < 2**shift, ``(x - r) / 2**shift`` is the
        exact floor, then the rounding table on the remainder."""
        c = self._consts(np.int64)
        r = self.op("Mod", [x, c(1 << shift)], fmod=0)
        q = self.op("Div", [self.op("Sub", [x, r]), c(1 << shift)])
        return self._rounded(q, Rounding(mode), {
            Fact.ABOVE_HALF: lambda: self.op("Greater", [r, c(1 << (shift - 1))]),
            Fact.AT_HALF: lambda: self.op("Equal", [r, c(1 << (shift - 1))]),
            Fact.NEGATIVE: lambda: self.op("Less", [x, c(0)]), Fact.INEXACT: lambda: self.op("Greater", [r, c(0)]),
            Fact.ODD: lambda: self.op("Equal", [self.op("Mod", [q, c(2)], fmod=0), c(1)]),
        }, lambda up: self.op("Cast", [up], to="int64"))


def reference_model(graph: Graph) -> onnx.ModelProto:
    """The exact onnxruntime model of ``graph``: int64 codes in, int64 codes out (several
    ports packed: ``ir.graph.pack``)."""
    b = OnnxBuilder()
    names = dict(zip(graph.inputs, _unpacked(b, graph.input_shapes())))
    for node in graph.nodes:
        ins = [graph.values[v] for v in node.inputs]
        names[node.output] = OPS[node.op].onnx_reference(node.attrs, b, [names[v] for v in node.inputs], ins,
                                                          graph.values[node.output])
    outs = [names[v] for v in graph.outputs]
    if len(outs) > 1:
        flat = b.const(np.array([0, -1], dtype=np.int64))
        outs = [b.op("Concat", [b.op("Reshape", [o, flat]) for o in outs], axis=1)]
    b.nodes.append(helper.make_node("Identity", outs, ["codes_out"], name="output"))
    in_shape, out_shape = packed_shape(graph.input_shapes()), packed_shape(graph.output_shapes())
    g = helper.make_graph(
        b.nodes, "tessera_reference",
        [helper.make_tensor_value_info("codes_in", TensorProto.INT64, ["N", *in_shape])],
        [helper.make_tensor_value_info("codes_out", TensorProto.INT64, ["N", *out_shape])],
        b.inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tessera")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _unpacked(b: OnnxBuilder, shapes: list[tuple[int, ...]]) -> list[str]:
    """The packed input ``codes_in`` as each port's ``(N, *shape)``."""
    if len(shapes) == 1:
        return ["codes_in"]
    ends = np.cumsum([0, *(int(np.prod(s)) for s in shapes)])
    axis = b.const(np.array([1], dtype=np.int64))
    return [b.op("Reshape", [b.op("Slice", ["codes_in", b.const(np.array([lo], dtype=np.int64)),
                                            b.const(np.array([hi], dtype=np.int64)), axis]),
                             b.const(np.array([0, *s], dtype=np.int64))])
            for lo, hi, s in zip(ends[:-1], ends[1:], shapes)]


class OrtReference:
    """Runs the emitted reference on onnxruntime (CPU)."""

    def __init__(self, model: onnx.ModelProto | str | Path):
        import onnxruntime as ort

        data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else Path(model).read_bytes()
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])

    def run(self, codes: np.ndarray, batch: int = 256) -> np.ndarray:
        codes = np.asarray(codes, dtype=np.int64)
        outs = [self.session.run(None, {"codes_in": codes[i : i + batch]})[0] for i in range(0, len(codes), batch)]
        return np.concatenate(outs, axis=0)
