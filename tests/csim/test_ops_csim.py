"""C-simulation (g++) of one-op graphs == the integer reference, exactly."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tessera.compiler.writer import write_project
from tessera.compiler.hlscheck.check import check_project
from tessera.compiler.ir.types import FixedType
from tessera.compiler.lower.hls4ml_lower import HlsOptions
from tessera.compiler.ops import conv, dense, leakyrelu, maxpool, quant, relu
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.samples import input_samples, sample_codes
from tessera.compiler.sim.csim import CSim

pytestmark = pytest.mark.csim
#: (io type, kernels) whose synthesis branch a test of this session has compiled
_COMPILED: set[tuple[str, tuple[str, ...]]] = set()


def csim_exact(graph, tmp_path, io_type="io_parallel", n=300):
    prj = write_project(graph, None, tmp_path / "prj", HlsOptions(io_type=io_type), tb_samples=16)
    codes = input_samples(graph, n, seed=7)  # one array per input port, packed
    got = CSim(prj).run_codes(codes)
    want = run_ir(graph, codes)
    bad = np.argwhere(got != want)
    assert len(bad) == 0, f"{len(bad)} mismatches; first: {[(tuple(i), int(want[tuple(i)]), int(got[tuple(i)])) for i in bad[:5]]}"
    # every kernel as Vitis HLS sees it: the weights it would synthesize are the ones just
    # simulated and nothing the lint rejects (every project); its synthesis branch compiles
    # (once per set of kernels and io type: a repeat with other values compiles the same
    # templates).  A chain of layers has no FIFO to deadlock: tests/hlscheck runs that on DAGs.
    key = (io_type, tuple(sorted(set(re.findall(r"nnet::(\w+)\s*<", (prj / "firmware" / "tessera_model.cpp").read_text())))))
    rep = check_project(prj, syntax=key not in _COMPILED, fifo=False)
    _COMPILED.add(key)
    assert rep.ok, rep.lines() + [f.line_text() for f in rep.lint]
    return prj


@pytest.mark.parametrize("rounding", ["ROUND", "FLOOR", "DOWN", "HALF_UP", "HALF_DOWN"])
def test_requant_modes_csim(make_graph, make_type, tmp_path, rounding):
    """Every ap_fixed rounding/saturation mode we map to matches the QONNX definition, ties included."""
    g = make_graph(
        make_type(12, 6, True, (48,)),
        ("requant", quant.Attrs(FixedType(5, 2, True), True, rounding)),  # signed narrow -> SAT_SYM
        ("requant", quant.Attrs(FixedType(4, 1, True), False, rounding)),  # signed -> SAT
        ("relu", relu.Attrs()),
        ("requant", quant.Attrs(FixedType(3, 0, False), False, rounding)),  # unsigned -> SAT
    )
    csim_exact(g, tmp_path)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_dense_csim(make_graph, make_type, rng, tmp_path, io_type):
    w = rng.integers(-128, 127, size=(20, 7), endpoint=True)
    w[:, 0] = 127
    attrs = dense.Attrs(w, FixedType(8, 9, True), rng.integers(-3000, 3000, size=7), FixedType(13, 12, True))
    g = make_graph(make_type(8, 3, True, (20,)), ("dense", attrs), ("requant", quant.Attrs(FixedType(8, 2, True), False, "ROUND")))
    csim_exact(g, tmp_path, io_type)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_conv_pool_csim(make_graph, make_type, rng, tmp_path, io_type):
    w = rng.integers(-7, 7, size=(4, 3, 3, 3), endpoint=True)
    g = make_graph(
        make_type(6, 5, False, (3, 9, 9)),
        ("conv", conv.Attrs(w, FixedType(4, 3, True), rng.integers(-50, 50, size=4), FixedType(8, 8, True), (1, 1), (1, 1, 1, 1))),
        ("relu", relu.Attrs()),
        ("requant", quant.Attrs(FixedType(6, 4, False), False, "ROUND")),
        ("maxpool", maxpool.Attrs((2, 2), (2, 2))),
    )
    csim_exact(g, tmp_path, io_type, n=150)


def test_strided_conv_csim(make_graph, make_type, rng, tmp_path):
    w = rng.integers(-128, 127, size=(3, 2, 3, 3), endpoint=True)
    g = make_graph(make_type(8, 7, True, (2, 8, 7)),
                   ("conv", conv.Attrs(w, FixedType(8, 7, True), None, None, (2, 2), (0, 0, 0, 0))))
    csim_exact(g, tmp_path, n=150)


def test_wide_weights_csim(make_graph, make_type, rng, tmp_path):
    """20-bit weights with 24 fractional bits and a 30-bit bias survive the weight files exactly."""
    w = rng.integers(-(1 << 19), (1 << 19) - 1, size=(9, 3), endpoint=True)
    b = rng.integers(-(1 << 29), (1 << 29) - 1, size=3, endpoint=True)
    g = make_graph(make_type(6, 2, True, (9,)), ("dense", dense.Attrs(w, FixedType(20, 24, True), b, FixedType(30, 27, True))))
    csim_exact(g, tmp_path)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_conv3d_pool3d_dense_csim(make_graph, make_type, rng, tmp_path, io_type):
    """Tessera's 3D extension layers (hls_templates/conv3d, pool3d) inside an hls4ml project."""
    from tessera.compiler.ops import flatten

    w1 = rng.integers(-128, 127, size=(4, 2, 3, 3, 3), endpoint=True)
    w2 = rng.integers(-7, 7, size=(3, 4, 2, 2, 2), endpoint=True)
    wd = rng.integers(-128, 127, size=(3 * 3 * 3 * 2, 5), endpoint=True)
    g = make_graph(
        make_type(8, 7, True, (2, 7, 6, 5)),
        ("conv", conv.Attrs(w1, FixedType(8, 7, True), rng.integers(-999, 999, size=4), FixedType(11, 14, True),
                            (1, 1, 1), (1, 1, 1, 1, 1, 1))),
        ("leakyrelu", leakyrelu.Attrs(1, 3)),
        ("requant", quant.Attrs(FixedType(8, 5, True), False, "ROUND")),
        ("conv", conv.Attrs(w2, FixedType(4, 3, True), None, None, (1, 1, 1), (0, 0, 0, 1, 1, 1))),
        ("relu", relu.Attrs()),
        ("requant", quant.Attrs(FixedType(6, 4, False), False, "ROUND")),
        ("maxpool", maxpool.Attrs((2, 2, 2), (2, 2, 2))),
        ("flatten", flatten.Attrs()),
        ("dense", dense.Attrs(wd, FixedType(8, 8, True), None, None)),
    )
    csim_exact(g, tmp_path, io_type, n=100)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_concat_add_csim(make_dag, make_type, skip_block, rng, tmp_path, io_type):
    """Skip connections: channel Concat of differently typed tensors and Add, in 3D."""
    g = make_dag(make_type(8, 3, True, (2, 5, 4, 3)), skip_block(rng, 2, 3))
    csim_exact(g, tmp_path, io_type, n=80)


@pytest.mark.parametrize("io_type,k,s,pads", [("io_parallel", (2, 2, 2), (2, 2, 2), (0,) * 6),
                                              ("io_stream", (2, 2, 2), (2, 2, 2), (0,) * 6),  # U-Net's up-conv
                                              ("io_stream", (3, 3, 3), (2, 2, 2), (1, 1, 1, 1, 1, 1)),
                                              ("io_stream", (3, 2, 3), (1, 2, 1), (1, 0, 0, 1, 1, 0))])  # 3-plane ring
def test_convtranspose3d_csim(make_graph, make_type, rng, tmp_path, io_type, k, s, pads):
    from tessera.compiler.ops import convtranspose

    w = rng.integers(-128, 127, size=(3, 2, *k), endpoint=True)
    g = make_graph(
        make_type(6, 5, False, (3, 3, 4, 2)),
        ("convtranspose", convtranspose.Attrs(w, FixedType(8, 7, True), rng.integers(-99, 99, size=2),
                                              FixedType(8, 13, True), s, pads)),
        ("requant", quant.Attrs(FixedType(8, 5, True), True, "HALF_UP")),
    )
    csim_exact(g, tmp_path, io_type, n=80)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_lut_csim(make_graph, make_type, tmp_path, io_type):
    from tessera.compiler.ops import lut

    g = make_graph(
        make_type(9, 5, True, (2, 4, 3)),
        ("lut", lut.Attrs("tanh", quant.Attrs(FixedType(8, 7, True), True, "ROUND"))),
        ("lut", lut.Attrs("sigmoid", quant.Attrs(FixedType(6, 6, False), False, "ROUND"))),
    )
    csim_exact(g, tmp_path, io_type, n=200)


@pytest.mark.parametrize("io_type,rounding", [("io_parallel", "ROUND"), ("io_stream", "HALF_DOWN")])
def test_avgpool_csim(make_graph, make_type, tmp_path, io_type, rounding):
    """CosmoFlow's 3x3x3 / stride 2 / pad 1 average pool (divisors 8..27) fused with its Quant."""
    from tessera.compiler.ops import avgpool

    g = make_graph(
        make_type(8, 4, True, (3, 5, 6, 7)),
        ("avgpool", avgpool.Attrs((3, 3, 3), (2, 2, 2), (1,) * 6, False, quant.Attrs(FixedType(7, 5, True), False, rounding))),
        ("avgpool", avgpool.Attrs((2, 2, 2), (1, 1, 1), (0,) * 6, True, quant.Attrs(FixedType(6, 2, True), True, "FLOOR"))),
    )
    csim_exact(g, tmp_path, io_type, n=150)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("pool", ["avgpool", "globalavgpool"])
def test_average_of_unsigned_codes_csim(make_graph, make_type, tmp_path, io_type, pool):
    """Unsigned inputs whose sums use their top bit (the all-maximum sample): the kernels read
    the sum's raw bits as a signed integer, so the sum type must be signed."""
    from tessera.compiler.ops import avgpool, globalavgpool

    out = quant.Attrs(FixedType(7, 3, True), False, "ROUND")
    layer = (("avgpool", avgpool.Attrs((2, 2, 2), (2, 2, 2), (0,) * 6, False, out)) if pool == "avgpool"
             else ("globalavgpool", globalavgpool.Attrs(out)))
    csim_exact(make_graph(make_type(8, 5, False, (3, 4, 4, 2)), layer), tmp_path, io_type, n=60)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_upsample3d_csim(make_graph, make_type, tmp_path, io_type):
    from tessera.compiler.ops import upsample

    g = make_graph(make_type(7, 3, True, (2, 3, 3, 2)), ("upsample", upsample.Attrs((2, 1, 3))),
                   ("relu", relu.Attrs()))
    csim_exact(g, tmp_path, io_type, n=60)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_crop3d_csim(make_graph, make_type, tmp_path, io_type):
    """A box that touches neither face and one that starts at the origin, after a conv."""
    from tessera.compiler.ops import crop

    g = make_graph(make_type(7, 3, True, (2, 5, 4, 6)), ("crop", crop.Attrs((1, 0, 2), (3, 4, 3))),
                   ("relu", relu.Attrs()), ("crop", crop.Attrs((0, 1, 1), (2, 2, 2))))
    csim_exact(g, tmp_path, io_type, n=60)


@pytest.mark.parametrize("k,stride,pads,shape", [
    ((3, 3, 3), (2, 2, 2), (1, 0, 1, 1, 1, 0), (2, 7, 6, 5)),
    ((2, 3, 2), (1, 2, 2), (0, 1, 0, 0, 1, 1), (3, 5, 7, 4)),
    ((3, 3, 3), (2, 2, 2), (0, 0, 0, 0, 0, 0), (1, 8, 7, 6)),  # trailing inputs no window uses
])
def test_conv3d_plane_buffer_stream_csim(make_graph, make_type, rng, tmp_path, k, stride, pads, shape):
    """The plane-buffered io_stream Conv3D: strides, asymmetric padding, odd sizes."""
    w = rng.integers(-128, 127, size=(3, shape[0], *k), endpoint=True)
    g = make_graph(make_type(8, 6, True, shape),
                   ("conv", conv.Attrs(w, FixedType(8, 7, True), rng.integers(-99, 99, size=3), FixedType(8, 14, True),
                                       stride, pads)))
    csim_exact(g, tmp_path, "io_stream", n=60)


def test_requant_then_flatten_stream_csim(make_graph, make_type, rng, tmp_path):
    """hls4ml folds a stream Reshape into the previous (requant) type; values must not change."""
    from tessera.compiler.ops import flatten

    w = rng.integers(-8, 7, size=(3, 2, 2, 2, 2), endpoint=True)
    g = make_graph(make_type(6, 4, True, (2, 3, 3, 3)),
                   ("conv", conv.Attrs(w, FixedType(4, 3, True), None, None, (1, 1, 1), (0,) * 6)),
                   ("requant", quant.Attrs(FixedType(5, 3, True), False, "ROUND")),
                   ("flatten", flatten.Attrs()),
                   ("dense", dense.Attrs(rng.integers(-9, 9, size=(24, 4)), FixedType(5, 2, True), None, None)))
    csim_exact(g, tmp_path, "io_stream", n=60)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_rounding_requant_of_a_value_below_its_lsb_csim(make_graph, make_type, rng, tmp_path, io_type):
    """A dense output whose every code lies below half an LSB of the next quantizer
    (ap_fixed<18,-8> into ap_fixed<8,2> with rounding, from a reduced-width CosmoFlow head):
    Xilinx's ap_fixed conversion reads a bit beyond the source's MSB and aborts the
    C-simulation, so exact-range results are held with at least one integer bit."""
    g = make_graph(make_type(8, 7, True, (6,)),
                   ("dense", dense.Attrs(rng.integers(-3, 3, size=(6, 3), endpoint=True), FixedType(8, 12, True), None, None)),
                   ("requant", quant.Attrs(FixedType(8, 6, True), False, "ROUND")),
                   ("requant", quant.Attrs(FixedType(6, 14, True), False, "HALF_UP")))
    assert g.values[g.nodes[0].output].ftype.int_bits < 0
    csim_exact(g, tmp_path, io_type, n=60)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_flatten_of_a_held_wider_value_csim(make_graph, make_type, rng, tmp_path, io_type):
    """A max pool of a value with no integer bit (ufixed<8,-1>) is held with one; the
    Flatten after it (which hls4ml folds into its input's type in io_stream) follows."""
    from tessera.compiler.ops import flatten

    g = make_graph(make_type(8, 9, False, (2, 4, 4, 2)),
                   ("maxpool", maxpool.Attrs((2, 2, 2), (2, 2, 2))),
                   ("flatten", flatten.Attrs()),
                   ("dense", dense.Attrs(rng.integers(-9, 9, size=(8, 3)), FixedType(5, 2, True), None, None)))
    assert g.values[g.nodes[0].output].ftype.int_bits < 1
    csim_exact(g, tmp_path, io_type, n=60)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_a_rescale_whose_output_bounds_exceed_its_product_csim(make_graph, make_type, tmp_path, io_type):
    """Codes 0..7 to a 6-bit output (bounds -32..31) by ``R_up(x / 8)``: the multiply-shift's
    product needs 5 bits, the clamp's bounds 6.  Found by the oracle property: the clamp
    compared in the product's type, where 31 wraps to -1, so every output was clamped to 31
    and stored as -1."""
    from fractions import Fraction

    from tessera.compiler.exact.requant import Step
    from tessera.compiler.exact.rounding import Rounding
    from tessera.compiler.ops import rescale

    step = Step(Fraction(1, 8), Fraction(0), Rounding.UP, -32, 31)
    graph = make_graph(make_type(3, 5, False, (2, 3)), ("relu", relu.Attrs()),
                       ("rescale", rescale.Attrs((step,), FixedType(6, 2, True))))
    assert np.array_equal(np.unique(run_ir(graph, sample_codes(graph.values["x"], 50, seed=1))), [0, 1])
    csim_exact(graph, tmp_path, io_type, n=50)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_a_requant_whose_rounding_bit_lies_above_its_inputs_msb_csim(make_graph, make_type, tmp_path, io_type):
    """A rescale's 3-bit codes of 2**-5 (MSB 2**-3) rounded onto 2**-1, whose rounding bit is
    2**-2: ap_fixed's conversion read that bit beyond the input's MSB and the C-simulation
    aborted (found by the oracle property); the requantization primitive reads codes.  Every
    |value| < 1/4 rounds to 0 (a truncation reads no rounding bit: FLOOR never aborted)."""
    from fractions import Fraction

    from tessera.compiler.exact.requant import Step
    from tessera.compiler.exact.rounding import Rounding
    from tessera.compiler.ops import rescale

    step = Step(Fraction(1, 8), Fraction(0), Rounding.ROUND, -4, 3)
    graph = make_graph(make_type(6, 2, True, (2, 3)), ("rescale", rescale.Attrs((step,), FixedType(3, 5, True))),
                       ("requant", quant.Attrs(FixedType(8, 1, True), False, "ROUND")))
    assert np.array_equal(np.unique(run_ir(graph, sample_codes(graph.values["x"], 50, seed=1))), [0])
    csim_exact(graph, tmp_path, io_type, n=50)


@pytest.mark.parametrize("kernel, strides, depthwise", [((1, 3), (2, 1), False), ((1, 2), (3, 2), True)])
def test_a_one_row_kernel_with_a_row_stride_in_io_stream_csim(make_graph, make_type, rng, tmp_path, kernel, strides,
                                                             depthwise):
    """hls4ml's stream Conv2D ignores the row stride of a one-row kernel wider than one column
    (595 of 960 outputs wrong for 1x3 / (2, 1), found by the oracle property): such a
    convolution is Tessera's 3D kernel at depth 1 in io_stream."""
    group = 3 if depthwise else 1
    w = rng.integers(-3, 4, size=(3, 3 // group, *kernel))
    graph = make_graph(make_type(4, 2, True, (3, 7, 8)),
                       ("conv", conv.Attrs(w, FixedType(3, 0, True), None, None, strides, (0, 0, 0, 0), group=group)))
    prj = csim_exact(graph, tmp_path, "io_stream", n=40)
    assert "tessera_conv3d" in (prj / "firmware" / "tessera_model.cpp").read_text()


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_staircase_csim(make_graph, make_type, tmp_path, io_type):
    """A Tanh of a 14-bit accumulator per channel (a rising line, a falling one with a knee, a
    clipped one) into a 9-bit float-scale Quant: each kernel's binary search == the reference."""
    from fractions import Fraction

    from tessera.compiler.ops import staircase

    knee = Fraction(float(np.float32(0.2)))
    lines = (staircase.Line(Fraction(3, 4096), Fraction(1, 8)), staircase.Line(Fraction(-5, 8192), Fraction(0), knee),
             staircase.Line(Fraction(1, 1024), Fraction(-1, 4), Fraction(1), Fraction(-1, 2), Fraction(1, 2)))
    attrs = staircase.Attrs("tanh", quant.Attrs(FixedType(9, 8, True), False, "ROUND"), lines, mult=3)
    graph = make_graph(make_type(14, 0, True, (3, 2, 4)), ("staircase", attrs))
    csim_exact(graph, tmp_path, io_type, n=200)


@pytest.mark.parametrize("io_type,shape,scales,transform", [
    ("io_parallel", (3, 4, 5), (2.0, 1.5), "half_pixel"), ("io_stream", (3, 4, 5), (2.0, 1.5), "half_pixel"),
    ("io_parallel", (2, 6), (3.0,), "align_corners"), ("io_stream", (2, 2, 2, 3), (2.0, 1.0, 2.0), "asymmetric")])
def test_interpolate_csim(make_graph, make_type, tmp_path, io_type, shape, scales, transform):
    """Linear interpolation's exact integer sums (1D, 2D, 3D; weights with denominators 4, 3 and
    6): each kernel's eight weighted terms == the reference."""
    from fractions import Fraction

    from tessera.compiler.frontend.attributes import nearest_coordinates
    from tessera.compiler.frontend.handlers.windows import linear_axis
    from tessera.compiler.ops import interpolate

    axes = tuple(linear_axis(nearest_coordinates(int(n * s), n, Fraction(s), transform), n)
                 for n, s in zip(shape[1:], scales))
    graph = make_graph(make_type(8, 3, True, shape), ("interpolate", interpolate.Attrs(axes)))
    csim_exact(graph, tmp_path, io_type, n=100)
