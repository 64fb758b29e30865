"""train_model end to end: artefacts, metrics, determinism, checkpoint and ONNX agreement."""

import json

import numpy as np
import pytest
import torch

from tessera.models.data.jets import load_jets
from tessera.models.train import TrainResult, train_model
from tessera.models.zoo import build_model

ARTEFACTS = {"model.onnx", "checkpoint.pt", "metrics.json", "test_inputs.npy", "test_labels.npy"}


@pytest.fixture(scope="module")
def jet_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("jet_run")
    return train_model("jet_mlp_w8a8", out, epochs=1, seed=0, progress=False)


def test_train_model_writes_all_artefacts(jet_run):
    assert isinstance(jet_run, TrainResult)
    assert {p.name for p in jet_run.out_dir.iterdir()} == ARTEFACTS, "no temporary files left"
    for attr in ("onnx_path", "checkpoint_path", "metrics_path", "test_inputs_path",
                 "test_labels_path"):
        assert getattr(jet_run, attr).is_file()
    metrics = json.loads(jet_run.metrics_path.read_text())
    assert metrics["name"] == "jet_mlp_w8a8" and metrics["dataset"] == "jets"
    assert metrics["epochs"] == 1 and len(metrics["train_loss"]) == 1
    assert len(metrics["test_accuracy"]) == 1
    assert metrics["final_test_accuracy"] == jet_run.final_test_accuracy
    assert metrics["seconds"] > 0 and metrics["train_seconds"] > 0
    # well above the 20% chance level of the 5 synthetic classes after one epoch
    assert jet_run.final_test_accuracy > 0.6


def test_test_split_is_saved_exactly_as_fed(jet_run):
    _, _, x_test, y_test = load_jets(seed=0)
    x = np.load(jet_run.test_inputs_path)
    y = np.load(jet_run.test_labels_path)
    assert x.dtype == np.float32 and y.dtype == np.int64
    assert np.array_equal(x, x_test) and np.array_equal(y, y_test)


def test_checkpoint_reproduces_accuracy_and_onnx_matches_it(jet_run):
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    model = build_model("jet_mlp_w8a8")
    model.load_state_dict(torch.load(jet_run.checkpoint_path, weights_only=True))
    model.eval()
    x = torch.from_numpy(np.load(jet_run.test_inputs_path))
    y = torch.from_numpy(np.load(jet_run.test_labels_path))
    with torch.no_grad():
        logits = model(x)
    acc = int((logits.argmax(1) == y).sum()) / len(y)
    assert acc == jet_run.final_test_accuracy

    wrapper = ModelWrapper(str(jet_run.onnx_path)).transform(InferShapes())
    inp, out = wrapper.graph.input[0].name, wrapper.graph.output[0].name
    got = np.concatenate([execute_onnx(wrapper, {inp: x[i:i + 1].numpy()})[out] for i in range(8)])
    np.testing.assert_array_equal(got, logits[:8].numpy())


def test_training_is_deterministic(jet_run, tmp_path):
    again = train_model("jet_mlp_w8a8", tmp_path, epochs=1, seed=0, progress=False)
    assert again.train_losses == jet_run.train_losses
    assert again.final_test_accuracy == jet_run.final_test_accuracy
    a = torch.load(jet_run.checkpoint_path, weights_only=True)
    b = torch.load(again.checkpoint_path, weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_unknown_model_and_bad_epochs(tmp_path):
    with pytest.raises(KeyError, match="unknown zoo model"):
        train_model("resnet50", tmp_path, progress=False)
    with pytest.raises(ValueError):
        train_model("jet_mlp_w4a4", tmp_path, epochs=0, progress=False)


@pytest.mark.slow
def test_digits_cnn_learns_real_digits(tmp_path):
    """Two epochs of the 8-bit CNN on the real MNIST subset (fetched once into the cache)."""
    result = train_model("digits_cnn_w8a8", tmp_path, epochs=2, seed=0, progress=False)
    assert result.final_test_accuracy > 0.8
    assert result.train_losses[1] < result.train_losses[0]
    assert np.load(result.test_inputs_path).shape == (1000, 1, 28, 28)
