"""Small exports of every model kind the estimator is checked on: the zoo's dense and CNN
models, LSTM / GRU classifiers, a ConvLSTM frame predictor, CosmoFlow and the 3D U-Net at
reduced width (untrained: shapes and weight codebooks are what the estimates depend on)."""

from __future__ import annotations

import warnings

import pytest
import torch


def _calibrated(model, shape, steps=20):
    """A few train-mode passes (activation quantizer statistics), then eval mode."""
    torch.manual_seed(0)
    model.train()
    with torch.no_grad():
        for _ in range(steps):
            model(torch.rand(4, *shape))
    return model.eval()


def _zoo(name, path):
    from tessera.models.train import export_model
    from tessera.models.zoo import ZOO, build_model

    torch.manual_seed(0)
    shape = ZOO[name].input_shape
    return export_model(_calibrated(build_model(name), shape), torch.zeros(1, *shape), path)


def _sentiment(cell, weights, path):
    from tessera.models.rnn.export import export_sentiment
    from tessera.models.rnn.networks import SentimentRNN

    torch.manual_seed(0)
    m = SentimentRNN(cell, weights, 20, embed_dim=4, hidden_size=4)
    m.train()
    with torch.no_grad():  # activation quantizer statistics
        for _ in range(8):
            m(torch.randint(1, 20, (4, 6)))
    return export_sentiment(m.eval(), path, seq_len=6)


def _forecaster(path):
    from tessera.models.rnn.export import export_forecaster
    from tessera.models.rnn.networks import ConvLSTMForecaster

    torch.manual_seed(0)
    f = ConvLSTMForecaster("quaternary", hidden_channels=2, kernel_size=3, patch=2, out_frames=2)
    f.train()
    with torch.no_grad():
        for _ in range(8):
            f(torch.rand(2, 2, 1, 8, 8))
    return export_forecaster(f.eval(), path, in_frames=2, size=8)


def _cnn3d(name, size, cin, nout, path):
    from tessera.models.cnn3d import build_cnn3d, fold_batchnorm
    from tessera.models.train3d import export_cnn3d

    torch.manual_seed(0)
    m = build_cnn3d(name, width=1 / 16, input_size=size, in_channels=cin, n_out=nout)
    m = fold_batchnorm(_calibrated(m, (cin, size, size, size), steps=3))
    return export_cnn3d(m, torch.rand(1, cin, size, size, size), path)


def conv3d_chain(make_graph, make_type, rng, size=32, ch=4):
    """x (ch, size^3) -> conv k3 -> relu -> requant u8 -> conv k3 -> maxpool 2 -> requant s8
    -> conv k3, 4-bit weights (every conv input 8 bits, as the exact reference needs)."""
    from tessera.compiler.ir.types import FixedType
    from tessera.compiler.ops import conv, maxpool, quant, relu

    def c(cin, cout):
        w = rng.integers(-8, 8, size=(cout, cin, 3, 3, 3))
        return ("conv", conv.Attrs(w, FixedType(4, 3, True), None, None, (1, 1, 1), (1,) * 6))

    def q(signed):
        return ("requant", quant.Attrs(FixedType(8, 0, signed), False, "ROUND"))

    return make_graph(make_type(8, 0, False, (ch, size, size, size)), c(ch, ch), ("relu", relu.Attrs()), q(False),
                      c(ch, ch), ("maxpool", maxpool.Attrs((2, 2, 2), (2, 2, 2))), q(True), c(ch, ch))


def project_reuse(prj) -> dict[str, int]:
    """hls layer name -> the reuse_factor of its config struct in firmware/parameters.h
    (hls4ml numbers a layer's config by its index: position in the layer list + 1)."""
    import re

    from tessera.compiler.project import Manifest

    params = (prj / "firmware" / "parameters.h").read_text()
    layers = Manifest.read(prj).hls_layers
    out = {}
    for k, layer in enumerate(layers):
        m = re.search(rf"struct config{k + 1} : [^{{]*\{{(.*?)\n}};", params, re.S)
        r = re.search(r"reuse_factor = (\d+);", m.group(1)) if m else None
        if r:
            out[layer.name] = int(r.group(1))
    return out


#: model kind -> builder(path)
BUILDERS = {
    "jet_mlp_w8a8": lambda p: _zoo("jet_mlp_w8a8", p),
    "digits_cnn_w8a8": lambda p: _zoo("digits_cnn_w8a8", p),
    "digits_cnn_binary": lambda p: _zoo("digits_cnn_binary", p),
    "digits_cnn_ternary": lambda p: _zoo("digits_cnn_ternary", p),
    "lstm_ternary": lambda p: _sentiment("lstm", "ternary", p),
    "gru_binary": lambda p: _sentiment("gru", "binary", p),
    "convlstm_quaternary": _forecaster,
    "cosmoflow": lambda p: _cnn3d("cosmoflow", 32, 4, 4, p),
    "unet3d": lambda p: _cnn3d("unet3d", 8, 1, 3, p),
}


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """name -> (onnx path, typed IR graph), built once per session on first use."""
    from tessera.compiler.pipeline import compile_ir

    out = tmp_path_factory.mktemp("estimate_models")
    cache = {}

    def get(name):
        if name not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                path = BUILDERS[name](out / f"{name}.onnx")
            cache[name] = (path, compile_ir(path))
        return cache[name]

    return get
