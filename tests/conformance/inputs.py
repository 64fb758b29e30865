"""Quantizers of the graph input, in our own words: a scale and zero point per channel ((C, 1, 1)
before a Conv2d, (C, 1) before a Conv1d) or per element of a vector (before a MatMul), as
QONNX Quant and as QuantizeLinear / DequantizeLinear (QCDQ) -- users' per-channel input
normalization quantizers -- and one input quantized twice, differently, the two branches
joined again by a Concat or an Add.  Each case cites the peer test it mirrors and is run
like those of :mod:`.cases` (``tests/conformance/test_conformance.py``, ``bench/conformance.py``).

What Tessera makes of them (docs/bit-exact.md): per channel, the design's input codes carry
each channel's scale and zero point, which the layer reading them folds into its integer
weights and offset exactly; quantized twice, the design's input is the cell of the real line
the input lies in (every quantizer's float thresholds together) and each quantizer a table of
the cell."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
from onnx import helper

from .cases import Case, _calibrated, _const, _export, _export_qcdq, _graph, _quant


def _per_channel_identity(shape: tuple[int, ...]):
    """Brevitas' QuantIdentity with an 8-bit float scale per channel (axis 1), the way brevitas'
    own per-channel activation quantizers declare it (``ScalingPerOutputType.CHANNEL`` with the
    channels permuted first for the statistics: ``Fp8e4m3ActPerChannelFloat2d``)."""
    import brevitas.nn as qnn
    from brevitas.inject.enum import ScalingPerOutputType
    from brevitas.quant import Int8ActPerTensorFloat

    class Int8ActPerChannelFloat(Int8ActPerTensorFloat):
        scaling_per_output_type = ScalingPerOutputType.CHANNEL
        scaling_stats_permute_dims = (1, 0, *range(2, len(shape) + 1))
        per_channel_broadcastable_shape = (1, shape[0], *(1,) * (len(shape) - 1))

    return qnn.QuantIdentity(Int8ActPerChannelFloat, return_quant_tensor=True)


def _export_spread_qcdq(module, shape: tuple[int, ...], path: Path) -> Path:
    """Brevitas' QCDQ export (opset 13) of ``module`` calibrated on batches whose channels differ
    in range, so that each channel's scale is its own."""
    import torch
    from brevitas.export import export_onnx_qcdq

    spread = torch.linspace(0.25, 3.0, shape[0]).reshape(1, -1, *(1,) * (len(shape) - 1))
    module = _calibrated(module, shape, draw=lambda batch: torch.randn(batch) * spread)
    export_onnx_qcdq(module, torch.randn(1, *shape), str(path), opset_version=13, dynamo=False)
    return path


# -- per channel (C, 1, 1) before a QuantConv2d ---------------------------------------------
def qonnx_per_channel_conv2d(path: Path) -> Path:
    """A Quant of the (3, 6, 6) image input with a float scale and an integer zero point per
    channel, both of shape (C, 1, 1) (uint8 codes: a per-channel input normalization folded
    into the quantizer), read by a 3x3 Conv padded by 1 (4-bit weights, a float scale per output
    channel), then an 8-bit output Quant.  The padding is real 0, so the zero points come out of
    the codes first."""
    rng = np.random.default_rng(21)
    inits = [_const("s_x", [[[0.0173]], [[0.0411]], [[0.0067]]]), _const("z_x", [[[118.0]], [[131.0]], [[97.0]]]),
             _const("b8", 8.0), _const("b4", 4.0), _const("zero", 0.0),
             _const("w", rng.integers(-7, 8, (4, 3, 3, 3)) * 2.0 ** -3),
             _const("s_w", rng.uniform(0.05, 0.2, (4, 1, 1, 1))), _const("s_y", 0.0913)]
    nodes = [_quant("x", "xq", "s_x", "z_x", "b8", signed=0), _quant("w", "wq", "s_w", "zero", "b4", narrow=1),
             helper.make_node("Conv", ["xq", "wq"], ["c"], name="Conv_0", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             _quant("c", "y", "s_y", "zero", "b8")]
    return _graph(path, nodes, inits, (3, 6, 6), (4, 6, 6))


def brevitas_qcdq_per_channel_conv2d(path: Path) -> Path:
    """Brevitas' QCDQ export of a per-channel QuantIdentity on a (3, 5, 5) input (a
    QuantizeLinear / DequantizeLinear with a scale per channel on axis 1) read by a
    QuantConv2d(3, 4, 3) of 4-bit per-tensor float weights and an 8-bit float output quantizer."""
    import brevitas.nn as qnn
    from brevitas.quant import Int8ActPerTensorFloat, Int8WeightPerTensorFloat
    from torch import nn

    module = nn.Sequential(_per_channel_identity((3, 5, 5)),
                           qnn.QuantConv2d(3, 4, 3, bias=False, weight_quant=Int8WeightPerTensorFloat,
                                           weight_bit_width=4, output_quant=Int8ActPerTensorFloat,
                                           return_quant_tensor=False))
    return _export_spread_qcdq(module, (3, 5, 5), path)


# -- per channel (C, 1) before a QuantConv1d ------------------------------------------------
def qonnx_per_channel_conv1d(path: Path) -> Path:
    """A 6-bit signed Quant of the (4, 12) sequence input with a float scale and a real zero
    point per channel, of shape (C, 1) (np.random.rand draws, as qonnx's channelwise test has
    them), read by an unpadded Conv1d of kernel 3 (5-bit weights), then an 8-bit output Quant."""
    rs = np.random.RandomState(0)
    rng = np.random.default_rng(22)
    inits = [_const("s_x", rs.rand(4, 1) * 0.05 + 0.01), _const("z_x", rs.rand(4, 1) * 4 - 2), _const("b6", 6.0),
             _const("b5", 5.0), _const("b8", 8.0), _const("zero", 0.0), _const("s_w", 2.0 ** -4),
             _const("w", rng.integers(-15, 16, (5, 4, 3)) * 2.0 ** -4), _const("s_y", 0.0437)]
    nodes = [_quant("x", "xq", "s_x", "z_x", "b6"), _quant("w", "wq", "s_w", "zero", "b5"),
             helper.make_node("Conv", ["xq", "wq"], ["c"], name="Conv_0", kernel_shape=[3]),
             _quant("c", "y", "s_y", "zero", "b8")]
    return _graph(path, nodes, inits, (4, 12), (5, 10))


def qcdq_per_channel_conv1d(path: Path) -> Path:
    """A uint8 QuantizeLinear / DequantizeLinear of the (4, 12) sequence input along axis 1 (its
    channels): a float scale and an even zero point per channel, read by a Conv1d of kernel 3
    padded by 1 on int8 weight codes with one scale per output channel and an int32 bias, then a
    uint8 output quantizer."""
    rng = np.random.default_rng(23)
    s_w = np.array([0.011, 0.0173, 0.0049], dtype=np.float32)
    s_x = np.array([0.0121, 0.0371, 0.0093, 0.0517], dtype=np.float32)
    inits = [_const("s_x", s_x), _const("z_x", [128, 126, 130, 124], np.uint8),
             _const("w", rng.integers(-127, 128, (3, 4, 3)), np.int8), _const("s_w", s_w),
             _const("z_w", np.zeros(3), np.int8), _const("b", rng.integers(-3000, 3000, 3), np.int32),
             _const("s_b", s_w * np.float32(0.01)), _const("s_y", 0.0625), _const("z_y", 128, np.uint8)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_x", "z_x"], ["xq"], name="QuantizeLinear_x", axis=1),
             helper.make_node("DequantizeLinear", ["xq", "s_x", "z_x"], ["xd"], name="DequantizeLinear_x", axis=1),
             helper.make_node("DequantizeLinear", ["w", "s_w", "z_w"], ["wd"], name="DequantizeLinear_w", axis=0),
             helper.make_node("DequantizeLinear", ["b", "s_b"], ["bd"], name="DequantizeLinear_b", axis=0),
             helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], name="Conv_0", kernel_shape=[3], pads=[1, 1]),
             helper.make_node("QuantizeLinear", ["c", "s_y", "z_y"], ["yq"], name="QuantizeLinear_y"),
             helper.make_node("DequantizeLinear", ["yq", "s_y", "z_y"], ["y"], name="DequantizeLinear_y")]
    return _graph(path, nodes, inits, (4, 12), (3, 12))


# -- per element of a vector before a QuantLinear -------------------------------------------
def qonnx_per_element_linear(path: Path) -> Path:
    """qonnx's channelwise Quant itself: 4-bit signed narrow, its scale and zero point
    np.random.rand draws (seed 0) of the input's whole shape (1, 10), on the graph input; read
    by a MatMul of 8-bit weights (a QuantLinear(10, 3)), then an 8-bit output Quant."""
    rs = np.random.RandomState(0)
    rng = np.random.default_rng(10)
    inits = [_const("s_q", rs.rand(1, 10)), _const("z_q", rs.rand(1, 10)), _const("b4", 4.0), _const("b8", 8.0),
             _const("zero", 0.0), _const("s_w", 2.0 ** -5), _const("s_y", 0.0437),
             _const("w", rng.integers(-15, 16, (10, 3)) * 2.0 ** -5)]
    nodes = [_quant("x", "xq", "s_q", "z_q", "b4", narrow=1), _quant("w", "wq", "s_w", "zero", "b8"),
             helper.make_node("MatMul", ["xq", "wq"], ["mm"], name="MatMul_0"), _quant("mm", "y", "s_y", "zero", "b8")]
    return _graph(path, nodes, inits, (10,), (3,))


def qcdq_per_element_linear(path: Path) -> Path:
    """A uint8 QuantizeLinear / DequantizeLinear of a (10,) vector input along axis 1: a float
    scale per feature and one zero point, 131 (odd: ONNX adds it after rounding half to even),
    read by a MatMul of int8 weight codes, then an int8 output quantizer."""
    rng = np.random.default_rng(24)
    inits = [_const("s_x", 0.01 + 0.05 * rng.random(10)), _const("z_x", 131, np.uint8),
             _const("w", rng.integers(-127, 128, (10, 3)), np.int8), _const("s_w", 0.0131),
             _const("s_y", 0.0625), _const("z_y", 0, np.int8)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_x", "z_x"], ["xq"], name="QuantizeLinear_x", axis=1),
             helper.make_node("DequantizeLinear", ["xq", "s_x", "z_x"], ["xd"], name="DequantizeLinear_x", axis=1),
             helper.make_node("DequantizeLinear", ["w", "s_w"], ["wd"], name="DequantizeLinear_w"),
             helper.make_node("MatMul", ["xd", "wd"], ["mm"], name="MatMul_0"),
             helper.make_node("QuantizeLinear", ["mm", "s_y", "z_y"], ["yq"], name="QuantizeLinear_y"),
             helper.make_node("DequantizeLinear", ["yq", "s_y", "z_y"], ["y"], name="DequantizeLinear_y")]
    return _graph(path, nodes, inits, (10,), (3,))


# -- one input quantized twice, differently, joined again ------------------------------------
def twice_quantized(join: str, fixed_point: bool, qcdq: bool) -> Callable[[Path], Path]:
    """hls4ml's test_merge_pytorch.py::test_merge[join] with both operands from one input: two
    QuantIdentity of the (3, 4, 4) input, 8 and 4 bits (fixed point, or float scales), joined by
    ``torch.cat`` along the channels or ``+``, then an 8-bit QuantIdentity; exported as QONNX or
    as QCDQ."""

    def build(path: Path) -> Path:
        import brevitas.nn as qnn
        import torch
        from brevitas.quant import Int8ActPerTensorFixedPoint, Int8ActPerTensorFloat

        quant = Int8ActPerTensorFixedPoint if fixed_point else Int8ActPerTensorFloat

        class Twice(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fine = qnn.QuantIdentity(quant, bit_width=8, return_quant_tensor=False)
                self.coarse = qnn.QuantIdentity(quant, bit_width=4, return_quant_tensor=False)
                self.out = qnn.QuantIdentity(quant, bit_width=8, return_quant_tensor=False)

            def forward(self, x):
                a, b = self.fine(x), self.coarse(x)
                return self.out(torch.cat([a, b], dim=1) if join == "cat" else a + b)

        export = _export_qcdq if qcdq else _export
        return export(Twice(), (3, 4, 4), path, **({"opset": 13} if qcdq else {}))

    return build


INPUT_CASES: tuple[Case, ...] = (
    Case("inputs_qonnx_per_channel_conv2d", "qonnx tests/transformation/test_extract_quant_scale_zeropt.py "
         "(channelwise: one scale and zero point per channel, (C, 1, 1), of an image input read by a padded Conv)",
         qonnx_per_channel_conv2d),
    Case("inputs_qcdq_per_channel_conv2d", "Brevitas src/brevitas/quant/float.py::Fp8e4m3ActPerChannelFloat2d "
         "(per-channel activation scaling, as an 8-bit input QuantIdentity before a QuantConv2d; QCDQ export)",
         brevitas_qcdq_per_channel_conv2d),
    Case("inputs_qonnx_per_channel_conv1d", "qonnx tests/transformation/test_extract_quant_scale_zeropt.py "
         "(channelwise: a scale and real zero point per channel, (C, 1), of a sequence input read by a Conv1d)",
         qonnx_per_channel_conv1d),
    Case("inputs_qcdq_per_channel_conv1d", "qonnx tests/transformation/test_qcdq_to_qonnx.py (a per-axis "
         "QuantizeLinear of the input's channels, even zero points per channel, before a padded Conv1d)",
         qcdq_per_channel_conv1d),
    Case("inputs_qonnx_per_element_linear", "qonnx tests/transformation/test_extract_quant_scale_zeropt.py "
         "(channelwise=True: scale and zero point of the input's whole shape (1, 10), on the graph input)",
         qonnx_per_element_linear),
    Case("inputs_qcdq_per_element_linear", "qonnx tests/transformation/test_qcdq_to_qonnx.py (a per-axis "
         "QuantizeLinear of every feature of a vector input, one odd uint8 zero point, before a MatMul)",
         qcdq_per_element_linear),
    *(Case(f"inputs_twice_{join}_{'qcdq' if qcdq else 'qonnx'}", f"hls4ml test/pytest/test_merge_pytorch.py::"
           f"test_merge[{join}] (both operands quantized from one input, 8 and 4 bits)",
           twice_quantized(join, fixed, qcdq))
      for join, fixed, qcdq in (("cat", False, False), ("add", True, False), ("cat", False, True),
                                ("add", False, True))),
)

__all__ = ["INPUT_CASES"]
