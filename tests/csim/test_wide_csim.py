"""C-simulation (g++) of the piecewise requantization (compiler/ops/piecewise.py,
hls_templates/piecewise) == the integer reference, exactly, at 16-bit outputs: a bend per
channel (a PRelu's two pieces, negative slopes included) in proven floors, and dyadic steps
whose rounding mode the kernel applies to the shift, one in each io type (the conformance
models of tests/conformance/wide.py run the proven floors in both)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from tessera.compiler.exact.pieces import Pieces
from tessera.compiler.exact.requant import Step
from tessera.compiler.exact.rounding import Rounding
from tessera.compiler.ir.types import FixedType
from tessera.compiler.ops import piecewise

from .test_ops_csim import csim_exact

pytestmark = pytest.mark.csim
WIDE = (-(1 << 15), (1 << 15) - 1)


def _bend(a: float, b: Fraction, knee: float, scale: float, mode: Rounding) -> Pieces:
    a, knee, scale = (Fraction(float(np.float32(v))) for v in (a, knee, scale))
    line, bent = Step(a / scale, b / scale, mode, *WIDE), Step(a * knee / scale, b * knee / scale, mode, *WIDE)
    if a > 0:
        return Pieces((math.ceil(-b / a),), (bent, line))
    return Pieces((math.floor(-b / a) + 1,), (line, bent))


FUNCTIONS = {
    "bends": tuple(_bend(a, Fraction(b, 7), k, 0.00123, Rounding.ROUND)
                   for a, b, k in ((0.013, 5, 0.2), (-0.021, -3, -0.3), (0.007, 0, 0.05))),
    "dyadic": tuple(Pieces((), (Step(Fraction(c, 8), Fraction(-1, 2), Rounding.HALF_EVEN, *WIDE),)) for c in (3, -5, 7)),
}


@pytest.mark.parametrize("name,io_type", [("bends", "io_parallel"), ("dyadic", "io_stream")])
def test_piecewise_csim(make_graph, make_type, tmp_path, name, io_type):
    functions = FUNCTIONS[name]
    g = make_graph(make_type(13, 0, True, (len(functions),)),  # a vector: one channel per element
                   ("piecewise", piecewise.Attrs(functions, FixedType(16, 0, True))))
    assert piecewise.implementation(g.nodes[0].attrs, g.values["x"]).segments.rounding is (
        Rounding.FLOOR if name == "bends" else Rounding.HALF_EVEN)
    csim_exact(g, tmp_path, io_type, n=200)
