"""Models written the way Brevitas' README writes them, with its *default* quantizers.

Float scales everywhere (``Int8ActPerTensorFloat`` on the input, ``Int8WeightPerTensorFloat``
weights, ``Uint8ActPerTensorFloat`` ReLUs), optionally per-channel weight scales, BatchNorm
with statistics drawn away from the identity: the inputs most Brevitas users have.  Each
builder exports its untrained model with brevitas' own QONNX exporter to ``path`` (no weights
enter the repository) and returns the path.  Used by the real-world tests and
``bench/realworld.py``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from brevitas.nn import QuantConv2d, QuantIdentity, QuantLinear, QuantReLU, TruncAvgPool2d
from torch import nn

from .train import export_model


def _draw_batchnorm(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(-1.5, 1.5)


def brevitas_residual(path, quantized_branch=True, seed=0):
    """A Brevitas residual CNN with default quantizers (8-bit float-scale input, 4-bit
    weights and ReLU, BatchNorm with drawn statistics), exported with brevitas' exporter:
    ``relu(q(bn(conv(h))) + h)``, the two addends with different float scales."""

    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = QuantIdentity(return_quant_tensor=True)
            self.conv1 = QuantConv2d(1, 4, 3, padding=1, weight_bit_width=4)
            self.bn1 = nn.BatchNorm2d(4)
            self.relu1 = QuantReLU(bit_width=4, return_quant_tensor=True)
            self.conv2 = QuantConv2d(4, 4, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(4)
            self.branch = QuantIdentity(return_quant_tensor=False) if quantized_branch else nn.Identity()
            self.relu2 = QuantReLU(return_quant_tensor=True)
            self.fc = QuantLinear(4 * 8 * 8, 5, bias=True)

        def forward(self, x):
            h = self.relu1(self.bn1(self.conv1(self.inp(x))))
            return self.fc(torch.flatten(self.relu2(self.branch(self.bn2(self.conv2(h))) + h), 1))

    torch.manual_seed(seed)
    model = Residual()
    _draw_batchnorm(model)
    return export_model(model, torch.randn(1, 1, 8, 8), path)


def brevitas_separable(path, per_channel=False, seed=0):
    """A MobileNet-style depthwise-separable block: a stem conv, a depthwise 3x3
    ``QuantConv2d(groups=C)`` at stride 2, BatchNorm, ReLU, a pointwise 1x1 conv (per-channel
    weight scales with ``per_channel``), then QuantLinear."""
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
    _draw_batchnorm(model)
    return export_model(model, torch.randn(1, 1, 8, 8), path)


def brevitas_pooled(path, pool: str, seed=0):
    """QuantIdentity, QuantConv2d 4-bit, BatchNorm, QuantReLU 4-bit, a pool, (a quantizer),
    QuantLinear: ``pool`` is "avg" (AvgPool2d(2) + QuantIdentity), "global"
    (AdaptiveAvgPool2d(1) + QuantIdentity) or "trunc" (brevitas TruncAvgPool2d(2))."""

    class Pooled(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = QuantIdentity(return_quant_tensor=True)
            self.conv = QuantConv2d(1, 4, 3, padding=1, weight_bit_width=4, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.relu = QuantReLU(bit_width=4, return_quant_tensor=True)
            if pool == "trunc":
                self.pool = TruncAvgPool2d(2, stride=2, bit_width=4, return_quant_tensor=True)
            else:
                self.pool = nn.Sequential(nn.AvgPool2d(2) if pool == "avg" else nn.AdaptiveAvgPool2d(1),
                                          QuantIdentity(return_quant_tensor=True))
            self.fc = QuantLinear(4 * (1 if pool == "global" else 16), 5, bias=True)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.relu(self.bn(self.conv(self.inp(x))))), 1))

    torch.manual_seed(seed)
    model = Pooled()
    _draw_batchnorm(model)
    return export_model(model, torch.randn(1, 1, 8, 8), path)


#: name -> (builder, extra keyword arguments): the models ``bench/realworld.py`` runs
def brevitas_pixel_shuffle(path, seed=0):
    """QuantIdentity, QuantConv2d (8 channels, 4-bit weights), QuantReLU 4-bit, PixelShuffle(2)
    (exported as DepthToSpace, mode CRD), QuantConv2d, QuantIdentity: a sub-pixel upsampling
    between default quantizers, their activation scales set by a few statistics steps."""
    torch.manual_seed(seed)
    model = nn.Sequential(QuantIdentity(return_quant_tensor=True), QuantConv2d(2, 8, 3, padding=1, weight_bit_width=4),
                          QuantReLU(bit_width=4), nn.PixelShuffle(2), QuantConv2d(2, 3, 3, padding=1), QuantIdentity())
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 2, 5, 4))
    return export_model(model.eval(), torch.zeros(1, 2, 5, 4), path)


def brevitas_quant_lstm(path, seed=0, calibrated=True, steps=5, inputs=4, hidden=8, **kwargs):
    """brevitas' ``QuantLSTM`` with every quantizer at its default (``batch_first``), exported
    before any step (the activation scales at their initial values: 1/128 and 1/255; float
    weight scales) or after three ``calibrated`` statistics steps (all eleven scales float).
    Graph input ``x`` ``(1, steps, inputs)``; outputs ``y`` (every hidden state), ``h``, ``c``.
    ``kwargs`` go to ``QuantLSTM`` (e.g. ``coupled_input_forget_gates=True``)."""
    import warnings

    from brevitas.export import export_qonnx
    from brevitas.nn import QuantLSTM

    torch.manual_seed(seed)
    model = QuantLSTM(inputs, hidden, batch_first=True, return_quant_tensor=False, **kwargs)
    if calibrated:
        with torch.no_grad():  # statistics-based activation scales take their values in training mode
            for _ in range(3):
                model(torch.randn(16, steps, inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_qonnx(model.eval(), torch.zeros(1, steps, inputs), str(path), dynamo=False, input_names=["x"],
                     output_names=["y", "h", "c"])
    return Path(path)


BREVITAS_DEFAULT = {
    "residual": (brevitas_residual, {}),
    "separable": (brevitas_separable, {"per_channel": True}),
    "trunc_avgpool": (brevitas_pooled, {"pool": "trunc"}),
    "global_avgpool": (brevitas_pooled, {"pool": "global"}),
    "pixel_shuffle": (brevitas_pixel_shuffle, {}),
    "quant_lstm": (brevitas_quant_lstm, {}),
}


def export_brevitas_default(name: str, path: str | Path) -> Path:
    build, kwargs = BREVITAS_DEFAULT[name]
    return build(path, **kwargs)


__all__ = ["BREVITAS_DEFAULT", "brevitas_pixel_shuffle", "brevitas_pooled", "brevitas_quant_lstm", "brevitas_residual",
           "brevitas_separable", "export_brevitas_default"]
