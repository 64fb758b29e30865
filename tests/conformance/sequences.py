"""What users do with a recurrent sequence, in our own words: a QuantLSTM fed by the layers
before it (a QuantIdentity, a QuantConv1d feature extractor permuted to (batch, time,
channels)), its last step read as ``out[:, -1, :]`` (batch first) or ``out[-1]`` (time first,
brevitas' own test layout), other steps selected (the first one, every other one), and a
QuantLinear on every step.  The independent check of every case is the file itself run in
float64 with its cells (``compiler/independent/cells.py``), as ``verify`` runs it by default.
Run like those of :mod:`.cases` (``tests/conformance/``, ``bench/conformance.py``)."""

from __future__ import annotations

from pathlib import Path

from .cases import Case, _calibrated, _export, _export_ports

STEPS, FEATURES, HIDDEN = 5, 4, 6


def _lstm(batch_first: bool = True):
    """A small QuantLSTM with brevitas' defaults (Int8WeightPerTensorFloat weights,
    Int8ActPerTensorFloat on its input / output and internal activations, float biases)."""
    import brevitas.nn as qnn

    return qnn.QuantLSTM(FEATURES, HIDDEN, batch_first=batch_first)


def lstm_last_step(batch_first: bool):
    """QuantIdentity -> QuantLSTM -> the last step: ``out[:, -1, :]`` of a batch-first layer on
    ``(1, T, F)``, or ``out[-1]`` of a time-first one on ``(T, 1, F)`` (exported with
    ``batch_first=0`` and ``Gather(axis=0)``)."""

    def build(path: Path) -> Path:
        import brevitas.nn as qnn
        import torch
        from torch import nn

        from tessera.models.train import export_model

        class LastStep(nn.Module):
            def __init__(self):
                super().__init__()
                self.inp = qnn.QuantIdentity(return_quant_tensor=False)
                self.lstm = _lstm(batch_first)

            def forward(self, x):
                out = self.lstm(self.inp(x))[0]
                return out[:, -1, :] if batch_first else out[-1]

        if batch_first:
            return _export(LastStep(), (STEPS, FEATURES), path)
        module = _calibrated(LastStep(), (STEPS, FEATURES))  # calibration batches: any (T, N, F)
        return export_model(module, torch.randn(STEPS, 1, FEATURES), path)

    return build


def conv1d_lstm_last_step(path: Path) -> Path:
    """QuantIdentity -> QuantConv1d(3, 4, k=3, return_quant_tensor=False, its float bias) ->
    ``permute(0, 2, 1)`` to (batch, time, channels) -> QuantLSTM(batch_first=True) ->
    ``out[:, -1, :]``: the convolution's output is real-valued, its bias one per channel, so the
    permute waits for the LSTM's input quantizer."""
    import brevitas.nn as qnn
    from torch import nn

    class ConvLstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = qnn.QuantIdentity(return_quant_tensor=True)
            self.conv = qnn.QuantConv1d(3, FEATURES, 3, bias=True, return_quant_tensor=False)
            self.lstm = _lstm()

        def forward(self, x):
            return self.lstm(self.conv(self.inp(x)).permute(0, 2, 1))[0][:, -1, :]

    return _export(ConvLstm(), (3, STEPS + 2), path)


def lstm_step_slices(path: Path) -> Path:
    """QuantIdentity -> QuantLSTM -> two outputs: the first step ``out[:, 0, :]`` (a Gather of
    a step the cell does not end on) and every other step from the second, ``out[:, 1::2, :]``
    (a Slice with step 2)."""
    import brevitas.nn as qnn
    from torch import nn

    class Slices(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = qnn.QuantIdentity(return_quant_tensor=False)
            self.lstm = _lstm()

        def forward(self, x):
            out = self.lstm(self.inp(x))[0]
            return out[:, 0, :], out[:, 1::2, :]

    return _export_ports(Slices(), [(STEPS, FEATURES)], path, outputs=2)


def lstm_per_step_head(path: Path) -> Path:
    """QuantIdentity -> QuantLSTM -> QuantLinear(6, 3) on every step, ``fc(out)`` on (N, T, H):
    brevitas exports ``Transpose(Quant(W))`` before a MatMul, then the float bias (an Add), and
    no quantizer after it (the output is the head's accumulator)."""
    import brevitas.nn as qnn
    from torch import nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = qnn.QuantIdentity(return_quant_tensor=False)
            self.lstm = _lstm()
            self.fc = qnn.QuantLinear(HIDDEN, 3, bias=True, return_quant_tensor=False)

        def forward(self, x):
            return self.fc(self.lstm(self.inp(x))[0])

    return _export(Head(), (STEPS, FEATURES), path)


SEQUENCE_CASES: tuple[Case, ...] = (
    Case("lstm_last_step_batch_first", "users' LSTM jet taggers: out[:, -1, :] after a QuantIdentity; Brevitas "
         "tests/brevitas/nn/nn_quantizers_fixture.py::case_quant_lstm (input_quantized: a QuantIdentity), batch first "
         "as hls4ml test/pytest/test_recurrent_brevitas.py", lstm_last_step(True)),
    Case("lstm_last_step_time_first", "Brevitas tests/brevitas/nn/nn_quantizers_fixture.py::case_quant_lstm "
         "(batch_first=False, input (FEATURES, 1, IN_CH) through a QuantIdentity), read as out[-1]",
         lstm_last_step(False)),
    Case("conv1d_lstm_last_step", "users' CNN-LSTM (QCNNLSTM): QuantConv1d features, permute(0, 2, 1), "
         "QuantLSTM(batch_first=True), lstm_out[:, -1, :]", conv1d_lstm_last_step),
    Case("lstm_step_slices", "users' sequence read-outs: out[:, 0, :] and out[:, 1::2, :] of a QuantLSTM",
         lstm_step_slices),
    Case("lstm_per_step_head", "users' per-step taggers: QuantLinear on every step of a batch-first QuantLSTM "
         "(hls4ml test/pytest/test_recurrent_pytorch.py returns the whole sequence)", lstm_per_step_head),
)

__all__ = ["SEQUENCE_CASES", "conv1d_lstm_last_step", "lstm_last_step", "lstm_per_step_head", "lstm_step_slices"]
