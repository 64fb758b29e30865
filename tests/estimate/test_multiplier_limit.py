"""The estimator counts the multipliers the kernels' ALLOCATION pragmas allow: g++ reads
``multiplier_limit`` out of the generated parameters.h (hls4ml's dense and 2D convolution,
Tessera's 3D convolution and 3D transposed convolution, whose stride phase gathers
ceil(k / s) taps per axis), and reuse R divides it by R."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tessera.compiler.estimate import estimate, get_part
from tessera.compiler.ir.types import FixedType
from tessera.compiler.lower.hls4ml_lower import HlsOptions
from tessera.compiler.ops import conv, convtranspose, dense, relu
from tessera.compiler.ops.base.cost import multiplier_limit
from tessera.compiler.writer import write_project

pytestmark = pytest.mark.csim


def nonzero(rng, shape, lo=-7, hi=7):
    w = rng.integers(lo, hi, size=shape, endpoint=True)
    w[w == 0] = 1
    return w


def kernel_limits(prj: Path) -> dict[str, int]:
    """Every config struct's multiplier_limit, as the C++ compiler evaluates it."""
    params = (prj / "firmware" / "parameters.h").read_text()
    structs = [m.group(1) for m in re.finditer(r"struct (\w+) : nnet::\w+ \{(?:(?!\n\};).)*multiplier_limit", params, re.S)]
    assert structs, "no config with a multiplier_limit"
    main = prj / "limits.cpp"
    main.write_text('#include <cstdio>\n#include "firmware/defines.h"\n#include "firmware/parameters.h"\nint main() {\n'
                    + "".join(f'    std::printf("{s} %u\\n", (unsigned){s}::multiplier_limit);\n' for s in structs) + "}\n")
    exe = prj / "limits"
    subprocess.run([shutil.which("g++"), "-std=c++17", "-w", "-I.", "-Ifirmware", "-Ifirmware/ap_types", str(main.name),
                    "-o", str(exe.name)], cwd=prj, check=True, capture_output=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return {name: int(v) for name, v in (ln.split() for ln in out.splitlines())}


CASES = {
    "dense": lambda rng: ((16,), ("dense", dense.Attrs(nonzero(rng, (16, 8)), FixedType(4, 3, True), None, None))),
    "conv2d": lambda rng: ((3, 6, 6), ("conv", conv.Attrs(nonzero(rng, (4, 3, 3, 3)), FixedType(4, 3, True), None, None,
                                                          (1, 1), (0, 0, 0, 0)))),
    "conv3d": lambda rng: ((2, 4, 4, 4), ("conv", conv.Attrs(nonzero(rng, (4, 2, 2, 2, 2)), FixedType(4, 3, True), None,
                                                             None, (1, 1, 1), (0,) * 6))),
    # k 3 stride 2: 2 taps per axis of 3, 2^3 x 2 channels x 3 filters = 48 products a position
    "convtranspose3d": lambda rng: ((2, 3, 3, 3), ("convtranspose", convtranspose.Attrs(
        nonzero(rng, (2, 3, 3, 3, 3)), FixedType(4, 3, True), None, None, (2, 2, 2), (1,) * 6))),
}


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("kind", list(CASES))
def test_estimated_multipliers_are_the_kernels_limit_and_divide_by_reuse(make_graph, make_type, rng, tmp_path, kind,
                                                                          io_type):
    shape, layer = CASES[kind](rng)
    g = make_graph(make_type(6, 4, True, shape), layer, ("relu", relu.Attrs()))
    node = g.nodes[0].name
    counts = {}
    for r in (1, 2, 4):
        prj = write_project(g, None, tmp_path / f"r{r}", HlsOptions(io_type=io_type, reuse=r), tb_samples=2)
        limits = set(kernel_limits(prj).values())
        est = next(x for x in estimate(g, get_part("xcu250"), reuse=r, io_type=io_type).layers if x.node == node)
        assert limits == {est.multipliers}, (r, limits, est.multipliers)
        counts[r] = est.multipliers
    assert counts[2] == -(-counts[1] // 2) and counts[4] == -(-counts[1] // 4), counts


def test_zero_weights_need_no_multiplier():
    assert multiplier_limit(64, 0, 4) == 16 and multiplier_limit(64, 8, 4) == 14 and multiplier_limit(65, 0, 4) == 17


def test_allocation_regions_each_round_up_and_products_outside_stay():
    """A kernel with ALLOCATION regions (the recurrent cells): each region's limit, plus one
    multiplier per product outside them (float-scale requantizations)."""
    from tessera.compiler.ops.base.cost import Work

    assert Work(macs=1, mults=65).multipliers(4) == 17
    assert Work(macs=1, mults=65, regions=(33, 30)).multipliers(4) == 9 + 8 + 2
    assert Work(macs=1, mults=65, regions=(33, 30)).multipliers(1) == 65
    assert Work(macs=1).multipliers(4) == 0


@pytest.mark.parametrize("folder,header", [("conv3d", "nnet_tessera_conv3d.h"),
                                           ("convtranspose3d", "nnet_tessera_convtranspose3d.h")])
def test_3d_kernels_allocate_the_limit(folder, header):
    """Both io types of each kernel cap their multipliers and reshape their weights to it."""
    import tessera.hls_templates as templates

    text = (Path(templates.__file__).parent / folder / header).read_text()
    assert text.count("#pragma HLS ALLOCATION operation instances = mul limit = CONFIG_T::multiplier_limit") == 2
    assert text.count("#pragma HLS ARRAY_RESHAPE variable = weights block factor = CONFIG_T::multiplier_limit") == 2
    assert "const typename CONFIG_T::weight_t *weights;" not in text  # no struct of weight pointers
    if folder == "conv3d":
        assert "struct tessera_conv3d_window" in text  # the window's weights are arguments of its apply


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("cell", ["lstm", "gru", "convlstm"])
def test_recurrent_cells_allocate_their_weight_products_divided_by_reuse(make_graph, make_type, rnn_builders, rng,
                                                                        tmp_path, cell, io_type):
    """The ALLOCATION limit of a cell's weight products (one unit, every gate, per pipelined
    iteration; ConvLSTM: per cell) is ceil(products / R), g++-evaluated, and the estimator's
    multiplier count is their sum (power-of-two scales: no requantization multipliers outside
    the regions).  R = 16 divides neither ConvLSTM cell's products: the sum of the two limits
    is one more than ceil(all products / 16)."""
    from tessera.compiler.ops import OPS

    if cell == "convlstm":
        attrs = rnn_builders["convlstm"](rng, 2, 3, kind="int8", forecaster_steps=2)
        x = make_type(8, 6, True, (3, 2, 4, 4))
    else:
        attrs = rnn_builders[cell](rng, 5, 4, "int8")
        x = make_type(8, 6, True, (3, 5))
    g = make_graph(x, (cell, attrs))
    op, node = OPS[cell], g.nodes[0]
    products = op.weight_products(attrs, g.values[g.input])
    cells = products if cell == "convlstm" else {"": products}
    assert all(v > 0 for v in cells.values())
    assert not op.analyze(attrs, g.values[g.input]).forms  # power-of-two scales: no requantization multipliers
    for r in (1, 2, 16):
        prj = write_project(g, None, tmp_path / f"r{r}", HlsOptions(io_type=io_type, reuse=r), tb_samples=2)
        limits = cell_limits(prj, [k.replace("_products", "_") for k in cells])
        assert limits == [-(-v // r) for v in cells.values()], (r, limits)
        est = next(e for e in estimate(g, get_part("xcu250"), reuse=r, io_type=io_type).layers if e.node == node.name)
        assert est.multipliers == sum(limits)
    if cell == "convlstm":
        assert sum(-(-v // 16) for v in cells.values()) == -(-sum(cells.values()) // 16) + 1


def cell_limits(prj: Path, prefixes: list[str]) -> list[int]:
    """``<prefix>multiplier_limit`` of the recurrent layer's config, as g++ evaluates it."""
    params = (prj / "firmware" / "parameters.h").read_text()
    (struct,) = re.findall(r"struct (\w+) : nnet::tessera_(?:lstm|gru|convlstm)_config", params)
    main = prj / "limits.cpp"
    main.write_text('#include <cstdio>\n#include "firmware/defines.h"\n#include "firmware/parameters.h"\nint main() {\n'
                    + "".join(f'    std::printf("%u\\n", (unsigned){struct}::{p}multiplier_limit);\n' for p in prefixes) + "}\n")
    subprocess.run([shutil.which("g++"), "-std=c++17", "-w", "-I.", "-Ifirmware", "-Ifirmware/ap_types", main.name,
                    "-o", "limits"], cwd=prj, check=True, capture_output=True)
    return [int(v) for v in subprocess.run([str(prj / "limits")], capture_output=True, text=True, check=True).stdout.split()]
