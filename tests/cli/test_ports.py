"""A model of several inputs and outputs through every command: compile, emulate (one array per
port, or an .npz by name), verify (also on --data as an .npz), inspect, estimate and the
project's testbench; a partitioned design of several ports refused in one line."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from tessera.cli import main
from tessera.compiler import api
from tessera.compiler.errors import InputDataError
from tessera.compiler.reference.model import OrtReference, reference_model

QONNX = "qonnx.custom_op.general"


def _quant(x, out, scale, bits):
    return helper.make_node("Quant", [x, scale, "zero", bits], [out], name=f"Quant_{out}", domain=QONNX, signed=1,
                            narrow=0, rounding_mode="ROUND")


def two_by_two(path):
    """Inputs ``a`` (6,) and ``b`` (6,) on their own power-of-two grids; outputs ``sum`` (their
    sum requantized) and ``relu`` (ReLU of ``a`` on a float scale), in that order."""
    c = lambda n, v: numpy_helper.from_array(np.asarray(v, dtype=np.float32), n)  # noqa: E731
    nodes = [_quant("a", "qa", "s_a", "b4"), _quant("b", "qb", "s_b", "b6"),
             helper.make_node("Add", ["qa", "qb"], ["s"], name="Add"), _quant("s", "sum", "s_a", "b6"),
             helper.make_node("Relu", ["qa"], ["r"], name="Relu"), _quant("r", "relu", "s_f", "b4")]
    inits = [c("s_a", 0.125), c("s_b", 0.25), c("s_f", 0.1875), c("zero", 0.0), c("b4", 4.0), c("b6", 6.0)]
    g = helper.make_graph(nodes, "ports", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 6]) for n in "ab"],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 6]) for n in ("sum", "relu")],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QONNX, 1)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def run(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    return res.exit_code, res.output


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ports")
    model = two_by_two(folder / "m.onnx")
    prj = api.compile_model(model, folder / "prj", api.CompileOptions(io_type="io_stream", tb_samples=8)).project
    return folder, model, prj


def test_the_graph_has_the_files_ports_in_order(compiled):
    _, model, _ = compiled
    g = api.load_model(model)
    assert [p.onnx_name for p in g.input_ports] == ["a", "b"] and [p.onnx_name for p in g.output_ports] == ["sum", "relu"]
    m = api.Manifest.read(compiled[2])
    assert m.input.names == ["a", "b"] and m.output.names == ["sum", "relu"] and m.input.shape == (12,)


@pytest.mark.csim
def test_emulate_takes_one_array_per_input_or_an_npz_and_writes_one_per_output(compiled):
    folder, model, prj = compiled
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (20, 6)), rng.normal(0, 2, (20, 6))
    np.save(folder / "a.npy", a), np.save(folder / "b.npy", b)
    np.savez(folder / "ab.npz", b=b, a=a)  # keyed by name: the order in the archive does not matter
    code, text = run("emulate", prj, "--input", folder / "a.npy", "--input", folder / "b.npy",
                     "--output", folder / "sum.npy", "--output", folder / "relu.npy")
    assert code == 0, text
    code, text = run("emulate", prj, "--input", folder / "ab.npz", "--output", folder / "out.npz")
    assert code == 0, text
    both = np.load(folder / "out.npz")
    assert sorted(both.files) == ["relu", "sum"]
    assert np.array_equal(both["sum"], np.load(folder / "sum.npy"))
    assert np.array_equal(both["relu"], np.load(folder / "relu.npy"))
    # the exact reference on the same codes, unpacked per port, is what the C-simulation gave
    graph = api.load_model(model)
    codes = api.input_codes(prj, {"a": a, "b": b})
    want = graph.split_outputs(OrtReference(reference_model(graph)).run(codes))
    got = api.emulate(prj, [a, b], codes=False)
    assert [np.array_equal(g_, graph.real(v, w)) for g_, v, w in zip(got, graph.outputs, want)] == [True, True]
    # real meaning: sum = R(a/8 grid + b/4 grid) on 1/8 steps; relu on the float scale 3/16
    assert np.all(np.load(folder / "relu.npy") >= 0) and np.all(np.load(folder / "relu.npy") % 0.1875 == 0)


@pytest.mark.csim
def test_verify_passes_on_random_codes_and_on_npz_data(compiled):
    folder, model, prj = compiled
    rng = np.random.default_rng(1)
    np.savez(folder / "data.npz", a=rng.normal(0, 1, (10, 6)), b=rng.normal(0, 1, (10, 6)))
    code, text = run("verify", model, prj, "--samples", 50, "--data", folder / "data.npz")
    assert code == 0, text
    assert text.strip().splitlines()[-1] == "verified: 60 samples, 720 outputs, 0 mismatches"
    assert "testbench (g++): passed: tessera-tb: 8 samples, 96 outputs, 0 mismatches" in text


@pytest.mark.parametrize("args, says", [
    (["--input", "a.npy"], "input: 1 arrays for the model's 2 inputs (a, b)"),
    (["--input", "ab_wrong.npz"], "input: arrays named c given, the model's inputs are a, b (missing b)"),
])
def test_inputs_that_do_not_fit_the_ports_are_one_line(compiled, args, says):
    folder, _, prj = compiled
    np.save(folder / "a.npy", np.zeros((2, 6)))
    np.savez(folder / "ab_wrong.npz", a=np.zeros((2, 6)), c=np.zeros((2, 6)))
    code, text = run("emulate", prj, *[folder / a if a.endswith(("npy", "npz")) else a for a in args],
                     "--output", folder / "out.npz")
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert code != 0 and len(lines) == 1 and says in lines[0], text


def test_outputs_that_do_not_fit_the_ports_are_one_line(compiled):
    folder, _, prj = compiled
    np.save(folder / "a.npy", np.zeros((2, 6)))
    code, text = run("emulate", prj, "--input", folder / "a.npy", "--input", folder / "a.npy", "--output",
                     folder / "one.npy")
    assert code != 0 and "--output: 1 paths for the model's 2 outputs (sum, relu)" in text and len(
        text.strip().splitlines()) == 1, text


def test_inspect_and_estimate_show_every_port(compiled):
    _, model, _ = compiled
    code, text = run("inspect", model, "--json")
    assert code == 0, text
    data = json.loads(text)
    assert [p["name"] for p in data["inputs"]] == ["a", "b"] and [p["name"] for p in data["outputs"]] == ["sum", "relu"]
    assert [p["type"] for p in data["inputs"]] == ["s4.f3", "s6.f2"]
    code, text = run("estimate", model)
    assert code == 0, text


def test_a_partitioned_design_of_several_ports_is_refused_in_one_line(compiled, tmp_path):
    _, model, _ = compiled
    code, text = run("compile", model, "-o", tmp_path / "prj", "--partition", "2x1x1")
    assert code != 0 and len(text.strip().splitlines()) == 1, text
    assert "a partitioned design has one input and one output; this model has 2 inputs and 2 outputs" in " ".join(text.split())
    assert not (tmp_path / "prj").exists()


def test_codes_of_several_inputs_are_checked_per_input_in_one_line(compiled):
    _, _, prj = compiled
    a, b = np.zeros((3, 6), dtype=np.int64), np.full((3, 6), 31, dtype=np.int64)  # b: 6-bit signed, 31 is its max
    assert np.array_equal(api.input_codes(prj, [a, b], codes=True), np.concatenate([a, b], axis=1))
    with pytest.raises(InputDataError, match=r"^input \(b\): codes outside the input type's range \[-32, 31\]$"):
        api.input_codes(prj, [a, b + 1], codes=True)
    with pytest.raises(InputDataError, match=r"^input: the inputs hold different numbers of samples \(3, 2\)$"):
        api.input_codes(prj, [a, b[:2]], codes=True)


def test_a_difference_is_diagnosed_per_sample_with_several_inputs(compiled):
    """The diagnosis walks samples, not inputs: three samples of two inputs, the sum off in every
    one (as if the reference had erred), each names the Quant after the Add."""
    from tessera.compiler.independent import IndependentExecutor, diagnose
    from tessera.compiler.reference.interpret import run_ir
    from tessera.compiler.samples import input_samples

    _, model, _ = compiled
    g = api.load_model(model)
    codes = input_samples(g, 3, seed=2)
    exact = {v: g.real(v, c) for v, c in run_ir(g, codes, keep=set(g.origin)).items()}
    summed = g.outputs[0]
    exact[summed] = exact[summed] + 1.0
    found = diagnose(IndependentExecutor(onnx.load(str(model))), g, g.input_real(codes), exact)
    assert [f.at.node for f in found] == ["Quant_sum"] * 3
