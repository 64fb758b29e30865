"""brevitas' QuantLSTM as its own test fixtures build it (tests/brevitas/nn/nn_quantizers_fixture.py:
case_quant_lstm) and hls4ml's (test_recurrent_brevitas.py): ``bias=False`` (the cell's bias
inputs one constant 0), two layers (two cells, the second reading the first's sequence: brevitas
exports one io quantizer for both), an ``Int16Bias`` on the float scale ``s_x * s_w`` with more than 40
fractional bits (its Quant's integer codes and one dyadic scale), and the bidirectional form,
refused in one line.

The exact reference's real outputs equal the file run in float64 by the cell executor
(models/rnn/onnx_run.py, sharing no code with the op) on every output of random inputs; the
C-simulation of the same models is the conformance suite's (brevitas_quant_lstm_*,
hls4ml_quant_lstm)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tessera.compiler import api
from tessera.compiler.ops.quant import quantize_float
from tessera.compiler.reference.interpret import run_ir
from tessera.models.rnn.onnx_run import run_cell_onnx

from ..conformance.recurrent import brevitas_quant_lstm, hls4ml_quant_lstm
from .test_real_constants import refused_in_one_line


def _equals_the_file(path, n: int = 200):
    g = api.load_model(path)
    m = onnx.load(str(path))
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim[1:]]
    x = (np.random.default_rng(2).standard_normal((n, *shape)) * 0.8).astype(np.float32)
    codes = g.input_map.codes(x) if g.input_map is not None else quantize_float(g.input_quant, x)
    ours = g.real(g.output, run_ir(g, codes)).reshape(n, -1)
    theirs = np.stack([run_cell_onnx(path, {m.graph.input[0].name: x[i:i + 1]})[m.graph.output[0].name].reshape(-1)
                       for i in range(n)])
    assert np.array_equal(ours, theirs), f"{int((ours != theirs).sum())} of {ours.size} outputs differ from the file"
    assert np.unique(ours).size > 20  # not a constant output
    return g


def test_bias_false(tmp_path):
    g = _equals_the_file(brevitas_quant_lstm("bias_false")(tmp_path / "m.onnx"))
    (node,) = g.nodes
    assert all(gate.bias is None for gate in node.attrs.gates)


def test_two_layers(tmp_path):
    g = _equals_the_file(brevitas_quant_lstm("num_layers_2")(tmp_path / "m.onnx"))
    assert [n.op for n in g.nodes] == ["lstm", "lstm"]  # layer 2 reads layer 1's codes (one io quantizer)
    assert g.nodes[1].inputs == [g.nodes[0].output]


def test_int16_bias_beyond_40_fractional_bits(tmp_path):
    g = _equals_the_file(brevitas_quant_lstm("int16_bias")(tmp_path / "m.onnx"))
    gates = g.nodes[0].attrs.gates
    assert max(gate.bias_frac for gate in gates) > 40 and {gate.bias_mult for gate in gates} != {1}


def test_hls4ml_quant_lstm_without_h0(tmp_path):
    g = _equals_the_file(hls4ml_quant_lstm(tmp_path / "m.onnx"))
    assert all(gate.bias is None for gate in g.nodes[0].attrs.gates)


def test_bidirectional_is_refused_in_one_line(tmp_path):
    refused_in_one_line(brevitas_quant_lstm("bidirectional")(tmp_path / "m.onnx"),
                        r"\(QuantLSTMCell\): a bidirectional LSTM \(its sequence concatenated with another cell's by "
                        r"'.*Concat', axis -1\) is not supported")
