"""A Softmax that is not the graph's one output: refused in one line naming the node, where its
output goes and why (a float Softmax over a row has no exact finite table); a trailing one is
compiled up to its logits (``test_real_constants.py::test_trailing_softmax_is_compiled_up_to_its_logits``)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tessera.compiler.api import load_model
from tessera.compiler.errors import UnsupportedModelError

from ..conformance.cases import QONNX_DOMAIN, _const, _graph, _quant

WHY = ("a float Softmax over a row has no exact finite table (each output, exp(x_i) / sum_j exp(x_j), reads the "
       "whole row and is irrational unless the row's values are all equal); only a Softmax producing the graph's "
       "one output is compiled (the design then outputs its logits)")


def _logits(extra: list) -> tuple[list, list]:
    """Quant(x) of (6,), a MatMul by 4-bit weights: the logits ``mm`` (4,); then ``extra``."""
    nodes = [_quant("x", "xq", "s", "zero", "bits"), _quant("w", "wq", "s_w", "zero", "bits_w"),
             helper.make_node("MatMul", ["xq", "wq"], ["mm"], name="MatMul_0"), *extra]
    inits = [_const("s", 2.0**-4), _const("zero", 0.0), _const("bits", 8.0), _const("s_w", 2.0**-3),
             _const("bits_w", 4.0), _const("w", np.random.default_rng(0).integers(-8, 8, (6, 4)) / 8)]
    return nodes, inits


def _refusal(path) -> str:
    with pytest.raises(UnsupportedModelError) as info:
        load_model(path)
    text = str(info.value)
    assert "\n" not in text
    return text


def test_a_softmax_read_by_a_quant_is_refused_in_one_line(tmp_path):
    nodes, inits = _logits([helper.make_node("Softmax", ["mm"], ["p"], name="Softmax_0", axis=-1),
                            _quant("p", "y", "s", "zero", "bits")])
    text = _refusal(_graph(tmp_path / "m.onnx", nodes, inits, (6,), (4,)))
    assert text == f"node 'Softmax_0' (Softmax): its output is read by node 'Quant_y', and {WHY}"


def test_a_softmax_beside_another_output_is_refused_in_one_line(tmp_path):
    nodes, inits = _logits([_quant("mm", "logits", "s", "zero", "bits"),
                            helper.make_node("Softmax", ["logits"], ["y"], name="Softmax_0", axis=1)])
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("logits", "y")], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QONNX_DOMAIN, 1)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "m.onnx"))
    text = _refusal(tmp_path / "m.onnx")
    assert re.fullmatch(re.escape(f"node 'Softmax_0' (Softmax): it produces one of the graph's 2 outputs, and {WHY}"),
                        text), text
