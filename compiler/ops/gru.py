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
                      int_precision, quant_fields, recurrent_work, require_zero_states, sequence_extension, shift,
                      typedefs)
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


@dataclass(frozen=True, eq=False)
class Attrs:
    gates: tuple[Gate, Gate, Gate]  # r, z, n
    out: QuantAttrs
    h0: np.ndarray
    reverse: bool = False
    return_sequences: bool = True

    @property
    def hidden(self) -> int:
        return int(self.gates[0].wh.codes.shape[0])


class Gru(cp.RecurrentOp[Attrs]):
    name = "gru"
    extensions = (sequence_extension("TesseraGRU", "gru_", ("wx", "wh", "bx", "bh", "gate_table"), ()),)

    def state_quants(self, attrs: Attrs):
        return [attrs.out]

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
            q = cp.named(A, f"{name}_q", cp.requant(A, acc, g.acc))
            a[name] = cp.named(A, f"{name}_act", cp.activate(A, q, g.acc, g.act))
        z = a["z"]
        keep = cp.named(A, "z_h", cp.mul(A, z, h))
        one_minus_z = cp.named(A, "one_minus_z", cp.const_minus(A, 1 << z.frac, z))
        new = cp.named(A, "zn", cp.mul(A, one_minus_z, a["n"]))
        total = cp.named(A, "h_sum", cp.add(A, new, keep))
        return [cp.named(A, "h_new", cp.requant(A, total, attrs.out))]

    def check(self, attrs: Attrs, x: TensorType, node: str) -> None:
        check_dense_cell("GRU", attrs, x, node)
        check_table_inputs([g.acc for g in attrs.gates], node)

    def lower(self, attrs: Attrs, hls, node, ins, out):
        x = ins[0]
        A = self.analyze(attrs, x)
        require_zero_states([attrs.h0], node, "GRU")
        H = attrs.hidden
        kind, stored, wprec = codebook([g.wx for g in attrs.gates] + [g.wh for g in attrs.gates])
        wx, wh = np.concatenate(stored[:3]), np.concatenate(stored[3:])
        table, offsets = gate_tables(attrs.gates)
        T = A.types
        bxs, bhs, gate_blocks = [], [], []
        for k, (g, gate) in enumerate(zip(GATES, attrs.gates)):
            bx, bxf = bias_codes(gate.bx, gate.bx_frac, H, T[f"{g}_gi"].frac)
            bh, bhf = bias_codes(gate.bh, gate.bh_frac, H, T[f"{g}_gh"].frac)
            bxs.append(bx)
            bhs.append(bh)
            gh_name = "n_rgh" if g == "n" else f"{g}_gh"
            gate_blocks.append(render(
                "rnn/gru_gate.tpl", name=g, ax_t=cint(T[f"{g}_ax"]), ah_t=cint(T[f"{g}_ah"]),
                gi_t=cint(T[f"{g}_gi"]), gh_t=cint(T[f"{g}_gh"]), acc_t=cint(T[f"{g}_acc"]),
                q_t=cint(T[f"{g}_q"]), act_t=cint(T[f"{g}_act"]),
                sh_ax=shift(T, f"{g}_gi", f"{g}_ax"), sh_bx=shift(T, f"{g}_gi", bxf),
                sh_ah=shift(T, f"{g}_gh", f"{g}_ah"), sh_bh=shift(T, f"{g}_gh", bhf),
                sh_gi=shift(T, f"{g}_acc", f"{g}_gi"), sh_gh=shift(T, f"{g}_acc", gh_name),
                table_offset=offsets[k], **quant_fields(gate.acc, T[f"{g}_acc"].frac)))
        bx, bh = np.concatenate(bxs), np.concatenate(bhs)
        oq = attrs.out
        types = "\n".join([f"    typedef {cint(x.ftype)} x_t;", f"    typedef {cint(oq.out)} h_t;",
                           typedefs(A, ["n_rgh", "z_h", "one_minus_z", "zn", "h_sum"])])
        body = render("rnn/gru_body.tpl", types=types, gates="\n".join(gate_blocks), z_one=1 << T["z_act"].frac,
                      sh_sum_zn=shift(T, "h_sum", "zn"), sh_sum_zh=shift(T, "h_sum", "z_h"),
                      sh_h=T["h_sum"].frac - oq.out.frac, h_mode=oq.rounding.cpp, h_min=oq.qmin, h_max=oq.qmax)
        add_weights_layer(hls, node, out, x, "TesseraGRU", {
            "n_hidden": H, "reverse": attrs.reverse, "return_sequences": attrs.return_sequences,
            "wkind": kind.cpp, "body": body,
        }, {"wx": wx, "wh": wh, "bx": bx, "bh": bh, "gate_table": table}, {
            "wx": wprec, "wh": wprec, "bx": int_precision(int(bx.min()), int(bx.max())),
            "bh": int_precision(int(bh.min()), int(bh.max())), "gate_table": int_precision(int(table.min()), int(table.max())),
        })

    def macs(self, attrs, ins, out):
        t, i = ins[0].shape
        return int(t * 3 * attrs.hidden * (i + attrs.hidden))

    def cost(self, attrs: Attrs, ins, out, io):
        t, i = ins[0].shape
        return recurrent_work(self, attrs, ins, out, states=2, mults=3 * (i + attrs.hidden), taps=i + attrs.hidden,
                              steps=t * attrs.hidden)


OP = Gru()
