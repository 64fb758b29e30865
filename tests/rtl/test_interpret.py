"""Tessera's interpreter of da4ml's programs (the check's executor) against da4ml's own
reference interpreter (``CombLogic.__call__``, Python, one sample at a time) and against the
exact integer semantics, on the programs the back end traces: every opcode they use
(adds, constants, ReLU, wraps, muxes of max/min, lookups), pipelines of several stages, and a
wide signed wrap, which da4ml 0.6.0's compiled ``predict`` gets wrong beyond 32 bits."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("da4ml")

from da4ml.trace import FixedVariableArrayInput, HWConfig, comb_trace, to_pipeline  # noqa: E402

from tessera.compiler.ir.types import FixedType  # noqa: E402
from tessera.compiler.ops import dense, lut, quant, relu  # noqa: E402
from tessera.compiler.reference.interpret import run_ir  # noqa: E402
from tessera.compiler.rtl.interpret import run_program  # noqa: E402
from tessera.compiler.rtl.trace import trace  # noqa: E402
from tessera.compiler.samples import input_samples  # noqa: E402


def test_a_signed_wrap_wider_than_32_bits_is_exact():
    inp = FixedVariableArrayInput((1,), hwconf=HWConfig(1, -1, -1))
    x = inp.quantize(k=np.array([1]), i=np.array([40]), f=np.array([0]))._vars[0]
    program = comb_trace(inp, [x.quantize(1, 36, 0, "WRAP", "TRN") * 3.0 - 7.0])
    codes = np.array([[-(2**36)], [-(2**32) - 5], [-5], [-1], [0], [2**35 + 3], [2**36 - 1]])
    want = codes * 3 - 7
    assert np.array_equal(run_program(codes, program), want)
    assert np.array_equal([program(c.astype(float))[0] for c in codes], want.ravel())  # da4ml's Python interpreter


def _design(make_graph, make_type, rng):
    """Dense, ReLU, a requantization (the rounding table's facts, a clamp of muxes), a lookup table."""
    w = rng.integers(-7, 8, size=(6, 8))
    table = lut.Attrs("tanh", quant.Attrs(FixedType(5, 4, True), False, "ROUND"))
    return make_graph(make_type(8, 3, True, (6,)), ("dense", dense.Attrs(w, FixedType(4, 1, True), None, None)),
                      ("relu", relu.Attrs()), ("requant", quant.Attrs(FixedType(5, 2, False), False, "HALF_UP")),
                      ("lut", table))


@pytest.mark.parametrize("pipeline", [None, 1, 3])
def test_the_interpreter_equals_da4mls_and_the_exact_semantics(make_graph, make_type, rng, pipeline):
    g = _design(make_graph, make_type, rng)
    program = trace(g).program()
    programs = [program] if pipeline is None else list(to_pipeline(program, pipeline, verbose=False).solutions)
    assert {abs(op.opcode) for op in program.ops} >= {0, 2, 3, 5, 6, 8}
    codes = input_samples(g, 300, seed=2)
    got = run_program(codes, *programs)
    assert np.array_equal(got, run_ir(g, codes).reshape(300, -1))
    theirs = np.array([program(c.astype(float)) for c in codes[:40].reshape(40, -1)])
    assert np.array_equal(got[:40], theirs)
