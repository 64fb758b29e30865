"""The one rounding definition (compiler/exact/rounding.py) and its back ends.

The decision table is checked against the modes' definitions on exact rationals; every back
end (int64 numpy, float64 numpy, onnxruntime nodes, the C++ header every kernel includes)
is checked against the table, ties and signs included.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest

from tessera.compiler.exact.rounding import CPP_ENUM, Rounding, div_round, round_float, shift_round
from tessera.compiler.reference.model import OnnxBuilder, OrtReference
from tessera.hls_templates import path as template_path

MODES = list(Rounding)


def by_definition(q: Fraction, mode: Rounding) -> int:
    """QONNX's modes on an exact rational, from their definitions (no shared code)."""
    fl, ce = math.floor(q), math.ceil(q)
    if mode in (Rounding.ROUND, Rounding.HALF_EVEN):
        if q - fl == Fraction(1, 2):
            return fl if fl % 2 == 0 else ce
        return round(q)  # Python's round of a Fraction: nearest, ties to even
    if mode == Rounding.FLOOR:
        return fl
    if mode == Rounding.CEIL:
        return ce
    if mode == Rounding.DOWN:
        return math.trunc(q)
    if mode == Rounding.UP:
        return fl if q == fl else (ce if q > 0 else fl)
    if mode == Rounding.HALF_UP:  # ties away from zero
        return math.floor(q + Fraction(1, 2)) if q >= 0 else math.ceil(q - Fraction(1, 2))
    assert mode == Rounding.HALF_DOWN  # ties toward zero
    return math.ceil(q - Fraction(1, 2)) if q >= 0 else math.floor(q + Fraction(1, 2))


NUMS = np.arange(-40, 41, dtype=np.int64)
DENS = [1, 2, 3, 4, 5, 8, 27]


@pytest.mark.parametrize("mode", MODES)
def test_table_is_the_modes_definition(mode):
    for d in DENS:
        got = div_round(NUMS, d, mode)
        want = [by_definition(Fraction(int(n), d), mode) for n in NUMS]
        assert got.tolist() == want, (mode, d)


@pytest.mark.parametrize("mode", MODES)
def test_shift_and_float_forms_follow_the_table(mode):
    for s in (1, 2, 3, 5):
        assert shift_round(NUMS, s, mode).tolist() == div_round(NUMS, 1 << s, mode).tolist()
    v = np.concatenate([NUMS / 4.0, [0.49999999999999994, -0.49999999999999994, 2.0**52 - 0.5, -(2.0**52) + 0.5]])
    want = [by_definition(Fraction(float(x)), mode) for x in v]
    assert round_float(v, mode).astype(np.int64).tolist() == want


def test_parse_and_names():
    assert Rounding.parse("half_even") is Rounding.HALF_EVEN and Rounding.parse("ROUND") == "ROUND"
    with pytest.raises(ValueError, match="unknown rounding mode STOCHASTIC"):
        Rounding.parse("stochastic")
    assert {m.cpp for m in Rounding} == set(CPP_ENUM)
    assert Rounding.CEIL.ap_fixed is None and Rounding.ROUND.ap_fixed == "RND_CONV"


@pytest.mark.parametrize("mode", MODES)
def test_onnx_reference_follows_the_table(mode):
    """The reference builder's three forms on onnxruntime == the numpy back ends."""
    from onnx import TensorProto, helper

    b = OnnxBuilder()
    x = "x"
    xf = b.op("Cast", [x], to="double")
    outs = {
        "int_shift": b.int_shift_round(x, 3, mode),
        "div": b.op("Cast", [b.div_round(xf, b.const(np.array(27.0)), mode)], to="int64"),
        "float": b.op("Cast", [b.round(b.op("Mul", [xf, b.const(np.array(0.25))]), mode)], to="int64"),
    }
    b.nodes.append(helper.make_node("Concat", list(outs.values()), ["y"], axis=0))
    g = helper.make_graph(b.nodes, "r", [helper.make_tensor_value_info("x", TensorProto.INT64, ["N"])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, ["M"])], b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    x = np.arange(-200, 201, dtype=np.int64)
    got = OrtReference(m).session.run(None, {"x": x})[0].reshape(3, -1)
    assert got[0].tolist() == shift_round(x, 3, mode).tolist()
    assert got[1].tolist() == div_round(x, 27, mode).tolist()
    assert got[2].tolist() == round_float(x / 4.0, mode).astype(np.int64).tolist()


def test_cpp_enum_matches_the_table_names():
    text = template_path("common/nnet_tessera_rounding.h").read_text()
    names = re.search(r"enum tessera_rounding \{([^}]*)\}", text).group(1)
    assert tuple(n.split("=")[0].strip() for n in names.split(",")) == CPP_ENUM


@pytest.mark.csim
def test_cpp_header_follows_the_table(tmp_path):
    """tessera_div_round of the kernels' header, compiled with g++, == div_round for every
    mode, numerator sign and divisor (ties included)."""
    if shutil.which("g++") is None:
        pytest.fail("g++ is needed for the C-simulation tests")
    src = tmp_path / "r.cpp"
    src.write_text('#include <cstdio>\n#include <initializer_list>\n#include "nnet_tessera_rounding.h"\nint main() {\n'
                   '  for (int m = 0; m < 7; m++) for (long long d : {1LL, 2LL, 3LL, 4LL, 8LL, 27LL})\n'
                   '    for (long long n = -60; n <= 60; n++) std::printf("%lld\\n", nnet::tessera_div_round(n, d, m));\n'
                   '  return 0;\n}\n')
    exe = tmp_path / "r"
    subprocess.run(["g++", "-std=c++14", "-I", str(template_path("common")), str(src), "-o", str(exe)], check=True)
    got = np.array(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split(), dtype=np.int64)
    n = np.arange(-60, 61, dtype=np.int64)
    by_cpp = {m.cpp: m for m in MODES}
    want = [div_round(n, d, by_cpp[name]) for name in CPP_ENUM for d in (1, 2, 3, 4, 8, 27)]
    assert got.tolist() == np.concatenate(want).tolist()
