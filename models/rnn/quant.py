"""Binary / Ternary / Quaternary Connect weight quantizers and the RNN activation presets.

Weight quantizers (paper 3: "Effective Quantization Approaches for Recurrent Neural
Networks") usable as ``weight_quant=`` on *any* Brevitas layer (``QuantLinear``,
``QuantConv2d``, ``QuantLSTM``, ...).  Each one projects the real-valued *shadow* weights
``w`` (the ``nn.Parameter`` that the optimizer updates) onto a codebook times a per-tensor
scale ``s``:

==============================  ====================  =====================================
quantizer                        values                rule (``s`` = scale)
==============================  ====================  =====================================
:class:`BinaryConnect`           ``{-1, +1} * s``      ``s * sign(w)``, ``sign(0) = +1``
:class:`StochasticBinaryConnect` ``{-1, +1} * s``      training: ``+s`` with probability
                                                       ``clip((w / s + 1) / 2, 0, 1)``
                                                       (hard sigmoid), else ``-s``;
                                                       eval / export: as BinaryConnect
:class:`TernaryConnect`          ``{-1, 0, +1} * s``   ``0`` if ``|w| <= s / 2``, else
                                                       ``s * sign(w)``
:class:`QuaternaryConnect`       ``{-1, -1/2, 1/2, 1}  ``s * sign(w)`` if ``|w| >= 3 s / 4``,
                                 * s``                 else ``s / 2 * sign(w)``
==============================  ====================  =====================================

The ternary threshold ``s / 2`` is the deterministic TernaryConnect rule with the shadow
weights measured in units of ``s`` (``w / s`` in (-1/2, 1/2] maps to 0); it is also exactly
what the exported ``Quant(w, s, 0, 2, signed=1, narrow=1)`` node computes
(round-half-to-even sends ``|w| = s / 2`` to 0).  The quaternary threshold ``3 s / 4`` is the
midpoint between the two magnitudes (nearest codebook value; a tie goes to the larger one).

Scale (``scaling=True``, the default): one power of two per weight tensor,
``s = 2**round(log2(k * mean|w|))`` with ``k = 1`` (binary: the XNOR-Net L2-optimal scale
``mean|w|``), ``k = 1.5`` (ternary and quaternary: close to the MSE-optimal scale for
Gaussian or uniform weights, measured 1.33-1.63 x mean|w|).  ``mean|w|`` is taken over every
tensor that shares the quantizer (brevitas shares one weight quantizer between the
input-to-hidden and hidden-to-hidden matrices of each ``QuantLSTM`` gate), exactly like
brevitas' own statistics-based scales, so one scale is exported per quantizer.  The scale is
a statistic, not a trained parameter: it carries no gradient.  ``scaling=False`` fixes
``s = 1``: the values are then literally the paper's codebooks.

Gradient: identity straight-through estimator, ``d w_q / d w = 1`` for every shadow weight
(forward ``w + (q(w) - w).detach()``), so no weight freezes, whatever its current code.

Brevitas view (the ``QuantTensor`` returned by ``layer.quant_weight()``): zero-point 0,
``signed``, ``narrow_range`` and

* binary: ``scale = s``, ``bit_width = 1`` -> exported as ``BipolarQuant(w, s)``;
* ternary: ``scale = s``, ``bit_width = 2`` -> ``Quant(w, s, 0, 2, signed, narrow)``;
* quaternary: ``scale = s / 2``, integer codes ``{-2, -1, 1, 2}``, ``bit_width = 3`` ->
  ``Quant(w, s / 2, 0, 3, signed, narrow)`` (the codes +-3 and 0 are never produced).

Export: brevitas exports the *shadow* weights followed by that ``Quant`` node, which
re-rounds them.  That reproduces binary and ternary, but no single ``Quant`` node can
reproduce the quaternary rule (its integer grid contains 0), nor a stochastic draw.  So
:func:`codebook_export_mode` (used by every tessera export) temporarily replaces each shadow
weight with its quantized value and freezes the scale: the exported initializers then hold
values exactly on the codebook, and every ``Quant`` / ``BipolarQuant`` node is an exact
identity on them.

Activation presets (power-of-two scales, zero-point 0), for the integer machine of
:mod:`tessera.models.rnn.cells`:

* :class:`SigmoidPow2` -- unsigned 8-bit, *constant* scale ``2**-8`` (codes 0..255,
  values 0 .. 255/256): sigmoid outputs;
* :class:`TanhPow2` -- signed 8-bit, constant scale ``2**-7`` (codes -128..127, values
  -1 .. 127/128): tanh outputs;
* ``Int8ActPow2`` / ``Uint8ActPow2`` / ``Int16ActPow2`` -- learned power-of-two scale, for
  inputs, gate accumulators, cell and hidden states (see :mod:`tessera.models.quant`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from brevitas.core.scaling import ScalingImplType
from brevitas.inject import ExtendedInjector
from brevitas.proxy import WeightQuantProxyFromInjector
from brevitas.quant import Int8ActPerTensorFixedPoint, Uint8ActPerTensorFixedPoint
from torch import nn

from ..quant import Int8ActPow2, Int8WeightPow2, Int16Bias, Uint8ActPow2

__all__ = [
    "BinaryConnect",
    "CODEBOOKS",
    "CodebookTensorQuant",
    "Int8ActPow2",
    "Int8WeightPow2",
    "Int16ActPow2",
    "Int16Bias",
    "Int24Bias",
    "QuaternaryConnect",
    "SigmoidPow2",
    "StochasticBinaryConnect",
    "TanhPow2",
    "TernaryConnect",
    "Uint8ActPow2",
    "WEIGHT_KINDS",
    "codebook_export_mode",
    "codebook_values",
    "weight_quant_for",
]

#: Normalised codebooks (values / s) of the three weight quantizers.
CODEBOOKS: dict[str, tuple[float, ...]] = {
    "binary": (-1.0, 1.0),
    "ternary": (-1.0, 0.0, 1.0),
    "quaternary": (-1.0, -0.5, 0.5, 1.0),
}

#: ``--weights`` choices: ``fp`` (float weights) and the three codebooks.
WEIGHT_KINDS = ("fp", "binary", "ternary", "quaternary")

_SCALE_MULTIPLIER = {"binary": 1.0, "ternary": 1.5, "quaternary": 1.5}
_SCALE_MIN = 2.0**-24


class CodebookTensorQuant(nn.Module):
    """The brevitas ``tensor_quant`` of the Connect quantizers: ``x -> (value, scale, 0, bits)``.

    Args:
        tracked_parameter_list: the shadow weights sharing this quantizer (given by
            brevitas); the scale statistic ``mean|w|`` is computed over all of them.
        codebook: ``"binary"``, ``"ternary"`` or ``"quaternary"``.
        scaling: power-of-two per-tensor scale (True) or ``s = 1`` (False).
        stochastic: binary only -- stochastic binarization in training mode.
    """

    def __init__(self, tracked_parameter_list, codebook: str, scaling: bool = True,
                 stochastic: bool = False) -> None:
        super().__init__()
        if codebook not in CODEBOOKS:
            raise ValueError(f"unknown codebook {codebook!r}; known: {', '.join(CODEBOOKS)}")
        if stochastic and codebook != "binary":
            raise ValueError("stochastic quantization is only defined for the binary codebook")
        # plain list: the parameters belong to their layers, not to the quantizer
        self._tracked = list(tracked_parameter_list)
        self.codebook = codebook
        self.scaling = bool(scaling)
        self.stochastic = bool(stochastic)
        self.frozen_scale: torch.Tensor | None = None  # set by codebook_export_mode

    # -- scale ---------------------------------------------------------------------------
    def compute_scale(self, x: torch.Tensor) -> torch.Tensor:
        """The power-of-two scale ``s`` (0-d float tensor, no gradient)."""
        if self.frozen_scale is not None:
            return self.frozen_scale.to(device=x.device, dtype=x.dtype)
        if not self.scaling:
            return torch.ones((), device=x.device, dtype=x.dtype)
        with torch.no_grad():
            tensors = self._tracked or [x]
            total = sum(float(t.numel()) for t in tensors)
            mean_abs = sum(t.detach().abs().sum() for t in tensors) / total
            stat = torch.clamp(mean_abs * _SCALE_MULTIPLIER[self.codebook], min=_SCALE_MIN)
            return torch.exp2(torch.round(torch.log2(stat))).to(device=x.device, dtype=x.dtype)

    # -- projection ----------------------------------------------------------------------
    def project(self, w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Codebook projection of ``w`` with scale ``s`` (no gradient)."""
        with torch.no_grad():
            pos = w >= 0
            if self.codebook == "binary":
                if self.stochastic and self.training:
                    p = torch.clamp((w / s + 1.0) / 2.0, 0.0, 1.0)
                    pos = torch.rand_like(w) < p
                return torch.where(pos, s, -s)
            if self.codebook == "ternary":
                return torch.where(w.abs() <= s / 2, torch.zeros_like(w), torch.where(pos, s, -s))
            mag = torch.where(w.abs() >= 0.75 * s, s, s / 2)
            return torch.where(pos, mag, -mag)

    def forward(self, x: torch.Tensor):
        s = self.compute_scale(x)
        q = self.project(x, s)
        value = x + (q - x).detach()  # identity straight-through estimator
        if self.codebook == "binary":
            scale, bits = s, 1.0
        elif self.codebook == "ternary":
            scale, bits = s, 2.0
        else:
            scale, bits = s / 2, 3.0
        zero = torch.zeros((), device=x.device, dtype=x.dtype)
        return value, scale, zero, torch.tensor(bits, device=x.device, dtype=x.dtype)


class _ConnectBase(ExtendedInjector):
    proxy_class = WeightQuantProxyFromInjector
    tensor_quant = CodebookTensorQuant
    signed = True
    narrow_range = True
    scaling = True
    stochastic = False


class BinaryConnect(_ConnectBase):
    """Deterministic BinaryConnect: ``s * sign(w)`` (``sign(0) = +1``), pow2 scale ``mean|w|``."""

    codebook = "binary"
    bit_width = 1


class StochasticBinaryConnect(BinaryConnect):
    """Stochastic BinaryConnect: in training ``+s`` with probability ``hardsigmoid(w / s)``.

    Uses torch's global RNG (seed it).  In eval mode and in the export it is deterministic
    BinaryConnect, as in the BinaryConnect paper's test-time rule.
    """

    stochastic = True


class TernaryConnect(_ConnectBase):
    """TernaryConnect: 0 when ``|w| <= s / 2``, else ``s * sign(w)``; ``s = 2**round(log2(1.5 mean|w|))``."""

    codebook = "ternary"
    bit_width = 2


class QuaternaryConnect(_ConnectBase):
    """QuaternaryConnect: ``{-1, -1/2, 1/2, 1} * s``; magnitude ``s`` iff ``|w| >= 3 s / 4``."""

    codebook = "quaternary"
    bit_width = 3


def weight_quant_for(kind: str, scaling: bool = True, stochastic: bool = False):
    """The ``weight_quant`` for ``--weights kind``: ``None`` (float) for ``"fp"``.

    ``scaling=False`` gives the unscaled codebook (``s = 1``); ``stochastic=True`` selects
    :class:`StochasticBinaryConnect` (binary only).
    """
    if kind == "fp":
        return None
    base = {"binary": StochasticBinaryConnect if stochastic else BinaryConnect,
            "ternary": TernaryConnect, "quaternary": QuaternaryConnect}.get(kind)
    if base is None:
        raise ValueError(f"unknown weight kind {kind!r}; known: {', '.join(WEIGHT_KINDS)}")
    if stochastic and kind != "binary":
        raise ValueError("stochastic quantization is only defined for binary weights")
    if scaling:
        return base
    return base.let(scaling=False)


def codebook_values(kind: str, scale: float) -> set[float]:
    """The exact set of values a ``kind`` weight tensor may contain, for scale ``s``."""
    return {v * scale for v in CODEBOOKS[kind]}


def _codebook_quants(model: nn.Module) -> list[tuple[CodebookTensorQuant, list[nn.Parameter]]]:
    out = []
    for module in model.modules():
        if isinstance(module, WeightQuantProxyFromInjector) and isinstance(
                module.tensor_quant, CodebookTensorQuant):
            out.append((module.tensor_quant, list(module.tracked_parameter_list)))
    return out


@contextmanager
def codebook_export_mode(model: nn.Module) -> Iterator[None]:
    """Within the block, every Connect-quantized shadow weight holds its quantized value.

    The scale of each quantizer is computed once (eval mode, deterministic rule) and frozen,
    then each tracked parameter is overwritten with ``project(w, s)``.  Forward passes are
    unchanged (the projection is idempotent for a fixed scale) and brevitas' export writes
    initializers exactly on the codebook.  Parameters and scales are restored on exit.
    """
    saved: list[tuple[nn.Parameter, torch.Tensor]] = []
    quants = _codebook_quants(model)
    try:
        with torch.no_grad():
            for tq, params in quants:
                was_training = tq.training
                tq.eval()
                s = tq.compute_scale(params[0])
                for p in params:
                    saved.append((p, p.data.clone()))
                for p in params:
                    p.data.copy_(tq.project(p.data, s))
                tq.frozen_scale = s.detach().clone()
                tq.train(was_training)
        yield
    finally:
        with torch.no_grad():
            for p, data in saved:
                p.data.copy_(data)
        for tq, _ in quants:
            tq.frozen_scale = None


# ---------------------------------------------------------------------------------------
# Activation presets
# ---------------------------------------------------------------------------------------


class SigmoidPow2(Uint8ActPerTensorFixedPoint):
    """Sigmoid outputs: unsigned 8-bit codes 0..255, constant scale ``2**-8``."""

    scaling_impl_type = ScalingImplType.CONST
    scaling_const = 1.0
    max_val = 1.0


class TanhPow2(Int8ActPerTensorFixedPoint):
    """Tanh outputs: signed 8-bit codes -128..127, constant scale ``2**-7``."""

    scaling_impl_type = ScalingImplType.CONST
    scaling_const = 1.0
    max_val = 1.0
    min_val = -1.0


class Int24Bias(Int16Bias):
    """Biases with 24-bit codes and scale ``input_scale * weight_scale`` (a power of two).

    ``Int16Bias`` clips too early for recurrent gates and 1 x 1 readouts (e.g. a bias of -3
    with input scale ``2**-7`` and weight scale ``2**-9`` exceeds its range of +-0.5); 24 bits
    keep every code exactly representable in float32 (|code| < 2**23), which the QONNX
    reference executes in.
    """

    bit_width = 24


class Int16ActPow2(Int8ActPow2):
    """16-bit signed activations (codes -32768..32767), learned scale ``2**ceil(t) / 2**15``."""

    bit_width = 16

