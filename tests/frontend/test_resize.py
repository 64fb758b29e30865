"""Nearest ``Resize`` of a 1D signal ``(N, C, L)`` by an integer factor (hls4ml's upsampling
tests build ``UpSampling1D`` / ``nn.Upsample`` on signals, test/pytest/test_upsampling*.py):
the ``upsample`` op on one spatial axis; and by fractional scales, or below 1 (hls4ml's
test_pytorch_upsampling2d, scale_factor=(1, 2.4)): per axis ``in[floor((j q + o) / p)]``, an
upsampling by ``p``, a crop from ``o`` and a max pool of kernel 1 and stride ``q``.  The exact
reference equals the file run in float64 on every output, and the C-simulation equals the
reference; an index map no such composite gives is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


def _resized(path, scales, in_shape, out_shape, transform="asymmetric", nearest="floor"):
    """Quant(x) -> Resize(nearest) -> Quant."""
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("sc", scales)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"),
             helper.make_node("Resize", ["xq", "", "sc"], ["r"], name="resize", mode="nearest",
                              coordinate_transformation_mode=transform, nearest_mode=nearest),
             _quant("r", "s_x", "zero", "b8", "y")]
    return _save(path, nodes, inits, in_shape, out_shape)


def test_a_signal_upsampled_by_an_integer_factor_is_exact(tmp_path):
    g = _exact_and_independent(_resized(tmp_path / "m.onnx", [1, 1, 3], [2, 5], [2, 15]), 500)
    assert [n.op for n in g.nodes][0] == "upsample" and g.values[g.output].shape == (2, 15)


@pytest.mark.parametrize("scales, in_shape, out_shape, transform, nearest, ops", [
    ([1, 1, 1.5], [2, 4], [2, 6], "asymmetric", "floor", ["upsample", "maxpool"]),
    ([1, 1, 1, 2.4], [2, 3, 8], [2, 3, 19], "asymmetric", "floor", ["upsample", "crop", "maxpool"]),
    ([1, 1, 0.5, 0.5], [2, 6, 8], [2, 3, 4], "half_pixel", "round_prefer_floor", ["maxpool"]),
    ([1, 1, 0.75], [3, 8], [3, 6], "pytorch_half_pixel", "round_prefer_ceil", ["upsample", "crop", "maxpool"]),
    ([1, 1, 1.25], [2, 8], [2, 10], "align_corners", "round_prefer_floor", ["upsample", "crop", "maxpool"]),
], ids=["1.5", "2.4_float32", "0.5_half_pixel", "0.75_pytorch", "1.25_align_corners"])
def test_fractional_and_downsampling_scales_are_exact(tmp_path, scales, in_shape, out_shape, transform, nearest, ops):
    """2.4 is float32 2.4000000954: output 12 of the 8 -> 19 map reads input 4, not 5 (12 / s < 5)."""
    g = _exact_and_independent(_resized(tmp_path / "m.onnx", scales, in_shape, out_shape, transform, nearest), 300)
    assert [n.op for n in g.nodes][:-1] == ops and g.values[g.output].shape == tuple(out_shape)


def test_an_index_map_no_pick_of_an_upsampling_gives_is_refused_in_one_line(tmp_path):
    refused_in_one_line(_resized(tmp_path / "m.onnx", [1, 1, 1.03], [2, 40], [2, 41]),
                        r"node 'resize' \(Resize\): attributes coordinate_transformation_mode='asymmetric', "
                        r"nearest_mode='floor' with scale 1.03 on spatial dim 0 read inputs \[0, 0, 1, 2, 3, 4, 5, 6\]"
                        r"\.\.\.; no upsampling by at most 32 and pick of every q-th element gives that index map")


def test_a_scale_that_leaves_no_output_is_refused_in_one_line(tmp_path):
    """Found by the oracle property: 0.5 of a length-1 axis (it raised an IndexError)."""
    refused_in_one_line(_resized(tmp_path / "m.onnx", [1, 1, 0.5], [2, 1], [2, 0]),
                        r"node 'resize' \(Resize\): scale 0.5 on spatial dim 0 of length 1 leaves no output "
                        r"\(floor\(1 x 0.5\) = 0\)")


def test_an_index_map_the_spec_and_onnxs_reference_read_differently_is_refused_in_one_line(tmp_path):
    """align_corners divides by the resized length less 1: the output's (10) in the spec's
    words, ``7 x 1.5 = 10.5`` in ONNX's reference evaluator; output 7 reads input 5 or 4."""
    refused_in_one_line(_resized(tmp_path / "m.onnx", [1, 1, 1.5], [2, 7], [2, 10], "align_corners",
                                 "round_prefer_ceil"),
                        r"node 'resize' \(Resize\): .* with scale 1.5 on spatial dim 0 \(7 -> 10\) reads input 5 or 4 "
                        r"for output 7 as the resized length is 10 \(the output's\) or 10.5 \(7 x 1.5\): the file's "
                        r"meaning is ambiguous")


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("scales, in_shape, out_shape", [([1, 1, 2], [3, 6], [3, 12]),
                                                         ([1, 1, 1, 2.4], [2, 3, 8], [2, 3, 19])],
                         ids=["signal_x2", "map_x2.4"])
def test_resize_csim_equals_reference_and_users_model(tmp_path, io_type, scales, in_shape, out_shape):
    """A signal upsampled by 2, and a map by (1, 2.4): in io_stream the pick is Tessera's pool
    kernel (hls4ml's stream pooling asserts stride == kernel: a kernel-1 stride-q pool lowered
    to it aborted the C-simulation)."""
    csim_verified(_resized(tmp_path / "m.onnx", scales, in_shape, out_shape), tmp_path / "prj", io_type, 200,
                  int(np.prod(out_shape)))
