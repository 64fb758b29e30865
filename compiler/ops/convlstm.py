"""Quantized ConvLSTM (``tessera.custom_op::QuantConvLSTMCell``, docs/rnn_export.md), with an
optional forecaster: the encoder-forecaster frame predictor of Shi et al. (2015).

Input ``(T, C, H, W)`` codes.  The encoder cell runs over the ``T`` input frames from zero
states; with a forecaster (a second cell without input whose initial states are the
encoder's last ``h``, ``c``, passed through the forecaster's ``output`` / ``cell_state``
quantizers), it then runs ``steps_out`` more steps.  Output: the hidden state of every
step of the last cell, ``(T', Hc, H, W)``.

One step is the LSTM step of :mod:`.lstm` with every matrix product replaced by a 2D
'same' convolution (stride 1, zero padding ``k // 2``); it is the same code
(:func:`.lstm.gate_acc`, :func:`.lstm.gated_state`) on :mod:`.cells.program`'s back ends.
Lowered to ``TesseraConvLSTM`` / ``TesseraConvLSTMForecaster`` (``hls_templates/rnn``): the
encoder (and forecaster) cells as nested ``enc`` / ``fc`` structs of one config.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...hls_templates import render
from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from .cells import program as cp
from .base import Layout
from .base.extension import Extension, out_shape_attr
from .cells.hardware import (cell_weights, check_biases, check_table_inputs, cint, codebook, int_precision, recurrent_work,
                             unit_major)
from .cells.kernel import (ConvLstmCall, ConvLstmCellStruct, ConvLstmConfig, ConvLstmForecasterCall,
                           ConvLstmForecasterConfig)
from .lstm import GATES, Gate, gate_acc, gated_state, lstm_body
from .quant import Attrs as QuantAttrs


@dataclass(frozen=True, eq=False)
class Cell:
    gates: tuple[Gate, Gate, Gate, Gate]  # i f c o; wx is None for a cell without input
    cell: QuantAttrs
    cell_act: cp.Act
    out: QuantAttrs
    cell_mult: int = 1  # float scales: the cell state's and output's scales are mult * 2**-frac
    out_mult: int = 1

    @property
    def hidden(self) -> int:
        return int(self.gates[0].wh.codes.shape[0])

    @property
    def kernel(self) -> int:
        return int(self.gates[0].wh.codes.shape[-1])


@dataclass(frozen=True, eq=False)
class Attrs:
    encoder: Cell
    forecaster: Cell | None = None
    steps_out: int = 0
    reverse: bool = False  # (no reversed ConvLSTM; kept for the shared drivers)
    return_sequences: bool = True
    x_scale: tuple[int, int] | None = None  # (frac, mult) of float-scaled input codes


def cell_step(A, cell: Cell, x: cp.Fx | None, state: list[cp.Fx]) -> list[cp.Fx]:
    h, c = state
    gates = dict(zip(GATES, cell.gates))
    accs = {g: gate_acc(A, x, h, gates[g], g, conv=True) for g in GATES}
    return list(gated_state(A, accs, gates, c, cell.cell, cell.cell_act, cell.out, cifg=False, carry=True,
                            cell_mult=cell.cell_mult, out_mult=cell.out_mult))


def handover(A, enc: Cell, fc: Cell, state: list[cp.Fx]) -> list[cp.Fx]:
    """The encoder's last states through the forecaster's state quantizers (a shift: their
    scales may differ by a power of two only)."""
    h, c = state
    if (enc.out_mult, enc.cell_mult) != (fc.out_mult, fc.cell_mult):
        raise UnsupportedModelError("the forecaster's state quantizers have float scales other than the encoder's "
                                    "(they may differ by a power of two)")
    return [cp.requant(A, h, fc.out, fc.out_mult), cp.requant(A, c, fc.cell, fc.cell_mult)]


ENCODER_WEIGHTS = ("enc_wx", "enc_wh", "enc_b", "enc_gate_table", "enc_cell_table")
FORECASTER_WEIGHTS = ENCODER_WEIGHTS + ("fc_wh", "fc_b", "fc_gate_table", "fc_cell_table")


class ConvLstm(cp.CellOp[Attrs]):
    name = "convlstm"
    carries_scales = True
    extensions = (
        Extension("TesseraConvLSTM", "ConvLSTM encoder over a frame sequence (channels-last frames).", "rnn",
                  "nnet_tessera_convlstm.h", config=ConvLstmConfig, call=ConvLstmCall, output_shape=out_shape_attr,
                  attributes=("enc_products",), weights=cell_weights(ENCODER_WEIGHTS)),
        Extension("TesseraConvLSTMForecaster", "ConvLSTM encoder, then a forecaster cell without input from the "
                  "encoder's states.", "rnn", "nnet_tessera_convlstm.h", config=ConvLstmForecasterConfig,
                  call=ConvLstmForecasterCall, output_shape=out_shape_attr, attributes=("enc_products", "fc_products"),
                  weights=cell_weights(FORECASTER_WEIGHTS)),
    )

    def cells(self, a: Attrs) -> list:
        return [a.encoder] + ([a.forecaster] if a.forecaster is not None else [])

    def check(self, a: Attrs, x: TensorType, node: str) -> None:
        if len(x.shape) != 4:
            raise UnsupportedModelError(f"node '{node}': ConvLSTM input must be (steps, channels, height, width), got {x.shape}")
        cells = [a.encoder] + ([a.forecaster] if a.forecaster else [])
        for k, cell in enumerate(cells):
            hc, ks = cell.hidden, cell.kernel
            for g in cell.gates:
                if g.wh.codes.shape != (hc, hc, ks, ks) or ks % 2 != 1:
                    raise UnsupportedModelError(f"node '{node}': ConvLSTM state kernels must be (Hc, Hc, k, k) with odd k")
                if k == 0 and (g.wx is None or g.wx.codes.shape != (hc, x.shape[1], ks, ks)):
                    raise UnsupportedModelError(f"node '{node}': ConvLSTM input kernels do not match input {x.shape}")
            if not (-128 <= cell.out.qmin and cell.out.qmax <= 127) or (k == 0 and not (-128 <= x.lo and x.hi <= 127)):
                raise UnsupportedModelError(f"node '{node}': ConvLSTM convolves signed 8-bit codes only (input and hidden state)")
            check_biases("ConvLSTM", cell.gates, hc, node)
            check_table_inputs([cell.cell, *(g.acc for g in cell.gates)], node)
        if a.forecaster is not None and a.forecaster.hidden != a.encoder.hidden:
            raise UnsupportedModelError(f"node '{node}': encoder and forecaster state sizes differ")

    def analyze(self, a: Attrs, x: TensorType) -> cp.IntervalArith:
        key = (x.lo, x.hi, x.ftype)
        cache = cp.ANALYSES.setdefault(a, {})
        if key in cache:
            return cache[key]
        A = cp.IntervalArith()
        cells = [("enc_", a.encoder, cp.Fx((x.lo, x.hi), *self.input_scale(a, x)))]
        if a.forecaster is not None:
            cells.append(("fc_", a.forecaster, None))
        for prefix, cell, xin in cells:
            state = [cp.Fx((cell.out.qmin, cell.out.qmax), cell.out.out.frac, cell.out_mult),
                     cp.Fx((cell.cell.qmin, cell.cell.qmax), cell.cell.out.frac, cell.cell_mult)]
            cell_step(cp.Prefixed(A, prefix), cell, xin, state)
        cache[key] = A
        return A

    def input_scale(self, a: Attrs, x: TensorType) -> tuple[int, int]:
        return a.x_scale if a.x_scale is not None else (x.ftype.frac, 1)

    def infer(self, a: Attrs, ins, node):
        (x,) = ins
        A = self.checked_analysis(a, x, node)
        last = a.forecaster or a.encoder
        steps = a.steps_out if a.forecaster else x.shape[0]
        lo, hi = A.ranges[("fc_" if a.forecaster else "enc_") + "h_new"]
        out = last.out.out
        if last.out_mult != 1:  # codes; their float scale is carried by the graph
            out = FixedType(out.width, 0, out.signed)
        return TensorType((steps, last.hidden, x.shape[2], x.shape[3]), out, lo, hi)

    def _run(self, A, a: Attrs, xs_t: list, zeros) -> list:
        enc = a.encoder
        state = [cp.Fx(zeros(), enc.out.out.frac, enc.out_mult), cp.Fx(zeros(), enc.cell.out.frac, enc.cell_mult)]
        hs = []
        for x in xs_t:
            state = cell_step(cp.Prefixed(A, "enc_"), enc, x, state)
            hs.append(state[0])
        if a.forecaster is None:
            return hs
        state = handover(A, enc, a.forecaster, state)
        hs = []
        for _ in range(a.steps_out):
            state = cell_step(cp.Prefixed(A, "fc_"), a.forecaster, None, state)
            hs.append(state[0])
        return hs

    def semantics(self, a: Attrs, xs, ins, out):
        x = xs[0].astype(np.int64)
        n, _, _, hh, ww = x.shape
        scale = self.input_scale(a, ins[0])
        steps = [cp.Fx(x[:, t], *scale) for t in range(x.shape[1])]
        hs = self._run(cp.NumpyArith(self.analyze(a, ins[0]).forms), a, steps, lambda: np.zeros((n, a.encoder.hidden, hh, ww), dtype=np.int64))
        return np.stack([h.v for h in hs], axis=1)

    def onnx_reference(self, a: Attrs, builder, xs, ins, out):
        A = cp.OnnxArith(builder, self.analyze(a, ins[0]).forms, spatial=2)
        scale = self.input_scale(a, ins[0])
        steps = [cp.Fx(builder.op("Gather", [xs[0], builder.const(np.array(t, dtype=np.int64))], axis=1), *scale)
                 for t in range(ins[0].shape[0])]
        _, _, hh, ww = ins[0].shape
        # zeros (N, Hc, H, W): the first frame's first channel times 0, broadcast
        first = builder.op("Gather", [steps[0].v, builder.const(np.array([0], dtype=np.int64))], axis=1)
        zeros = builder.op("Add", [builder.op("Mul", [first, builder.const(np.array(0, dtype=np.int64))]),
                             builder.const(np.zeros((1, a.encoder.hidden, hh, ww), dtype=np.int64))])
        hs = self._run(A, a, steps, lambda: zeros)
        return builder.op("Concat", [builder.op("Unsqueeze", [h.v, builder.const(np.array([1], dtype=np.int64))]) for h in hs], axis=1)

    def lower(self, a: Attrs, hls, node, ins, out):
        x = ins[0]
        A = self.analyze(a, x)
        cells = [("enc", a.encoder, True)] + ([("fc", a.forecaster, False)] if a.forecaster else [])
        arrays, precisions, blocks = {}, {}, []
        for name, cell, has_input in cells:
            gates = dict(zip(GATES, cell.gates))
            mats = ([gates[g].wx for g in GATES] if has_input else []) + [gates[g].wh for g in GATES]
            kind, stored, wprec = codebook(mats)
            body, bias, table, ctable = lstm_body(A, f"{name}_", gates, cell.cell, cell.cell_act, cell.out, False,
                                                  has_input, carry=True, cell_mult=cell.cell_mult)
            if has_input:
                arrays[f"{name}_wx"], precisions[f"{name}_wx"] = unit_major(stored[:4]), wprec
            arrays[f"{name}_wh"], precisions[f"{name}_wh"] = unit_major(stored[-4:]), wprec
            for key, v in (("b", bias), ("gate_table", table), ("cell_table", ctable)):
                arrays[f"{name}_{key}"], precisions[f"{name}_{key}"] = v, int_precision(int(v.min()), int(v.max()))
            blocks.append(render(ConvLstmCellStruct(name=name, has_input=has_input, weight_kind=kind,
                                                    wx_t=f"{name}_wx_t" if has_input else "ap_int<2>", cell=body)))
        t, c, hh, ww = x.shape
        layer = {"class_name": self.extensions[1 if a.forecaster else 0].layer,
                 "n_steps": t, "n_in": c, "n_hidden": a.encoder.hidden, "height": hh, "width": ww,
                 "kernel": a.encoder.kernel, "steps_out": a.steps_out, **self.weight_products(a, x),
                 "out_shape": [out.shape[0], hh, ww, out.shape[1]], "input_code_type": cint(x.ftype),
                 "cells": "\n".join(blocks)}
        if a.forecaster is not None:
            layer.update(handover_hidden_shift=a.encoder.out.out.frac - a.forecaster.out.out.frac,
                         handover_cell_shift=a.encoder.cell.out.frac - a.forecaster.cell.out.frac)
        for k, v in arrays.items():
            layer[f"{k}_data"] = np.asarray(v, dtype=np.float64).reshape(-1)
        hls.add_layer(node, layer, {"result": out.ftype.hls(), **precisions}, layout=Layout.SEQUENCE)

    def form(self, a: Attrs, ins, out) -> str:
        return cp.forms_summary(self.analyze(a, ins[0]).forms)

    def macs(self, a: Attrs, ins, out):
        t, c, hh, ww = ins[0].shape
        enc, k2 = a.encoder, a.encoder.kernel ** 2
        total = t * 4 * enc.hidden * hh * ww * k2 * (c + enc.hidden)
        if a.forecaster is not None:
            total += a.steps_out * 4 * enc.hidden * hh * ww * a.forecaster.kernel ** 2 * enc.hidden
        return int(total)

    def weight_products(self, a: Attrs, x: TensorType) -> dict[str, int]:
        """Weight products of one pipelined iteration (one unit at one pixel, all four gates)
        of the encoder and of the forecaster (0 without one): every tap of every channel."""
        fc = 4 * a.encoder.hidden * a.forecaster.kernel ** 2 if a.forecaster is not None else 0
        return {"enc_products": 4 * (x.shape[1] + a.encoder.hidden) * a.encoder.kernel ** 2, "fc_products": fc}

    def cost(self, a: Attrs, ins, out, io):
        t, c, hh, ww = ins[0].shape
        enc, pix = a.encoder, hh * ww
        regions = tuple(self.weight_products(a, ins[0]).values())  # one ALLOCATION region per cell
        mults = sum(regions)
        steps = t * enc.hidden * pix
        if a.forecaster is not None:
            steps += a.steps_out * enc.hidden * pix
        mults += len(self.analyze(a, ins[0]).forms)  # float-scale requantizations: one multiplier each
        return recurrent_work(self, a, ins, out, states=3, mults=mults, taps=(c + enc.hidden) * enc.kernel ** 2,
                              steps=steps, regions=regions, frame=(enc.kernel, hh, ww))


OP = ConvLstm()
