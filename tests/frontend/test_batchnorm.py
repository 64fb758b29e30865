"""``BatchNormalization`` not after a multiply-accumulate: on the codes of a Quant or a MaxPool,
its folded affine ``A_c * x + B_c`` (float64 once, docs/bit-exact.md) in flight until the next
Quant rounds it (one proven ``rescale``).  A layer reading the normalized real values directly,
with no Quant between them, is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line

CHANNELS = 3


def _batchnorm(path, after: str):
    """Quant(x) [-> MaxPool] -> BatchNormalization -> Quant, or -> Conv -> Quant (``after`` =
    "quant", "maxpool", "conv")."""
    rng = np.random.default_rng(1)
    inits = [_f("s_x", 0.0371), _f("zero", 0.0), _f("b8", 8.0), _f("s_y", 0.05), _f("s_w", 0.125),
             _f("g", rng.uniform(0.5, 2, CHANNELS)), _f("b", rng.uniform(-1, 1, CHANNELS)),
             _f("m", rng.uniform(-1, 1, CHANNELS)), _f("v", rng.uniform(0.1, 2, CHANNELS)),
             _f("w", rng.integers(-8, 8, (4, CHANNELS, 3, 3)) * 0.125)]
    nodes, src, out = [_quant("x", "s_x", "zero", "b8", "xq")], "xq", [CHANNELS, 4, 4]
    if after == "maxpool":
        nodes.append(helper.make_node("MaxPool", ["xq"], ["mp"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
        src, out = "mp", [CHANNELS, 2, 2]
    nodes.append(helper.make_node("BatchNormalization", [src, "g", "b", "m", "v"], ["bn"], name="bn", epsilon=1e-5))
    if after == "conv":
        nodes += [_quant("w", "s_w", "zero", "b8", "wq"),
                  helper.make_node("Conv", ["bn", "wq"], ["c"], name="conv", kernel_shape=[3, 3])]
        src, out = "c", [4, 2, 2]
    else:
        src = "bn"
    nodes.append(_quant(src, "s_y", "zero", "b8", "y"))
    return _save(path, nodes, inits, [CHANNELS, 4, 4], out)


@pytest.mark.parametrize("after,ops", [("quant", ["rescale"]), ("maxpool", ["maxpool", "rescale"])])
def test_batchnorm_on_codes_is_exact(tmp_path, after, ops):
    g = _exact_and_independent(_batchnorm(tmp_path / "m.onnx", after), 2000)
    assert [n.op for n in g.nodes] == ops


def test_a_layer_reading_the_normalized_values_is_refused_in_one_line(tmp_path):
    refused_in_one_line(_batchnorm(tmp_path / "m.onnx", "conv"),
                        r"node 'conv' \(Conv\) reads the real-valued output of 'bn' \(scaled by real constants\) that no "
                        r"Quant requantizes")


@pytest.mark.csim
def test_batchnorm_on_codes_csim_equals_reference_and_users_model(tmp_path):
    csim_verified(_batchnorm(tmp_path / "m.onnx", "maxpool"), tmp_path / "prj", "io_stream", 300, CHANNELS * 4)
