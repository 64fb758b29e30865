"""The peers' models, in our own words: one small model per case of hls4ml's, FINN's, Brevitas'
and qonnx's own test suites and examples, each citing the peer test it mirrors.

A :class:`Case` builds its model file (a Brevitas module exported with brevitas' own QONNX
exporter, or an ONNX graph written with ``onnx.helper`` where the peer test writes one) into a
folder and the io types that apply; Tessera must verify it in each (C-simulation == exact
reference == the file in float64): every peer model in the catalog is one Tessera computes
exactly.  ``tests/conformance/`` runs every case; ``bench/conformance.py`` runs them beside
hls4ml's documented QONNX flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QONNX_DOMAIN = "qonnx.custom_op.general"
BOTH = ("io_parallel", "io_stream")


@dataclass(frozen=True)
class Case:
    name: str
    #: the peer test or example the model mirrors: repository, file, test
    peer: str
    build: Callable[[Path], Path]
    #: the declared type of a float input no Quant reads (the peer test feeds floats)
    input_type: str | None = None
    io_types: tuple[str, ...] = BOTH
    samples: int = 200
    #: the independent executor of a file no ONNX executor runs (recurrent cells): the model
    #: file -> a ``tessera.compiler.api.Oracle`` (None: verify's own, the file in float64)
    oracle: Callable[[Path], object] | None = None

    def model(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return self.build(folder / f"{self.name}.onnx")


# -- building blocks ----------------------------------------------------------------------
def _calibrated(module, shape, seed: int = 0, draw: Callable | None = None):
    """A Brevitas module, calibrated on a few random batches (its statistics and scales move off
    their initial values; ``draw(shape)``: a batch, normal by default), in eval mode."""
    import torch

    draw = draw or torch.randn
    torch.manual_seed(seed)
    module.train()
    with torch.no_grad():
        for _ in range(8):
            module(draw((4, *shape)))
    return module.eval()


def _export(module, shape, path: Path, seed: int = 0, draw: Callable | None = None) -> Path:
    """A calibrated Brevitas module exported with brevitas' QONNX exporter."""
    import torch

    from tessera.models.train import export_model

    return export_model(_calibrated(module, shape, seed, draw), torch.randn(1, *shape), path)


def _export_ports(module, shapes: list[tuple[int, ...]], path: Path, outputs: int = 1) -> Path:
    """A Brevitas module of several inputs (``shapes``) or outputs, calibrated on a few random
    batches and exported with brevitas' QONNX exporter: inputs ``x0, x1, ...``, outputs ``y0, ...``."""
    import torch
    from brevitas.export import export_qonnx

    torch.manual_seed(0)
    module.train()
    with torch.no_grad():
        for _ in range(8):
            module(*(torch.randn(4, *s) for s in shapes))
    module.eval()
    with torch.no_grad():
        export_qonnx(module, tuple(torch.randn(1, *s) for s in shapes), str(path), dynamo=False,
                     input_names=[f"x{i}" for i in range(len(shapes))], output_names=[f"y{i}" for i in range(outputs)],
                     keep_initializers_as_inputs=False)
    return path


def _graph(path: Path, nodes, inits, in_shape, out_shape, opset: int = 13, datatype: str | None = None) -> Path:
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *in_shape])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, *out_shape])], inits)
    if datatype:
        a = onnx.TensorAnnotation(tensor_name="x")
        a.quant_parameter_tensor_names.append(onnx.StringStringEntryProto(key="finn_datatype", value=datatype))
        g.quantization_annotation.append(a)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(QONNX_DOMAIN, 1)])
    m.ir_version = max(8, helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))
    onnx.save(m, str(path))
    return path


def _const(name: str, value, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _quant(x: str, out: str, scale: str, zero: str, bits: str, signed=1, narrow=0, mode="ROUND") -> onnx.NodeProto:
    return helper.make_node("Quant", [x, scale, zero, bits], [out], name=f"Quant_{out}", domain=QONNX_DOMAIN,
                            signed=signed, narrow=narrow, rounding_mode=mode)


# -- hls4ml: test/pytest/test_brevitas_parsing.py (branch pr/1019) ---------------------------
def hls4ml_quantlinear(path: Path) -> Path:
    """test_quantlinear: QuantLinear(4, 4, bias=False) with Int8WeightPerTensorFixedPoint weights
    and an Int8ActPerTensorFixedPoint input quantizer, then a QuantReLU."""
    import brevitas.nn as qnn
    from brevitas.quant import Int8ActPerTensorFixedPoint, Int8WeightPerTensorFixedPoint
    from torch import nn

    class QuantModelLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin1 = qnn.QuantLinear(4, 4, bias=False, weight_quant=Int8WeightPerTensorFixedPoint,
                                        input_quant=Int8ActPerTensorFixedPoint)
            self.relu1 = qnn.QuantReLU(act_quant=Int8ActPerTensorFixedPoint)

        def forward(self, x):
            return self.relu1(self.lin1(x))

    return _export(QuantModelLinear(), (4,), path)


def hls4ml_quantconv(dims: int) -> Callable[[Path], Path]:
    """test_quantconv1d / test_quantconv2d: QuantConv{1,2}d(3, 6, k, bias=True) with
    Int8WeightPerTensorFixedPoint weights on a float input, then a float ReLU."""

    def build(path: Path) -> Path:
        import brevitas.nn as qnn
        import torch
        from brevitas.quant import Int8WeightPerTensorFixedPoint
        from torch import nn

        conv = qnn.QuantConv1d(3, 6, 4, bias=True, weight_quant=Int8WeightPerTensorFixedPoint) if dims == 1 else \
            qnn.QuantConv2d(3, 6, 5, bias=True, weight_quant=Int8WeightPerTensorFixedPoint)
        module = nn.Sequential(conv, nn.ReLU())
        with torch.no_grad():  # a float bias: on a 2**-10 grid here, so that it is a fixed-point number
            conv.bias.copy_(torch.round(conv.bias * 2**10) / 2**10)
        return _export(module, (3, 5) if dims == 1 else (3, 7, 7), path)

    return build


# -- FINN: tests/brevitas/ ------------------------------------------------------------------
def finn_qlinear(path: Path) -> Path:
    """test_brevitas_qlinear.py: QuantLinear(3, 4) with 4-bit per-output-channel float weight
    scales and a float bias, on a UINT4-annotated input (FINN's datatype of the input)."""
    import brevitas.nn as qnn
    from brevitas.quant import Int8WeightPerChannelFloat

    lin = qnn.QuantLinear(3, 4, bias=True, weight_quant=Int8WeightPerChannelFloat, weight_bit_width=4)
    return _annotate(_export(lin, (3,), path), "UINT4")


def finn_qconv2d(depthwise: bool) -> Callable[[Path], Path]:
    """test_brevitas_qconv2d.py: QuantConv2d, 4-bit narrow-range weights with per-output-channel
    power-of-two scales (LOG_FP, MAX statistics), depthwise 3x3 pad 1 or pointwise 1x1, on a
    float input."""

    def build(path: Path) -> Path:
        import brevitas.nn as qnn
        from brevitas.quant import Int8WeightPerTensorFixedPoint

        conv = qnn.QuantConv2d(8, 8 if depthwise else 16, 3 if depthwise else 1, padding=1 if depthwise else 0,
                               groups=8 if depthwise else 1, bias=False, weight_quant=Int8WeightPerTensorFixedPoint,
                               weight_scaling_per_output_channel=True, weight_bit_width=4, weight_narrow_range=True)
        return _export(conv, (8, 6, 6), path)

    return build


def _annotate(path: Path, datatype: str) -> Path:
    """The graph input's ``finn_datatype`` annotation (FINN sets the merged model's input type)."""
    m = onnx.load(str(path))
    a = onnx.TensorAnnotation(tensor_name=m.graph.input[0].name)
    a.quant_parameter_tensor_names.append(onnx.StringStringEntryProto(key="finn_datatype", value=datatype))
    m.graph.quantization_annotation.append(a)
    onnx.save(m, str(path))
    return path


def finn_mobilenet_preprocessing(path: Path) -> Path:
    """tests/end2end/test_end2end_mobilenet_v1.py (test_end2end_mobilenet_export and
    _tidy_and_merge_with_preproc): FINN's NormalizePreProc (``x / 255``, minus the ImageNet mean
    per channel, shape [1, 3, 1, 1], divided by std 0.226) merged before MobileNet-v1's first
    ConvBlock (brevitas_examples: QuantConv2d 3 -> 8, kernel 3, stride 2, unpadded, 8-bit
    per-channel weights, BatchNorm, a 4-bit QuantReLU with per-channel scales), then a pointwise
    ConvBlock of 4-bit weights; the input is UINT8, as FINN declares the merged model's."""
    import torch
    from brevitas_examples.imagenet_classification.models.mobilenetv1 import ConvBlock
    from torch import nn

    class Preprocessed(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1))
            self.init_block = ConvBlock(3, 8, kernel_size=3, stride=2, weight_bit_width=8, act_bit_width=4,
                                        activation_scaling_per_channel=True)
            self.pointwise = ConvBlock(8, 8, kernel_size=1, weight_bit_width=4, act_bit_width=4)

        def forward(self, x):
            return self.pointwise(self.init_block((x / 255 - self.mean) / 0.226)).value

    uint8 = lambda shape: torch.randint(0, 256, shape).float()  # noqa: E731
    return _annotate(_export(Preprocessed(), (3, 9, 9), path, draw=uint8), "UINT8")


def finn_relu_per_tensor(path: Path) -> Path:
    """test_brevitas_relu_act_export.py::test_brevitas_act_export_relu: QuantReLU(bit_width=4) on
    (1, 32, 1, 1), its Quant read after a float ReLU, followed by a layer that reads its codes."""
    import brevitas.nn as qnn
    from torch import nn

    module = nn.Sequential(qnn.QuantIdentity(bit_width=8), qnn.QuantReLU(bit_width=4),
                           qnn.QuantConv2d(32, 4, 1, bias=False, weight_bit_width=4))
    return _export(module, (32, 1, 1), path)


def finn_avg_pool(kernel: int, stride: int = 1, mode: str = "FLOOR", signed: bool = True) -> Callable[[Path], Path]:
    """test_brevitas_avg_pool_export.py: QuantIdentity(bit_width=8) then TruncAvgPool2d(kernel,
    stride 1, bit_width 4, FLOOR) on a (1, 2, 7, 7) input (Brevitas' own case: other strides,
    modes and an unsigned input)."""

    def build(path: Path) -> Path:
        import brevitas.nn as qnn
        from torch import nn

        module = nn.Sequential(qnn.QuantIdentity(bit_width=8, signed=signed, return_quant_tensor=True),
                               qnn.TruncAvgPool2d(kernel_size=kernel, stride=stride, bit_width=4,
                                                  return_quant_tensor=False, float_to_int_impl_type=mode))
        return _export(module, (2, 7, 7), path)

    return build


def finn_relu_per_channel(path: Path) -> Path:
    """test_brevitas_relu_act_export.py::test_brevitas_act_export_relu_channel: QuantReLU(bit_width=4,
    max_val=6, one scale per output channel, per_channel_broadcastable_shape=(1, 15, 1, 1)) on
    (1, 15, 4, 4), after a QuantIdentity and read by a QuantConv2d 1x1; its scales learned
    (PARAMETER, drawn in [2, 7] / 15 per channel) where FINN's CONST gives every channel 6 / 15."""
    import brevitas.nn as qnn
    import torch
    from brevitas.core.scaling import ScalingImplType
    from torch import nn

    relu = qnn.QuantReLU(bit_width=4, max_val=6.0, scaling_impl_type=ScalingImplType.PARAMETER,
                         scaling_per_output_channel=True, per_channel_broadcastable_shape=(1, 15, 1, 1))
    scaling = next(p for n, p in relu.named_parameters() if "scaling_impl" in n)
    with torch.no_grad():
        scaling.copy_(torch.linspace(2.0, 7.0, scaling.numel()).reshape(scaling.shape))
    module = nn.Sequential(qnn.QuantIdentity(bit_width=8), relu, qnn.QuantConv2d(15, 4, 1, bias=False, weight_bit_width=4))
    return _export(module, (15, 4, 4), path)


def brevitas_quartznet_block(path: Path) -> Path:
    """Brevitas tests/brevitas_finn/brevitas_examples/test_quartznet_finn_export.py
    (quant_quartznet_perchannelscaling_4b, whose speech_to_text package needs ruamel): one of its
    separable JasperBlocks in small, in our own words -- 8 channels of 16 steps, two repeats of a
    depthwise QuantConv1d (kernel 5, 'same' padding) with its per-tensor QuantHardTanh, a pointwise
    QuantConv1d and BatchNorm1d (4-bit weights scaled per output channel), a QuantReLU with learned
    scales per channel between the repeats (the inner activation), the residual pointwise
    QuantConv1d + BatchNorm1d, both branches through one per-tensor QuantHardTanh, their sum
    through a per-tensor QuantReLU; the input a per-tensor QuantHardTanh of 8 bits."""
    import brevitas.nn as qnn
    import torch
    from brevitas.core.restrict_val import RestrictValueType
    from brevitas.core.scaling import ScalingImplType
    from torch import nn

    act = {"scaling_impl_type": ScalingImplType.PARAMETER, "restrict_scaling_type": RestrictValueType.LOG_FP,
           "max_val": 1.0, "bit_width": 4}
    hardtanh = lambda **kw: qnn.QuantHardTanh(**{**act, "min_val": -1.0, **kw})  # noqa: E731
    conv = lambda k, groups: qnn.QuantConv1d(8, 8, k, padding=k // 2, groups=groups, bias=False, weight_bit_width=4,  # noqa: E731
                                             weight_scaling_per_output_channel=True, weight_narrow_range=True)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant_input = hardtanh(bit_width=8)
            self.repeats = nn.ModuleList(nn.Sequential(conv(5, 8), hardtanh(), conv(1, 1), nn.BatchNorm1d(8, eps=1e-3))
                                         for _ in range(2))
            self.inner = qnn.QuantReLU(**act, scaling_per_output_channel=True, per_channel_broadcastable_shape=(1, 8, 1))
            self.residual = nn.Sequential(conv(1, 1), nn.BatchNorm1d(8, eps=1e-3))
            self.normalization = hardtanh()
            self.out = qnn.QuantReLU(**act)

        def forward(self, x):
            x = self.quant_input(x)
            y = self.repeats[1](self.inner(self.repeats[0](x)))
            return self.out(self.normalization(y) + self.normalization(self.residual(x)))

    block = Block()
    scaling = next(p for n, p in block.inner.named_parameters() if "scaling_impl" in n)
    with torch.no_grad():
        scaling.add_(torch.linspace(-0.5, 0.5, scaling.numel()).reshape(scaling.shape))
    return _export(block, (8, 16), path)


# -- qonnx: tests/ --------------------------------------------------------------------------
def qonnx_rounding(mode: str, signed: int = 1, narrow: int = 0) -> Callable[[Path], Path]:
    """tests/custom_op/test_runding_mode.py (sic): each QONNX rounding mode, on an activation
    Quant with a power-of-two scale after a layer whose accumulator has finer bits (so the mode
    decides every output) and on one with a float scale; the first one's ``signed`` and
    ``narrow`` as given (unsigned narrow range: codes 0..254)."""

    def build(path: Path) -> Path:
        rng = np.random.default_rng(len(mode))
        inits = [_const("s_in", 2.0 ** -4), _const("s_w", 2.0 ** -5), _const("s_mid", 2.0 ** -3), _const("s_out", 0.0371),
                 _const("zero", 0.0), _const("b8", 8.0), _const("w", rng.integers(-15, 16, (6, 4)) * 2.0 ** -5),
                 _const("w2", rng.integers(-15, 16, (4, 3)) * 2.0 ** -5)]
        nodes = [_quant("x", "xq", "s_in", "zero", "b8"), _quant("w", "wq", "s_w", "zero", "b8"),
                 _quant("w2", "w2q", "s_w", "zero", "b8"),
                 helper.make_node("MatMul", ["xq", "wq"], ["mm"], name="MatMul_0"),
                 _quant("mm", "h", "s_mid", "zero", "b8", signed=signed, narrow=narrow, mode=mode),
                 helper.make_node("MatMul", ["h", "w2q"], ["mm2"], name="MatMul_1"),
                 _quant("mm2", "y", "s_out", "zero", "b8", mode=mode)]
        return _graph(path, nodes, inits, (6,), (3,))

    return build


def qonnx_scale_zeropt(channelwise: bool) -> Callable[[Path], Path]:
    """tests/transformation/test_extract_quant_scale_zeropt.py: a 4-bit signed narrow Quant whose
    scale and zero point are np.random.rand draws (seed 0; real zero points: QONNX allows them),
    one for the tensor on the input (1, 10), or one per channel ("channelwise") on a layer's 10
    outputs; a layer reads its codes (the peer graph is that Quant alone)."""

    def build(path: Path) -> Path:
        rs = np.random.RandomState(0)
        shape = (1, 10) if channelwise else (1,)
        s_q, z_q = rs.rand(*shape).astype(np.float32), rs.rand(*shape).astype(np.float32)
        rng = np.random.default_rng(10)
        inits = [_const("s_q", s_q), _const("z_q", z_q), _const("b4", 4.0), _const("b8", 8.0), _const("zero", 0.0),
                 _const("s_w", 2.0 ** -5), _const("s_x", 2.0 ** -4), _const("s_y", 0.0437),
                 _const("w1", rng.integers(-15, 16, (10, 10)) * 2.0 ** -5),
                 _const("w2", rng.integers(-15, 16, (10, 3)) * 2.0 ** -5)]
        nodes = [_quant("w1", "w1q", "s_w", "zero", "b8"), _quant("w2", "w2q", "s_w", "zero", "b8")]
        if channelwise:
            nodes += [_quant("x", "xq", "s_x", "zero", "b8"), helper.make_node("MatMul", ["xq", "w1q"], ["mm"], name="MatMul_0")]
        src = "mm" if channelwise else "x"
        nodes += [_quant(src, "q", "s_q", "z_q", "b4", narrow=1), helper.make_node("MatMul", ["q", "w2q"], ["mm2"], name="MatMul_1"),
                  _quant("mm2", "y", "s_y", "zero", "b8")]
        return _graph(path, nodes, inits, (10,), (3,))

    return build


def qonnx_conv_bias_int_quant(depthwise: bool) -> Callable[[Path], Path]:
    """tests/transformation/test_extract_conv_bias.py (bias "int_quant", scale and zero point per
    channel): a Conv, depthwise 3x3 pad 1 or pointwise 1x1, whose bias is an IntQuant (qonnx 1.0's
    Quant, 8 bits) of float values with float scales and zero points per channel (drawn; scales
    positive); small ((1, 4, 6, 6) in), with a quantized input and weights and an output Quant."""

    def build(path: Path) -> Path:
        rng = np.random.default_rng(4)
        out = 4 if depthwise else 6
        w_shape = (4, 1, 3, 3) if depthwise else (6, 4, 1, 1)
        inits = [_const("s_x", 0.0517), _const("zero", 0.0), _const("b8", 8.0), _const("s_w", 2.0 ** -5),
                 _const("w", rng.integers(-15, 16, w_shape) * 2.0 ** -5), _const("s_y", 0.0913),
                 _const("bias", rng.normal(0, 1, out)), _const("s_b", rng.uniform(0.005, 0.02, out)),
                 _const("z_b", rng.normal(0, 2, out))]
        conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 4} if depthwise else {"kernel_shape": [1, 1]}
        nodes = [_quant("x", "xq", "s_x", "zero", "b8"), _quant("w", "wq", "s_w", "zero", "b8"),
                 helper.make_node("IntQuant", ["bias", "s_b", "z_b", "b8"], ["bq"], name="IntQuant_bias",
                                  domain=QONNX_DOMAIN, signed=1, narrow=0, rounding_mode="ROUND"),
                 helper.make_node("Conv", ["xq", "wq", "bq"], ["c"], name="Conv_0", **conv),
                 _quant("c", "y", "s_y", "zero", "b8")]
        return _graph(path, nodes, inits, (4, 6, 6), (out, 6, 6))

    return build


def qonnx_transpose_quant(path: Path) -> Path:
    """tests/transformation/test_quant_constant_folding.py::test_fold_transpose_into_quant_init
    (quant_init False, signed, narrow, perm (0, 2, 1), scale 0.01): a Transpose of the input
    Quant's float-scaled codes; small ((1, 8, 12)), read by a 1D convolution (the peer graph ends
    at the Transpose)."""
    rng = np.random.default_rng(12)
    inits = [_const("s", 0.01), _const("zero", 0.0), _const("b8", 8.0), _const("s_w", 2.0 ** -5), _const("s_y", 0.0437),
             _const("w", rng.integers(-15, 16, (4, 12, 1)) * 2.0 ** -5)]
    nodes = [_quant("x", "xq", "s", "zero", "b8", narrow=1), _quant("w", "wq", "s_w", "zero", "b8"),
             helper.make_node("Transpose", ["xq"], ["t"], name="Transpose_0", perm=[0, 2, 1]),
             helper.make_node("Conv", ["t", "wq"], ["c"], name="Conv_0", kernel_shape=[1]),
             _quant("c", "y", "s_y", "zero", "b8")]
    return _graph(path, nodes, inits, (8, 12), (4, 8))


# -- Brevitas: tests/brevitas_ort/ (QCDQ export) --------------------------------------------
def _export_qcdq(module, shape, path: Path, opset: int, seed: int = 0) -> Path:
    """A calibrated Brevitas module exported with brevitas' own QCDQ exporter (QuantizeLinear /
    Clip / DequantizeLinear) at ``opset``."""
    import torch
    from brevitas.export import export_onnx_qcdq

    export_onnx_qcdq(_calibrated(module, shape, seed), torch.randn(1, *shape), str(path), opset_version=opset,
                     dynamo=False)
    return path


def brevitas_ort_wbiol(layer: str, quantizers: str, bits: int = 8, export: str = "qcdq") -> Callable[[Path], Path]:
    """test_quant_module.py::test_ort_wbiol with export_type 'qcdq' (quant_module_cases.py:
    QuantWBIOLCases): a ``layer`` of 8 -> 16 channels (a convolution or a transposed one), kernel 1, weights drawn in +-0.01, a
    bias through Int32Bias, input and output quantizers of ``bits`` bits, the named pair of
    weight / activation quantizers of common.py's WBIOL_QUANTIZERS; exported at opset 14 as the
    peer test does (``return_quant_tensor=False``: the first output, which it compares); or
    with export_type 'qonnx' (``export``), brevitas' QONNX exporter (asymmetric weights: a Quant
    with a zero point on a constant)."""

    def build(path: Path) -> Path:
        import brevitas.nn as qnn
        from brevitas.quant.fixed_point import Int8ActPerTensorFixedPoint, Int8WeightPerChannelFixedPoint
        from brevitas.quant.scaled_int import (Int8ActPerTensorFloat, Int8WeightPerChannelFloat, Int8WeightPerTensorFloat,
                                               Int32Bias)
        from brevitas.quant.shifted_scaled_int import (ShiftedUint8ActPerTensorFloat, ShiftedUint8WeightPerChannelFloat,
                                                       ShiftedUint8WeightPerTensorFloat)

        weight_quant, io_quant = {
            "asymmetric_per_tensor_float": (ShiftedUint8WeightPerTensorFloat, ShiftedUint8ActPerTensorFloat),
            "symmetric_per_tensor_float": (Int8WeightPerTensorFloat, Int8ActPerTensorFloat),
            "asymmetric_per_channel_float": (ShiftedUint8WeightPerChannelFloat, ShiftedUint8ActPerTensorFloat),
            "symmetric_per_channel_float": (Int8WeightPerChannelFloat, Int8ActPerTensorFloat),
            "symmetric_per_channel_fixed_point": (Int8WeightPerChannelFixedPoint, Int8ActPerTensorFixedPoint),
        }[quantizers]
        kinds = {"QuantLinear": (qnn.QuantLinear, (8,)), "QuantConv1d": (qnn.QuantConv1d, (8, 5)),
                 "QuantConv2d": (qnn.QuantConv2d, (8, 5, 5)), "QuantConvTranspose1d": (qnn.QuantConvTranspose1d, (8, 5)),
                 "QuantConvTranspose2d": (qnn.QuantConvTranspose2d, (8, 5, 5))}
        cls, shape = kinds[layer]
        sizes = {"in_features": 8, "out_features": 16} if layer == "QuantLinear" else \
            {"in_channels": 8, "out_channels": 16, "kernel_size": 1}
        module = cls(**sizes, bias=True, weight_quant=weight_quant, input_quant=io_quant, output_quant=io_quant,
                     weight_bit_width=bits, input_bit_width=bits, output_bit_width=bits, bias_quant=Int32Bias,
                     return_quant_tensor=False)
        module.weight.data.uniform_(-0.01, 0.01)
        return _export_qcdq(module, shape, path, opset=14) if export == "qcdq" else _export(module, shape, path)

    return build


# -- ONNX QuantizeLinear / DequantizeLinear at each opset (hand-written: brevitas exports 13+) --
def qcdq_opset(opset: int) -> Callable[[Path], Path]:
    """The ONNX QDQ form of qonnx's tests/transformation/test_qcdq_to_qonnx.py (onnxruntime's
    quantized MobileNet-v2, which qonnx's test expects to differ by one somewhere) in small, at
    ``opset``: a uint8 input quantizer with zero point 131 (odd: ONNX adds it after rounding
    half to even, QONNX's Quant before), a 3x3
    padded convolution on int8 weight codes with an int32 bias (DequantizeLinear of
    initializers), a ReLU and a uint8 output quantizer.  Opset 10 has one scale per tensor and
    no integer Clip; from 12 a Clip narrows the output codes to 4 bits; from 13 the weights have
    one scale per output channel (``axis=0``); at 21 the weights are int4, the input's codes int16
    chosen by ``output_dtype`` with no zero point."""

    def build(path: Path) -> Path:
        rng = np.random.default_rng(opset)
        s_x, s_y = 0.0371, 0.0625
        per_axis = opset >= 13
        s_w = np.array([0.011, 0.0173, 0.0049, 0.0231], dtype=np.float32) if per_axis else np.float32(0.0131)
        int4 = opset >= 21
        w = rng.integers(-8, 8, (4, 3, 3, 3)) if int4 else rng.integers(-127, 128, (4, 3, 3, 3))
        s_b = (np.float32(s_x if not int4 else 2.0 ** -9) * s_w).astype(np.float32)
        w_init = helper.make_tensor("w", TensorProto.INT4, w.shape, w.ravel().tolist()) if int4 else \
            _const("w", w, np.int8)
        inits = [w_init, _const("s_w", s_w), _const("z_w", np.zeros_like(s_w), np.int8),
                 _const("b", rng.integers(-3000, 3000, 4), np.int32), _const("s_b", s_b),
                 _const("s_y", s_y), _const("z_y", 0, np.uint8)]
        if int4:  # int16 input codes: output_dtype, no zero point, a power-of-two scale
            inits.append(_const("s_x", 2.0 ** -9))
            quantize_x = helper.make_node("QuantizeLinear", ["x", "s_x"], ["xq"], name="QuantizeLinear_x",
                                          output_dtype=TensorProto.INT16)
            dequantize_x = helper.make_node("DequantizeLinear", ["xq", "s_x"], ["xd"], name="DequantizeLinear_x")
        else:
            inits += [_const("s_x", s_x), _const("z_x", 131, np.uint8)]
            quantize_x = helper.make_node("QuantizeLinear", ["x", "s_x", "z_x"], ["xq"], name="QuantizeLinear_x")
            dequantize_x = helper.make_node("DequantizeLinear", ["xq", "s_x", "z_x"], ["xd"], name="DequantizeLinear_x")
        axis = {"axis": 0} if per_axis else {}
        nodes = [quantize_x, dequantize_x,
                 helper.make_node("DequantizeLinear", ["w", "s_w", "z_w"], ["wd"], name="DequantizeLinear_w", **axis),
                 helper.make_node("DequantizeLinear", ["b", "s_b"], ["bd"], name="DequantizeLinear_b", **axis),
                 helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], name="Conv_0", kernel_shape=[3, 3],
                                  pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c"], ["r"], name="Relu_0"),
                 helper.make_node("QuantizeLinear", ["r", "s_y", "z_y"], ["yq"], name="QuantizeLinear_y")]
        codes = "yq"
        if opset >= 12:  # Clip on integer codes arrives in opset 12
            inits += [_const("lo", 0, np.uint8), _const("hi", 15, np.uint8)]
            nodes.append(helper.make_node("Clip", ["yq", "lo", "hi"], ["yc"], name="Clip_y"))
            codes = "yc"
        nodes.append(helper.make_node("DequantizeLinear", [codes, "s_y", "z_y"], ["y"], name="DequantizeLinear_y"))
        return _graph(path, nodes, inits, (3, 5, 5), (4, 5, 5), opset=opset)

    return build


CASES: tuple[Case, ...] = (
    Case("hls4ml_quantlinear", "hls4ml test/pytest/test_brevitas_parsing.py::test_quantlinear (pr/1019)",
         hls4ml_quantlinear),
    Case("hls4ml_quantconv1d", "hls4ml test/pytest/test_brevitas_parsing.py::test_quantconv1d (pr/1019)",
         hls4ml_quantconv(1), input_type="fixed<8,3>"),
    Case("hls4ml_quantconv2d", "hls4ml test/pytest/test_brevitas_parsing.py::test_quantconv2d (pr/1019)",
         hls4ml_quantconv(2), input_type="fixed<8,3>"),
    Case("finn_qlinear", "FINN tests/brevitas/test_brevitas_qlinear.py::test_brevitas_qlinear", finn_qlinear),
    Case("finn_qconv2d_depthwise", "FINN tests/brevitas/test_brevitas_qconv2d.py::test_brevitas_QConv2d[dw]",
         finn_qconv2d(True), input_type="fixed<8,1>"),
    Case("finn_qconv2d_pointwise", "FINN tests/brevitas/test_brevitas_qconv2d.py::test_brevitas_QConv2d",
         finn_qconv2d(False), input_type="fixed<8,1>"),
    Case("finn_relu_per_tensor", "FINN tests/brevitas/test_brevitas_relu_act_export.py::test_brevitas_act_export_relu",
         finn_relu_per_tensor),
    Case("finn_avg_pool_k2", "FINN tests/brevitas/test_brevitas_avg_pool_export.py (kernel 2)", finn_avg_pool(2)),
    Case("finn_avg_pool_k3", "FINN tests/brevitas/test_brevitas_avg_pool_export.py (kernel 3)", finn_avg_pool(3)),
    *(Case(f"qonnx_rounding_{m.lower()}", f"qonnx tests/custom_op/test_rounding_mode.py ({m})", qonnx_rounding(m))
      for m in ("ROUND", "HALF_EVEN", "HALF_UP", "HALF_DOWN", "FLOOR", "DOWN", "CEIL", "UP")),
    Case("finn_relu_per_channel", "FINN tests/brevitas/test_brevitas_relu_act_export.py::"
         "test_brevitas_act_export_relu_channel", finn_relu_per_channel),
    Case("brevitas_quartznet_block", "Brevitas tests/brevitas_finn/brevitas_examples/test_quartznet_finn_export.py "
         "(a JasperBlock of quant_quartznet_perchannelscaling_4b)", brevitas_quartznet_block),
    Case("brevitas_ort_trunc_avg_pool", "Brevitas tests/brevitas_ort/quant_module_cases.py::QuantAvgPoolCases "
         "(unsigned input, kernel 3, stride 2, round)", finn_avg_pool(3, 2, "ROUND", signed=False)),
    Case("qonnx_unsigned_narrow", "qonnx tests/transformation/test_quant_constant_folding.py (signed=0, narrow=1, "
         "a power-of-two scale)", qonnx_rounding("ROUND", signed=0, narrow=1)),
    *(Case(f"qonnx_scale_zeropt{'_channelwise' if c else ''}", "qonnx tests/transformation/"
           f"test_extract_quant_scale_zeropt.py (channelwise={c})", qonnx_scale_zeropt(c)) for c in (False, True)),
    *(Case(f"qonnx_conv_bias_int_quant{'_dw' if d else ''}", "qonnx tests/transformation/test_extract_conv_bias.py "
           f"(dw={d}, int_quant, per_channel, per_channel)", qonnx_conv_bias_int_quant(d)) for d in (True, False)),
    Case("qonnx_transpose_quant", "qonnx tests/transformation/test_quant_constant_folding.py::"
         "test_fold_transpose_into_quant_init (quant_init=False)", qonnx_transpose_quant),
    Case("finn_mobilenet_preprocessing", "FINN tests/end2end/test_end2end_mobilenet_v1.py::"
         "test_end2end_mobilenet_tidy_and_merge_with_preproc", finn_mobilenet_preprocessing),
    *(Case(f"brevitas_ort_qonnx_{layer.lower()}_{q}", "Brevitas tests/brevitas_ort/test_quant_module.py::test_ort_wbiol "
           f"[{layer}-{q}-qonnx]", brevitas_ort_wbiol(layer, q, bits, "qonnx"))
      for layer, q, bits in (("QuantConv1d", "asymmetric_per_tensor_float", 4),
                             ("QuantLinear", "asymmetric_per_channel_float", 8),
                             ("QuantConvTranspose1d", "symmetric_per_channel_float", 8))),
    *(Case(f"brevitas_ort_qcdq_{layer.lower()}_{q}", "Brevitas tests/brevitas_ort/test_quant_module.py::test_ort_wbiol "
           f"[{layer}-{q}-qcdq]", brevitas_ort_wbiol(layer, q, bits))
      for layer, q, bits in (("QuantLinear", "asymmetric_per_tensor_float", 8),
                             ("QuantLinear", "symmetric_per_channel_float", 8),
                             ("QuantConv2d", "asymmetric_per_channel_float", 8),
                             ("QuantConv2d", "symmetric_per_tensor_float", 8),
                             ("QuantConv1d", "symmetric_per_channel_fixed_point", 4),
                             ("QuantConvTranspose2d", "asymmetric_per_tensor_float", 8))),
    *(Case(f"qcdq_opset{v}", f"qonnx tests/transformation/test_qcdq_to_qonnx.py (QCDQ at opset {v})", qcdq_opset(v))
      for v in (10, 12, 21)),
)

__all__ = ["CASES", "Case"]
