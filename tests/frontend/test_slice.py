"""ONNX ``Slice`` with positive steps: a box of channels and spatial positions (the ``crop``
op, the partitioner's own), codes copied; codes with a real meaning per channel keep the kept
channels' meanings.  The exact reference equals the file run in float64 on every output, and
the C-simulation equals the reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


def _ints(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def _sliced(path, starts, ends, axes, out_shape, steps=None, per_channel=False):
    """Quant(x) -> 1x1 Conv -> Quant (per-channel float scales, or 2**-3) -> Slice -> Quant."""
    rng = np.random.default_rng(5)
    scale = (rng.uniform(0.02, 0.06, (1, 4, 1, 1)) if per_channel else 0.125)
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("s_c", scale), _f("s_y", 0.0625), _f("s_w", 0.125),
             _f("w", rng.integers(-8, 8, (4, 3, 1, 1)) * 0.125), _ints("st", starts), _ints("en", ends), _ints("ax", axes)]
    names = ["c", "st", "en", "ax"]
    if steps is not None:
        inits.append(_ints("sp", steps))
        names.append("sp")
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("w", "s_w", "zero", "b8", "wq"),
             helper.make_node("Conv", ["xq", "wq"], ["a"], name="conv", kernel_shape=[1, 1]),
             _quant("a", "s_c", "zero", "b8", "c"), helper.make_node("Slice", names, ["s"], name="slice"),
             _quant("s", "s_y", "zero", "b8", "y")]
    return _save(path, nodes, inits, [3, 6, 6], out_shape)


@pytest.mark.parametrize("starts,ends,axes,out_shape", [
    ([1], [3], [1], [2, 6, 6]),  # channels
    ([1, 0], [5, -1], [2, 3], [4, 4, 5]),  # rows and columns, a negative end
    ([2, 1], [100, 4], [1, -1], [2, 6, 3]),  # an end past the channels (clamped), a negative axis
])
@pytest.mark.parametrize("per_channel", [False, True])
def test_slice_is_exact(tmp_path, starts, ends, axes, out_shape, per_channel):
    g = _exact_and_independent(_sliced(tmp_path / "m.onnx", starts, ends, axes, out_shape, per_channel=per_channel), 1000)
    assert "crop" in [n.op for n in g.nodes]


@pytest.mark.parametrize("starts,ends,axes,steps,out_shape", [
    ([0], [6], [2], [2], [4, 3, 6]),  # every other row
    ([0], [4], [1], [3], [2, 6, 6]),  # channels 0 and 3
    ([0, 1], [6, 6], [2, 3], [2, 2], [4, 3, 3]),  # rows 0, 2, 4 and columns 1, 3, 5
    ([-1], [2**62], [3], [4], [4, 6, 1]),  # from the last column on: one
])
@pytest.mark.parametrize("per_channel", [False, True])
def test_a_slice_with_positive_steps_is_exact(tmp_path, starts, ends, axes, steps, out_shape, per_channel):
    g = _exact_and_independent(_sliced(tmp_path / "m.onnx", starts, ends, axes, out_shape, steps=steps,
                                       per_channel=per_channel), 1000)
    (crop,) = [n for n in g.nodes if n.op == "crop"]
    assert g.values[crop.output].shape == tuple(out_shape) == g.values[g.output].shape


def test_a_slice_with_a_negative_step_is_refused_in_one_line(tmp_path):
    refused_in_one_line(_sliced(tmp_path / "m.onnx", [5], [0], [2], [4, 5, 6], steps=[-1]),
                        r"node 'slice' \(Slice\): steps=\[-1\] are not supported \(only positive steps\)")


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_slice_csim_equals_reference_and_users_model(tmp_path, io_type):
    csim_verified(_sliced(tmp_path / "m.onnx", [1, 1], [3, 5], [1, 2], [2, 4, 6], per_channel=True), tmp_path / "prj",
                  io_type, 200, 48)


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_strided_slice_csim_equals_reference_and_users_model(tmp_path, io_type):
    """Channels 0 and 2, rows 0, 2, 4, columns 1, 3, 5: the kernel's steps on every axis."""
    csim_verified(_sliced(tmp_path / "m.onnx", [0, 0, 1], [4, 6, 6], [1, 2, 3], [2, 3, 3], steps=[2, 2, 2],
                          per_channel=True), tmp_path / "prj", io_type, 200, 18)


def _split(path, opset: int, sizes=None):
    """Quant(x) -> 1x1 Conv -> Quant -> Split of the channels in two -> Max of the halves -> Quant."""
    rng = np.random.default_rng(6)
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("s_c", 0.125), _f("s_y", 0.0625), _f("s_w", 0.125),
             _f("w", rng.integers(-8, 8, (4, 3, 1, 1)) * 0.125)]
    split_inputs, split_attrs = ["c"], {"axis": 1}
    if sizes is not None and opset >= 13:
        inits.append(_ints("sizes", sizes))
        split_inputs.append("sizes")
    elif sizes is not None:
        split_attrs["split"] = sizes
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("w", "s_w", "zero", "b8", "wq"),
             helper.make_node("Conv", ["xq", "wq"], ["a"], name="conv", kernel_shape=[1, 1]),
             _quant("a", "s_c", "zero", "b8", "c"), helper.make_node("Split", split_inputs, ["h1", "h2"], name="split",
                                                                     **split_attrs),
             helper.make_node("Max", ["h1", "h2"], ["m"], name="max"), _quant("m", "s_y", "zero", "b8", "y")]
    return _save(path, nodes, inits, [3, 6, 6], [2, 6, 6], opset=opset)


@pytest.mark.parametrize("opset,sizes", [(13, None), (13, [2, 2]), (11, [2, 2])])
def test_split_into_slices_is_exact(tmp_path, opset, sizes):
    g = _exact_and_independent(_split(tmp_path / "m.onnx", opset, sizes), 1000)
    assert [n.op for n in g.nodes].count("crop") == 2


def test_a_split_that_does_not_add_up_is_refused_in_one_line(tmp_path):
    refused_in_one_line(_split(tmp_path / "m.onnx", 13, [1, 2]),
                        r"node 'split' \(Split\): sizes \[1, 2\] along axis 1 of shape \[1, 4, 6, 6\] into 2 outputs")


def test_bounds_that_are_not_one_pair_per_distinct_axis_are_refused_in_one_line(tmp_path):
    refused_in_one_line(_sliced(tmp_path / "m.onnx", [1, 0], [3, 2], [1], [2, 6, 6]),
                        r"node 'slice' \(Slice\): starts=\[1, 0\], ends=\[3, 2\], axes=\[1\] and steps=\[1, 1\] are not one "
                        r"bound pair per distinct axis")


def test_slice_of_opset_9_reads_its_attributes(tmp_path):
    """Before opset 10 the bounds are attributes."""
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"),
             helper.make_node("Slice", ["xq"], ["y"], name="slice", starts=[1, 2], ends=[3, 100], axes=[1, 3])]
    g = _exact_and_independent(_save(tmp_path / "m.onnx", nodes, inits, [4, 5, 6], [2, 5, 4], opset=9), 300)
    assert g.values[g.output].shape == (2, 5, 4)


def test_equal_parts_that_do_not_divide_the_axis_before_opset_18_are_refused_in_one_line(tmp_path):
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"),
             helper.make_node("Split", ["xq"], ["h1", "h2"], name="split", axis=1),
             helper.make_node("Max", ["h1", "h2"], ["y"], name="max")]
    refused_in_one_line(_save(tmp_path / "m.onnx", nodes, inits, [3, 4, 4], [1, 4, 4]),
                        r"node 'split' \(Split\): sizes \[\] along axis 1 of shape \[1, 3, 4, 4\] into 2 outputs")
