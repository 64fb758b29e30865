"""hls4ml's io_parallel convolutions over every output width: its im2col code
(``generate_conv1d_line_buffer_fn``) splits the rows of the layer's window matrix into
``n_partitions`` (the output width over the parallelization factor, 1 here), the matrix built
from the layer's input variable's shape.  A map out of Tessera's 3D transposed convolution
(a 1D or 2D map run as a volume) once kept the volume's rank, (1, 1, W, C): the Conv1D after
it read a width of 1 and hls4ml stopped on ``array split does not result in an equal
division``.  Output widths prime, odd and powers of two, straight from the input and after
a transposed convolution."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.ir.types import FixedType
from tessera.compiler.lower.hls4ml_lower import HlsOptions, lower_to_hls4ml
from tessera.compiler.ops import conv, convtranspose, quant

REQUANT = ("requant", quant.Attrs(FixedType(6, 3, True), False, "ROUND"))
#: output widths: prime, odd, powers of two (and 1)
WIDTHS = [1, 2, 3, 5, 7, 8, 9, 11, 13, 15, 16, 32]


def _conv(rng, c_in: int, kernel: tuple[int, ...]) -> tuple[str, conv.Attrs]:
    """A ``kernel`` convolution of 2 filters, pads keeping the size."""
    w = rng.integers(-7, 8, size=(2, c_in, *kernel))
    pads = tuple(k // 2 for k in kernel) * 2
    return "conv", conv.Attrs(w, FixedType(4, 3, True), None, None, (1,) * len(kernel), pads)


def _upsampling(rng, width: int, ndim: int) -> tuple[int, tuple[str, convtranspose.Attrs]]:
    """The input size and a transposed convolution of 3 channels making ``width`` of it:
    kernel 2 stride 2 (even widths), kernel 3 stride 2 (odd widths 2 n + 1), kernel 1 (1)."""
    k, s = (1, 1) if width == 1 else ((2, 2) if width % 2 == 0 else (3, 2))
    size = 1 if width == 1 else (width // 2 if width % 2 == 0 else (width - 1) // 2)
    w = rng.integers(-7, 8, size=(3, 3, *(k,) * ndim))
    attrs = convtranspose.Attrs(w, FixedType(4, 3, True), None, None, (s,) * ndim, (0,) * 2 * ndim)
    return size, ("convtranspose", attrs)


def _im2col_rows(model, class_name: str) -> list[tuple[list[int], int]]:
    """Each hls4ml convolution's input variable shape and output pixels."""
    found = []
    for layer in model.get_layers():
        if layer.class_name == class_name:
            out = layer.get_output_variable().shape
            found.append((list(layer.get_input_variable().shape), int(np.prod(out[:-1]))))
    return found


@pytest.mark.parametrize("width", WIDTHS)
def test_conv1d_of_the_input_splits_every_width(make_graph, make_type, rng, tmp_path, width):
    g = make_graph(make_type(6, 3, True, (3, width)), _conv(rng, 3, (3,)), REQUANT)
    model, _ = lower_to_hls4ml(g, HlsOptions(io_type="io_parallel"), str(tmp_path))
    assert _im2col_rows(model, "Conv1D") == [([width, 3], width)]


@pytest.mark.parametrize("width", WIDTHS)
def test_conv1d_after_a_transposed_conv_splits_every_width(make_graph, make_type, rng, tmp_path, width):
    size, up = _upsampling(rng, width, 1)
    g = make_graph(make_type(6, 3, True, (3, size)), up, REQUANT, _conv(rng, 3, (3,)), REQUANT)
    assert g.values[g.nodes[2].inputs[0]].shape == (3, width)
    model, _ = lower_to_hls4ml(g, HlsOptions(io_type="io_parallel"), str(tmp_path))
    assert _im2col_rows(model, "Conv1D") == [([width, 3], width)]


@pytest.mark.parametrize("width", [3, 5, 8])
def test_conv2d_after_a_transposed_conv_reads_the_map(make_graph, make_type, rng, tmp_path, width):
    size, up = _upsampling(rng, width, 2)
    g = make_graph(make_type(6, 3, True, (3, size, size)), up, REQUANT, _conv(rng, 3, (3, 3)), REQUANT)
    model, _ = lower_to_hls4ml(g, HlsOptions(io_type="io_parallel"), str(tmp_path))
    assert _im2col_rows(model, "Conv2D") == [([width, width, 3], width * width)]


@pytest.mark.csim
@pytest.mark.parametrize("io_type,width", [("io_parallel", 7), ("io_stream", 8)])
def test_conv1d_after_a_transposed_conv_csim(make_graph, make_type, rng, tmp_path, io_type, width):
    from ..csim.test_ops_csim import csim_exact

    size, up = _upsampling(rng, width, 1)
    g = make_graph(make_type(6, 3, True, (3, size)), up, REQUANT, _conv(rng, 3, (3,)), REQUANT)
    csim_exact(g, tmp_path, io_type, n=100)
