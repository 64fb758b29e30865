"""A constant zero ``Pad`` before a Conv or an AveragePool, exactly (issue: real-world models),
and a ``reflect`` or ``edge`` Pad before any window op (issue 51).

Exporters (tf2onnx, ``F.pad``) write padding as its own node; its pads join the window op's
(for an average its zeros are data: the divisor counts them).  A reflect or edge Pad copies
codes: the ``pad`` op, on any codes (a float scale, a zero point, a value in flight).  Anything
else is refused in one line naming the Pad.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper


from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


def padded_model(path, consumer="Conv", opset=13, mode="constant", value=0.0, pool_scale=0.0213, pads=None,
                 input_scale=2.0**-4, input_zero=0.0):
    """Quant(x) -> Pad (H: 1 before, 0 after; W: 2, 1) -> Conv 3x3 / AveragePool 3x3 / MaxPool 3x3 -> Quant."""
    r = np.random.default_rng(0)
    pads = pads or [0, 0, 1, 2, 0, 0, 0, 1]
    inits = [_f("s_x", input_scale), _f("s_w", 2.0**-3), _f("s_y", pool_scale), _f("zero", 0.0), _f("b8", 8.0),
             _f("W", r.normal(0, 0.4, (3, 2, 3, 3))), _f("z_x", input_zero)]
    if opset >= 11:
        inits.append(helper.make_tensor("pads", 7, [8], pads))
        inits.append(_f("v", value))
        pad = helper.make_node("Pad", ["xq", "pads", "v"], ["p"], name="pad", mode=mode)
    else:
        pad = helper.make_node("Pad", ["xq"], ["p"], name="pad", mode=mode, pads=pads, value=value)
    nodes = [_quant("x", "s_x", "z_x", "b8", "xq"), pad]
    size = (6 + pads[2] + pads[6] - 2, 6 + pads[3] + pads[7] - 2)
    if consumer == "Conv":
        nodes += [_quant("W", "s_w", "zero", "b8", "Wq"), helper.make_node("Conv", ["p", "Wq"], ["c"], name="conv",
                                                                         kernel_shape=[3, 3])]
        out = (3, *size)
    elif consumer == "AveragePool":
        nodes.append(helper.make_node("AveragePool", ["p"], ["c"], name="pool", kernel_shape=[3, 3]))
        out = (2, *size)
    else:
        nodes.append(helper.make_node("MaxPool", ["p"], ["c"], name="pool", kernel_shape=[3, 3]))
        out = (2, *size)
    nodes.append(_quant("c", "s_y", "zero", "b8", "y"))
    return _save(path, nodes, inits, (2, 6, 6), out, opset=opset)


@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("consumer", ["Conv", "AveragePool"])
def test_zero_pad_before_a_window_op_is_exact(tmp_path, consumer, opset):
    g = _exact_and_independent(padded_model(tmp_path / "m.onnx", consumer, opset), 1000)
    window = next(n for n in g.nodes if n.op in ("conv", "avgpool"))
    assert window.attrs.pads == (1, 2, 0, 1)


@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("mode", ["reflect", "edge"])
@pytest.mark.parametrize("consumer", ["Conv", "AveragePool", "MaxPool"])
def test_reflect_and_edge_pads_are_exact(tmp_path, consumer, mode, opset):
    g = _exact_and_independent(padded_model(tmp_path / "m.onnx", consumer, opset, mode=mode), 500)
    (pad,) = [n for n in g.nodes if n.op == "pad"]
    assert pad.attrs.pads == (1, 2, 0, 1) and pad.attrs.mode.value == mode


def test_a_reflect_pad_of_codes_with_a_float_scale_and_zero_point_is_exact(tmp_path):
    """Copies keep the codes' meaning: a zero point needs no code for real 0."""
    g = _exact_and_independent(padded_model(tmp_path / "m.onnx", "Conv", mode="reflect", pool_scale=0.0213,
                                            input_scale=0.0371, input_zero=3.0), 500)
    assert any(n.op == "pad" for n in g.nodes)


def test_a_reflect_pad_of_a_value_in_flight_is_exact(tmp_path):
    """Conv -> Mul by per-channel constants (one negative) -> Pad reflect -> MaxPool -> Quant: the
    pad moves the accumulator's codes, the constants stay with their channels."""
    r = np.random.default_rng(0)
    inits = [_f("s_x", 2.0**-4), _f("s_w", 2.0**-3), _f("s_y", 0.0213), _f("zero", 0.0), _f("b8", 8.0),
             _f("W", r.normal(0, 0.4, (3, 2, 3, 3))), _f("k", np.array([0.7, -0.4, 1.3]).reshape(1, 3, 1, 1)),
             helper.make_tensor("pads", 7, [8], [0, 0, 1, 2, 0, 0, 2, 1])]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("W", "s_w", "zero", "b8", "Wq"),
             helper.make_node("Conv", ["xq", "Wq"], ["c"], name="conv", kernel_shape=[3, 3]),
             helper.make_node("Mul", ["c", "k"], ["m"], name="mul"),
             helper.make_node("Pad", ["m", "pads"], ["p"], name="pad", mode="reflect"),
             helper.make_node("MaxPool", ["p"], ["mp"], name="pool", kernel_shape=[2, 2]),
             _quant("mp", "s_y", "zero", "b8", "y")]
    g = _exact_and_independent(_save(tmp_path / "m.onnx", nodes, inits, (2, 6, 6), (3, 6, 6)), 500)
    assert [n.attrs.pads for n in g.nodes if n.op == "pad"] == [(1, 2, 2, 1)]


@pytest.mark.parametrize("kwargs,message", [
    ({"consumer": "MaxPool"}, "only a Pad read by exactly one Conv or AveragePool"),
    ({"value": 1.0}, "only a constant zero pad"),
    ({"mode": "wrap", "opset": 19}, "only a constant zero pad, or a reflect or edge pad"),
    ({"mode": "reflect", "pads": [0, 0, 6, 2, 0, 0, 0, 1]}, "reflect pads must be below the length"),
])
def test_other_pads_are_refused_in_one_line(tmp_path, kwargs, message):
    refused_in_one_line(padded_model(tmp_path / "m.onnx", **kwargs), rf"node 'pad'( \(Pad\))?: .*{message}")


@pytest.mark.csim
def test_pad_conv_csim_equals_reference_and_users_model(tmp_path):
    csim_verified(padded_model(tmp_path / "m.onnx"), tmp_path / "prj", "io_stream", 200, 3 * 5 * 7)
