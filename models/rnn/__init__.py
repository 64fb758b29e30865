"""Quantized recurrent networks (paper 3: Binary / Ternary / Quaternary Connect).

* :mod:`.quant` -- BinaryConnect (deterministic and stochastic), TernaryConnect and
  QuaternaryConnect brevitas weight quantizers; power-of-two sigmoid / tanh presets.
* :mod:`.cells` -- ``quant_lstm`` (brevitas ``QuantLSTM``), ``QuantGRU``, ``QuantConvLSTM``:
  integer machines with power-of-two scales.
* :mod:`.networks` -- ``SentimentRNN`` (embedding -> LSTM/GRU -> dense) and
  ``ConvLSTMForecaster`` (encoder-forecaster for next-frame prediction).
* :mod:`.export` -- the ONNX export forms (``QuantLSTMCell``, ``QuantGRUCell``,
  ``QuantConvLSTMCell``) and a NumPy reference executor of them.
* :mod:`.train` -- ``train_rnn`` and ``train_rnn_cli`` (``tessera train rnn``).

Submodules are not imported here so that ``import tessera.models.rnn`` stays cheap.
"""
