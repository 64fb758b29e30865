"""Binary / Ternary / Quaternary Connect quantizers: exact codebooks, scales, STE, export mode."""

import math

import pytest
import torch
from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantSigmoid, QuantTanh

from tessera.models.quant import is_power_of_two
from tessera.models.rnn import quant as Q
from tessera.models.rnn.cells import quant_lstm

KINDS = ("binary", "ternary", "quaternary")
MULT = {"binary": 1.0, "ternary": 1.5, "quaternary": 1.5}



def _layer(kind, w, scaling=True):
    layer = QuantLinear(w.shape[1], w.shape[0], bias=False,
                        weight_quant=Q.weight_quant_for(kind, scaling=scaling))
    with torch.no_grad():
        layer.weight.copy_(w)
    return layer


def _weights(shape=(24, 40), magnitude=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=g) * magnitude
    w[0, 0] = 0.0
    return w


def _expected(kind, w, s):
    if kind == "binary":
        return torch.where(w >= 0, s, -s)
    if kind == "ternary":
        return torch.where(w.abs() <= s / 2, torch.zeros_like(w), torch.where(w >= 0, s, -s))
    mag = torch.where(w.abs() >= 0.75 * s, torch.full_like(w, s), torch.full_like(w, s / 2))
    return torch.where(w >= 0, mag, -mag)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("magnitude", [0.01, 0.3, 6.0])
def test_values_are_exactly_the_scaled_codebook(kind, magnitude):
    w = _weights(magnitude=magnitude, seed=3)
    qw = _layer(kind, w).quant_weight()
    v = qw.value.detach()
    s = 2.0 ** round(math.log2(MULT[kind] * float(w.abs().mean())))
    assert is_power_of_two(s)
    assert set(torch.unique(v).tolist()) <= Q.codebook_values(kind, s)
    assert torch.equal(v, _expected(kind, w, s)), "documented projection rule"
    # brevitas view: integer codes, zero-point 0, power-of-two scale, right bit width
    scale = float(qw.scale)
    assert is_power_of_two(scale) and float(qw.zero_point) == 0.0
    assert scale == (s / 2 if kind == "quaternary" else s)
    codes = v / scale
    assert torch.equal(codes, torch.round(codes))
    assert float(qw.bit_width) == {"binary": 1, "ternary": 2, "quaternary": 3}[kind]
    if kind == "quaternary":
        assert set(torch.unique(codes).tolist()) <= {-2.0, -1.0, 1.0, 2.0}
    if kind == "ternary":
        assert (v == 0).any() and (v != 0).any()


@pytest.mark.parametrize("kind", KINDS)
def test_unscaled_codebook_is_literal(kind):
    w = _weights(magnitude=0.8, seed=5)
    v = _layer(kind, w, scaling=False).quant_weight().value.detach()
    assert set(torch.unique(v).tolist()) <= set(Q.CODEBOOKS[kind])
    assert torch.equal(v, _expected(kind, w, 1.0))


def test_thresholds_and_ties():
    s = 1.0
    w = torch.tensor([[0.0, 0.5, -0.5, 0.50001, 0.74, 0.75, -0.75, 2.0, -1e-9]])
    v = {k: _layer(k, w, scaling=False).quant_weight().value.detach()[0].tolist() for k in KINDS}
    assert v["binary"] == [s, s, -s, s, s, s, -s, s, -s]  # sign(0) = +1
    assert v["ternary"] == [0.0, 0.0, 0.0, s, s, s, -s, s, 0.0]  # |w| <= s/2 -> 0
    assert v["quaternary"] == [0.5, 0.5, -0.5, 0.5, 0.5, 1.0, -1.0, 1.0, -0.5]


@pytest.mark.parametrize("kind", KINDS)
def test_straight_through_gradient_is_identity(kind):
    w = _weights(seed=7)
    layer = _layer(kind, w)
    upstream = torch.randn(w.shape, generator=torch.Generator().manual_seed(1))
    (layer.quant_weight().value * upstream).sum().backward()
    assert layer.weight.grad is not None
    assert torch.equal(layer.weight.grad, upstream), "identity STE on every shadow weight"


def test_ste_trains_shadow_weights_through_a_conv():
    torch.manual_seed(0)
    conv = QuantConv2d(2, 3, 3, bias=False, weight_quant=Q.QuaternaryConnect)
    before = conv.weight.detach().clone()
    opt = torch.optim.SGD(conv.parameters(), lr=0.1)
    conv(torch.randn(4, 2, 6, 6)).pow(2).mean().backward()
    assert conv.weight.grad.abs().sum() > 0
    opt.step()
    assert not torch.equal(before, conv.weight.detach())


def test_stochastic_binary_connect():
    torch.manual_seed(0)
    # mean|w| = 0.125 -> s = 0.125: rows 100.. have w / s = 2 (p(+s) = 1), rows ..100 w = 0
    w = torch.full((200, 100), 0.25)
    w[:100] = 0.0
    layer = QuantLinear(100, 200, bias=False, weight_quant=Q.weight_quant_for("binary", stochastic=True))
    with torch.no_grad():
        layer.weight.copy_(w)
    layer.train()
    a = layer.quant_weight().value.detach()
    b = layer.quant_weight().value.detach()
    s = 0.125
    assert set(torch.unique(a).tolist()) <= {-s, s}
    assert not torch.equal(a, b), "training draws are random"
    frac_pos_zero_rows = float((a[:100] > 0).float().mean())
    assert 0.45 < frac_pos_zero_rows < 0.55, "p(+s) = 1/2 at w = 0"
    assert bool((a[100:] > 0).all()), "w = 2 s: p(+s) = clip((2 + 1) / 2) = 1"
    layer.eval()
    e1, e2 = layer.quant_weight().value.detach(), layer.quant_weight().value.detach()
    assert torch.equal(e1, e2) and torch.equal(e1, torch.where(w >= 0, s, -s))
    with pytest.raises(ValueError):
        Q.weight_quant_for("ternary", stochastic=True)


def test_weight_quant_for_fp_and_unknown():
    assert Q.weight_quant_for("fp") is None
    with pytest.raises(ValueError, match="unknown weight kind"):
        Q.weight_quant_for("octonary")


def test_lstm_gate_scale_is_shared_by_input_and_hidden_weights():
    torch.manual_seed(0)
    lstm = quant_lstm(8, 16, Q.TernaryConnect)
    gp = lstm.layers[0][0].input_gate_params
    with torch.no_grad():
        gp.hidden_weight.weight.mul_(10.0)
    qi, qh = gp.input_weight.quant_weight(), gp.hidden_weight.quant_weight()
    assert float(qi.scale) == float(qh.scale), "one scale per gate, as exported"
    both = torch.cat([gp.input_weight.weight.flatten(), gp.hidden_weight.weight.flatten()])
    assert float(qi.scale.detach()) == 2.0 ** round(math.log2(1.5 * float(both.detach().abs().mean())))


@pytest.mark.parametrize("kind", KINDS)
def test_codebook_export_mode_writes_codebook_values_and_restores(kind):
    torch.manual_seed(1)
    layer = QuantLinear(12, 8, bias=False, weight_quant=Q.weight_quant_for(kind))
    layer.eval()
    shadow = layer.weight.detach().clone()
    x = torch.randn(5, 12)
    with torch.no_grad():
        y = layer(x)
        s = float(layer.quant_weight().scale) * (2 if kind == "quaternary" else 1)
        with Q.codebook_export_mode(layer):
            assert set(torch.unique(layer.weight).tolist()) <= Q.codebook_values(kind, s)
            assert torch.equal(layer(x), y), "projection is idempotent at a frozen scale"
        assert torch.equal(layer.weight, shadow), "shadow weights restored"
        assert torch.equal(layer(x), y)


def test_activation_presets_have_constant_pow2_scales():
    sig = QuantSigmoid(act_quant=Q.SigmoidPow2, return_quant_tensor=True)
    tanh = QuantTanh(act_quant=Q.TanhPow2, return_quant_tensor=True)
    x = torch.linspace(-9, 9, 101)
    for mod, scale, lo, hi in ((sig, 2.0**-8, 0, 255), (tanh, 2.0**-7, -128, 127)):
        for mode in (True, False):
            mod.train(mode)
            out = mod(x)
            assert float(out.scale) == scale and float(out.zero_point) == 0.0
            codes = out.value / scale
            assert torch.equal(codes, torch.round(codes))
            assert codes.min() >= lo and codes.max() <= hi
    assert list(sig.parameters()) == [] and list(tanh.parameters()) == []
    q16 = QuantIdentity(act_quant=Q.Int16ActPow2, return_quant_tensor=True)
    q16.eval()
    assert float(q16(torch.randn(10)).bit_width) == 16
