"""Quantized LSTM over a whole sequence (brevitas ``QuantLSTMCell``).

Input ``(T, I)`` codes (and with ``h0_input`` the initial hidden state's ``H`` codes, the
output quantizer's, as a second input: kernel ``TesseraLSTMH0``; with ``c0_input`` too the
initial cell state's, the cell state quantizer's, as a third: ``TesseraLSTMStates``); output every hidden state
``(T, H)`` (``return_sequences``) or the last one ``(H,)``.  One step, exactly as brevitas'
``_QuantLSTMCell.forward_iter``::

    acc_g = W_xg x + W_hg h + b_g                      exact, g in i f c o
    i, f, o = Qsig_g(sigmoid(Qacc_g(acc_g)))           tables over the Qacc codes
    g       = Qtanh(tanh(Qacc_c(acc_c)))
    c'      = Qc(Qc(f * c) + Qc(i * g))                products exact
    h'      = Qout(o * Qtanh_h(tanh(c')))               table over the cell-state codes

with CIFG (``cifg=1``): ``f = Qsig_i(1) - i`` (brevitas: "1 - input gate", the one
quantized by the input sigmoid's quantizer).  ``reverse`` processes the steps last to
first; the output at time ``t`` is the state after reading input ``t`` (time order, as ONNX's
``LSTM`` with ``direction=reverse`` and brevitas' bidirectional forward return it).

Float scales (brevitas' default quantizers) on any quantizer, the weights, the input and
the output: the values carry their scales' odd parts and a requantization between scales
that are not a power of two apart is the proven step of :func:`.cells.program.requant` (the bias
of another float grid as its per-row offset).

The step is written once (:func:`step`) on :mod:`.cells.program`'s interface and executed by
the integer semantics, the onnxruntime reference and the interval analysis that types the
HLS kernel (``hls_templates/rnn``, lowered here as ``TesseraLSTM``; the gated body is shared
with ConvLSTM).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ...hls_templates import render
from ..errors import UnsupportedModelError
from ..ir.types import TensorType
from .base.extension import Extension, out_shape_attr
from .cells import program as cp
from .cells.hardware import (add_weights_layer, bias_codes, cell_weights, check_dense_cell, check_table_inputs, cint,
                             codebook, gate_tables, int_precision, recurrent_work, require_zero_states, shift, unit_major)
from .cells.kernel import (CifgGateStruct, LstmCall, LstmCellBody, LstmConfig, LstmGateStruct, LstmH0Call, LstmStatesCall,
                           requant)
from .quant import Attrs as QuantAttrs

GATES = ("i", "f", "c", "o")
#: the kernel of each set of initial states given as inputs (none: zero states)
KERNELS = {(): "TesseraLSTM", (0,): "TesseraLSTMH0", (0, 1): "TesseraLSTMStates"}


@dataclass(frozen=True, eq=False)
class Gate:
    wx: cp.Weights  # (H, I)
    wh: cp.Weights  # (H, H)
    bias: np.ndarray | None  # (H,) codes
    bias_frac: int
    acc: QuantAttrs  # the gate's accumulator quantizer
    act: cp.Act  # sigmoid (i, f, o) or tanh (c) with its output quantizer
    acc_mult: int = 1  # the accumulator quantizer's scale is acc_mult * 2**-acc.out.frac
    bias_mult: int = 1  # the biases are bias * bias_mult * 2**-bias_frac


def scaled(gate: Gate, dot: cp.Fx) -> bool:
    """Whether the gate's requantization is a float-scale step (the bias then becomes its
    per-row offset) rather than a shift of the exact sum."""
    return dot.mult != gate.acc_mult or (gate.bias is not None and gate.bias_mult != dot.mult)


def bias_offsets(gate: Gate) -> list[Fraction]:
    """The bias of each row in codes of the accumulator quantizer, exactly."""
    rows = gate.wh.codes.shape[0]
    if gate.bias is None:
        return [Fraction(0)] * rows
    unit = cp.scale_of(gate.bias_mult, gate.bias_frac) / cp.scale_of(gate.acc_mult, gate.acc.out.frac)
    return [int(b) * unit for b in np.asarray(gate.bias).reshape(-1)]


@dataclass(frozen=True, eq=False)
class Attrs:
    gates: tuple[Gate, Gate, Gate, Gate]  # i, f, c, o
    cell: QuantAttrs  # cell state
    cell_act: cp.Act  # tanh of the cell state with its quantizer
    out: QuantAttrs  # hidden state / output
    h0: np.ndarray  # (H,) codes of `out` (zeros, unread, when the op's second input is h0)
    c0: np.ndarray  # (H,) codes of `cell`
    cifg: bool = False
    reverse: bool = False
    return_sequences: bool = True
    cell_mult: int = 1  # float scales: the cell state's and output's scales are mult * 2**-frac
    out_mult: int = 1
    x_scale: tuple[int, int] | None = None  # (frac, mult) of float-scaled input codes
    h0_input: bool = False  # the initial hidden state is the op's second input (codes of `out`)
    c0_input: bool = False  # and the initial cell state its third (codes of `cell`; only with h0_input)

    @property
    def hidden(self) -> int:
        return int(self.gates[0].wh.codes.shape[0])


def gate_acc(A, x: cp.Fx | None, h: cp.Fx, gate: Gate, name: str, conv: bool = False) -> cp.Fx:
    """``W_x x + W_h h + b`` exactly (matrix products, or 'same' convolutions for ConvLSTM;
    no ``W_x x`` term for a cell without input); partial sums named for the HLS types."""
    acc = cp.named(A, f"{name}_ah", cp.linear(A, h, gate.wh, conv=conv))
    if x is not None:
        acc = cp.add(A, cp.named(A, f"{name}_ax", cp.linear(A, x, gate.wx, conv=conv)), acc)
    if gate.bias is not None and not scaled(gate, acc):
        acc = cp.add(A, acc, cp.bias_fx(A, gate.bias, gate.bias_frac, conv=conv, mult=gate.bias_mult))
    return cp.named(A, f"{name}_acc", acc)


def gated_state(A, accs: dict, gates: dict, c: cp.Fx, cell: QuantAttrs, cell_act: cp.Act, out: QuantAttrs,
                cifg: bool, carry: bool = False, cell_mult: int = 1, out_mult: int = 1) -> tuple[cp.Fx, cp.Fx]:
    """LSTM gating from the four exact gate accumulators (shared with ConvLSTM).  ``carry``:
    activations are codes whose values carry their float scales (:func:`.cells.program.activate`);
    a requantization between scales that differ by more than a power of two is the exact
    step of :func:`.cells.program.requant`."""
    a = {}
    for g in GATES:
        if g == "f" and cifg:
            continue
        gate, acc = gates[g], accs[g]
        offsets = bias_offsets(gate) if scaled(gate, acc) else None
        q = cp.named(A, f"{g}_q", cp.requant(A, acc, gate.acc, gate.acc_mult, f"{g}_acc", offsets))
        a[g] = cp.named(A, f"{g}_act", cp.activate(A, q, gate.acc, gate.act, carry))
    if cifg:
        one = gates["i"].act.one_code if carry else gates["i"].act.one
        a["f"] = cp.named(A, "f_act", cp.const_minus(A, one, a["i"]))
    fc = cp.requant(A, cp.named(A, "fc", cp.mul(A, a["f"], c)), cell, cell_mult, "fc")
    ig = cp.requant(A, cp.named(A, "ig", cp.mul(A, a["i"], a["c"])), cell, cell_mult, "ig")
    fc, ig = cp.named(A, "fc_q", fc), cp.named(A, "ig_q", ig)
    c_new = cp.named(A, "c_new", cp.requant(A, cp.named(A, "c_sum", cp.add(A, fc, ig)), cell, cell_mult))
    t = cp.named(A, "c_tanh", cp.activate(A, c_new, cell, cell_act, carry))
    h_new = cp.named(A, "h_new", cp.requant(A, cp.named(A, "h_prod", cp.mul(A, a["o"], t)), out, out_mult, "h_prod"))
    return h_new, c_new


def lstm_gate(A: cp.IntervalArith, T: dict, p: str, g: str, gate: Gate, offset: int,
              has_input: bool) -> tuple[LstmGateStruct, np.ndarray]:
    """The fields of gate ``g`` (names in ``A`` prefixed by ``p``; ``T``: their types without
    it) and its biases: its bias codes, or with a float-scale requantization its proven
    per-row adds."""
    H = gate.wh.codes.shape[0]
    acc = f"{g}_acc"
    rq = requant(A, p + acc, gate.acc)
    scaled = A.forms.get(p + acc) is not None
    if scaled:
        adds = A.forms[p + acc].adds
        if any(abs(c) >= 2**53 for c in adds):
            raise UnsupportedModelError(f"gate {g}: a proven add constant needs more than 53 bits")
        bias, bias_shift = np.array(adds, dtype=np.int64), 0
    else:
        bias, frac = bias_codes(gate.bias, gate.bias_frac, H, T[acc].frac)
        bias_shift = shift(T, acc, frac)
    fields = LstmGateStruct(
        name=g, ax_t=cint(T[f"{g}_ax"]) if has_input else "ap_int<2>", ah_t=cint(T[f"{g}_ah"]), acc_t=cint(T[acc]),
        requant_t=rq.requant_t, q_t=cint(T[f"{g}_q"]), act_t=cint(T[f"{g}_act"]),
        ax_shift=shift(T, acc, f"{g}_ax") if has_input else 0, ah_shift=shift(T, acc, f"{g}_ah"), bias_shift=bias_shift,
        ax_factor=cp.factor(A.mults[f"{p}{g}_ax"], A.mults[p + acc]) if has_input else 1,
        ah_factor=cp.factor(A.mults[f"{p}{g}_ah"], A.mults[p + acc]), scaled=scaled, requant_mult=rq.mult,
        requant_shift=rq.shift, requant_mode=rq.mode, qmin=gate.acc.qmin, qmax=gate.acc.qmax, table_offset=offset)
    return fields, bias


def lstm_body(A: cp.IntervalArith, p: str, gates: dict, cq: QuantAttrs, cell_act: cp.Act, oq: QuantAttrs,
              cifg: bool, has_input: bool = True, carry: bool = False,
              cell_mult: int = 1) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """Types, constants and gate structs of one LSTM-gated cell (names in ``A`` prefixed by
    ``p``); returns (body, concatenated biases, gate tables, cell tanh table).  A gate with a
    float-scale requantization holds its proven per-row adds in the bias array."""
    T = {k[len(p):]: v for k, v in A.types.items() if k.startswith(p)}
    H = gates["i"].wh.codes.shape[0]
    table, offsets = gate_tables([gates[g] for g in GATES], carry)
    biases, blocks = [], []
    for k, g in enumerate(GATES):
        if cifg and g == "f":
            blocks.append(render(CifgGateStruct(name=g, act_t=cint(T["f_act"]))))
            biases.append(np.zeros(H, dtype=np.int64))
            continue
        fields, bias = lstm_gate(A, T, p, g, gates[g], offsets[k], has_input)
        blocks.append(render(fields))
        biases.append(bias)
    fc, ig, hidden = requant(A, p + "fc", cq), requant(A, p + "ig", cq), requant(A, p + "h_prod", oq)
    i_act = gates["i"].act
    body = render(LstmCellBody(
        table_entries=table.size, h_t=cint(oq.out), c_t=cint(cq.out), fc_t=cint(T["fc"]), ig_t=cint(T["ig"]),
        fc_q_t=cint(T["fc_q"]), ig_q_t=cint(T["ig_q"]), c_sum_t=cint(T["c_sum"]), c_tanh_t=cint(T["c_tanh"]),
        h_prod_t=cint(T["h_prod"]), fc_requant_t=fc.requant_t, ig_requant_t=ig.requant_t,
        hidden_requant_t=hidden.requant_t, cifg_one=i_act.one_code if carry else i_act.one,
        fc_shift=fc.shift, fc_mode=fc.mode, fc_mult=fc.mult, fc_add=fc.add,
        ig_shift=ig.shift, ig_mode=ig.mode, ig_mult=ig.mult, ig_add=ig.add,
        sum_fc_shift=shift(T, "c_sum", "fc_q"), sum_ig_shift=shift(T, "c_sum", "ig_q"),
        cell_shift=T["c_sum"].frac - cq.out.frac, cell_mode=cq.rounding, cell_min=cq.qmin, cell_max=cq.qmax,
        hidden_shift=hidden.shift, hidden_rounding=oq.rounding, hidden_mode=hidden.mode, hidden_mult=hidden.mult,
        hidden_add=hidden.add, hidden_min=oq.qmin, hidden_max=oq.qmax, gates="\n".join(blocks)))
    return body, unit_major(biases), table, cell_act.codes(cq, cell_mult) if carry else cell_act.table(cq)


class Lstm(cp.RecurrentOp[Attrs]):
    name = "lstm"
    carries_scales = True
    extensions = tuple(Extension(
        layer, doc, "rnn", "nnet_tessera_rnn.h", config=LstmConfig, call=call, output_shape=out_shape_attr,
        attributes=("weight_products",), weights=cell_weights(("wx", "wh", "b", "gate_table", "cell_table")))
        for layer, doc, call in (
            ("TesseraLSTM", "A quantized LSTM over a whole sequence, on integer codes.", LstmCall),
            ("TesseraLSTMH0", "The same LSTM from an initial hidden state, its second input.", LstmH0Call),
            ("TesseraLSTMStates", "The same LSTM from initial hidden and cell states, its second and third inputs.",
             LstmStatesCall)))

    def state_quants(self, attrs: Attrs):
        return [attrs.out, attrs.cell]

    def state_mults(self, attrs: Attrs):
        return [attrs.out_mult, attrs.cell_mult]

    def input_scale(self, attrs: Attrs, x: TensorType):
        return attrs.x_scale if attrs.x_scale is not None else (x.ftype.frac, 1)

    def initial(self, attrs: Attrs):
        return [attrs.h0, attrs.c0]

    def state_inputs(self, attrs: Attrs) -> tuple[int, ...]:
        return tuple(k for k, given in enumerate((attrs.h0_input, attrs.c0_input)) if given)

    def step(self, A, attrs: Attrs, x, state):
        h, c = state
        gates = dict(zip(GATES, attrs.gates))
        accs = {g: gate_acc(A, x, h, gates[g], g) for g in GATES if not (g == "f" and attrs.cifg)}
        return list(gated_state(A, accs, gates, c, attrs.cell, attrs.cell_act, attrs.out, attrs.cifg,
                                carry=self.carries_scales, cell_mult=attrs.cell_mult, out_mult=attrs.out_mult))

    def check(self, attrs: Attrs, x: TensorType, node: str) -> None:
        check_dense_cell("LSTM", attrs, x, node)
        check_table_inputs([attrs.cell, *(g.acc for g in attrs.gates)], node)

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        A = self.analyze(attrs, x)
        constant = [s for k, s in enumerate(self.initial(attrs)) if k not in self.state_inputs(attrs)]
        require_zero_states(constant, node, "LSTM")
        gates = dict(zip(GATES, attrs.gates))
        kind, stored, wprec = codebook([gates[g].wx for g in GATES] + [gates[g].wh for g in GATES])
        wx, wh = unit_major(stored[:4]), unit_major(stored[4:])
        body, b, table, ctable = lstm_body(A, "", gates, attrs.cell, attrs.cell_act, attrs.out, attrs.cifg,
                                           carry=self.carries_scales, cell_mult=attrs.cell_mult)
        add_weights_layer(hls, node, out, x, KERNELS[self.state_inputs(attrs)], {
            "n_hidden": attrs.hidden, "reverse": attrs.reverse, "return_sequences": attrs.return_sequences,
            "cifg": attrs.cifg, "weight_kind": kind.cpp, "input_code_type": cint(x.ftype), "cell": body,
            "weight_products": self.weight_products(attrs, x),
        }, {"wx": wx, "wh": wh, "b": b, "gate_table": table, "cell_table": ctable}, {
            "wx": wprec, "wh": wprec, "b": int_precision(int(b.min()), int(b.max())),
            "gate_table": int_precision(int(table.min()), int(table.max())),
            "cell_table": int_precision(int(ctable.min()), int(ctable.max())),
        })

    def form(self, attrs: Attrs, ins, out) -> str:
        return cp.forms_summary(self.analyze(attrs, ins[0]).forms)

    def macs(self, attrs, ins, out):
        t, i = ins[0].shape
        gates = 3 if attrs.cifg else 4
        return int(t * gates * attrs.hidden * (i + attrs.hidden))

    def weight_products(self, attrs: Attrs, x: TensorType) -> int:
        """Weight products of one pipelined iteration (one unit, every gate with weights)."""
        return (3 if attrs.cifg else 4) * (x.shape[1] + attrs.hidden)

    def cost(self, attrs: Attrs, ins, out, io):
        t, i = ins[0].shape
        steps_ms = len(self.analyze(attrs, ins[0]).forms)  # float-scale requantizations: one multiplier each
        products = self.weight_products(attrs, ins[0])  # one ALLOCATION region (hls_templates/rnn)
        return recurrent_work(self, attrs, ins, out, states=3, mults=products + steps_ms, regions=(products,),
                              taps=i + attrs.hidden, steps=t * attrs.hidden)


OP = Lstm()
