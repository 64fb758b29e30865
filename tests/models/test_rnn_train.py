"""train_rnn: argument checks (fast) and tiny end-to-end runs on the real data (slow)."""

import inspect
import json

import numpy as np
import pytest
import torch

from tessera.models.rnn.onnx_run import run_cell_onnx
from tessera.models.rnn.train import DEFAULTS, load_checkpoint, train_rnn, train_rnn_cli



@pytest.mark.parametrize("args,match", [
    (("convlstm", "fp", "sentiment"), "does not fit"),
    (("lstm", "fp", "moving-digits"), "does not fit"),
    (("gru", "octonary", "sentiment"), "unknown weights"),
    (("gru", "fp", "imagenet"), "unknown task"),
])
def test_bad_combinations_are_rejected(tmp_path, args, match):
    with pytest.raises(ValueError, match=match):
        train_rnn(*args, tmp_path, progress=False)


def test_unknown_override_and_cli_signature(tmp_path):
    with pytest.raises(ValueError, match="unknown option"):
        train_rnn("gru", "fp", "sentiment", tmp_path, progress=False, hidden=3)
    params = list(inspect.signature(train_rnn_cli).parameters)
    assert params[:6] == ["cell", "weights", "task", "epochs", "seed", "output"]
    assert set(DEFAULTS) == {"sentiment", "moving-digits"}


@pytest.mark.slow
def test_tiny_sentiment_run(tmp_path):
    res = train_rnn("gru", "quaternary", "sentiment", tmp_path, epochs=1, progress=False,
                    embed_dim=8, hidden_size=8, max_len=16)
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"checkpoint.pt", "metrics.json", "learning_curves.png", "vocab.json", "cell.onnx"}
    m = json.loads(res.metrics_path.read_text())
    assert m["sizes"] == {"train": 7398, "val": 1057, "test": 2113}
    assert m["test"]["accuracy"] == res.test_metrics["accuracy"]
    assert 0.4 < res.test_metrics["accuracy"] <= 1.0  # learning itself: test_rnn_cells
    model = load_checkpoint(res.checkpoint_path)
    x = torch.randn(1, 4, 8)
    with torch.no_grad():
        y, _ = model.rnn(x)
    out = run_cell_onnx(res.onnx_paths[0], {"x": x.numpy()})
    assert np.array_equal(out["y"], y.numpy().astype(np.float64)), "trained cell exports exactly"


@pytest.mark.slow
def test_tiny_moving_digits_run(tmp_path):
    res = train_rnn("convlstm", "ternary", "moving-digits", tmp_path, epochs=1, progress=False,
                    n_train=16, n_test=8, hidden_channels=4)
    m = json.loads(res.metrics_path.read_text())
    for k in ("mse_per_frame", "bce_per_frame", "mse_per_pixel", "bce_per_pixel"):
        assert np.isfinite(m["test"][k]) and m["test"][k] > 0
    assert m["test"]["mse_per_frame"] == pytest.approx(m["test"]["mse_per_pixel"] * 64 * 64)
    assert sorted(p.name for p in res.onnx_paths) == ["encoder.onnx", "forecaster.onnx"]
    assert isinstance(load_checkpoint(res.checkpoint_path), torch.nn.Module)
