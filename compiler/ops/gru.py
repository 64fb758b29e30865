"""Quantized GRU over a whole sequence (``tessera.custom_op::QuantGRUCell``, docs/rnn_export.md).

PyTorch ``nn.GRU`` equations ("linear before reset"), gates r, z, n::

    acc_r = (W_xr x + b_xr) + (W_hr h + b_hr)          exact;  r = Qsig_r(sigmoid(Qacc_r(acc_r)))
    acc_z likewise                                            z = Qsig_z(sigmoid(Qacc_z(acc_z)))
    acc_n = (W_xn x + b_xn) + r * (W_hn h + b_hn)     exact;  n = Qtanh(tanh(Qacc_n(acc_n)))
    h'    = Qout((1 - z) * n + z * h)                  exact products and sums

Written once (:class:`Gru.step`) on :mod:`.cells.program`; input ``(T, I)``, output every hidden
state ``(T, H)`` or the last one.  Lowered to ``TesseraGRU`` (``hls_templates/rnn``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...hls_templates import render
from ..ir.types import TensorType
from .base.extension import Extension, out_shape_attr
from .cells import program as cp
from .cells.hardware import (add_weights_layer, bias_codes, cell_weights, check_dense_cell, check_table_inputs, cint,
                             codebook, gate_tables, int_precision, recurrent_work, require_zero_states, shift, unit_major)
from .cells.kernel import GruCall, GruCellBody, GruConfig, GruGateStruct, requant
from .quant import Attrs as QuantAttrs

GATES = ("r", "z", "n")


@dataclass(frozen=True, eq=False)
class Gate:
    wx: cp.Weights  # (H, I)
    wh: cp.Weights  # (H, H)
    bx: np.ndarray | None
    bx_frac: int
    bh: np.ndarray | None
    bh_frac: int
    acc: QuantAttrs
    act: cp.Act
    acc_mult: int = 1  # the accumulator quantizer's scale is acc_mult * 2**-acc.out.frac


@dataclass(frozen=True, eq=False)
class Attrs:
    gates: tuple[Gate, Gate, Gate]  # r, z, n
    out: QuantAttrs
    h0: np.ndarray
    reverse: bool = False
    return_sequences: bool = True
    out_mult: int = 1  # float scales: the output's scale is out_mult * 2**-out.out.frac
    x_scale: tuple[int, int] | None = None  # (frac, mult) of float-scaled input codes

    @property
    def hidden(self) -> int:
        return int(self.gates[0].wh.codes.shape[0])


def factor(A: cp.IntervalArith, to: str, frm: str | int) -> int:
    """The multiplier of an operand ``frm`` (a named intermediate, or a bias's 1) of the sum
    ``to`` (float scales: the odd parts of their scales)."""
    return cp.factor(frm if isinstance(frm, int) else A.mults[frm], A.mults[to])


def gru_gate(A: cp.IntervalArith, g: str, gate: Gate, offset: int, H: int,
             thresholds: list[int]) -> tuple[GruGateStruct, np.ndarray, np.ndarray]:
    """The fields of gate ``g`` and its biases ``b_x``, ``b_h`` (zeros where it has none); a
    requantization by thresholds appends them to ``thresholds``."""
    T = A.types
    gi, gh, acc = f"{g}_gi", f"{g}_gh", f"{g}_acc"
    bx, bx_frac = bias_codes(gate.bx, gate.bx_frac, H, T[gi].frac)
    bh, bh_frac = bias_codes(gate.bh, gate.bh_frac, H, T[gh].frac)
    gh_sum = "n_rgh" if g == "n" else gh  # the n gate sums r * gh
    rq = requant(A, acc, gate.acc, thresholds)
    fields = GruGateStruct(
        name=g, ax_t=cint(T[f"{g}_ax"]), ah_t=cint(T[f"{g}_ah"]), gi_t=cint(T[gi]), gh_t=cint(T[gh]),
        acc_t=cint(T[acc]), requant_t=rq.requant_t, q_t=cint(T[f"{g}_q"]), act_t=cint(T[f"{g}_act"]),
        ax_shift=shift(T, gi, f"{g}_ax"), bx_shift=shift(T, gi, bx_frac), ah_shift=shift(T, gh, f"{g}_ah"),
        bh_shift=shift(T, gh, bh_frac), gi_shift=shift(T, acc, gi), gh_shift=shift(T, acc, gh_sum),
        ax_factor=factor(A, gi, f"{g}_ax"), bx_factor=factor(A, gi, 1), ah_factor=factor(A, gh, f"{g}_ah"),
        bh_factor=factor(A, gh, 1), gi_factor=factor(A, acc, gi), gh_factor=factor(A, acc, gh_sum),
        requant_mult=rq.mult, requant_add=rq.add, requant_shift=rq.shift, requant_mode=rq.mode,
        requant_by_thresholds=rq.by_thresholds, requant_thresholds_at=rq.thresholds_at, qmin=gate.acc.qmin,
        qmax=gate.acc.qmax, table_offset=offset)
    return fields, bx, bh


def gru_body(A: cp.IntervalArith, oq: QuantAttrs, table_entries: int, thresholds: list[int],
             gates: list[str]) -> tuple[str, list[int]]:
    """The GRU's body (its types, constants and rendered ``gates``) and its threshold array
    (never empty: a single 0 where no requantization needs one)."""
    T = A.types
    hidden = requant(A, "h_sum", oq, thresholds)
    thresholds = thresholds or [0]
    body = render(GruCellBody(
        table_entries=table_entries, thr_entries=len(thresholds), h_t=cint(oq.out), n_rgh_t=cint(T["n_rgh"]),
        z_h_t=cint(T["z_h"]), one_minus_z_t=cint(T["one_minus_z"]), zn_t=cint(T["zn"]), h_sum_t=cint(T["h_sum"]),
        hidden_requant_t=hidden.requant_t, z_one=1 << T["z_act"].frac, z_factor=A.mults["z_act"],
        sum_zn_shift=shift(T, "h_sum", "zn"), sum_zh_shift=shift(T, "h_sum", "z_h"),
        sum_zn_factor=factor(A, "h_sum", "zn"), sum_zh_factor=factor(A, "h_sum", "z_h"), hidden_mult=hidden.mult,
        hidden_add=hidden.add, hidden_shift=hidden.shift, hidden_mode=hidden.mode,
        hidden_by_thresholds=hidden.by_thresholds, hidden_thresholds_at=hidden.thresholds_at, hidden_min=oq.qmin,
        hidden_max=oq.qmax, gates="\n".join(gates)))
    return body, thresholds


class Gru(cp.RecurrentOp[Attrs]):
    name = "gru"
    carries_scales = True
    threshold_kernels = True
    extensions = (Extension(
        "TesseraGRU", "A quantized GRU over a whole sequence, on integer codes.", "rnn", "nnet_tessera_rnn.h",
        config=GruConfig, call=GruCall, output_shape=out_shape_attr, attributes=("weight_products",),
        weights=cell_weights(("wx", "wh", "bx", "bh", "gate_table", "thr"))),)

    def state_quants(self, attrs: Attrs):
        return [attrs.out]

    def state_mults(self, attrs: Attrs):
        return [attrs.out_mult]

    def input_scale(self, attrs: Attrs, x: TensorType):
        return attrs.x_scale if attrs.x_scale is not None else (x.ftype.frac, 1)

    def initial(self, attrs: Attrs):
        return [attrs.h0]

    def step(self, A, attrs: Attrs, x, state):
        (h,) = state
        a = {}
        for name, g in zip(GATES, attrs.gates):
            gi = cp.named(A, f"{name}_ax", cp.linear(A, x, g.wx))
            gh = cp.named(A, f"{name}_ah", cp.linear(A, h, g.wh))
            if g.bx is not None:
                gi = cp.add(A, gi, cp.bias_fx(A, g.bx, g.bx_frac))
            if g.bh is not None:
                gh = cp.add(A, gh, cp.bias_fx(A, g.bh, g.bh_frac))
            gi, gh = cp.named(A, f"{name}_gi", gi), cp.named(A, f"{name}_gh", gh)
            if name == "n":
                gh = cp.named(A, "n_rgh", cp.mul(A, a["r"], gh))
            acc = cp.named(A, f"{name}_acc", cp.add(A, gi, gh))
            q = cp.named(A, f"{name}_q", cp.requant(A, acc, g.acc, g.acc_mult, f"{name}_acc"))
            a[name] = cp.named(A, f"{name}_act", cp.activate(A, q, g.acc, g.act, carry=True))
        z = a["z"]
        keep = cp.named(A, "z_h", cp.mul(A, z, h))
        one_minus_z = cp.named(A, "one_minus_z", cp.one_minus(A, z))
        new = cp.named(A, "zn", cp.mul(A, one_minus_z, a["n"]))
        total = cp.named(A, "h_sum", cp.add(A, new, keep))
        return [cp.named(A, "h_new", cp.requant(A, total, attrs.out, attrs.out_mult, "h_sum"))]

    def check(self, attrs: Attrs, x: TensorType, node: str) -> None:
        check_dense_cell("GRU", attrs, x, node)
        check_table_inputs([g.acc for g in attrs.gates], node)

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        A = self.analyze(attrs, x)
        require_zero_states([attrs.h0], node, "GRU")
        H = attrs.hidden
        kind, stored, wprec = codebook([g.wx for g in attrs.gates] + [g.wh for g in attrs.gates])
        wx, wh = unit_major(stored[:3]), unit_major(stored[3:])
        table, offsets = gate_tables(attrs.gates, carry=True)
        bxs, bhs, gate_blocks, thr = [], [], [], []
        for k, (g, gate) in enumerate(zip(GATES, attrs.gates)):
            fields, bx, bh = gru_gate(A, g, gate, offsets[k], H, thr)
            gate_blocks.append(render(fields))
            bxs.append(bx)
            bhs.append(bh)
        bx, bh = unit_major(bxs), unit_major(bhs)
        body, thr = gru_body(A, attrs.out, table.size, thr, gate_blocks)
        add_weights_layer(hls, node, out, x, "TesseraGRU", {
            "n_hidden": H, "reverse": attrs.reverse, "return_sequences": attrs.return_sequences,
            "weight_kind": kind.cpp, "input_code_type": cint(x.ftype), "cell": body,
            "weight_products": self.weight_products(attrs, x),
        }, {"wx": wx, "wh": wh, "bx": bx, "bh": bh, "gate_table": table, "thr": thr}, {
            "wx": wprec, "wh": wprec, "bx": int_precision(int(bx.min()), int(bx.max())),
            "bh": int_precision(int(bh.min()), int(bh.max())), "gate_table": int_precision(int(table.min()), int(table.max())),
            "thr": int_precision(min(thr), max(thr)),
        })

    def form(self, attrs: Attrs, ins, out) -> str:
        return cp.forms_summary(self.analyze(attrs, ins[0]).forms)

    def macs(self, attrs, ins, out):
        t, i = ins[0].shape
        return int(t * 3 * attrs.hidden * (i + attrs.hidden))

    def weight_products(self, attrs: Attrs, x: TensorType) -> int:
        """Weight products of one pipelined iteration (one unit, all three gates)."""
        return 3 * (x.shape[1] + attrs.hidden)

    def cost(self, attrs: Attrs, ins, out, io):
        t, i = ins[0].shape
        steps_ms = len(self.analyze(attrs, ins[0]).forms)  # float-scale requantizations: a multiplier (or comparators) each
        products = self.weight_products(attrs, ins[0])  # one ALLOCATION region (hls_templates/rnn)
        return recurrent_work(self, attrs, ins, out, states=2, mults=products + steps_ms, regions=(products,),
                              taps=i + attrs.hidden, steps=t * attrs.hidden)


OP = Gru()
