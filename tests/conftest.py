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


@pytest.fixture(scope="session")
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


def _brevitas_kit():
    """A small Brevitas Conv3d/MaxPool3d/Linear/Tanh model class and a calibration helper."""
    import torch
    import torch.nn as nn
    from brevitas import nn as qnn

    from tessera.models.quant import Int8ActPow2, Int8WeightPow2, Int16Bias, Uint8ActPow2

    class Net3d(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = qnn.QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True)
            self.c = qnn.QuantConv3d(2, 4, 3, padding=1, weight_quant=Int8WeightPow2, bias_quant=Int16Bias,
                                     return_quant_tensor=True)
            self.r = qnn.QuantReLU(act_quant=Uint8ActPow2, return_quant_tensor=True)
            self.p = nn.MaxPool3d(2)
            self.f = nn.Flatten()
            self.l = qnn.QuantLinear(4 * 2 * 2 * 2, 3, weight_quant=Int8WeightPow2, bias_quant=Int16Bias, return_quant_tensor=True)
            self.qi = qnn.QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True)
            self.t = qnn.QuantTanh(act_quant=Int8ActPow2)

        def forward(self, x):
            x = self.p(self.r(self.c(self.q(x))))
            return self.t(self.qi(self.l(self.f(x))))


    def calibrated(model, shape):
        torch.manual_seed(0)
        model.train()
        with torch.no_grad():
            for _ in range(60):
                model(torch.randn(8, *shape))
        return model.eval()

    return Net3d, calibrated


@pytest.fixture(scope="session")
def brevitas_kit():
    return _brevitas_kit()


# -- recurrent cells ---------------------------------------------------------------------

WEIGHT_CODEBOOKS = {"binary": [-1, 1], "ternary": [-1, 0, 1], "quaternary": [-2, -1, 1, 2], "int8": None}


def _q(bits: int, frac: int, signed: bool = True, narrow: bool = False):
    return quant.Attrs(FixedType(bits, frac, signed), narrow, "ROUND")


def _w(rng, shape, kind: str, frac: int):
    from tessera.compiler.ops.cells.program import Weights

    book = WEIGHT_CODEBOOKS[kind]
    codes = rng.choice(book, size=shape) if book else rng.integers(-127, 128, size=shape)
    return Weights(np.asarray(codes, dtype=np.int64), frac)


def random_lstm(rng, n_in: int, hidden: int, kind: str = "ternary", cell_bits: int = 8, cifg: bool = False,
                reverse: bool = False, return_sequences: bool = True, acc_frac: int = 4, x_frac: int = 6,
                out_frac: int = 8):
    """LSTM attrs like the sentiment models' (8-bit acc/act quantizers, power-of-two scales),
    with scales chosen so that accumulators, cell state (range +-1) and output (+-0.5)
    saturate often."""
    from tessera.compiler.ops import lstm
    from tessera.compiler.ops.cells.program import Act

    wf = 2 if kind != "int8" else 8
    sig, tanh = _q(8, 8, signed=False), _q(8, 7)
    gates = []
    for g in lstm.GATES:
        gates.append(lstm.Gate(_w(rng, (hidden, n_in), kind, wf), _w(rng, (hidden, hidden), kind, wf),
                               rng.integers(-(1 << 10), 1 << 10, size=hidden), x_frac + wf,
                               _q(8, acc_frac), Act("tanh" if g == "c" else "sigmoid", tanh if g == "c" else sig)))
    cell = _q(cell_bits, cell_bits - 1)
    return lstm.Attrs(tuple(gates), cell, Act("tanh", tanh), _q(8, out_frac),
                      np.zeros(hidden, dtype=np.int64), np.zeros(hidden, dtype=np.int64),
                      cifg=cifg, reverse=reverse, return_sequences=return_sequences)


def random_gru(rng, n_in: int, hidden: int, kind: str = "ternary", return_sequences: bool = True, acc_frac: int = 4,
               x_frac: int = 5, h_frac: int = 8):
    from tessera.compiler.ops import gru
    from tessera.compiler.ops.cells.program import Act

    wx_f, wh_f = (2, 3) if kind != "int8" else (8, 7)
    sig, tanh = _q(8, 8, signed=False), _q(8, 7)
    gates = []
    for g in gru.GATES:
        gates.append(gru.Gate(_w(rng, (hidden, n_in), kind, wx_f), _w(rng, (hidden, hidden), kind, wh_f),
                              rng.integers(-(1 << 9), 1 << 9, size=hidden), x_frac + wx_f,
                              rng.integers(-(1 << 9), 1 << 9, size=hidden), h_frac + wh_f,
                              _q(8, acc_frac), Act("tanh" if g == "n" else "sigmoid", tanh if g == "n" else sig)))
    return gru.Attrs(tuple(gates), _q(8, h_frac), np.zeros(hidden, dtype=np.int64), return_sequences=return_sequences)


@pytest.fixture
def rnn_builders():
    return {"lstm": random_lstm, "gru": random_gru, "convlstm": random_convlstm}


def random_convlstm(rng, c_in: int, hidden: int, k: int = 3, kind: str = "ternary", forecaster_steps: int = 0,
                    out_frac: int = 8):
    """ConvLSTM attrs (encoder, and a forecaster when ``forecaster_steps``) with scales that
    make accumulators, cell and hidden states saturate."""
    from tessera.compiler.ops import convlstm, lstm
    from tessera.compiler.ops.cells.program import Act

    sig, tanh = _q(8, 8, signed=False), _q(8, 7)

    def cell(has_input: bool, out_frac: int, cell_frac: int):
        gates = []
        for g in lstm.GATES:
            wx = _w(rng, (hidden, c_in, k, k), kind, 2) if has_input else None
            gates.append(lstm.Gate(wx, _w(rng, (hidden, hidden, k, k), kind, 2), rng.integers(-(1 << 10), 1 << 10, size=hidden),
                                   8, _q(8, 3), Act("tanh" if g == "c" else "sigmoid", tanh if g == "c" else sig)))
        return convlstm.Cell(tuple(gates), _q(8, cell_frac), Act("tanh", tanh), _q(8, out_frac))

    enc = cell(True, out_frac, 7)
    fc = cell(False, out_frac, 6) if forecaster_steps else None
    return convlstm.Attrs(enc, fc, forecaster_steps)


# -- 3D CNNs at partition sizes ---------------------------------------------------------

_GRAPHS: dict = {}


def _cnn3d_export(tmp_path_factory, name: str, size: int):
    """A Brevitas model (width 1/16, BatchNorm statistics warmed, folded) exported at
    ``size``^3 and compiled to the typed IR; one per test session."""
    import warnings

    key = (name, size)
    if key not in _GRAPHS:
        import torch

        from tessera.compiler.pipeline import compile_ir
        from tessera.models.cnn3d import build_cnn3d, fold_batchnorm
        from tessera.models.train3d import export_cnn3d

        cin, nout = (4, 4) if name.startswith("cosmoflow") else (1, 3)
        torch.manual_seed(0)
        m = build_cnn3d(name, width=1 / 16, input_size=size, in_channels=cin, n_out=nout)
        x = torch.rand(2, cin, size, size, size, generator=torch.Generator().manual_seed(0))
        m.train()
        with torch.no_grad():
            m(x)
        m = fold_batchnorm(m.eval())
        path = tmp_path_factory.mktemp("cnn3d") / f"{name}{size}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_cnn3d(m, x[:1], path)
        _GRAPHS[key] = compile_ir(path), path
    return _GRAPHS[key]


@pytest.fixture(scope="session")
def cnn3d_export(tmp_path_factory):
    """``(name, size) -> (typed graph, model.onnx)``: a reduced-width 3D CNN exported at size^3."""
    return lambda name, size: _cnn3d_export(tmp_path_factory, name, size)
