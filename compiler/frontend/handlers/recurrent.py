"""Import of the recurrent cell nodes (docs/rnn_export.md) into the ``lstm`` / ``gru`` ops.

* ``qonnx.custom_op.general::QuantLSTMCell`` -- brevitas' own export of ``QuantLSTM``
  (48 inputs: X, H0, C0, 8 weights, 4 biases, then scale / zero point / bit width of the
  11 internal quantizers; ``<q>_signed``, ``<q>_narrow``, ``<q>_rounding_mode``,
  ``batch_first``, ``reverse_input``, ``cifg`` attributes);
* ``tessera.custom_op::QuantGRUCell`` -- Tessera's GRU form (quantizers as attributes).

Weights and biases arrive as constants (their ``Quant`` / ``BipolarQuant`` nodes are folded
by the importer) and become integer codes on their own power-of-two grid.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from ...errors import UnsupportedModelError
from ...exact.rounding import Rounding
from ...ir.meaning import CodeScale
from ...ir.types import FixedType, dyadic_codes, dyadic_parts
from ...ops import convlstm, gru, lstm, quant
from ...ops.cells import program as cp
from ..attributes import CONVLSTM_QUANTIZERS, GRU_QUANTIZERS, LSTM_QUANTIZERS, attribute, required_attribute
from ..load import QONNX_DOMAIN, TESSERA_DOMAIN
from ..registry import handles
from ..state import ImportState
from ..values import CellState, Const, Tensor, whole_number


def _scale(node, what: str, scale) -> tuple[int, int]:
    """``(frac, mult)`` with ``scale == mult * 2**-frac`` (``mult`` 1 for a power of two)."""
    scale = np.asarray(scale, dtype=np.float64)
    where = f"node '{node.name}' ({node.op_type}): {what} quantizer scale {scale.ravel()[:2]}"
    if scale.size != 1 or not np.isfinite(scale).all() or float(scale.ravel()[0]) <= 0:
        raise UnsupportedModelError(f"{where} is not one positive number")
    frac, mult = dyadic_parts(Fraction(float(scale.ravel()[0])))
    if mult >= 1 << 30:
        raise UnsupportedModelError(f"{where} has more than 30 significant bits (a float64 scale); float32 scales are supported")
    return frac, mult


def _quant(node, what: str, scale, zp, bits, signed, narrow, rounding) -> tuple[quant.Attrs, int]:
    """The quantizer and the odd multiplier of its scale (:func:`_scale`)."""
    bits = np.asarray(bits, dtype=np.float64)
    if zp is not None and np.any(np.asarray(zp) != 0):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {what} quantizer has a non-zero zero point")
    frac, mult = _scale(node, what, scale)
    b = whole_number(bits)
    if b is None or not 2 <= b <= 32:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {what} bit width {bits.ravel()[:2]} is not an "
                                    "integer in 2..32")
    try:
        mode = Rounding.parse(rounding)
    except ValueError:
        raise UnsupportedModelError(
            f"node '{node.name}' ({node.op_type}): {what} rounding mode {str(rounding).upper()} is unknown") from None
    return quant.Attrs(FixedType(b, frac, bool(signed)), bool(narrow), mode), mult


def _attr_quants(node, names) -> tuple[dict, dict]:
    """Quantizers given as ``<q>_scale`` / ``<q>_bit_width`` / ... attributes, and their multipliers."""
    qs, mults = {}, {}
    for q in names:
        qs[q], mults[q] = _quant(node, q, attribute(node, f"{q}_scale"), None, attribute(node, f"{q}_bit_width"),
                                 attribute(node, f"{q}_signed", 1), attribute(node, f"{q}_narrow", 0),
                                 attribute(node, f"{q}_rounding_mode", "ROUND"))
    return qs, mults


def _weights(node, w: np.ndarray, what: str) -> cp.Weights:
    try:
        codes, frac = dyadic_codes(w)
    except ValueError as exc:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {what}: {exc}") from None
    return cp.Weights(codes, frac)


def _factored(mats: list[cp.Weights]) -> list[cp.Weights]:
    """Float-scaled weights (codes of 16 bits or more) with the odd factor their codes share
    taken out: ``codes * mult`` on the same grid, the products then narrow."""
    if max(int(np.abs(m.codes).max(initial=0)) for m in mats) < 1 << 16:
        return mats
    g = 0
    for m in mats:
        g = math.gcd(g, *(int(v) for v in np.unique(np.abs(m.codes))))
    if g <= 1:
        return mats
    return [cp.Weights(m.codes // g, m.frac, g) for m in mats]


def _bias(node, b: np.ndarray | None, what: str) -> tuple[np.ndarray | None, int]:
    if b is None:
        return None, 0
    w = _weights(node, np.asarray(b, dtype=np.float64).reshape(-1), what)
    return w.codes, w.frac


def _lstm_bias(node, b: Const | None, hidden: int, what: str) -> tuple[np.ndarray | None, int, int]:
    """A QuantLSTMCell gate's bias as ``(codes, frac, mult)``, ``codes * mult * 2**-frac``: None
    for brevitas' ``bias=False`` (one constant 0), one value broadcast over the rows; values
    that are no fixed-point number of at most 40 fractional bits (an ``Int16Bias`` on the float
    scale ``s_x * s_w``) as their Quant's integer codes and one dyadic scale."""
    if b is None or (b.value.size == 1 and not b.value.any()):
        return None, 0, 1
    values = np.broadcast_to(b.value.reshape(-1), (hidden,))
    try:
        codes, frac = _bias(node, values, what)
        return codes, frac, 1
    except UnsupportedModelError:
        scales = None if not b.float_scaled else np.unique(b.scale)
        if scales is None or scales.size != 1:
            raise
    frac, mult = _scale(node, what, scales)
    return np.broadcast_to(b.codes.reshape(-1), (hidden,)).astype(np.int64), frac, mult


def _state_codes(node, v: np.ndarray | None, q: quant.Attrs, n: int, what: str, mult: int = 1) -> np.ndarray:
    """Initial state codes after the state's quantizer (zero when absent)."""
    if v is None:
        return np.zeros(n, dtype=np.int64)
    v = np.asarray(v, dtype=np.float64).reshape(-1)
    if v.size != n:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {what} has {v.size} values, expected {n}")
    return quant.quantize_float(q, v / mult)


def _graph_state(state: ImportState, node, index: int) -> str | None:
    """The name of a cell's initial state input that is a tensor of the graph (None: a
    constant or absent)."""
    name = node.input[index] if index < len(node.input) else ""
    return None if not name or isinstance(state.values.get(name), Const) else name


def _state_value(state: ImportState, node, name: str, what: str, quantizer: str, q: quant.Attrs, mult: int) -> str:
    """The IR value of an initial state read from the graph.  The cell reads it as it is: its
    codes must be the state's own (its quantizer's scale: brevitas' export quantizes H0 with
    the output quantizer, C0 with the cell state's); the op checks their grid and range."""
    v = state.tensor(name, node)
    scale = state.graph.scales.get(v)
    expected = cp.scale_of(mult, q.out.frac)
    if (scale is None) != (mult == 1) or (scale is not None and (
            len(scale.scale) != 1 or scale.scale[0] != expected or any(z != 0 for z in scale.zero))):
        got = "its fixed-point type's" if scale is None else f"{[float(s) for s in scale.scale[:2]]}"
        raise UnsupportedModelError(f"node '{node.name}' (QuantLSTMCell): {what} '{name}' has scale {got}; the state's is "
                                    f"{float(expected):.9g} (quantize {what} with the cell's {quantizer} quantizer)")
    return v


def _common(node):
    if int(attribute(node, "batch_first", 1)) != 1:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): only batch_first=1 is supported")


@handles("QuantLSTMCell", domain=QONNX_DOMAIN)
def import_lstm(state: ImportState, node) -> None:
    """brevitas ``QuantLSTMCell`` -> ``lstm``."""
    _common(node)
    if len(node.input) != 48:
        raise UnsupportedModelError(f"node '{node.name}' (QuantLSTMCell): expected 48 inputs, got {len(node.input)}")
    x = state.tensor(node.input[0], node)
    x_scale = _input_scale(state, node, x)
    h0_input, c0_input = _graph_state(state, node, 1), _graph_state(state, node, 2)
    if c0_input and not h0_input:
        raise UnsupportedModelError(f"node '{node.name}' (QuantLSTMCell): C0 '{node.input[2]}' is a tensor of the graph and "
                                    "H0 a constant; the LSTM takes H0 alone or H0 and C0 as inputs")
    # X, then H0 and C0 (constants unless graph tensors), then the constants
    c = [None] + [None if given else state.const_or_none(n, node)
                  for n, given in zip(node.input[1:3], (h0_input, c0_input))] + \
        [state.const_or_none(n, node) for n in node.input[3:]]
    qs, mults = {}, {}
    for k, name in enumerate(LSTM_QUANTIZERS):
        s, z, b = c[15 + 3 * k: 18 + 3 * k]
        if s is None or b is None:
            raise UnsupportedModelError(f"node '{node.name}' (QuantLSTMCell): quantizer {name} must be constant")
        narrow = attribute(node, f"{name}_narrow", attribute(node, f"{name}_narrow_range", 0))
        qs[name], mults[name] = _quant(node, name, s, z, b, attribute(node, f"{name}_signed", 1), narrow,
                                       attribute(node, f"{name}_rounding_mode", "ROUND"))
    w_in, w_h, biases = c[3:7], c[7:11], c[11:15]
    if any(w is None for w in w_in + w_h):
        raise UnsupportedModelError(f"node '{node.name}' (QuantLSTMCell): weights must be constant")
    _check_lstm_shapes(node, w_in, w_h, biases)
    hidden = int(np.shape(w_h[0])[0])
    acc_q = ("input_acc", "forget_acc", "cell_acc", "output_acc")
    act_q = ("input_sigmoid", "forget_sigmoid", "cell_tanh", "output_sigmoid")
    gates = []
    for k, g in enumerate(lstm.GATES):
        b, bf, bm = _lstm_bias(node, state.values.get(node.input[11 + k]) if biases[k] is not None else None, hidden,
                               f"bias of gate {g}")
        wx, wh = _factored([_weights(node, w_in[k], f"input weights of gate {g}"),
                            _weights(node, w_h[k], f"hidden weights of gate {g}")])
        gates.append(lstm.Gate(wx, wh, b, bf, qs[acc_q[k]],
                               cp.Act("tanh" if g == "c" else "sigmoid", qs[act_q[k]], mults[act_q[k]]),
                               acc_mult=mults[acc_q[k]], bias_mult=bm))
    attrs = lstm.Attrs(tuple(gates), qs["cell_state"], cp.Act("tanh", qs["hidden_state_tanh"], mults["hidden_state_tanh"]),
                       qs["output"],
                       _state_codes(node, c[1], qs["output"], hidden, "H0", mults["output"]),
                       _state_codes(node, c[2], qs["cell_state"], hidden, "C0", mults["cell_state"]),
                       cifg=bool(attribute(node, "cifg", 0)), reverse=bool(attribute(node, "reverse_input", 0)),
                       cell_mult=mults["cell_state"], out_mult=mults["output"], x_scale=x_scale,
                       h0_input=h0_input is not None, c0_input=c0_input is not None)
    inputs = [x] + [_state_value(state, node, name, what, q, qs[q], mults[q])
                    for name, what, q in ((h0_input, "H0", "output"), (c0_input, "C0", "cell_state")) if name]
    state.add(node, lstm.OP, inputs, attrs, reads_real=any(v in state.graph.scales for v in inputs))
    _output_scale(state, node, qs["output"], mults["output"])


def _check_lstm_shapes(node, w_in: list, w_h: list, biases: list) -> None:
    """Every gate's input weights (H, I), hidden weights (H, H) and bias (H,) or none."""
    hidden, inputs = np.shape(w_h[0])[:1], np.shape(w_in[0])[1:2]
    for g, wx, wh, b in zip(lstm.GATES, w_in, w_h, biases):
        if np.shape(wx) != hidden + inputs or np.shape(wh) != hidden * 2 or len(hidden) != 1 or \
                (b is not None and np.size(b) not in (hidden[0], 1)):
            raise UnsupportedModelError(
                f"node '{node.name}' (QuantLSTMCell): gate {g} has input weights {list(np.shape(wx))}, hidden weights "
                f"{list(np.shape(wh))} and bias {list(np.shape(b)) if b is not None else None}; expected (H, I), (H, H), "
                "(H,)")


def _output_scale(state, node, out_q: quant.Attrs, mult: int) -> None:
    """A float-scale output: its codes carry the output quantizer's scale in the graph."""
    if mult != 1:
        state.graph.scales[node.output[0]] = CodeScale((cp.scale_of(mult, out_q.out.frac),), (Fraction(0),))


def _input_scale(state, node, x) -> tuple[int, int] | None:
    """``(frac, mult)`` of float-scaled input codes (None: the input's own fixed-point type)."""
    scale = state.graph.scales.get(x)
    if scale is None:
        return None
    if len(scale.scale) != 1 or any(z != 0 for z in scale.zero):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): its input has per-channel scales or a zero "
                                    "point; not supported")
    try:
        frac, mult = dyadic_parts(scale.scale[0])
    except ValueError:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): its input's scale {float(scale.scale[0]):.9g} is "
                                    "not a fixed-point number (quantize the input first)") from None
    if mult >= 1 << 30:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): its input's scale has more than 30 significant "
                                    "bits; float32 scales are supported")
    return frac, mult


@handles("QuantGRUCell", domain=TESSERA_DOMAIN)
def import_gru(state: ImportState, node) -> None:
    """Tessera ``QuantGRUCell`` -> ``gru``."""
    _common(node)
    x = state.tensor(node.input[0], node)
    x_scale = _input_scale(state, node, x)
    c = [None] + [state.const_or_none(n, node) for n in node.input[1:]] + [None] * (6 - len(node.input))
    h0, w_ih, w_hh, b_ih, b_hh = c[1:6]
    if w_ih is None or w_hh is None:
        raise UnsupportedModelError(f"node '{node.name}' (QuantGRUCell): weights must be constant")
    qs, mults = _attr_quants(node, GRU_QUANTIZERS)
    if w_ih.ndim != 2 or w_hh.ndim != 2:
        raise UnsupportedModelError(f"node '{node.name}' (QuantGRUCell): weights of shapes {list(w_ih.shape)} and "
                                    f"{list(w_hh.shape)}; expected (3H, I) and (3H, H)")
    hidden = int(attribute(node, "hidden_size", w_hh.shape[1]))
    if str(attribute(node, "gate_order", "rzn")) != "rzn" or w_ih.shape[0] != 3 * hidden or w_hh.shape != (3 * hidden, hidden):
        raise UnsupportedModelError(f"node '{node.name}' (QuantGRUCell): expects gate order rzn and (3H, .) weights")
    wxs = _factored([_weights(node, w_ih[k * hidden:(k + 1) * hidden], f"input weights of gate {g}")
                     for k, g in enumerate(gru.GATES)])
    whs = _factored([_weights(node, w_hh[k * hidden:(k + 1) * hidden], f"hidden weights of gate {g}")
                     for k, g in enumerate(gru.GATES)])
    gates = []
    for k, (g, acc, act) in enumerate(zip(gru.GATES, ("reset_acc", "update_acc", "new_acc"),
                                          ("reset_sigmoid", "update_sigmoid", "new_tanh"))):
        rows = slice(k * hidden, (k + 1) * hidden)
        bx, bxf = _bias(node, None if b_ih is None else np.asarray(b_ih).reshape(-1)[rows], f"input bias of gate {g}")
        bh, bhf = _bias(node, None if b_hh is None else np.asarray(b_hh).reshape(-1)[rows], f"hidden bias of gate {g}")
        gates.append(gru.Gate(wxs[k], whs[k], bx, bxf, bh, bhf, qs[acc],
                              cp.Act("tanh" if g == "n" else "sigmoid", qs[act], mults[act]), acc_mult=mults[acc]))
    attrs = gru.Attrs(tuple(gates), qs["output"], _state_codes(node, h0, qs["output"], hidden, "H0", mults["output"]),
                      reverse=bool(attribute(node, "reverse_input", 0)), out_mult=mults["output"], x_scale=x_scale)
    state.add(node, gru.OP, [x], attrs, reads_real=x_scale is not None)
    _output_scale(state, node, qs["output"], mults["output"])


def _convlstm_cell(state, node, has_input: bool):
    c = [None] + [state.const_or_none(n, node) if i not in (1, 2) or has_input else None
                  for i, n in enumerate(node.input[1:], start=1)] + [None] * (6 - len(node.input))
    w_x, w_h, b = c[3:6]
    qs, mults = _attr_quants(node, CONVLSTM_QUANTIZERS)
    hc = int(required_attribute(node, "hidden_channels"))
    k = int(required_attribute(node, "kernel_size"))
    if str(attribute(node, "gate_order", "ifco")) != "ifco" or w_h is None or w_h.shape != (4 * hc, hc, k, k):
        raise UnsupportedModelError(f"node '{node.name}' (QuantConvLSTMCell): expects gate order ifco and (4Hc, Hc, k, k) state kernels")
    if has_input and (w_x is None or w_x.ndim != 4 or w_x.shape[0] != 4 * hc or w_x.shape[2:] != (k, k)):
        raise UnsupportedModelError(f"node '{node.name}' (QuantConvLSTMCell): input kernels must be constant (4Hc, C, k, k)")
    bias_on = str(attribute(node, "bias_on", "x" if has_input else "h"))
    if bias_on not in ("x", "h"):
        raise UnsupportedModelError(f"node '{node.name}' (QuantConvLSTMCell): bias_on must be 'x' or 'h'")
    acc_q = ("input_acc", "forget_acc", "cell_acc", "output_acc")
    act_q = ("input_sigmoid", "forget_sigmoid", "cell_tanh", "output_sigmoid")
    gates = []
    for i, g in enumerate(lstm.GATES):
        rows = slice(i * hc, (i + 1) * hc)
        bias, bf = _bias(node, None if b is None else np.asarray(b).reshape(-1)[rows], f"bias of gate {g}")
        (wh,) = _factored([_weights(node, w_h[rows], f"state kernels of gate {g}")])  # conv_x, conv_h: two scales
        (wx,) = _factored([_weights(node, w_x[rows], f"input kernels of gate {g}")]) if has_input else (None,)
        gates.append(lstm.Gate(wx, wh, bias, bf, qs[acc_q[i]],
                               cp.Act("tanh" if g == "c" else "sigmoid", qs[act_q[i]], mults[act_q[i]]),
                               acc_mult=mults[acc_q[i]]))
    cell_act = cp.Act("tanh", qs["hidden_state_tanh"], mults["hidden_state_tanh"])
    return convlstm.Cell(tuple(gates), qs["cell_state"], cell_act, qs["output"], mults["cell_state"],
                         mults["output"]), c


@handles("QuantConvLSTMCell", domain=TESSERA_DOMAIN)
def import_convlstm(state: ImportState, node) -> None:
    """Tessera ``QuantConvLSTMCell`` -> ``convlstm``: a cell with input starts a node (zero
    initial states); a cell without input whose ``H0``/``C0`` are another cell's last
    states becomes that node's forecaster."""
    _common(node)
    has_input = bool(node.input[0])
    if has_input:
        x = state.tensor(node.input[0], node)
        x_scale = _input_scale(state, node, x)
        cell, c = _convlstm_cell(state, node, True)
        if any(v is not None and np.any(v) for v in c[1:3]):
            raise UnsupportedModelError(f"node '{node.name}' (QuantConvLSTMCell): only zero initial states are supported")
        state.add(node, convlstm.OP, [x], convlstm.Attrs(cell, x_scale=x_scale), reads_real=x_scale is not None)
        _output_scale(state, node, cell.out, cell.out_mult)
        ir = state.graph.nodes[-1]
        for out, which in zip(node.output[1:3], ("h", "c")):
            if out:
                state.values[out] = CellState(ir, which)
        return
    h0, c0 = (state.values.get(n) for n in node.input[1:3])
    if not (isinstance(h0, CellState) and isinstance(c0, CellState) and h0.node is c0.node and
            (h0.which, c0.which) == ("h", "c") and h0.node.attrs.forecaster is None):
        raise UnsupportedModelError(
            f"node '{node.name}' (QuantConvLSTMCell): a cell without input must start from another cell's last h and c")
    cell, _ = _convlstm_cell(state, node, False)
    prod = h0.node
    if state.live_users(prod.output):
        raise UnsupportedModelError(f"node '{node.name}': the encoder's output sequence is also used elsewhere")
    prod.attrs = dataclasses.replace(prod.attrs, forecaster=cell, steps_out=int(attribute(node, "steps")))
    state.graph.scales.pop(prod.output, None)  # the encoder's sequence is no longer an output
    prod.output = node.output[0]
    state.values[node.output[0]] = Tensor(node.output[0])
    _output_scale(state, node, cell.out, cell.out_mult)
