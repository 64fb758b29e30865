"""Shared builders: one-op IR graphs and small Brevitas models exported to QONNX."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.ir.graph import Graph, Node
from tessera.compiler.ir.types import FixedType, TensorType
from tessera.compiler.ops import conv, merge, quant, relu
from tessera.compiler.passes import run_passes


def one_op_graph(in_type: TensorType, *ops: tuple[str, object]) -> Graph:
    """Input of ``in_type`` followed by a chain of (op, attrs); types inferred."""
    g = Graph(input="x", output="", values={"x": in_type})
    g.input_quant = quant.Attrs(in_type.ftype, False, "ROUND")
    prev = "x"
    for i, (op, attrs) in enumerate(ops):
        out = f"v{i}"
        g.nodes.append(Node(f"n{i}_{op}", op, [prev], out, attrs))
        prev = out
    g.output = prev
    return run_passes(g)


def full_range(width: int, frac: int, signed: bool, shape) -> TensorType:
    t = FixedType(width, frac, signed)
    return TensorType(tuple(shape), t, t.min_code, t.max_code)


@pytest.fixture
def make_graph():
    return one_op_graph


@pytest.fixture
def make_type():
    return full_range


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def qonnx_mlp(path, act_scale=2.0**-4, weight_scale=2.0**-6, insert=None, seed=0):
    """A hand-written QONNX graph: Quant(x) -> MatMul(Quant(W)) -> Add(b) -> Relu -> Quant -> y.

    ``insert`` = (op_type, attrs) adds an extra node before the output Quant (for error tests).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    r = np.random.default_rng(seed)
    w = r.normal(0, 0.3, size=(6, 4)).astype(np.float32)
    b = (r.integers(-64, 64, size=4) * 2.0**-10).astype(np.float32)
    c = lambda name, v: numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)
    inits = [c("W", w), c("b", b), c("s_in", act_scale), c("s_w", weight_scale), c("s_out", 2.0**-3), c("zp", 0.0),
             c("b8", 8.0), c("b4", 4.0)]
    q = lambda i, s, bw, o, signed=1, narrow=0: helper.make_node(
        "Quant", [i, s, "zp", bw], [o], domain="qonnx.custom_op.general", name=f"Quant_{o}",
        signed=signed, narrow=narrow, rounding_mode="ROUND")
    nodes = [q("x", "s_in", "b8", "xq"), q("W", "s_w", "b8", "Wq", narrow=1),
             helper.make_node("MatMul", ["xq", "Wq"], ["mm"], name="MatMul_0"),
             helper.make_node("Add", ["mm", "b"], ["acc"], name="Add_0"),
             helper.make_node("Relu", ["acc"], ["r"], name="Relu_0")]
    last = "r"
    if insert is not None:
        op_type, attrs = insert
        nodes.append(helper.make_node(op_type, [last], ["extra"], name=f"{op_type}_bad", **attrs))
        last = "extra"
    nodes.append(q(last, "s_out", "b4", "y", signed=0))
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.fixture
def make_qonnx_mlp():
    return qonnx_mlp


def dag_graph(in_type, nodes):
    """Input 'x' and nodes given as (name, op, [inputs], attrs); the last node is the output."""
    g = Graph(input="x", output=nodes[-1][0], values={"x": in_type})
    g.input_quant = quant.Attrs(in_type.ftype, False, "ROUND")
    for name, op, inputs, attrs in nodes:
        g.nodes.append(Node(name, op, list(inputs), name, attrs))
    return run_passes(g)


@pytest.fixture
def make_dag():
    return dag_graph


def _skip_block(rng, cin, spatial_rank):
    """x -> conv -> requant (a); x -> relu (b, other frac); concat(a, b); add(concat, concat)."""
    k = (3,) * spatial_rank
    w = rng.integers(-32, 31, size=(3, cin, *k), endpoint=True)
    return [
        ("a0", "conv", ["x"], conv.Attrs(w, FixedType(6, 5, True), None, None, (1,) * spatial_rank, (1,) * 2 * spatial_rank)),
        ("a", "requant", ["a0"], quant.Attrs(FixedType(7, 6, True), False, "ROUND")),
        ("b", "relu", ["x"], relu.Attrs()),
        ("cat", "concat", ["a", "b"], merge.Attrs()),
        ("sum", "add", ["cat", "cat"], merge.Attrs()),
    ]


@pytest.fixture
def skip_block():
    return _skip_block
