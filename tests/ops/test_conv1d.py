"""1D convolution and max pooling (ONNX Conv / MaxPool on (N, C, W) signals), exactly.

The integer reference equals onnxruntime's ``ConvInteger`` in 1D; the HLS project (hls4ml's
``Conv1D`` / ``MaxPooling1D``, the signal stored channels-last) C-simulates to the same codes;
a Brevitas ``QuantConv1d`` model with default quantizers equals its exported file.
"""

from __future__ import annotations

import pytest

from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import conv, dense, flatten, maxpool, quant, relu

from .test_ops_exact import check_exact, rand_weights


def signal_graph(make_graph, make_type, rng, group=1):
    """Conv1D (stride 2, pads (1, 0)), ReLU, requant, MaxPool1D, Flatten, Dense."""
    c_in = 3 if group == 1 else 4
    w = rand_weights(rng, (4, c_in // group, 3), 5)
    w[0] = 15
    attrs = conv.Attrs(w, FixedType(5, 4, True), rng.integers(-90, 90, size=4), FixedType(9, 8, True), (2,), (1, 0), group)
    wd = rand_weights(rng, (4 * 3, 5), 6)
    return make_graph(make_type(6, 3, True, (c_in, 13)), ("conv", attrs), ("relu", relu.Attrs()),
                      ("requant", quant.Attrs(FixedType(6, 3, False), False, "ROUND")),
                      ("maxpool", maxpool.Attrs((2,), (2,))), ("flatten", flatten.Attrs()),
                      ("dense", dense.Attrs(wd, FixedType(6, 5, True), None, None)))


@pytest.mark.parametrize("group", [1, 4])
def test_conv1d_exact(make_graph, make_type, rng, group):
    check_exact(signal_graph(make_graph, make_type, rng, group), n=400)


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_conv1d_csim(make_graph, make_type, rng, tmp_path, io_type):
    from ..csim.test_ops_csim import csim_exact

    csim_exact(signal_graph(make_graph, make_type, rng), tmp_path, io_type, n=200)


def brevitas_signal(path, seed=0):
    """QuantIdentity, QuantConv1d 4-bit with per-channel weight scales, BatchNorm1d, QuantReLU,
    MaxPool1d, QuantLinear: Brevitas' default quantizers on a (N, 2, 16) signal."""
    import torch
    from brevitas.nn import QuantConv1d, QuantIdentity, QuantLinear, QuantReLU
    from torch import nn

    from tessera.models.train import export_model

    torch.manual_seed(seed)
    model = nn.Sequential(QuantIdentity(return_quant_tensor=True),
                          QuantConv1d(2, 5, 3, padding=1, weight_bit_width=4, weight_scaling_per_output_channel=True),
                          nn.BatchNorm1d(5), QuantReLU(bit_width=4, return_quant_tensor=True), nn.MaxPool1d(2),
                          nn.Flatten(), QuantLinear(5 * 8, 3, bias=True))
    with torch.no_grad():
        model[2].running_mean.uniform_(-0.3, 0.3)
        model[2].running_var.uniform_(0.5, 2.0)
        model[2].weight.uniform_(-1.5, 1.5)
    return export_model(model, torch.randn(1, 2, 16), path)


def test_brevitas_conv1d_is_exact(tmp_path):
    from ..frontend.test_real_constants import _exact_and_independent

    g = _exact_and_independent(brevitas_signal(tmp_path / "m.onnx"), 1000)
    assert [n.op for n in g.nodes][:3] == ["conv", "rescale", "maxpool"]


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_brevitas_conv1d_csim_equals_reference_and_users_model(tmp_path, io_type):
    from ..frontend.test_real_constants import csim_verified

    csim_verified(brevitas_signal(tmp_path / "m.onnx"), tmp_path / "prj", io_type, 300, 3)
