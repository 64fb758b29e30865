"""GlobalMaxPool (the maximum of each channel over its spatial positions), exactly, on codes
with a float scale (a Brevitas default ``QuantReLU`` before it), in 2D and 3D."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified


def global_max_pool_net(path, dims=2):
    """``x -> Quant -> Conv (float weight scale) -> Relu -> Quant (float scale) ->
    GlobalMaxPool -> Flatten -> MatMul`` with float logits."""
    r = np.random.default_rng(7)
    k = (3,) * dims
    inits = [_f("W", r.normal(0, 0.3, (4, 2, *k))), _f("s_x", 0.043), _f("s_w", 0.021), _f("zero", 0.0),
             _f("b8", 8.0), _f("b4", 4.0), _f("s_h", 0.0519), _f("W2", r.normal(0, 0.4, (4, 3))), _f("s_w2", 0.07)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("W", "s_w", "zero", "b4", "Wq", narrow=1),
             _quant("W2", "s_w2", "zero", "b4", "W2q", narrow=1),
             helper.make_node("Conv", ["xq", "Wq"], ["c"], name="Conv_1", pads=[1] * (2 * dims)),
             helper.make_node("Relu", ["c"], ["r"], name="Relu_1"),
             _quant("r", "s_h", "zero", "b4", "h", signed=0),
             helper.make_node("GlobalMaxPool", ["h"], ["g"], name="GlobalMaxPool_1"),
             helper.make_node("Flatten", ["g"], ["f"], name="Flatten_1", axis=1),
             helper.make_node("MatMul", ["f", "W2q"], ["y"], name="MatMul_1")]
    return _save(path, nodes, inits, (2, *(5,) * dims), (3,))


@pytest.mark.parametrize("dims", [2, 3])
def test_global_max_pool_is_exact(tmp_path, dims):
    g = _exact_and_independent(global_max_pool_net(tmp_path / "m.onnx", dims), 1000)
    (pool,) = [n for n in g.nodes if n.op == "maxpool"]
    assert pool.attrs.kernel == pool.attrs.strides == (5,) * dims
    assert g.values[pool.output].shape == (4,) + (1,) * dims


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_global_max_pool_csim_equals_reference_and_users_model(tmp_path, io_type):
    csim_verified(global_max_pool_net(tmp_path / "m.onnx"), tmp_path / "prj", io_type, 300, 3)
