"""Brevitas quantizer presets with power-of-two (fixed-point) scales only.

Every quantizer in this module produces ``value = code * scale`` with an integer ``code``,
``scale == 2**k`` for an integer ``k`` and a zero-point of exactly 0, so that a
fixed-point datapath (shifts, integer multiply-accumulate) reproduces the Brevitas
forward pass bit for bit.  The QONNX export of a layer using them therefore contains
only ``Quant``/``BipolarQuant`` nodes whose ``scale`` input is an exact power of two and
whose ``zeropt`` input is 0.

Presets (per-tensor unless named per-channel):

=====================  ===========  ==========================================  ==============
class                   codes        scale rule                                  QONNX node
=====================  ===========  ==========================================  ==============
Int8WeightPow2          [-127, 127]  2**ceil(log2 max|w|) / 2**7                 Quant (narrow)
Int8WeightPow2PerChan.  [-127, 127]  same, per output channel                    Quant (narrow)
Int4WeightPow2          [-7, 7]      2**ceil(log2 max|w|) / 2**3                 Quant (narrow)
TernaryWeightPow2       {-1, 0, 1}   2**round(log2 mean|w|), zero if |w|<=s/2    Quant (2b, narrow)
BinaryWeightPow2        {-1, +1}     2**round(log2 mean|w|)                      BipolarQuant
Int8ActPow2             [-128, 127]  learned 2**ceil(t) / 2**7                   Quant
Int4ActPow2             [-8, 7]      learned 2**ceil(t) / 2**3                   Quant
Uint8ActPow2            [0, 255]     learned 2**ceil(t) / 2**8                   Quant
Uint4ActPow2            [0, 15]      learned 2**ceil(t) / 2**4                   Quant
Int16Bias               [-2**15, ..] input_scale * weight_scale (pow2 * pow2)    Quant
=====================  ===========  ==========================================  ==============

Only brevitas building blocks are used: the fixed-point presets
(:class:`brevitas.quant.Int8WeightPerTensorFixedPoint`, ``Int8ActPerTensorFixedPoint``,
``Uint8ActPerTensorFixedPoint``) with bit width and statistics overridden, and for binary
weights brevitas' ``BinaryQuant`` (``QuantType.BINARY``) with mean-abs statistics
restricted to powers of two.  Brevitas' stock ``SignedBinaryWeightPerTensorConst`` and
``SignedTernaryWeightPerTensorConst`` are *not* suitable as-is: their constant scale is
0.1 (``RestrictValueType.FP``), not a power of two; and a ``TernaryQuant`` threshold other
than 0.5 does not survive export (see :data:`TERNARY_THRESHOLD`).

Training-time caveat (brevitas behaviour, like BatchNorm): during the first
:data:`ACT_STATS_STEPS` forward passes in *training* mode an activation quantizer uses the
raw batch statistic as its scale, which is not a power of two.  From then on, and always
in eval mode and in the export, every scale is a power of two.
"""

from __future__ import annotations

import math

from brevitas.core.function_wrapper import RoundSte, TensorClamp
from brevitas.core.quant import QuantType
from brevitas.core.restrict_val import RestrictValueType
from brevitas.core.scaling import ScalingImplType, ScalingPerOutputType
from brevitas.core.utils import SingleArgStatelessBuffer
from brevitas.core.zero_point import ZeroZeroPoint
from brevitas.inject.enum import StatsOp
from brevitas.quant import (
    Int8ActPerTensorFixedPoint,
    Int8WeightPerTensorFixedPoint,
    Int16Bias,
    Uint8ActPerTensorFixedPoint,
)
from brevitas.quant.solver import WeightQuantSolver

__all__ = [
    "ACT_STATS_STEPS",
    "BinaryWeightPow2",
    "Int16Bias",
    "Int4ActPow2",
    "Int4WeightPow2",
    "Int8ActPow2",
    "Int8WeightPow2",
    "Int8WeightPow2PerChannel",
    "TERNARY_THRESHOLD",
    "TernaryWeightPow2",
    "Uint4ActPow2",
    "Uint8ActPow2",
    "is_power_of_two",
]

#: Number of training forward passes during which activation quantizers collect the
#: 99.999th percentile of |x| before turning it into a learned log2-domain parameter.
#: Brevitas' default is 300; the zoo's short training runs need the learned phase sooner.
ACT_STATS_STEPS = 50

#: Ternary zeroing threshold, relative to the (power-of-two) scale: a weight becomes 0
#: when ``|w| <= TERNARY_THRESHOLD * scale``.  It has to be 0.5: brevitas exports the
#: *float* shadow weights followed by ``Quant(w, s, 0, 2, signed=1, narrow=1)``, i.e.
#: ``clamp(round_half_even(w / s), -1, 1)``, which zeroes exactly ``|w| <= s / 2``; a
#: ``TernaryQuant`` with any other threshold exports a graph that disagrees with the
#: trained model.
#: With ``s = 2**round(log2 mean|w|)`` the threshold lies in [0.35, 0.71] x mean|w|,
#: bracketing the Ternary Weight Networks rule ``0.7 * E|w|`` (Li & Liu, 2016).
TERNARY_THRESHOLD = 0.5


def is_power_of_two(x: float) -> bool:
    """True when ``x`` is exactly ``2**k`` for an integer ``k`` (as a binary float)."""
    x = float(x)
    if not math.isfinite(x) or x <= 0.0:
        return False
    mantissa, _ = math.frexp(x)
    return mantissa == 0.5


# ---------------------------------------------------------------------------------------
# Integer weights
# ---------------------------------------------------------------------------------------


class Int8WeightPow2(Int8WeightPerTensorFixedPoint):
    """8-bit narrow signed per-tensor weights, power-of-two scale.

    Codes ``q = clamp(round(w / s), -127, 127)``; scale
    ``s = 2**ceil(log2(max|w|)) / 2**7`` recomputed from the float shadow weights at every
    forward pass (max-abs statistics, radix point rounded *up* so that almost no weight
    clips; at most the top code ``128 -> 127`` saturates).  Straight-through estimator on the
    rounding and the clamp; the scale gradient only reaches the arg-max weight.
    """

    bit_width = 8


class Int8WeightPow2PerChannel(Int8WeightPow2):
    """:class:`Int8WeightPow2` with one power-of-two scale per *output channel*
    (``2**ceil(log2 max|w_c|) / 2**7`` over each channel's weights).

    Used for convolutions that absorbed a BatchNorm (:func:`tessera.models.cnn3d.fold_batchnorm`):
    the folded per-channel factors ``gamma / sigma`` span orders of magnitude, and one scale
    per tensor would round the small channels to a few codes.  The compiler multiplies
    every channel onto the finest grid of the tensor (exact; the weight type widens by the
    spread of the channel exponents).
    """

    scaling_per_output_type = ScalingPerOutputType.CHANNEL


class Int4WeightPow2(Int8WeightPerTensorFixedPoint):
    """4-bit narrow signed per-tensor weights, power-of-two scale.

    Codes ``q = clamp(round(w / s), -7, 7)``; scale ``s = 2**ceil(log2(max|w|)) / 2**3``.
    """

    bit_width = 4


class BinaryWeightPow2(WeightQuantSolver):
    """Binary weights: ``w_q = s * sign(w)`` with ``sign(0) = +1`` and ``s`` a power of two.

    Scale rule: ``s = 2**round(log2(mean|w|))`` over the whole tensor, i.e. the
    XNOR-Net L2-optimal binary scale ``mean|w|`` snapped to the nearest power of two (in the
    log domain).  Forward: brevitas ``BinaryQuant`` (``binary_sign_ste``); backward:
    straight-through (identity) gradient to the float shadow weights, no clipping, so no
    weight can freeze.  Exported by brevitas' QONNX flow as ``BipolarQuant(w, s)``.
    """

    quant_type = QuantType.BINARY
    bit_width = 1
    signed = True
    narrow_range = True
    zero_point_impl = ZeroZeroPoint
    scaling_impl_type = ScalingImplType.STATS
    scaling_stats_op = StatsOp.AVE
    scaling_per_output_type = ScalingPerOutputType.TENSOR
    restrict_scaling_type = RestrictValueType.POWER_OF_TWO
    restrict_value_float_to_int_impl = RoundSte
    scaling_min_val = 2.0**-24


class TernaryWeightPow2(Int8WeightPerTensorFixedPoint):
    """Ternary weights: ``w_q = s * clamp(round(w / s), -1, 1)`` with ``s`` a power of two.

    Codes are exactly {-1, 0, +1}: a weight is zeroed when ``|w| <= s / 2``
    (:data:`TERNARY_THRESHOLD`; round-half-to-even sends ``|w| = s / 2`` to 0).
    Scale rule: ``s = 2**round(log2(mean|w|))`` over the whole tensor (brevitas ``AbsAve``
    statistics, power-of-two restriction with round-to-nearest in the log2 domain, integer
    threshold fixed to 1 instead of ``2**(bits-1)``).

    Built on brevitas' integer quantizer (2-bit, narrow range) rather than its
    ``TernaryQuant``, for two reasons:

    * the forward pass is literally the exported ``Quant(w, s, 0, 2, signed=1, narrow=1)``
      node, so the exported graph reproduces the trained model exactly;
    * ``TernaryQuant`` multiplies the straight-through ``sign`` by a non-differentiable
      mask, so weights currently quantized to 0 get no gradient of their own.

    Gradient: *clipped* straight-through estimator.  Round is straight-through, the clamp
    to [-1, 1] is not (``TensorClamp``): every shadow weight with ``|w| < 1.5 s`` -- codes
    -1, 0 and +1 alike -- receives the gradient of its quantized value unchanged; weights
    beyond the clamp only move through the scale (``d s / d w = c * sign(w)``).  With a
    straight-through clamp (brevitas' default ``TensorClampSte`` for statistics-based
    scales) the scale gradient ``code - w / s`` of saturated weights grows without bound
    and QAT collapses (digits CNN: 57% instead of 93% test accuracy after a few epochs).
    """

    bit_width = 2
    tensor_clamp_impl = TensorClamp
    scaling_stats_op = StatsOp.AVE
    restrict_value_float_to_int_impl = RoundSte
    int_scaling_impl = SingleArgStatelessBuffer(1.0)
    scaling_min_val = 2.0**-24


# ---------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------


class Int8ActPow2(Int8ActPerTensorFixedPoint):
    """8-bit signed per-tensor activations, codes [-128, 127], power-of-two scale.

    Scale ``s = 2**ceil(t) / 2**7`` where ``t`` is a learned log2-domain parameter,
    initialised after ``ACT_STATS_STEPS`` training batches from the running 99.999th
    percentile of |x| (so the initial clip point is the percentile rounded *up* to a power
    of two).  ``t`` keeps learning through a straight-through ``ceil``.
    """

    bit_width = 8
    collect_stats_steps = ACT_STATS_STEPS


class Int4ActPow2(Int8ActPow2):
    """4-bit signed per-tensor activations, codes [-8, 7]; scale ``2**ceil(t) / 2**3``."""

    bit_width = 4


class Uint8ActPow2(Uint8ActPerTensorFixedPoint):
    """8-bit unsigned per-tensor activations (ReLU outputs), codes [0, 255].

    Scale ``s = 2**ceil(t) / 2**8`` with ``t`` learned as for :class:`Int8ActPow2`.
    """

    bit_width = 8
    collect_stats_steps = ACT_STATS_STEPS


class Uint4ActPow2(Uint8ActPow2):
    """4-bit unsigned per-tensor activations (ReLU outputs), codes [0, 15];
    scale ``2**ceil(t) / 2**4``."""

    bit_width = 4


# ``Int16Bias`` is brevitas' own: codes in [-2**15, 2**15 - 1] and scale equal to
# ``input_scale * weight_scale`` (the accumulator scale), which is a power of two because
# both factors are.  It needs the layer input to be a QuantTensor
# (``return_quant_tensor=True`` on the preceding quantizer).
Int16Bias = Int16Bias
