"""A Brevitas depthwise-separable block with default quantizers, exactly (issue: real-world models).

MobileNet-style blocks (a depthwise ``QuantConv2d(groups=C)``, BatchNorm, ReLU, then a
pointwise 1x1 conv) written the way Brevitas users write them: float scales, per-channel
weights, BatchNorm with drawn statistics.  Exported with brevitas' own exporter; the compiled
graph equals the exported file on every output, and its C-simulation too.
"""

from __future__ import annotations

import pytest

from .test_real_constants import _exact_and_independent, csim_verified


def brevitas_separable(path, per_channel=False, seed=0):
    import torch
    from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantReLU
    from torch import nn

    from tessera.models.train import export_model

    kw = {"weight_scaling_per_output_channel": True} if per_channel else {}

    class Separable(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = QuantIdentity(return_quant_tensor=True)
            self.stem = QuantConv2d(1, 4, 3, padding=1, weight_bit_width=4, bias=False)
            self.bn0 = nn.BatchNorm2d(4)
            self.relu0 = QuantReLU(bit_width=4, return_quant_tensor=True)
            self.dw = QuantConv2d(4, 4, 3, padding=1, stride=2, groups=4, weight_bit_width=4, bias=False, **kw)
            self.bn1 = nn.BatchNorm2d(4)
            self.relu1 = QuantReLU(bit_width=4, return_quant_tensor=True)
            self.pw = QuantConv2d(4, 6, 1, weight_bit_width=4, bias=False, **kw)
            self.bn2 = nn.BatchNorm2d(6)
            self.relu2 = QuantReLU(bit_width=4, return_quant_tensor=True)
            self.fc = QuantLinear(6 * 4 * 4, 5, bias=True)

        def forward(self, x):
            h = self.relu0(self.bn0(self.stem(self.inp(x))))
            h = self.relu2(self.bn2(self.pw(self.relu1(self.bn1(self.dw(h))))))
            return self.fc(torch.flatten(h, 1))

    torch.manual_seed(seed)
    model = Separable()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(-1.5, 1.5)
    return export_model(model, torch.randn(1, 1, 8, 8), path)


@pytest.mark.parametrize("per_channel", [False, True])
def test_brevitas_depthwise_separable_block_is_exact(tmp_path, per_channel):
    g = _exact_and_independent(brevitas_separable(tmp_path / "m.onnx", per_channel), 500)
    convs = [n for n in g.nodes if n.op == "conv"]
    assert [n.attrs.group for n in convs] == [1, 4, 1] and convs[1].attrs.depthwise


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_depthwise_separable_csim_equals_reference_and_users_model(tmp_path, io_type):
    csim_verified(brevitas_separable(tmp_path / "m.onnx", per_channel=True), tmp_path / "prj", io_type, 300, 5)
