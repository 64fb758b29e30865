"""Windows and padding (issue 51), in our own words: dilated max and average pools written with
``onnx.helper`` at the opset that has them (MaxPool ``dilations`` since opset 10, AveragePool's
since 19), Quant nodes around; and the reflect / edge padding PyTorch users write
(``padding_mode='reflect'`` on a Brevitas QuantConv2d / QuantConv3d, ``nn.ReplicationPad1d``
before a max pool), exported with brevitas' QONNX exporter as an ONNX ``Pad`` of mode
``reflect`` / ``edge``.  Each case cites the peer test it mirrors and runs like those of
:mod:`.cases`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from onnx import helper

from .cases import Case, _const, _export, _graph, _quant


def _pool_graph(path: Path, pool, in_shape, out_shape, opset: int, out_scale: float = 2.0**-4,
                out_bits: float = 6.0) -> Path:
    """Quant(x) (8-bit signed, 2**-5) -> ``pool`` (reading ``xq``, writing ``p``) -> Quant -> y."""
    nodes = [_quant("x", "xq", "s_x", "zero", "bits_x"), pool, _quant("p", "y", "s_y", "zero", "bits_y")]
    inits = [_const("s_x", 2.0**-5), _const("zero", 0.0), _const("bits_x", 8.0), _const("s_y", out_scale),
             _const("bits_y", out_bits)]
    return _graph(path, nodes, inits, in_shape, out_shape, opset=opset)


# -- FINN: tests/fpgadataflow/test_fpgadataflow_convinputgenerator_rtl.py (dilation) ----------
def dilated_maxpool1d(path: Path) -> Path:
    """A dilated sliding window (FINN's ConvolutionInputGenerator with Dilation 2) max-pooled: an
    ONNX MaxPool of kernel 3, dilation 2, stride 2, pads (2, 1) on a (3, 17) signal, opset 13."""
    pool = helper.make_node("MaxPool", ["xq"], ["p"], name="MaxPool_0", kernel_shape=[3], strides=[2], pads=[2, 1],
                            dilations=[2])
    return _pool_graph(path, pool, (3, 17), (3, 8), opset=13)


def dilated_maxpool2d(path: Path) -> Path:
    """A MaxPool of kernel (2, 3), dilations (3, 2), strides (1, 2), pads (1, 0, 1, 2) with
    ``ceil_mode=1`` (the last column's window runs into the end padding) on a (2, 9, 10) map."""
    pool = helper.make_node("MaxPool", ["xq"], ["p"], name="MaxPool_0", kernel_shape=[2, 3], strides=[1, 2],
                            pads=[1, 0, 1, 2], dilations=[3, 2], ceil_mode=1)
    return _pool_graph(path, pool, (2, 9, 10), (2, 8, 5), opset=13)


def dilated_averagepool2d(out_scale: float, count_include_pad: int) -> Callable[[Path], Path]:
    """An AveragePool of kernel (3, 2), dilations (2, 3), strides (2, 1), pads (2, 1, 1, 1) on a
    (3, 9, 8) map (opset 19), then a Quant: on a power-of-two grid (the fused exact division), or
    of a float scale (the dilated window sum, then one proven requantization)."""

    def build(path: Path) -> Path:
        pool = helper.make_node("AveragePool", ["xq"], ["p"], name="AveragePool_0", kernel_shape=[3, 2], strides=[2, 1],
                                pads=[2, 1, 1, 1], dilations=[2, 3], count_include_pad=count_include_pad)
        return _pool_graph(path, pool, (3, 9, 8), (3, 4, 7), opset=19, out_scale=out_scale, out_bits=8.0)

    return build


# -- Brevitas: tests/brevitas/nn/test_conv2d.py, test_conv3d.py (padding_mode) ---------------------
def brevitas_reflect_conv(three_d: bool) -> Callable[[Path], Path]:
    """TestQuantConv2d's / TestQuantConv3d's layer (5-bit weights, no bias) with ``padding=1,
    padding_mode='reflect'`` (torch reflects the input, then convolves unpadded), between
    fixed-point activation quantizers: 3 -> 4 channels on a (3, 6, 7) map, or 2 -> 3 on a
    (2, 4, 5, 6) volume."""

    def build(path: Path) -> Path:
        import brevitas.nn as qnn
        from brevitas.quant import Int8ActPerTensorFixedPoint
        from torch import nn

        conv, channels, shape = ((qnn.QuantConv3d, (2, 3), (2, 4, 5, 6)) if three_d else
                                 (qnn.QuantConv2d, (3, 4), (3, 6, 7)))

        class ReflectConv(nn.Module):
            def __init__(self):
                super().__init__()
                self.q = qnn.QuantIdentity(Int8ActPerTensorFixedPoint, bit_width=6, return_quant_tensor=True)
                self.conv = conv(*channels, 3, padding=1, padding_mode="reflect", bias=False, weight_bit_width=5,
                                 output_quant=Int8ActPerTensorFixedPoint)

            def forward(self, x):
                return self.conv(self.q(x))

        return _export(ReflectConv(), shape, path)

    return build


# -- hls4ml: test/pytest/test_pytorch_api.py::test_pooling (MaxPool1d) ----------------------------
def hls4ml_edge_pad_maxpool1d(path: Path) -> Path:
    """test_pooling's ``MaxPool1d`` (kernel 3, stride 2) of a (3, 11) signal, after
    ``nn.ReplicationPad1d((2, 1))`` (ONNX Pad mode=edge), between fixed-point QuantIdentity
    layers."""
    import brevitas.nn as qnn
    from brevitas.quant import Int8ActPerTensorFixedPoint
    from torch import nn

    class EdgePool(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = qnn.QuantIdentity(Int8ActPerTensorFixedPoint, bit_width=6)
            self.pad = nn.ReplicationPad1d((2, 1))
            self.pool = nn.MaxPool1d(3, stride=2)
            self.out = qnn.QuantIdentity(Int8ActPerTensorFixedPoint, bit_width=6)

        def forward(self, x):
            return self.out(self.pool(self.pad(self.q(x))))

    return _export(EdgePool(), (3, 11), path)


WINDOW_CASES: tuple[Case, ...] = (
    Case("dilated_maxpool1d", "FINN tests/fpgadataflow/test_fpgadataflow_convinputgenerator_rtl.py (dilation 2: a "
         "dilated sliding window, max-pooled by an ONNX MaxPool, kernel 3, stride 2)", dilated_maxpool1d),
    Case("dilated_maxpool2d", "FINN tests/fpgadataflow/test_fpgadataflow_convinputgenerator_rtl.py (dilation (3, 2), "
         "max-pooled by an ONNX MaxPool with pads and ceil_mode=1)", dilated_maxpool2d),
    Case("dilated_averagepool2d", "FINN tests/fpgadataflow/test_fpgadataflow_convinputgenerator_rtl.py (dilation "
         "(2, 3), averaged by an ONNX AveragePool of opset 19, count_include_pad=0, power-of-two Quant)",
         dilated_averagepool2d(2.0**-5, 0)),
    Case("dilated_averagepool2d_float_scale", "FINN tests/fpgadataflow/test_fpgadataflow_convinputgenerator_rtl.py "
         "(dilation (2, 3), averaged by an ONNX AveragePool of opset 19, count_include_pad=1, float-scaled Quant)",
         dilated_averagepool2d(0.0213, 1)),
    Case("brevitas_reflect_pad_conv2d", "Brevitas tests/brevitas/nn/test_conv2d.py::TestQuantConv2d (5-bit weights, "
         "no bias) with padding=1, padding_mode='reflect'", brevitas_reflect_conv(False)),
    Case("hls4ml_edge_pad_maxpool1d", "hls4ml test/pytest/test_pytorch_api.py::test_pooling (MaxPool1d) after "
         "nn.ReplicationPad1d((2, 1))", hls4ml_edge_pad_maxpool1d),
    Case("brevitas_reflect_pad_conv3d", "Brevitas tests/brevitas/nn/test_conv3d.py::TestQuantConv3d (5-bit weights, "
         "no bias) with padding=1, padding_mode='reflect'", brevitas_reflect_conv(True)),
)

__all__ = ["WINDOW_CASES", "brevitas_reflect_conv", "dilated_averagepool2d", "dilated_maxpool1d", "dilated_maxpool2d",
           "hls4ml_edge_pad_maxpool1d"]
