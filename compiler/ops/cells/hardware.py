"""The hardware side of the recurrent cells (``lstm``, ``gru``, ``convlstm``): what their
lowerings and costs share.

Every kernel type is an exact-width ``ap_int`` holding codes: the widths come from the
op's interval analysis (:meth:`.program.CellOp.analyze`), the alignment shifts from the
fracs of the same analysis, so the C++ step (``hls_templates/rnn/nnet_tessera_rnn.h``)
performs exactly the integer operations of the op's ``step``.  Weights are stored as codes
on their codebook (binary: 1 bit).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ...errors import UnsupportedModelError
from ...ir.types import FixedType, TensorType
from . import program as cp
from ..base import Layout
from ..base.extension import Weight, layer_reuse
from ..base.cost import Memory, Work, bits, linear_work, multiplier_limit


def cint(t: FixedType) -> str:
    """The kernel's code type for ``t``: a signed ap_int (one more bit when unsigned)."""
    return f"ap_int<{t.width + (0 if t.signed else 1)}>"


def int_precision(lo: int, hi: int) -> str:
    """hls4ml precision of an integer array (weights, biases, tables stored as codes)."""
    return FixedType.for_range(min(lo, 0), max(hi, 0), 0).hls()


def codebook(weights: list[cp.Weights]) -> tuple[cp.Codebook, list[np.ndarray], str]:
    """(kind, stored arrays, hls4ml precision) for weights that share one storage type."""
    kind = cp.codebook_kind(weights)
    if kind == cp.Codebook.BINARY:
        return kind, [(w.codes + 1) // 2 for w in weights], "ufixed<1,1>"
    codes = [w.codes for w in weights]
    lo, hi = min(int(c.min()) for c in codes), max(int(c.max()) for c in codes)
    return kind, codes, int_precision(lo, hi)


def shift(types: dict, to: str, frm: str | int) -> int:
    """The left shift aligning ``frm`` (a named intermediate, or a frac) onto ``to``."""
    f = frm if isinstance(frm, int) else types[frm].frac
    s = types[to].frac - f
    assert s >= 0, (to, frm)
    return s


def gate_tables(gates, carry: bool = False) -> tuple[np.ndarray, list[int]]:
    """All gate tables, each padded to the longest (its last entry repeated, never read) so
    that a block partition by the gate count gives every gate its own memory (one lookup per
    gate per pipelined iteration), and each gate's offset (``carry``: output codes over
    accumulator codes of any scale, else payloads over power-of-two codes)."""
    tables = [g.act.codes(g.acc, g.acc_mult) if carry else g.act.table(g.acc) for g in gates]
    size = max(t.size for t in tables)
    return (np.concatenate([np.pad(t, (0, size - t.size), mode="edge") for t in tables]),
            [k * size for k in range(len(tables))])


def unit_major(rows: list[np.ndarray]) -> np.ndarray:
    """Per-gate arrays (each a row per hidden unit, e.g. (H, I) weights or (H,) biases)
    interleaved unit by unit, flat: row ``j * gates + g`` is gate ``g``'s row ``j``.  The
    kernels read one unit's rows of every gate per pipelined iteration, so they lie in one
    contiguous block, one word of the reshaped array (hls_templates/rnn)."""
    return np.stack([np.asarray(r) for r in rows], axis=1).reshape(-1)


def cell_limit(products_attr: str) -> Callable[[Any], int]:
    """The ``ALLOCATION`` limit of a cell's weight products (the layer attribute
    ``products_attr``) at the layer's reuse factor: ``ceil(products / R)`` (ops/base/cost.py)."""
    return lambda layer: multiplier_limit(layer.get_attr(products_attr), 0, layer_reuse(layer))


def cell_weights(names: tuple[str, ...]) -> tuple[Weight, ...]:
    """A recurrent layer's arrays, each the C++ array ``<name><index>``."""
    return tuple(Weight(name, f"{name}{{index}}") for name in names)


def bias_codes(codes, frac: int | None, n: int, acc_frac: int) -> tuple[np.ndarray, int]:
    """Bias codes and frac (zeros on the accumulator grid when there is none)."""
    if codes is None:
        return np.zeros(n, dtype=np.int64), acc_frac
    return np.asarray(codes, dtype=np.int64), int(frac)


def add_weights_layer(hls, node, out: TensorType, x: TensorType, class_name: str, attrs: dict, arrays: dict,
                      precisions: dict) -> None:
    """One recurrent extension layer over a (steps, features) input, with its arrays."""
    layer = {"class_name": class_name, "n_steps": x.shape[0], "n_in": x.shape[1], "n_out": out.size,
             "out_shape": [out.shape[0], out.shape[1]] if len(out.shape) == 2 else [out.shape[0]], **attrs}
    for k, v in arrays.items():
        layer[f"{k}_data"] = np.asarray(v, dtype=np.float64).reshape(-1)
    hls.add_layer(node, layer, {"result": out.ftype.hls(), **precisions}, layout=Layout.FLAT)


def require_zero_states(states: list[np.ndarray], node, what: str) -> None:
    if any(np.any(s) for s in states):
        raise UnsupportedModelError(f"node '{node.name}': the HLS {what} starts from zero states; this model's are not zero")


def recurrent_work(op: cp.CellOp, attrs, ins, out, *, states: int, mults: int, taps: int, steps: int,
                   regions: tuple[int, ...], frame: tuple[int, int, int] | None = None) -> Work:
    """LSTM / GRU / ConvLSTM kernels (hls_templates/rnn): the Hidden (x Pixels) loop is
    pipelined with II = reuse; one iteration computes every gate of one unit (one pixel).
    ``states``: 3 with a cell state (LSTM: h, the next h, c), else 2 (GRU: h, the next h).
    Dense cells keep h and the next h in registers and c in one RAM of a word per unit;
    ``frame`` = (kernel, height, width) for the ConvLSTM, whose h and input frames are
    partitioned for its gate-convolution windows (channels completely, rows and columns
    cyclically by the kernel) and whose next h and c are one RAM each.  Each cell's gate
    tables, padded to one length, are one memory per gate."""
    cells = op.cells(attrs)
    mats = [w for cell in cells for w in cp.cell_matrices(cell)]
    x = ins[0]
    hidden = cells[0].hidden
    w_bits = cp.stored_width(mats)
    state: list[Memory] = []
    if frame is not None:  # a windowed frame's banks: K x K per channel, ceil(H/K) ceil(W/K) words each
        k, hh, ww = frame
        window_depth = -(-hh // k) * -(-ww // k)
    for c in cells:
        hb = c.out.out.width
        if frame is None:
            state += [Memory(2 * hidden, 1, hb)] + [Memory(1, hidden, hb)] * (states - 2)
        else:
            state += [Memory(hidden * k * k, window_depth, hb)] + [Memory(1, hidden * hh * ww, hb)] * (states - 1)
        widths = [g.act.out.out.width if op.carries_scales else g.act.payload_bits() for g in c.gates]
        state.append(Memory(len(c.gates), max(g.acc.qmax - g.acc.qmin + 1 for g in c.gates), max(widths)))
    if frame is not None:  # the input frame
        state.append(Memory(x.shape[1] * k * k, window_depth, bits(x)))
    return linear_work(ins, out, macs=op.macs(attrs, ins, out), weight_bits=op.weight_bits(attrs), mults=mults,
                       taps=taps, steps=steps, kind=cp.codebook_kind(mats), w_bits=w_bits, state=tuple(state),
                       acc_bits=bits(x) + w_bits + max(1, math.ceil(math.log2(taps))), lanes=len(cells[0].gates),
                       lut_per_lane=bits(out), regions=tuple(g for g in regions if g))


def check_table_inputs(quants, node: str) -> None:
    for q in quants:
        if q.out.width > 16:
            raise UnsupportedModelError(f"node '{node}': a {q.out.width}-bit quantizer feeds a lookup table (max 16 bits)")


def check_biases(what: str, gates, hidden: int, node: str) -> None:
    """Every gate bias (``bias``, or GRU's ``bx`` / ``bh``) has one value per hidden unit."""
    for g in gates:
        for b in (getattr(g, k, None) for k in ("bias", "bx", "bh")):
            if b is not None and np.shape(b) != (hidden,):
                raise UnsupportedModelError(f"node '{node}': {what} gate bias of shape {np.shape(b)}, expected ({hidden},)")


def check_dense_cell(what: str, attrs, x: TensorType, node: str) -> None:
    """A (steps, features) input and (H, features) / (H, H) gate weights."""
    if len(x.shape) != 2:
        raise UnsupportedModelError(f"node '{node}': {what} input must be (steps, features), got {x.shape}")
    for g in attrs.gates:
        if g.wx.codes.shape != (attrs.hidden, x.shape[1]) or g.wh.codes.shape != (attrs.hidden, attrs.hidden):
            raise UnsupportedModelError(f"node '{node}': {what} weight shapes do not match input {x.shape}")
    check_biases(what, attrs.gates, attrs.hidden, node)


__all__ = ["add_weights_layer", "bias_codes", "cell_limit", "cell_weights", "check_biases", "check_dense_cell",
           "check_table_inputs", "cint", "codebook", "gate_tables", "int_precision", "recurrent_work", "require_zero_states",
           "shift", "unit_major"]
