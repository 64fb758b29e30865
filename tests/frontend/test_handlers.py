"""The handler table (compiler/frontend/registry.py): every registered handler is reached by a
model here, each model imports and types, and the table refuses what it does not hold.

The models are small and cover the handlers between them; a handler added without a model
that reaches it fails :func:`test_every_handler_is_reached`."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.frontend import registry
from tessera.compiler.frontend.load import QONNX_DOMAIN
from tessera.compiler.pipeline import compile_ir

ACT, WEIGHT = 2.0 ** -4, 2.0 ** -6


class Builder:
    """A QONNX graph on one float input ``x``: Quant nodes, constants, plain ONNX nodes."""

    def __init__(self, shape, seed=0):
        self.shape, self.nodes, self.inits = shape, [], []
        self.rng = np.random.default_rng(seed)
        for name, v in (("act_s", ACT), ("w_s", WEIGHT), ("zero", 0.0), ("b8", 8.0), ("b4", 4.0)):
            self.const(name, v)

    def const(self, name, value, dtype=np.float32):
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(self, op, inputs, out, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{out}", **attrs))
        return out

    def quant(self, x, out, scale="act_s", bits="b8"):
        self.nodes.append(helper.make_node("Quant", [x, scale, "zero", bits], [out], name=f"Quant_{out}",
                                           domain=QONNX_DOMAIN, signed=1, narrow=0, rounding_mode="ROUND"))
        return out

    def weight(self, name, shape):
        raw = self.const(f"{name}_raw", self.rng.integers(-7, 8, shape) * WEIGHT)
        return self.quant(raw, name, "w_s", "b4")

    def save(self, path, out, out_shape, opset=13):
        g = helper.make_graph(self.nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *self.shape])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, *out_shape])], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(QONNX_DOMAIN, 1)])
        m.ir_version = 8
        onnx.save(m, str(path))
        return path


def dense_model(path):
    """Preprocessing (Mul, Sub, Clip) folded into the input Quant, a Constant weight through
    Identity/Dropout, MatMul + bias Add, BatchNorm, Relu, Gemm, Div and a trailing Softmax."""
    b = Builder((8,))
    x = b.node("Clip", [b.node("Sub", [b.node("Mul", ["x", b.const("two", 2.0)], "x2"), b.const("one", 1.0)], "x1"),
                        "zero"], "x0")
    xq = b.quant(x, "xq")
    b.nodes.append(helper.make_node("Constant", [], ["w1_raw"], name="Constant_w1",
                                    value=numpy_helper.from_array((b.rng.integers(-7, 8, (8, 6)) * WEIGHT).astype(np.float32))))
    w1 = b.node("Dropout", [b.node("Identity", [b.quant("w1_raw", "w1q", "w_s", "b4")], "w1i")], "w1")
    h = b.node("Add", [b.node("MatMul", [xq, w1], "mm"), b.const("bias", b.rng.integers(-8, 8, 6) * ACT * WEIGHT)], "h")
    bn = b.node("BatchNormalization", [h, *(b.const(n, v) for n, v in (("gamma", np.full(6, 1.5)), ("beta", np.zeros(6)),
                                                                       ("mean", np.zeros(6)), ("var", np.ones(6))))], "bn")
    hq = b.quant(b.node("Relu", [bn], "r"), "hq")
    y = b.node("Div", [b.node("Gemm", [hq, b.weight("w2", (3, 6))], "g", transB=1), b.const("three", 3.0)], "d")
    return b.save(path, b.node("Softmax", [y], "y", axis=-1), (3,))


def conv_model(path):
    """Pad + Conv, LeakyRelu, MaxPool, Tanh + Quant, nearest Resize, AveragePool + Quant, Concat,
    DepthToSpace, ConvTranspose, GlobalMaxPool + GlobalAveragePool + ReduceMean merged by Add, Flatten."""
    b = Builder((2, 8, 8))
    xq = b.quant("x", "xq")
    p = b.node("Pad", [xq, b.const("pads", [0, 0, 1, 1, 0, 0, 1, 1], np.int64)], "p")
    c = b.quant(b.node("Conv", [p, b.weight("wc", (4, 2, 3, 3))], "c", kernel_shape=[3, 3]), "cq")
    m = b.node("MaxPool", [b.node("LeakyRelu", [c], "lr", alpha=0.125)], "mp", kernel_shape=[2, 2], strides=[2, 2])
    t = b.quant(b.node("Tanh", [m], "t"), "tq", "act_s", "b8")
    r = b.node("Resize", [t, "", b.const("scales", [1, 1, 2, 2])], "rs", mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    a = b.quant(b.node("AveragePool", [r], "ap", kernel_shape=[2, 2], strides=[2, 2]), "aq")
    d = b.node("DepthToSpace", [b.node("Concat", [a, t], "cat", axis=1)], "d2s", blocksize=2)
    u = b.quant(b.node("ConvTranspose", [d, b.weight("wt", (2, 2, 2, 2))], "ct", kernel_shape=[2, 2], strides=[2, 2]),
                "uq")
    g = b.quant(b.node("GlobalAveragePool", [u], "gap"), "gq")
    m = b.quant(b.node("ReduceMean", [u], "rm", axes=[2, 3], keepdims=1), "rq")
    s = b.node("Add", [b.node("Add", [b.node("GlobalMaxPool", [u], "gmp"), g], "sum0"), m], "sum")
    return b.save(path, b.node("Flatten", [s], "y", axis=1), (2,))


def shape_model(path):
    """A Reshape of the raw input, a sigmoid table, a Transpose of the two axes after the batch,
    a Trunc that drops no bits, a BipolarQuant input."""
    b = Builder((4, 3))
    x = b.node("Reshape", ["x", b.const("flat", [1, -1], np.int64)], "xr")
    xq = b.quant(x, "xq")
    h = b.quant(b.node("Sigmoid", [b.node("MatMul", [xq, b.weight("w", (12, 6))], "mm")], "sg"), "sq")
    t = b.node("Trunc", [h, "act_s", "zero", "b8", "act_s", "b8"], "tr")
    b.nodes[-1].domain = QONNX_DOMAIN
    return b.save(path, t, (6,))


def transpose_model(path):
    b = Builder((3, 4, 5))
    xq = b.quant("x", "xq")
    return b.save(path, b.node("Transpose", [xq], "y", perm=[0, 2, 1, 3]), (4, 3, 5))


def bipolar_model(path):
    """A BipolarQuant input; a weight through IntQuant (qonnx 1.0's name of Quant)."""
    b = Builder((8,))
    b.nodes.append(helper.make_node("BipolarQuant", ["x", b.const("one", 1.0)], ["xq"], name="bq", domain=QONNX_DOMAIN))
    w = b.weight("w", (8, 3))
    b.nodes[-1].op_type = "IntQuant"
    return b.save(path, b.node("MatMul", ["xq", w], "y"), (3,))


def qcdq_model(path):
    """ONNX QuantizeLinear / Clip / DequantizeLinear: a uint8 input with a zero point, int8 weight
    codes (DequantizeLinear of an initializer) and float weights through QuantizeLinear and a
    Clip of constants, a Clip narrowing activation codes."""
    b = Builder((4,))
    b.const("s_x", 0.0371)
    b.const("z_x", 121, np.uint8)
    b.const("z0", 0, np.int8)
    b.const("lo", -7, np.int8)
    b.const("hi", 7, np.int8)
    xq = b.node("DequantizeLinear", [b.node("QuantizeLinear", ["x", "s_x", "z_x"], "xc"), "s_x", "z_x"], "xq")
    w1 = b.node("DequantizeLinear", [b.const("w1", b.rng.integers(-127, 128, (4, 3)), np.int8), "w_s", "z0"], "w1q")
    w2 = b.node("DequantizeLinear", [b.node("Clip", [b.node("QuantizeLinear", [b.const("w2", b.rng.normal(0, 0.1, (3, 2))),
                                                                             "w_s", "z0"], "w2c"), "lo", "hi"], "w2n"),
                                     "w_s", "z0"], "w2q")
    h = b.node("QuantizeLinear", [b.node("MatMul", [xq, w1], "mm"), "act_s", "z0"], "hc")
    hq = b.node("DequantizeLinear", [b.node("Clip", [h, "lo", "hi"], "hn"), "act_s", "z0"], "hq")
    return b.save(path, b.node("MatMul", [hq, w2], "y"), (2,))


def inflight_model(path):
    """Real-valued tensors between quantizers: a PRelu on a layer's output before its Quant; a
    bilinear Resize rounded onto its input's grid (Brevitas' ``Round(v / s) * s``)."""
    b = Builder((2, 4, 4))
    c = b.node("Conv", [b.quant("x", "xq"), b.weight("wc", (3, 2, 3, 3))], "c", kernel_shape=[3, 3])
    p = b.node("PRelu", [b.node("Mul", [c, b.const("k", 0.3)], "m"), b.const("slope", [[[0.25]], [[0.5]], [[-0.125]]])],
               "pr")
    r = b.node("Resize", [b.quant(p, "pq"), "", b.const("scales", [1, 1, 2, 2])], "r", mode="linear")
    rounded = b.node("Round", [b.node("Div", [r, "act_s"], "d")], "rounded")
    return b.save(path, b.node("Mul", [rounded, "act_s"], "y"), (3, 4, 4))


def branch_model(path):
    """Two branches joined by Max, Min and Sub, then a Slice of channels and rows, split in two."""
    b = Builder((2, 4, 4))
    xq = b.quant("x", "xq")
    one, two = (b.quant(b.node("Conv", [xq, b.weight(f"w{k}", (3, 2, 1, 1))], f"c{k}", kernel_shape=[1, 1]), f"q{k}")
                for k in (1, 2))
    high, low = b.node("Max", [one, two], "hi"), b.node("Min", [one, two], "lo")
    box = [b.const(n, v, np.int64) for n, v in (("st", [1, 1]), ("en", [3, 4]), ("ax", [1, 2]))]
    piece = b.node("Slice", [b.node("Sub", [high, low], "d"), *box], "box")
    b.nodes.append(helper.make_node("Split", [piece], ["h1", "h2"], name="split", axis=1))
    return b.save(path, b.node("Max", ["h1", "h2"], "y"), (1, 3, 4))


def table_model(path):
    """Every tabulated nonlinearity, each before its Quant."""
    b = Builder((6,))
    v = b.quant("x", "xq")
    for op in ("HardSigmoid", "HardSwish", "Elu", "Selu", "Celu", "Softsign", "Softplus", "ThresholdedRelu"):
        v = b.quant(b.node(op, [v], op.lower()), f"{op.lower()}_q")
    return b.save(path, v, (6,), opset=14)


def recurrent_models(tmp_path):
    """Tessera's exports of a sentiment LSTM and GRU (QuantLSTMCell / QuantGRUCell, Gather of the
    last step) and of a ConvLSTM forecaster (QuantConvLSTMCell with and without input)."""
    import torch

    from tessera.models.rnn.export import export_forecaster, export_sentiment
    from tessera.models.rnn.networks import ConvLSTMForecaster, SentimentRNN

    torch.manual_seed(0)
    paths = []
    for cell in ("lstm", "gru"):
        m = SentimentRNN(cell, "ternary", vocab_size=20, embed_dim=4, hidden_size=4)
        paths.append(export_sentiment(m.eval(), tmp_path / f"{cell}.onnx", seq_len=3))
    # the Gather's index as a Constant node, as torch's exporter writes it (recurrent graphs
    # skip qonnx's clean-up, which would fold it into an initializer)
    lstm = onnx.load(str(paths[0]))
    index = next(i for i in lstm.graph.initializer if i.name == "last_step")
    lstm.graph.initializer.remove(index)
    lstm.graph.node.insert(0, helper.make_node("Constant", [], ["last_step"], name="Constant_last_step", value=index))
    onnx.save(lstm, str(paths[0]))
    f = ConvLSTMForecaster("ternary", hidden_channels=2, kernel_size=3, out_frames=2)
    paths.append(export_forecaster(f.eval(), tmp_path / "forecaster.onnx", in_frames=2, size=8))
    return paths


@pytest.fixture
def reached(monkeypatch):
    """Handler key -> calls, recorded while the test runs."""
    calls: dict[tuple[str, str], int] = {}

    def recording(key, fn):
        def wrapper(state, node):
            calls[key] = calls.get(key, 0) + 1
            return fn(state, node)
        return wrapper

    for key, fn in list(registry.HANDLERS.items()):
        monkeypatch.setitem(registry.HANDLERS, key, recording(key, fn))
    return calls


def test_every_handler_is_reached(tmp_path, reached):
    for build in (dense_model, conv_model, shape_model, transpose_model, bipolar_model, qcdq_model, inflight_model,
                  branch_model, table_model):
        g = compile_ir(build(tmp_path / f"{build.__name__}.onnx"))
        assert g.nodes and g.output in g.values
    for path in recurrent_models(tmp_path):
        assert compile_ir(path).nodes
    missing = sorted(f"{op} ({domain or 'ai.onnx'})" for domain, op in registry.HANDLERS if (domain, op) not in reached)
    assert missing == [], f"handlers no model reaches: {missing}"


def test_an_op_in_another_domain_is_refused(tmp_path):
    """The table is keyed by domain too: a Quant of an unknown custom domain is not QONNX's."""
    path = bipolar_model(tmp_path / "m.onnx")
    m = onnx.load(str(path))
    m.graph.node[-1].domain = "example.custom"
    m.opset_import.append(helper.make_opsetid("example.custom", 1))
    onnx.save(m, str(path))
    with pytest.raises(UnsupportedModelError, match=r"unsupported op 'MatMul' \(node 'MatMul_y'\)"):
        compile_ir(path)


def test_registering_twice_fails():
    with pytest.raises(ValueError, match="two handlers for Conv"):
        registry.handles("Conv")(lambda state, node: None)
    assert registry.HANDLERS[("", "Conv")].__name__ == "conv_node"
