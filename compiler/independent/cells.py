"""The independent executor's recurrent cells: brevitas' ``QuantLSTMCell`` and Tessera's
``QuantGRUCell`` / ``QuantConvLSTMCell`` (docs/rnn_export.md), run in float64 as that document
writes them, for ONNX's reference evaluator (:func:`cell_ops`).

No ONNX runtime executes these custom ops, so :mod:`.independent` runs them with these
functions, beside qonnx's functions for the QONNX quantizers: the user's whole file -- the
layers before a cell, the cell, a selection of its steps, a head after it -- runs in one
evaluator.  Every internal quantizer is qonnx's own ``quant`` (any rounding mode, QONNX's zero
point); the rest is numpy in float64 (the matrix products, ``1 / (1 + exp(-x))``, ``tanh``).
Nothing here is shared with Tessera's reading of the cells (``ops/lstm.py``, ``ops/gru.py``,
``ops/convlstm.py``, ``ops/cells/``: integer programs over codes): the two meet only at
``verify``'s comparison.  The tests require this executor to agree exactly with brevitas'
forward of the module a file was exported from (``tests/models/test_rnn_cells.py``).
"""

from __future__ import annotations

import numpy as np

#: The internal quantizers of each cell, in the order brevitas' QuantLSTMCell lists their
#: (scale, zero point, bit width) inputs, and the names of the GRU's and ConvLSTM's attributes.
LSTM_QUANTIZERS = ("output", "cell_state", "input_acc", "forget_acc", "cell_acc", "output_acc", "input_sigmoid",
                   "forget_sigmoid", "cell_tanh", "output_sigmoid", "hidden_state_tanh")
GRU_QUANTIZERS = ("reset_acc", "update_acc", "new_acc", "reset_sigmoid", "update_sigmoid", "new_tanh", "output")
CONVLSTM_QUANTIZERS = ("input_acc", "forget_acc", "cell_acc", "output_acc", "input_sigmoid", "forget_sigmoid",
                       "cell_tanh", "output_sigmoid", "hidden_state_tanh", "cell_state", "output")
#: The custom-op domain of Tessera's own cells.
TESSERA_DOMAIN = "tessera.custom_op"


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class Quantizer:
    """One internal quantizer of a cell: qonnx's ``quant`` with its scale, zero point, bit
    width, signedness, narrow range and rounding mode."""

    def __init__(self, scale, zero, bits, signed, narrow, rounding) -> None:
        self.params = tuple(np.asarray(v, dtype=np.float64) for v in (scale, 0.0 if zero is None else zero, bits))
        self.signed, self.narrow, self.rounding = bool(int(signed)), bool(int(narrow)), _text(rounding).upper()

    def __call__(self, x) -> np.ndarray:
        from qonnx.custom_op.general.quant import quant

        scale, zero, bits = self.params
        return quant(np.asarray(x, dtype=np.float64), scale, zero, bits, self.signed, self.narrow, self.rounding)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _named(attributes: dict, names) -> dict[str, Quantizer]:
    """Quantizers given as ``<q>_scale`` / ``<q>_bit_width`` / ``<q>_signed`` / ``<q>_narrow`` /
    ``<q>_rounding_mode`` attributes (the GRU's and the ConvLSTM's)."""
    return {q: Quantizer(attributes[f"{q}_scale"], None, attributes[f"{q}_bit_width"], attributes.get(f"{q}_signed", 1),
                         attributes.get(f"{q}_narrow", 0), attributes.get(f"{q}_rounding_mode", "ROUND"))
            for q in names}


def _state(v: np.ndarray | None, n: int, hidden: int) -> np.ndarray:
    """An initial state as ``(N, H)``: zeros where absent, one ``(H,)`` state for every sample,
    or one per sample in any shape of ``N * H`` values (brevitas' ``hx`` of (layers, N, H))."""
    if v is None:
        return np.zeros((n, hidden))
    return np.reshape(v, (n, hidden)) if v.size == n * hidden else np.broadcast_to(np.reshape(v, (-1, hidden)), (n, hidden))


def _in_time_order(ys: list, reverse: bool) -> np.ndarray:
    """The states of every step, ``(N, T, H)`` at the time each was read: a reversed cell's
    output at time t is its state after reading input t (ONNX LSTM ``direction=reverse``,
    brevitas' bidirectional forward)."""
    return np.stack(ys[::-1] if reverse else ys, 1)


def _batch_first(x: np.ndarray | None, attributes: dict) -> np.ndarray | None:
    """The cell's input as ``(N, T, ...)``: brevitas' ``batch_first=0`` cells read ``(T, N, ...)``."""
    return x if x is None or attributes.get("batch_first", 1) else np.swapaxes(x, 0, 1)


def _as_written(y: np.ndarray, attributes: dict) -> np.ndarray:
    """The output sequence in the cell's own axis order (``(T, N, H)`` for ``batch_first=0``)."""
    return y if attributes.get("batch_first", 1) else np.swapaxes(y, 0, 1)


def lstm_cell(inputs: list, attributes: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """brevitas' ``QuantLSTMCell`` (48 inputs: X, H0, C0, 8 weights, 4 biases, then scale / zero
    point / bit width of the 11 quantizers): its sequence, last hidden and last cell state."""
    x, h, c = _batch_first(inputs[0], attributes), inputs[1], inputs[2]
    w_ii, w_if, w_ic, w_io, w_hi, w_hf, w_hc, w_ho = inputs[3:11]
    b_i, b_f, b_c, b_o = (0.0 if b is None else b for b in inputs[11:15])
    Q = {}
    for k, q in enumerate(LSTM_QUANTIZERS):
        scale, zero, bits = inputs[15 + 3 * k: 18 + 3 * k]
        narrow = attributes.get(f"{q}_narrow", attributes.get(f"{q}_narrow_range", 0))
        Q[q] = Quantizer(scale, zero, bits, attributes.get(f"{q}_signed", 1), narrow,
                         attributes.get(f"{q}_rounding_mode", "ROUND"))
    n, hidden = x.shape[0], w_hi.shape[0]
    h, c = _state(h, n, hidden), _state(c, n, hidden)
    reverse = bool(attributes.get("reverse_input", 0))
    ys = []
    for t in (reversed(range(x.shape[1])) if reverse else range(x.shape[1])):
        xt = x[:, t]
        i = Q["input_sigmoid"](_sigmoid(Q["input_acc"](xt @ w_ii.T + h @ w_hi.T + b_i)))
        if attributes.get("cifg", 0):  # coupled input-forget gate: f = Q_i(1) - i (brevitas, onnxruntime)
            f = Q["input_sigmoid"](np.ones_like(i)) - i
        else:
            f = Q["forget_sigmoid"](_sigmoid(Q["forget_acc"](xt @ w_if.T + h @ w_hf.T + b_f)))
        g = Q["cell_tanh"](np.tanh(Q["cell_acc"](xt @ w_ic.T + h @ w_hc.T + b_c)))
        o = Q["output_sigmoid"](_sigmoid(Q["output_acc"](xt @ w_io.T + h @ w_ho.T + b_o)))
        c = Q["cell_state"](Q["cell_state"](f * c) + Q["cell_state"](i * g))
        h = Q["output"](o * Q["hidden_state_tanh"](np.tanh(c)))
        ys.append(h)
    return _as_written(_in_time_order(ys, reverse), attributes), h, c


def gru_cell(inputs: list, attributes: dict) -> tuple[np.ndarray, np.ndarray]:
    """Tessera's ``QuantGRUCell`` (X, H0, W_ih, W_hh, b_ih, b_hh; gate order r z n): its
    sequence and last hidden state."""
    x = _batch_first(inputs[0], attributes)
    h, w_ih, w_hh, b_ih, b_hh = (list(inputs[1:]) + [None] * 5)[:5]
    hidden = int(attributes["hidden_size"])
    Q = _named(attributes, GRU_QUANTIZERS)
    b_ih = 0.0 if b_ih is None else b_ih
    b_hh = 0.0 if b_hh is None else b_hh
    h = Q["output"](_state(h, x.shape[0], hidden))
    gi_all = x @ w_ih.T + b_ih
    reverse = bool(attributes.get("reverse_input", 0))
    ys = []
    for t in (reversed(range(x.shape[1])) if reverse else range(x.shape[1])):
        gi, gh = gi_all[:, t], h @ w_hh.T + b_hh
        r = Q["reset_sigmoid"](_sigmoid(Q["reset_acc"](gi[:, :hidden] + gh[:, :hidden])))
        z = Q["update_sigmoid"](_sigmoid(Q["update_acc"](gi[:, hidden:2 * hidden] + gh[:, hidden:2 * hidden])))
        n = Q["new_tanh"](np.tanh(Q["new_acc"](gi[:, 2 * hidden:] + r * gh[:, 2 * hidden:])))
        h = Q["output"]((1.0 - z) * n + z * h)
        ys.append(h)
    return _as_written(_in_time_order(ys, reverse), attributes), h


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


def convlstm_cell(inputs: list, attributes: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tessera's ``QuantConvLSTMCell`` (X or none -- a forecaster reading its H0 / C0 --, H0,
    C0, W_x, W_h, b; gate order i f c o, 'same' convolutions): its sequence of maps, last h and c."""
    x, h, c, w_x, w_h, b = (list(inputs) + [None] * 6)[:6]
    x = _batch_first(x, attributes)
    hc = int(attributes["hidden_channels"])
    Q = _named(attributes, CONVLSTM_QUANTIZERS)
    h, c = Q["output"](h), Q["cell_state"](c)
    b = 0.0 if b is None else b.reshape(1, -1, 1, 1)
    ys = []
    for t in range(x.shape[1] if x is not None else int(attributes["steps"])):
        acc = _conv_same(h, w_h)
        if x is not None:
            acc = acc + _conv_same(x[:, t], w_x)
        acc = acc + b
        i = Q["input_sigmoid"](_sigmoid(Q["input_acc"](acc[:, :hc])))
        f = Q["forget_sigmoid"](_sigmoid(Q["forget_acc"](acc[:, hc:2 * hc])))
        g = Q["cell_tanh"](np.tanh(Q["cell_acc"](acc[:, 2 * hc:3 * hc])))
        o = Q["output_sigmoid"](_sigmoid(Q["output_acc"](acc[:, 3 * hc:])))
        c = Q["cell_state"](Q["cell_state"](f * c) + Q["cell_state"](i * g))
        h = Q["output"](o * Q["hidden_state_tanh"](np.tanh(c)))
        ys.append(h)
    return _as_written(np.stack(ys, 1), attributes), h, c


def cell_ops(base: type, qonnx_domains: tuple[str, ...]) -> list[type]:
    """ONNX reference-evaluator ops (subclasses of ``base``, onnx's ``OpRun``) for the three
    cells: QuantLSTMCell in every QONNX domain, the GRU and ConvLSTM cells in Tessera's."""
    def op(name: str, domain: str, cell) -> type:
        def run(self, *inputs, **attributes):
            values = [None if v is None else np.asarray(v, dtype=np.float64) for v in inputs]
            return tuple(np.asarray(y, dtype=np.float64) for y in cell(values, attributes))[:len(self.output)]

        return type(name, (base,), {"op_domain": domain, "_run": run, "__module__": __name__})

    return [op("QuantLSTMCell", domain, lstm_cell) for domain in qonnx_domains] + \
        [op("QuantGRUCell", TESSERA_DOMAIN, gru_cell), op("QuantConvLSTMCell", TESSERA_DOMAIN, convlstm_cell)]


__all__ = ["CONVLSTM_QUANTIZERS", "GRU_QUANTIZERS", "LSTM_QUANTIZERS", "Quantizer", "cell_ops", "convlstm_cell",
           "gru_cell", "lstm_cell"]
