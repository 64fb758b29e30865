"""Recurrent cells with float-scale quantizers (frontend/recurrent.py, cells.program.requant).

Brevitas' default ``QuantLSTM`` has float scales on all eleven of its quantizers once its
activation statistics are collected (before that: power-of-two accumulator and io scales and
``float32(1/255)`` sigmoids), a float scale per gate on its weights, and biases on the grid
``float32(s_w * s_x)``, which is not the exact product of the two.  Every scale is a dyadic
rational: a requantization between two scales is the exact step
``clamp(R(slope * x + offset))`` (the bias as the per-row offset), thresholds in the
reference and a proven multiply-shift in the kernel.  The exact reference equals the user's
file run in float64 (an executor that shares nothing with the op semantics) on every
output, and the C-simulation equals the reference.  Our GRU takes float scales too (a sum
of values on two float scales multiplies each onto their common odd part; a requantization
no multiply-shift of 64 bits fits is compared with its exact thresholds in the kernel); a
combination whose exact intermediates need more than 62 bits is refused in one line.
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
from tessera.compiler.ops import OPS
from tessera.compiler.ops.quant import quantize_float
from tessera.compiler.reference.interpret import run_ir
from tessera.models.brevitas_default import brevitas_quant_lstm
from tessera.models.rnn.onnx_run import run_cell_onnx

from .test_real_constants import refused_in_one_line

T, I, H = 5, 4, 8


def _default_lstm(tmp_path, seed: int = 0, calibrated: bool = False, **kw):
    """brevitas ``QuantLSTM`` with every quantizer at its default (models/brevitas_default.py),
    exported before any training step or after ``calibrated`` statistics steps."""
    return brevitas_quant_lstm(tmp_path / "lstm.onnx", seed=seed, calibrated=calibrated, steps=T, inputs=I, hidden=H, **kw)


def _inputs(n: int, seed: int = 1, shape=(T, I)) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((n, *shape)) * 0.7).astype(np.float32)


def _file(path, x: np.ndarray) -> np.ndarray:
    """The sequence output of the user's file, run in float64 one sample at a time."""
    ys = [run_cell_onnx(path, {"x": x[i:i + 1]})["y"] for i in range(len(x))]
    return np.stack([y.reshape(x.shape[1], -1) if x.ndim == 3 else y[0] for y in ys])


def _reference(path, x: np.ndarray) -> tuple[np.ndarray, object]:
    """The exact reference's real outputs on the real inputs ``x`` (through the input's quantizer)."""
    g = api.load_model(path)
    real_in = g.input_map.codes(x) if g.input_map is not None else quantize_float(g.input_quant, x)
    return g.real(g.output, run_ir(g, real_in)), g


@pytest.mark.parametrize("calibrated,kw", [(False, {}), (True, {}), (True, {"coupled_input_forget_gates": True}),
                                           (True, {"weight_bit_width": 4})], ids=["initial", "default", "cifg", "w4"])
def test_default_quant_lstm_equals_the_file(tmp_path, calibrated, kw):
    path = _default_lstm(tmp_path, calibrated=calibrated, **kw)
    x = _inputs(300)
    got, g = _reference(path, x)
    (node,) = g.nodes
    assert {gate.act.mult for gate in node.attrs.gates} != {1}, "the sigmoid scales should be float"
    if calibrated:  # every quantizer: the accumulators, the cell state, the output
        assert 1 not in {gate.acc_mult for gate in node.attrs.gates} | {node.attrs.cell_mult, node.attrs.out_mult}
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


def _calibrated(m, defaults: dict, batch: tuple):
    """``m`` with brevitas' default quantizers on the named submodules (``defaults``: name ->
    factory), after three statistics steps on random ``batch``-shaped inputs, in eval mode."""
    for name, make in defaults.items():
        setattr(m, name, make())
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(*batch))
    return m.eval()


def _default_gru(tmp_path, acc=(), sigmoids=False, tanh=False, output=False, inputs=False, float_weights=False,
                 seed: int = 0):
    """Our ``QuantGRU`` (ternary power-of-two weights) with brevitas' default quantizers
    (float scales from statistics) in the named places, after three statistics steps."""
    from brevitas.nn import QuantIdentity, QuantSigmoid, QuantTanh
    from brevitas.quant import Int8WeightPerTensorFloat

    from tessera.models.rnn.cells import QuantGRU
    from tessera.models.rnn.export import export_gru
    from tessera.models.rnn.quant import weight_quant_for

    torch.manual_seed(seed)
    m = QuantGRU(I, 6, weight_quant=Int8WeightPerTensorFloat if float_weights else weight_quant_for("ternary"))
    defaults = {f"{q}_acc_quant": lambda: QuantIdentity(return_quant_tensor=False) for q in acc}
    if sigmoids:
        defaults |= {f"{q}_sigmoid_quant": lambda: QuantSigmoid(return_quant_tensor=False) for q in ("reset", "update")}
    if tanh:
        defaults["new_tanh_quant"] = lambda: QuantTanh(return_quant_tensor=False)
    if output:
        defaults["output_quant"] = lambda: QuantIdentity(return_quant_tensor=True)
    if inputs:
        defaults["input_quant"] = lambda: QuantIdentity(return_quant_tensor=True)
    m = _calibrated(m, defaults, (16, T, I))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export_gru(m, tmp_path / "gru.onnx", seq_len=T)


ALL_ACC = ("reset", "update", "new")
GRU_CASES = {"reset-acc": {"acc": ("reset",)}, "accs": {"acc": ALL_ACC},
             "accs-sigmoids": {"acc": ALL_ACC, "sigmoids": True}, "output": {"output": True},
             "weights": {"float_weights": True}, "weights-accs": {"float_weights": True, "acc": ALL_ACC}}


@pytest.mark.parametrize("case", list(GRU_CASES))
def test_our_gru_with_default_quantizers_equals_the_file(tmp_path, case):
    path = _default_gru(tmp_path, **GRU_CASES[case])
    x = _inputs(300)
    got, g = _reference(path, x)
    (node,) = g.nodes
    mults = [m for gate in node.attrs.gates for m in (gate.acc_mult, gate.wx.mult, gate.wh.mult)] + [node.attrs.out_mult]
    assert set(mults) != {1}, "some quantizer should have a float scale"
    want = _file(path, x)
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {got.size} outputs differ from the file"
    assert np.unique(got).size > 20


def test_gru_float_scales_beyond_int64_are_refused(tmp_path):
    path = _default_gru(tmp_path, acc=ALL_ACC, sigmoids=True, tanh=True, output=True, inputs=True, float_weights=True)
    line = refused_in_one_line(path, "QuantGRUCell")
    assert "needs" in line and "more than the 62 the exact flow supports" in line, line


def _csim_verifies(tmp_path, path, io_type: str, x=None) -> None:
    """Compile, then ``verify`` 300 random + 100 real samples (``x``) with the file's own
    outputs (float64) as the independent check: 0 mismatches, every output equal."""
    x = _inputs(100, seed=4) if x is None else x
    want = _file(path, x)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "file.npy", want)
    runner = CliRunner()
    r = runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "prj"), "--io-type", io_type])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["verify", str(path), str(tmp_path / "prj"), "--samples", "300", "--data",
                             str(tmp_path / "x.npy"), "--expected", str(tmp_path / "file.npy"),
                             "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    per = want[0].size
    assert f"{len(x) * per}/{len(x) * per} equal the exact reference" in r.output, r.output
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["mismatches"] == 0 and rep["samples"] == 300 + len(x) and rep["outputs"] == (300 + len(x)) * per


@pytest.mark.csim
@pytest.mark.parametrize("io_type,calibrated,kw", [("parallel", True, {}), ("stream", True, {"coupled_input_forget_gates": True}),
                                                   ("stream", False, {})], ids=["parallel", "stream-cifg", "stream-initial"])
def test_default_quant_lstm_csim_verifies(tmp_path, io_type, calibrated, kw):
    _csim_verifies(tmp_path, _default_lstm(tmp_path, seed=3, calibrated=calibrated, **kw), io_type)


@pytest.mark.csim
@pytest.mark.parametrize("io_type,case", [("parallel", "accs-sigmoids"), ("stream", "output")])
def test_default_quant_gru_csim_verifies(tmp_path, io_type, case):
    path = _default_gru(tmp_path, seed=2, **GRU_CASES[case])
    g = api.load_model(path)
    (node,) = g.nodes
    forms = OPS[node.op].analyze(node.attrs, g.type_of(node.inputs[0])).forms
    assert any(f.mult is None for f in forms.values()), "the kernel should compare with thresholds somewhere"
    _csim_verifies(tmp_path, path, io_type)


FS, FC, HC = 6, 2, 3  # ConvLSTM frames: size, input channels, hidden channels
ALL_CONV_ACC = ("input", "forget", "cell", "output")
CONVLSTM_CASES = {"accs-sigmoids": {"acc": ALL_CONV_ACC, "sigmoids": True}, "cell": {"cell": True},
                  "output": {"output": True}, "weights": {"float_weights": True}}


def _default_convlstm(tmp_path, acc=(), sigmoids=False, cell=False, output=False, float_weights=False, seed: int = 0):
    """Our ``QuantConvLSTM`` (3x3 kernels) with brevitas' default quantizers in the named
    places, after three statistics steps."""
    from brevitas.nn import QuantIdentity, QuantSigmoid
    from brevitas.quant import Int8WeightPerTensorFloat

    from tessera.models.rnn.cells import QuantConvLSTM
    from tessera.models.rnn.export import export_convlstm
    from tessera.models.rnn.quant import weight_quant_for

    torch.manual_seed(seed)
    m = QuantConvLSTM(FC, HC, 3, weight_quant=Int8WeightPerTensorFloat if float_weights else weight_quant_for("ternary"))
    defaults = {f"{q}_acc_quant": lambda: QuantIdentity(return_quant_tensor=False) for q in acc}
    if sigmoids:
        defaults |= {f"{q}_sigmoid_quant": lambda: QuantSigmoid(return_quant_tensor=False) for q in ("input", "forget", "output")}
    if cell:
        defaults["cell_state_quant"] = lambda: QuantIdentity(return_quant_tensor=False)
    if output:
        defaults["output_quant"] = lambda: QuantIdentity(return_quant_tensor=True)
    m = _calibrated(m, defaults, (8, 3, FC, FS, FS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export_convlstm(m, tmp_path / "convlstm.onnx", seq_len=3, height=FS, width=FS)


@pytest.mark.parametrize("case", list(CONVLSTM_CASES))
def test_our_convlstm_with_default_quantizers_equals_the_file(tmp_path, case):
    path = _default_convlstm(tmp_path, **CONVLSTM_CASES[case])
    x = _inputs(60, shape=(3, FC, FS, FS))
    got, g = _reference(path, x)
    (node,) = g.nodes[-1:]
    cell = node.attrs.encoder
    mults = [m for gate in cell.gates for m in (gate.acc_mult, gate.act.mult, gate.wx.mult, gate.wh.mult)] + [cell.cell_mult, cell.out_mult]
    assert set(mults) != {1}, "some quantizer should have a float scale"
    want = _file(path, x)
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {got.size} outputs differ from the file"
    assert np.unique(got).size > 20


def test_convlstm_float_scales_beyond_int64_are_refused(tmp_path):
    path = _default_convlstm(tmp_path, acc=ALL_CONV_ACC, sigmoids=True, cell=True, output=True, float_weights=True)
    line = refused_in_one_line(path, "QuantConvLSTMCell")
    assert "needs" in line and "more than the 62 the exact flow supports" in line, line


@pytest.mark.csim
@pytest.mark.parametrize("io_type,case", [("parallel", "accs-sigmoids"), ("stream", "output")])
def test_default_quant_convlstm_csim_verifies(tmp_path, io_type, case):
    path = _default_convlstm(tmp_path, seed=2, **CONVLSTM_CASES[case])
    _csim_verifies(tmp_path, path, io_type, x=_inputs(40, seed=4, shape=(3, FC, FS, FS)))
