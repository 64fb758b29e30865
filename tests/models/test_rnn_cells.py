"""Quantized LSTM / GRU / ConvLSTM: training steps, integer-machine grids, export round trips."""

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from tessera.models.quant import is_power_of_two
from tessera.models.rnn import quant as Q
from tessera.models.rnn.cells import QuantConvLSTM, QuantGRU, quant_lstm
from tessera.models.rnn.export import (
    CUSTOM_DOMAIN,
    QONNX_DOMAIN,
    export_convlstm,
    export_gru,
    export_lstm,
)
from tessera.models.rnn.onnx_run import run_cell_onnx
from tessera.models.rnn.networks import ConvLSTMForecaster, SentimentRNN, depth_to_space, space_to_depth

KINDS = ("fp", "binary", "ternary", "quaternary")


def _fit(model, loss_fn, steps, lr=1e-2):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    model.train()
    for _ in range(steps):
        loss = loss_fn()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def _parity_task(n=64, t=6, seed=0):
    """Label = sign of the sum of the first feature over time: needs memory."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, t, 4, generator=g)
    y = (x[:, :, 0].sum(1) > 0).long()
    return x, y


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("kind", ["fp", "ternary"])
def test_recurrent_cell_loss_falls(cell, kind):
    torch.manual_seed(0)
    x, y = _parity_task()
    rnn = quant_lstm(4, 16, Q.weight_quant_for(kind)) if cell == "lstm" else QuantGRU(4, 16, Q.weight_quant_for(kind))
    head = torch.nn.Linear(16, 2)
    model = torch.nn.ModuleDict({"rnn": rnn, "head": head})

    def loss_fn():
        out, _ = rnn(x)
        return torch.nn.functional.cross_entropy(head(out[:, -1]), y)

    losses = _fit(model, loss_fn, 40)
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])


@pytest.mark.parametrize("kind", ["binary", "quaternary"])
def test_sentiment_network_loss_falls(kind):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(2, 50, (64, 8), generator=g)
    y = (tokens[:, 0] < 26).long()  # first token decides: the GRU must carry it
    lengths = torch.randint(3, 9, (64,), generator=g)
    model = SentimentRNN("gru", kind, vocab_size=50, embed_dim=8, hidden_size=16)
    losses = _fit(model, lambda: torch.nn.functional.cross_entropy(model(tokens, lengths), y), 40)
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])


def test_sentiment_network_ignores_right_padding():
    torch.manual_seed(0)
    model = SentimentRNN("lstm", "ternary", vocab_size=30, embed_dim=8, hidden_size=8).eval()
    tokens = torch.tensor([[5, 6, 7, 0, 0, 0]])
    with torch.no_grad():
        a = model(tokens, torch.tensor([3]))
        b = model(tokens[:, :3], torch.tensor([3]))
        c = model(tokens[:, :3])
    assert torch.equal(a, b) and torch.equal(a, c)


def test_convlstm_forecaster_loss_falls():
    torch.manual_seed(0)
    frames = torch.zeros(4, 6, 1, 16, 16)
    for t in range(6):  # a bright square moving right by 2 pixels per frame
        frames[:, t, 0, 4:8, 2 * t:2 * t + 4] = 1.0
    model = ConvLSTMForecaster("binary", hidden_channels=4, patch=4, out_frames=3)
    losses = _fit(model, lambda: torch.nn.functional.binary_cross_entropy_with_logits(
        model(frames[:, :3]), frames[:, 3:]), 30, lr=2e-2)
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])
    out = model(frames[:, :3])
    assert out.shape == (4, 3, 1, 16, 16)


def test_space_to_depth_round_trip():
    x = torch.randn(2, 3, 1, 8, 8)
    y = space_to_depth(x, 4)
    assert y.shape == (2, 3, 16, 2, 2)
    assert torch.equal(depth_to_space(y, 4), x)


def _on_grid(values: np.ndarray, scale: float) -> bool:
    codes = values / scale
    return bool(np.all(codes == np.round(codes)))


def _warm(module, fn, steps=3):
    _fit(module, lambda: fn().pow(2).mean() - fn().mean(), steps, lr=1e-3)


@pytest.mark.parametrize("kind", KINDS)
def test_lstm_export_round_trip(tmp_path, kind):
    torch.manual_seed(0)
    lstm = quant_lstm(6, 10, Q.weight_quant_for(kind))
    x = torch.randn(8, 5, 6)
    _warm(lstm, lambda: lstm(x)[0])
    path = export_lstm(lstm, tmp_path / "lstm.onnx", seq_len=5)
    model = onnx.load(str(path))
    cells = [n for n in model.graph.node if n.op_type == "QuantLSTMCell"]
    assert len(cells) == 1 and cells[0].domain == QONNX_DOMAIN and len(cells[0].input) == 48
    xi = torch.randn(1, 5, 6)
    with torch.no_grad():
        y, (h, c) = lstm(xi)
    out = run_cell_onnx(path, {"x": xi.numpy()})
    if kind == "fp":
        # float32 weights are not on a fixed-point grid, and torch's float32 sums can round;
        # the export (executed in float64) must equal the same cell run in float64.
        import copy

        with torch.no_grad():
            y64 = copy.deepcopy(lstm).double().eval()(xi.double())[0].numpy()
        assert np.array_equal(out["y"], y64), "fp export == float64 forward"
        return
    assert np.array_equal(out["y"], y.numpy().astype(np.float64)), "bit exact"
    assert np.array_equal(out["c"].reshape(-1), c.numpy().reshape(-1).astype(np.float64))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    quant_ops = [n for n in model.graph.node if n.op_type in ("Quant", "BipolarQuant")
                 and n.input[0] in inits and inits[n.input[0]].ndim == 2]
    assert len(quant_ops) == 8, "every gate weight through a Quant / BipolarQuant node"
    for n in quant_ops:
        w, s = inits[n.input[0]], float(inits[n.input[1]])
        scale = s * (2 if kind == "quaternary" else 1)
        assert is_power_of_two(s)
        assert set(np.unique(w).tolist()) <= Q.codebook_values(kind, scale), "on the codebook"
        assert n.op_type == ("BipolarQuant" if kind == "binary" else "Quant")


@pytest.mark.parametrize("kind", KINDS)
def test_gru_export_round_trip(tmp_path, kind):
    torch.manual_seed(1)
    gru = QuantGRU(6, 10, Q.weight_quant_for(kind))
    x = torch.randn(8, 5, 6)
    _warm(gru, lambda: gru(x)[0])
    path = export_gru(gru, tmp_path / "gru.onnx", seq_len=5)
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    node = [n for n in model.graph.node if n.op_type == "QuantGRUCell"]
    assert len(node) == 1 and node[0].domain == CUSTOM_DOMAIN
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node[0].attribute}
    for q in ("reset_acc", "update_acc", "new_acc", "reset_sigmoid", "update_sigmoid", "new_tanh", "output"):
        assert is_power_of_two(attrs[f"{q}_scale"]) and attrs[f"{q}_rounding_mode"] == b"ROUND"
    assert attrs["reset_sigmoid_scale"] == 2.0**-8 and attrs["new_tanh_scale"] == 2.0**-7
    xi = torch.randn(1, 5, 6)
    with torch.no_grad():
        y, h = gru(xi)
    out = run_cell_onnx(path, {"x": xi.numpy()})
    assert np.array_equal(out["y"], y.numpy().astype(np.float64)), "bit exact"
    assert _on_grid(out["y"], attrs["output_scale"])
    if kind != "fp":
        inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        s = float(inits["W_ih_scale"]) * (2 if kind == "quaternary" else 1)
        assert set(np.unique(inits["W_ih"]).tolist()) <= Q.codebook_values(kind, s)
    from qonnx.core.modelwrapper import ModelWrapper

    wrapped = ModelWrapper(str(path))  # qonnx loads the custom-domain form
    assert [n.op_type for n in wrapped.graph.node][-1] == "QuantGRUCell"


@pytest.mark.parametrize("kind", ["fp", "binary", "ternary", "quaternary"])
def test_convlstm_export_round_trip(tmp_path, kind):
    torch.manual_seed(2)
    enc = QuantConvLSTM(3, 4, 3, Q.weight_quant_for(kind))
    fc = QuantConvLSTM(0, 4, 3, Q.weight_quant_for(kind))
    x = torch.rand(2, 4, 3, 6, 6)
    _warm(enc, lambda: enc(x)[0])
    _warm(fc, lambda: fc(None, (enc(x)[1][0].detach(), enc(x)[1][1].detach()), steps=2)[0])
    p_enc = export_convlstm(enc, tmp_path / "enc.onnx", seq_len=4, height=6, width=6)
    p_fc = export_convlstm(fc, tmp_path / "fc.onnx", seq_len=2, height=6, width=6)
    for p in (p_enc, p_fc):
        node = [n for n in onnx.load(str(p)).graph.node if n.op_type == "QuantConvLSTMCell"]
        assert len(node) == 1 and node[0].domain == CUSTOM_DOMAIN
    xi = torch.rand(1, 4, 3, 6, 6)
    with torch.no_grad():
        y, (h, c) = enc(xi)
        y2, _ = fc(None, (h, c), steps=2)
    out = run_cell_onnx(p_enc, {"x": xi.numpy()})
    assert np.array_equal(out["y"], y.numpy().astype(np.float64)), "encoder bit exact"
    assert np.array_equal(out["c"], c.numpy().astype(np.float64))
    out2 = run_cell_onnx(p_fc, {"h0": out["h"].astype(np.float32), "c0": out["c"].astype(np.float32)})
    assert np.array_equal(out2["y"], y2.numpy().astype(np.float64)), "forecaster bit exact"


def test_round_trip_detects_a_wrong_attribute(tmp_path):
    """The reference really reads the attributes: a changed scale changes the result."""
    torch.manual_seed(3)
    gru = QuantGRU(4, 6, Q.TernaryConnect)
    x = torch.randn(4, 5, 4)
    _warm(gru, lambda: gru(x)[0])
    path = export_gru(gru, tmp_path / "gru.onnx", seq_len=5)
    model = onnx.load(str(path))
    node = [n for n in model.graph.node if n.op_type == "QuantGRUCell"][0]
    for a in node.attribute:
        if a.name == "new_acc_scale":
            a.f = a.f * 4
    bad = tmp_path / "bad.onnx"
    onnx.save(model, str(bad))
    xi = torch.randn(1, 5, 4) * 3
    good = run_cell_onnx(path, {"x": xi.numpy()})["y"]
    wrong = run_cell_onnx(bad, {"x": xi.numpy()})["y"]
    assert not np.array_equal(good, wrong)


def test_bidirectional_quant_lstm_export_runs_as_brevitas_forward(tmp_path):
    """brevitas' bidirectional QuantLSTM with its default float-scale quantizers: the exported
    file run by the cell executor equals brevitas' own forward in float64 on every output.  The
    export writes the reversed cell's output straight into the Concat (brevitas re-reverses it
    only outside the cell, in PyTorch), so the cell's sequence is in time order."""
    import copy

    import brevitas.nn as qnn
    from brevitas.quant.scaled_int import Int8ActPerTensorFloat

    from tessera.models.train import export_model

    torch.manual_seed(4)
    lstm = qnn.QuantLSTM(4, 6, io_quant=Int8ActPerTensorFloat, batch_first=True, bidirectional=True)

    class Sequence(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lstm

        def forward(self, x):
            return self.lstm(x)[0]

    model = Sequence()
    with torch.no_grad():
        model(torch.randn(16, 5, 4))  # activation statistics
    model.eval()
    path = export_model(model, torch.randn(1, 5, 4), tmp_path / "bi.onnx")
    graph = onnx.load(str(path))
    x = torch.randn(3, 5, 4)
    with torch.no_grad():
        y64 = copy.deepcopy(model).double()(x.double()).numpy()
    y = np.concatenate([run_cell_onnx(path, {graph.graph.input[0].name: x[i:i + 1].numpy()})[graph.graph.output[0].name]
                        for i in range(3)])
    assert y.shape == (3, 5, 12) and np.unique(y).size > 20
    assert np.array_equal(y, y64)
