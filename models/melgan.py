"""MelGAN's quantized generator as ``brevitas_examples.text_to_speech.melgan`` defines it (a
mel spectrogram to a waveform: a 7-tap convolution to 512 channels, four
transposed convolutions upsampling x8, x8, x2, x2 each followed by a residual stack of dilated
convolutions, LeakyReLU + QuantHardTanh activations, and a last 7-tap convolution whose
accumulator a 16-bit QuantTanh reads): a third-party model for the real-world checks, built by
the example's own ``Generator`` and exported with brevitas' ``export_qonnx``.

At random initialisation, weight norm removed by ``Generator.eval(inference=True)`` as the
example deploys it, then activation scales calibrated on random log-mel spectrograms (the
example's input range, about -11.5 to 2); no weights are downloaded.  The example's forward
normalises its input, ``(mel + 5) / 5``: real arithmetic on the float input before its first
quantizer, so the input is declared ``INPUT_TYPE``.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

#: mel channels, weight / activation bits, the last layer's bits (the example's defaults)
CONFIG = (80, 8, 16)
#: spectrogram frames exported; the waveform has 256 samples per frame
FRAMES = 4
#: the declared type of the float spectrogram (no quantizer reads it first)
INPUT_TYPE = "fixed<16,6>"


def _spectrograms(generator, batch: int):
    """Random log-mel spectrograms in the example's range (clipped normal around -5)."""
    import torch

    return (torch.randn((batch, CONFIG[0], FRAMES), generator=generator) * 3 - 5).clamp(-11.5, 2)


def export_melgan(path: str | Path, seed: int = 0) -> Path:
    """Export brevitas_examples' MelGAN generator (``CONFIG``, ``FRAMES`` frames) to ``path``."""
    import torch
    from brevitas.export import export_qonnx
    from brevitas_examples.text_to_speech.melgan.generator_brevitas import Generator

    torch.manual_seed(seed)
    generator = Generator(*CONFIG)
    generator.eval(inference=True)  # the example's deployment: removes weight norm (returns None)
    gen = torch.Generator().manual_seed(seed + 1)
    generator.train()  # activation statistics
    with torch.no_grad():
        for _ in range(4):
            generator(_spectrograms(gen, 4))

    class Export(torch.nn.Module):
        """The generator's forward as a module whose ``eval`` returns itself (the exporter's contract)."""

        def __init__(self):
            super().__init__()
            self.generator = generator

        def forward(self, mel):
            return self.generator(mel)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        export_qonnx(Export().eval(), _spectrograms(gen, 1), str(path))
    return path


__all__ = ["CONFIG", "FRAMES", "INPUT_TYPE", "export_melgan"]
