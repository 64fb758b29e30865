"""A Brevitas depthwise-separable block with default quantizers, exactly (issue: real-world models).

MobileNet-style blocks (a depthwise ``QuantConv2d(groups=C)``, BatchNorm, ReLU, then a
pointwise 1x1 conv) written the way Brevitas users write them: float scales, per-channel
weights, BatchNorm with drawn statistics.  Exported with brevitas' own exporter; the compiled
graph equals the exported file on every output, and its C-simulation too.
"""

from __future__ import annotations

import pytest

from tessera.models.brevitas_default import brevitas_separable

from .test_real_constants import _exact_and_independent, csim_verified


@pytest.mark.parametrize("per_channel", [False, True])
def test_brevitas_depthwise_separable_block_is_exact(tmp_path, per_channel):
    g = _exact_and_independent(brevitas_separable(tmp_path / "m.onnx", per_channel), 500)
    convs = [n for n in g.nodes if n.op == "conv"]
    assert [n.attrs.group for n in convs] == [1, 4, 1] and convs[1].attrs.depthwise


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_depthwise_separable_csim_equals_reference_and_users_model(tmp_path, io_type):
    csim_verified(brevitas_separable(tmp_path / "m.onnx", per_channel=True), tmp_path / "prj", io_type, 300, 5)
