"""Quantizer presets: exact codebooks, power-of-two scales, zero-points, STE gradients."""

import math

import pytest
import torch
from brevitas.nn import QuantIdentity, QuantLinear, QuantReLU

from tessera.models import quant as Q


def _weights(shape, magnitude, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=g) * magnitude
    w[0, 0] = 0.0  # an exact zero: binary must send it to +s, ternary to 0
    return w


def _layer(weight_quant, w):
    layer = QuantLinear(w.shape[1], w.shape[0], bias=False, weight_quant=weight_quant)
    with torch.no_grad():
        layer.weight.copy_(w)
    return layer


def _scalar(t):
    t = t.detach().flatten()
    assert t.numel() == 1, "per-tensor scale expected"
    return float(t[0])


def test_is_power_of_two():
    for k in range(-30, 10):
        assert Q.is_power_of_two(2.0**k)
    for x in (0.0, -0.5, 0.1, 3.0, 0.75, float("nan"), float("inf"), 1.0 + 2**-20):
        assert not Q.is_power_of_two(x)


@pytest.mark.parametrize("quantizer,bits", [(Q.Int8WeightPow2, 8), (Q.Int4WeightPow2, 4)])
@pytest.mark.parametrize("magnitude", [0.013, 0.37, 5.0])
def test_int_weights_are_pow2_fixed_point(quantizer, bits, magnitude):
    w = _weights((16, 48), magnitude, seed=bits)
    qw = _layer(quantizer, w).quant_weight()
    s = _scalar(qw.scale)
    assert Q.is_power_of_two(s)
    assert _scalar(qw.zero_point) == 0.0
    assert _scalar(qw.bit_width) == bits
    # documented rule: radix point from max|w| rounded up
    assert s == 2.0 ** math.ceil(math.log2(float(w.abs().max()))) / 2 ** (bits - 1)
    codes = qw.value.detach() / s
    assert torch.equal(codes, torch.round(codes)), "codes must be integers"
    qmax = 2 ** (bits - 1) - 1  # narrow range
    assert codes.abs().max() <= qmax
    assert codes.abs().max() >= 2 ** (bits - 2), "scale wastes the code range"
    expected = torch.clamp(torch.round(w / s), -qmax, qmax) * s
    assert torch.equal(qw.value.detach(), expected)


@pytest.mark.parametrize("magnitude", [0.02, 0.3, 7.0])
def test_binary_weights_are_exactly_plus_minus_pow2(magnitude):
    w = _weights((12, 40), magnitude, seed=1)
    qw = _layer(Q.BinaryWeightPow2, w).quant_weight()
    s = _scalar(qw.scale)
    assert Q.is_power_of_two(s)
    assert s == 2.0 ** round(math.log2(float(w.abs().mean())))
    assert _scalar(qw.zero_point) == 0.0
    assert _scalar(qw.bit_width) == 1
    v = qw.value.detach()
    assert set(torch.unique(v).tolist()) == {-s, s}
    assert torch.equal(v, torch.where(w >= 0, s, -s)), "sign(w), with sign(0) = +1"


@pytest.mark.parametrize("magnitude", [0.02, 0.3, 7.0])
def test_ternary_weights_are_exactly_in_minus_zero_plus_pow2(magnitude):
    w = _weights((12, 40), magnitude, seed=2)
    qw = _layer(Q.TernaryWeightPow2, w).quant_weight()
    s = _scalar(qw.scale)
    assert Q.is_power_of_two(s)
    assert s == 2.0 ** round(math.log2(float(w.abs().mean())))
    assert _scalar(qw.zero_point) == 0.0
    assert _scalar(qw.bit_width) == 2
    v = qw.value.detach()
    assert set(torch.unique(v).tolist()) == {-s, 0.0, s}
    thr = Q.TERNARY_THRESHOLD * s
    expected = torch.where(w.abs() <= thr, torch.zeros_like(w), torch.sign(w) * s)
    assert torch.equal(v, expected)
    assert v[0, 0] == 0.0


@pytest.mark.parametrize(
    "quantizer", [Q.Int8WeightPow2, Q.Int4WeightPow2, Q.BinaryWeightPow2, Q.TernaryWeightPow2])
def test_ste_passes_gradient_to_the_float_shadow_weights(quantizer):
    """d(loss)/dw = straight-through part + scale part.

    Straight-through part: ``g`` for round (integer and ternary: code * s with
    d code / dw = 1 / s), ``s * g`` for binary (sign is straight-through).  The ternary
    clamp is *not* straight-through: weights with ``|w| >= 1.5 s`` get no direct part.
    Scale part: only the arg-max weight for max-abs statistics (integer presets),
    ``c * sign(w)`` with one scalar ``c`` for mean-abs statistics (binary, ternary).
    In particular weights whose ternary code is 0 get their own gradient ``g``.
    """
    w = _weights((8, 32), 0.2, seed=3)
    layer = _layer(quantizer, w)
    qw = layer.quant_weight()
    s = _scalar(qw.scale)
    codes = qw.value.detach() / s
    g = torch.randn(qw.value.shape, generator=torch.Generator().manual_seed(4))
    (qw.value * g).sum().backward()
    grad = layer.weight.grad
    assert grad is not None and torch.isfinite(grad).all()
    assert (grad != 0).all(), "every float shadow weight must receive a gradient"
    if quantizer is Q.BinaryWeightPow2:
        ste = g * s
    elif quantizer is Q.TernaryWeightPow2:
        inside = w.abs() < 1.5 * s
        assert inside.float().mean() > 0.5 and (~inside).any()
        ste = torch.where(inside, g, torch.zeros_like(g))
    else:
        ste = g
    rest = grad - ste
    if quantizer in (Q.Int8WeightPow2, Q.Int4WeightPow2):
        not_max = w.abs() != w.abs().max()
        assert torch.allclose(rest[not_max], torch.zeros_like(rest[not_max]), atol=1e-6)
    else:
        sign = torch.sign(w)
        c = (rest * sign).sum() / (sign != 0).sum()
        assert c.abs() > 0
        assert torch.allclose(rest, c * sign, atol=1e-6)
    if quantizer is Q.TernaryWeightPow2:
        zero = codes == 0
        assert zero.sum() >= 4
        assert torch.equal(ste[zero], g[zero]), "zero codes still get their own gradient"


@pytest.mark.parametrize(
    "quantizer,bits,signed,module",
    [
        (Q.Int8ActPow2, 8, True, QuantIdentity),
        (Q.Int4ActPow2, 4, True, QuantIdentity),
        (Q.Uint8ActPow2, 8, False, QuantReLU),
        (Q.Uint4ActPow2, 4, False, QuantReLU),
    ],
)
def test_activations_are_pow2_fixed_point(quantizer, bits, signed, module):
    torch.manual_seed(0)
    act = module(act_quant=quantizer, return_quant_tensor=True)
    opt = torch.optim.SGD(act.parameters(), lr=1e-3) if list(act.parameters()) else None
    # run past the statistics-collection phase into the learned-parameter phase
    for step in range(Q.ACT_STATS_STEPS + 5):
        x = torch.randn(64, 20) * 3.0
        out = act(x)
        if opt is not None and step >= Q.ACT_STATS_STEPS:
            opt.zero_grad()
            (out.value - x).pow(2).mean().backward()
            opt.step()
    act.eval()
    x = torch.randn(256, 20) * 3.0
    x[0, :2] = torch.tensor([1e3, -1e3])  # must saturate at the code range ends
    out = act(x)
    s = _scalar(out.scale)
    assert Q.is_power_of_two(s)
    assert _scalar(out.zero_point) == 0.0
    assert _scalar(out.bit_width) == bits
    assert bool(out.signed) == signed
    codes = out.value.detach() / s
    assert torch.equal(codes, torch.round(codes))
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    assert codes.min() >= lo and codes.max() <= hi
    assert codes.max() == hi and codes.min() == lo, "out-of-range inputs must saturate"
    assert (codes.abs() >= hi / 4).float().mean() > 0.01, "scale wastes the code range"


def test_int16_bias_scale_is_input_scale_times_weight_scale():
    torch.manual_seed(0)
    inp = QuantIdentity(act_quant=Q.Int8ActPow2, return_quant_tensor=True)
    fc = QuantLinear(16, 8, bias=True, weight_quant=Q.Int8WeightPow2, bias_quant=Q.Int16Bias,
                     return_quant_tensor=True)
    with torch.no_grad():
        fc.bias.copy_(torch.linspace(-0.9, 0.9, 8))
    for _ in range(3):
        inp(torch.randn(32, 16))
    inp.eval()
    fc.eval()
    qx = inp(torch.randn(32, 16))
    qw = fc.quant_weight()
    qb = fc.bias_quant(fc.bias, qx, qw)
    s_b = _scalar(qb.scale)
    assert s_b == _scalar(qx.scale) * _scalar(qw.scale)
    assert Q.is_power_of_two(s_b)
    assert _scalar(qb.bit_width) == 16
    codes = qb.value.detach() / s_b
    assert torch.equal(codes, torch.round(codes))
    assert codes.min() >= -(2**15) and codes.max() <= 2**15 - 1
    out = fc(qx)
    assert _scalar(out.scale) == s_b
    acc = out.value.detach() / s_b
    assert torch.equal(acc, torch.round(acc)), "accumulator must be an integer multiple of s_b"
