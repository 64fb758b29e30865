"""FINN's BNN-PYNQ networks as ``brevitas_examples.bnn_pynq`` ships them (TFC / SFC / LFC MLPs,
the CNV CNN; 1-2 bit weights and activations, BatchNorm): third-party models for the
real-world checks, exported with brevitas' own ``export_qonnx`` (not Tessera's exporter).

At random initialisation BatchNorm is the identity, which would hide the folding; the
statistics and affine parameters are drawn from a seeded generator instead.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

#: The shipped configurations (``brevitas_examples/bnn_pynq/cfg``) small enough to
#: C-simulate here, and ResNet-18 (11.2 M weights: checked against the user's file, exactly,
#: without a C-simulation).
BNN_PYNQ = ("tfc_1w1a", "tfc_1w2a", "tfc_2w2a", "sfc_1w1a", "sfc_1w2a", "sfc_2w2a", "lfc_1w1a", "lfc_1w2a", "cnv_1w1a",
            "cnv_1w2a", "cnv_2w2a")
RESNET18 = "resnet18_4w4a"

#: ResNet-18 has no input quantizer: its float input is declared as this type (``--input-type``).
INPUT_TYPES = {RESNET18: "fixed<8,1>"}


def input_shape(name: str) -> tuple[int, ...]:
    return (1, 28, 28) if "fc" in name else (3, 32, 32)


def train_on_digits(model, epochs: int, seed: int = 0, lr: float = 0.01) -> float:
    """A few epochs of Adam on the 4,000 real training digits (28x28 MLPs: TFC / SFC / LFC);
    returns the Brevitas model's accuracy on the 1,000 test digits."""
    import torch

    from .data.digits import load_digits
    from .train import evaluate, train_epoch

    x_tr, y_tr, x_te, y_te = (torch.from_numpy(a) for a in load_digits(seed))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        train_epoch(model, opt, x_tr, y_tr, 100, gen)
    model.eval()
    return evaluate(model, x_te, y_te)


def draw_batchnorm(model, seed: int) -> None:
    """Every BatchNorm's running statistics and affine parameters drawn away from the identity
    (seeded), so that an untrained model's export folds non-trivial constants."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            with torch.no_grad():
                for t, lo, hi in ((m.running_mean, -0.5, 0.5), (m.running_var, 0.5, 2.0), (m.weight, 0.5, 1.5),
                                  (m.bias, -0.3, 0.3)):
                    t.copy_(torch.rand(t.shape, generator=gen) * (hi - lo) + lo)


def export_bnn_pynq(name: str, path: str | Path, seed: int = 0, epochs: int = 0) -> Path:
    """Export bnn_pynq model ``name`` to ``path``: at random initialisation (``seed``), with
    BatchNorm running statistics and affine parameters drawn away from the identity, then
    (``epochs`` > 0, MLPs only) trained that many epochs on the real digits."""
    import torch
    from brevitas.export import export_qonnx
    from brevitas_examples.bnn_pynq.models import model_with_cfg

    torch.manual_seed(seed)
    model, _ = model_with_cfg(name, pretrained=False)
    model.eval()
    draw_batchnorm(model, seed + 1)
    if epochs:
        if "fc" not in name:
            raise ValueError(f"{name}: only the 28x28 MLPs (TFC / SFC / LFC) train on the digits")
        train_on_digits(model, epochs, seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        # brevitas' default exporter (dynamo, on this torch) fails on ResNet-18's adds of
        # QuantTensors: ResNet-18 takes brevitas' TorchScript exporter
        kwargs = {"dynamo": False} if name == RESNET18 else {}
        export_qonnx(model, torch.randn((1, *input_shape(name))), str(path), **kwargs)
    return path


__all__ = ["BNN_PYNQ", "INPUT_TYPES", "RESNET18", "draw_batchnorm", "export_bnn_pynq", "input_shape", "train_on_digits"]
