"""The peers' recurrent models, in our own words: brevitas' QuantLSTM as its own test fixtures
build it, and hls4ml's.  No ONNX runtime executes a QuantLSTMCell: each case's independent
check is the file run in float64 with its cells by the cell executor
(``compiler/independent/cells.py``), as ``verify`` runs it by default.  Run like those of
:mod:`.cases` (``tests/conformance/``, ``bench/conformance.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .cases import Case, _export, _export_ports


# -- Brevitas: tests/brevitas/nn/nn_quantizers_fixture.py (case_quant_lstm); hls4ml pr/1019 ------
def _lstm_sequence(lstm, in_size: int, path: Path, steps: int = 5, weights: float | None = None) -> Path:
    """A QuantLSTM's output sequence (its first output, as the peer tests compare) on
    ``(1, steps, in_size)`` inputs, calibrated and exported with brevitas' QONNX exporter
    (QuantLSTMCell nodes); ``weights``: every weight drawn in +-weights first."""
    import torch
    from torch import nn

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lstm

        def forward(self, x):
            return self.lstm(x)[0]

    if weights is not None:
        with torch.no_grad():
            for name, p in lstm.named_parameters():
                if "weight" in name:
                    p.uniform_(-weights, weights)
    return _export(Sequence(), (steps, in_size), path)


def brevitas_quant_lstm(variant: str) -> Callable[[Path], Path]:
    """case_quant_lstm's QuantLSTM(IN_CH 8, OUT_CH 16) with Int8WeightPerTensorFloat weights and
    Int8ActPerTensorFloat on its input / output, gate accumulators, sigmoids, tanhs and cell state
    (the fixture's 'quant_sym'), batch first: ``bias_false`` (bias=False), ``num_layers_2``,
    ``int16_bias`` (bias_quant=Int16Bias on the float scale s_x * s_w, weights in +-0.04 so the
    bias has more than 40 fractional bits), ``bidirectional`` (a forward and a reversed cell, their
    sequences side by side), ``bidirectional_num_layers_2``."""

    def build(path: Path) -> Path:
        import brevitas.nn as qnn
        from brevitas.quant.scaled_int import Int8ActPerTensorFloat, Int8WeightPerTensorFloat, Int16Bias

        act = Int8ActPerTensorFloat
        options = {"bias_false": {"bias": False}, "num_layers_2": {"num_layers": 2}, "int16_bias": {},
                   "bidirectional": {"bidirectional": True},
                   "bidirectional_num_layers_2": {"bidirectional": True, "num_layers": 2}}[variant]
        lstm = qnn.QuantLSTM(8, 16, weight_quant=Int8WeightPerTensorFloat, bias_quant=Int16Bias, io_quant=act,
                             gate_acc_quant=act, sigmoid_quant=act, tanh_quant=act, cell_state_quant=act, batch_first=True,
                             **options)
        return _lstm_sequence(lstm, 8, path, weights=0.04 if variant == "int16_bias" else None)

    return build


def hls4ml_quant_lstm(path: Path) -> Path:
    """test_recurrent_brevitas.py's QuantLSTMModelStream (pr/1019, commit c3912bcf2): QuantLSTM(10,
    20, bias=False) with Int8WeightPerTensorFixedPoint weights and Int8ActPerTensorFixedPoint gate
    accumulators, sigmoids and tanhs, shared intra-layer weight and accumulator quantizers,
    batch first, on the input alone (no h0)."""
    import brevitas.nn as qnn
    from brevitas.quant import (Int8ActPerTensorFixedPoint, Int8BiasPerTensorFixedPointInternalScaling,
                                Int8WeightPerTensorFixedPoint)

    lstm = qnn.QuantLSTM(10, 20, num_layers=1, batch_first=True, bias=False, weight_quant=Int8WeightPerTensorFixedPoint,
                         bias_quant=Int8BiasPerTensorFixedPointInternalScaling, gate_acc_quant=Int8ActPerTensorFixedPoint,
                         sigmoid_quant=Int8ActPerTensorFixedPoint, tanh_quant=Int8ActPerTensorFixedPoint,
                         shared_intra_layer_weight_quant=True, shared_intra_layer_gate_acc_quant=True)
    return _lstm_sequence(lstm, 10, path, steps=3)


def hls4ml_quant_lstm_h0(path: Path) -> Path:
    """test_recurrent_brevitas.py's QuantLSTMModel (commit c3912bcf2): the same QuantLSTM with its
    initial state given, ``forward(x, h0, c0) = rnn(x, (h0, c0))[0]`` on x (1, 1, 10) and h0, c0
    (1, 1, 20); here 3 steps.  Brevitas' ``QuantLSTM.forward(inp, hx, cx)`` reads the tuple as
    ``hx``: h0 is layer 0's hidden state and c0 is not read.  Its exporter quantizes h0 with the
    output quantizer into a second graph input and writes C0 as a constant (zeros): inputs
    ``x0`` and ``x1`` (= h0)."""
    import torch
    import brevitas.nn as qnn
    from brevitas.quant import (Int8ActPerTensorFixedPoint, Int8BiasPerTensorFixedPointInternalScaling,
                                Int8WeightPerTensorFixedPoint)


    class WithState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = qnn.QuantLSTM(10, 20, num_layers=1, batch_first=True, bias=False,
                                     weight_quant=Int8WeightPerTensorFixedPoint,
                                     bias_quant=Int8BiasPerTensorFixedPointInternalScaling,
                                     gate_acc_quant=Int8ActPerTensorFixedPoint, sigmoid_quant=Int8ActPerTensorFixedPoint,
                                     tanh_quant=Int8ActPerTensorFixedPoint, shared_intra_layer_weight_quant=True,
                                     shared_intra_layer_gate_acc_quant=True)

        def forward(self, x, h0, c0):
            return self.rnn(x, (h0, c0))[0]

    return _export_ports(WithState(), [(3, 10), (1, 20), (1, 20)], path)


RECURRENT_CASES: tuple[Case, ...] = (
    *(Case(f"brevitas_quant_lstm_{v}", f"Brevitas tests/brevitas/nn/nn_quantizers_fixture.py::case_quant_lstm ({v})",
           brevitas_quant_lstm(v))
      for v in ("bias_false", "num_layers_2", "int16_bias", "bidirectional", "bidirectional_num_layers_2")),
    Case("hls4ml_quant_lstm", "hls4ml test/pytest/test_recurrent_brevitas.py::QuantLSTMModelStream (pr/1019)",
         hls4ml_quant_lstm),
    Case("hls4ml_quant_lstm_h0", "hls4ml test/pytest/test_recurrent_brevitas.py::QuantLSTMModel (commit c3912bcf2)",
         hls4ml_quant_lstm_h0),
)

__all__ = ["RECURRENT_CASES", "brevitas_quant_lstm", "hls4ml_quant_lstm", "hls4ml_quant_lstm_h0"]
