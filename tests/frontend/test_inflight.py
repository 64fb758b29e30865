"""Real-valued tensors in flight (compiler/frontend/inflight.py) through data movement, maxima
and piecewise-linear ops, exactly until their Quant: a layer's accumulator scaled by real
constants and read, before any Quant, by LeakyRelu / PRelu (any rational slope: ``Q(max(v,
k v)) = max(Q(v), Q(k v))``), MaxPool (a maximum of the codes, negated first where a real
scale is negative), Flatten, DepthToSpace and Concat (each channel's constants moved with it).
Each model equals the user's file on every output; what cannot be exact is refused in one
line."""

from __future__ import annotations

import numpy as np
import pytest

from .test_handlers import Builder
from .test_real_constants import _exact_and_independent, csim_verified, refused_in_one_line


def _conv(b: Builder, x: str, name: str, c_in: int, c_out: int, per_channel: bool = False, bias: bool = True) -> str:
    """A 3x3 padded convolution on float-scaled 8-bit weights (one scale, or one per output
    channel), with a float bias: its output is in flight."""
    scale = b.const(f"{name}_fw", np.linspace(0.01, 0.03, c_out).reshape(c_out, 1, 1, 1) if per_channel else 0.0123)
    w = b.quant(b.const(f"{name}_wr", b.rng.normal(0, 0.1, (c_out, c_in, 3, 3))), f"{name}_wq", scale, "b8")
    ins = [x, w] + ([b.const(f"{name}_bias", b.rng.normal(0, 0.3, c_out))] if bias else [])
    return b.node("Conv", ins, name, kernel_shape=[3, 3], pads=[1, 1, 1, 1])


def leaky_pool_shuffle(path, alpha=0.01):
    """conv -> LeakyRelu -> Clip -> MaxPool -> DepthToSpace -> Quant (float scale): MelGAN's
    LeakyReLU + QuantHardTanh after a layer, ESPCN's PixelShuffle before its Quant."""
    b = Builder((3, 6, 6))
    b.const("fs", 0.0371)
    c = _conv(b, b.quant("x", "xq"), "c", 3, 4, bias=False)
    clipped = b.node("Clip", [b.node("LeakyRelu", [c], "l", alpha=alpha), b.const("lo", -1.0), b.const("hi", 1.0)], "cl")
    m = b.node("MaxPool", [clipped], "mp", kernel_shape=[2, 2], strides=[2, 2])
    return b.save(path, b.quant(b.node("DepthToSpace", [m], "d2s", blocksize=2, mode="CRD"), "y", "fs"), (1, 6, 6))


def negated_prelu(path, slopes=(0.25, 0.1, -0.3, 1.0)):
    """conv (per-channel weight scales) -> Mul by constants of both signs -> PRelu per channel -> Quant."""
    b = Builder((3, 6, 6))
    b.const("fs", 0.0371)
    c = _conv(b, b.quant("x", "xq"), "c", 3, 4, per_channel=True)
    n = b.node("Mul", [c, b.const("k", np.array([-2.0, 1.5, -0.5, 3.0]).reshape(1, 4, 1, 1))], "neg")
    p = b.node("PRelu", [n, b.const("slope", np.array(slopes).reshape(4, 1, 1))], "pr")
    return b.save(path, b.quant(p, "y", "fs"), (4, 6, 6))


def negated_pool_flatten(path):
    """conv -> Mul by constants of both signs -> MaxPool -> Flatten -> Quant: the pool runs on
    the codes, channels with a negative real scale negated first."""
    b = Builder((3, 6, 6))
    b.const("fs", 0.0371)
    c = _conv(b, b.quant("x", "xq"), "c", 3, 4, per_channel=True)
    n = b.node("Mul", [c, b.const("k", np.array([-2.0, 1.5, -0.5, 3.0]).reshape(1, 4, 1, 1))], "neg")
    m = b.node("MaxPool", [n], "mp", kernel_shape=[2, 2], strides=[2, 2])
    return b.save(path, b.quant(b.node("Flatten", [m], "fl", axis=1), "y", "fs"), (36,))


def concat_of_scales(path, then_conv=False):
    """Concat of a value in flight, codes with a float scale and codes of a power-of-two grid
    (each channel keeps its meaning), then a Quant; or, without the value in flight, a
    convolution reading the concatenated codes."""
    b = Builder((3, 6, 6))
    b.const("fs", 0.0371)
    b.const("s2", 0.0291)
    xq = b.quant("x", "xq")
    scaled = b.quant(_conv(b, xq, "c2", 3, 2), "c2q", "s2")
    if then_conv:
        cat = b.node("Concat", [scaled, xq], "cat", axis=1)
        return b.save(path, b.node("Conv", [cat, b.weight("w3", (2, 5, 3, 3))], "y", kernel_shape=[3, 3]), (2, 4, 4))
    cat = b.node("Concat", [_conv(b, xq, "c1", 3, 4, per_channel=True), scaled, xq], "cat", axis=1)
    return b.save(path, b.quant(cat, "y", "fs"), (9, 6, 6))


@pytest.mark.parametrize("alpha", [0.01, 0.2, 1.7, -0.3])
def test_leaky_relu_on_a_value_in_flight_is_exact(tmp_path, alpha):
    if alpha < 0:  # a negative slope is no monotone function: the maximum of its codes is refused
        refused_in_one_line(leaky_pool_shuffle(tmp_path / "m.onnx", alpha), "MaxPool.*negative LeakyRelu/PRelu slope")
        return
    g = _exact_and_independent(leaky_pool_shuffle(tmp_path / "m.onnx", alpha), 500)
    assert [n.op for n in g.nodes] == ["conv", "maxpool", "depthtospace", "rescale", "rescale", "maximum"]
    assert g.nodes[-1].attrs.minimum == (alpha > 1)


def test_prelu_per_channel_on_negated_channels_is_exact(tmp_path):
    g = _exact_and_independent(negated_prelu(tmp_path / "m.onnx"), 500)
    assert [n.op for n in g.nodes] == ["conv", "rescale", "rescale", "maximum"]
    refused_in_one_line(negated_prelu(tmp_path / "both.onnx", (0.25, 0.1, -0.3, 2.0)),
                        r"slopes lie on both sides of 1 \(-0.3 .. 2\)")


def test_max_pool_of_negated_channels_is_exact(tmp_path):
    g = _exact_and_independent(negated_pool_flatten(tmp_path / "m.onnx"), 500)
    assert [n.op for n in g.nodes] == ["conv", "conv", "maxpool", "flatten", "rescale"]
    assert g.nodes[1].attrs.weight.ravel().tolist() == [-1, 1, -1, 1]  # the channels with a negative real scale
    assert len(g.nodes[-1].attrs.steps) == 36  # one step per element of the flattened channels


@pytest.mark.parametrize("then_conv", [False, True])
def test_concat_of_different_scales_is_exact(tmp_path, then_conv):
    g = _exact_and_independent(concat_of_scales(tmp_path / "m.onnx", then_conv), 500)
    if then_conv:
        assert [n.op for n in g.nodes] == ["conv", "rescale", "concat", "conv"]
    else:
        assert [n.op for n in g.nodes] == ["conv", "conv", "rescale", "concat", "concat", "rescale"]
        assert len(g.nodes[-1].attrs.steps) == 9  # one step per channel: three meanings side by side


def test_what_cannot_be_exact_is_refused_in_one_line(tmp_path):
    b = Builder((3, 6, 6))
    c = _conv(b, b.quant("x", "xq"), "c", 3, 8)
    path = b.save(tmp_path / "shuffle.onnx", b.node("DepthToSpace", [c], "y", blocksize=2), (2, 12, 12))
    refused_in_one_line(path, r"DepthToSpace_y.*moves the channels of 'Conv_c', whose real scales or offsets differ")
    b = Builder((3, 6, 6))
    c = _conv(b, b.quant("x", "xq"), "c", 3, 4)
    path = b.save(tmp_path / "leaky_out.onnx", b.node("LeakyRelu", [c], "y", alpha=0.1), (4, 6, 6))
    refused_in_one_line(path, "LeakyRelu_y.*at the graph output without a Quant")
    b = Builder((3, 6, 6))
    xq = b.quant("x", "xq")
    cat = b.node("Concat", [b.node("Relu", [_conv(b, xq, "c1", 3, 2)], "r"), _conv(b, xq, "c2", 3, 2)], "cat", axis=1)
    path = b.save(tmp_path / "clips.onnx", b.quant(cat, "y"), (4, 6, 6))
    refused_in_one_line(path, "Concat_cat.*clipped differently")


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_in_flight_values_csimulate_exactly(tmp_path, io_type):
    """The bend's two rescales and their maximum (hls4ml's Merge), the negation (a 1x1
    depthwise convolution), a per-element rescale after a flatten (hls4ml's in-place stream
    flatten keeps the map's words in io_stream)."""
    csim_verified(leaky_pool_shuffle(tmp_path / "leaky.onnx"), tmp_path / "p1", io_type, 100, 36)
    csim_verified(negated_pool_flatten(tmp_path / "pool.onnx"), tmp_path / "p2", io_type, 100, 36)
