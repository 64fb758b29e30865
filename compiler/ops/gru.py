"""Quantized GRU over a whole sequence (``tessera.custom_op::QuantGRUCell``, docs/rnn_export.md).

PyTorch ``nn.GRU`` equations ("linear before reset"), gates r, z, n::

    acc_r = (W_xr x + b_xr) + (W_hr h + b_hr)          exact;  r = Qsig_r(sigmoid(Qacc_r(acc_r)))
    acc_z likewise                                            z = Qsig_z(sigmoid(Qacc_z(acc_z)))
    acc_n = (W_xn x + b_xn) + r * (W_hn h + b_hn)     exact;  n = Qtanh(tanh(Qacc_n(acc_n)))
    h'    = Qout((1 - z) * n + z * h)                  exact products and sums

Written once (:class:`Gru.step`) on :mod:`.cellprog`; input ``(T, I)``, output every hidden
state ``(T, H)`` or the last one.  Lowered to ``TesseraGRU`` (``hls_templates/rnn``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...hls_templates import render
from ..ir.types import TensorType
from . import cellprog as cp
from .cellhls import (add_weights_layer, bias_codes, check_dense_cell, check_table_inputs, cint, codebook, gate_tables,
                      int_precision, recurrent_work, requant_fields, require_zero_states, sequence_extension, shift,
                      typedefs, unit_major)
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


class Gru(cp.RecurrentOp[Attrs]):
    name = "gru"
    carries_scales = True
    threshold_kernels = True
    extensions = (sequence_extension("TesseraGRU", "gru_", ("wx", "wh", "bx", "bh", "gate_table", "thr"), ()),)

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
        T = A.types

        def fac(to: str, frm: str | int) -> int:  # the multiplier of an operand of a sum (float scales)
            return cp.factor(frm if isinstance(frm, int) else A.mults[frm], A.mults[to])

        bxs, bhs, gate_blocks, thr = [], [], [], []
        for k, (g, gate) in enumerate(zip(GATES, attrs.gates)):
            bx, bxf = bias_codes(gate.bx, gate.bx_frac, H, T[f"{g}_gi"].frac)
            bh, bhf = bias_codes(gate.bh, gate.bh_frac, H, T[f"{g}_gh"].frac)
            bxs.append(bx)
            bhs.append(bh)
            gh_name = "n_rgh" if g == "n" else f"{g}_gh"
            gi, gh, acc = f"{g}_gi", f"{g}_gh", f"{g}_acc"
            gate_blocks.append(render(
                "rnn/gru_gate.tpl", name=g, ax_t=cint(T[f"{g}_ax"]), ah_t=cint(T[f"{g}_ah"]),
                gi_t=cint(T[gi]), gh_t=cint(T[gh]), acc_t=cint(T[acc]), q_t=cint(T[f"{g}_q"]),
                act_t=cint(T[f"{g}_act"]), sh_ax=shift(T, gi, f"{g}_ax"), sh_bx=shift(T, gi, bxf),
                sh_ah=shift(T, gh, f"{g}_ah"), sh_bh=shift(T, gh, bhf), sh_gi=shift(T, acc, gi),
                sh_gh=shift(T, acc, gh_name), m_ax=fac(gi, f"{g}_ax"), m_bx=fac(gi, 1), m_ah=fac(gh, f"{g}_ah"),
                m_bh=fac(gh, 1), m_gi=fac(acc, gi), m_gh=fac(acc, gh_name), table_offset=offsets[k],
                qmin=gate.acc.qmin, qmax=gate.acc.qmax, **requant_fields(A, acc, gate.acc, "rq", thr)))
        bx, bh = unit_major(bxs), unit_major(bhs)
        oq = attrs.out
        h_fields = requant_fields(A, "h_sum", oq, "h", thr)
        thr = thr or [0]  # the thresholds of the float-scale steps no multiply-shift fits (an array is never empty)
        types = "\n".join([f"    static const unsigned table_entries = {table.size};",
                           f"    static const unsigned thr_entries = {len(thr)};",
                           f"    typedef {cint(x.ftype)} x_t;", f"    typedef {cint(oq.out)} h_t;",
                           typedefs(A, ["n_rgh", "z_h", "one_minus_z", "zn", "h_sum"]),
                           f"    typedef {h_fields.pop('h_ms_t')} hm_t;"])
        body = render("rnn/gru_body.tpl", types=types, gates="\n".join(gate_blocks), z_one=1 << T["z_act"].frac,
                      z_m=A.mults["z_act"], sh_sum_zn=shift(T, "h_sum", "zn"), sh_sum_zh=shift(T, "h_sum", "z_h"),
                      m_sum_zn=fac("h_sum", "zn"), m_sum_zh=fac("h_sum", "z_h"), h_min=oq.qmin, h_max=oq.qmax,
                      **h_fields)
        add_weights_layer(hls, node, out, x, "TesseraGRU", {
            "n_hidden": H, "reverse": attrs.reverse, "return_sequences": attrs.return_sequences,
            "wkind": kind.cpp, "body": body, "weight_products": self.weight_products(attrs, x),
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
