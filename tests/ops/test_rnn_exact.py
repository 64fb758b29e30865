"""Recurrent ops: integer reference == onnxruntime form, exactly, over full-range inputs
(saturating accumulators and cell states included), and == a plain float64 transcription of
the cell equations (brevitas' ``forward_iter`` order)."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.compiler.reference.model import reference_model

from ..conftest import random_convlstm
from .test_ops_exact import check_exact


def _cell_states(attrs, g, n=300):
    """Every cell state code of the integer reference on the check's inputs."""
    from tessera.compiler.ops.cells import program as cp
    from tessera.compiler.ops.lstm import OP
    from tessera.compiler.samples import sample_codes

    x = sample_codes(g.values["x"], n, seed=0)
    state = [cp.Fx(np.zeros((n, attrs.hidden), np.int64), q.out.frac) for q in OP.state_quants(attrs)]
    cs = []
    for t in range(x.shape[1]):
        state = OP.step(cp.NumpyArith(), attrs, cp.Fx(x[:, t], 6), state)
        cs.append(state[1].v)
    return np.stack(cs)


def _sat_fraction(codes, q):
    return float(np.mean((codes == q.qmin) | (codes == q.qmax)))


@pytest.mark.parametrize("kind", ["binary", "ternary", "quaternary", "int8"])
@pytest.mark.parametrize("cell_bits", [8, 16])
def test_lstm_exact(make_graph, make_type, rnn_builders, rng, kind, cell_bits):
    attrs = rnn_builders["lstm"](rng, 7, 5, kind, cell_bits=cell_bits)
    g = make_graph(make_type(8, 6, True, (6, 7)), ("lstm", attrs))
    y = check_exact(g, n=300)
    assert y.shape == (300, 6, 5)
    assert _sat_fraction(y, attrs.out) > 0  # the hidden state saturates on some inputs
    assert _sat_fraction(_cell_states(attrs, g), attrs.cell) > 0.01  # and so does the cell state


@pytest.mark.parametrize("option", ["cifg", "reverse", "last"])
def test_lstm_options_exact(make_graph, make_type, rnn_builders, rng, option):
    kw = {"cifg": {"cifg": True}, "reverse": {"reverse": True}, "last": {"return_sequences": False}}[option]
    attrs = rnn_builders["lstm"](rng, 4, 3, "quaternary", **kw)
    g = make_graph(make_type(8, 6, True, (5, 4)), ("lstm", attrs))
    y = check_exact(g, n=200)
    assert y.shape == ((200, 3) if option == "last" else (200, 5, 3))


@pytest.mark.parametrize("kind", ["binary", "ternary", "quaternary", "int8"])
def test_gru_exact(make_graph, make_type, rnn_builders, rng, kind):
    attrs = rnn_builders["gru"](rng, 6, 4, kind)
    g = make_graph(make_type(8, 5, True, (7, 6)), ("gru", attrs))
    y = check_exact(g, n=300)
    assert _sat_fraction(y, attrs.out) > 0


def _float_lstm(attrs, x, xfrac):
    """The cell equations in float64 on real values (QONNX Quant = round half even + clip)."""
    def Q(v, q):
        return np.clip(np.round(np.ldexp(v, q.out.frac)), q.qmin, q.qmax) * 2.0 ** -q.out.frac

    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    xv = np.ldexp(x.astype(np.float64), -xfrac)
    n, t_len, _ = x.shape
    h = np.zeros((n, attrs.hidden))
    c = np.zeros((n, attrs.hidden))
    ys = []
    for t in range(t_len):
        acts = []
        for g in attrs.gates:
            acc = xv[:, t] @ (g.wx.codes.T * 2.0 ** -g.wx.frac) + h @ (g.wh.codes.T * 2.0 ** -g.wh.frac) \
                + g.bias * 2.0 ** -g.bias_frac
            f = sig if g.act.function == "sigmoid" else np.tanh
            acts.append(Q(f(Q(acc, g.acc)), g.act.out))
        i, f, gg, o = acts
        c = Q(Q(f * c, attrs.cell) + Q(i * gg, attrs.cell), attrs.cell)
        h = Q(o * Q(np.tanh(c), attrs.cell_act.out), attrs.out)
        ys.append(h)
    return np.stack(ys, 1)


def test_lstm_matches_float_transcription(make_graph, make_type, rnn_builders, rng):
    from tessera.compiler.reference.interpret import run_ir
    from tessera.compiler.samples import sample_codes

    attrs = rnn_builders["lstm"](rng, 6, 4, "ternary")
    g = make_graph(make_type(8, 6, True, (5, 6)), ("lstm", attrs))
    x = sample_codes(g.values["x"], 200, seed=3)
    got = np.ldexp(run_ir(g, x).astype(np.float64), -attrs.out.out.frac)
    assert np.array_equal(got, _float_lstm(attrs, x, 6))


def test_wide_accumulators_stay_exact(make_graph, make_type, rnn_builders, rng):
    """Float-like weights (wide dyadic codes, like fp32 weights) give accumulators beyond
    float64's 2**53; the reference requantizes them with integer ops only."""
    from tessera.compiler.ops.cells.program import Weights

    attrs = rnn_builders["lstm"](rng, 6, 3, "int8")
    wide = tuple(type(gt)(**{**gt.__dict__, "wx": Weights(rng.integers(-(1 << 40), 1 << 40, size=(3, 6)), 44)})
                 for gt in attrs.gates)
    attrs = type(attrs)(**{**attrs.__dict__, "gates": wide})
    g = make_graph(make_type(8, 6, True, (4, 6)), ("lstm", attrs))
    assert any(n.op_type == "Mod" for n in reference_model(g).graph.node)
    check_exact(g, n=200)


@pytest.mark.parametrize("kind,forecaster_steps", [("ternary", 0), ("binary", 3), ("int8", 2)])
def test_convlstm_exact(make_graph, make_type, rnn_builders, rng, kind, forecaster_steps):
    attrs = rnn_builders["convlstm"](rng, 3, 4, kind=kind, forecaster_steps=forecaster_steps)
    g = make_graph(make_type(8, 6, True, (3, 3, 5, 6)), ("convlstm", attrs))
    y = check_exact(g, n=60)
    assert y.shape == (60, forecaster_steps or 3, 4, 5, 6)
    assert _sat_fraction(y, (attrs.forecaster or attrs.encoder).out) > 0


def test_convlstm_reference_is_a_convolution(rng):
    """One step from zero states, checked against an explicit loop over pixels and taps."""
    from tessera.compiler.ops.cells import program as cp
    from tessera.compiler.ops.convlstm import cell_step

    attrs = random_convlstm(rng, 2, 3, k=3, kind="int8")
    x = rng.integers(-128, 128, size=(2, 2, 4, 5))
    zero = np.zeros((2, 3, 4, 5), dtype=np.int64)
    A = cp.NumpyArith()
    gate = attrs.encoder.gates[0]
    got = A.conv(x, gate.wx.codes)
    want = np.zeros_like(got)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for o in range(3):
        for i in range(4):
            for j in range(5):
                want[:, o, i, j] = np.einsum("ncij,cij->n", xp[:, :, i:i + 3, j:j + 3], gate.wx.codes[o])
    assert np.array_equal(got, want)
    h, c = cell_step(A, attrs.encoder, cp.Fx(x, 6), [cp.Fx(zero, 8), cp.Fx(zero, 7)])
    assert h.v.shape == c.v.shape == (2, 3, 4, 5)
