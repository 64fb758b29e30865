"""Real-valued constants between quantizers (compiler/frontend/real.py): float and per-channel
scales, zero points, BatchNorm, constant Mul/Add/Sub/Div, input preprocessing, bipolar
quantizers, accumulator outputs and a trailing Softmax, as users' QONNX files hold them.

Each graph is checked three ways: the exact onnxruntime reference equals the integer
semantics, the reference equals the user's file run independently in float64 (every
output), and (C-simulation tests) the g++ C-simulation equals the reference.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessera.compiler import api
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.independent import independent_check
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes

DOMAIN = "qonnx.custom_op.general"


def _f(name, v):
    return numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)


def _quant(i, s, z, b, o, signed=1, narrow=0, mode="ROUND"):
    return helper.make_node("Quant", [i, s, z, b], [o], domain=DOMAIN, name=f"Quant_{o}", signed=signed, narrow=narrow,
                            rounding_mode=mode)


def _save(path, nodes, inits, n_in, out_shape, opset=13, domain=DOMAIN, annotate=None):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *n_in])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, *out_shape])], inits)
    if annotate:
        a = onnx.TensorAnnotation(tensor_name="x")
        a.quant_parameter_tensor_names.add(key="finn_datatype", value=annotate)
        g.quantization_annotation.append(a)
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 8
    onnx.save(m, path)
    return path


def brevitas_default_mlp(path, rounding="ROUND", seed=0):
    """The shape of a Brevitas default-quantizer MLP: 8-bit input with a float scale and a
    zero point, per-channel float weight scales, a float bias, BatchNorm, ReLU, 4-bit output
    Quant, then a last layer whose float accumulator (times a constant, plus a bias) is the
    graph output."""
    r = np.random.default_rng(seed)
    w1, w2 = r.normal(0, 0.4, (12, 8)), r.normal(0, 0.4, (8, 5))
    s_w1 = np.abs(r.normal(0.02, 0.005, (1, 8))) + 1e-3
    inits = [_f("W1", w1), _f("sw1", s_w1), _f("W2", w2), _f("sw2", 0.0271), _f("b1", r.normal(0, 0.1, 8)),
             _f("s_in", 0.0731), _f("z_in", 3.0), _f("s_h", 0.047), _f("zero", 0.0), _f("b8", 8.0), _f("b4", 4.0),
             _f("gamma", r.uniform(0.5, 1.5, 8) * np.sign(r.normal(size=8))), _f("beta", r.normal(0, 0.2, 8)),
             _f("mean", r.normal(0, 0.1, 8)), _f("var", r.uniform(0.2, 2, 8)), _f("k", 0.7), _f("b2", r.normal(0, 0.1, 5))]
    nodes = [_quant("x", "s_in", "z_in", "b8", "xq", signed=0, mode=rounding),
             _quant("W1", "sw1", "zero", "b4", "W1q", narrow=1), _quant("W2", "sw2", "zero", "b4", "W2q", narrow=1),
             helper.make_node("MatMul", ["xq", "W1q"], ["mm1"], name="MatMul_1"),
             helper.make_node("Add", ["mm1", "b1"], ["a1"], name="Add_1"),
             helper.make_node("BatchNormalization", ["a1", "gamma", "beta", "mean", "var"], ["bn"], name="BN_1",
                              epsilon=1e-5),
             helper.make_node("Relu", ["bn"], ["r1"], name="Relu_1"),
             _quant("r1", "s_h", "zero", "b4", "h", signed=0, mode=rounding),
             helper.make_node("MatMul", ["h", "W2q"], ["mm2"], name="MatMul_2"),
             helper.make_node("Mul", ["mm2", "k"], ["m2"], name="Mul_2"),
             helper.make_node("Add", ["m2", "b2"], ["y"], name="Add_2")]
    return _save(path, nodes, inits, (12,), (5,))


def bipolar_tfc(path, seed=0, legacy=False):
    """FINN's TFC pattern: the input scaled (x * 2 - 1) before a BipolarQuant, bipolar weights,
    BatchNorm then BipolarQuant, and a last MatMul followed by a TensorNorm (Sub/Div/Mul/Add)."""
    r = np.random.default_rng(seed)
    dom = "onnx.brevitas" if legacy else DOMAIN
    bq = lambda i, o: helper.make_node("BipolarQuant", [i, "one"], [o], domain=dom, name=f"BQ_{o}")  # noqa: E731
    inits = [_f("W1", r.normal(size=(16, 8))), _f("W2", r.normal(size=(8, 3))), _f("one", 1.0), _f("two", 2.0),
             _f("gamma", r.uniform(0.5, 1.5, 8)), _f("beta", r.normal(0, 1, 8)), _f("mean", r.normal(0, 2, 8)),
             _f("var", r.uniform(1, 9, 8)), _f("mu", 0.448), _f("sd", 17.8), _f("g", 0.734), _f("bt", -1.14)]
    nodes = [helper.make_node("Mul", ["x", "two"], ["x2"], name="pre_mul"),
             helper.make_node("Sub", ["x2", "one"], ["x1"], name="pre_sub"), bq("x1", "xq"), bq("W1", "W1q"),
             bq("W2", "W2q"), helper.make_node("MatMul", ["xq", "W1q"], ["mm1"], name="MatMul_1"),
             helper.make_node("BatchNormalization", ["mm1", "gamma", "beta", "mean", "var"], ["bn"], name="BN_1"),
             bq("bn", "h"), helper.make_node("MatMul", ["h", "W2q"], ["mm2"], name="MatMul_2"),
             helper.make_node("Sub", ["mm2", "mu"], ["t1"], name="TN_sub"),
             helper.make_node("Div", ["t1", "sd"], ["t2"], name="TN_div"),
             helper.make_node("Mul", ["t2", "g"], ["t3"], name="TN_mul"),
             helper.make_node("Add", ["t3", "bt"], ["y"], name="TN_add")]
    return _save(path, nodes, inits, (16,), (3,), opset=9, domain=None if legacy else DOMAIN)


def refused_in_one_line(path, match: str | None = None) -> str:
    """Loading ``path`` is refused with one line (matching ``match``); returns the line."""
    with pytest.raises(UnsupportedModelError, match=match) as exc:
        api.load_model(path)
    text = str(exc.value)
    assert text and "\n" not in text, text
    return text


def _exact_and_independent(path, n=2000, input_type=None):
    g = api.load_model(path, input_type)
    codes = sample_codes(g.values[g.input], n, seed=5)
    ref = OrtReference(reference_model(g)).run(codes)
    assert np.array_equal(ref, run_ir(g, codes))
    rep = independent_check(onnx.load(str(path)), g, codes, ref)
    assert rep.passed and rep.differing_outputs == 0, rep.line()
    assert rep.equal == rep.outputs == ref.size, rep.line()
    return g


def test_an_accumulator_in_flight_is_not_compared_with_the_file(tmp_path):
    """The diagnosis of a difference compares node by node where our values mean what the
    file's do; a layer's accumulator that real constants scale later is no value of the file
    (its codes alone would differ at the first layer and hide the node that differs)."""
    from tessera.compiler.independent import IndependentExecutor, diagnose

    path = brevitas_default_mlp(tmp_path / "m.onnx")
    g = api.load_model(path)
    assert g.nodes[0].output in g.in_flight and g.output not in g.in_flight
    codes = sample_codes(g.values[g.input], 3, seed=1)
    exact = {v: g.real(v, c) for v, c in run_ir(g, codes, keep=set(g.origin)).items()}
    exact[g.output] = exact[g.output] + 1.0  # as if every output were off
    found = diagnose(IndependentExecutor(onnx.load(str(path))), g, g.input_real(codes), exact)
    assert [f.at.node for f in found] == [g.origin[g.output]] * 3


@pytest.mark.parametrize("rounding", ["ROUND", "FLOOR", "HALF_UP"])
def test_brevitas_default_quantizers_are_exact(tmp_path, rounding):
    g = _exact_and_independent(brevitas_default_mlp(tmp_path / "m.onnx", rounding))
    assert [n.op for n in g.nodes] == ["dense", "rescale", "dense"]
    out = g.scales[g.output]
    assert out.accumulator and len(set(out.scale)) == 1 and len(set(out.zero)) == 5  # k * s_h * s_w2; per-channel bias
    assert g.input_map is not None and g.input_map.step.qmin == 0 and g.input_map.step.qmax == 255
    assert g.scales[g.input].zero == (3,)


@pytest.mark.parametrize("legacy", [False, True])
def test_bipolar_network_with_preprocessing_and_tensornorm_is_exact(tmp_path, legacy):
    g = _exact_and_independent(bipolar_tfc(tmp_path / "m.onnx", legacy=legacy))
    assert [n.op for n in g.nodes] == ["dense", "rescale", "dense"]
    assert g.values[g.input].lo == 0 and g.values[g.input].hi == 1  # bipolar codes {0, 1} = {-1, +1}
    codes = np.array([[0, 1] * 8, [1, 0] * 8])
    assert np.array_equal(g.input_map.codes(g.input_real(codes)), codes)  # the centres quantize back


def test_inputs_quantize_like_the_users_model(tmp_path):
    """Real data (not only the centres verify uses): the input quantizer equals qonnx's."""
    from qonnx.custom_op.general.quant import quant

    g = api.load_model(brevitas_default_mlp(tmp_path / "m.onnx"))
    x = np.random.default_rng(1).normal(0, 8, size=(4000, 12))
    s = np.array(np.float64(np.float32(0.0731)))
    theirs = quant(x, s, np.array(3.0), np.array(8.0), False, False, "ROUND") / s + 3
    assert np.array_equal(g.input_map.codes(x), np.round(theirs).astype(np.int64))


def test_trailing_softmax_is_compiled_up_to_its_logits(tmp_path):
    path = brevitas_default_mlp(tmp_path / "m.onnx")
    m = onnx.load(str(path))
    m.graph.node[-1].output[0] = "logits"
    m.graph.node.append(helper.make_node("Softmax", ["logits"], ["y"], name="Softmax_0", axis=1))
    onnx.save(m, path)
    g = _exact_and_independent(path, n=500)
    assert g.softmax == "Softmax_0"


def test_finn_datatype_input_without_a_quant(tmp_path):
    r = np.random.default_rng(3)
    inits = [_f("one", 1.0), _f("two", 2.0), _f("W", r.normal(size=(10, 4))), _f("sw", 0.37), _f("zero", 0.0),
             _f("b2", 2.0), _f("s", 0.21)]
    nodes = [helper.make_node("Add", ["x", "one"], ["a"], name="pre_add"),
             helper.make_node("Div", ["a", "two"], ["d"], name="pre_div"), _quant("W", "sw", "zero", "b2", "Wq", narrow=1),
             helper.make_node("MatMul", ["d", "Wq"], ["mm"], name="MatMul_0"),
             _quant("mm", "s", "zero", "b2", "y", signed=1)]
    path = _save(tmp_path / "m.onnx", nodes, inits, (10,), (4,), annotate="BIPOLAR")
    g = _exact_and_independent(path)
    assert (g.values[g.input].lo, g.values[g.input].hi) == (-1, 1)
    with pytest.raises(UnsupportedModelError, match="without a Quant"):
        api.load_model(_save(tmp_path / "n.onnx", nodes, inits, (10,), (4,)))


@pytest.mark.parametrize("case,match", [
    ("mul-after-relu", "after a ReLU"),
    ("vector-preprocessing", r"node 'Quant_xq' \(Quant\): the input is scaled by 0.0 before its Quant"),
])
def test_refusals_name_node_and_reason(tmp_path, case, match):
    r = np.random.default_rng(0)
    inits = [_f("W", r.normal(size=(6, 4))), _f("sw", 0.031), _f("zero", 0.0), _f("b8", 8.0), _f("s", 0.1),
             _f("k", 0.5), _f("vec", np.arange(6.0))]
    head = [_quant("W", "sw", "zero", "b8", "Wq", narrow=1)]
    if case == "mul-after-relu":
        body = [_quant("x", "s", "zero", "b8", "xq"), helper.make_node("MatMul", ["xq", "Wq"], ["mm"], name="MatMul_0"),
                helper.make_node("Relu", ["mm"], ["r"], name="Relu_0"), helper.make_node("Mul", ["r", "k"], ["m"], name="Mul_0"),
                _quant("m", "s", "zero", "b8", "y")]
    else:
        body = [helper.make_node("Mul", ["x", "vec"], ["xm"], name="Mul_pre"), _quant("xm", "s", "zero", "b8", "xq"),
                helper.make_node("MatMul", ["xq", "Wq"], ["mm"], name="MatMul_0"), _quant("mm", "s", "zero", "b8", "y")]
    refused_in_one_line(_save(tmp_path / "m.onnx", head + body, inits, (6,), (4,), opset=11), match)


def test_a_float_accumulator_flattened_at_the_output_is_exact(tmp_path):
    """A float-scaled accumulator read by Flatten and no Quant after it: the output is the
    accumulator with its exact scale (it was refused before real values moved through data
    movement)."""
    r = np.random.default_rng(0)
    inits = [_f("W", r.normal(size=(6, 4))), _f("sw", 0.031), _f("zero", 0.0), _f("b8", 8.0), _f("s", 0.1)]
    nodes = [_quant("W", "sw", "zero", "b8", "Wq", narrow=1), _quant("x", "s", "zero", "b8", "xq"),
             helper.make_node("MatMul", ["xq", "Wq"], ["mm"], name="MatMul_0"),
             helper.make_node("Flatten", ["mm"], ["y"], name="Flatten_0")]
    _exact_and_independent(_save(tmp_path / "m.onnx", nodes, inits, (6,), (4,), opset=11), 500)


@pytest.mark.csim
@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("model", ["brevitas_default", "bipolar_tfc"])
def test_real_constants_csim_equals_reference_and_users_model(tmp_path, model, io_type):
    path = (brevitas_default_mlp if model == "brevitas_default" else bipolar_tfc)(tmp_path / "m.onnx")
    csim_verified(path, tmp_path / "prj", io_type, 400, 5 if model == "brevitas_default" else 3)


def csim_verified(path, prj_dir, io_type, samples, outputs_per_sample):
    """Compile, C-simulate and verify: 0 mismatches, every output equal to the user's file."""
    prj = api.compile_model(path, prj_dir, api.CompileOptions(io_type=io_type)).project
    rep = api.verify_project(path, prj, api.VerifyOptions(samples=samples))
    assert rep.mismatches == 0 and rep.outputs == samples * outputs_per_sample
    assert rep.independent.equal == rep.independent.outputs == rep.outputs
    assert rep.passed


def test_brevitas_default_quantizer_cnn_is_exact(tmp_path):
    """The zoo's ``digits_cnn_float`` (Brevitas' default quantizers, per-channel weights in
    conv 2, BatchNorm with drawn statistics, float logits), untrained, through brevitas'
    own QONNX export: compiled exactly and equal to the exported file on every output."""
    import torch

    from tessera.models.train import export_model
    from tessera.models.zoo import build_model, example_input

    torch.manual_seed(0)
    model = build_model("digits_cnn_float")
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(-1.5, 1.5)
    path = export_model(model, example_input("digits_cnn_float"), tmp_path / "m.onnx")
    g = _exact_and_independent(path, n=60)
    assert [n.op for n in g.nodes].count("rescale") == 2
    assert g.scales[g.output].accumulator
