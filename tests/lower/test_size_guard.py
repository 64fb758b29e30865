"""The design-size guard (lower/arrays.py): io_parallel's completely partitioned arrays against
the project's maximum_size and the part's flip-flops."""

from __future__ import annotations

import re

import pytest

from tessera.compiler import api
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.ir.types import FixedType
from tessera.compiler.lower.arrays import HLS4ML_MAXIMUM_SIZE, partitioned_arrays, size_guard
from tessera.compiler.lower.hls4ml_lower import HlsOptions
from tessera.compiler.ops import conv, relu
from tessera.compiler.project import Manifest
from tessera.compiler.writer import write_project


@pytest.fixture
def wide_conv(make_graph, make_type, rng):
    """A conv whose 8 x 24 x 24 output (4,608 values) exceeds hls4ml's 4,096."""
    w = rng.integers(-7, 7, size=(8, 1, 3, 3), endpoint=True)
    return make_graph(make_type(6, 5, False, (1, 24, 24)),
                      ("conv", conv.Attrs(w, FixedType(4, 3, True), None, None, (1, 1), (1, 1, 1, 1))),
                      ("relu", relu.Attrs()))


def tcl_maximum_size(prj) -> int:
    return int(re.search(r"set maximum_size (\d+)", (prj / "project.tcl").read_text()).group(1))


def test_arrays_are_the_input_and_every_output(wide_conv):
    arrays = partitioned_arrays(wide_conv, "io_parallel")
    assert [a.layer for a in arrays] == ["input", *(n.name for n in wide_conv.nodes)]
    assert arrays[1].elements == 8 * 24 * 24
    assert arrays[1].bits == arrays[1].elements * wide_conv.values[wide_conv.nodes[0].output].ftype.width
    assert partitioned_arrays(wide_conv, "io_stream") == []


def test_maximum_size_is_raised_with_a_notice_naming_the_layer(wide_conv, tmp_path):
    prj = write_project(wide_conv, None, tmp_path / "prj", HlsOptions(io_type="io_parallel"), tb_samples=2)
    assert tcl_maximum_size(prj) == 8 * 24 * 24
    notices = list(Manifest.read(prj).notices)
    assert len(notices) == 1 and "maximum_size raised from 4096 to 4608" in notices[0]
    assert f"'{wide_conv.nodes[0].name}'" in notices[0] and "\n" not in notices[0]
    assert api.notices(prj) == notices


def test_small_designs_and_streams_keep_hls4ml_default(make_graph, make_type, wide_conv, tmp_path):
    small = make_graph(make_type(8, 4, True, (64,)), ("relu", relu.Attrs()))
    assert size_guard(small, "io_parallel").notice is None
    prj = write_project(wide_conv, None, tmp_path / "s", HlsOptions(io_type="io_stream"), tb_samples=2)
    assert tcl_maximum_size(prj) == HLS4ML_MAXIMUM_SIZE
    assert Manifest.read(prj).notices == ()


def test_registers_beyond_the_part_are_refused_in_one_line(wide_conv, tmp_path):
    total = sum(a.bits for a in partitioned_arrays(wide_conv, "io_parallel"))
    size_guard(wide_conv, "io_parallel", register_bits=total, part="p")  # exactly fits
    with pytest.raises(UnsupportedModelError) as err:
        write_project(wide_conv, None, tmp_path / "prj", HlsOptions(io_type="io_parallel", register_bits=total - 1),
                      tb_samples=2)
    msg = str(err.value)
    assert "\n" not in msg and f"'{wide_conv.nodes[0].name}'" in msg and "--io-type stream" in msg
    assert f"{total:,} bits" in msg and not (tmp_path / "prj").exists()


def test_hls_options_take_the_register_budget_from_the_part(wide_conv):
    from tessera.compiler.estimate.parts import get_part

    assert api.hls_options(wide_conv, api.CompileOptions(part="zu9eg")).register_bits == int(get_part("zu9eg").ff * api.REGISTER_UTILIZATION)
    assert api.hls_options(wide_conv, api.CompileOptions(part="xc7z020clg400-1")).register_bits is None
