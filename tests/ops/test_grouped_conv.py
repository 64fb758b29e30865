"""Grouped and depthwise convolution (ONNX Conv ``group``), exactly.

Each output channel sums only the input channels of its group.  The integer reference equals
onnxruntime's ``ConvInteger`` with the same ``group`` and a direct loop definition; the HLS
projects (hls4ml's ``DepthwiseConv2D`` for a 2D depthwise conv, the block-diagonal ungrouped
conv otherwise) C-simulate to the same codes.
"""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.ir.types import FixedType, TensorType
from tessera.compiler.ops import conv, quant, relu

from .test_ops_exact import check_exact, loop_conv2d, rand_weights

# (c_in, c_out, group, kernel, strides, pads): depthwise, depthwise x2, two groups, 3D
CASES = [
    (4, 4, 4, (3, 3), (1, 1), (1, 1, 1, 1)),
    (3, 6, 3, (3, 2), (2, 1), (0, 1, 1, 0)),
    (4, 6, 2, (2, 2), (1, 2), (0, 0, 0, 0)),
    (2, 4, 2, (2, 3, 2), (1, 1, 2), (1, 0, 1, 0, 1, 0)),
]


def grouped_attrs(rng, c_in, c_out, group, k, s, pads, bias=True):
    w = rand_weights(rng, (c_out, c_in // group, *k), 6)
    w[0] = 31  # one full-scale row: the accumulator's extreme is reachable
    b = rng.integers(-200, 200, size=c_out) if bias else None
    return conv.Attrs(w, FixedType(6, 5, True), b, FixedType(10, 9, True) if bias else None, s, pads, group)


@pytest.mark.parametrize("c_in,c_out,group,k,s,pads", CASES)
def test_grouped_conv_exact(make_graph, make_type, rng, c_in, c_out, group, k, s, pads):
    attrs = grouped_attrs(rng, c_in, c_out, group, k, s, pads)
    shape = (c_in, 7, 6) if len(k) == 2 else (c_in, 5, 4, 6)
    check_exact(make_graph(make_type(8, 4, False, shape), ("conv", attrs)), n=150)


def test_grouped_conv_is_a_real_grouped_convolution(rng):
    """The integer semantics equal a direct loop: output channel o reads only group o // (F/G)."""
    attrs = grouped_attrs(rng, 4, 6, 2, (2, 2), (1, 1), (0, 0, 1, 1), bias=False)
    x = rng.integers(-8, 8, size=(2, 4, 5, 5))
    tin = TensorType((4, 5, 5), FixedType(4, 0, True), -8, 7)
    out = conv.OP.infer(attrs, [tin], "n")
    got = conv.OP.semantics(attrs, [x], [tin], out)
    xp = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)))
    assert np.array_equal(got, loop_conv2d(xp, attrs.weight, out.shape[1:], (1, 1), group=2))
    # and the block-diagonal ungrouped conv the HLS lowering may use computes the same sums
    full = conv.Attrs(conv.dense_weight(attrs), attrs.wtype, None, None, attrs.strides, attrs.pads)
    assert np.array_equal(conv.OP.semantics(full, [x], [tin], conv.OP.infer(full, [tin], "n")), got)


def test_group_that_does_not_fit_is_refused(rng):
    attrs = grouped_attrs(rng, 4, 6, 3, (2, 2), (1, 1), (0,) * 4)  # 3 groups of 4 // 3 inputs: inconsistent
    tin = TensorType((4, 5, 5), FixedType(4, 0, True), -8, 7)
    with pytest.raises(UnsupportedModelError, match=r"group=3 .* needs 3 input channels, got 4"):
        conv.OP.infer(attrs, [tin], "n")


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_grouped_conv_csim(make_graph, make_type, rng, tmp_path, io_type, case):
    from ..csim.test_ops_csim import csim_exact

    c_in, c_out, group, k, s, pads = CASES[case]
    attrs = grouped_attrs(rng, c_in, c_out, group, k, s, pads)
    shape = (c_in, 7, 6) if len(k) == 2 else (c_in, 5, 4, 6)
    g = make_graph(make_type(6, 4, False, shape), ("conv", attrs), ("relu", relu.Attrs()),
                   ("requant", quant.Attrs(FixedType(6, 3, False), False, "ROUND")))
    prj = csim_exact(g, tmp_path, io_type, n=120)
    cls = "DepthwiseConv2D" if attrs.depthwise and len(k) == 2 else None
    if cls:  # hls4ml's own depthwise kernel, not the block-diagonal expansion
        assert "depthwise_conv_2d" in (prj / "firmware" / "tessera_model.cpp").read_text()
