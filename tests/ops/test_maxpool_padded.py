"""Padded and ceil-mode MaxPool, exactly (issue: real-world models).

ONNX pads a max pool with -inf: padded positions take no part.  The integer reference equals
onnxruntime's MaxPool with the same pads; Tessera's pooling kernel (``hls_templates/pool3d``,
1D / 2D as unit depth) skips padded positions in both io types; ``ceil_mode`` (the ResNet stem,
``nn.MaxPool2d(..., ceil_mode=True)``) is extra end padding, and a model using it equals its
exported file.
"""

from __future__ import annotations

import pytest

from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.ir.types import FixedType, TensorType
from tessera.compiler.ops import maxpool, quant

from .test_ops_exact import check_exact

CASES = [  # shape, kernel, strides, pads
    ((3, 9, 8), (3, 3), (2, 2), (1, 1, 1, 1)),  # the ResNet stem's 3x3 / 2, pad 1
    ((2, 7, 6), (2, 3), (2, 1), (1, 0, 0, 2)),
    ((2, 11), (3,), (2,), (1, 1)),
    ((2, 5, 4, 6), (2, 2, 3), (2, 2, 2), (1, 0, 1, 0, 1, 1)),
]


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_padded_maxpool_exact(make_graph, make_type, case, signed):
    shape, k, s, p = CASES[case]
    check_exact(make_graph(make_type(6, 3, signed, shape), ("maxpool", maxpool.Attrs(k, s, p))), n=300)


def test_a_window_entirely_in_the_padding_is_refused():
    x = TensorType((1, 5, 5), FixedType(4, 0, True), -8, 7)
    with pytest.raises(UnsupportedModelError, match="lies entirely in the padding"):
        maxpool.OP.infer(maxpool.Attrs((2, 2), (2, 2), (0, 0, 3, 0)), [x], "n")


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_padded_maxpool_csim(make_graph, make_type, tmp_path, io_type, case):
    from ..csim.test_ops_csim import csim_exact

    shape, k, s, p = CASES[case]
    g = make_graph(make_type(6, 3, True, shape), ("maxpool", maxpool.Attrs(k, s, p)),
                   ("requant", quant.Attrs(FixedType(5, 2, True), False, "ROUND")))
    csim_exact(g, tmp_path, io_type, n=150)


def brevitas_stem(path, seed=0):
    """Brevitas defaults: QuantIdentity, QuantConv2d, BatchNorm, QuantReLU, then the ResNet
    stem's ``MaxPool2d(3, 2, padding=1)`` and a ``MaxPool2d(2, ceil_mode=True)`` on an odd size."""
    import torch
    from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantReLU
    from torch import nn

    from tessera.models.train import export_model

    torch.manual_seed(seed)
    model = nn.Sequential(QuantIdentity(return_quant_tensor=True), QuantConv2d(1, 3, 3, padding=1, weight_bit_width=4),
                          nn.BatchNorm2d(3), QuantReLU(bit_width=4, return_quant_tensor=True),
                          nn.MaxPool2d(3, 2, padding=1), nn.MaxPool2d(2, ceil_mode=True), nn.Flatten(),
                          QuantLinear(3 * 3 * 3, 4, bias=True))
    with torch.no_grad():
        model[2].running_var.uniform_(0.5, 2.0)
        model[2].weight.uniform_(-1.5, 1.5)
    return export_model(model, torch.randn(1, 1, 10, 10), path)


def test_brevitas_padded_and_ceil_mode_pools_are_exact(tmp_path):
    from ..frontend.test_real_constants import _exact_and_independent

    g = _exact_and_independent(brevitas_stem(tmp_path / "m.onnx"), 1000)
    pools = [n.attrs for n in g.nodes if n.op == "maxpool"]
    assert [p.pads for p in pools] == [(1, 1, 1, 1), (0, 0, 1, 1)]  # 10 -> 5 -> ceil(4 / 2) + 1 = 3


@pytest.mark.csim
def test_brevitas_padded_pools_csim_equals_reference_and_users_model(tmp_path):
    from ..frontend.test_real_constants import csim_verified

    csim_verified(brevitas_stem(tmp_path / "m.onnx"), tmp_path / "prj", "io_stream", 300, 4)
