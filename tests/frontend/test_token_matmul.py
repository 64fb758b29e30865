"""``MatMul`` over a sequence of tokens, ``(N, T, C) @ (C, K)`` as in a transformer block: each
token through the same weights, a 1x1 convolution over the tokens between two transposes that
only relabel the buffer; a constant Add after it is its bias.  The exact reference equals the
file run in float64 on every output, and the C-simulation equals the reference in both io
types.  A bias after float-scaled token sums is a per-feature offset of the convolution's
accumulator: the Quant after it rounds per feature, then the transpose back moves its codes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line

TOKENS, FEATURES, OUT = 5, 6, 4


def _tokens(path, float_weights: bool = False, bias: bool = False, second: bool = False):
    """Quant(x (N, T, C)) -> MatMul(Quant(W)) [-> Add(b)] -> Quant [-> MatMul -> Quant]."""
    rng = np.random.default_rng(2)
    ws = 0.0371 if float_weights else 0.125
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("s_w", ws), _f("s_y", 0.125),
             _f("w", rng.integers(-8, 8, (FEATURES, OUT)) * ws), _f("b", rng.integers(-8, 8, OUT) * 0.0625),
             _f("w2", rng.integers(-8, 8, (OUT, 3)) * 0.125), _f("s_w2", 0.125)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("w", "s_w", "zero", "b8", "wq"),
             helper.make_node("MatMul", ["xq", "wq"], ["m"], name="tokens")]
    if bias:
        nodes.append(helper.make_node("Add", ["m", "b"], ["mb"], name="bias"))
    nodes.append(_quant("mb" if bias else "m", "s_y", "zero", "b8", "h" if second else "y"))
    if second:
        nodes += [_quant("w2", "s_w2", "zero", "b8", "w2q"), helper.make_node("MatMul", ["h", "w2q"], ["m2"], name="m2"),
                  _quant("m2", "s_y", "zero", "b8", "y")]
    return _save(path, nodes, inits, [TOKENS, FEATURES], [TOKENS, 3 if second else OUT])


@pytest.mark.parametrize("float_weights,bias,second", [(False, False, False), (False, True, False), (True, False, False),
                                                       (False, True, True), (True, True, False), (True, True, True)])
def test_matmul_over_tokens_is_exact(tmp_path, float_weights, bias, second):
    g = _exact_and_independent(_tokens(tmp_path / "m.onnx", float_weights, bias, second), 1000)
    convs = [n for n in g.nodes if n.op == "conv"]
    assert len(convs) == (2 if second else 1) and (convs[0].attrs.bias is not None) == (bias and not float_weights)
    assert g.values[g.output].shape == (TOKENS, 3 if second else OUT)


def test_a_bias_after_float_scaled_token_sums_is_rounded_per_feature_before_the_transpose(tmp_path):
    g = _exact_and_independent(_tokens(tmp_path / "m.onnx", float_weights=True, bias=True), 1000)
    assert [n.op for n in g.nodes] == ["transpose", "conv", "rescale", "transpose"]
    assert len(g.nodes[2].attrs.steps) == OUT  # one step per feature: the bias differs per feature


def test_a_bias_after_float_scaled_token_sums_read_by_another_op_is_refused_in_one_line(tmp_path):
    path = _tokens(tmp_path / "m.onnx", float_weights=True, bias=True)
    m = onnx.load(str(path))
    quant = next(n for n in m.graph.node if n.input[0] == "mb")
    relu = helper.make_node("Relu", ["mb"], ["mr"], name="relu")
    quant.input[0] = "mr"
    m.graph.node.insert(list(m.graph.node).index(quant), relu)
    onnx.save(m, str(path))
    refused_in_one_line(path, r"node 'bias' \(Add\): a constant of shape \[4\] after float-scaled sums over tokens is "
                              r"supported as their bias \(one value per output feature, 4\) before a Quant or as the "
                              r"graph output only")


def test_a_bias_after_float_scaled_token_sums_at_the_graph_output_keeps_each_features_meaning(tmp_path):
    """No Quant after the biased sums (a per-step head's logits, brevitas' QuantLinear on a
    sequence): the transpose moves the accumulator, each output element keeps its feature's
    scale and offset (one per element), and the output equals the file on its code grid."""
    path = _tokens(tmp_path / "m.onnx", float_weights=True, bias=True)
    m = onnx.load(str(path))
    last = next(n for n in m.graph.node if n.output[0] == "y")
    m.graph.node.remove(last)
    next(n for n in m.graph.node if n.output[0] == "mb").output[0] = "y"
    onnx.save(m, str(path))
    g = _exact_and_independent(path, 1000)
    assert [n.op for n in g.nodes] == ["transpose", "conv", "transpose"]
    meaning = g.scales[g.output]
    zeros = np.array(meaning.zero, dtype=object).reshape(TOKENS, OUT)  # token-major: each token's features
    assert meaning.accumulator and (zeros == zeros[0]).all() and len(set(zeros[0])) > 1


@pytest.mark.csim
@pytest.mark.parametrize("io_type, float_weights", [("io_parallel", False), ("io_stream", True)])
def test_matmul_over_tokens_csim_equals_reference_and_users_model(tmp_path, io_type, float_weights):
    csim_verified(_tokens(tmp_path / "m.onnx", float_weights, bias=True, second=True), tmp_path / "prj", io_type, 200,
                  TOKENS * 3)


def test_a_matmul_over_the_length_of_a_signal_is_refused_at_compile_in_one_line(tmp_path):
    """``(N, C, L) @ (L, K)`` after a Conv1D: the signal is stored channels-last, not token by
    token, so the 1x1 convolution would read it in the wrong order: compile refuses it (the
    C-simulation would differ from the reference on most outputs)."""
    from tessera.compiler import api
    from tessera.compiler.errors import UnsupportedModelError

    rng = np.random.default_rng(3)
    inits = [_f("s_x", 0.0625), _f("zero", 0.0), _f("b8", 8.0), _f("s_w", 0.125), _f("s_y", 0.125),
             _f("wc", rng.integers(-8, 8, (3, 3, 3)) * 0.125), _f("w", rng.integers(-8, 8, (6, 4)) * 0.125)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("wc", "s_w", "zero", "b8", "wcq"),
             helper.make_node("Conv", ["xq", "wcq"], ["c"], name="conv", kernel_shape=[3], pads=[1, 1]),
             _quant("c", "s_y", "zero", "b8", "cq"), _quant("w", "s_w", "zero", "b8", "wq"),
             helper.make_node("MatMul", ["cq", "wq"], ["m"], name="over_length"), _quant("m", "s_y", "zero", "b8", "y")]
    path = _save(tmp_path / "m.onnx", nodes, inits, [3, 6], [3, 4])
    with pytest.raises(UnsupportedModelError, match=r"node 'over_length': a convolution over a tensor that is not "
                                                     r"stored channels-last") as info:
        api.compile_model(path, tmp_path / "prj", api.CompileOptions())
    assert "\n" not in str(info.value) and not (tmp_path / "prj").exists()
