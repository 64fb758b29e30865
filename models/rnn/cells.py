"""Quantized recurrent cells whose inference is an integer machine with power-of-two scales.

Three cells, all ``batch_first`` and single-layer, unidirectional:

* :func:`quant_lstm` -- brevitas' own ``QuantLSTM`` configured with tessera's quantizers.
* :class:`QuantGRU` -- a GRU built from brevitas ``QuantLinear`` / ``QuantIdentity`` /
  ``QuantSigmoid`` / ``QuantTanh`` (brevitas has no ``QuantGRU``).
* :class:`QuantConvLSTM` -- a ConvLSTM (Shi et al., 2015, without peephole terms) whose
  gates are brevitas ``QuantConv2d`` convolutions, with the LSTM gating of ``QuantLSTM``.

Quantization of every cell (all scales powers of two, all zero-points 0):

=========================  ==================================  ===========================
tensor                     quantizer                           scale
=========================  ==================================  ===========================
weights                    ``weight_quant`` (BinaryConnect...  per tensor, see
                           or 8-bit, or ``None`` = float)      :mod:`.quant`
biases                     ``Int24Bias`` (``None`` when the    input scale x weight scale
                           weights are float)
cell input                 ``Int8ActPow2`` (signed 8-bit)      learned
gate accumulators          ``Int8ActPow2``, one per gate       learned
sigmoid outputs            :class:`~.quant.SigmoidPow2`        constant ``2**-8``
tanh outputs               :class:`~.quant.TanhPow2`           constant ``2**-7``
cell state (LSTM, ConvLSTM) ``Int8ActPow2`` (``cell_state_bits``) learned
hidden state / output      ``Int8ActPow2``                     learned
=========================  ==================================  ===========================

With these, a cell step is: integer multiply-accumulate of codes, additions of
fixed-point numbers with power-of-two scales (exact after aligning radix points),
requantization ``clamp(round_half_even(x / s), lo, hi) * s`` at every quantizer, and
sigmoid / tanh evaluated on a quantized accumulator and rounded to the constant output
grid (a lookup table over the accumulator's 256 codes reproduces it).  ``fp`` weights are
float32 constants (dyadic rationals), so even then every product is exact in fixed point.

LSTM step (brevitas ``_QuantLSTMCell.forward_iter``, reproduced by :class:`QuantConvLSTM`
with convolutions in place of matrix products)::

    i = Qsig(sigmoid(Qacc_i(W_ii x + W_hi h + b_i)))      f, o likewise (Qacc_f, Qacc_o)
    g = Qtanh(tanh(Qacc_c(W_ic x + W_hc h + b_c)))
    c' = Qc(Qc(f * c) + Qc(i * g))
    h' = Qout(o * Qtanh(tanh(c')))

GRU step (PyTorch's ``nn.GRU`` equations, gate order r, z, n)::

    r = Qsig(sigmoid(Qacc_r(W_ir x + b_ir + W_hr h + b_hr)))
    z = Qsig(sigmoid(Qacc_z(W_iz x + b_iz + W_hz h + b_hz)))
    n = Qtanh(tanh(Qacc_n(W_in x + b_in + r * (W_hn h + b_hn))))
    h' = Qout((1 - z) * n + z * h)

``Q*`` is a requantization; products of two quantized values and sums are exact.  The
initial states are zero unless given, in which case they first pass through ``Qout`` / ``Qc``
(as in brevitas ``QuantLSTM``).
"""

from __future__ import annotations

import torch
from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantLSTM, QuantSigmoid, QuantTanh
from torch import nn

from .quant import Int8ActPow2, Int16ActPow2, Int24Bias, SigmoidPow2, TanhPow2

__all__ = ["QuantConvLSTM", "QuantGRU", "act_quant_bits", "quant_lstm"]


def act_quant_bits(bits: int):
    """Signed power-of-two activation quantizer with ``bits`` (8 or 16) bits."""
    try:
        return {8: Int8ActPow2, 16: Int16ActPow2}[int(bits)]
    except KeyError:
        raise ValueError("activation/state bit width must be 8 or 16") from None


def _value(x):
    return x.value if hasattr(x, "value") and not isinstance(x, torch.Tensor) else x


def quant_lstm(input_size: int, hidden_size: int, weight_quant=None, *,
               cell_state_bits: int = 8, batch_first: bool = True) -> QuantLSTM:
    """Brevitas ``QuantLSTM`` with tessera's power-of-two quantizers (see module doc).

    ``weight_quant=None`` keeps float weights and biases; any other weight quantizer gets
    ``Int24Bias`` biases.  Returns float outputs (``return_quant_tensor=False``):
    ``out, (h, c) = lstm(x)`` with ``out`` of shape ``(N, T, hidden)``.
    """
    return QuantLSTM(
        input_size, hidden_size, num_layers=1, bias=True, batch_first=batch_first,
        weight_quant=weight_quant, bias_quant=Int24Bias if weight_quant is not None else None,
        io_quant=Int8ActPow2, gate_acc_quant=Int8ActPow2, sigmoid_quant=SigmoidPow2,
        tanh_quant=TanhPow2, cell_state_quant=act_quant_bits(cell_state_bits),
        return_quant_tensor=False)


def _qlinear(in_f, out_f, weight_quant, bias=True):
    return QuantLinear(in_f, out_f, bias=bias, weight_quant=weight_quant,
                       bias_quant=Int24Bias if (bias and weight_quant is not None) else None,
                       return_quant_tensor=False)


def _qconv(in_c, out_c, k, weight_quant, bias=True):
    return QuantConv2d(in_c, out_c, kernel_size=k, padding=k // 2, bias=bias,
                       weight_quant=weight_quant,
                       bias_quant=Int24Bias if (bias and weight_quant is not None) else None,
                       return_quant_tensor=False)


class QuantGRU(nn.Module):
    """Quantized GRU layer (single layer, ``batch_first``), PyTorch ``nn.GRU`` semantics.

    Submodules: ``input_quant`` (x), ``ih`` (``QuantLinear(input, 3H)``, rows r|z|n, bias
    ``b_i*``), ``hh`` (``QuantLinear(H, 3H)``, bias ``b_h*``), ``reset_acc_quant``,
    ``update_acc_quant``, ``new_acc_quant`` (gate accumulators), ``reset_sigmoid_quant``,
    ``update_sigmoid_quant``, ``new_tanh_quant`` and ``output_quant`` (hidden state).

    ``forward(x, h0=None) -> (out, h)`` with ``x`` ``(N, T, input)``, ``out`` ``(N, T, H)``
    (every hidden state) and ``h`` ``(N, H)`` (the last one).
    """

    def __init__(self, input_size: int, hidden_size: int, weight_quant=None) -> None:
        super().__init__()
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        H = self.hidden_size
        self.input_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True)
        self.ih = _qlinear(input_size, 3 * H, weight_quant)
        self.hh = _qlinear(H, 3 * H, weight_quant)
        self.reset_acc_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=False)
        self.update_acc_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=False)
        self.new_acc_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=False)
        self.reset_sigmoid_quant = QuantSigmoid(act_quant=SigmoidPow2, return_quant_tensor=False)
        self.update_sigmoid_quant = QuantSigmoid(act_quant=SigmoidPow2, return_quant_tensor=False)
        self.new_tanh_quant = QuantTanh(act_quant=TanhPow2, return_quant_tensor=False)
        self.output_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True)
        bound = 1.0 / H**0.5  # nn.GRU's initialisation
        for p in (self.ih.weight, self.ih.bias, self.hh.weight, self.hh.bias):
            nn.init.uniform_(p, -bound, bound)

    def step(self, gi: torch.Tensor, h_q):
        """One step: ``gi`` = ``ih(x_t)`` (float, exact), ``h_q`` quantized hidden state."""
        H = self.hidden_size
        gh = self.hh(h_q)
        h = _value(h_q)
        r = self.reset_sigmoid_quant(self.reset_acc_quant(gi[:, :H] + gh[:, :H]))
        z = self.update_sigmoid_quant(self.update_acc_quant(gi[:, H:2 * H] + gh[:, H:2 * H]))
        n = self.new_tanh_quant(self.new_acc_quant(gi[:, 2 * H:] + r * gh[:, 2 * H:]))
        return self.output_quant((1.0 - z) * n + z * h)

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        xq = self.input_quant(x)
        gi = self.ih(xq)  # (N, T, 3H): the input projections of every step at once
        if h0 is None:
            h0 = torch.zeros(x.shape[0], self.hidden_size, device=x.device, dtype=gi.dtype)
        h_q = self.output_quant(h0)
        outs = []
        for t in range(gi.shape[1]):
            h_q = self.step(gi[:, t], h_q)
            outs.append(_value(h_q))
        out = torch.stack(outs, dim=1)
        return out, out[:, -1]


class QuantConvLSTM(nn.Module):
    """Quantized ConvLSTM layer (``batch_first``): LSTM gating, convolutional gates.

    ``conv_x``: ``QuantConv2d(input_channels, 4 * hidden_channels, k)`` with bias (absent
    when ``input_channels == 0``: a forecaster that only unrolls its state), ``conv_h``:
    ``QuantConv2d(hidden_channels, 4 * hidden_channels, k)``, bias only when there is no
    ``conv_x``.  Output channels are ordered i | f | c | o (gates as in ``QuantLSTM``).
    Same-padding, stride 1.  The 11 activation quantizers carry brevitas ``QuantLSTM``'s
    names: ``input_quant`` (None without input), ``input_acc_quant``, ``forget_acc_quant``, ``cell_acc_quant``,
    ``output_acc_quant``, ``input_sigmoid_quant``, ``forget_sigmoid_quant``,
    ``cell_tanh_quant``, ``output_sigmoid_quant``, ``hidden_state_tanh_quant``,
    ``cell_state_quant``, ``output_quant``.

    ``forward(x, state=None, steps=None) -> (out, (h, c))``: ``x`` ``(N, T, C, H, W)`` or
    ``None`` (then ``steps`` steps without input and ``state`` is required);
    ``out`` ``(N, T, hidden, H, W)``.
    """

    def __init__(self, input_channels: int, hidden_channels: int, kernel_size: int = 3,
                 weight_quant=None, cell_state_bits: int = 8) -> None:
        super().__init__()
        if kernel_size % 2 != 1:
            raise ValueError("kernel_size must be odd (same padding)")
        self.input_channels = int(input_channels)
        self.hidden_channels = int(hidden_channels)
        self.kernel_size = int(kernel_size)
        Hc = self.hidden_channels
        if self.input_channels > 0:
            self.input_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True)
            self.conv_x = _qconv(self.input_channels, 4 * Hc, kernel_size, weight_quant, bias=True)
        else:
            self.input_quant = None
            self.conv_x = None
        self.conv_h = _qconv(Hc, 4 * Hc, kernel_size, weight_quant, bias=self.conv_x is None)
        acc = lambda: QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=False)  # noqa: E731
        sig = lambda: QuantSigmoid(act_quant=SigmoidPow2, return_quant_tensor=False)  # noqa: E731
        tanh = lambda: QuantTanh(act_quant=TanhPow2, return_quant_tensor=False)  # noqa: E731
        self.input_acc_quant, self.forget_acc_quant = acc(), acc()
        self.cell_acc_quant, self.output_acc_quant = acc(), acc()
        self.input_sigmoid_quant, self.forget_sigmoid_quant = sig(), sig()
        self.output_sigmoid_quant = sig()
        self.cell_tanh_quant, self.hidden_state_tanh_quant = tanh(), tanh()
        self.cell_state_quant = QuantIdentity(
            act_quant=act_quant_bits(cell_state_bits), return_quant_tensor=False)
        self.output_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True)
        # forget-gate bias 1 (Jozefowicz et al. 2015): remember by default
        bias = self.conv_x.bias if self.conv_x is not None else self.conv_h.bias
        with torch.no_grad():
            bias.zero_()
            bias[Hc:2 * Hc] = 1.0

    def step(self, gx: torch.Tensor | None, h_q, c: torch.Tensor):
        """One step; ``gx`` = ``conv_x(x_t)`` (or None), ``h_q`` quantized hidden state."""
        Hc = self.hidden_channels
        acc = self.conv_h(h_q)
        if gx is not None:
            acc = gx + acc
        i = self.input_sigmoid_quant(self.input_acc_quant(acc[:, :Hc]))
        f = self.forget_sigmoid_quant(self.forget_acc_quant(acc[:, Hc:2 * Hc]))
        g = self.cell_tanh_quant(self.cell_acc_quant(acc[:, 2 * Hc:3 * Hc]))
        o = self.output_sigmoid_quant(self.output_acc_quant(acc[:, 3 * Hc:]))
        c_new = self.cell_state_quant(
            self.cell_state_quant(f * c) + self.cell_state_quant(i * g))
        h_new = self.output_quant(o * self.hidden_state_tanh_quant(c_new))
        return h_new, c_new

    def forward(self, x: torch.Tensor | None, state=None, steps: int | None = None):
        if x is None:
            if state is None or steps is None:
                raise ValueError("without input, give the initial state and the number of steps")
            n, _, hh, ww = state[0].shape
            device, dtype = state[0].device, state[0].dtype
            gxs = [None] * int(steps)
        else:
            if x.dim() != 5 or x.shape[2] != self.input_channels:
                raise ValueError(f"expected (N, T, {self.input_channels}, H, W) input")
            n, t, ch, hh, ww = x.shape
            device, dtype = x.device, x.dtype
            xq = self.input_quant(x.reshape(n * t, ch, hh, ww))
            gx_all = self.conv_x(xq).reshape(n, t, 4 * self.hidden_channels, hh, ww)
            gxs = list(gx_all.unbind(1))
        if state is None:
            zeros = torch.zeros(n, self.hidden_channels, hh, ww, device=device, dtype=dtype)
            state = (zeros, zeros)
        h_q = self.output_quant(_value(state[0]))
        c = self.cell_state_quant(_value(state[1]))
        outs = []
        for gx in gxs:
            h_q, c = self.step(gx, h_q, c)
            outs.append(_value(h_q))
        out = torch.stack(outs, dim=1)
        return out, (out[:, -1], c)
