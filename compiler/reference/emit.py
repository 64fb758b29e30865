"""IR -> an onnxruntime model that computes the exact integer codes.

The model takes int64 input codes ``[N, *shape]`` and returns int64 output codes.  Each
op emits its own nodes (``OpDef.emit_onnx``): integer kernels (MatMulInteger,
ConvInteger, int64 MatMul) or float64 steps on integers below 2**52, which are exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..ir.graph import Graph
from ..ops import OPS

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

    def round(self, v: str, mode: str) -> str:
        """Round float64 ``v`` to an integer with a QONNX rounding mode (ONNX Round is half-to-even)."""
        if mode in ("ROUND", "HALF_EVEN"):
            return self.op("Round", [v])
        if mode == "FLOOR":
            return self.op("Floor", [v])
        if mode == "CEIL":
            return self.op("Ceil", [v])
        sign, mag = self.op("Sign", [v]), self.op("Abs", [v])
        if mode == "DOWN":
            r = self.op("Floor", [mag])
        elif mode == "UP":
            r = self.op("Ceil", [mag])
        elif mode == "HALF_UP":
            r = self.op("Floor", [self.op("Add", [mag, self.const(np.array(0.5))])])
        elif mode == "HALF_DOWN":
            r = self.op("Ceil", [self.op("Sub", [mag, self.const(np.array(0.5))])])
        else:
            raise ValueError(mode)
        return self.op("Mul", [sign, r])

    def div_round(self, num: str, den: str, mode: str) -> str:
        """Exact R(num / den) in float64 for integers below 2**52 (den > 0): floor, exact remainder
        with a one-step correction, then the rounding decision on the remainder."""
        q = self.op("Floor", [self.op("Div", [num, den])])
        r = self.op("Sub", [num, self.op("Mul", [q, den])])
        one, zero = self.const(np.array(1.0)), self.const(np.array(0.0))
        low = self.op("Less", [r, zero])
        q = self.op("Sub", [q, self.op("Where", [low, one, zero])])
        r = self.op("Add", [r, self.op("Where", [low, den, zero])])
        high = self.op("Not", [self.op("Less", [r, den])])
        q = self.op("Add", [q, self.op("Where", [high, one, zero])])
        r = self.op("Sub", [r, self.op("Where", [high, den, zero])])
        twice = self.op("Mul", [r, self.const(np.array(2.0))])
        neg = self.op("Less", [num, zero])
        gt, eq = self.op("Greater", [twice, den]), self.op("Equal", [twice, den])
        odd = lambda: self.op("Equal", [self.op("Abs", [self.op("Mod", [q, self.const(np.array(2.0))], fmod=1)]), one])  # noqa: E731
        up = self._round_up(mode, gt, eq, neg, self.op("Greater", [r, zero]), odd)
        return q if up is None else self.op("Add", [q, self.op("Where", [up, one, zero])])

    def int_shift_round(self, x: str, shift: int, mode: str) -> str:
        """Exact R(x / 2**shift) on int64 codes of any width (shift > 0), integer ops only:
        ``Mod`` with the divisor's sign gives 0 <= r < 2**shift, ``(x - r) / 2**shift`` is the
        exact floor, then the rounding decision on the remainder."""
        d = self.const(np.array(1 << shift, dtype=np.int64))
        r = self.op("Mod", [x, d], fmod=0)
        q = self.op("Div", [self.op("Sub", [x, r]), d])
        half, zero = self.const(np.array(1 << (shift - 1), dtype=np.int64)), self.const(np.array(0, dtype=np.int64))
        gt, eq, pos_r = self.op("Greater", [r, half]), self.op("Equal", [r, half]), self.op("Greater", [r, zero])
        neg = self.op("Less", [x, zero])
        odd = lambda: self.op("Equal", [self.op("Mod", [q, self.const(np.array(2, dtype=np.int64))], fmod=0),  # noqa: E731
                                         self.const(np.array(1, dtype=np.int64))])
        up = self._round_up(mode, gt, eq, neg, pos_r, odd)
        return q if up is None else self.op("Add", [q, self.op("Cast", [up], to="int64")])

    def _round_up(self, mode: str, gt: str, eq: str, neg: str, pos_r: str, odd):
        """Whether the floor quotient ``q`` rounds up, from the remainder's comparisons with half
        the divisor (``gt``, ``eq``), the sign of the dividend (``neg``) and ``pos_r`` (remainder >
        0); ``odd()`` builds "q is odd".  None for FLOOR."""
        if mode in ("ROUND", "HALF_EVEN"):
            return self.op("Or", [gt, self.op("And", [eq, odd()])])
        if mode == "FLOOR":
            return None
        if mode == "CEIL":
            return pos_r
        if mode == "DOWN":
            return self.op("And", [neg, pos_r])
        if mode == "UP":
            return self.op("And", [self.op("Not", [neg]), pos_r])
        if mode == "HALF_UP":
            return self.op("Or", [gt, self.op("And", [eq, self.op("Not", [neg])])])
        if mode == "HALF_DOWN":
            return self.op("Or", [gt, self.op("And", [eq, neg])])
        raise ValueError(mode)


def emit_reference(graph: Graph) -> onnx.ModelProto:
    b = OnnxBuilder()
    names = {graph.input: "codes_in"}
    for node in graph.nodes:
        ins = [graph.values[v] for v in node.inputs]
        names[node.output] = OPS[node.op].emit_onnx(node.attrs, b, [names[v] for v in node.inputs], ins, graph.values[node.output])
    b.nodes.append(helper.make_node("Identity", [names[graph.output]], ["codes_out"], name="output"))
    tin, tout = graph.values[graph.input], graph.values[graph.output]
    g = helper.make_graph(
        b.nodes, "tessera_reference",
        [helper.make_tensor_value_info("codes_in", TensorProto.INT64, ["N", *tin.shape])],
        [helper.make_tensor_value_info("codes_out", TensorProto.INT64, ["N", *tout.shape])],
        b.inits,
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tessera")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


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
