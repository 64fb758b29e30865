"""A constant zero ``Pad`` before a Conv or an AveragePool, exactly (issue: real-world models).

Exporters (tf2onnx, ``F.pad``) write padding as its own node; its pads join the window op's
(for an average its zeros are data: the divisor counts them).  Anything else is refused in one
line naming the Pad.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper


from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


def padded_model(path, consumer="Conv", opset=13, mode="constant", value=0.0, pool_scale=0.0213):
    """Quant(x) -> Pad (H: 1 before, 0 after; W: 2, 1) -> Conv 3x3 / AveragePool 3x3 -> Quant."""
    r = np.random.default_rng(0)
    pads = [0, 0, 1, 2, 0, 0, 0, 1]
    inits = [_f("s_x", 2.0**-4), _f("s_w", 2.0**-3), _f("s_y", pool_scale), _f("zero", 0.0), _f("b8", 8.0),
             _f("W", r.normal(0, 0.4, (3, 2, 3, 3)))]
    if opset >= 11:
        inits.append(helper.make_tensor("pads", 7, [8], pads))
        inits.append(_f("v", value))
        pad = helper.make_node("Pad", ["xq", "pads", "v"], ["p"], name="pad", mode=mode)
    else:
        pad = helper.make_node("Pad", ["xq"], ["p"], name="pad", mode=mode, pads=pads, value=value)
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), pad]
    if consumer == "Conv":
        nodes += [_quant("W", "s_w", "zero", "b8", "Wq"), helper.make_node("Conv", ["p", "Wq"], ["c"], name="conv",
                                                                         kernel_shape=[3, 3])]
        out = (3, 5, 7)
    elif consumer == "AveragePool":
        nodes.append(helper.make_node("AveragePool", ["p"], ["c"], name="pool", kernel_shape=[3, 3]))
        out = (2, 5, 7)
    else:
        nodes.append(helper.make_node("MaxPool", ["p"], ["c"], name="pool", kernel_shape=[3, 3]))
        out = (2, 5, 7)
    nodes.append(_quant("c", "s_y", "zero", "b8", "y"))
    return _save(path, nodes, inits, (2, 6, 6), out, opset=opset)


@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("consumer", ["Conv", "AveragePool"])
def test_zero_pad_before_a_window_op_is_exact(tmp_path, consumer, opset):
    g = _exact_and_independent(padded_model(tmp_path / "m.onnx", consumer, opset), 1000)
    window = next(n for n in g.nodes if n.op in ("conv", "avgpool"))
    assert window.attrs.pads == (1, 2, 0, 1)


@pytest.mark.parametrize("kwargs,message", [
    ({"consumer": "MaxPool"}, "only a Pad read by exactly one Conv or AveragePool"),
    ({"value": 1.0}, "only a constant zero pad"),
    ({"mode": "reflect"}, "only a constant zero pad"),
])
def test_other_pads_are_refused_in_one_line(tmp_path, kwargs, message):
    refused_in_one_line(padded_model(tmp_path / "m.onnx", **kwargs), rf"node 'pad' \(Pad\): .*{message}")


@pytest.mark.csim
def test_pad_conv_csim_equals_reference_and_users_model(tmp_path):
    csim_verified(padded_model(tmp_path / "m.onnx"), tmp_path / "prj", "io_stream", 200, 3 * 5 * 7)
