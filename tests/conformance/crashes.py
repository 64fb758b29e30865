"""The peers' models that once crashed Tessera or built a broken project (issue 51), in our own
words, each now verified in both io types:

- a design that only relabels its input (the input's Quant, then a Transpose to the output):
  its top function took one array as input and output (``redefinition of 'x_in'``);
- a 1D convolution after a transposed convolution in io_parallel: hls4ml's im2col read the
  upsampled signal as a volume and stopped (``array split does not result in an equal
  division``);
- an average rounded by a QONNX ``Trunc`` on a power-of-two grid: the inner rounding now fuses
  with the average (padded windows whose divisor excludes the padding included).
"""

from __future__ import annotations

from pathlib import Path

from onnx import helper

from .cases import QONNX_DOMAIN, Case, _calibrated, _const, _export, _graph, _quant


# -- qonnx: tests/transformation/test_quant_constant_folding.py -----------------------------
def qonnx_transpose_to_output(path: Path) -> Path:
    """test_fold_transpose_into_quant_init (quant_init False, signed, narrow, perm (0, 2, 1),
    scale 0.01) as the peer builds it: the input's Quant, then a Transpose that is the graph's
    output -- a design that moves no code, only relabels the input's buffer."""
    nodes = [_quant("x", "xq", "s", "zero", "b8", narrow=1),
             helper.make_node("Transpose", ["xq"], ["y"], name="Transpose_0", perm=[0, 2, 1])]
    inits = [_const("s", 0.01), _const("zero", 0.0), _const("b8", 8.0)]
    return _graph(path, nodes, inits, (6, 10), (10, 6))


# -- Brevitas: src/brevitas_examples/text_to_speech/melgan/ -----------------------------------
def brevitas_melgan_upsampling(path: Path) -> Path:
    """Generator's last upsampling block and the first convolution of the ResStack after it,
    from the example's own factories (``melgan/common.py``): LeakyReLU + QuantHardTanh,
    ``make_transpconv1d(8, 4, kernel_size=4, stride=2, padding=1)`` (the example's 64 -> 32),
    LeakyReLU + QuantHardTanh, ``make_quantconv1d(4, 4, kernel_size=3, padding=1)``, then the
    ResStack's ``scale_norm`` QuantHardTanh; 8-bit, weight norm left out (the example removes
    it at inference).  A (8, 7) signal becomes (4, 14)."""
    import torch
    from brevitas_examples.text_to_speech.melgan.common import (make_hardtanh_activation, make_leakyRelu_activation,
                                                                make_quantconv1d, make_transpconv1d)

    from tessera.models.train import export_model

    block = torch.nn.Sequential(make_leakyRelu_activation(8), make_transpconv1d(8, 4, 4, 2, 1, bit_width=8),
                                make_leakyRelu_activation(8), make_quantconv1d(4, 4, 3, 1, 1, bit_width=8),
                                make_hardtanh_activation(8))
    return export_model(_calibrated(block, (8, 7)), torch.randn(1, 8, 7), path)


# -- FINN: tests/brevitas/test_brevitas_avg_pool_export.py ----------------------------------
def finn_trunc_avg_pool_fixed_point(path: Path) -> Path:
    """test_brevitas_avg_pool_export (kernel 2, stride 2, bit width 4, FLOOR) with a fixed-point
    QuantIdentity (``Int8ActPerTensorFixedPoint``) in place of the float-scaled one: the
    Trunc's scale is the input's over 4, a power of two, and it drops 6 bits."""
    import brevitas.nn as qnn
    from brevitas.quant import Int8ActPerTensorFixedPoint
    from torch import nn

    module = nn.Sequential(qnn.QuantIdentity(Int8ActPerTensorFixedPoint, return_quant_tensor=True),
                           qnn.TruncAvgPool2d(kernel_size=2, stride=2, bit_width=4, return_quant_tensor=False,
                                              float_to_int_impl_type="FLOOR"))
    return _export(module, (2, 7, 7), path)


def finn_trunc_avg_pool_padded(path: Path) -> Path:
    """test_brevitas_avg_pool_export (kernel 3, stride 2, FLOOR) with torch's padded average
    (``AvgPool2d(3, 2, padding=1, count_include_pad=False)``: the divisor counts the valid
    elements only) before the Trunc (v2) Brevitas' TruncQuant exports: a (2, 7, 7) map on a
    2**-5 grid, Trunc scale 2**-5, output scale 2**-3, 5 signed bits."""
    nodes = [_quant("x", "xq", "s", "zero", "b8"),
             helper.make_node("AveragePool", ["xq"], ["p"], name="AveragePool_0", kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1], count_include_pad=0),
             helper.make_node("Trunc", ["p", "s", "zero", "b12", "s_out", "b5"], ["y"], name="Trunc_0",
                              domain=QONNX_DOMAIN, signed=1, narrow=0, rounding_mode="FLOOR")]
    inits = [_const("s", 2.0**-5), _const("zero", 0.0), _const("b8", 8.0), _const("b12", 12.0),
             _const("s_out", 2.0**-3), _const("b5", 5.0)]
    return _graph(path, nodes, inits, (2, 7, 7), (2, 4, 4))


CRASH_CASES: tuple[Case, ...] = (
    Case("qonnx_transpose_to_output", "qonnx tests/transformation/test_quant_constant_folding.py::"
         "test_fold_transpose_into_quant_init (quant_init=False; the graph ends at the Transpose)",
         qonnx_transpose_to_output),
    Case("brevitas_melgan_upsampling", "Brevitas src/brevitas_examples/text_to_speech/melgan/generator_brevitas.py::"
         "Generator (an upsampling block: make_transpconv1d k4 s2 p1, then ResStack's first make_quantconv1d k3)",
         brevitas_melgan_upsampling, input_type="fixed<16,6>"),
    Case("finn_trunc_avg_pool_fixed_point", "FINN tests/brevitas/test_brevitas_avg_pool_export.py (kernel 2, stride 2, "
         "a fixed-point QuantIdentity)", finn_trunc_avg_pool_fixed_point),
    Case("finn_trunc_avg_pool_padded", "FINN tests/brevitas/test_brevitas_avg_pool_export.py (kernel 3, stride 2, "
         "padding 1 with count_include_pad=False)", finn_trunc_avg_pool_padded),
)

__all__ = ["CRASH_CASES", "brevitas_melgan_upsampling", "finn_trunc_avg_pool_fixed_point", "finn_trunc_avg_pool_padded",
           "qonnx_transpose_to_output"]
