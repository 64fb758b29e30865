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
the integer semantics, the onnxruntime reference and the interval analysis that types the
HLS kernel (``hls_templates/rnn``, lowered here as ``TesseraLSTM``; the gated body is shared
with ConvLSTM).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...hls_templates import render
from ..ir.types import TensorType
from . import cellprog as cp
from .cellhls import (add_weights_layer, bias_codes, check_dense_cell, check_table_inputs, cint, codebook, gate_tables,
                      int_precision, quant_fields, recurrent_work, require_zero_states, sequence_extension, shift)
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
        a["f"] = cp.named(A, "f_act", cp.const_minus(A, gates["i"].act.one, a["i"]))
    fc = cp.requant(A, cp.named(A, "fc", cp.mul(A, a["f"], c)), cell)
    ig = cp.requant(A, cp.named(A, "ig", cp.mul(A, a["i"], a["c"])), cell)
    fc, ig = cp.named(A, "fc_q", fc), cp.named(A, "ig_q", ig)
    c_new = cp.named(A, "c_new", cp.requant(A, cp.named(A, "c_sum", cp.add(A, fc, ig)), cell))
    t = cp.named(A, "c_tanh", cp.activate(A, c_new, cell, cell_act))
    h_new = cp.named(A, "h_new", cp.requant(A, cp.named(A, "h_prod", cp.mul(A, a["o"], t)), out))
    return h_new, c_new


def lstm_body(A: cp.IntervalArith, p: str, gates: dict, cq: QuantAttrs, cell_act: cp.Act, oq: QuantAttrs,
              cifg: bool, has_input: bool = True) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """Types, constants and gate structs of one LSTM-gated cell (names in ``A`` prefixed by
    ``p``); returns (body, concatenated biases, gate tables, cell tanh table)."""
    T = {k[len(p):]: v for k, v in A.types.items() if k.startswith(p)}
    H = gates["i"].wh.codes.shape[0]
    table, offsets = gate_tables([gates[g] for g in GATES])
    biases, blocks = [], []
    for k, g in enumerate(GATES):
        gate = gates[g]
        if cifg and g == "f":
            blocks.append(render("rnn/cifg_gate.tpl", name=g, act_t=cint(T["f_act"])))
            biases.append(np.zeros(H, dtype=np.int64))
            continue
        b, bf = bias_codes(gate.bias, gate.bias_frac, H, T[f"{g}_acc"].frac)
        biases.append(b)
        blocks.append(render(
            "rnn/lstm_gate.tpl", name=g, ax_t=cint(T[f"{g}_ax"]) if has_input else "ap_int<2>",
            ah_t=cint(T[f"{g}_ah"]), acc_t=cint(T[f"{g}_acc"]), q_t=cint(T[f"{g}_q"]), act_t=cint(T[f"{g}_act"]),
            sh_ax=shift(T, f"{g}_acc", f"{g}_ax") if has_input else 0, sh_ah=shift(T, f"{g}_acc", f"{g}_ah"),
            sh_b=shift(T, f"{g}_acc", bf), table_offset=offsets[k], **quant_fields(gate.acc, T[f"{g}_acc"].frac)))
    types = "\n".join([f"    typedef {cint(oq.out)} h_t;", f"    typedef {cint(cq.out)} c_t;",
                       *(f"    typedef {cint(T[n])} {n}_t;" for n in ("fc", "ig", "fc_q", "ig_q", "c_sum", "c_tanh", "h_prod"))])
    body = render(
        "rnn/lstm_body.tpl", types=types, gates="\n".join(blocks), cifg_one=gates["i"].act.one,
        sh_fc=T["fc"].frac - cq.out.frac, sh_ig=T["ig"].frac - cq.out.frac, sh_sum_fc=shift(T, "c_sum", "fc_q"),
        sh_sum_ig=shift(T, "c_sum", "ig_q"), sh_c=T["c_sum"].frac - cq.out.frac, c_mode=cq.rounding.cpp,
        c_min=cq.qmin, c_max=cq.qmax, sh_h=T["h_prod"].frac - oq.out.frac, h_mode=oq.rounding.cpp,
        h_min=oq.qmin, h_max=oq.qmax)
    return body, np.concatenate(biases), table, cell_act.table(cq)


class Lstm(cp.RecurrentOp[Attrs]):
    name = "lstm"
    extensions = (sequence_extension("TesseraLSTM", "lstm_", ("wx", "wh", "b", "gate_table", "cell_table"), ("cifg",)),)

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

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        A = self.analyze(attrs, x)
        require_zero_states([attrs.h0, attrs.c0], node, "LSTM")
        gates = dict(zip(GATES, attrs.gates))
        kind, stored, wprec = codebook([gates[g].wx for g in GATES] + [gates[g].wh for g in GATES])
        wx, wh = np.concatenate(stored[:4]), np.concatenate(stored[4:])
        body, b, table, ctable = lstm_body(A, "", gates, attrs.cell, attrs.cell_act, attrs.out, attrs.cifg)
        body = f"    typedef {cint(x.ftype)} x_t;\n" + body
        add_weights_layer(hls, node, out, x, "TesseraLSTM", {
            "n_hidden": attrs.hidden, "reverse": attrs.reverse, "return_sequences": attrs.return_sequences,
            "cifg": attrs.cifg, "wkind": kind.cpp, "body": body,
        }, {"wx": wx, "wh": wh, "b": b, "gate_table": table, "cell_table": ctable}, {
            "wx": wprec, "wh": wprec, "b": int_precision(int(b.min()), int(b.max())),
            "gate_table": int_precision(int(table.min()), int(table.max())),
            "cell_table": int_precision(int(ctable.min()), int(ctable.max())),
        })

    def macs(self, attrs, ins, out):
        t, i = ins[0].shape
        gates = 3 if attrs.cifg else 4
        return int(t * gates * attrs.hidden * (i + attrs.hidden))

    def cost(self, attrs: Attrs, ins, out, io):
        t, i = ins[0].shape
        gates = 3 if attrs.cifg else 4
        return recurrent_work(self, attrs, ins, out, states=3, mults=gates * (i + attrs.hidden), taps=i + attrs.hidden,
                              steps=t * attrs.hidden)


OP = Lstm()
