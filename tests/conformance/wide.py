"""Nonlinearities with 16-bit outputs on float scales, in our own words: the activations of
hls4ml's PyTorch tests (a layer, then ``PReLU`` / ``LeakyReLU`` / ``Sigmoid``) and its
upsampling test with the bilinear mode, each between Brevitas quantizers and ended by a
``QuantIdentity(bit_width=16)``.  The requantizations have 65,535 levels: the PReLU (one slope
per channel), the LeakyReLU and the linear Resize become the piecewise op's proven segments
(compiler/ops/piecewise.py), the Sigmoid a table of its 8-bit input's 256 codes.  Run like
those of :mod:`.cases` (``tests/conformance/``, ``bench/conformance.py``), in both io types."""

from __future__ import annotations

from pathlib import Path

from .cases import Case, _export

OUT_BITS = 16


def _prelu(path: Path) -> Path:
    """QuantReLU(8 bits) -> QuantConv2d(2, 3, 3, padding=1, 8-bit weights) -> PReLU(3), one
    slope per channel (0.25 as hls4ml's ``nn.PReLU(init=0.25)``, a negative one, a small one)
    -> QuantIdentity(bit_width=16)."""
    import brevitas.nn as qnn
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.relu = qnn.QuantReLU(bit_width=8, return_quant_tensor=True)
            self.conv = qnn.QuantConv2d(2, 3, 3, padding=1, weight_bit_width=8, bias=True)
            self.prelu = torch.nn.PReLU(3, init=0.25)
            with torch.no_grad():
                self.prelu.weight.copy_(torch.tensor([0.25, -0.3, 0.05]))
            self.out = qnn.QuantIdentity(bit_width=OUT_BITS)

        def forward(self, x):
            return self.out(self.prelu(self.conv(self.relu(x))))

    return _export(Model(), (2, 4, 4), path)


def _leakyrelu(path: Path) -> Path:
    """QuantIdentity(8 bits) -> QuantLinear(4, 3, 8-bit weights) -> LeakyReLU(0.1) ->
    QuantIdentity(bit_width=16) (hls4ml's test has ``negative_slope=1.0``, the identity)."""
    import brevitas.nn as qnn
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = qnn.QuantIdentity(bit_width=8, return_quant_tensor=True)
            self.linear = qnn.QuantLinear(4, 3, bias=True, weight_bit_width=8)
            self.act = torch.nn.LeakyReLU(negative_slope=0.1)
            self.out = qnn.QuantIdentity(bit_width=OUT_BITS)

        def forward(self, x):
            return self.out(self.act(self.linear(self.inp(x))))

    return _export(Model(), (4,), path)


def _bilinear(path: Path) -> Path:
    """QuantIdentity(8 bits) -> Upsample(scale_factor=2, mode='bilinear', align_corners=False) of
    a (2, 3, 4) map -> QuantIdentity(bit_width=16): the interpolation weights 1/4 and 3/4 per
    axis, exact sums, one requantization of 65,535 levels."""
    import brevitas.nn as qnn
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = qnn.QuantIdentity(bit_width=8)
            self.up = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.out = qnn.QuantIdentity(bit_width=OUT_BITS)

        def forward(self, x):
            return self.out(self.up(self.inp(x)))

    return _export(Model(), (2, 3, 4), path)


def _sigmoid(path: Path) -> Path:
    """QuantIdentity(8 bits) -> Sigmoid -> QuantIdentity(bit_width=16): a table of the input's
    256 codes (its size set by the input, whatever the output's width)."""
    import brevitas.nn as qnn
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = qnn.QuantIdentity(bit_width=8)
            self.out = qnn.QuantIdentity(bit_width=OUT_BITS)

        def forward(self, x):
            return self.out(torch.sigmoid(self.inp(x)))

    return _export(Model(), (6,), path)


WIDE_CASES: tuple[Case, ...] = (
    Case("hls4ml_prelu_per_channel_16bit", "hls4ml test/pytest/test_pytorch_api.py::test_activations[PReLU] "
         "(a layer, then nn.PReLU; here a QuantConv2d, 3 slopes, a 16-bit QuantIdentity)", _prelu),
    Case("hls4ml_leakyrelu_16bit", "hls4ml test/pytest/test_pytorch_api.py::test_activations[LeakyReLU] "
         "(a layer, then nn.LeakyReLU; here a QuantLinear, slope 0.1, a 16-bit QuantIdentity)", _leakyrelu),
    Case("hls4ml_bilinear_16bit", "hls4ml test/pytest/test_upsampling_pytorch.py::test_pytorch_upsampling2d "
         "(4 channels; here nn.Upsample(2, mode='bilinear', align_corners=False) between Brevitas quantizers, "
         "16-bit output)", _bilinear),
    Case("hls4ml_sigmoid_16bit", "hls4ml test/pytest/test_pytorch_api.py::test_activations[Sigmoid] "
         "(between Brevitas quantizers, 8-bit input, 16-bit output)", _sigmoid),
)

__all__ = ["WIDE_CASES"]
