"""Quantized 3D CNNs: shapes, learning, BatchNorm folding, QONNX export contents."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

from tessera.models.cnn3d import (
    analytic_macs,
    LEAKY_SLOPE,
    build_cnn3d,
    cosmoflow,
    cosmoflow_mlperf,
    count_macs,
    fold_batchnorm,
    unet3d,
)
from tessera.models.quant import is_power_of_two
from tessera.models.train3d import export_cnn3d

ALLOWED_OPS = {"Quant", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "Relu",
               "LeakyRelu", "Concat", "Add", "Flatten", "Reshape", "Gemm", "MatMul"}

# (name, input size, in channels, outputs) at CI size, width 1/16.  CosmoFlow needs 32:
# below that its k3 convs run on 1^3 volumes where only the centre tap sees data.
SMALL = [("cosmoflow", 32, 4, 4), ("cosmoflow-mlperf", 16, 4, 4), ("unet3d", 8, 1, 3)]



def _small(name, size, cin, nout, seed=0, **options):
    torch.manual_seed(seed)
    return build_cnn3d(name, width=1 / 16, input_size=size, in_channels=cin, n_out=nout,
                       **options)


def _warm_bn(model, x, steps=3):
    """Give BatchNorm non-trivial running statistics (train-mode passes, no update)."""
    model.train()
    with torch.no_grad():
        for _ in range(steps):
            model(x)
    return model.eval()


def test_published_shapes():
    m = cosmoflow(width=1.0, input_size=128)
    assert m.n_flat == 2048 and m.skipped_pools == []
    convs = [mod for mod in m.features if isinstance(mod, nn.Conv3d)]
    assert [c.out_channels for c in convs] == [16, 32, 64, 128, 256, 256, 256]
    assert [c.stride[0] for c in convs] == [1, 1, 1, 2, 1, 1, 1]
    pools = [mod for mod in m.features if isinstance(mod, nn.AvgPool3d)]
    assert len(pools) == 5 and all(p.count_include_pad for p in pools)
    lin = [mod for mod in m.head if isinstance(mod, nn.Linear)]
    assert [(l.in_features, l.out_features) for l in lin] == [(2048, 2048), (2048, 256), (256, 4)]
    assert all(a.negative_slope == LEAKY_SLOPE == 0.125
               for a in m.modules() if isinstance(a, nn.LeakyReLU))
    mp = cosmoflow_mlperf(width=1.0, input_size=128)
    assert mp.n_flat == 512 * 4 ** 3
    assert [c.out_channels for c in mp.features if isinstance(c, nn.Conv3d)] == \
        [32, 64, 128, 256, 512]
    u = unet3d(width=1.0)
    assert [c.out_channels for c in u.modules() if isinstance(c, nn.ConvTranspose3d)] == \
        [512, 256, 128]
    # regression outputs have a constant scale 2^-6: range [-2, 127/64] covers the targets
    q = m.head[-1]
    assert float(q.act_quant.scale()) == 2.0 ** -6 and list(q.parameters()) == []
    with torch.no_grad():
        assert q(torch.tensor([[-1.0, 1.0, 3.0]])).tolist() == [[-1.0, 1.0, 127 / 64]]
    # small configuration: pools that would see fewer than 3 voxels are dropped
    assert cosmoflow(width=0.25, input_size=32).skipped_pools == [3, 4]


@pytest.mark.parametrize("name,size,cin,nout", SMALL)
def test_small_models_build_and_loss_falls(name, size, cin, nout):
    m = _small(name, size, cin, nout)
    for mod in m.modules():  # dropout noise would hide the trend in 20 steps
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
    g = torch.Generator().manual_seed(1)
    x = torch.rand(4, cin, size, size, size, generator=g)
    if name == "unet3d":
        y = (x[:, 0] > 0.66).long() + (x[:, 0] > 0.33).long()  # 3 classes from intensity
        loss_fn = nn.functional.cross_entropy
        out_shape = (4, nout, size, size, size)
    else:
        y = torch.rand(4, nout, generator=g) * 2 - 1
        loss_fn = nn.functional.mse_loss
        out_shape = (4, nout)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    m.train()
    for _ in range(20):
        out = m(x)
        assert tuple(out.shape) == out_shape
        loss = loss_fn(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert np.isfinite(losses).all()
    assert min(losses[-3:]) < 0.8 * losses[0], losses
    macs = count_macs(m, (cin, size, size, size))
    assert macs > 0 and analytic_macs(m, size) == macs


def test_count_macs_matches_hand_count():
    m = nn.Sequential(nn.Conv3d(2, 3, 3, padding=1), nn.Flatten(), nn.Linear(3 * 4 ** 3, 5))
    assert count_macs(m, (2, 4, 4, 4)) == 3 * 4 ** 3 * 2 * 27 + 3 * 4 ** 3 * 5
    t = nn.ConvTranspose3d(4, 2, 2, stride=2)
    assert count_macs(t, (4, 3, 3, 3)) == 4 * 27 * 2 * 8


def test_fold_batchnorm_float_conv_is_equivalent():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU())
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
        m[1].weight.uniform_(0.5, 2)
        m[1].bias.uniform_(-1, 1)
    m.eval()
    f = fold_batchnorm(m)
    assert not any(isinstance(x, nn.BatchNorm3d) for x in f.modules())
    assert isinstance(m[1], nn.BatchNorm3d), "the original model must be left alone"
    x = torch.randn(2, 2, 5, 5, 5)
    torch.testing.assert_close(f(x), m(x), atol=1e-5, rtol=1e-5)


def test_fold_batchnorm_quantized_is_exact_when_folding_is_representable():
    """With BN scales gamma / sqrt(var + eps) = 2^k (per channel) and offsets on a coarse grid,
    the folded weights quantize to exactly the scaled codes (one power-of-two scale per
    output channel) and the folded bias is representable, so the folded quantized U-Net must
    equal the BN model bit for bit."""
    m = _small("unet3d", 8, 1, 3)
    x = torch.rand(2, 1, 8, 8, 8, generator=torch.Generator().manual_seed(3))
    _warm_bn(m, x)
    # Per-channel power-of-two scales (2^ceil(log2 max|w_c|) / 2^7) reproduce the original
    # codes exactly when each channel's largest code is not itself a power of two (a top
    # code 2^k would come back as 128 and clip to 127): give every channel a code of 127.
    for conv in (mod for mod in m.modules() if isinstance(mod, nn.Conv3d)):
        with torch.no_grad():
            s = float(conv.quant_weight().scale.reshape(-1)[0])
            conv.weight[:, 0, 0, 0, 0] = 127 * s
    r = np.random.default_rng(0)
    for bn in (mod for mod in m.modules() if isinstance(mod, nn.BatchNorm3d)):
        # var = 4^j - eps (exact in float32, as is eps = 2^-20) makes var + eps = 4^j and
        # sqrt(var + eps) = 2^j exact, so the BN scale gamma / sqrt(var + eps) = k is exactly a
        # power of two (torch 2.10 refuses eps = 0 even in eval)
        k = float(r.choice([0.5, 1.0, 2.0]))
        j = torch.from_numpy(r.integers(-1, 2, bn.num_features)).float()
        bn.eps = 2.0**-20
        with torch.no_grad():
            bn.running_var.copy_(4.0 ** j - bn.eps)
            bn.running_mean.zero_()
            bn.weight.copy_(k * 2.0 ** j)
            bn.bias.copy_(torch.from_numpy(r.integers(-8, 9, bn.num_features) / 64.0).float())
    m.eval()
    f = fold_batchnorm(m)
    with torch.no_grad():
        a, b = m(x), f(x)
    assert torch.equal(a, b), f"max diff {(a - b).abs().max().item()}"


def test_fold_batchnorm_quantized_general_case_is_close():
    """General BN statistics: the folded weights get a new power-of-two scale, so the folded
    model differs from the BN model by weight/bias re-quantization only."""
    m = _small("unet3d", 8, 1, 3)
    x = torch.rand(2, 1, 8, 8, 8, generator=torch.Generator().manual_seed(3))
    _warm_bn(m, x)
    f = fold_batchnorm(m)
    with torch.no_grad():
        a, b = m(x), f(x)
    rng = float(a.abs().max())
    assert float((a - b).abs().mean()) < 0.1 * rng
    assert (a.argmax(1) == b.argmax(1)).float().mean() > 0.8


_EXPORTS: dict = {}


def _export(tmp_path, name, size, cin, nout, **options):
    """Build, fold BN, export and load one small model; cached per test session."""
    key = (name, tuple(sorted(options.items())))
    if key in _EXPORTS:
        return _EXPORTS[key]
    m = _small(name, size, cin, nout, **options)
    x = torch.rand(2, cin, size, size, size, generator=torch.Generator().manual_seed(0))
    _warm_bn(m, x)
    m = fold_batchnorm(m)
    path = export_cnn3d(m, x[:1], tmp_path / f"{name}.onnx")
    import onnx

    _EXPORTS[key] = onnx.load(str(path)), m, x
    return _EXPORTS[key]


@pytest.mark.parametrize("name,size,cin,nout,bn", [s + (False,) for s in SMALL] +
                         [("cosmoflow-mlperf", 16, 4, 4, True)])
def test_export_contains_only_allowed_ops_with_pow2_scales(tmp_path, name, size, cin, nout, bn):
    from onnx import numpy_helper

    options = {} if name == "unet3d" else {"batchnorm": bn}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, _, _ = _export(tmp_path, name, size, cin, nout, **options)
    g = model.graph
    ops = [n.op_type for n in g.node]
    assert set(ops) <= ALLOWED_OPS, set(ops) - ALLOWED_OPS
    assert "BatchNormalization" not in ops and "Pad" not in ops
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t)
              for n in g.node if n.op_type == "Constant"}
    inits.update(consts)
    n_quant = 0
    for n in g.node:
        if n.op_type == "Quant":
            n_quant += 1
            scale, zp = inits[n.input[1]], inits[n.input[2]]
            assert np.all(zp == 0), n.name
            assert all(is_power_of_two(s) for s in np.ravel(scale)), (n.name, scale)
        if n.op_type == "LeakyRelu":
            alpha = [a.f for a in n.attribute if a.name == "alpha"][0]
            assert alpha == LEAKY_SLOPE
        if n.op_type == "AveragePool":
            attrs = {a.name: a for a in n.attribute}
            assert attrs["count_include_pad"].i == 1
    assert n_quant > 0
    expected = {"cosmoflow": {"Conv", "LeakyRelu", "AveragePool", "Gemm"},
                "cosmoflow-mlperf": {"Conv", "LeakyRelu", "MaxPool", "Gemm"},
                "unet3d": {"Conv", "ConvTranspose", "Relu", "MaxPool", "Concat"}}[name]
    assert expected <= set(ops)


def test_unet_concat_inputs_share_one_quant_type(tmp_path):
    from onnx import numpy_helper

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, _, _ = _export(tmp_path, "unet3d", 8, 1, 3)
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    concats = [n for n in g.node if n.op_type == "Concat"]
    assert len(concats) == 3
    for c in concats:
        qs = [producer[i] for i in c.input]
        assert all(q.op_type == "Quant" for q in qs)
        sig = [(float(inits[q.input[1]]), float(inits[q.input[3]]),
                tuple((a.name, a.i) for a in q.attribute if a.name in ("signed", "narrow")))
               for q in qs]
        assert sig[0] == sig[1], sig


def test_export_matches_torch_model(tmp_path):
    """The exported MLPerf CosmoFlow (Quant ops executed by qonnx) reproduces the model."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, m, x = _export(tmp_path, "cosmoflow-mlperf", 16, 4, 4)
        w = ModelWrapper(model).transform(InferShapes())
        out = execute_onnx(w, {"input": x[:1].numpy()})["output"]
    with torch.no_grad():
        ref = m.eval()(x[:1]).numpy()
    np.testing.assert_array_equal(out, ref)  # Quant grids and power-of-two scales: exact


def test_train_cnn3d_end_to_end_tiny(tmp_path, monkeypatch):
    """A CI-sized run: generated data (CAMB), training, BN folding, export, artefacts."""
    import json

    from tessera.models.train3d import train_cnn3d

    monkeypatch.setenv("TESSERA_CACHE", str(tmp_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = train_cnn3d("cosmoflow-mlperf", tmp_path / "run", epochs=2, size=8, width=1 / 16,
                        n_samples=8, batch_size=4, progress=False, n_test_inputs=2,
                        data_options={"samples_per_cosmology": 4})  # 2 CAMB runs
    for p in (r.onnx_path, r.checkpoint_path, r.metrics_path, r.plot_path,
              r.test_inputs_path, r.test_targets_path):
        assert p.is_file(), p
    m = json.loads(r.metrics_path.read_text())
    assert m["epochs"] == 2 and len(m["train_loss"]) == 2 and m["n_train"] + m["n_val"] == 8
    assert m["model_options"] == {"batchnorm": True, "dropout": 0.0}
    assert m["metric"] == r.metric == m["final_exported"]["val_mse"]
    assert np.isfinite(r.metric) and r.baseline > 0
    x = np.load(r.test_inputs_path)
    assert x.shape == (2, 4, 8, 8, 8) and x.dtype == np.float32
    import onnx

    ops = {n.op_type for n in onnx.load(str(r.onnx_path)).graph.node}
    assert ops <= ALLOWED_OPS and "BatchNormalization" not in ops
