"""Zoo models: registry, short QAT runs, QONNX export contents and bit-exactness."""

import dataclasses
import math

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from tessera.models.data.jets import load_jets
from tessera.models.train import export_model
from tessera.models.zoo import ZOO, ModelSpec, build_model

ALLOWED_OPS = {"Quant", "BipolarQuant", "Conv", "Gemm", "MatMul", "Add", "Relu", "MaxPool",
               "Flatten", "Reshape"}
QONNX_DOMAINS = {"qonnx.custom_op.general", "finn.custom_op.general"}
#: the power-of-two models (the tests below that check pow2 quantizers and no BatchNorm)
EXPECTED_NAMES = {"jet_mlp_w8a8", "jet_mlp_w4a4", "digits_cnn_w8a8", "digits_cnn_w4a4",
                  "digits_cnn_binary", "digits_cnn_ternary"}
#: the model with Brevitas' default float-scale quantizers and BatchNorm (its exact compile:
#: tests/frontend/test_real_constants.py)
FLOAT_NAMES = {"digits_cnn_float"}


def _exact_pow2(a: np.ndarray) -> bool:
    a = np.asarray(a, dtype=np.float64).ravel()
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0):
        return False
    mantissa, _ = np.frexp(a)
    return bool(np.all(mantissa == 0.5))


def _synthetic_digits(n: int, seed: int):
    """Learnable 28x28 'digits': class c lights a 7x7 block at a class-specific place."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, size=n)
    x = rng.uniform(0.0, 0.3, size=(n, 1, 28, 28)).astype(np.float32)
    for i, c in enumerate(y):
        r, col = divmod(int(c), 4)
        x[i, 0, 2 + 8 * r:9 + 8 * r, 2 + 6 * col:9 + 6 * col] += 0.7
    return torch.from_numpy(np.clip(x, 0, 1)), torch.from_numpy(y.astype(np.int64))


def _data_for(spec: ModelSpec, n: int, seed: int = 0):
    if spec.dataset == "jets":
        x, y, _, _ = load_jets(seed=seed, n_samples=n + 100)
        return torch.from_numpy(x[:n]), torch.from_numpy(y[:n])
    return _synthetic_digits(n, seed)


def _short_qat(name: str, steps: int = 60, seed: int = 0):
    """Train zoo model ``name`` for a few Adam steps; return (model, losses, x, y)."""
    spec = ZOO[name]
    torch.manual_seed(seed)
    model = build_model(name)
    x, y = _data_for(spec, 512, seed)
    opt = torch.optim.Adam(model.parameters(), lr=spec.lr)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, len(x), (64,), generator=gen)
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return model, losses, x, y


@pytest.fixture(scope="module")
def trained():
    """Every zoo model after a short QAT run (shared by the tests of this module)."""
    return {name: _short_qat(name) for name in sorted(ZOO)}


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    out = tmp_path_factory.mktemp("zoo_export")
    paths = {}
    for name, (model, _, x, _) in trained.items():
        paths[name] = export_model(model, x[:1], out / f"{name}.onnx")
    return paths


def test_registry_is_explicit_and_complete():
    assert set(ZOO) == EXPECTED_NAMES | FLOAT_NAMES
    for name, spec in ZOO.items():
        assert isinstance(spec, ModelSpec) and spec.name == name
        assert spec.dataset in ("jets", "digits")
        assert spec.epochs >= 1 and spec.description
        assert spec.input_shape == ((16,) if spec.dataset == "jets" else (1, 28, 28))
        with pytest.raises(dataclasses.FrozenInstanceError):
            spec.epochs = 1


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_models_are_small_and_have_no_batchnorm(name):
    model = build_model(name)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params <= 12_000
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())
    spec = ZOO[name]
    out = model.eval()(torch.zeros(2, *spec.input_shape))
    assert out.shape == (2, 5 if spec.dataset == "jets" else 10)


def test_float_model_has_batchnorm_and_float_logits():
    model = build_model("digits_cnn_float")
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()) == 2
    assert sum(p.numel() for p in model.parameters()) <= 12_000
    out = model.eval()(torch.zeros(2, 1, 28, 28))
    assert out.shape == (2, 10) and out.dtype == torch.float32


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_short_qat_lowers_the_loss(trained, name):
    _, losses, _, _ = trained[name]
    assert all(math.isfinite(v) for v in losses)
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    assert last < 0.75 * first, f"loss did not fall: {first:.3f} -> {last:.3f}"


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_export_uses_allowed_ops_and_pow2_zero_point_quantizers(exported, name):
    model = onnx.load(str(exported[name]))
    graph = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    ops = [n.op_type for n in graph.node]
    assert set(ops) <= ALLOWED_OPS, f"unexpected ops: {set(ops) - ALLOWED_OPS}"
    # one data input of batch size 1, one output; parameters are initializers only
    assert [i.name for i in graph.input] == ["input"]
    assert [o.name for o in graph.output] == ["output"]
    dims = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    assert dims == [1, *ZOO[name].input_shape]
    quant_nodes = [n for n in graph.node if n.op_type in ("Quant", "BipolarQuant")]
    assert quant_nodes
    for node in quant_nodes:
        assert node.domain in QONNX_DOMAINS
        scale_name = node.input[1]
        assert scale_name in inits, f"{node.name}: scale is not a constant"
        assert _exact_pow2(inits[scale_name]), f"{node.name}: scale {inits[scale_name]}"
        if node.op_type == "Quant":
            assert len(node.input) == 4
            zp, bw = inits[node.input[2]], inits[node.input[3]]
            assert np.all(zp == 0), f"{node.name}: zero-point {zp}"
            assert float(bw) == int(bw) and 2 <= float(bw) <= 16
        else:
            assert len(node.input) == 2

    compute = [op for op in ops if op not in ("Quant", "BipolarQuant")]
    if name.startswith("jet_mlp"):
        assert compute == ["Gemm", "Relu"] * 3 + ["Gemm"]
    else:
        assert compute == ["Conv", "Relu", "MaxPool"] * 2 + ["Flatten", "Gemm"]
    # one quantizer per input / activation / output and per weight / bias tensor
    n_layers = compute.count("Gemm") + compute.count("Conv")
    assert len(quant_nodes) == 2 * n_layers + compute.count("Relu") + 2


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_export_weight_quantizers_match_the_model_kind(exported, name):
    graph = onnx.load(str(exported[name])).graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    weight_nodes = [n for n in graph.node if n.op_type in ("Quant", "BipolarQuant")
                    and n.input[0].endswith(".weight")]
    bias_nodes = [n for n in graph.node if n.op_type == "Quant" and n.input[0].endswith(".bias")]
    assert len(weight_nodes) == len(bias_nodes) == (4 if "mlp" in name else 3)
    for node in bias_nodes:
        assert float(inits[node.input[3]]) == 16.0
    for node in weight_nodes:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if name.endswith("binary"):
            assert node.op_type == "BipolarQuant"
            continue
        assert node.op_type == "Quant"
        bits = float(inits[node.input[3]])
        expected_bits = {"w8a8": 8, "w4a4": 4, "ternary": 2}[name.rsplit("_", 1)[1]]
        assert bits == expected_bits
        assert attrs["narrow"] == 1 and attrs["signed"] == 1


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_qonnx_execution_matches_brevitas_bit_exactly(trained, exported, name):
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    model, _, x, _ = trained[name]
    with torch.no_grad():
        expected = model(x[:6]).numpy()
    wrapper = ModelWrapper(str(exported[name])).transform(InferShapes())
    inp, out = wrapper.graph.input[0].name, wrapper.graph.output[0].name
    got = np.concatenate(
        [execute_onnx(wrapper, {inp: x[i:i + 1].numpy()})[out] for i in range(6)])
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    # the output is itself on the output quantizer's power-of-two grid
    out_node = [n for n in wrapper.graph.node if n.output[0] == out][0]
    assert out_node.op_type == "Quant"
    s = float(wrapper.get_initializer(out_node.input[1]))
    assert np.array_equal(got / s, np.round(got / s))


def test_export_model_restores_training_mode(tmp_path):
    model = build_model("jet_mlp_w4a4").train()
    export_model(model, torch.zeros(1, 16), tmp_path / "m.onnx")
    assert model.training
    assert (tmp_path / "m.onnx").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"], "no temporary files left"
