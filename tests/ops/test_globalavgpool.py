"""GlobalAveragePool + Quant (compiler/ops/globalavgpool.py): the integer semantics equal the
exact onnxruntime reference over the whole input range; a user's QONNX file computes what
the ONNX and QONNX specifications say, on exact rationals; the kernel's multiply-shift equals
the exact rounding on every reachable channel sum (brute force); the g++ C-simulation equals
the reference, in both of the kernel's forms (multiply-shift and division)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler import api
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import avgpool, globalavgpool, quant
from tessera.compiler.exact.rounding import div_round
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes


@pytest.mark.parametrize("rounding", ["ROUND", "FLOOR", "CEIL", "DOWN", "UP", "HALF_UP", "HALF_DOWN"])
@pytest.mark.parametrize("shape,bits,signed,out_frac", [((3, 5, 7), 8, True, 4), ((2, 3, 4, 3), 6, False, 6),
                                                         ((4, 1, 1), 8, True, 2), ((2, 3, 3, 3), 9, True, 7)])
def test_globalavgpool_exact(make_graph, make_type, rounding, shape, bits, signed, out_frac):
    x = make_type(bits, 4, signed, shape)
    attrs = globalavgpool.Attrs(quant.Attrs(FixedType(8, out_frac, True), False, rounding))
    g = make_graph(x, ("globalavgpool", attrs))
    codes = sample_codes(x, 300, seed=1)
    want = run_ir(g, codes)
    got = OrtReference(reference_model(g)).run(codes)
    assert got.shape == want.shape == (300, shape[0], *(1,) * (len(shape) - 1))
    assert int(np.sum(got != want)) == 0
    out = g.values[g.output]
    assert out.lo <= want.min() and want.max() <= out.hi
    # the all-maximum sample averages to the maximum: the inferred range is reached
    assert want[1].max() == out.hi


@pytest.mark.parametrize("rounding", ["ROUND", "FLOOR", "CEIL", "UP", "HALF_UP", "HALF_DOWN"])
@pytest.mark.parametrize("shape,bits,signed,in_frac,out_frac", [((3, 7, 7), 8, True, 4, 6), ((2, 3, 5, 3), 6, False, 6, 6),
                                                                 ((4, 9, 9), 4, True, 2, 2), ((2, 3, 3, 3), 8, True, 7, 7)])
def test_multiply_shift_equals_the_exact_average_on_every_sum(make_type, rounding, shape, bits, signed, in_frac, out_frac):
    """Every channel sum the input type allows (not samples): clamp((mult*S + add) >> shift)
    == clip(R(S * 2**(fy - fx) / n)), checked against rounding.div_round (odd divisors: no
    ties, so every mode but signed UP has a floor-affine form)."""
    x = make_type(bits, in_frac, signed, shape)
    q = quant.Attrs(FixedType(8, out_frac, True), False, rounding)
    ms = globalavgpool.division(globalavgpool.Attrs(q), x)
    if rounding == "UP" and signed:  # away from zero on signed sums: no single floor((mS + a) >> s)
        assert ms is None
        assert globalavgpool.OP.form(globalavgpool.Attrs(q), [x], None).startswith("integer division")
        return
    assert ms is not None
    n = math.prod(shape[1:])
    up, down = avgpool.divisor_shifts(q, x)
    sums = np.arange(n * x.lo, n * x.hi + 1, dtype=np.int64)
    want = np.clip(div_round(sums << np.int64(up), np.int64(n << down), q.rounding), q.qmin, q.qmax)
    got = np.clip((sums.astype(object) * ms.mult + ms.add) >> ms.shift, q.qmin, q.qmax).astype(np.int64)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (int(sums[bad[0]]), int(got[bad[0]]), int(want[bad[0]]))
    assert globalavgpool.OP.form(globalavgpool.Attrs(q), [x], None).startswith("multiply-shift: 1 divisor")


def test_ties_to_even_with_an_even_divisor_divides(make_type):
    """ROUND's ties alternate up and down (steps of n - 1 and n + 1 sums): no single
    multiply-shift, so the kernel keeps the exact division, and inspect says so."""
    x = make_type(8, 4, True, (2, 4, 4))
    attrs = globalavgpool.Attrs(quant.Attrs(FixedType(8, 4, True), False, "ROUND"))
    assert globalavgpool.division(attrs, x) is None
    assert globalavgpool.OP.form(attrs, [x], None).startswith("integer division")
    floor = globalavgpool.Attrs(quant.Attrs(FixedType(8, 4, True), False, "FLOOR"))
    assert globalavgpool.division(floor, x) is not None


def _qonnx_gap(path, shape, s_in, s_out, rounding):
    """Quant(x) -> GlobalAveragePool -> Quant -> y, as a user writes it."""
    c = lambda name, v: numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)  # noqa: E731
    q = lambda i, s, o, signed: helper.make_node("Quant", [i, s, "zp", "b8"], [o], domain="qonnx.custom_op.general",  # noqa: E731
                                                 name=f"Quant_{o}", signed=signed, narrow=0, rounding_mode=rounding)
    nodes = [q("x", "s_in", "xq", 1), helper.make_node("GlobalAveragePool", ["xq"], ["avg"], name="gap"),
             q("avg", "s_out", "y", 1)]
    out_shape = [1, shape[0], *(1,) * (len(shape) - 1)]
    g = helper.make_graph(nodes, "gap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *shape])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [c("s_in", s_in), c("s_out", s_out), c("zp", 0.0), c("b8", 8.0)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _quant_exact(v: Fraction, scale: Fraction, rounding: str) -> int:
    """QONNX Quant (8-bit signed, zero point 0) of an exact rational, as its spec reads."""
    q = v / scale
    fl = math.floor(q)
    frac = q - fl
    if rounding == "ROUND":
        r = fl + (1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and fl % 2) else 0)
    else:
        r = {"FLOOR": fl, "CEIL": math.ceil(q)}[rounding]
    return max(-128, min(127, r))


@pytest.mark.parametrize("rounding", ["ROUND", "FLOOR", "CEIL"])
def test_user_file_means_the_onnx_average(tmp_path, rounding):
    """The compiled model equals ONNX GlobalAveragePool (the mean over the spatial axes)
    followed by QONNX Quant, evaluated on exact rationals from the file's own scales."""
    shape, s_in, s_out = (3, 3, 3), 2.0**-4, 2.0**-6  # 9 positions: most averages are not dyadic
    path = _qonnx_gap(tmp_path / "gap.onnx", shape, s_in, s_out, rounding)
    g = api.load_model(path)
    assert [n.op for n in g.nodes] == ["globalavgpool"]
    codes = sample_codes(g.values[g.input], 200, seed=3)
    got = OrtReference(reference_model(g)).run(codes).reshape(200, -1)
    n = math.prod(shape[1:])
    for i in range(len(codes)):
        for ch in range(shape[0]):
            mean = sum(Fraction(int(k)) * Fraction(s_in) for k in codes[i, ch].ravel()) / n
            assert got[i, ch] == _quant_exact(mean, Fraction(s_out), rounding), (i, ch)


def test_refused_without_its_quant(tmp_path):
    path = _qonnx_gap(tmp_path / "gap.onnx", (2, 4, 4), 2.0**-4, 2.0**-4, "ROUND")
    m = onnx.load(path)
    m.graph.node.pop()  # the pool is now the output: an average is no fixed-point number
    m.graph.output[0].name = "avg"
    onnx.save(m, path)
    with pytest.raises(UnsupportedModelError, match="node 'gap' \\(GlobalAveragePool\\): must be followed by exactly one Quant"):
        api.load_model(path)


@pytest.mark.csim
@pytest.mark.parametrize("io", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("rounding,form", [("ROUND", "multiply-shift"), ("UP", "integer division")])
def test_globalavgpool_csim(tmp_path, io, rounding, form):
    """The g++ C-simulation of the kernel == the exact reference on every output, in the form
    the compiler chose (UP rounds signed averages away from zero: the kernel divides)."""
    path = _qonnx_gap(tmp_path / "gap.onnx", (4, 3, 5), 2.0**-4, 2.0**-6, rounding)
    g = api.load_model(path)
    (node,) = g.nodes
    assert globalavgpool.OP.form(node.attrs, [g.values[g.input]], None).startswith(form)
    prj = api.compile_model(path, tmp_path / "prj", api.CompileOptions(io_type=io)).project
    rep = api.verify_project(path, prj, api.VerifyOptions(samples=300, user_samples=0))
    assert rep.mismatches == 0 and rep.outputs == 300 * 4 and rep.testbench.passed, rep.to_dict()
