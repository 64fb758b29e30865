"""``brevitas_examples.text_to_speech``'s MelGAN generator (shipped inside brevitas), exported with
brevitas' ``export_qonnx`` at random initialisation: its float spectrogram normalised by ``(mel +
5) / 5`` before a padded convolution, LeakyReLU + QuantHardTanh activations, transposed
convolutions upsampling x256, residual stacks of dilated convolutions, and a last 16-bit
QuantTanh of a convolution's accumulator (a staircase).  The exact reference equals the integer
semantics and the exported file run independently in float64 on every output.

Marked ``slow`` (about a minute: the generator's import evaluates 30 per-channel requantizations
and a 65,535-threshold staircase); the default run keeps its constructs each in a fast test: the
conformance case ``brevitas_melgan_output`` (the last block, C-simulated),
``tests/frontend/test_quantizers.py::test_a_preprocessed_declared_input_before_a_padded_convolution``
(the first layer), ``tests/frontend/test_dilation.py`` and ``tests/ops/test_convtranspose.py``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tessera.compiler import api
from tessera.compiler.independent import independent_check
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes
from tessera.models.melgan import FRAMES, INPUT_TYPE, export_melgan


@pytest.mark.slow
def test_melgan_export_is_exact(tmp_path):
    path = str(export_melgan(tmp_path / "melgan.onnx"))
    g = api.load_model(path, INPUT_TYPE)
    ops = [n.op for n in g.nodes]
    assert ops[-1] == "staircase" and ops.count("convtranspose") == 4
    assert g.values[g.output].shape == (1, 256 * FRAMES)
    codes = sample_codes(g.values[g.input], 2, seed=3)
    ref = OrtReference(reference_model(g)).run(codes)
    assert np.array_equal(ref, run_ir(g, codes))
    rep = independent_check(onnx.load(path), g, codes, ref)
    assert rep.passed and rep.differing_outputs == 0, rep.line()
    assert rep.equal == rep.outputs == ref.size
    assert np.unique(ref).size > 100  # not a constant waveform
