"""brevitas' QuantLSTM as its own test fixtures build it (tests/brevitas/nn/nn_quantizers_fixture.py:
case_quant_lstm) and hls4ml's (test_recurrent_brevitas.py): ``bias=False`` (the cell's bias
inputs one constant 0), two layers (two cells, the second reading the first's sequence: brevitas
exports one io quantizer for both), an ``Int16Bias`` on the float scale ``s_x * s_w`` with more than 40
fractional bits (its Quant's integer codes and one dyadic scale), and the bidirectional form
(one and two layers; a reversed cell's sequence in time order).

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


def test_bidirectional(tmp_path):
    g = _equals_the_file(brevitas_quant_lstm("bidirectional")(tmp_path / "m.onnx"))
    forward, backward, join = g.nodes
    assert [n.op for n in g.nodes] == ["lstm", "lstm", "concat"] and join.attrs.features
    assert forward.inputs == backward.inputs == [g.input]  # the one input quantizer, read by both directions
    assert (forward.attrs.reverse, backward.attrs.reverse) == (False, True)
    assert g.values[g.output].shape == (5, 32)


def test_bidirectional_two_layers(tmp_path):
    g = _equals_the_file(brevitas_quant_lstm("bidirectional_num_layers_2")(tmp_path / "m.onnx"))
    assert [n.op for n in g.nodes] == ["lstm", "lstm", "concat"] * 2
    assert g.nodes[3].inputs == g.nodes[4].inputs == [g.nodes[2].output]  # layer 2 reads both directions' codes


def _edited(path, edit) -> str:
    """The file with ``edit(model)`` applied (a graph no exporter writes, built from one that does)."""
    m = onnx.load(str(path))
    edit(m)
    onnx.save(m, str(path))
    return path


def test_directions_on_two_scales_are_refused_in_one_line(tmp_path):
    """A sequence has one scale for every feature: two directions quantized differently."""

    def rescale_second_output(m):
        cells = [n for n in m.graph.node if n.op_type == "QuantLSTMCell"]
        values = {**{i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer},
                  **{n.output[0]: onnx.numpy_helper.to_array(n.attribute[0].t) for n in m.graph.node if n.op_type == "Constant"}}
        scale = values[cells[1].input[15]]
        m.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(2 * scale, np.float32), "other_scale"))
        cells[1].input[15] = "other_scale"

    path = _edited(brevitas_quant_lstm("bidirectional")(tmp_path / "m.onnx"), rescale_second_output)
    refused_in_one_line(path, r"\(Concat\): joins sequences whose codes have the scales [0-9.e-]+, [0-9.e-]+ along "
                              r"their features; a sequence has one scale for every feature")


def _reversed_cell_read_at(index: int):
    """The reversed direction alone, its output ``y[:, index]``."""

    def edit(m):
        cells = [n for n in m.graph.node if n.op_type == "QuantLSTMCell"]
        concat = next(n for n in m.graph.node if n.op_type == "Concat")
        m.graph.node.remove(concat)
        m.graph.node.remove(cells[0])
        m.graph.initializer.append(onnx.numpy_helper.from_array(np.array(index, dtype=np.int64), "step"))
        m.graph.node.append(onnx.helper.make_node("Gather", [cells[1].output[0], "step"], [m.graph.output[0].name],
                                                  name="last", axis=1))

    return edit


def test_a_reversed_cell_outputs_in_time_order_and_ends_at_time_zero(tmp_path):
    """The reversed cell's last state processed is its output at time 0 (brevitas' forward and
    ONNX LSTM direction=reverse return the sequence in time order): ``y[:, 0]`` is the op's
    last state, ``y[:, -1]`` (its first step) is refused."""
    model = brevitas_quant_lstm("bidirectional")(tmp_path / "m.onnx")
    whole = run_cell_onnx(model, {"input": np.ones((1, 5, 8), np.float32)})["output"]
    last = _edited(model, _reversed_cell_read_at(0))
    g = api.load_model(last)
    (cell,) = g.nodes
    assert cell.attrs.reverse and not cell.attrs.return_sequences
    codes = g.input_map.codes(np.ones((1, 5, 8), np.float32))
    assert np.array_equal(g.real(g.output, run_ir(g, codes)).reshape(-1), whole[0, 0, 16:])
    first = _edited(brevitas_quant_lstm("bidirectional")(tmp_path / "n.onnx"), _reversed_cell_read_at(-1))
    refused_in_one_line(first, r"\(Gather\): only the last step processed \(axis 1, index -1; index 0 of a "
                               r"reversed cell\)")
