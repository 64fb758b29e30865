"""``Gemm`` with ``alpha`` and ``beta`` (``Y = alpha * A B' + beta * C``): alpha folded into the
weight (a power of two scales its values; any other factor, or a negative one, becomes the real
scale of its integer codes), beta into the bias, each product exact in float64 (always, for float32
factors: 24 + 24 significant bits) or refused in one line.  The exact reference equals the file run in float64 on every output, and the
C-simulation equals the reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .test_real_constants import _exact_and_independent, _f, _quant, _save, csim_verified, refused_in_one_line


def _gemm(path, alpha: float, beta: float, w_scale: float = 0.125, quantized: bool = True):
    """Quant(x) -> Gemm(Quant(W), C; alpha, beta, transB) [-> Quant]: a float-scale input, a
    power-of-two or float-scale weight, a float bias."""
    rng = np.random.default_rng(0)
    inits = [_f("s_x", 0.0371), _f("zero", 0.0), _f("b8", 8.0), _f("s_w", w_scale),
             _f("w", rng.integers(-100, 100, (4, 6)) * w_scale), _f("c", rng.integers(-50, 50, 4) * 0.01),
             _f("s_y", 0.05)]
    nodes = [_quant("x", "s_x", "zero", "b8", "xq"), _quant("w", "s_w", "zero", "b8", "wq"),
             helper.make_node("Gemm", ["xq", "wq", "c"], ["g" if quantized else "y"], name="gemm", alpha=alpha, beta=beta,
                              transB=1)]
    if quantized:
        nodes.append(_quant("g", "s_y", "zero", "b8", "y"))
    return _save(path, nodes, inits, [6], [4])


@pytest.mark.parametrize("alpha,beta,w_scale,quantized", [
    (0.25, 0.5, 0.125, True),  # powers of two: the weight's and the bias' values scaled
    (0.3, 0.7, 0.125, True),  # float factors: the weight's codes on the scale alpha * 2**-3
    (-0.3, 1.0, 0.0371, False),  # negative alpha on a float-scaled weight; the accumulator as the output
    (1.0, 0.7, 0.125, False),  # beta alone off the power-of-two grid
    (2.0, 1.0, 0.0371, True),
])
def test_gemm_alpha_beta_is_exact(tmp_path, alpha, beta, w_scale, quantized):
    g = _exact_and_independent(_gemm(tmp_path / "m.onnx", alpha, beta, w_scale, quantized), 2000)
    assert g.nodes[0].op == "dense"


def test_alpha_zero_is_refused_in_one_line(tmp_path):
    refused_in_one_line(_gemm(tmp_path / "m.onnx", 0.0, 1.0), r"node 'gemm' \(Gemm\): attribute alpha=0 is not supported")


@pytest.mark.csim
def test_gemm_alpha_beta_csim_equals_reference_and_users_model(tmp_path):
    csim_verified(_gemm(tmp_path / "m.onnx", 0.3, 0.7), tmp_path / "prj", "io_parallel", 300, 4)
