"""Nothing unmodelled passes: every attribute of every ONNX op the importer reads is modelled
or refused in one line naming node, attribute and value (compiler/frontend/attributes.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler import api
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.frontend.attributes import ATTRIBUTES, MODELLED, NO_EFFECT, Only, schema_default
from tessera.compiler.frontend.registry import handled_op_types
from tessera.compiler.independent import independent_check
from tessera.compiler.ops import crop, maxpool, upsample
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes

OPSETS = range(11, 22)
CUSTOM = {"Quant", "IntQuant", "BipolarQuant", "Trunc", "QuantLSTMCell", "QuantGRUCell", "QuantConvLSTMCell"}


def _schemas(op: str):
    seen = set()
    for v in OPSETS:
        try:
            s = onnx.defs.get_schema(op, v)
        except onnx.defs.SchemaError:
            continue
        if s.since_version not in seen:
            seen.add(s.since_version)
            yield v, s


@pytest.mark.parametrize("op", sorted(set(ATTRIBUTES) - CUSTOM))
def test_every_schema_attribute_is_accounted_for(op):
    """Every attribute of the op's ONNX schema, in every opset 11..21, has a rule; a rule
    that allows only some values allows the schema's default (a model relying on it passes)."""
    schemas = list(_schemas(op))
    assert schemas, op
    rules = ATTRIBUTES[op]
    for version, schema in schemas:
        missing = set(schema.attributes) - set(rules)
        assert not missing, f"{op} (opset {version}): {sorted(missing)} not accounted for"
        for name, rule in rules.items():
            assert rule is MODELLED or rule is NO_EFFECT or isinstance(rule, Only), (op, name)
            if isinstance(rule, Only) and name in schema.attributes:
                node = helper.make_node(op, [], [])
                assert rule.allows(schema_default(node, name, version)), (op, name, version)


def test_every_handler_has_rules():
    handled = handled_op_types()
    assert {"Conv", "Quant", "Constant", "Identity", "Dropout"} <= handled
    assert handled <= set(ATTRIBUTES), sorted(handled - set(ATTRIBUTES))


def test_quant_rules_are_qonnx_attributes():
    from qonnx.custom_op.general.intquant import IntQuant

    node = helper.make_node("Quant", ["x", "s", "z", "b"], ["y"], domain="qonnx.custom_op.general")
    assert set(IntQuant(node).get_nodeattr_types()) == set(ATTRIBUTES["Quant"]) == set(ATTRIBUTES["IntQuant"])


def _model(path, mid, in_shape, out_shape, inits=(), opset=13):
    c = lambda name, v: numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)  # noqa: E731
    q = lambda i, o: helper.make_node("Quant", [i, "s", "zp", "b8"], [o], domain="qonnx.custom_op.general",  # noqa: E731
                                      name=f"Quant_{o}", signed=1, narrow=0, rounding_mode="ROUND")
    g = helper.make_graph([q("x", "xq"), *mid, q("m", "y")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [c("s", 2.0**-4), c("zp", 0.0), c("b8", 8.0), *[c(k, v) for k, v in inits]])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("qonnx.custom_op.general", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_resize_nearest_mode_ceil_is_modelled(tmp_path):
    """The issue's first model: Resize with nearest_mode=ceil (half_pixel by default) reads
    other inputs than nearest upsampling (input 1 for output 1; it compiled and verified as a
    plain upsampling once, then was refused).  Now its own index map, [0, 1, 1, 2, 2, 3, 3, 3]
    per axis floor((3 j + 6) / 7): an upsampling by 7, a crop from 6 and a pick of every 3rd,
    equal to the file."""
    m = _model(tmp_path / "r.onnx", [helper.make_node("Resize", ["xq", "", "scales"], ["m"], name="resize", mode="nearest",
                                                      nearest_mode="ceil")], [1, 2, 4, 4], [1, 2, 8, 8],
               [("scales", [1, 1, 2, 2])])
    g = api.load_model(m)
    assert [(n.op, n.attrs) for n in g.nodes if n.op in ("upsample", "crop", "maxpool")] == [
        ("upsample", upsample.Attrs((7, 7))), ("crop", crop.Attrs((6, 6), (22, 22))),
        ("maxpool", maxpool.Attrs((1, 1), (3, 3)))]
    rep = _independent(m)
    assert rep.passed and rep.equal == rep.outputs, rep.to_dict()


def test_maxpool_same_padding_is_modelled(tmp_path):
    """The issue's second model: auto_pad=SAME_UPPER pads a 5x5 input by [0, 0, 1, 1]; it once
    compiled to 2x2.  Now the padded pool: 3x3, equal to the file (padding is -inf)."""
    m = _model(tmp_path / "p.onnx", [helper.make_node("MaxPool", ["xq"], ["m"], name="pool", kernel_shape=[2, 2],
                                                      strides=[2, 2], auto_pad="SAME_UPPER")], [1, 2, 5, 5], [1, 2, 3, 3])
    g = api.load_model(m)
    assert g.values[g.output].shape == (2, 3, 3) and next(n for n in g.nodes if n.op == "maxpool").attrs.pads == (0, 0, 1, 1)
    rep = _independent(m)
    assert rep.passed and rep.equal == rep.outputs, rep.to_dict()


def test_maxpool_same_lower_on_an_odd_size_is_exact(tmp_path):
    """ONNX and onnxruntime give MaxPool(auto_pad=SAME_LOWER) ceil(7 / 2) = 4 rows; onnx's own
    reference evaluator gave 3 (once a refusal here).  The independent executor follows the
    spec: the padded pool compiles and equals the file."""
    m = _model(tmp_path / "p.onnx", [helper.make_node("MaxPool", ["xq"], ["m"], name="pool", kernel_shape=[1, 2],
                                                      strides=[2, 2], auto_pad="SAME_LOWER")], [1, 3, 7, 4], [1, 3, 4, 2])
    g = api.load_model(m)
    assert g.values[g.output].shape == (3, 4, 2)
    rep = _independent(m)
    assert rep.passed and rep.equal == rep.outputs, rep.to_dict()


def test_unknown_attribute_of_a_custom_op_is_refused(tmp_path):
    """The ONNX checker knows no schema of the QONNX ops: an attribute the flow does not read is
    refused by the importer."""
    m = _model(tmp_path / "q.onnx", [helper.make_node("Relu", ["xq"], ["m"], name="relu")], [1, 4], [1, 4])
    model = onnx.load(m)
    model.graph.node[2].attribute.append(helper.make_attribute("stochastic", 1))
    onnx.save(model, m)
    with pytest.raises(UnsupportedModelError, match=r"node 'Quant_y' \(Quant\): attribute stochastic=1 is not modelled"):
        api.load_model(m)


def _independent(path):
    g = api.load_model(path)
    codes = sample_codes(g.values[g.input], 200, seed=5)
    ref = OrtReference(reference_model(g)).run(codes)
    return independent_check(onnx.load(path), g, codes, ref)


@pytest.mark.parametrize("mode,nearest", [(None, None), ("asymmetric", "floor"), ("pytorch_half_pixel", "round_prefer_ceil"),
                                          ("half_pixel_symmetric", "round_prefer_floor")])
def test_modelled_resize_equals_the_onnx_op(tmp_path, mode, nearest):
    """Transformations whose index mapping is the nearest copy compile, and the compiled
    model equals ONNX's Resize (the independent executor) on every output."""
    kw = {k: v for k, v in (("coordinate_transformation_mode", mode), ("nearest_mode", nearest)) if v}
    m = _model(tmp_path / "r.onnx", [helper.make_node("Resize", ["xq", "", "scales"], ["m"], name="resize", mode="nearest",
                                                      **kw)], [1, 2, 3, 5], [1, 2, 6, 15], [("scales", [1, 1, 2, 3])],
               opset=19)
    rep = _independent(m)
    assert rep.passed and rep.equal == rep.outputs == 200 * 2 * 6 * 15, rep.to_dict()


def test_same_padding_is_modelled_for_conv_and_averagepool(tmp_path):
    """auto_pad=SAME_UPPER / SAME_LOWER become the explicit pads ONNX defines."""
    w = np.random.default_rng(0).integers(-8, 8, size=(3, 2, 2, 3)) * 2.0**-4
    for auto in ("SAME_UPPER", "SAME_LOWER"):
        conv = helper.make_node("Conv", ["xq", "Wq"], ["c"], name="conv", strides=[2, 1], auto_pad=auto)
        wq = helper.make_node("Quant", ["W", "s", "zp", "b8"], ["Wq"], domain="qonnx.custom_op.general", name="Quant_W",
                              signed=1, narrow=0, rounding_mode="ROUND")
        q2 = helper.make_node("Quant", ["c", "s", "zp", "b8"], ["c2"], domain="qonnx.custom_op.general", name="Quant_c2",
                              signed=1, narrow=0, rounding_mode="ROUND")
        pool = helper.make_node("AveragePool", ["c2"], ["m"], name="avg", kernel_shape=[2, 2], auto_pad=auto)
        m = _model(tmp_path / f"{auto}.onnx", [wq, conv, q2, pool], [1, 2, 5, 5], [1, 3, 3, 5], [("W", w)])
        g = api.load_model(m)
        conv_node = next(n for n in g.nodes if n.op == "conv")
        assert conv_node.attrs.pads == ((0, 1, 1, 1) if auto == "SAME_UPPER" else (1, 1, 0, 1))
        rep = _independent(m)
        assert rep.passed and rep.equal == rep.outputs, (auto, rep.to_dict())


@pytest.mark.parametrize("pads,end,out", [([0, 0, 0, 0], (1, 0), [3, 3]), ([0, 1, 0, 0], (1, 1), [3, 4])])
def test_ceil_mode_average_with_a_partial_window_averages_its_valid_elements(tmp_path, pads, end, out):
    """ceil_mode=1, count_include_pad=0 on a power-of-two grid: the last window runs past the
    input and averages the elements it covers, as the ONNX operator (the independent executor)."""
    pool = helper.make_node("AveragePool", ["xq"], ["m"], name="avg", kernel_shape=[3, 3], strides=[2, 2], pads=pads,
                            ceil_mode=1)
    m = _model(tmp_path / "m.onnx", [pool], [1, 2, 6, 7], [1, 2, *out])
    g = api.load_model(m)
    (node,) = [n for n in g.nodes if n.op == "avgpool"]
    assert node.attrs.pads[2:] == end and g.values[g.output].shape == (2, *out)
    rep = _independent(m)
    assert rep.passed and rep.equal == rep.outputs == 200 * 2 * out[0] * out[1], rep.to_dict()


@pytest.mark.parametrize("op,attrs,message", [
    ("MaxPool", {"dilations": [2, 0]}, "attribute dilations=[2, 0] is not one positive value per spatial axis"),
    ("AveragePool", {"ceil_mode": 1, "strides": [2, 2], "count_include_pad": 1},
     "ceil_mode=1 adds a partial last window on spatial axis 0"),
])
def test_unmodelled_attributes_are_refused(tmp_path, op, attrs, message):
    w = np.ones((2, 2, 3, 3)) * 2.0**-4
    inputs = ["xq", "Wq"] if op == "Conv" else ["xq"]
    extra = {"kernel_shape": [3, 3]}
    mid = [helper.make_node("Quant", ["W", "s", "zp", "b8"], ["Wq"], domain="qonnx.custom_op.general", name="Quant_W",
                            signed=1, narrow=0, rounding_mode="ROUND")] if op == "Conv" else []
    mid.append(helper.make_node(op, inputs, ["m"], name="node", **extra, **attrs))
    m = _model(tmp_path / "m.onnx", mid, [1, 2, 6, 6], [1, 2, 4, 4], [("W", w)] if op == "Conv" else ())
    with pytest.raises(UnsupportedModelError, match=rf"node 'node' \({op}\): " + message.replace("[", r"\[").replace("]", r"\]")):
        api.load_model(m)
