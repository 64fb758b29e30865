"""The tessera model zoo: small Brevitas QAT models with power-of-two quantization, and one
written with Brevitas' default float-scale quantizers and BatchNorm (``digits_cnn_float``,
:func:`digits_cnn_float`: test accuracy 97.70 % after its 10 epochs, equal to its
C-simulation's, measured with ``tessera demo --model digits_cnn_float``).

``ZOO`` maps a model name to a :class:`ModelSpec`.  Every power-of-two model

* quantizes its input and its output with a power-of-two ``QuantIdentity``,
* uses power-of-two weight quantizers (8/4-bit integer, binary or ternary, see
  :mod:`tessera.models.quant`) and ``Int16Bias`` biases (scale = input scale x weight scale),
* puts a power-of-two ``QuantReLU`` (unsigned) after every hidden layer,
* contains no BatchNorm, so its QONNX export is made only of ``Quant`` / ``BipolarQuant``,
  ``Conv``, ``Gemm`` (or ``MatMul`` + ``Add``), ``Relu``, ``MaxPool`` and ``Flatten`` /
  ``Reshape`` nodes.

Every quantizer before a biased layer has ``return_quant_tensor=True``: ``Int16Bias``
needs the scale of the layer input to compute its own scale.

Binary and ternary CNNs keep 8-bit activations: the weights are the experiment, and
8-bit activations keep their accuracy within a few points of the 8-bit model.

Measured with the defaults (``train_model(name, out)``, seed 0, 2 CPU cores, torch 2.13,
brevitas 0.13.4); accuracy on the held-out split (1,000 real digits / 12,000 synthetic
jets), time of the training loop:

==================  ========  ========
model               accuracy  training
==================  ========  ========
jet_mlp_w8a8        78.7 %    16 s
jet_mlp_w4a4        74.7 %    17 s
digits_cnn_w8a8     97.1 %    27-30 s
digits_cnn_w4a4     96.2 %    32 s
digits_cnn_binary   93.9 %    28 s
digits_cnn_ternary  95.7 %    36 s
==================  ========  ========

(The jet data are synthetic, see :mod:`tessera.models.data.jets`; a float MLP reaches
~78 % on them.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantReLU
from torch import nn

from .quant import (
    BinaryWeightPow2,
    Int4ActPow2,
    Int4WeightPow2,
    Int8ActPow2,
    Int8WeightPow2,
    Int16Bias,
    TernaryWeightPow2,
    Uint4ActPow2,
    Uint8ActPow2,
)

__all__ = ["ModelSpec", "ZOO", "build_model", "digits_cnn", "digits_cnn_float", "example_input", "get_spec", "jet_mlp"]


@dataclass(frozen=True)
class ModelSpec:
    """One zoo entry.

    ``builder()`` returns a fresh, randomly initialised (seed it yourself) ``nn.Module``
    taking float32 input of shape ``(N, *input_shape)`` and returning float32 logits.
    """

    name: str
    builder: Callable[[], nn.Module]
    dataset: str  # 'jets' or 'digits'
    input_shape: tuple[int, ...]
    epochs: int
    description: str
    batch_size: int = 64
    lr: float = 2e-3


def _linear(in_f: int, out_f: int, weight_quant) -> QuantLinear:
    return QuantLinear(
        in_f, out_f, bias=True, weight_quant=weight_quant, bias_quant=Int16Bias,
        return_quant_tensor=False)


def _conv(in_c: int, out_c: int, weight_quant) -> QuantConv2d:
    return QuantConv2d(
        in_c, out_c, kernel_size=3, padding=1, bias=True, weight_quant=weight_quant,
        bias_quant=Int16Bias, return_quant_tensor=False)


def _relu(act_quant) -> QuantReLU:
    return QuantReLU(act_quant=act_quant, return_quant_tensor=True)


def jet_mlp(weight_bits: int = 8, act_bits: int = 8) -> nn.Sequential:
    """16 -> 64 -> 32 -> 32 -> 5 quantized MLP for the (synthetic) jet-tagging task.

    Signed input and output ``QuantIdentity`` and unsigned ``QuantReLU`` activations with
    ``act_bits`` bits, ``weight_bits``-bit weights.  4,389 weights and biases plus 5
    learned activation scales.
    """
    wq = {8: Int8WeightPow2, 4: Int4WeightPow2}[weight_bits]
    sq = {8: Int8ActPow2, 4: Int4ActPow2}[act_bits]
    uq = {8: Uint8ActPow2, 4: Uint4ActPow2}[act_bits]
    return nn.Sequential(
        QuantIdentity(act_quant=sq, return_quant_tensor=True),
        _linear(16, 64, wq),
        _relu(uq),
        _linear(64, 32, wq),
        _relu(uq),
        _linear(32, 32, wq),
        _relu(uq),
        _linear(32, 5, wq),
        QuantIdentity(act_quant=sq, return_quant_tensor=False),
    )


def digits_cnn(weight_quant=Int8WeightPow2, act_bits: int = 8) -> nn.Sequential:
    """Two conv/ReLU/maxpool stages and one linear classifier for 1x28x28 digits.

    The input ``QuantIdentity`` is unsigned (pixels are in [0, 1]) with ``act_bits`` bits;
    the output ``QuantIdentity`` is signed with ``act_bits`` bits.  9,098 weights and
    biases (80 + 1,168 + 7,850) plus 4 learned activation scales.
    """
    uq = {8: Uint8ActPow2, 4: Uint4ActPow2}[act_bits]
    sq = {8: Int8ActPow2, 4: Int4ActPow2}[act_bits]
    return nn.Sequential(
        QuantIdentity(act_quant=uq, return_quant_tensor=True),
        _conv(1, 8, weight_quant),
        _relu(uq),
        nn.MaxPool2d(2),
        _conv(8, 16, weight_quant),
        _relu(uq),
        nn.MaxPool2d(2),
        nn.Flatten(),
        _linear(16 * 7 * 7, 10, weight_quant),
        QuantIdentity(act_quant=sq, return_quant_tensor=False),
    )


def digits_cnn_float() -> nn.Sequential:
    """The digits CNN written the way the Brevitas README writes models: every quantizer a
    Brevitas default (``Int8ActPerTensorFloat`` input, ``Int8WeightPerTensorFloat`` weights,
    per-channel ``Int8WeightPerChannelFloat`` in the second conv, ``Uint8ActPerTensorFloat``
    ReLUs: float scales), float biases, BatchNorm after each conv, and float logits (no
    output quantizer).  Compiled through the exact requantization primitive
    (docs/bit-exact.md)."""
    from brevitas.quant import Int8WeightPerChannelFloat

    return nn.Sequential(
        QuantIdentity(return_quant_tensor=True),
        QuantConv2d(1, 8, kernel_size=3, padding=1, bias=True, weight_bit_width=8),
        nn.BatchNorm2d(8),
        QuantReLU(return_quant_tensor=True),
        nn.MaxPool2d(2),
        QuantConv2d(8, 16, kernel_size=3, padding=1, bias=True, weight_quant=Int8WeightPerChannelFloat),
        nn.BatchNorm2d(16),
        QuantReLU(return_quant_tensor=True),
        nn.MaxPool2d(2),
        nn.Flatten(),
        QuantLinear(16 * 7 * 7, 10, bias=True),
    )


ZOO: dict[str, ModelSpec] = {
    "jet_mlp_w8a8": ModelSpec(
        name="jet_mlp_w8a8",
        builder=lambda: jet_mlp(8, 8),
        dataset="jets",
        input_shape=(16,),
        epochs=10,
        description="MLP 16-64-32-32-5, 8-bit pow2 weights, 8-bit pow2 activations, "
        "Int16 biases; synthetic jet-tagging stand-in",
        batch_size=256,
        lr=3e-3,
    ),
    "jet_mlp_w4a4": ModelSpec(
        name="jet_mlp_w4a4",
        builder=lambda: jet_mlp(4, 4),
        dataset="jets",
        input_shape=(16,),
        epochs=10,
        description="MLP 16-64-32-32-5, 4-bit pow2 weights, 4-bit pow2 activations, "
        "Int16 biases; synthetic jet-tagging stand-in",
        batch_size=256,
        lr=3e-3,
    ),
    "digits_cnn_w8a8": ModelSpec(
        name="digits_cnn_w8a8",
        builder=lambda: digits_cnn(Int8WeightPow2, 8),
        dataset="digits",
        input_shape=(1, 28, 28),
        epochs=25,
        description="CNN conv8-pool-conv16-pool-fc10 on MNIST digits, 8-bit pow2 weights "
        "and activations, Int16 biases",
    ),
    "digits_cnn_w4a4": ModelSpec(
        name="digits_cnn_w4a4",
        builder=lambda: digits_cnn(Int4WeightPow2, 4),
        dataset="digits",
        input_shape=(1, 28, 28),
        epochs=25,
        description="CNN conv8-pool-conv16-pool-fc10 on MNIST digits, 4-bit pow2 weights "
        "and activations, Int16 biases",
    ),
    "digits_cnn_binary": ModelSpec(
        name="digits_cnn_binary",
        builder=lambda: digits_cnn(BinaryWeightPow2, 8),
        dataset="digits",
        input_shape=(1, 28, 28),
        epochs=25,
        description="CNN conv8-pool-conv16-pool-fc10 on MNIST digits, binary {-1,+1} x pow2 "
        "weights, 8-bit pow2 activations, Int16 biases",
    ),
    "digits_cnn_ternary": ModelSpec(
        name="digits_cnn_ternary",
        builder=lambda: digits_cnn(TernaryWeightPow2, 8),
        dataset="digits",
        input_shape=(1, 28, 28),
        epochs=25,
        description="CNN conv8-pool-conv16-pool-fc10 on MNIST digits, ternary {-1,0,+1} x "
        "pow2 weights, 8-bit pow2 activations, Int16 biases",
    ),
    "digits_cnn_float": ModelSpec(
        name="digits_cnn_float",
        builder=digits_cnn_float,
        dataset="digits",
        input_shape=(1, 28, 28),
        epochs=10,
        description="CNN conv8-bn-pool-conv16-bn-pool-fc10 on MNIST digits with Brevitas' default quantizers (float "
        "scales, per-channel weights in conv 2, float biases, BatchNorm, float logits)",
    ),
}


def get_spec(name: str) -> ModelSpec:
    try:
        return ZOO[name]
    except KeyError:
        raise KeyError(f"unknown zoo model {name!r}; known: {', '.join(sorted(ZOO))}") from None


def build_model(name: str) -> nn.Module:
    """A fresh instance of zoo model ``name`` (seed torch first for reproducibility)."""
    return get_spec(name).builder()


def example_input(name: str, batch: int = 1) -> torch.Tensor:
    """A zero input of the right shape for zoo model ``name``."""
    return torch.zeros((batch, *get_spec(name).input_shape), dtype=torch.float32)
