"""Graphs that once compiled into a broken or a wrong project, each now verified or refused:

- a model that is one quantizer: the top function took the input array as its output too
  (``redefinition of 'result_t* x_in'``);
- a 2D (or 1D) map out of a kernel that runs it as a volume (upsampling, cropping, padded
  pooling) into hls4ml's io_parallel convolution, which read the map's rank from the volume's
  shape (``array split does not result in an equal division`` in its im2col code);
- a Transpose swapping the channels with a spatial axis before a Conv: a relabelling that the
  Conv read as channels-last (verify found C-simulation != reference != the file);
- a constant varying over the positions added after a Conv, folded as a bias per channel.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from tessera.compiler.api import CompileOptions, VerifyOptions, compile_model, load_model, verify_project
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.ops import conv

from ..conformance.cases import _const, _graph, _quant
from ..conformance.graphs import finn_quanthardtanh

RNG = np.random.default_rng(0)


def _verified(model: Path, prj: Path, io: str, samples: int = 100) -> None:
    result = compile_model(model, prj, CompileOptions(io_type=io, tb_samples=4))
    report = verify_project(model, result.project, VerifyOptions(samples=samples, user_samples=0,
                                                                 require_independent=True))
    assert report.passed, report.verdict()
    assert report.independent.equal == report.outputs > 0


def _map_then_conv(path: Path, between: list, shape: tuple[int, ...], conv_in: tuple[int, ...], extra=()) -> Path:
    """A quantized (C, H, W) input, the ``between`` nodes (``xq`` -> ``h``), then a 3x3 pad-1
    Conv of 4 filters and its Quant."""
    nodes = [_quant("x", "xq", "s", "zero", "bits"), *between, _quant("w", "wq", "s_w", "zero", "bits_w"),
             helper.make_node("Conv", ["h", "wq"], ["c"], name="Conv_0", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             _quant("c", "y", "s", "zero", "bits")]
    inits = [_const("s", 2.0**-4), _const("zero", 0.0), _const("bits", 8.0), _const("s_w", 2.0**-3),
             _const("bits_w", 4.0), _const("w", RNG.integers(-8, 8, (4, conv_in[0], 3, 3)) / 8)]
    return _graph(path, nodes, [*inits, *extra], shape, (4, *conv_in[1:]))


@pytest.mark.csim
@pytest.mark.parametrize("bits", [1, 4])
def test_a_model_that_is_one_quantizer_has_two_ports(tmp_path, bits):
    model = finn_quanthardtanh(bits, bits > 1, 1.0)(tmp_path / "m.onnx")
    _verified(model, tmp_path / "prj", "io_parallel")
    header = (tmp_path / "prj" / "firmware" / "tessera_model.h").read_text()
    ports = re.findall(r"(\w+)\[\w+\]", header[header.index("void tessera_model("):])
    assert len(ports) == 2 and ports[0] != ports[1], ports


@pytest.mark.parametrize("kind", ["resize", "maxpool_padded", "avgpool"])
def test_a_map_out_of_a_volume_kernel_feeds_hls4ml_conv(tmp_path, kind):
    between = {
        "resize": ([helper.make_node("Resize", ["xq", "", "scales"], ["h"], name="Resize_0", mode="nearest")],
                   (3, 8, 8)),
        "maxpool_padded": ([helper.make_node("MaxPool", ["xq"], ["h"], name="Pool_0", kernel_shape=[2, 2],
                                             pads=[1, 1, 1, 1], strides=[2, 2])], (3, 3, 3)),
        "avgpool": ([helper.make_node("AveragePool", ["xq"], ["a"], name="Pool_0", kernel_shape=[2, 2]),
                     _quant("a", "h", "s", "zero", "bits")], (3, 3, 3)),
    }[kind]
    nodes, conv_in = between
    path = _map_then_conv(tmp_path / "m.onnx", nodes, (3, 4, 4), conv_in, [_const("scales", [1.0, 1.0, 2.0, 2.0])])
    result = compile_model(path, tmp_path / "prj", CompileOptions(io_type="io_parallel", tb_samples=4))
    code = (result.project / "firmware" / "nnet_utils" / "nnet_code_gen.h").read_text()
    assert "fill_buffer" in code  # hls4ml's im2col of the Conv, from the map's (H, W, C)


@pytest.mark.csim
@pytest.mark.parametrize("io", ["io_parallel", "io_stream"])
def test_transpose_of_channels_and_height_before_a_conv_moves_the_codes(tmp_path, io):
    between = [helper.make_node("Transpose", ["xq"], ["h"], name="Transpose_0", perm=[0, 2, 1, 3])]
    path = _map_then_conv(tmp_path / "m.onnx", between, (2, 3, 4), (3, 2, 4))
    _verified(path, tmp_path / "prj", io)


@pytest.mark.parametrize("shape,why", [((4,), "varies over the positions"), ((1, 3, 4), "varies over the positions"),
                                       ((3, 1), "varies over the positions"), ((5,), "does not broadcast"),
                                       ((2, 4, 1, 1), "does not broadcast")])
def test_a_constant_varying_over_positions_after_a_conv_is_refused(tmp_path, shape, why):
    path = _conv_plus(tmp_path / "m.onnx", RNG.integers(-8, 8, shape) / 4)
    with pytest.raises(UnsupportedModelError, match=re.escape(f"node 'Add_0' (Add): the bias of shape {list(shape)} {why}")) as info:
        load_model(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("shape", [(4, 1, 1), (1, 4, 1, 1), (1,), (1, 1, 1)])
def test_a_constant_per_channel_or_scalar_after_a_conv_is_its_bias(tmp_path, shape):
    b = RNG.integers(-8, 8, shape) / 4
    graph = load_model(_conv_plus(tmp_path / "m.onnx", b))
    layer = next(n for n in graph.nodes if n.op == conv.OP.name)
    bias = np.ldexp(layer.attrs.bias.astype(np.float64), -layer.attrs.btype.frac)
    assert np.array_equal(bias, np.broadcast_to(b.reshape(-1), (4,)))


def _conv_plus(path: Path, b: np.ndarray) -> Path:
    """A Conv of a (2, 3, 4) map with 4 filters, plus the constant ``b``, then its Quant."""
    nodes = [_quant("x", "xq", "s", "zero", "bits"), _quant("w", "wq", "s_w", "zero", "bits_w"),
             helper.make_node("Conv", ["xq", "wq"], ["c"], name="Conv_0", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "b"], ["cb"], name="Add_0"), _quant("cb", "y", "s", "zero", "bits")]
    inits = [_const("s", 2.0**-4), _const("zero", 0.0), _const("bits", 8.0), _const("s_w", 2.0**-3),
             _const("bits_w", 4.0), _const("w", RNG.integers(-8, 8, (4, 2, 3, 3)) / 8), _const("b", b)]
    return _graph(path, nodes, inits, (2, 3, 4), (4, 3, 4))
