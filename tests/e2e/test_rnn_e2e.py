"""Quantized RNN classifiers (embedded input -> LSTM/GRU -> last state -> classifier) from
brevitas: the exact reference == the brevitas forward, and the CLI's C-simulation == the
reference on every output."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from tessera.cli import main
from tessera.compiler.independent import CELL_EXECUTOR
from tessera.compiler.pipeline import compile_ir
from tessera.compiler.ops.quant import quantize_float
from tessera.compiler.reference.interpret import run_ir

pytestmark = pytest.mark.csim


def _trained_sentiment(cell: str, weights: str, seed: int = 0):
    from tessera.models.rnn.networks import SentimentRNN

    torch.manual_seed(seed)
    m = SentimentRNN(cell, weights, 40, embed_dim=6, hidden_size=5)
    opt = torch.optim.Adam(m.parameters(), 1e-2)
    m.train()
    for _ in range(60):  # past the activation quantizers' statistics phase
        tok = torch.randint(1, 40, (16, 8))
        loss = torch.nn.functional.cross_entropy(m(tok), torch.randint(0, 2, (16,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return m.eval()


@pytest.mark.parametrize("cell,weights", [("lstm", "fp"), ("lstm", "binary"), ("lstm", "ternary"), ("lstm", "quaternary"),
                                          ("gru", "fp"), ("gru", "binary"), ("gru", "ternary"), ("gru", "quaternary")])
def test_reference_equals_brevitas(tmp_path, cell, weights):
    from tessera.models.rnn.export import export_sentiment

    m = _trained_sentiment(cell, weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_sentiment(m, tmp_path / "s.onnx", seq_len=8)
    g = compile_ir(path)
    assert [n.op for n in g.nodes] == [cell, "requant", "dense", "requant"]
    tok = torch.randint(1, 40, (300, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        emb, want = m.embedding(tok).numpy(), m(tok).numpy().astype(np.float64)
    got = np.ldexp(run_ir(g, quantize_float(g.input_quant, emb)).astype(np.float64), -g.values[g.output].ftype.frac)
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {got.size} outputs differ from brevitas"


@pytest.mark.parametrize("cell,weights,io_type", [("lstm", "ternary", "stream"), ("gru", "fp", "parallel"),
                                                  ("gru", "binary", "stream")])
def test_sentiment_cli_verifies(tmp_path, cell, weights, io_type):
    from tessera.models.rnn.export import export_sentiment

    m = _trained_sentiment(cell, weights, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_sentiment(m, tmp_path / "s.onnx", seq_len=8)
    runner = CliRunner()
    r = runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "prj"), "--io-type", io_type])
    assert r.exit_code == 0, r.output
    tok = torch.randint(1, 40, (20, 8))
    with torch.no_grad():
        emb, logits = m.embedding(tok).numpy(), m(tok).numpy()
    np.save(tmp_path / "x.npy", emb)
    np.save(tmp_path / "brevitas.npy", logits)
    r = runner.invoke(main, ["verify", str(path), str(tmp_path / "prj"), "--samples", "300", "--data",
                             str(tmp_path / "x.npy"), "--expected", str(tmp_path / "brevitas.npy"),
                             "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    assert "framework outputs (--expected): 40/40 equal the exact reference" in r.output
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["mismatches"] == 0 and rep["samples"] == 320 and rep["outputs"] == 640
    assert rep["framework"] == {"outputs": 40, "differing_outputs": 0, "max_abs_difference": 0.0}
    # the independent check is the file itself, its cells run by the cell executor, on every sample
    assert rep["independent"]["executor"] == CELL_EXECUTOR
    assert rep["independent"]["equal"] == rep["independent"]["outputs"] == 640
    assert rep["independent"]["unchecked_samples"] == 0
    # a framework output that differs is reported (brevitas' float32 is not the file's float64)
    logits[3, 1] += 2.0 ** -6
    np.save(tmp_path / "brevitas.npy", logits)
    r = runner.invoke(main, ["verify", str(path), str(tmp_path / "prj"), "--samples", "10", "--data",
                             str(tmp_path / "x.npy"), "--expected", str(tmp_path / "brevitas.npy")])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 0 and "framework outputs (--expected): 39/40 equal the exact reference" in r.output, r.output
    assert lines[-2] == f"independent check: 60/60 outputs equal {CELL_EXECUTOR}", lines
    # without a framework the file is still checked, and --require-independent is satisfied
    for extra in ([], ["--require-independent"]):
        r = runner.invoke(main, ["verify", str(path), str(tmp_path / "prj"), "--samples", "10", *extra])
        lines = r.output.strip().splitlines()
        assert r.exit_code == 0, r.output
        assert lines[-2] == f"independent check: 20/20 outputs equal {CELL_EXECUTOR}", lines
        assert lines[-1] == "verified: 10 samples, 20 outputs, 0 mismatches", lines
    assert rep["user_model"]["execution"] == "no executor"
    assert "QuantLSTMCell" in rep["user_model"]["reason"] or "QuantGRUCell" in rep["user_model"]["reason"]


@pytest.mark.parametrize("weights,io_type", [("ternary", "parallel"), ("quaternary", "stream")])
def test_convlstm_forecaster_verifies_and_equals_brevitas(tmp_path, weights, io_type):
    """Encoder -> forecaster -> 1x1x1 read-out, from patches to logits: the exact reference
    == brevitas on every output, and the C-simulation == the reference."""
    from tessera.models.rnn.export import export_forecaster
    from tessera.models.rnn.networks import ConvLSTMForecaster, space_to_depth

    torch.manual_seed(0)
    m = ConvLSTMForecaster(weights, hidden_channels=3, kernel_size=3, patch=2, out_frames=2)
    opt = torch.optim.Adam(m.parameters(), 1e-2)
    m.train()
    for _ in range(55):
        loss = m(torch.rand(4, 3, 1, 8, 8)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    m.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_forecaster(m, tmp_path / "f.onnx", in_frames=3, size=8)
    g = compile_ir(path)
    assert [n.op for n in g.nodes] == ["requant", "convlstm", "requant", "transpose", "conv", "requant", "transpose"]
    frames = torch.rand(50, 3, 1, 8, 8, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = space_to_depth(m(frames), 2).numpy().astype(np.float64)
    x = space_to_depth(frames, 2).numpy()
    got = np.ldexp(run_ir(g, quantize_float(g.input_quant, x)).astype(np.float64), -g.values[g.output].ftype.frac)
    assert np.array_equal(got, want)
    np.save(tmp_path / "x.npy", x)
    runner = CliRunner()
    r = runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "prj"), "--io-type", io_type])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["verify", str(path), str(tmp_path / "prj"), "--samples", "100", "--data",
                             str(tmp_path / "x.npy"), "--report", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["mismatches"] == 0 and rep["samples"] == 150
    # the file itself, both cells by the cell executor, on every sample
    assert rep["independent"]["executor"] == CELL_EXECUTOR
    assert rep["independent"]["equal"] == rep["independent"]["outputs"] == rep["outputs"]


def test_a_recurrent_file_is_checked_against_itself_by_default(tmp_path, monkeypatch):
    """verify of a recurrent file without --expected: the independent check runs the file
    itself (its QuantLSTMCell by the cell executor, compiler/independent/cells.py) on every
    sample -- never 'none' -- and fails when the frontend misreads the cell (``reverse_input``
    read as 1), though the C-simulation equals the misread reference."""
    from tessera.compiler.frontend.handlers import recurrent as recurrent_handlers

    from ..conformance.sequences import lstm_last_step

    path = lstm_last_step(True)(tmp_path / "m.onnx")
    runner = CliRunner()
    verify = lambda prj: runner.invoke(main, ["verify", str(path), str(prj), "--samples", "50",  # noqa: E731
                                              "--report", str(tmp_path / "r.json")])
    assert runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "prj")]).exit_code == 0
    r = verify(tmp_path / "prj")
    lines = r.output.strip().splitlines()
    assert r.exit_code == 0, r.output
    assert lines[-2] == f"independent check: 300/300 outputs equal {CELL_EXECUTOR}", lines
    real = recurrent_handlers.attribute
    monkeypatch.setattr(recurrent_handlers, "attribute",
                        lambda node, name, default=None: 1 if name == "reverse_input" else real(node, name, default))
    assert runner.invoke(main, ["compile", str(path), "-o", str(tmp_path / "misread")]).exit_code == 0
    r = verify(tmp_path / "misread")
    lines = r.output.strip().splitlines()
    rep = json.loads((tmp_path / "r.json").read_text())
    assert r.exit_code == 1 and rep["mismatches"] == 0 and rep["independent"]["differing_outputs"] > 0, r.output
    assert lines[-2].startswith("independent check: FAILED"), lines
    assert lines[-1].startswith("FAILED: independent check: "), lines
