"""Bad models: each is refused with one line naming the cause, a documented exit code, no
traceback and no output folder (docs/reliability.md, table "Bad models")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from tessera.cli import main


def run(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    return res.exit_code, res.output


def one_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert lines and "Traceback" not in text and len(lines) == 1, text
    return lines[0]


def _init(m: onnx.ModelProto, name: str) -> onnx.TensorProto:
    return next(i for i in m.graph.initializer if i.name == name)


def _set(m: onnx.ModelProto, name: str, value) -> None:
    _init(m, name).CopyFrom(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))


def _poke(m: onnx.ModelProto, name: str, index, value) -> None:
    a = numpy_helper.to_array(_init(m, name)).copy()
    a[index] = value
    _set(m, name, a)


def _opset(version):
    def f(m):
        m.opset_import[0].version = version
    return f


def _dim_param(axis):
    def f(m):
        m.graph.input[0].type.tensor_type.shape.dim[axis].dim_param = "n"
    return f


#: (id, mutation of the QONNX MLP, exit code, words the one-line error must contain)
MLP_CASES = [
    ("opset-too-old", _opset(6), 4, ["opset 6", "older"]),
    ("opset-from-the-future", _opset(99), 4, ["opset 99", "newer"]),
    ("dynamic-feature-dim", _dim_param(1), 4, ["static shape"]),
    ("nan-weight", lambda m: _poke(m, "W", (0, 0), np.nan), 4, ["Quant_Wq", "nan"]),
    ("inf-weight", lambda m: _poke(m, "W", (1, 2), np.inf), 4, ["Quant_Wq", "inf", "(1, 2)"]),
    ("-inf-weight", lambda m: _poke(m, "W", (5, 3), -np.inf), 4, ["Quant_Wq", "-inf", "(5, 3)"]),
    ("nan-bias", lambda m: _poke(m, "b", 2, np.nan), 4, ["Add_0", "NaN"]),
    ("inf-scale", lambda m: _set(m, "s_in", np.inf), 4, ["Quant_xq", "scale inf", "positive finite"]),
    ("nan-scale", lambda m: _set(m, "s_w", np.nan), 4, ["Quant_Wq", "scale nan"]),
    ("zero-scale", lambda m: _set(m, "s_w", 0.0), 4, ["Quant_Wq", "scale 0"]),
    ("negative-scale", lambda m: _set(m, "s_w", -2.0**-6), 4, ["Quant_Wq", "scale"]),
    ("bit-width-53", lambda m: _set(m, "b8", 53.0), 4, ["Quant_xq", "bit width", "1..52"]),
    ("bit-width-64", lambda m: _set(m, "b8", 64.0), 4, ["Quant_xq", "bit width", "1..52"]),
    ("bit-width-3000", lambda m: _set(m, "b8", 3000.0), 4, ["Quant_xq", "bit width"]),
    ("bit-width-0", lambda m: _set(m, "b8", 0.0), 4, ["Quant_xq", "bit width"]),
    ("bit-width-fractional", lambda m: _set(m, "b8", 2.5), 4, ["Quant_xq", "bit width"]),
    ("nan-zero-point", lambda m: _set(m, "zp", np.nan), 4, ["Quant_xq", "zero point", "not finite"]),
    ("bias-times-1e30", lambda m: _set(m, "b", numpy_helper.to_array(_init(m, "b")) * 1e30), 4,
     ["MatMul_0", "bias", "bits"]),
    ("zero-point-wrong-shape", lambda m: _set(m, "zp", [0.0, 0.0]), 4, ["Quant_xq", "zero point"]),
    ("scale-wrong-shape", lambda m: _set(m, "s_w", [2.0**-6] * 5), 4, ["Quant_Wq", "broadcast"]),
]


@pytest.mark.parametrize("case,mutate,code,words", MLP_CASES, ids=[c[0] for c in MLP_CASES])
def test_bad_mlp_is_refused(tmp_path, make_qonnx_mlp, case, mutate, code, words):
    m = onnx.load(str(make_qonnx_mlp(tmp_path / "mlp.onnx")))
    mutate(m)
    bad = tmp_path / f"{case}.onnx"
    onnx.save(m, bad)
    got, text = run("compile", bad, "-o", tmp_path / "prj")
    line = one_line(text)
    assert got == code, text
    for w in words:
        assert w in line, (w, line)
    assert not (tmp_path / "prj").exists()


def conv3d_qonnx(path: Path, shape, out_channels=2) -> Path:
    """Quant(x) -> Conv3d(Quant(W)) -> Quant: a hand-written QONNX graph of any input shape."""
    r = np.random.default_rng(0)
    cin = shape[1]
    c = lambda name, v: numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)
    inits = [c("W", r.integers(-7, 8, size=(out_channels, cin, 3, 3, 3)) * 2.0**-3), c("s", 2.0**-4),
             c("s_w", 2.0**-3), c("zp", 0.0), c("b8", 8.0), c("b4", 4.0)]
    q = lambda i, s, bw, o: helper.make_node("Quant", [i, s, "zp", bw], [o], domain="qonnx.custom_op.general",
                                             name=f"Quant_{o}", signed=1, narrow=0, rounding_mode="ROUND")
    nodes = [q("x", "s", "b8", "xq"), q("W", "s_w", "b4", "Wq"),
             helper.make_node("Conv", ["xq", "Wq"], ["c"], name="Conv_big", kernel_shape=[3, 3, 3], pads=[1] * 6),
             q("c", "s", "b8", "y")]
    out_shape = [shape[0], out_channels, *shape[2:]]
    g = helper.make_graph(nodes, "conv3d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_small_conv3d_fixture_compiles(tmp_path):
    """The hand-written graph below is itself valid: only its size makes the next test fail."""
    code, text = run("inspect", conv3d_qonnx(tmp_path / "ok.onnx", (1, 1, 6, 6, 6)))
    assert code == 0, text


@pytest.mark.parametrize("shape,cout,where", [((1, 1, 2048, 2048, 2048), 2, "input"), ((1, 1, 64, 64, 600), 1024, "Conv_big")])
def test_huge_shapes_are_refused(tmp_path, shape, cout, where):
    """More elements than a C ``int`` indexes: refused, naming the input or the node, before
    anything is allocated (the check runs in milliseconds)."""
    got, text = run("compile", conv3d_qonnx(tmp_path / "huge.onnx", shape, cout), "-o", tmp_path / "prj")
    line = one_line(text)
    assert got == 4 and where in line and "elements" in line, text
    assert not (tmp_path / "prj").exists()


def test_hostile_names_stay_inside_the_project(tmp_path, make_qonnx_mlp):
    """Node, tensor and graph names that look like paths ('../..', absolute) never reach the
    file system: every file is written inside the project, and it verifies."""
    m = onnx.load(str(make_qonnx_mlp(tmp_path / "mlp.onnx")))
    outside = tmp_path / "outside"
    rename = {"mm": "../../escaped_mm", "r": str(outside / "abs_r")}
    for n in m.graph.node:
        n.name = "../../../" + n.name
        n.input[:] = [rename.get(x, x) for x in n.input]
        n.output[:] = [rename.get(x, x) for x in n.output]
    m.graph.name = "../../graph"
    bad = tmp_path / "sub" / "names.onnx"
    bad.parent.mkdir()
    onnx.save(m, bad)
    before = set(tmp_path.rglob("*"))
    code, text = run("compile", bad, "-o", tmp_path / "sub" / "prj")
    assert code == 0, text
    created = set(tmp_path.rglob("*")) - before
    prj = tmp_path / "sub" / "prj"
    assert created and all(p == prj or prj in p.parents for p in created), sorted(map(str, created - {prj}))[:5]
    assert not outside.exists()
    code, text = run("verify", bad, prj, "--samples", 50)
    assert code == 0 and "0 mismatches" in text, text
