"""A NumPy reference executor of the quantized cells' ONNX export forms (docs/rnn_export.md).

:func:`run_cell_onnx` runs an exported ``QuantLSTMCell`` / ``QuantGRUCell`` /
``QuantConvLSTMCell`` graph from the ONNX file alone, in float64, following the documented
semantics of each form; it shares no code with the export (:mod:`.export`) or with brevitas,
and the tests require it to agree exactly with the brevitas model the file was exported from.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .export import CONVLSTM_QUANTIZERS, GRU_QUANTIZERS

__all__ = ["cell_oracle", "run_cell_onnx"]


def _quant(x, scale, bits, signed, narrow):
    """QONNX ``Quant`` with zero-point 0 and ROUND (half to even), in float64."""
    bits = int(round(float(bits)))
    if signed:
        lo, hi = -(2 ** (bits - 1)) + int(narrow), 2 ** (bits - 1) - 1
    else:
        lo, hi = 0, 2**bits - 1 - int(narrow)
    return np.clip(np.round(np.asarray(x, np.float64) / scale), lo, hi) * scale


def _scalar(a) -> float:
    a = np.asarray(a, np.float64)
    if a.size != 1:
        raise ValueError("per-tensor scale / bit width expected")
    return float(a.reshape(-1)[0])


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


class _Env:
    """Values of initializers, the inputs, and the nodes run so far (the QONNX quant nodes and
    the cells, in graph order: a stacked cell reads the one before it through a Quant)."""

    def __init__(self, model: onnx.ModelProto, feeds: dict) -> None:
        self.v = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
        self.v.update({k: np.asarray(a, np.float64) for k, a in feeds.items()})

    def quantize(self, node) -> None:
        """A ``Quant`` / ``BipolarQuant`` node."""
        if node.op_type == "Quant":
            a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
            x, s, z, b = (self.v[n] for n in node.input)
            if np.any(z != 0):
                raise ValueError("non-zero zero-point")
            self.v[node.output[0]] = _quant(x, _scalar(s), _scalar(b), a["signed"], a["narrow"])
        else:
            x, s = (self.v[n] for n in node.input)
            self.v[node.output[0]] = np.where(x >= 0, 1.0, -1.0) * _scalar(s)

    def get(self, name):
        return None if name == "" else self.v[name]


def _q(attrs, name):
    return lambda x: _quant(x, attrs[f"{name}_scale"], attrs[f"{name}_bit_width"],
                            attrs[f"{name}_signed"], attrs[f"{name}_narrow"])


def _conv_same(x, w):
    """2-D cross-correlation, stride 1, zero padding k // 2; x (N,C,H,W), w (O,C,k,k)."""
    k = w.shape[-1]
    p = k // 2
    n, c, hh, ww = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    cols = np.empty((n, c, k, k, hh, ww))
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + hh, j:j + ww]
    return np.einsum("nckluv,ockl->nouv", cols, w)


def _lstm_qonnx(env: _Env, node, x):
    ins = [env.get(n) for n in node.input]
    a = {x_.name: helper.get_attribute_value(x_) for x_ in node.attribute}
    xq, h, c = ins[0], ins[1], ins[2]
    w_ii, w_if, w_ic, w_io, w_hi, w_hf, w_hc, w_ho = ins[3:11]
    b_i, b_f, b_c, b_o = ins[11:15]
    names = ["output", "cell_state", "input_acc", "forget_acc", "cell_acc", "output_acc",
             "input_sigmoid", "forget_sigmoid", "cell_tanh", "output_sigmoid", "hidden_state_tanh"]
    qs = {}
    for i, nm in enumerate(names):
        s, _, bw = ins[15 + 3 * i:18 + 3 * i]
        narrow_key = f"{nm}_narrow" if f"{nm}_narrow" in a else f"{nm}_narrow_range"
        qs[nm] = (_scalar(s), _scalar(bw), int(a[f"{nm}_signed"]), int(a[narrow_key]))
        mode = a.get(f"{nm}_rounding_mode", b"ROUND")
        if (mode.decode() if isinstance(mode, bytes) else str(mode)).upper() != "ROUND":
            raise ValueError(f"{nm}_rounding_mode {mode!r}: only ROUND is executed")
    Q = {nm: (lambda v, p=p: _quant(v, *p)) for nm, p in qs.items()}
    if not a.get("batch_first", 0):
        raise ValueError("only batch_first=1 is supported")
    steps = range(xq.shape[1])
    if a.get("reverse_input", 0):
        steps = reversed(steps)
    ys = []
    for t in steps:
        xt = xq[:, t]
        i = Q["input_sigmoid"](_sigmoid(Q["input_acc"](xt @ w_ii.T + h @ w_hi.T + b_i)))
        if a.get("cifg", 0):  # coupled input-forget gate: f = Q_i(1) - i (brevitas, onnxruntime)
            f = Q["input_sigmoid"](np.ones_like(i)) - i
        else:
            f = Q["forget_sigmoid"](_sigmoid(Q["forget_acc"](xt @ w_if.T + h @ w_hf.T + b_f)))
        g = Q["cell_tanh"](np.tanh(Q["cell_acc"](xt @ w_ic.T + h @ w_hc.T + b_c)))
        o = Q["output_sigmoid"](_sigmoid(Q["output_acc"](xt @ w_io.T + h @ w_ho.T + b_o)))
        c = Q["cell_state"](Q["cell_state"](f * c) + Q["cell_state"](i * g))
        h = Q["output"](o * Q["hidden_state_tanh"](np.tanh(c)))
        ys.append(h)
    return {node.output[0]: _in_time_order(ys, a), node.output[1]: h, node.output[2]: c}


def _in_time_order(ys: list, a: dict) -> np.ndarray:
    """The states of every step, ``(N, T, H)`` at the time each was read: a reversed cell's
    output at time t is its state after reading input t (ONNX LSTM ``direction=reverse``,
    brevitas' bidirectional forward)."""
    return np.stack(ys[::-1] if a.get("reverse_input", 0) else ys, 1)


def _gru(env: _Env, node):
    xq, h, w_ih, w_hh, b_ih, b_hh = (env.get(n) for n in node.input)
    a = {x_.name: helper.get_attribute_value(x_) for x_ in node.attribute}
    H = int(a["hidden_size"])
    Q = {q: _q(a, q) for q in GRU_QUANTIZERS}
    b_ih = 0.0 if b_ih is None else b_ih
    b_hh = 0.0 if b_hh is None else b_hh
    h = Q["output"](h)
    gi_all = xq @ w_ih.T + b_ih
    ys = []
    steps = range(xq.shape[1])
    for t in (reversed(steps) if a.get("reverse_input", 0) else steps):
        gi, gh = gi_all[:, t], h @ w_hh.T + b_hh
        r = Q["reset_sigmoid"](_sigmoid(Q["reset_acc"](gi[:, :H] + gh[:, :H])))
        z = Q["update_sigmoid"](_sigmoid(Q["update_acc"](gi[:, H:2 * H] + gh[:, H:2 * H])))
        n = Q["new_tanh"](np.tanh(Q["new_acc"](gi[:, 2 * H:] + r * gh[:, 2 * H:])))
        h = Q["output"]((1.0 - z) * n + z * h)
        ys.append(h)
    return {node.output[0]: _in_time_order(ys, a), node.output[1]: h}


def _convlstm(env: _Env, node):
    xq, h, c, w_x, w_h, b = (env.get(n) for n in node.input)
    a = {x_.name: helper.get_attribute_value(x_) for x_ in node.attribute}
    hc = int(a["hidden_channels"])
    Q = {q: _q(a, q) for q in CONVLSTM_QUANTIZERS}
    h, c = Q["output"](h), Q["cell_state"](c)
    b = 0.0 if b is None else b.reshape(1, -1, 1, 1)
    steps = xq.shape[1] if xq is not None else int(a["steps"])
    ys = []
    for t in range(steps):
        acc = _conv_same(h, w_h)
        if xq is not None:
            acc = acc + _conv_same(xq[:, t], w_x)
        acc = acc + b
        i = Q["input_sigmoid"](_sigmoid(Q["input_acc"](acc[:, :hc])))
        f = Q["forget_sigmoid"](_sigmoid(Q["forget_acc"](acc[:, hc:2 * hc])))
        g = Q["cell_tanh"](np.tanh(Q["cell_acc"](acc[:, 2 * hc:3 * hc])))
        o = Q["output_sigmoid"](_sigmoid(Q["output_acc"](acc[:, 3 * hc:])))
        c = Q["cell_state"](Q["cell_state"](f * c) + Q["cell_state"](i * g))
        h = Q["output"](o * Q["hidden_state_tanh"](np.tanh(c)))
        ys.append(h)
    return {node.output[0]: np.stack(ys, 1), node.output[1]: h, node.output[2]: c}


def run_cell_onnx(path: str | Path, feeds: dict) -> dict[str, np.ndarray]:
    """Execute an exported cell graph (any of the three forms) in float64 NumPy.

    ``feeds`` maps graph input names to arrays (a ``Gather`` of one, as brevitas' ``hx[0]``,
    is run).  Returns ``{output name: array}`` for the
    cell node's outputs (renamed to the graph output names where they differ only by
    trailing ``Unsqueeze`` nodes, as brevitas' LSTM export adds), and the ``Concat`` of cells'
    sequences (a bidirectional layer: the forward and the reversed cell side by side).
    """
    model = onnx.load(str(path))
    env = _Env(model, feeds)
    result: dict[str, np.ndarray] = {}
    cells = {"QuantLSTMCell": lambda n: _lstm_qonnx(env, n, None), "QuantGRUCell": lambda n: _gru(env, n),
             "QuantConvLSTMCell": lambda n: _convlstm(env, n)}
    for node in model.graph.node:
        if node.op_type in ("Quant", "BipolarQuant"):
            env.quantize(node)
        elif node.op_type == "Gather" and node.input[0] in feeds:  # brevitas' hx[0] of a graph input
            axis = int(next((helper.get_attribute_value(x) for x in node.attribute if x.name == "axis"), 0))
            env.v[node.output[0]] = np.take(env.get(node.input[0]), env.get(node.input[1]).astype(np.int64), axis=axis)
        elif node.op_type in cells:
            outputs = cells[node.op_type](node)
            result.update(outputs)
            env.v.update(outputs)
        elif node.op_type == "Concat" and all(i in result for i in node.input):
            axis = int(next(helper.get_attribute_value(x) for x in node.attribute if x.name == "axis"))
            result[node.output[0]] = env.v[node.output[0]] = np.concatenate([result[i] for i in node.input], axis)
        elif node.op_type == "Unsqueeze" and node.input[0] in result:
            axes = env.get(node.input[1]).astype(int).tolist()
            result[node.output[0]] = np.expand_dims(result[node.input[0]], axes)
    outs = {o.name: result[o.name] for o in model.graph.output if o.name in result}
    if not outs:
        raise ValueError(f"{Path(path).name}: no QuantLSTMCell/QuantGRUCell/QuantConvLSTMCell node")
    return outs


def cell_oracle(path: str | Path):
    """For a file with recurrent cells, which no ONNX executor runs: this executor as
    ``verify``'s independent check (an :class:`~tessera.compiler.api.Oracle`), one sample at a
    time; None for any other file (``verify`` runs its own)."""
    from tessera.compiler import api
    from tessera.compiler.frontend.load import RECURRENT_OPS

    model = onnx.load(str(path))
    if not any(n.op_type in RECURRENT_OPS for n in model.graph.node):
        return None
    inits = {i.name for i in model.graph.initializer}  # weights an exporter also lists as inputs
    names = [i.name for i in model.graph.input if i.name not in inits]
    yout = model.graph.output[0].name

    def run(x: np.ndarray | list[np.ndarray]) -> np.ndarray:
        xs = list(x) if isinstance(x, list) else [x]  # several inputs: one array each, in port order
        return np.stack([run_cell_onnx(path, {n: a[i:i + 1].astype(np.float32) for n, a in zip(names, xs)})[yout].reshape(-1)
                         for i in range(len(xs[0]))])

    return api.Oracle("the file run in float64 by the cell executor (models/rnn/onnx_run.py)", run)
