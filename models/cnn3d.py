"""Quantized 3D CNNs of paper 1 (CosmoFlow, 3D U-Net) with power-of-two Brevitas quantizers.

Three builders, all configurable down to CI / laptop size with a width multiplier
(channel counts ``max(1, round(c * width))``) and the input size:

* :func:`cosmoflow` -- the CosmoFlow variant of paper 1 (LBANN): seven ``Conv3d`` k3 p1
  with 16, 32, 64, 128 (stride 2), 256, 256, 256 channels, average pooling k3 s2 p1 after
  conv1-5, LeakyReLU, dense 2048 -> 256 -> 4 with dropout.
* :func:`cosmoflow_mlperf` -- the MLPerf HPC CosmoFlow: five ``Conv3d`` k2 'same' with
  ``32 * 2**i`` channels, LeakyReLU, max pooling 2, dense 128 -> 64 -> 4.
* :func:`unet3d` -- the LBANN 3D U-Net: down blocks [32, 64], [64, 128], [128, 256] with
  max pooling 2, bottom [256, 512], transposed conv k2 s2 up, up blocks on the
  concatenation of upsampled and skip tensors, every conv k3 p1 + BatchNorm + ReLU, and a
  1x1x1 conv to the classes.

Quantization (see :mod:`tessera.models.quant`): 8-bit power-of-two weights
(``Int8WeightPow2``), ``Int16Bias`` biases (scale = input scale x weight scale),
8-bit power-of-two activations (``Uint8ActPow2`` after ReLU / on the non-negative log1p
input, ``Int8ActPow2`` after LeakyReLU and on the U-Net logits, :class:`RegressionOutPow2`
-- int8 with the constant scale 2**-6 -- on the CosmoFlow outputs), zero points 0.

Fixed-point choices and deviations, all deliberate:

* **LeakyReLU slope** :data:`LEAKY_SLOPE` = 1/8 (not PyTorch's 0.01 nor Keras' 0.3): a
  power of two, so ``leaky(x) = x >> 3`` for ``x < 0`` is exact in fixed point.
* **Average pooling** uses ``count_include_pad=True``: the divisor is always 27 (k=3),
  also at the borders, so hardware multiplies by one constant.  27 is not a power of two,
  so the average is *not* exact in fixed point; every ``AveragePool`` is therefore both
  fed by and followed by a ``Quant`` (the compiler has to produce ``round(sum / 27)`` on
  the output grid; see the lead engineer's 3D op notes).
* **MLPerf 'same' padding with k=2**: PyTorch/TF pad 'same' asymmetrically for even
  kernels (0 before, 1 after), which the TorchScript exporter writes as a separate ``Pad``
  node (not in our op set).  The MLPerf model here uses ``padding=1`` on both sides
  (output S + 1) and lets the following MaxPool 2 (floor mode) drop the last plane, so the
  shapes are exactly those of 'same' + pool; the receptive fields are shifted by one voxel
  (zero plane before instead of after the volume).
* **MLPerf head**: MLPerf's ``1.2 * tanh(x)`` is neither a power-of-two multiply nor exact
  in fixed point; the head here is a plain quantized linear regression (the last
  ``Linear`` followed by a signed 8-bit ``Quant``).  Targets are normalised to [-1, 1].
* **BatchNorm** (U-Net; CosmoFlow with ``batchnorm=True``, as trained by
  :mod:`tessera.models.train3d`) is trained as such and folded into the preceding conv before
  export by :func:`fold_batchnorm`, which re-quantizes the folded weights (one power-of-two
  scale per output channel) and gives them a 32-bit bias (``Int32Bias``, scale = input
  scale x weight scale; folded biases overflow 16 bits), so the folded model is close to,
  not bit-identical with, the BN model; the folded model is the one that is exported and
  evaluated.  It is bit-identical when every BN scale ``gamma / sqrt(var + eps)`` of a
  layer is one power of two and the offsets are on the bias grid (tested).
* **Concatenation**: both inputs of every ``Concat`` pass through one shared
  ``QuantIdentity`` (the same module called twice), so both have one power-of-two scale
  and type in eval mode and in the export.
"""

from __future__ import annotations

import copy
from typing import Iterable, Sequence

import torch
from brevitas.core.scaling import ScalingImplType
from brevitas.nn import (
    QuantConv3d,
    QuantConvTranspose3d,
    QuantIdentity,
    QuantLinear,
    QuantReLU,
)
from brevitas.quant import Int32Bias
from torch import nn

from .quant import Int8ActPow2, Int8WeightPow2, Int8WeightPow2PerChannel, Int16Bias, Uint8ActPow2

__all__ = [
    "COSMOFLOW_CHANNELS",
    "FOLDED_BIAS_QUANT",
    "FOLDED_WEIGHT_QUANT",
    "LEAKY_SLOPE",
    "MLPERF_CHANNELS",
    "RegressionOutPow2",
    "UNET_BOTTOM",
    "UNET_DOWN",
    "CosmoFlow",
    "UNet3D",
    "build_cnn3d",
    "cosmoflow",
    "cosmoflow_mlperf",
    "analytic_macs",
    "count_macs",
    "count_params",
    "fold_batchnorm",
    "scaled",
    "unet3d",
]

#: Bias quantizer of a conv that received a folded BatchNorm: brevitas' ``Int32Bias``
#: (scale = input scale x weight scale, like ``Int16Bias``).  A folded bias
#: ``beta - mean * gamma / sigma`` is routinely larger than 2^15 accumulator LSBs (measured:
#: 2^17 on a small U-Net), which ``Int16Bias`` would clip.
FOLDED_BIAS_QUANT = Int32Bias

#: Weight quantizer of a conv that received a folded BatchNorm: 8-bit codes with one
#: power-of-two scale per output channel.  With one scale per tensor the folded factors
#: ``gamma / sigma`` (spread over orders of magnitude) left small channels with a few codes:
#: a CosmoFlow trained 80 epochs went from validation MSE 0.227 before folding to 0.397
#: after (docs/cnn3d.md).
FOLDED_WEIGHT_QUANT = Int8WeightPow2PerChannel

#: Negative slope of every LeakyReLU: a power of two, exact as an arithmetic shift.
LEAKY_SLOPE = 1.0 / 8.0

class RegressionOutPow2(Int8ActPow2):
    """Output quantizer of the CosmoFlow regressors: 8-bit signed with a *constant* scale
    ``2**-6`` (range [-2, 127/64]) for targets normalised to [-1, 1].

    A learned output scale (``Int8ActPow2``) is initialised from the first batches' outputs
    of the untrained net (measured: 2**-10, i.e. a range of +-0.125) and grows only by the
    log2-domain parameter's learning rate; the clamped outputs then cannot reach the
    targets and the regressor collapsed to a near-constant prediction (validation MSE at the
    train-mean level after 9 epochs).  The targets' range is known, so the scale is fixed.
    """

    scaling_impl_type = ScalingImplType.CONST
    scaling_init = 2.0


COSMOFLOW_CHANNELS = (16, 32, 64, 128, 256, 256, 256)
COSMOFLOW_STRIDES = (1, 1, 1, 2, 1, 1, 1)
COSMOFLOW_POOL_AFTER = (True, True, True, True, True, False, False)
COSMOFLOW_DENSE = (2048, 256)
MLPERF_CHANNELS = (32, 64, 128, 256, 512)
MLPERF_DENSE = (128, 64)
UNET_DOWN = ((32, 64), (64, 128), (128, 256))
UNET_BOTTOM = (256, 512)


def scaled(c: int, width: float) -> int:
    """Channel count ``c`` scaled by the width multiplier: ``max(1, round(c * width))``."""
    return max(1, int(round(c * width)))


def _qid(signed: bool, return_qt: bool = True) -> QuantIdentity:
    return QuantIdentity(act_quant=Int8ActPow2 if signed else Uint8ActPow2,
                         return_quant_tensor=return_qt)


def _conv(cin, cout, k, stride=1, padding=0, bias=True) -> QuantConv3d:
    return QuantConv3d(cin, cout, kernel_size=k, stride=stride, padding=padding, bias=bias,
                       weight_quant=Int8WeightPow2, bias_quant=Int16Bias if bias else None,
                       return_quant_tensor=False)


def _linear(cin, cout) -> QuantLinear:
    return QuantLinear(cin, cout, bias=True, weight_quant=Int8WeightPow2,
                       bias_quant=Int16Bias, return_quant_tensor=False)


# ---------------------------------------------------------------------------------------
# CosmoFlow
# ---------------------------------------------------------------------------------------


class CosmoFlow(nn.Module):
    """Quantized CosmoFlow regressor (both variants; build with :func:`cosmoflow` or
    :func:`cosmoflow_mlperf`).

    ``forward(x)``: ``x`` float32 ``(N, in_channels, S, S, S)`` (log1p counts, >= 0) ->
    ``(N, n_targets)`` normalised cosmological parameters.

    Average pools whose input would be smaller than their kernel (3) are left out and
    listed in ``skipped_pools`` (conv indices); at the published ``S = 128`` all five are
    present, at ``S = 32`` the pools after conv4 and conv5 are skipped (2^3 voxels left).

    Layer layout (eval mode, as exported): ``Quant(uint8)`` on the input, then per conv
    stage ``Conv [-> BatchNorm, folded at export] -> LeakyRelu -> Quant(int8) [-> pool ->
    Quant(int8)]``, ``Flatten``, per hidden dense layer ``Gemm -> LeakyRelu -> Quant(int8)``
    (dropout before the Quant in training only), last ``Gemm -> Quant(int8, scale 2^-6)``.
    He initialisation (LeakyReLU gain) for all conv and dense weights (the last dense layer's
    scaled by 0.1), zero biases.
    """

    def __init__(self, convs: Sequence[dict], dense: Sequence[int], in_channels: int,
                 input_size: int, n_targets: int = 4, dropout: float = 0.5,
                 batchnorm: bool = False):
        super().__init__()
        self.input_size = int(input_size)
        self.in_channels = int(in_channels)
        self.input_quant = _qid(signed=False)
        layers: list[nn.Module] = []
        cin = in_channels
        size = int(input_size)
        self.skipped_pools: list[int] = []
        for i, spec in enumerate(convs):
            k, stride, pad = spec["k"], spec.get("stride", 1), spec.get("padding", 0)
            layers.append(_conv(cin, spec["out"], k, stride, pad, bias=not batchnorm))
            if batchnorm:
                layers.append(nn.BatchNorm3d(spec["out"]))
            layers.append(nn.LeakyReLU(LEAKY_SLOPE))
            size = (size + 2 * pad - k) // stride + 1
            pool = spec.get("pool")
            if pool == "avg" and size < 3:
                # torch refuses a k3 pool on an input smaller than 3 (even with padding);
                # only happens below the published input size of 128
                pool = None
                self.skipped_pools.append(i)
            if pool == "avg":
                size = (size + 2 - 3) // 2 + 1
            elif pool == "max":
                size //= 2
            if size < 1:
                raise ValueError(f"input_size {input_size} too small: stage {i} output empty")
            layers.append(_qid(signed=True, return_qt=pool is None))
            if pool == "avg":
                layers.append(nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=True))
                layers.append(_qid(signed=True))
            elif pool == "max":
                layers.append(nn.MaxPool3d(2))
                layers.append(_qid(signed=True))
            elif pool is not None:
                raise ValueError(f"unknown pool {pool!r}")
            cin = spec["out"]
        self.features = nn.Sequential(*layers)
        self.flatten = nn.Flatten()
        n_flat = cin * size ** 3
        head: list[nn.Module] = []
        fin = n_flat
        for width in dense:
            head += [_linear(fin, width), nn.LeakyReLU(LEAKY_SLOPE), nn.Dropout(dropout),
                     _qid(signed=True)]
            fin = width
        head += [_linear(fin, n_targets),
                 QuantIdentity(act_quant=RegressionOutPow2, return_quant_tensor=False)]
        self.head = nn.Sequential(*head)
        self.n_flat = int(n_flat)
        # He initialisation for LeakyReLU(1/8): with PyTorch's default (kaiming_uniform with
        # a=sqrt(5)) the activations of this deep, narrow, pooled stack shrink by ~10^-5
        # at width 1/16 and training stalls.
        for mod in self.modules():
            if isinstance(mod, (nn.Conv3d, nn.Linear)):
                nn.init.kaiming_normal_(mod.weight, a=LEAKY_SLOPE, nonlinearity="leaky_relu")
                if mod.bias is not None:
                    nn.init.zeros_(mod.bias)
        # The output quantizer has a constant range [-2, 2) and a saturated output passes no
        # gradient: with He-initialised last weights most outputs of a fresh net sat on a
        # rail, and a run could stay there for good (measured: train loss 4.2 = the rails'
        # error for 40 epochs).  A 10x smaller last layer starts inside the range.
        with torch.no_grad():
            head[-2].weight.mul_(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.flatten(self.features(self.input_quant(x))))


def cosmoflow(width: float = 1.0, input_size: int = 128, in_channels: int = 4,
              n_targets: int = 4, dropout: float = 0.5, batchnorm: bool = False) -> CosmoFlow:
    """Paper 1's CosmoFlow: Conv3d k3 p1 x 7 (16, 32, 64, 128 s2, 256, 256, 256 channels
    x ``width``), AvgPool k3 s2 p1 (count_include_pad) after conv1-5, LeakyReLU(1/8),
    dense 2048 -> 256 (x ``width``) -> ``n_targets``, dropout after each hidden dense.

    At the published size (``width=1, input_size=128``) the flattened features are
    256 x 2^3 = 2048.
    """
    convs = [dict(out=scaled(c, width), k=3, stride=s, padding=1,
                  pool="avg" if p else None)
             for c, s, p in zip(COSMOFLOW_CHANNELS, COSMOFLOW_STRIDES, COSMOFLOW_POOL_AFTER)]
    return CosmoFlow(convs, [scaled(d, width) for d in COSMOFLOW_DENSE], in_channels,
                     input_size, n_targets, dropout, batchnorm)


def cosmoflow_mlperf(width: float = 1.0, input_size: int = 128, in_channels: int = 4,
                     n_targets: int = 4, dropout: float = 0.0,
                     batchnorm: bool = False) -> CosmoFlow:
    """MLPerf HPC CosmoFlow: 5 x (Conv3d k2 -> LeakyReLU(1/8) -> MaxPool 2) with
    32, 64, 128, 256, 512 channels (x ``width``), dense 128 -> 64 (x ``width``) ->
    ``n_targets`` as a plain quantized linear regression (no ``1.2 * tanh``).

    'same' padding for k=2: the conv uses ``padding=1`` on both sides (output S + 1) and
    the following MaxPool 2 (floor mode) drops the last plane, so every stage maps S to
    S / 2 exactly like TF's 'same' (pad 0 before, 1 after) + pool; the difference is that
    our conv sees one zero plane *before* instead of *after* the volume (a one-voxel
    shift of the receptive fields), chosen because it exports as a single ``Conv``
    without a ``Pad`` node.
    """
    convs = [dict(out=scaled(c, width), k=2, stride=1, padding=1, pool="max")
             for c in MLPERF_CHANNELS]
    return CosmoFlow(convs, [scaled(d, width) for d in MLPERF_DENSE], in_channels,
                     input_size, n_targets, dropout, batchnorm)


# ---------------------------------------------------------------------------------------
# 3D U-Net
# ---------------------------------------------------------------------------------------


class _ConvBNReLU(nn.Sequential):
    """``QuantConv3d k3 p1 (no bias) -> BatchNorm3d -> QuantReLU(uint8)``; after
    :func:`fold_batchnorm`: ``QuantConv3d (Int16Bias) -> Identity -> QuantReLU``."""

    def __init__(self, cin: int, cout: int):
        super().__init__(
            _conv(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm3d(cout),
            QuantReLU(act_quant=Uint8ActPow2, return_quant_tensor=True),
        )


class UNet3D(nn.Module):
    """Quantized 3D U-Net (build with :func:`unet3d`).

    ``forward(x)``: ``(N, in_channels, S, S, S)`` with ``S`` divisible by 8 ->
    ``(N, n_classes, S, S, S)`` logits.  Every concatenation ``cat(up, skip)`` passes both
    tensors through one shared ``QuantIdentity`` (uint8, power-of-two scale).
    """

    def __init__(self, width: float = 1.0, in_channels: int = 1, n_classes: int = 3):
        super().__init__()
        self.in_channels = int(in_channels)
        self.input_quant = _qid(signed=True)
        down = [tuple(scaled(c, width) for c in blk) for blk in UNET_DOWN]
        bottom = tuple(scaled(c, width) for c in UNET_BOTTOM)
        self.down = nn.ModuleList()
        cin = in_channels
        for c1, c2 in down:
            self.down.append(nn.Sequential(_ConvBNReLU(cin, c1), _ConvBNReLU(c1, c2)))
            cin = c2
        self.pool = nn.MaxPool3d(2)
        self.bottom = nn.Sequential(_ConvBNReLU(cin, bottom[0]), _ConvBNReLU(*bottom))
        cin = bottom[1]
        self.up = nn.ModuleList()
        self.up_quant = nn.ModuleList()
        self.cat_quant = nn.ModuleList()
        self.up_blocks = nn.ModuleList()
        for (_, skip_c) in reversed(down):
            self.up.append(QuantConvTranspose3d(
                cin, cin, kernel_size=2, stride=2, bias=True, weight_quant=Int8WeightPow2,
                bias_quant=Int16Bias, return_quant_tensor=False))
            self.cat_quant.append(_qid(signed=False))
            self.up_blocks.append(nn.Sequential(
                _ConvBNReLU(cin + skip_c, skip_c), _ConvBNReLU(skip_c, skip_c)))
            cin = skip_c
        self.classifier = _conv(cin, n_classes, 1)
        self.output_quant = _qid(signed=True, return_qt=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.input_quant(x)
        skips = []
        for i, blk in enumerate(self.down):
            h = blk(h)
            skips.append(h)
            h = self.pool(h)
        h = self.bottom(h)
        for up, cq, blk, skip in zip(self.up, self.cat_quant, self.up_blocks, reversed(skips)):
            h = torch.cat([cq(up(h)), cq(skip)], dim=1)
            h = blk(h)
        return self.output_quant(self.classifier(h))


def unet3d(width: float = 1.0, in_channels: int = 1, n_classes: int = 3) -> UNet3D:
    """The LBANN 3D U-Net with channel counts x ``width`` (see :class:`UNet3D`)."""
    return UNet3D(width, in_channels, n_classes)


def build_cnn3d(name: str, *, width: float, input_size: int, in_channels: int,
                n_out: int, **options) -> nn.Module:
    """``'cosmoflow'``, ``'cosmoflow-mlperf'`` or ``'unet3d'`` at the given size.

    ``options`` go to the CosmoFlow builders (``dropout``, ``batchnorm``); the U-Net takes
    none.
    """
    if name == "cosmoflow":
        return cosmoflow(width, input_size, in_channels, n_out, **options)
    if name == "cosmoflow-mlperf":
        return cosmoflow_mlperf(width, input_size, in_channels, n_out, **options)
    if options:
        raise TypeError(f"unet3d takes no options, got {sorted(options)}")
    if name == "unet3d":
        return unet3d(width, in_channels, n_out)
    raise KeyError(f"unknown 3D model {name!r}; known: cosmoflow, cosmoflow-mlperf, unet3d")


# ---------------------------------------------------------------------------------------
# BatchNorm folding
# ---------------------------------------------------------------------------------------


def _trained_weight(conv: nn.Module) -> torch.Tensor:
    """The weights the trained model computes with: the quantized values of a brevitas conv
    (not its float shadow weights, which differ by up to half a step), the plain weights
    otherwise."""
    if isinstance(conv, QuantConv3d) and conv.weight_quant.is_quant_enabled:
        return conv.quant_weight().value.detach()
    return conv.weight


def _fold_pair(conv: nn.Module, bn: nn.BatchNorm3d) -> nn.Module:
    """A new conv equal to ``bn(conv(x))`` (eval mode) in float arithmetic.

    ``w' = w * g / sqrt(var + eps)`` per output channel, ``b' = beta + (b - mean) * g /
    sqrt(var + eps)``.  A brevitas conv gets :data:`FOLDED_BIAS_QUANT` on the new bias
    (its input must then be a QuantTensor, which it is in :class:`UNet3D` and
    :class:`CosmoFlow`).
    """
    with torch.no_grad():
        inv = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        b0 = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
        w = _trained_weight(conv) * inv.reshape(-1, *([1] * (conv.weight.dim() - 1)))
        b = bn.bias + (b0 - bn.running_mean) * inv
    kw = dict(kernel_size=conv.kernel_size, stride=conv.stride, padding=conv.padding,
              dilation=conv.dilation, groups=conv.groups, bias=True)
    if isinstance(conv, QuantConv3d):
        new = QuantConv3d(conv.in_channels, conv.out_channels,
                          weight_quant=FOLDED_WEIGHT_QUANT, bias_quant=FOLDED_BIAS_QUANT,
                          return_quant_tensor=conv.return_quant_tensor,
                          **kw)
    elif type(conv) is nn.Conv3d:
        new = nn.Conv3d(conv.in_channels, conv.out_channels, **kw)
    else:
        raise TypeError(f"cannot fold BatchNorm into {type(conv).__name__}")
    new = new.to(conv.weight.device)
    with torch.no_grad():
        new.weight.copy_(w)
        new.bias.copy_(b)
    return new


def _fold_in(module: nn.Module) -> int:
    n = 0
    for name, child in list(module.named_children()):
        n += _fold_in(child)
    if isinstance(module, nn.Sequential):
        keys = list(module._modules.keys())
        for a, b in zip(keys, keys[1:]):
            conv, bn = module._modules[a], module._modules[b]
            if isinstance(bn, nn.BatchNorm3d) and isinstance(conv, (nn.Conv3d,)):
                module._modules[a] = _fold_pair(conv, bn)
                module._modules[b] = nn.Identity()
                n += 1
    return n


def fold_batchnorm(model: nn.Module) -> nn.Module:
    """An eval-mode copy of ``model`` with every ``Conv3d -> BatchNorm3d`` pair (adjacent in
    an ``nn.Sequential``) replaced by one conv with folded weights and bias and an
    ``nn.Identity``.

    For plain ``nn.Conv3d`` the result equals the original up to float rounding.  For a
    brevitas ``QuantConv3d`` the folded float weights are re-quantized by
    :data:`FOLDED_WEIGHT_QUANT` (8 bits, new power-of-two scale per output channel) and the folded bias by
    :data:`FOLDED_BIAS_QUANT` (32-bit, same scale rule as ``Int16Bias``), so the outputs
    differ from the BN model by those quantization errors;
    the folded model is the one to evaluate and export.

    Raises:
        ValueError: a ``BatchNorm`` that does not directly follow a conv remains.
    """
    folded = copy.deepcopy(model).eval()
    _fold_in(folded)
    left = [n for n, m in folded.named_modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if left:
        raise ValueError(f"BatchNorm not preceded by a conv, cannot fold: {', '.join(left)}")
    return folded.eval()


# ---------------------------------------------------------------------------------------
# Counting
# ---------------------------------------------------------------------------------------


def count_params(model: nn.Module) -> int:
    """Number of trainable parameters (weights, biases, BN affine, learned act scales)."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def count_macs(model: nn.Module, input_shape: Iterable[int]) -> int:
    """Multiply-accumulates of one forward pass on one sample of ``input_shape``
    (``(C, D, H, W)``): convolutions, transposed convolutions and dense layers only
    (pooling, activations and quantizers not counted)."""
    total = 0

    def hook(mod, inp, out):
        nonlocal total
        out_t = out.value if hasattr(out, "value") else out
        if isinstance(mod, nn.ConvTranspose3d):
            x = inp[0].value if hasattr(inp[0], "value") else inp[0]
            total += x[0].numel() * mod.out_channels * int(torch.tensor(mod.kernel_size).prod()) \
                // mod.groups
        elif isinstance(mod, nn.Conv3d):
            k = int(torch.tensor(mod.kernel_size).prod()) * mod.in_channels // mod.groups
            total += out_t[0].numel() * k
        elif isinstance(mod, nn.Linear):
            total += mod.in_features * mod.out_features

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (nn.Conv3d, nn.ConvTranspose3d, nn.Linear))]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(torch.zeros(1, *input_shape))
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return int(total)


def analytic_macs(model: nn.Module, input_size: int) -> int:
    """Multiply-accumulates of one sample, from the layer hyper-parameters alone (no forward
    pass, so usable at the published 128^3 size): same counting rule as
    :func:`count_macs` (convs, transposed convs, dense layers)."""

    def conv_macs(conv: nn.Module, s: int) -> tuple[int, int]:
        k, st, p = conv.kernel_size[0], conv.stride[0], conv.padding[0]
        out = (s + 2 * p - k) // st + 1
        return out, out ** 3 * conv.out_channels * conv.in_channels * k ** 3 // conv.groups

    total = 0
    if isinstance(model, CosmoFlow):
        s = int(input_size)
        for mod in model.features:
            if isinstance(mod, nn.Conv3d):
                s, m = conv_macs(mod, s)
                total += m
            elif isinstance(mod, nn.AvgPool3d):
                s = (s + 2 * mod.padding - mod.kernel_size) // mod.stride + 1
            elif isinstance(mod, nn.MaxPool3d):
                s //= 2
        return int(total + sum(m.in_features * m.out_features
                               for m in model.head if isinstance(m, nn.Linear)))
    if isinstance(model, UNet3D):
        s = int(input_size)

        def convs(block: nn.Module, s: int) -> int:
            return sum(conv_macs(c, s)[1] for c in block.modules() if isinstance(c, nn.Conv3d))

        for blk in model.down:
            total += convs(blk, s)
            s //= 2
        total += convs(model.bottom, s)
        for up, blk in zip(model.up, model.up_blocks):
            total += s ** 3 * up.in_channels * up.out_channels * 8
            s *= 2
            total += convs(blk, s)
        return int(total + convs(model.classifier, s))
    raise TypeError(f"analytic_macs: unsupported model {type(model).__name__}")
