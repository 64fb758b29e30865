"""A time-major recurrent file read as its batch-major equivalent, before the walk.

brevitas' ``QuantLSTM(batch_first=False)`` exports its cell with ``batch_first=0``: the input
is ``(T, N, F)``, the sequence ``(T, N, H)``, and ``out[-1]`` is a ``Gather`` of axis 0.  A
design computes one sample, and with the batch of 1 that the file declares (``(T, 1, F)``) a
sample's values lie in the same order as in ``(1, T, F)``: so the file is read with axes 0 and
1 of every time-major value swapped -- the inputs declared ``(1, T, ...)``, the cells
``batch_first=1``, each axis attribute or constant of the nodes on time-major values renamed --
which changes no value.  The nodes between a graph input and a cell may only act on every
element alike (quantizers, constant arithmetic of scalars or one value per feature); after a
cell, the selections of steps and features (``Gather``, ``Slice``), a ``Concat`` of features,
a per-step head (``MatMul``, a constant ``Add``), quantizers and further cells.  Anything else
on a time-major value is refused in one line.  The independent check runs the file as written
(:mod:`..independent`: a sample fills its whole declared input).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import UnsupportedModelError
from .load import RECURRENT_OPS

#: op types that act on every element alike (their constant operands checked) and keep the axes
ELEMENTWISE = frozenset({"Quant", "IntQuant", "BipolarQuant", "Identity", "Relu", "Clip", "Mul", "Add", "Sub", "Div",
                         "Tanh", "Sigmoid", "Dropout"})


def _attribute(node: onnx.NodeProto, name: str, default=None):
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _set(node: onnx.NodeProto, name: str, value) -> None:
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))


def _swapped(axis: int, rank: int) -> int:
    axis = axis + rank if axis < 0 else axis
    return {0: 1, 1: 0}.get(axis, axis)


class _Rewrite:
    """The walk over the time-major values (name -> rank) of one model, rewriting it in place."""

    def __init__(self, model: onnx.ModelProto):
        self.model, self.g = model, model.graph
        self.consts = {i.name: numpy_helper.to_array(i) for i in self.g.initializer}
        self.consts.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in self.g.node
                            if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})
        self.producers = {o: n for n in self.g.node for o in n.output}
        self.ranks: dict[str, int] = {}

    def constant(self, name: str) -> bool:
        """A constant, or a weight's quantizer of one (brevitas' ``Transpose(Quant(W))``)."""
        node = self.producers.get(name)
        return name in self.consts or (node is not None and node.op_type != "Constant" and bool(node.input) and
                                       all(self.constant(i) for i in node.input if i))

    def refuse(self, node: onnx.NodeProto, what: str) -> UnsupportedModelError:
        return UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {what} of a time-major sequence "
                                     "(batch_first=False) is not supported")

    def operands(self, node: onnx.NodeProto) -> list[str]:
        """The inputs of an elementwise node that are not constants; its constants must be
        scalars or one value per feature (last axis), which the swap leaves as they are."""
        for name in node.input:
            value = self.consts.get(name)
            if value is not None and value.ndim >= 2 and value.shape[:-1] != (1,) * (value.ndim - 1):
                raise self.refuse(node, f"a constant of shape {list(value.shape)} on every element")
        return [name for name in node.input if name and name not in self.consts]

    def backward(self, name: str, rank: int) -> None:
        """From a cell's input back to the graph inputs, through elementwise nodes."""
        if name in self.ranks:
            return
        self.ranks[name] = rank
        node = self.producers.get(name)
        if node is None:
            self.time_major_input(name)
            return
        operands = self.operands(node) if node.op_type in ELEMENTWISE else []
        if len(operands) != 1:
            raise self.refuse(node, "producing the input")
        self.backward(operands[0], rank)

    def time_major_input(self, name: str) -> None:
        value = next((i for i in self.g.input if i.name == name), None)
        dims = value.type.tensor_type.shape.dim if value is not None else []
        if len(dims) < 3 or not dims[1].HasField("dim_value") or dims[1].dim_value != 1 or \
                not dims[0].HasField("dim_value"):
            shape = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims]
            raise UnsupportedModelError(f"input '{name}' of shape {shape} feeds a time-major recurrent cell "
                                        "(batch_first=False); only a declared batch of 1, (T, 1, ...), is supported")
        first, second = onnx.TensorShapeProto.Dimension(), onnx.TensorShapeProto.Dimension()
        first.CopyFrom(dims[1])
        second.CopyFrom(dims[0])
        dims[0].CopyFrom(first)
        dims[1].CopyFrom(second)

    def forward(self, name: str, rank: int) -> None:
        """From a cell's sequence on, through what reads it."""
        if name in self.ranks:
            return
        self.ranks[name] = rank
        for output in self.g.output:
            if output.name == name and len(output.type.tensor_type.shape.dim) == rank:
                dims = output.type.tensor_type.shape.dim
                first = onnx.TensorShapeProto.Dimension()
                first.CopyFrom(dims[0])
                dims[0].CopyFrom(dims[1])
                dims[1].CopyFrom(first)
        for user in [n for n in self.g.node if name in n.input]:
            self.rewrite(user, name, rank)

    def rewrite(self, node: onnx.NodeProto, name: str, rank: int) -> None:
        kind = node.op_type
        if kind in RECURRENT_OPS and node.input[0] == name:
            return  # a stacked cell: its own input, rewritten with it
        if kind in ELEMENTWISE or kind == "MatMul":
            if kind == "MatMul" and (node.input[0] != name or not self.constant(node.input[1])):
                raise self.refuse(node, "a MatMul other than by a constant weight")
            self.operands(node)
            self.forward(node.output[0], rank)
        elif kind == "Gather":
            self.gather(node, rank)
        elif kind == "Slice":
            self.slice(node, rank)
        elif kind == "Concat" and _swapped(int(_attribute(node, "axis", 0)), rank) >= 2:
            _set(node, "axis", _swapped(int(_attribute(node, "axis", 0)), rank))
            self.forward(node.output[0], rank)
        else:
            raise self.refuse(node, "this node")

    def gather(self, node: onnx.NodeProto, rank: int) -> None:
        axis = _swapped(int(_attribute(node, "axis", 0)), rank)
        index = self.consts.get(node.input[1])
        if axis == 0 or index is None:
            raise self.refuse(node, "a Gather of the batch, or of indices not constant,")
        _set(node, "axis", axis)
        if index.ndim:
            self.forward(node.output[0], rank)
        elif axis != 1:  # one step (axis 1) leaves a batch-major value; one feature keeps the steps
            self.forward(node.output[0], rank - 1)

    def slice(self, node: onnx.NodeProto, rank: int) -> None:
        starts = self.consts.get(node.input[1]) if len(node.input) > 1 else None
        axes = self.consts.get(node.input[3]) if len(node.input) > 3 and node.input[3] else None
        if starts is None or (len(node.input) > 3 and node.input[3] and axes is None):
            raise self.refuse(node, "a Slice of bounds or axes not constant (or of opset < 10)")
        axes = list(range(starts.size)) if axes is None else [int(a) for a in axes.reshape(-1)]
        swapped = [_swapped(a, rank) for a in axes]
        if 0 in swapped:
            raise self.refuse(node, "a Slice of the batch")
        name = f"{node.name}/time_major_axes"
        self.g.initializer.append(numpy_helper.from_array(np.array(swapped, dtype=np.int64), name))
        inputs = list(node.input) + [""] * (4 - len(node.input))
        inputs[3] = name
        del node.input[:]
        node.input.extend(inputs)
        self.forward(node.output[0], rank)


def batch_major(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` itself if no recurrent cell is time-major, else a copy read batch-major."""
    cells = [n for n in model.graph.node if n.op_type in RECURRENT_OPS]
    time_major = [n for n in cells if not int(_attribute(n, "batch_first", 1))]
    if not time_major:
        return model
    if len(time_major) != len(cells):
        raise UnsupportedModelError(f"node '{time_major[0].name}' ({time_major[0].op_type}): batch_first=0 beside "
                                    "batch-first cells is not supported")
    model = onnx.ModelProto.FromString(model.SerializeToString())
    rewrite = _Rewrite(model)
    for cell in [n for n in model.graph.node if n.op_type in RECURRENT_OPS]:
        rank = 5 if cell.op_type == "QuantConvLSTMCell" else 3
        if cell.input[0]:
            rewrite.backward(cell.input[0], rank)
        _set(cell, "batch_first", 1)
        rewrite.forward(cell.output[0], rank)
    return model


__all__ = ["batch_major"]
