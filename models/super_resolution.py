"""The super-resolution ESPCN of ``brevitas_examples.super_resolution`` (Efficient Sub-Pixel
Convolution: four convolutions with BatchNorm and ReLU, the last one's real-valued output
through a PixelShuffle into an unsigned 8-bit QuantReLU): a third-party model for the
real-world checks, built by brevitas' own ``get_model_by_name`` and exported with its own
``export_qonnx``.

At random initialisation, with BatchNorm statistics drawn away from the identity
(:func:`.bnn_pynq.draw_batchnorm`) and the activation scales calibrated on random images in
[0, 1]; no weights are downloaded.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

from .bnn_pynq import draw_batchnorm

#: brevitas_examples' x2 configurations exported here: a per-channel float weight quantizer
#: (8-bit weights and activations) and the accumulator-aware one (4-bit, 32-bit accumulators)
ESPCN = ("quant_espcn_x2_w8a8_base", "quant_espcn_x2_w4a4_a2q_32b")
#: the low-resolution image exported (channels, height, width); the output is twice as large
IMAGE = (3, 16, 16)


def export_espcn(name: str, path: str | Path, seed: int = 0) -> Path:
    """Export ``brevitas_examples.super_resolution`` model ``name`` to ``path``."""
    import torch
    from brevitas.export import export_qonnx
    from brevitas_examples.super_resolution.models import get_model_by_name

    torch.manual_seed(seed)
    model = get_model_by_name(name)
    draw_batchnorm(model, seed + 1)
    model.train()  # activation statistics; BatchNorm keeps its drawn statistics
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.eval()
    gen = torch.Generator().manual_seed(seed + 2)
    with torch.no_grad():
        for _ in range(4):
            model(torch.rand((4, *IMAGE), generator=gen))
    model.eval()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        export_qonnx(model, torch.rand((1, *IMAGE), generator=gen), str(path))
    return path


__all__ = ["ESPCN", "IMAGE", "export_espcn"]
