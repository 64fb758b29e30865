"""Quantized LSTM over a whole sequence (brevitas ``QuantLSTMCell``).

Input ``(T, I)`` codes; output every hidden state ``(T, H)`` (``return_sequences``) or the
last one ``(H,)``.  One step, exactly as brevitas' ``_QuantLSTMCell.forward_iter``::

    acc_g = W_xg x + W_hg h + b_g                      exact, g in i f c o
    i, f, o = Qsig_g(sigmoid(Qacc_g(acc_g)))           tables over the Qacc codes
    g       = Qtanh(tanh(Qacc_c(acc_c)))
    c'      = Qc(Qc(f * c) + Qc(i * g))                products exact
    h'      = Qout(o * Qtanh_h(tanh(c')))               table over the cell-state codes

with CIFG (``cifg=1``): ``f = Qsig_i(1) - i`` (brevitas: "1 - input gate", the one
quantized by the input sigmoid's quantizer).  ``reverse`` processes the steps last to
first; outputs stay in processing order (as brevitas' cell returns them).

The step is written once (:func:`step`) on :mod:`.cellprog`'s interface and executed by
the integer reference, the onnxruntime emitter and the interval analysis that types the
HLS kernel (``hls_templates/rnn``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from . import cellprog as cp
from .quant import Attrs as QuantAttrs

GATES = ("i", "f", "c", "o")


@dataclass(frozen=True, eq=False)
class Gate:
    wx: cp.Weights  # (H, I)
    wh: cp.Weights  # (H, H)
    bias: np.ndarray | None  # (H,) codes
    bias_frac: int
    acc: QuantAttrs  # the gate's accumulator quantizer
    act: cp.Act  # sigmoid (i, f, o) or tanh (c) with its output quantizer


@dataclass(frozen=True, eq=False)
class Attrs:
    gates: tuple[Gate, Gate, Gate, Gate]  # i, f, c, o
    cell: QuantAttrs  # cell state
    cell_act: cp.Act  # tanh of the cell state with its quantizer
    out: QuantAttrs  # hidden state / output
    h0: np.ndarray  # (H,) codes of `out`
    c0: np.ndarray  # (H,) codes of `cell`
    cifg: bool = False
    reverse: bool = False
    return_sequences: bool = True

    @property
    def hidden(self) -> int:
        return int(self.gates[0].wh.codes.shape[0])


def gate_acc(A, x: cp.Fx | None, h: cp.Fx, gate: Gate, name: str, conv: bool = False) -> cp.Fx:
    """``W_x x + W_h h + b`` exactly (matrix products, or 'same' convolutions for ConvLSTM;
    no ``W_x x`` term for a cell without input); partial sums named for the HLS types."""
    acc = cp.named(A, f"{name}_ah", cp.linear(A, h, gate.wh, conv=conv))
    if x is not None:
        acc = cp.add(A, cp.named(A, f"{name}_ax", cp.linear(A, x, gate.wx, conv=conv)), acc)
    if gate.bias is not None:
        acc = cp.add(A, acc, cp.bias_fx(A, gate.bias, gate.bias_frac, conv=conv))
    return cp.named(A, f"{name}_acc", acc)


def gated_state(A, accs: dict, gates: dict, c: cp.Fx, cell: QuantAttrs, cell_act: cp.Act, out: QuantAttrs,
                cifg: bool) -> tuple[cp.Fx, cp.Fx]:
    """LSTM gating from the four exact gate accumulators (shared with ConvLSTM)."""
    a = {}
    for g in GATES:
        if g == "f" and cifg:
            continue
        q = cp.named(A, f"{g}_q", cp.requant(A, accs[g], gates[g].acc))
        a[g] = cp.named(A, f"{g}_act", cp.activate(A, q, gates[g].acc, gates[g].act))
    if cifg:
        one = int(np.clip(1 << gates["i"].act.out.out.frac, gates["i"].act.out.qmin, gates["i"].act.out.qmax))
        a["f"] = cp.named(A, "f_act", cp.const_minus(A, one, a["i"]))
    fc = cp.requant(A, cp.named(A, "fc", cp.mul(A, a["f"], c)), cell)
    ig = cp.requant(A, cp.named(A, "ig", cp.mul(A, a["i"], a["c"])), cell)
    fc, ig = cp.named(A, "fc_q", fc), cp.named(A, "ig_q", ig)
    c_new = cp.named(A, "c_new", cp.requant(A, cp.named(A, "c_sum", cp.add(A, fc, ig)), cell))
    t = cp.named(A, "c_tanh", cp.activate(A, c_new, cell, cell_act))
    h_new = cp.named(A, "h_new", cp.requant(A, cp.named(A, "h_prod", cp.mul(A, a["o"], t)), out))
    return h_new, c_new


class Lstm(cp.RecurrentOp):
    name = "lstm"

    def state_quants(self, attrs: Attrs):
        return [attrs.out, attrs.cell]

    def initial(self, attrs: Attrs):
        return [attrs.h0, attrs.c0]

    def step(self, A, attrs: Attrs, x, state):
        h, c = state
        gates = dict(zip(GATES, attrs.gates))
        accs = {g: gate_acc(A, x, h, gates[g], g) for g in GATES if not (g == "f" and attrs.cifg)}
        return list(gated_state(A, accs, gates, c, attrs.cell, attrs.cell_act, attrs.out, attrs.cifg))

    def check(self, attrs: Attrs, x: TensorType, node: str) -> None:
        check_dense_cell("LSTM", attrs, x, node)
        check_table_inputs([attrs.cell, *(g.acc for g in attrs.gates)], node)

    def lower(self, attrs: Attrs, hl, node, ins, out):
        from ..lower.rnn import lower_lstm

        lower_lstm(attrs, hl, node, ins[0], out, self.analyze(attrs, ins[0]))

    def macs(self, attrs, ins, out):
        t, i = ins[0].shape
        gates = 3 if attrs.cifg else 4
        return int(t * gates * attrs.hidden * (i + attrs.hidden))


def check_dense_cell(what: str, attrs, x: TensorType, node: str) -> None:
    """A (steps, features) input and (H, features) / (H, H) gate weights."""
    if len(x.shape) != 2:
        raise UnsupportedModelError(f"node '{node}': {what} input must be (steps, features), got {x.shape}")
    for g in attrs.gates:
        if g.wx.codes.shape != (attrs.hidden, x.shape[1]) or g.wh.codes.shape != (attrs.hidden, attrs.hidden):
            raise UnsupportedModelError(f"node '{node}': {what} weight shapes do not match input {x.shape}")
    check_biases(what, attrs.gates, attrs.hidden, node)


def check_biases(what: str, gates, hidden: int, node: str) -> None:
    """Every gate bias (``bias``, or GRU's ``bx`` / ``bh``) has one value per hidden unit."""
    for g in gates:
        for b in (getattr(g, k, None) for k in ("bias", "bx", "bh")):
            if b is not None and np.shape(b) != (hidden,):
                raise UnsupportedModelError(f"node '{node}': {what} gate bias of shape {np.shape(b)}, expected ({hidden},)")


def check_table_inputs(quants, node: str) -> None:
    for q in quants:
        if q.out.width > 16:
            raise UnsupportedModelError(f"node '{node}': a {q.out.width}-bit quantizer feeds a lookup table (max 16 bits)")


OP = Lstm()
