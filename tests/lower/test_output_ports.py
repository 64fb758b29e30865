"""Every argument of the design's top function is its own array: an output held in an input's
buffer (a Transpose that only relabels, a Flatten or Reshape, which hls4ml's io_parallel does
in place) or in an earlier output's is copied into a layer of its own.  Once the top function
took one array as input and output (``redefinition of 'result_t* x_in'``), or hls4ml stopped on
an assertion (a Flatten of an output that is itself an output).  A design whose only layer is
hls4ml's Transpose builds too."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from tessera.compiler.api import CompileOptions, VerifyOptions, compile_model, verify_project

from ..conformance.cases import QONNX_DOMAIN, _const, _graph, _quant

INITS = [_const("s", 0.25), _const("zero", 0.0), _const("b4", 4.0)]


def _relabelled(path: Path, kind: str) -> Path:
    """The input's Quant, then ``kind``: a Transpose of a (3, 5) input or a Flatten of a (3, 2, 2)
    map to the output."""
    if kind == "transpose":
        nodes = [_quant("x", "xq", "s", "zero", "b4"), helper.make_node("Transpose", ["xq"], ["y"], name="T", perm=[0, 2, 1])]
        return _graph(path, nodes, INITS, (3, 5), (5, 3))
    nodes = [_quant("x", "xq", "s", "zero", "b4"), helper.make_node("Flatten", ["xq"], ["y"], name="F", axis=1)]
    return _graph(path, nodes, INITS, (3, 2, 2), (12,))


def _two_outputs(path: Path, op: str) -> Path:
    """Outputs ``y0`` (the input's Quant) and ``y1`` (its Transpose or Flatten)."""
    shape, second = ((3, 5), (5, 3)) if op == "Transpose" else ((3, 2, 2), (12,))
    attrs = {"perm": [0, 2, 1]} if op == "Transpose" else {"axis": 1}
    nodes = [_quant("x", "y0", "s", "zero", "b4"), helper.make_node(op, ["y0"], ["y1"], name="R", **attrs)]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, *shape])],
                          [helper.make_tensor_value_info("y0", TensorProto.FLOAT, [1, *shape]),
                           helper.make_tensor_value_info("y1", TensorProto.FLOAT, [1, *second])], INITS)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QONNX_DOMAIN, 1)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def _ports(prj: Path) -> list[str]:
    """The argument names of the top function's prototype (arrays or streams)."""
    header = (prj / "firmware" / "tessera_model.h").read_text()
    start = header.index("void tessera_model(") + len("void tessera_model(")
    return [re.search(r"(\w+)\s*(\[[^\]]*\])?$", arg.strip()).group(1)
            for arg in header[start:header.index(")", start)].split(",")]


@pytest.mark.parametrize("io", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("kind", ["transpose", "flatten"])
def test_a_design_that_relabels_its_input_has_two_ports(tmp_path, io, kind):
    model = _relabelled(tmp_path / "m.onnx", kind)
    prj = compile_model(model, tmp_path / "prj", CompileOptions(io_type=io, tb_samples=2)).project
    ports = _ports(prj)
    assert len(ports) == 2 and ports[0] != ports[1], ports


@pytest.mark.parametrize("io", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("op", ["Transpose", "Flatten"])
def test_two_outputs_of_one_buffer_have_their_own_ports(tmp_path, io, op):
    model = _two_outputs(tmp_path / "m.onnx", op)
    prj = compile_model(model, tmp_path / "prj", CompileOptions(io_type=io, tb_samples=2)).project
    ports = _ports(prj)
    assert len(ports) == 3 and len(set(ports)) == 3, ports


@pytest.mark.csim
@pytest.mark.parametrize("io,build", [("io_parallel", lambda p: _relabelled(p, "flatten")),
                                      ("io_stream", lambda p: _two_outputs(p, "Transpose"))])
def test_the_copied_ports_verify(tmp_path, io, build):
    model = build(tmp_path / "m.onnx")
    prj = compile_model(model, tmp_path / "prj", CompileOptions(io_type=io, tb_samples=4)).project
    report = verify_project(model, prj, VerifyOptions(samples=50, user_samples=0, require_independent=True))
    assert report.passed and report.mismatches == 0, report.verdict()
    assert report.independent.equal == report.outputs > 0, report.verdict()


@pytest.mark.csim
@pytest.mark.parametrize("io", ["io_parallel", "io_stream"])
def test_a_design_whose_only_layer_is_a_transpose_builds(tmp_path, io):
    """A Transpose of the channels with the height of the input's (3, 4, 2) map: hls4ml's
    Transpose layer moves the codes, the design's first and only layer.  Its header uses
    nnet_common.h's macros, which the C-simulation's prelude once lacked there."""
    nodes = [_quant("x", "xq", "s", "zero", "b4"), helper.make_node("Transpose", ["xq"], ["y"], name="T", perm=[0, 2, 1, 3])]
    model = _graph(tmp_path / "m.onnx", nodes, INITS, (3, 4, 2), (4, 3, 2))
    prj = compile_model(model, tmp_path / "prj", CompileOptions(io_type=io, tb_samples=4)).project
    report = verify_project(model, prj, VerifyOptions(samples=50, user_samples=0, require_independent=True))
    assert report.passed and report.mismatches == 0, report.verdict()
