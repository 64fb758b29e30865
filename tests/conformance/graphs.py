"""The peers' graphs of unusual shape, in our own words: a model that is one quantizer, an
upsampling before a convolution, several inputs or outputs.  Each case cites the peer test it
mirrors and is run like those of :mod:`.cases` (``tests/conformance/test_conformance.py``,
``bench/conformance.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
from onnx import helper

from .cases import Case, _calibrated, _const, _export, _export_ports, _graph, _quant


# -- FINN: tests/brevitas/test_brevitas_*_quanthardtanh_export.py -----------------------------
def finn_quanthardtanh(bits: int, narrow: bool, max_val: float, min_val: float = -1.0,
                       learned: float | None = None) -> Callable[[Path], Path]:
    """test_brevitas_non_scaled_quanthardtanh_export.py (``learned`` None: a constant scale) and
    test_brevitas_scaled_qhardtanh_export.py (a learned scale set to ``learned``): one
    QuantHardTanh of ``bits`` (1: binary) on a (1, 10) input, exported alone -- the graph is one
    Quant (BipolarQuant) from the input to the output."""

    def build(path: Path) -> Path:
        import torch
        from brevitas.core.quant import QuantType
        from brevitas.core.restrict_val import RestrictValueType
        from brevitas.core.scaling import ScalingImplType
        from brevitas.nn import QuantHardTanh

        from tessera.models.train import export_model

        act = QuantHardTanh(bit_width=bits, quant_type=QuantType.BINARY if bits == 1 else QuantType.INT,
                            max_val=max_val, min_val=min_val, restrict_scaling_type=RestrictValueType.LOG_FP,
                            scaling_impl_type=ScalingImplType.CONST if learned is None else ScalingImplType.PARAMETER,
                            narrow_range=narrow)
        if learned is not None:
            key = next(k for k in act.state_dict() if k.endswith("scaling_impl.value"))
            act.load_state_dict({key: torch.tensor(learned)})
        return export_model(act.eval(), torch.randn(1, 10), path)

    return build


# -- qonnx: tests/transformation/test_nn_resize_to_deconv.py --------------------------------
def qonnx_resize_conv(path: Path) -> Path:
    """quant_nn_resize_model(r=2, ifm=4, ich=3, och=10, ksize=3, use_bias=True, channelwise=True):
    a nearest Resize x2 of a (3, 4, 4) map, then a 3x3 pad-1 Conv of 4-bit narrow weights with
    random scales per output channel and a 16-bit Quant bias of a random scale.  The peer feeds
    floats in [0, 1): here an 8-bit unsigned Quant of the input on a 2**-8 grid."""
    rng = np.random.default_rng(0)
    ich, och, ksize, r, ifm = 3, 10, 3, 2, 4
    nodes = [_quant("x", "xq", "s_x", "zero", "bits_x", signed=0),
             helper.make_node("Resize", ["xq", "roi", "scales"], ["hid0"], name="Resize_0", mode="nearest"),
             _quant("conv_param", "param0", "scale_param", "zero_w", "bitwidth_param", narrow=1),
             _quant("bias_param", "param1", "scale_bias", "zero", "bitwidth_bias", narrow=1),
             helper.make_node("Conv", ["hid0", "param0", "param1"], ["y"], name="Conv_0", kernel_shape=[ksize, ksize],
                              strides=[1, 1], pads=[1, 1, 1, 1], dilations=[1, 1], group=1)]
    inits = [_const("s_x", 2.0**-8), _const("zero", 0.0), _const("bits_x", 8.0), _const("roi", np.zeros(0)),
             _const("scales", [1.0, 1.0, r, r]), _const("conv_param", rng.standard_normal((och, ich, ksize, ksize))),
             _const("scale_param", rng.random((och, 1, 1, 1))), _const("zero_w", np.zeros((och, 1, 1, 1))),
             _const("bitwidth_param", 4.0), _const("bias_param", rng.standard_normal(och)),
             _const("scale_bias", rng.random(1)), _const("bitwidth_bias", 16.0)]
    return _graph(path, nodes, inits, (ich, ifm, ifm), (och, ifm * r, ifm * r))


# -- FINN: tests/brevitas/test_brevitas_deconv.py -------------------------------------------
def finn_quant_transpose_conv(path: Path) -> Path:
    """test_brevitas_QTransposeConv: QuantConvTranspose2d of 3 -> 5 channels, kernel 4, stride 2,
    padding 1, no bias, brevitas' default weight quantizer (8-bit, one float scale), on a
    (3, 4, 4) float input in [-1, 1) (declared ``fixed<8,1>`` here); no output quantizer, so the
    output is the accumulator times the weight and input scales, a real value in flight."""
    import brevitas.nn as qnn

    deconv = qnn.QuantConvTranspose2d(in_channels=3, out_channels=5, kernel_size=4, stride=2, padding=1, bias=False)
    return _export(deconv, (3, 4, 4), path)


# -- several inputs and outputs ---------------------------------------------------------------
def hls4ml_quanteltwiseadd(path: Path) -> Path:
    """test_brevitas_parsing.py::test_brevitas_quanteltwiseadd: ``QuantEltwiseAdd`` with
    ``Int8ActPerTensorFixedPoint`` input and output quantizers on two (4, 4) inputs."""
    import torch
    import brevitas.nn as qnn
    from brevitas.quant import Int8ActPerTensorFixedPoint

    class EltwiseAdd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.add = qnn.QuantEltwiseAdd(input_quant=Int8ActPerTensorFixedPoint,
                                           output_quant=Int8ActPerTensorFixedPoint)

        def forward(self, x, y):
            return self.add(x, y)

    return _export_ports(EltwiseAdd(), [(4, 4), (4, 4)], path)


def hls4ml_merge(op: str) -> Callable[[Path], Path]:
    """test_merge_pytorch.py::test_merge[op]: ``torch.<op>(x, y)`` of two (3, 10, 10) inputs
    (here (3, 5, 5)), each quantized by its own fixed-point QuantIdentity (4 and 6 bits), the
    result by a third (``cat``: along the channels)."""

    def build(path: Path) -> Path:
        import torch
        import brevitas.nn as qnn
        from brevitas.quant import Int8ActPerTensorFixedPoint

        class Merge(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.qx = qnn.QuantIdentity(Int8ActPerTensorFixedPoint, bit_width=4, return_quant_tensor=False)
                self.qy = qnn.QuantIdentity(Int8ActPerTensorFixedPoint, bit_width=6, return_quant_tensor=False)
                self.out = qnn.QuantIdentity(Int8ActPerTensorFixedPoint, bit_width=8, return_quant_tensor=False)

            def forward(self, x, y):
                a, b = self.qx(x), self.qy(y)
                return self.out(torch.cat([a, b], dim=1) if op == "cat" else getattr(torch, op)(a, b))

        return _export_ports(Merge(), [(3, 5, 5), (3, 5, 5)], path)

    return build


def hls4ml_multiout(path: Path) -> Path:
    """test_multiout_network.py::test_multi_clone: one (10,) input read by two Dense(10) heads,
    the model's two outputs; here Brevitas QuantLinear heads after a QuantIdentity, each with
    its own output quantizer (the second a float scale)."""
    import torch
    import brevitas.nn as qnn
    from brevitas.quant import Int8ActPerTensorFixedPoint, Int8ActPerTensorFloat

    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = qnn.QuantIdentity(Int8ActPerTensorFixedPoint, bit_width=6, return_quant_tensor=True)
            self.a = qnn.QuantLinear(10, 10, bias=True, output_quant=Int8ActPerTensorFixedPoint)
            self.b = qnn.QuantLinear(10, 10, bias=False, output_quant=Int8ActPerTensorFloat)

        def forward(self, x):
            x = self.q(x)
            return self.a(x), self.b(x)

    return _export_ports(TwoHeads(), [(10,)], path, outputs=2)


# -- hls4ml: test/pytest/test_brevitas_parsing.py (upsampling) -----------------------------
def hls4ml_upsampling(two_d: bool, linear: bool = False) -> Callable[[Path], Path]:
    """test_pytorch_upsampling1d / 2d: a fixed-point QuantIdentity, then ``QuantUpsample(2)`` of a
    (4, 8) signal, or ``QuantUpsamplingNearest2d(scale_factor=(1, 2.4))`` of a (4, 6, 8) map
    (fractional: 8 columns become 19), then a ReLU.  ``linear``: the same models with the
    interpolating layers of the family hls4ml's Brevitas parser lists, ``QuantUpsample(2,
    mode='linear')`` and ``QuantUpsamplingBilinear2d(scale_factor=2)`` (align_corners), which
    round their interpolation onto the input's grid."""

    def build(path: Path) -> Path:
        import torch
        import brevitas.nn as qnn
        from brevitas.quant import Int8ActPerTensorFixedPoint

        class Upsample(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.identity = qnn.QuantIdentity(act_quant=Int8ActPerTensorFixedPoint, return_quant_tensor=True)
                if linear:
                    self.upsample = (qnn.QuantUpsamplingBilinear2d(scale_factor=2) if two_d else
                                     qnn.QuantUpsample(scale_factor=2, mode="linear"))
                else:
                    self.upsample = (qnn.QuantUpsamplingNearest2d(scale_factor=(1, 2.4)) if two_d else
                                     qnn.QuantUpsample(scale_factor=2))
                self.relu = torch.nn.ReLU()

            def forward(self, x):
                return self.relu(self.upsample(self.identity(x)))

        return _export(Upsample(), (4, 6, 8) if two_d else (4, 8), path)

    return build


# -- brevitas_examples: text_to_speech/melgan/generator_brevitas.py ---------------------------
def brevitas_melgan_output(path: Path) -> Path:
    """Generator's last block, built from the example's own layer factories (``melgan/common.py``):
    the LeakyReLU + 8-bit QuantHardTanh activation, a weight-normalised ``make_quantconv1d(8, 1,
    kernel_size=7, padding=3)`` (the example has 32 input channels), then ``make_tanh_activation``
    of the 16-bit last layer: a Tanh of the convolution's accumulator, scaled by real constants,
    rounded by a 16-bit Quant; weight norm removed as ``Generator.eval(inference=True)`` does."""
    import torch
    from brevitas_examples.text_to_speech.melgan.common import (make_leakyRelu_activation, make_quantconv1d,
                                                                make_tanh_activation)

    class OutputBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = make_leakyRelu_activation(8)
            self.conv = torch.nn.utils.weight_norm(make_quantconv1d(8, 1, kernel_size=7, stride=1, padding=3,
                                                                    bit_width=8))
            self.tanh = make_tanh_activation(16)

        def forward(self, x):
            return self.tanh(self.conv(self.act(x)))

    from tessera.models.train import export_model

    block = _calibrated(OutputBlock(), (8, 16))
    torch.nn.utils.remove_weight_norm(block.conv)
    return export_model(block, torch.randn(1, 8, 16), path)


GRAPH_CASES: tuple[Case, ...] = (
    Case("finn_quanthardtanh_binary", "FINN tests/brevitas/test_brevitas_non_scaled_quanthardtanh_export.py "
         "(abits=1, max_val=1.0)", finn_quanthardtanh(1, False, 1.0)),
    Case("finn_quanthardtanh_4b_narrow", "FINN tests/brevitas/test_brevitas_non_scaled_quanthardtanh_export.py "
         "(abits=4, narrow_range=True, max_val=1 - 2**-7)", finn_quanthardtanh(4, True, 1 - 2**-7)),
    Case("finn_qhardtanh_scaled", "FINN tests/brevitas/test_brevitas_scaled_qhardtanh_export.py (abits=4, "
         "min_val=-2, max_val=2, PARAMETER scaling, learned value 0.49)",
         finn_quanthardtanh(4, False, 2.0, -2.0, learned=0.49)),
    Case("finn_quant_transpose_conv", "FINN tests/brevitas/test_brevitas_deconv.py::test_brevitas_QTransposeConv "
         "(ifm_ch=3, ofm_ch=5, mh=mw=4, kernel 4, stride 2, padding 1, no bias)", finn_quant_transpose_conv,
         input_type="fixed<8,1>"),
    Case("qonnx_resize_conv", "qonnx tests/transformation/test_nn_resize_to_deconv.py::"
         "test_quant_resize_conv_to_deconv_layer (upscale 2, kernel 3, bias, channelwise)", qonnx_resize_conv),
    Case("hls4ml_quanteltwiseadd", "hls4ml test/pytest/test_brevitas_parsing.py::test_brevitas_quanteltwiseadd "
         "(two (4, 4) inputs)", hls4ml_quanteltwiseadd),
    *(Case(f"hls4ml_merge_{op}", f"hls4ml test/pytest/test_merge_pytorch.py::test_merge[{op}] (two inputs)",
           hls4ml_merge(op)) for op in ("cat", "add", "sub", "minimum", "maximum")),
    *(Case(f"hls4ml_quant_upsampling{d}d", f"hls4ml test/pytest/test_brevitas_parsing.py::test_pytorch_upsampling{d}d"
           + (" (scale_factor=(1, 2.4))" if d == 2 else " (scale_factor=2)"), hls4ml_upsampling(d == 2)) for d in (1, 2)),
    *(Case(f"hls4ml_quant_{name}", f"hls4ml test/pytest/test_brevitas_parsing.py::test_pytorch_upsampling{d}d with "
           f"{layer} in place of the nearest layer", hls4ml_upsampling(d == 2, linear=True))
      for d, name, layer in ((1, "linear1d", "QuantUpsample(2, mode='linear')"),
                             (2, "bilinear2d", "QuantUpsamplingBilinear2d(scale_factor=2)"))),
    Case("brevitas_melgan_output", "Brevitas src/brevitas_examples/text_to_speech/melgan/generator_brevitas.py::Generator "
         "(the last block: LeakyReLU + QuantHardTanh, QuantConv1d k7 p3 with 8 of its 32 input channels, "
         "QuantTanh 16-bit)", brevitas_melgan_output, input_type="fixed<16,6>"),
    Case("hls4ml_multiout_network", "hls4ml test/pytest/test_multiout_network.py::test_multi_clone (two outputs)",
         hls4ml_multiout),
)

__all__ = ["GRAPH_CASES", "brevitas_melgan_output", "finn_quant_transpose_conv", "finn_quanthardtanh", "hls4ml_merge", "hls4ml_multiout",
           "hls4ml_quanteltwiseadd", "hls4ml_upsampling", "qonnx_resize_conv"]
