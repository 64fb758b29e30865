"""C-simulation of the recurrent kernels (hls_templates/rnn) == the integer reference, exactly,
for every weight codebook, both io types, saturating states and the LSTM options."""

from __future__ import annotations

import pytest

from .test_ops_csim import csim_exact

pytestmark = pytest.mark.csim


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("kind", ["binary", "ternary", "quaternary", "int8"])
def test_lstm_csim(make_graph, make_type, rnn_builders, rng, tmp_path, io_type, kind):
    attrs = rnn_builders["lstm"](rng, 6, 5, kind, cell_bits=16 if kind == "int8" else 8)
    g = make_graph(make_type(8, 6, True, (7, 6)), ("lstm", attrs))
    csim_exact(g, tmp_path, io_type, n=200)


@pytest.mark.parametrize("io_type,option", [("io_parallel", "cifg"), ("io_stream", "reverse"), ("io_parallel", "last"),
                                            ("io_stream", "last")])
def test_lstm_options_csim(make_graph, make_type, rnn_builders, rng, tmp_path, io_type, option):
    kw = {"cifg": {"cifg": True}, "reverse": {"reverse": True}, "last": {"return_sequences": False}}[option]
    attrs = rnn_builders["lstm"](rng, 4, 3, "ternary", **kw)
    g = make_graph(make_type(8, 6, True, (5, 4)), ("lstm", attrs))
    csim_exact(g, tmp_path, io_type, n=150)


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
def test_lstm_from_initial_states_csim(tmp_path, io_type):
    """brevitas' ``rnn(x, h0, c0)``: the kernel reading both initial states (TesseraLSTMStates);
    the one reading h0 alone is the conformance case hls4ml_quant_lstm_h0."""
    from tessera.compiler import api

    from ..frontend.test_lstm_variants import quant_lstm_from_states

    g = api.load_model(quant_lstm_from_states(tmp_path / "m.onnx"))
    prj = csim_exact(g, tmp_path, io_type, n=200)
    assert "tessera_lstm_states_" in (prj / "firmware" / "tessera_model.cpp").read_text()


@pytest.mark.parametrize("io_type", ["io_parallel", "io_stream"])
@pytest.mark.parametrize("kind", ["binary", "quaternary", "int8"])
def test_gru_csim(make_graph, make_type, rnn_builders, rng, tmp_path, io_type, kind):
    attrs = rnn_builders["gru"](rng, 5, 4, kind, return_sequences=io_type == "io_parallel")
    g = make_graph(make_type(8, 5, True, (6, 5)), ("gru", attrs))
    csim_exact(g, tmp_path, io_type, n=200)


@pytest.mark.parametrize("io_type,kind,forecaster_steps", [("io_parallel", "ternary", 0), ("io_stream", "binary", 0),
                                                           ("io_parallel", "quaternary", 3), ("io_stream", "int8", 2)])
def test_convlstm_csim(make_graph, make_type, rnn_builders, rng, tmp_path, io_type, kind, forecaster_steps):
    attrs = rnn_builders["convlstm"](rng, 3, 4, kind=kind, forecaster_steps=forecaster_steps)
    g = make_graph(make_type(8, 6, True, (3, 3, 5, 6)), ("convlstm", attrs))
    csim_exact(g, tmp_path, io_type, n=40)
