"""Two branches joined elementwise: ``Max`` / ``Min`` (codes of power-of-two grids aligned by
exact shifts, or codes of one real meaning) and ``Sub`` (the residual merge with the second
branch's weight negated).  The exact reference equals the file run in float64 on every output,
and the C-simulation equals the reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


def _two_branches(path, join: str, float_scales: bool, same_quantizer: bool = True):
    """Quant(x) -> two 1x1 Convs, each -> Quant (the same quantizer, or a second scale) ->
    ``join`` -> Quant."""
    rng = np.random.default_rng(3)
    s_a = 0.0371 if float_scales else 0.0625
    s_b = s_a if same_quantizer else (0.0213 if float_scales else 0.125)
    inits = [_f("s_x", 0.0371 if float_scales else 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("s_a", s_a),
             _f("s_b", s_b), _f("s_y", 0.05 if float_scales else 0.125), _f("s_w", 0.125),
             _f("w1", rng.integers(-8, 8, (4, 3, 1, 1)) * 0.125), _f("w2", rng.integers(-8, 8, (4, 3, 1, 1)) * 0.125)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"),
             helper.make_node("Conv", ["xq", "w1"], ["c1"], name="conv1", kernel_shape=[1, 1]),
             helper.make_node("Conv", ["xq", "w2"], ["c2"], name="conv2", kernel_shape=[1, 1]),
             _quant("c1", "s_a", "zero", "b8", "a"), _quant("c2", "s_b", "zero", "b8", "b"),
             helper.make_node(join, ["a", "b"], ["j"], name="join"), _quant("j", "s_y", "zero", "b8", "y")]
    return _save(path, nodes, inits, [3, 4, 4], [4, 4, 4])


@pytest.mark.parametrize("join", ["Max", "Min"])
@pytest.mark.parametrize("float_scales,same_quantizer", [(False, True), (False, False), (True, True)])
def test_max_min_of_two_branches_is_exact(tmp_path, join, float_scales, same_quantizer):
    g = _exact_and_independent(_two_branches(tmp_path / "m.onnx", join, float_scales, same_quantizer), 1000)
    assert [n.op for n in g.nodes].count("maximum") == 1


def test_max_of_branches_on_two_real_scales_is_refused_in_one_line(tmp_path):
    refused_in_one_line(_two_branches(tmp_path / "m.onnx", "Max", True, False),
                        r"node 'join' \(Max\): its branches' codes have different real scales or zero points")


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_max_of_two_branches_csim_equals_reference_and_users_model(tmp_path, io_type):
    csim_verified(_two_branches(tmp_path / "m.onnx", "Max", False, False), tmp_path / "prj", io_type, 200, 64)


@pytest.mark.parametrize("float_scales,same_quantizer", [(False, True), (False, False), (True, True), (True, False)])
def test_sub_of_two_branches_is_exact(tmp_path, float_scales, same_quantizer):
    g = _exact_and_independent(_two_branches(tmp_path / "m.onnx", "Sub", float_scales, same_quantizer), 1000)
    (merge,) = [n for n in g.nodes if n.op == "add"]
    assert min(merge.attrs.k2) < 0 < min(merge.attrs.k1)


@pytest.mark.csim
@pytest.mark.parametrize("io_type,float_scales", [("io_parallel", True), ("io_stream", False)])
def test_sub_of_two_branches_csim_equals_reference_and_users_model(tmp_path, io_type, float_scales):
    csim_verified(_two_branches(tmp_path / "m.onnx", "Sub", float_scales, False), tmp_path / "prj", io_type, 200, 64)
