"""Values moved before the layer that reads them, as brevitas exports them around a QuantLSTM:
a ``Transpose`` or ``Reshape`` of a quantized constant (a QuantLinear's ``Transpose(Quant(W))``
before its MatMul: the constant moved, its codes and scales with it, qonnx's
FoldTransposeIntoQuantInit), and a 1D map in flight whose channels have their own constants (a
QuantConv1d's bias, ``return_quant_tensor=False``) permuted into a sequence ``(N, T, C)``: the
transpose waits for the Quant after it.  Each is exact and equal to the file run in float64 on
every output, or refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, refused_in_one_line


def _ints(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


@pytest.mark.parametrize("float_scale", [False, True])
@pytest.mark.parametrize("move", ["transpose", "reshape"])
def test_a_moved_quantized_weight_is_the_quantized_moved_weight(tmp_path, float_scale, move):
    """Quant(x) -> MatMul(x, move(Quant(W))) -> Quant, W stored (4, 6) (transposed to (6, 4)) or
    flat (reshaped to (6, 4)), on a power-of-two or a float scale."""
    rng = np.random.default_rng(4)
    s_w = 0.0371 if float_scale else 0.125
    w = rng.integers(-8, 8, (6, 4)) * s_w
    stored = w.T if move == "transpose" else w.reshape(-1)
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("s_w", s_w), _f("s_y", 0.25), _f("w", stored),
             _ints("shape", [6, 4])]
    moved = helper.make_node("Transpose", ["wq"], ["wt"], name="move", perm=[1, 0]) if move == "transpose" else \
        helper.make_node("Reshape", ["wq", "shape"], ["wt"], name="move")
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("w", "s_w", "zero", "b8", "wq"), moved,
             helper.make_node("MatMul", ["xq", "wt"], ["m"], name="fc"), _quant("m", "s_y", "zero", "b8", "y")]
    g = _exact_and_independent(_save(tmp_path / "m.onnx", nodes, inits, [6], [4]), 1000)
    assert [n.op for n in g.nodes][-2:] in (["dense", "requant"], ["dense", "rescale"])


def test_a_constant_reshaped_to_a_shape_it_cannot_take_is_refused_in_one_line(tmp_path):
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("w", np.ones(24) * 0.125), _ints("shape", [5, 4])]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("w", "s_x", "zero", "b8", "wq"),
             helper.make_node("Reshape", ["wq", "shape"], ["wt"], name="move"),
             helper.make_node("MatMul", ["xq", "wt"], ["y"], name="fc")]
    refused_in_one_line(_save(tmp_path / "m.onnx", nodes, inits, [5], [4]),
                        r"node 'move' \(Reshape\): a constant of shape \[24\] cannot take the shape \[5, 4\]")


def _conv1d_permuted(path, relu: bool = False):
    """Quant(x (3, 7)) -> Conv1d(Quant(W), bias per channel) -> Transpose(0, 2, 1) [-> Relu]
    -> Quant on a float scale: a map in flight, its channels' offsets apart, permuted."""
    rng = np.random.default_rng(8)
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("s_w", 0.043), _f("s_y", 0.0517),
             _f("w", rng.integers(-8, 8, (4, 3, 3)) * 0.043), _f("b", rng.uniform(-0.5, 0.5, 4))]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("w", "s_w", "zero", "b8", "wq"),
             helper.make_node("Conv", ["xq", "wq", "b"], ["c"], name="conv", kernel_shape=[3]),
             helper.make_node("Transpose", ["c"], ["t"], name="permute", perm=[0, 2, 1])]
    if relu:
        nodes.append(helper.make_node("Relu", ["t"], ["r"], name="relu"))
    nodes.append(_quant("r" if relu else "t", "s_y", "zero", "b8", "y"))
    return _save(path, nodes, inits, [3, 7], [5, 4])


def test_a_map_in_flight_permuted_into_a_sequence_is_rounded_before_the_transpose(tmp_path):
    g = _exact_and_independent(_conv1d_permuted(tmp_path / "m.onnx"), 1000)
    assert [n.op for n in g.nodes][-2:] == ["rescale", "transpose"]
    assert len(g.nodes[-2].attrs.steps) == 4  # one step per channel: the bias differs per channel
    assert g.values[g.output].shape == (5, 4)


def test_a_permuted_map_in_flight_read_by_another_op_is_refused_in_one_line(tmp_path):
    refused_in_one_line(_conv1d_permuted(tmp_path / "m.onnx", relu=True),
                        r"node 'permute' \(Transpose\): moves the channels of 'conv', whose real scales or offsets "
                        r"differ per channel, apart; requantize it \(a Quant\) first")
