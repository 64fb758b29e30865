"""An average rounded by a QONNX ``Trunc``, exactly, against the op's definition itself:
ONNX's ``AveragePool`` / ``GlobalAveragePool`` run by ONNX's reference evaluator in float64 on
the input's real values, then qonnx's own ``trunc_v2`` (``y = clamp(R(round(x / s + z) / t))``,
``(y - z / t) * S``).  The compiled graph's integer semantics (and its exact onnxruntime
reference) must give the same real values on every output, over the input type's whole range,
extremes first; every rounding mode, output scales finer and coarser than the Trunc's scale,
signed, unsigned and narrow outputs, and the windows whose divisor varies (count_include_pad=0
with pads, ceil_mode) or skips (dilation).  What is not exact is refused in one line."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from qonnx.custom_op.general.trunc import trunc_v2

from tessera.compiler.api import load_model
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes

from ..conformance.cases import QONNX_DOMAIN, _const, _graph, _quant

MODES = ["ROUND", "HALF_EVEN", "FLOOR", "CEIL", "DOWN", "UP", "HALF_UP", "HALF_DOWN"]
S_IN, S_TRUNC = 2.0**-3, 2.0**-4  # the input's grid, the Trunc's scale


class Trunc:
    """A Trunc's constants and attributes."""

    def __init__(self, t: float = 4.0, mode: str = "FLOOR", bits: int = 5, signed: int = 1, narrow: int = 0,
                 zero: float = 0.0, scale: float = S_TRUNC):
        # the values the file holds: float32
        self.scale, self.out_scale = float(np.float32(scale)), float(np.float32(np.float32(scale) * t))
        self.zero, self.bits = zero, bits
        self.mode, self.signed, self.narrow = mode, signed, narrow

    def node(self, x: str, y: str, inputs: int = 6) -> onnx.NodeProto:
        names = ["s_t", "z_t", "b16", "s_o", "b_o"] if inputs == 6 else ["s_t", "z_t", "b16", "b_o"]
        return helper.make_node("Trunc", [x, *names], [y], name="Trunc_0", domain=QONNX_DOMAIN,
                                rounding_mode=self.mode, **({"signed": self.signed, "narrow": self.narrow}
                                                            if inputs == 6 else {}))

    def inits(self) -> list[onnx.TensorProto]:
        return [_const("s_t", self.scale), _const("z_t", self.zero), _const("b16", 16.0), _const("s_o", self.out_scale),
                _const("b_o", float(self.bits))]

    def of(self, v: np.ndarray) -> np.ndarray:
        """qonnx's definition on float64 values."""
        return trunc_v2(v, np.float64(self.scale), np.float64(self.zero), 16.0, self.narrow, self.signed,
                        np.float64(self.out_scale), np.float64(self.bits), self.mode)


def _pool_node(op: str, attrs: dict) -> onnx.NodeProto:
    return helper.make_node(op, ["xq"], ["p"], name="Pool_0", **attrs)


def _model(path, shape, op: str, attrs: dict, trunc: Trunc, inputs: int = 6, opset: int = 13):
    """Quant(x) on the 2**-3 grid (8 signed bits), the pool, the Trunc: the output shape from
    ONNX's shape inference of the pool alone."""
    pool = _pool_node(op, attrs)
    probe = helper.make_model(helper.make_graph([pool], "p", [helper.make_tensor_value_info("xq", TensorProto.FLOAT,
                                                                                            [1, *shape])],
                                                [helper.make_tensor_value_info("p", TensorProto.FLOAT, None)]),
                              opset_imports=[helper.make_opsetid("", opset)])
    out = ReferenceEvaluator(probe).run(None, {"xq": np.zeros((1, *shape), np.float32)})[0].shape[1:]
    nodes = [_quant("x", "xq", "s_x", "zero", "b8"), pool, trunc.node("p", "y", inputs)]
    inits = [_const("s_x", S_IN), _const("zero", 0.0), _const("b8", 8.0), *trunc.inits()]
    return _graph(path, nodes, inits, shape, out, opset=opset)


def _definition(op: str, attrs: dict, trunc: Trunc, x: np.ndarray, opset: int) -> np.ndarray:
    """The pool in float64 (ONNX's reference evaluator), then qonnx's trunc_v2."""
    pool = _pool_node(op, attrs)
    g = helper.make_graph([pool], "p", [helper.make_tensor_value_info("xq", TensorProto.DOUBLE, list(x.shape))],
                          [helper.make_tensor_value_info("p", TensorProto.DOUBLE, None)])
    avg = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])).run(None, {"xq": x})[0]
    return trunc.of(avg.astype(np.float64))


def check_exact(tmp_path, shape, op: str, attrs: dict, trunc: Trunc, n: int = 300, opset: int = 13):
    path = _model(tmp_path / "m.onnx", shape, op, attrs, trunc, opset=opset)
    g = load_model(path)
    codes = sample_codes(g.values[g.input], n, seed=3)
    ours = run_ir(g, codes)
    assert np.array_equal(OrtReference(reference_model(g)).run(codes), ours)
    theirs = _definition(op, attrs, trunc, np.ldexp(codes.astype(np.float64), 3 - 6), opset)
    got = g.output_real(ours).reshape(theirs.shape)
    bad = np.argwhere(got != theirs)
    assert len(bad) == 0, f"{len(bad)} of {got.size} differ; first: {[(tuple(i), got[tuple(i)], theirs[tuple(i)]) for i in bad[:4]]}"
    return g


@pytest.mark.parametrize("t", [0.5, 1.0, 4.0, 64.0])
@pytest.mark.parametrize("mode", MODES)
def test_every_mode_and_output_scale(tmp_path, mode, t):
    g = check_exact(tmp_path, (2, 6, 6), "AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, Trunc(t, mode))
    assert g.nodes[0].op == "avgpool"  # the inner rounding fused with the average


@pytest.mark.parametrize("signed,narrow,bits", [(1, 1, 4), (0, 0, 3), (0, 1, 4), (1, 0, 2)])
def test_signed_unsigned_and_narrow_outputs(tmp_path, signed, narrow, bits):
    check_exact(tmp_path, (2, 6, 6), "AveragePool", {"kernel_shape": [3, 3], "strides": [1, 1]},
                Trunc(2.0, "HALF_UP", bits, signed, narrow))


@pytest.mark.parametrize("op,attrs,shape,opset", [
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (2, 7, 7), 13),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
     (2, 7, 7), 13),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, (2, 5, 5), 13),
    ("AveragePool", {"kernel_shape": [2, 2], "dilations": [2, 2]}, (2, 6, 6), 19),
    ("AveragePool", {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2], "pads": [1, 0, 0, 0, 1, 1]}, (2, 3, 4, 4), 13),
    ("GlobalAveragePool", {}, (3, 5, 5), 13),
], ids=["pads-excluded", "pads-counted", "ceil", "dilated", "3d", "global"])
def test_windows_of_every_divisor(tmp_path, op, attrs, shape, opset):
    check_exact(tmp_path, shape, op, attrs, Trunc(4.0, "ROUND"), opset=opset)


def test_a_zero_point_or_a_float_scale_is_the_window_sum_exactly(tmp_path):
    check_exact(tmp_path, (2, 6, 6), "AveragePool", {"kernel_shape": [3, 3]}, Trunc(4.0, "FLOOR", zero=0.5))
    check_exact(tmp_path, (2, 6, 6), "AveragePool", {"kernel_shape": [3, 3]}, Trunc(2.0, "CEIL", scale=S_IN / 9))


def _refusal(path) -> str:
    with pytest.raises(UnsupportedModelError) as info:
        load_model(path)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_what_is_not_exact_is_refused_in_one_line(tmp_path):
    window = {"kernel_shape": [2, 2], "strides": [2, 2]}
    text = _refusal(_model(tmp_path / "a.onnx", (2, 6, 6), "AveragePool", window, Trunc(3.0)))
    assert text.startswith("node 'Trunc_0' (Trunc): output scale 0.1875 over scale 0.0625 is 3, not a power of two"), text
    text = _refusal(_model(tmp_path / "b.onnx", (2, 6, 6), "AveragePool", window, Trunc(4.0), inputs=5))
    assert text.startswith("node 'Trunc_0' (Trunc): the 5-input Trunc (QONNX Trunc v1)"), text
    text = _refusal(_model(tmp_path / "c.onnx", (2, 6, 6), "AveragePool", window, Trunc(4.0, "NEAREST")))
    assert text.startswith("node 'Trunc_0' (Trunc):") and "NEAREST" in text, text
