"""Quantized GRU over a whole sequence (``tessera.custom_op::QuantGRUCell``, docs/rnn_export.md).

PyTorch ``nn.GRU`` equations ("linear before reset"), gates r, z, n::

    acc_r = (W_xr x + b_xr) + (W_hr h + b_hr)          exact;  r = Qsig_r(sigmoid(Qacc_r(acc_r)))
    acc_z likewise                                            z = Qsig_z(sigmoid(Qacc_z(acc_z)))
    acc_n = (W_xn x + b_xn) + r * (W_hn h + b_hn)     exact;  n = Qtanh(tanh(Qacc_n(acc_n)))
    h'    = Qout((1 - z) * n + z * h)                  exact products and sums

Written once (:class:`Gru.step`) on :mod:`.cellprog`; input ``(T, I)``, output every hidden
state ``(T, H)`` or the last one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.types import TensorType
from . import cellprog as cp
from .lstm import check_dense_cell, check_table_inputs
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


class Gru(cp.RecurrentOp):
    name = "gru"

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

    def lower(self, attrs: Attrs, hl, node, ins, out):
        from ..lower.rnn import lower_gru

        lower_gru(attrs, hl, node, ins[0], out, self.analyze(attrs, ins[0]))

    def macs(self, attrs, ins, out):
        t, i = ins[0].shape
        return int(t * 3 * attrs.hidden * (i + attrs.hidden))


OP = Gru()
