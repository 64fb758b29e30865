"""Linear interpolation on integer codes (compiler/ops/interpolate.py) and the linear Resize
that builds it (compiler/frontend/handlers/windows.py).

- the op's integer sums equal the exact rational interpolation times its denominator, on
  every sample, 1D, 2D and 3D; the onnxruntime reference equals them; the range is exact;
- a linear Resize in every coordinate transformation equals the user's file in float64
  (through the Quant after it, or as the graph output), including Brevitas' bilinear layer,
  which rounds onto its input's grid with ONNX ``Round``;
- what cannot be exact is refused in one line: antialiasing a downscale, a coordinate the
  file's two readings of the resized length place differently, a bent value in flight.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler import api
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.frontend.attributes import nearest_coordinates
from tessera.compiler.frontend.handlers.windows import linear_axis
from tessera.compiler.independent import independent_check
from tessera.compiler.ops import interpolate
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes


def _exact(codes: np.ndarray, axes: tuple[interpolate.Axis, ...]) -> np.ndarray:
    """Every output as the exact rational sum of its inputs' weights, times the denominator."""
    n, c = codes.shape[:2]
    out_shape = tuple(len(a.sources) for a in axes)
    den = np.prod([a.denominator for a in axes])
    y = np.zeros((n, c, *out_shape), dtype=np.int64)
    for o in itertools.product(*(range(s) for s in out_shape)):
        total = np.zeros((n, c), dtype=object)
        for pick in itertools.product((0, 1), repeat=len(axes)):
            w = Fraction(1)
            src = []
            for a, k, j in zip(axes, o, pick):
                w *= Fraction(a.weights[k][j], a.denominator)
                src.append(a.sources[k][j])
            total = total + codes[(slice(None), slice(None), *src)].astype(object) * w
        y[(slice(None), slice(None), *o)] = (total * den).astype(np.int64)
    return y


@pytest.mark.parametrize("shape,scales,transform", [
    ((3, 5), (2.0,), "half_pixel"),
    ((2, 4, 5), (2.0, 1.5), "pytorch_half_pixel"),
    ((2, 3, 4), (3.0, 0.5), "asymmetric"),
    ((2, 4, 6), (2.0, 2.0), "align_corners"),
    ((1, 2, 3, 3), (2.0, 1.0, 2.0), "half_pixel"),
])
def test_interpolation_is_the_exact_rational_sum(make_graph, make_type, shape, scales, transform):
    axes = []
    for n_in, s in zip(shape[1:], scales):
        n_out = int(np.floor(n_in * np.float32(s)))
        axes.append(linear_axis(nearest_coordinates(n_out, n_in, Fraction(s), transform), n_in))
    attrs = interpolate.Attrs(tuple(axes))
    x = make_type(7, 2, True, shape)
    g = make_graph(x, ("interpolate", attrs))
    codes = sample_codes(x, 50, seed=3)
    want = _exact(codes, attrs.axes)
    assert np.array_equal(run_ir(g, codes), want)
    assert np.array_equal(OrtReference(reference_model(g)).run(codes), want)
    y = g.values[g.output]
    assert (y.lo, y.hi) == (x.lo * attrs.denominator, x.hi * attrs.denominator)
    assert all(sum(w) == a.denominator for a in attrs.axes for w in a.weights)


def _resize_model(path, shape, scales, transform, *, antialias=None, quant_out=True, opset=13, leaky=False):
    """Quant(x) -> [LeakyRelu of a 1x1 conv] -> Resize(linear) -> [Quant] -> y."""
    q = lambda x, out, s, b: helper.make_node("Quant", [x, s, "zero", b], [out], name=f"Quant_{out}",  # noqa: E731
                                              domain="qonnx.custom_op.general", signed=1, narrow=0, rounding_mode="ROUND")
    inits = [numpy_helper.from_array(np.asarray(v, dtype=np.float32), n) for n, v in
             (("s_x", 2.0 ** -4), ("zero", 0.0), ("b8", 8.0), ("s_y", 0.0437), ("b4", 4.0), ("s_w", 0.37),
              ("scales", [1.0, 1.0, *scales]), ("roi", np.zeros(0)))]
    nodes = [q("x", "xq", "s_x", "b8")]
    src = "xq"
    if leaky:
        inits.append(numpy_helper.from_array(np.ones((shape[0], shape[0], *(1,) * (len(shape) - 1)), np.float32), "W"))
        nodes += [q("W", "Wq", "s_w", "b4"), helper.make_node("Conv", ["xq", "Wq"], ["c"], name="Conv_0"),
                  helper.make_node("LeakyRelu", ["c"], ["l"], name="Leaky_0", alpha=0.25)]
        src = "l"
    extra = {} if antialias is None else {"antialias": antialias}
    nodes.append(helper.make_node("Resize", [src, "roi", "scales"], ["r" if quant_out else "y"], name="Resize_0",
                                  mode="linear", coordinate_transformation_mode=transform, **extra))
    if quant_out:
        nodes.append(q("r", "y", "s_y", "b8"))
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *shape])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "c", *("s" + str(i) for i in range(len(shape) - 1))])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("qonnx.custom_op.general", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("shape,scales,transform,quant_out", [
    ((2, 5), (2.0,), "half_pixel", True),
    ((2, 3, 4), (2.0, 3.0), "asymmetric", True),
    ((2, 3, 4), (1.5, 2.0), "pytorch_half_pixel", False),  # the exact sums are the output
    ((3, 4, 4), (0.5, 2.0), "half_pixel", True),
    ((2, 3, 4), (2.0, 2.0), "align_corners", True),
])
def test_a_linear_resize_equals_the_file(tmp_path, shape, scales, transform, quant_out):
    path = _resize_model(tmp_path / "m.onnx", shape, scales, transform, quant_out=quant_out)
    g = api.load_model(path)
    assert "interpolate" in [n.op for n in g.nodes]
    codes = sample_codes(g.values[g.input], 300, seed=1)
    ref = OrtReference(reference_model(g)).run(codes)
    assert np.array_equal(ref, run_ir(g, codes))
    rep = independent_check(onnx.load(str(path)), g, codes, ref)
    assert rep.passed and rep.differing_outputs == 0 and rep.equal + rep.undecidable_outputs == rep.outputs, rep.line()


def test_antialiasing_a_downscale_is_refused(tmp_path):
    path = _resize_model(tmp_path / "m.onnx", (2, 4, 4), (0.5, 2.0), "half_pixel", antialias=1, opset=18)
    with pytest.raises(UnsupportedModelError, match=r"node 'Resize_0' \(Resize\): attribute antialias=1 with a "
                                                    r"downscale .* is not supported"):
        api.load_model(path)


def test_a_coordinate_the_two_readings_place_apart_is_refused(tmp_path):
    # align_corners with 5 x 2.4: the resized length is 12 (the output's) or 12.0000005 (5 x the float32 scale)
    path = _resize_model(tmp_path / "m.onnx", (2, 5), (2.4,), "align_corners")
    with pytest.raises(UnsupportedModelError, match=r"places output 1 at .* as the resized length is 12 .* the file's "
                                                    r"meaning is ambiguous"):
        api.load_model(path)


def test_interpolating_a_bent_value_in_flight_is_refused(tmp_path):
    path = _resize_model(tmp_path / "m.onnx", (2, 3, 3), (2.0, 2.0), "half_pixel", leaky=True)
    with pytest.raises(UnsupportedModelError, match=r"node 'Resize_0' \(Resize\): interpolates the output of "
                                                    r"'Leaky_0', bent by a ReLU/Clip/LeakyRelu"):
        api.load_model(path)


def test_an_integer_coordinate_float64_places_above_itself_is_refused(tmp_path):
    """half_pixel_symmetric, 7 -> 3 (scale 0.5): output 0 reads exactly input 1, but float64's
    offset makes it 1.0000000000000002, where ONNX's reference evaluator reads inputs (0, 1)
    with weights (1, 2**-52): in[0], not in[1]. Found by the oracle property."""
    path = _resize_model(tmp_path / "m.onnx", (2, 7), (0.5,), "half_pixel_symmetric", opset=19)
    with pytest.raises(UnsupportedModelError, match=r"output 0's input coordinate is exactly 1, 1.0000000000000002 in "
                                                    r"float64; executors disagree on its neighbours"):
        api.load_model(path)
