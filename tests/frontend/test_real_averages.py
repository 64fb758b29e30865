"""Averages on real-scaled codes and QONNX ``Trunc``, exactly (issue: real-world models).

Brevitas' default quantizers put float scales around every pool: ``AvgPool2d`` or
``AdaptiveAvgPool2d(1)`` between float-scaled quantizers, and ``TruncAvgPool2d`` (exported as
``AveragePool`` + ``Trunc``, as in bnn_pynq's ResNet-18).  The average becomes the exact window
sum with its real meaning in flight; the quantizer after it is one proven ``rescale``.
"""

from __future__ import annotations

import pytest
from onnx import helper

from tessera.models.brevitas_default import brevitas_pooled

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


@pytest.mark.parametrize("pool", ["avg", "global", "trunc"])
def test_brevitas_average_pools_with_float_scales_are_exact(tmp_path, pool):
    import onnx

    path = brevitas_pooled(tmp_path / "m.onnx", pool)
    if pool == "trunc":
        assert any(n.op_type == "Trunc" for n in onnx.load(str(path)).graph.node)
    g = _exact_and_independent(path, 1000)
    sums = [n for n in g.nodes if n.op == "conv" and n.attrs.depthwise]
    assert len(sums) == 1 and int(sums[0].attrs.weight.min()) == int(sums[0].attrs.weight.max()) == 1  # the window sum
    assert g.nodes[g.nodes.index(sums[0]) + 1].op == "rescale"  # the division by n inside the proven rescale


def _pool_then_quant(path, pool_attrs, trunc_scale=None, clip=False):
    """Quant(x, float scale) -> AveragePool [-> Clip(0, 1)] -> Quant (or Trunc with ``trunc_scale``)."""
    inits = [_f("s_x", 0.0371), _f("zero", 0.0), _f("b8", 8.0), _f("s_y", 0.0213), _f("s_t", trunc_scale or 0.0),
             _f("one", 1.0)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), helper.make_node("AveragePool", ["xq"], ["p"], name="pool", **pool_attrs)]
    if clip:
        nodes.append(helper.make_node("Clip", ["p", "zero", "one"], ["pc"], name="clip"))
    src = "pc" if clip else "p"
    if trunc_scale is None:
        nodes.append(_quant(src, "s_y", "zero", "b8", "y"))
    else:
        nodes.append(helper.make_node("Trunc", [src, "s_x", "zero", "b8", "s_t", "b8"], ["y"],
                                      domain="qonnx.custom_op.general", name="trunc", signed=1, narrow=0,
                                      rounding_mode="FLOOR"))
    return _save(path, nodes, inits, (2, 6, 6), (2, 3, 3))


def test_padded_average_with_count_include_pad_on_float_codes_is_exact(tmp_path):
    path = _pool_then_quant(tmp_path / "m.onnx", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0],
                                                   "count_include_pad": 1})
    _exact_and_independent(path, 2000)


def test_what_the_exact_average_cannot_be_is_refused_in_one_line(tmp_path):
    path = _pool_then_quant(tmp_path / "a.onnx", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]})
    refused_in_one_line(path, r"node 'pool' \(AveragePool\): count_include_pad=0 with pads")
    # an output scale off the power-of-two ladder
    path = _pool_then_quant(tmp_path / "t.onnx", {"kernel_shape": [2, 2], "strides": [2, 2]}, 0.05)
    refused_in_one_line(path, r"node 'trunc' \(Trunc\): .*is 1.347708.*, not a power of two")


@pytest.mark.parametrize("trunc_scale,clip", [(2 * 0.0371, False), (4 * 0.0371, True)])
def test_a_trunc_off_its_grid_rounds_twice_exactly(tmp_path, trunc_scale, clip):
    """An average (S / 4) that is not on the Trunc's grid, and a clip before the Trunc whose
    bound lies off it: Trunc's inner half-even rounding counts, then its own rounding of that
    integer by the power of two: two rescales, exact."""
    path = _pool_then_quant(tmp_path / "t.onnx", {"kernel_shape": [2, 2], "strides": [2, 2]}, trunc_scale, clip)
    g = _exact_and_independent(path, 2000)
    assert [n.op for n in g.nodes] == ["conv", "rescale", "rescale"]


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_float_scale_average_csim_equals_reference_and_users_model(tmp_path, io_type):
    csim_verified(brevitas_pooled(tmp_path / "m.onnx", "trunc"), tmp_path / "prj", io_type, 300, 5)


def test_ceil_mode_average_is_exact_where_every_window_fits(tmp_path):
    # 6 + 1 - 3 = 4 is a multiple of the stride: ceil and floor give the same 3x3 windows
    path = _pool_then_quant(tmp_path / "m.onnx", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0],
                                                   "count_include_pad": 1, "ceil_mode": 1})
    _exact_and_independent(path, 1000)
    # 6 - 2 = 4 is not a multiple of 3: a partial last window, whose divisor is its own
    path = _pool_then_quant(tmp_path / "p.onnx", {"kernel_shape": [2, 2], "strides": [3, 3], "ceil_mode": 1})
    line = refused_in_one_line(path, r"node 'pool' \(AveragePool\): ceil_mode=1 adds a partial last window")
    assert "spatial axis 0" in line, line


def _brevitas_mean(path, keepdim: bool, fixed_point: bool):
    """QuantIdentity -> QuantConv2d -> QuantReLU -> ``x.mean((2, 3), keepdim)`` -> QuantIdentity
    [-> flatten] -> QuantLinear, exported by brevitas (torch's exporter writes ``ReduceMean``,
    its axes an input at opset 18 and later): brevitas' default float-scale quantizers, or its
    power-of-two ``FixedPoint`` ones."""
    import brevitas.nn as qnn
    import torch
    from brevitas.quant import Int8ActPerTensorFixedPoint, Int8WeightPerTensorFixedPoint, Uint8ActPerTensorFixedPoint

    from ..conformance.cases import _export

    fixed = {"act_quant": Int8ActPerTensorFixedPoint} if fixed_point else {}
    weights = {"weight_quant": Int8WeightPerTensorFixedPoint} if fixed_point else {}

    class Mean(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = qnn.QuantIdentity(return_quant_tensor=True, **fixed)
            self.conv = qnn.QuantConv2d(3, 8, 3, bias=False, **weights)
            self.relu = qnn.QuantReLU(**({"act_quant": Uint8ActPerTensorFixedPoint} if fixed_point else {}))
            self.q2 = qnn.QuantIdentity(**fixed)
            self.fc = qnn.QuantLinear(8, 4, bias=False, **weights)

        def forward(self, x):
            y = self.q2(self.relu(self.conv(self.q(x))).mean((2, 3), keepdim=keepdim))
            return self.fc(y.flatten(1) if keepdim else y)

    return _export(Mean(), (3, 6, 6), path)


@pytest.mark.parametrize("keepdim", [True, False])
@pytest.mark.parametrize("fixed_point", [True, False])
def test_reduce_mean_over_the_spatial_axes_is_exact(tmp_path, keepdim, fixed_point):
    import onnx

    path = _brevitas_mean(tmp_path / "m.onnx", keepdim, fixed_point)
    assert any(n.op_type == "ReduceMean" for n in onnx.load(str(path)).graph.node)
    g = _exact_and_independent(path, 1000)
    assert g.values[g.output].shape == (4,)
    fused = [n for n in g.nodes if n.op == "globalavgpool"]
    assert len(fused) == (1 if keepdim and fixed_point else 0)  # else the window sum and a proven rescale


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_reduce_mean_without_kept_axes_csim_equals_reference_and_users_model(tmp_path, io_type):
    csim_verified(_brevitas_mean(tmp_path / "m.onnx", False, False), tmp_path / "prj", io_type, 200, 4)


def test_a_mean_over_other_axes_is_refused_in_one_line(tmp_path):
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"),
             helper.make_node("ReduceMean", ["xq"], ["m"], name="mean", axes=[1, 2, 3], keepdims=1),
             _quant("m", "s_x", "zero", "b8", "y")]
    path = _save(tmp_path / "m.onnx", nodes, [_f("s_x", 0.0371), _f("zero", 0.0), _f("b8", 8.0)], [3, 4, 4], [1, 1, 1])
    refused_in_one_line(path, r"node 'mean' \(ReduceMean\): axes=\[1, 2, 3\] is not supported: only the mean over every "
                              r"spatial axis \(\[2, 3\]\)")
