"""Nearest ``Resize`` of a 1D signal ``(N, C, L)`` by an integer factor (hls4ml's upsampling
tests build ``UpSampling1D`` / ``nn.Upsample`` on signals, test/pytest/test_upsampling*.py):
the ``upsample`` op on one spatial axis.  The exact reference equals the file run in float64 on
every output, and the C-simulation equals the reference; fractional scales are refused in one
line."""

from __future__ import annotations

import pytest
from onnx import helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


def _resized(path, scales, in_shape, out_shape):
    """Quant(x) -> Resize(nearest, asymmetric, floor) -> Quant."""
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("sc", scales)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"),
             helper.make_node("Resize", ["xq", "", "sc"], ["r"], name="resize", mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             _quant("r", "s_x", "zero", "b8", "y")]
    return _save(path, nodes, inits, in_shape, out_shape)


def test_a_signal_upsampled_by_an_integer_factor_is_exact(tmp_path):
    g = _exact_and_independent(_resized(tmp_path / "m.onnx", [1, 1, 3], [2, 5], [2, 15]), 500)
    assert [n.op for n in g.nodes][0] == "upsample" and g.values[g.output].shape == (2, 15)


def test_fractional_scales_are_refused_in_one_line(tmp_path):
    refused_in_one_line(_resized(tmp_path / "m.onnx", [1, 1, 1.5], [2, 4], [2, 6]),
                        r"node 'resize' \(Resize\): needs constant integer scales >= 1 on spatial dims only")


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_signal_upsampling_csim_equals_reference_and_users_model(tmp_path, io_type):
    csim_verified(_resized(tmp_path / "m.onnx", [1, 1, 2], [3, 6], [3, 12]), tmp_path / "prj", io_type, 200, 36)
