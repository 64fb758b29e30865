"""Transposed convolution in 1D and 2D, with output_padding (ops/convtranspose.py), exactly.

The integer semantics equal onnxruntime's own ``ConvTranspose`` (float32, every partial sum an
integer below 2**24), the exact reference equals the semantics, and the 3D kernel with unit
leading axes C-simulates to the same codes in both io types."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import OPS, convtranspose, quant

from .test_ops_exact import check_exact

CASES = [  # (input shape, kernel, stride, pad, output_padding): MelGAN's 1D k16 s8 p4 and k4 s2 p1
    ((3, 5), (4,), (2,), (1,), (1,)),
    ((2, 4), (16,), (8,), (4,), (0,)),
    ((3, 4, 5), (3, 3), (2, 2), (1, 0), (1, 1)),
    ((2, 3, 3), (2, 2), (2, 2), (0, 0), (0, 0)),
]


def _attrs(rng, shape, kernel, stride, pad, extra, c_out=2):
    w = rng.integers(-8, 8, size=(shape[0], c_out, *kernel))
    bias = rng.integers(-40, 40, size=c_out)
    return convtranspose.Attrs(w, FixedType(4, 2, True), bias, FixedType(8, 3, True), tuple(stride), tuple(pad) * 2,
                               tuple(extra) if any(extra) else ())


def _onnxruntime(x, attrs):
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=list(attrs.strides), pads=list(attrs.pads),
                            output_padding=list(attrs.extra))
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(attrs.weight.astype(np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x.astype(np.float32)})[0]


@pytest.mark.parametrize("shape,kernel,stride,pad,extra", CASES)
def test_semantics_equal_onnxruntime(make_type, rng, shape, kernel, stride, pad, extra):
    x = make_type(6, 0, True, shape)
    attrs = _attrs(rng, shape, kernel, stride, pad, extra)
    attrs = convtranspose.Attrs(attrs.weight, FixedType(4, 0, True), None, None, attrs.strides, attrs.pads,
                                attrs.output_padding)
    out = OPS["convtranspose"].infer(attrs, [x], "t")
    codes = rng.integers(-32, 32, size=(10, *shape))
    got = OPS["convtranspose"].semantics(attrs, [codes], [x], out)
    want = _onnxruntime(codes, attrs)
    assert got.shape == want.shape == (10, *out.shape)
    assert np.array_equal(got, want.astype(np.int64))


def _graph(make_graph, make_type, rng, case):
    shape, kernel, stride, pad, extra = case
    return make_graph(make_type(6, 3, True, shape), ("convtranspose", _attrs(rng, shape, kernel, stride, pad, extra)),
                      ("requant", quant.Attrs(FixedType(6, 2, True), False, "ROUND")))


@pytest.mark.parametrize("case", CASES)
def test_reference_equals_semantics(make_graph, make_type, rng, case):
    check_exact(_graph(make_graph, make_type, rng, case), n=300)


def test_output_padding_at_or_above_the_stride_is_refused(make_type):
    from tessera.compiler.errors import UnsupportedModelError

    attrs = convtranspose.Attrs(np.ones((2, 2, 3), dtype=np.int64), FixedType(2, 0, True), None, None, (2,), (0, 0), (2,))
    with pytest.raises(UnsupportedModelError, match=r"node 't': ConvTranspose output_padding \[2\] must be below"):
        OPS["convtranspose"].infer(attrs, [make_type(4, 0, True, (2, 4))], "t")


@pytest.mark.csim
@pytest.mark.parametrize("io_type,case", [("io_parallel", CASES[0]), ("io_stream", CASES[0]), ("io_stream", CASES[2])])
def test_convtranspose_csim(make_graph, make_type, rng, tmp_path, io_type, case):
    from ..csim.test_ops_csim import csim_exact

    csim_exact(_graph(make_graph, make_type, rng, case), tmp_path, io_type, n=150)
