"""Recurrent cells with float-scale quantizers (frontend/recurrent.py, cellprog.Act).

Brevitas' default ``QuantLSTM``, before its activation statistics are collected, quantizes
its sigmoids with ``float32(1/255)`` and its weights with a float scale per gate.  Every such scale is a dyadic rational, so the cell
stays exact integer arithmetic with shifts: the exact reference equals the user's file run
in float64 (an executor that shares nothing with the op semantics) on every output, and the
C-simulation equals the reference.  A float scale where the cell requantizes (an
accumulator, the cell state, the output) is refused in one line.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler import api
from tessera.compiler.ops.quant import quantize_float
from tessera.compiler.reference.interpret import run_ir
from tessera.models.rnn.onnx_run import run_cell_onnx

from .test_real_constants import refused_in_one_line

T, I, H = 5, 4, 8


def _export(module, path, shape):
    from brevitas.export import export_qonnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_qonnx(module, torch.zeros(1, *shape), str(path), dynamo=False, input_names=["x"],
                     output_names=["y", "h", "c"])
    return path


def _default_lstm(tmp_path, seed: int = 0, calibrated: bool = False, **kw):
    """brevitas ``QuantLSTM`` with every quantizer at its default, exported before any
    training step (the activation scales at their initial values: 1/128 and 1/255; the
    weight scales are float) or after ``calibrated`` statistics steps (every scale float)."""
    from brevitas.nn import QuantLSTM

    torch.manual_seed(seed)
    m = QuantLSTM(I, H, batch_first=True, return_quant_tensor=False, **kw)
    if calibrated:
        with torch.no_grad():  # statistics-based activation scales take their values in training mode
            for _ in range(3):
                m(torch.randn(16, T, I))
    return _export(m.eval(), tmp_path / "lstm.onnx", (T, I))


def _inputs(n: int, seed: int = 1, shape=(T, I)) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((n, *shape)) * 0.7).astype(np.float32)


def _file(path, x: np.ndarray) -> np.ndarray:
    """The sequence output of the user's file, run in float64 one sample at a time."""
    return np.stack([run_cell_onnx(path, {"x": x[i:i + 1]})["y"].reshape(x.shape[1], -1) for i in range(len(x))])


def _reference(path, x: np.ndarray) -> tuple[np.ndarray, object]:
    g = api.load_model(path)
    codes = run_ir(g, quantize_float(g.input_quant, x))
    return np.ldexp(codes.astype(np.float64), -g.values[g.output].ftype.frac), g


@pytest.mark.parametrize("kw", [{}, {"coupled_input_forget_gates": True}, {"weight_bit_width": 4}], ids=["default", "cifg", "w4"])
def test_default_quant_lstm_equals_the_file(tmp_path, kw):
    path = _default_lstm(tmp_path, **kw)
    x = _inputs(300)
    got, g = _reference(path, x)
    (node,) = g.nodes
    mults = {gate.act.mult for gate in node.attrs.gates}
    assert mults != {1}, "the sigmoid scales should be float (1/255), not powers of two"
    want = _file(path, x)
    assert got.shape == want.shape == (300, T, H)
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {got.size} outputs differ from the file"
    assert np.unique(got).size > 20  # the outputs are not a constant


def test_our_gru_with_float_sigmoid_scales_equals_the_file(tmp_path):
    from brevitas.nn import QuantSigmoid

    from tessera.models.rnn.cells import QuantGRU
    from tessera.models.rnn.export import export_gru
    from tessera.models.rnn.quant import weight_quant_for

    torch.manual_seed(0)
    m = QuantGRU(I, 6, weight_quant=weight_quant_for("ternary"))
    m.reset_sigmoid_quant = QuantSigmoid(return_quant_tensor=False)  # brevitas' default: float32(1/255)
    m.update_sigmoid_quant = QuantSigmoid(return_quant_tensor=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_gru(m.eval(), tmp_path / "gru.onnx", seq_len=T)
    x = _inputs(300)
    got, g = _reference(path, x)
    assert {gate.act.mult for gate in g.nodes[0].attrs.gates[:2]} != {1}
    want = _file(path, x)
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {got.size} outputs differ from the file"


def test_float_scale_where_the_cell_requantizes_is_refused(tmp_path):
    path = _default_lstm(tmp_path, calibrated=True)  # every quantizer has a float scale, the output's first
    line = refused_in_one_line(path, "output quantizer scale")
    assert "QuantLSTMCell" in line and "is not a power of two" in line, line


@pytest.mark.csim
@pytest.mark.parametrize("io_type,kw", [("parallel", {}), ("stream", {"coupled_input_forget_gates": True})], ids=["parallel", "stream-cifg"])
def test_default_quant_lstm_csim_verifies(tmp_path, io_type, kw):
    path = _default_lstm(tmp_path, seed=3, **kw)
    x = _inputs(100, seed=4)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "file.npy", _file(path, x))  # the file's own outputs, float64
    runner = CliRunner()
    r = runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "prj"), "--io-type", io_type])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["verify", str(path), str(tmp_path / "prj"), "--samples", "300", "--data",
                             str(tmp_path / "x.npy"), "--expected", str(tmp_path / "file.npy"),
                             "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    assert f"{100 * T * H}/{100 * T * H} equal the exact reference" in r.output, r.output
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["mismatches"] == 0 and rep["samples"] == 400 and rep["outputs"] == 400 * T * H
