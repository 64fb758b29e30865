"""Networks of the quantized-RNN study: a sentiment classifier and a ConvLSTM forecaster.

Weight quantization follows the usual BinaryConnect practice: the recurrent cells (every
gate, input-to-hidden and hidden-to-hidden) use the studied quantizer
(``--weights {fp,binary,ternary,quaternary}``); the embedding table and the final
classifier / output convolution use 8-bit power-of-two weights (``Int8WeightPow2``), or
float weights for ``fp``.  Activations and states are power-of-two quantized in all four
variants (see :mod:`tessera.models.rnn.cells`).
"""

from __future__ import annotations

import torch
from brevitas.nn import QuantConv2d, QuantEmbedding, QuantIdentity, QuantLinear
from torch import nn

from .cells import QuantConvLSTM, QuantGRU, quant_lstm
from .quant import WEIGHT_KINDS, Int8ActPow2, Int8WeightPow2, Int24Bias, SigmoidPow2, weight_quant_for

__all__ = ["ConvLSTMForecaster", "SentimentRNN", "depth_to_space", "space_to_depth"]


def _edge_quant(kind: str):
    return None if kind == "fp" else Int8WeightPow2


class SentimentRNN(nn.Module):
    """Embedding -> quantized LSTM or GRU -> last hidden state -> dense (2 logits).

    Input: int64 token ids ``(N, T)``, right-padded with id 0, and optionally the lengths
    ``(N,)``: the classifier reads the hidden state after each sequence's last real token
    (the last position when ``lengths`` is None), so padding never changes a prediction.
    Output: quantized float logits ``(N, 2)``.

    Layers: ``embedding`` (``QuantEmbedding``), ``rnn`` (:func:`quant_lstm` or
    :class:`QuantGRU`), ``head_quant`` (8-bit requantization of the last hidden state, so
    that the classifier gets a quantized input for its ``Int24Bias``), ``classifier``
    (``QuantLinear(hidden, 2)``), ``output_quant`` (8-bit logits).
    """

    def __init__(self, cell: str, weights: str, vocab_size: int, embed_dim: int = 32,
                 hidden_size: int = 64, stochastic: bool = False) -> None:
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell must be 'lstm' or 'gru', not {cell!r}")
        if weights not in WEIGHT_KINDS:
            raise ValueError(f"weights must be one of {WEIGHT_KINDS}, not {weights!r}")
        self.cell, self.weights = cell, weights
        self.vocab_size, self.embed_dim, self.hidden_size = vocab_size, embed_dim, hidden_size
        edge = _edge_quant(weights)
        self.embedding = QuantEmbedding(vocab_size, embed_dim, padding_idx=0, weight_quant=edge,
                                        return_quant_tensor=False)
        with torch.no_grad():
            nn.init.normal_(self.embedding.weight, 0.0, 0.5)
            self.embedding.weight[0].zero_()
        wq = weight_quant_for(weights, stochastic=stochastic)
        if cell == "lstm":
            self.rnn = quant_lstm(embed_dim, hidden_size, wq)
        else:
            self.rnn = QuantGRU(embed_dim, hidden_size, wq)
        self.head_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=True)
        self.classifier = QuantLinear(hidden_size, 2, bias=True, weight_quant=edge,
                                      bias_quant=Int24Bias if edge is not None else None,
                                      return_quant_tensor=False)
        self.output_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=False)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        emb = self.embedding(tokens)
        out, _ = self.rnn(emb)
        if lengths is None:
            last = out[:, -1]
        else:  # right padding: the state after each sequence's last real token
            idx = (lengths.to(out.device).long() - 1).clamp(min=0)
            last = out[torch.arange(out.shape[0], device=out.device), idx]
        return self.output_quant(self.classifier(self.head_quant(last)))


def space_to_depth(x: torch.Tensor, patch: int) -> torch.Tensor:
    """``(..., C, H, W) -> (..., C * p * p, H / p, W / p)`` (``pixel_unshuffle``)."""
    if patch == 1:
        return x
    lead = x.shape[:-3]
    y = nn.functional.pixel_unshuffle(x.reshape(-1, *x.shape[-3:]), patch)
    return y.reshape(*lead, *y.shape[-3:])


def depth_to_space(x: torch.Tensor, patch: int) -> torch.Tensor:
    """Inverse of :func:`space_to_depth` (``pixel_shuffle``)."""
    if patch == 1:
        return x
    lead = x.shape[:-3]
    y = nn.functional.pixel_shuffle(x.reshape(-1, *x.shape[-3:]), patch)
    return y.reshape(*lead, *y.shape[-3:])


class ConvLSTMForecaster(nn.Module):
    """Encoder-forecaster ConvLSTM for next-frame prediction (Shi et al., 2015).

    Frames ``(N, T_in, 1, S, S)`` with pixels in [0, 1] are cut into ``patch x patch``
    patches (space-to-depth: ``(N, T_in, patch**2, S / patch, S / patch)``, as Shi et al. do
    with 4 x 4 patches on 64 x 64 Moving MNIST) and quantized to unsigned 8 bits with the
    constant scale ``2**-8`` (``frame_quant``).  The ``encoder`` ConvLSTM reads them; the
    ``forecaster`` ConvLSTM (no input) starts from the encoder's last hidden and cell states
    and unrolls ``T_out`` steps; a 1 x 1 ``QuantConv2d`` (``readout``) maps each forecaster
    hidden state to ``patch**2`` channels of quantized logits (``output_quant``, 8-bit),
    which depth-to-space turns back into ``(N, T_out, 1, S, S)`` logits.
    ``sigmoid(logits)`` is the predicted frame (outside the integer machine, like a softmax).
    """

    def __init__(self, weights: str, hidden_channels: int = 16, kernel_size: int = 3,
                 patch: int = 4, out_frames: int = 10, stochastic: bool = False) -> None:
        super().__init__()
        if weights not in WEIGHT_KINDS:
            raise ValueError(f"weights must be one of {WEIGHT_KINDS}, not {weights!r}")
        self.weights, self.patch, self.out_frames = weights, int(patch), int(out_frames)
        self.hidden_channels, self.kernel_size = int(hidden_channels), int(kernel_size)
        c_in = self.patch * self.patch
        wq = weight_quant_for(weights, stochastic=stochastic)
        edge = _edge_quant(weights)
        self.frame_quant = QuantIdentity(act_quant=SigmoidPow2, return_quant_tensor=False)
        self.encoder = QuantConvLSTM(c_in, hidden_channels, kernel_size, wq)
        self.forecaster = QuantConvLSTM(0, hidden_channels, kernel_size, wq)
        self.readout = QuantConv2d(hidden_channels, c_in, kernel_size=1, bias=True,
                                   weight_quant=edge,
                                   bias_quant=Int24Bias if edge is not None else None,
                                   return_quant_tensor=False)
        with torch.no_grad():
            self.readout.bias.fill_(-3.0)  # frames are mostly black
        self.output_quant = QuantIdentity(act_quant=Int8ActPow2, return_quant_tensor=False)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        x = space_to_depth(self.frame_quant(frames), self.patch)
        _, state = self.encoder(x)
        out, _ = self.forecaster(None, state=state, steps=self.out_frames)
        n, t, ch, hh, ww = out.shape
        hq = self.forecaster.output_quant(out.reshape(n * t, ch, hh, ww))
        logits = self.output_quant(self.readout(hq)).reshape(n, t, -1, hh, ww)
        return depth_to_space(logits, self.patch)
