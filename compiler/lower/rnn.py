"""Lowering of the recurrent ops (``lstm``, ``gru``) to Tessera's hls4ml extension layers.

Every kernel type is an exact-width ``ap_int`` holding codes: the widths come from the
op's interval analysis (:meth:`tessera.compiler.ops.cellprog.RecurrentOp.analyze`), the
alignment shifts from the fracs of the same analysis, so the C++ step
(``hls_templates/rnn/nnet_tessera_rnn.h``) performs exactly the integer operations of
the op's ``step``.  Weights are stored as codes on their codebook (binary: 1 bit).
"""

from __future__ import annotations

import numpy as np

from ...hls_templates import render
from ..errors import UnsupportedModelError
from ..ir.types import FixedType, TensorType
from ..ops import cellprog as cp
from ..ops.quant import HLS_ROUNDING
from ..ops.quant import Attrs as QuantAttrs

#: QONNX rounding modes -> the kernel's enum (nnet_tessera_rnn.h)
MODES = {"ROUND": "TESSERA_ROUND", "HALF_EVEN": "TESSERA_ROUND", "FLOOR": "TESSERA_FLOOR", "CEIL": "TESSERA_CEIL",
         "DOWN": "TESSERA_DOWN", "UP": "TESSERA_UP", "HALF_UP": "TESSERA_HALF_UP", "HALF_DOWN": "TESSERA_HALF_DOWN"}
KINDS = {"int": "TESSERA_W_INT", "binary": "TESSERA_W_BINARY", "ternary": "TESSERA_W_TERNARY",
         "quaternary": "TESSERA_W_QUATERNARY"}
assert set(MODES) == set(HLS_ROUNDING)


def cint(t: FixedType) -> str:
    """The kernel's code type for ``t``: a signed ap_int (one more bit when unsigned)."""
    return f"ap_int<{t.width + (0 if t.signed else 1)}>"


def int_precision(lo: int, hi: int) -> str:
    """hls4ml precision of an integer array (weights, biases, tables stored as codes)."""
    t = FixedType.for_range(min(lo, 0), max(hi, 0), 0)
    return t.hls()


def codebook(weights: list[cp.Weights]) -> tuple[str, list[np.ndarray], str]:
    """(kind, stored arrays, hls4ml precision) for weights that share one storage type."""
    kinds = {w.kind for w in weights}
    kind = kinds.pop() if len(kinds) == 1 else "int"
    if kind == "binary":
        return kind, [(w.codes + 1) // 2 for w in weights], "ufixed<1,1>"
    codes = [w.codes for w in weights]
    lo, hi = min(int(c.min()) for c in codes), max(int(c.max()) for c in codes)
    return kind, codes, int_precision(lo, hi)


def _shift(types: dict, to: str, frm: str | int) -> int:
    f = frm if isinstance(frm, int) else types[frm].frac
    s = types[to].frac - f
    assert s >= 0, (to, frm)
    return s


def _quant_fields(q: QuantAttrs, in_frac: int) -> dict:
    if q.rounding not in MODES:
        raise UnsupportedModelError(f"rounding mode {q.rounding} is not supported")
    return {"rq_shift": in_frac - q.out.frac, "rq_mode": MODES[q.rounding], "qmin": q.qmin, "qmax": q.qmax}


def _tables(gates) -> tuple[np.ndarray, list[int]]:
    """All gate tables concatenated, and each gate's offset."""
    tables, offsets, pos = [], [], 0
    for g in gates:
        t = g.act.table(g.acc)
        tables.append(t)
        offsets.append(pos)
        pos += t.size
    return np.concatenate(tables), offsets


def _bias(codes, frac: int | None, n: int, acc_frac: int) -> tuple[np.ndarray, int]:
    """Bias codes and frac (zeros on the accumulator grid when there is none)."""
    if codes is None:
        return np.zeros(n, dtype=np.int64), acc_frac
    return np.asarray(codes, dtype=np.int64), int(frac)


def _types(A: cp.IntervalArith, names) -> str:
    return "\n".join(f"    typedef {cint(A.types[n])} {n}_t;" for n in names)


def _weights_layer(hl, node, out: TensorType, x: TensorType, class_name: str, attrs: dict, arrays: dict,
                   precisions: dict) -> None:
    layer = {"class_name": class_name, "n_steps": x.shape[0], "n_in": x.shape[1], "n_out": out.size,
             "out_shape": [out.shape[0], out.shape[1]] if len(out.shape) == 2 else [out.shape[0]], **attrs}
    for k, v in arrays.items():
        layer[f"{k}_data"] = np.asarray(v, dtype=np.float64).reshape(-1)
    hl.add_layer(node, layer, {"result": out.ftype.hls(), **precisions}, layout="flat")


def _lstm_body(A: cp.IntervalArith, p: str, gates: dict, cq: QuantAttrs, cell_act: cp.Act, oq: QuantAttrs,
               cifg: bool, has_input: bool = True) -> tuple[str, np.ndarray, np.ndarray, np.ndarray]:
    """Types, constants and gate structs of one LSTM-gated cell (names in ``A`` prefixed by
    ``p``); returns (body, concatenated biases, gate tables, cell tanh table)."""
    from ..ops.lstm import GATES

    T = {k[len(p):]: v for k, v in A.types.items() if k.startswith(p)}
    H = gates["i"].wh.codes.shape[0]
    table, offsets = _tables([gates[g] for g in GATES])
    biases, blocks = [], []
    for k, g in enumerate(GATES):
        gate = gates[g]
        if cifg and g == "f":
            blocks.append(render("rnn/cifg_gate.tpl", name=g, act_t=cint(T["f_act"])))
            biases.append(np.zeros(H, dtype=np.int64))
            continue
        b, bf = _bias(gate.bias, gate.bias_frac, H, T[f"{g}_acc"].frac)
        biases.append(b)
        blocks.append(render(
            "rnn/lstm_gate.tpl", name=g, ax_t=cint(T[f"{g}_ax"]) if has_input else "ap_int<2>",
            ah_t=cint(T[f"{g}_ah"]), acc_t=cint(T[f"{g}_acc"]), q_t=cint(T[f"{g}_q"]), act_t=cint(T[f"{g}_act"]),
            sh_ax=_shift(T, f"{g}_acc", f"{g}_ax") if has_input else 0, sh_ah=_shift(T, f"{g}_acc", f"{g}_ah"),
            sh_b=_shift(T, f"{g}_acc", bf), table_offset=offsets[k], **_quant_fields(gate.acc, T[f"{g}_acc"].frac)))
    types = "\n".join([f"    typedef {cint(oq.out)} h_t;", f"    typedef {cint(cq.out)} c_t;",
                       *(f"    typedef {cint(T[n])} {n}_t;" for n in ("fc", "ig", "fc_q", "ig_q", "c_sum", "c_tanh", "h_prod"))])
    one = int(np.clip(1 << gates["i"].act.out.out.frac, gates["i"].act.out.qmin, gates["i"].act.out.qmax))
    body = render(
        "rnn/lstm_body.tpl", types=types, gates="\n".join(blocks), cifg_one=one,
        sh_fc=T["fc"].frac - cq.out.frac, sh_ig=T["ig"].frac - cq.out.frac, sh_sum_fc=_shift(T, "c_sum", "fc_q"),
        sh_sum_ig=_shift(T, "c_sum", "ig_q"), sh_c=T["c_sum"].frac - cq.out.frac, c_mode=MODES[cq.rounding],
        c_min=cq.qmin, c_max=cq.qmax, sh_h=T["h_prod"].frac - oq.out.frac, h_mode=MODES[oq.rounding],
        h_min=oq.qmin, h_max=oq.qmax)
    return body, np.concatenate(biases), table, cell_act.table(cq)


def lower_lstm(attrs, hl, node, x: TensorType, out: TensorType, A: cp.IntervalArith) -> None:
    from ..ops.lstm import GATES

    if np.any(attrs.h0) or np.any(attrs.c0):
        raise UnsupportedModelError(f"node '{node.name}': the HLS LSTM starts from zero states; this model's are not zero")
    gates = dict(zip(GATES, attrs.gates))
    kind, stored, wprec = codebook([gates[g].wx for g in GATES] + [gates[g].wh for g in GATES])
    wx, wh = np.concatenate(stored[:4]), np.concatenate(stored[4:])
    body, b, table, ctable = _lstm_body(A, "", gates, attrs.cell, attrs.cell_act, attrs.out, attrs.cifg)
    body = f"    typedef {cint(x.ftype)} x_t;\n" + body
    _weights_layer(hl, node, out, x, "TesseraLSTM", {
        "n_hidden": attrs.hidden, "reverse": attrs.reverse, "return_sequences": attrs.return_sequences,
        "cifg": attrs.cifg, "wkind": KINDS[kind], "body": body,
    }, {"wx": wx, "wh": wh, "b": b, "gate_table": table, "cell_table": ctable}, {
        "wx": wprec, "wh": wprec, "b": int_precision(int(b.min()), int(b.max())),
        "gate_table": int_precision(int(table.min()), int(table.max())),
        "cell_table": int_precision(int(ctable.min()), int(ctable.max())),
    })


def lower_convlstm(attrs, hl, node, x: TensorType, out: TensorType, A: cp.IntervalArith) -> None:
    """Encoder (and forecaster) cells as nested ``enc`` / ``fc`` structs of one config."""
    from ..ops.lstm import GATES

    cells = [("enc", attrs.encoder, True)] + ([("fc", attrs.forecaster, False)] if attrs.forecaster else [])
    arrays, precisions, blocks = {}, {}, []
    for name, cell, has_input in cells:
        gates = dict(zip(GATES, cell.gates))
        mats = ([gates[g].wx for g in GATES] if has_input else []) + [gates[g].wh for g in GATES]
        kind, stored, wprec = codebook(mats)
        body, b, table, ctable = _lstm_body(A, f"{name}_", gates, cell.cell, cell.cell_act, cell.out, False, has_input)
        if has_input:
            arrays[f"{name}_wx"], precisions[f"{name}_wx"] = np.concatenate(stored[:4]), wprec
        arrays[f"{name}_wh"], precisions[f"{name}_wh"] = np.concatenate(stored[-4:]), wprec
        for key, v in (("b", b), ("gate_table", table), ("cell_table", ctable)):
            arrays[f"{name}_{key}"], precisions[f"{name}_{key}"] = v, int_precision(int(v.min()), int(v.max()))
        blocks.append(render("rnn/convlstm_cell.tpl", name=name, has_input=str(has_input).lower(), wkind=KINDS[kind],
                             wx_t=f"{name}_wx_t" if has_input else "ap_int<2>", body=body))
    hand = {"sh_handover_h": 0, "sh_handover_c": 0}
    if attrs.forecaster is not None:
        hand = {"sh_handover_h": attrs.encoder.out.out.frac - attrs.forecaster.out.out.frac,
                "sh_handover_c": attrs.encoder.cell.out.frac - attrs.forecaster.cell.out.frac}
    t, c, hh, ww = x.shape
    layer = {"class_name": "TesseraConvLSTMForecaster" if attrs.forecaster else "TesseraConvLSTM",
             "n_steps": t, "n_in": c, "n_hidden": attrs.encoder.hidden, "height": hh, "width": ww,
             "kernel": attrs.encoder.kernel, "steps_out": attrs.steps_out,
             "out_shape": [out.shape[0], hh, ww, out.shape[1]],
             "body": f"    typedef {cint(x.ftype)} x_t;\n" + "\n".join(f"    static const int {k} = {v};" for k, v in hand.items())
             + "\n" + "\n".join(blocks)}
    for k, v in arrays.items():
        layer[f"{k}_data"] = np.asarray(v, dtype=np.float64).reshape(-1)
    hl.add_layer(node, layer, {"result": out.ftype.hls(), **precisions}, layout="sequence")


def lower_gru(attrs, hl, node, x: TensorType, out: TensorType, A: cp.IntervalArith) -> None:
    from ..ops.gru import GATES

    if np.any(attrs.h0):
        raise UnsupportedModelError(f"node '{node.name}': the HLS GRU starts from a zero state; this model's is not zero")
    H = attrs.hidden
    kind, stored, wprec = codebook([g.wx for g in attrs.gates] + [g.wh for g in attrs.gates])
    wx, wh = np.concatenate(stored[:3]), np.concatenate(stored[3:])
    table, offsets = _tables(attrs.gates)
    bxs, bhs, gate_blocks = [], [], []
    for k, (g, gate) in enumerate(zip(GATES, attrs.gates)):
        bx, bxf = _bias(gate.bx, gate.bx_frac, H, A.types[f"{g}_gi"].frac)
        bh, bhf = _bias(gate.bh, gate.bh_frac, H, A.types[f"{g}_gh"].frac)
        bxs.append(bx)
        bhs.append(bh)
        gh_name = "n_rgh" if g == "n" else f"{g}_gh"
        gate_blocks.append(render(
            "rnn/gru_gate.tpl", name=g, ax_t=cint(A.types[f"{g}_ax"]), ah_t=cint(A.types[f"{g}_ah"]),
            gi_t=cint(A.types[f"{g}_gi"]), gh_t=cint(A.types[f"{g}_gh"]), acc_t=cint(A.types[f"{g}_acc"]),
            q_t=cint(A.types[f"{g}_q"]), act_t=cint(A.types[f"{g}_act"]),
            sh_ax=_shift(A.types, f"{g}_gi", f"{g}_ax"), sh_bx=_shift(A.types, f"{g}_gi", bxf),
            sh_ah=_shift(A.types, f"{g}_gh", f"{g}_ah"), sh_bh=_shift(A.types, f"{g}_gh", bhf),
            sh_gi=_shift(A.types, f"{g}_acc", f"{g}_gi"), sh_gh=_shift(A.types, f"{g}_acc", gh_name),
            table_offset=offsets[k], **_quant_fields(gate.acc, A.types[f"{g}_acc"].frac)))
    bx, bh = np.concatenate(bxs), np.concatenate(bhs)
    oq = attrs.out
    types = "\n".join([f"    typedef {cint(x.ftype)} x_t;", f"    typedef {cint(oq.out)} h_t;",
                       _types(A, ["n_rgh", "z_h", "one_minus_z", "zn", "h_sum"])])
    z_frac = A.types["z_act"].frac
    body = render("rnn/gru_body.tpl", types=types, gates="\n".join(gate_blocks), z_one=1 << z_frac,
                  sh_sum_zn=_shift(A.types, "h_sum", "zn"), sh_sum_zh=_shift(A.types, "h_sum", "z_h"),
                  sh_h=A.types["h_sum"].frac - oq.out.frac, h_mode=MODES[oq.rounding], h_min=oq.qmin, h_max=oq.qmax)
    _weights_layer(hl, node, out, x, "TesseraGRU", {
        "n_hidden": H, "reverse": attrs.reverse, "return_sequences": attrs.return_sequences,
        "wkind": KINDS[kind], "body": body,
    }, {"wx": wx, "wh": wh, "bx": bx, "bh": bh, "gate_table": table}, {
        "wx": wprec, "wh": wprec, "bx": int_precision(int(bx.min()), int(bx.max())),
        "bh": int_precision(int(bh.min()), int(bh.max())), "gate_table": int_precision(int(table.min()), int(table.max())),
    })
