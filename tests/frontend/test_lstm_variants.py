"""brevitas' QuantLSTM as its own test fixtures build it (tests/brevitas/nn/nn_quantizers_fixture.py:
case_quant_lstm) and hls4ml's (test_recurrent_brevitas.py): ``bias=False`` (the cell's bias
inputs one constant 0), two layers (two cells, the second reading the first's sequence: brevitas
exports one io quantizer for both), an ``Int16Bias`` on the float scale ``s_x * s_w`` with more than 40
fractional bits (its Quant's integer codes and one dyadic scale), the bidirectional form
(one and two layers; a reversed cell's sequence in time order), and hls4ml's initial hidden
state given as the graph's second input.

The exact reference's real outputs equal the file run in float64 by the cell executor
(compiler/independent/cells.py, sharing no code with the op) on every output of random inputs; the
C-simulation of the same models is the conformance suite's (brevitas_quant_lstm_*,
hls4ml_quant_lstm, hls4ml_quant_lstm_h0)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tessera.compiler import api
from tessera.compiler.ir.graph import pack
from tessera.compiler.ops.quant import quantize_float
from tessera.compiler.reference.interpret import run_ir
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import input_samples
from tessera.models.rnn.onnx_run import cell_oracle, run_cell_onnx

from ..conformance.recurrent import brevitas_quant_lstm, hls4ml_quant_lstm, hls4ml_quant_lstm_h0
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


def test_hls4ml_quant_lstm_with_h0_an_input(tmp_path):
    """hls4ml's QuantLSTMModel: h0 reaches the cell as the graph's second input (through the
    output quantizer), c0 as a constant.  On full-range codes of both inputs the integer
    reference equals the file in float64 and the onnxruntime form, and h0 changes the output."""
    path = hls4ml_quant_lstm_h0(tmp_path / "m.onnx")
    g = api.load_model(path)
    (cell,) = g.nodes
    assert cell.attrs.h0_input and cell.inputs == g.inputs and g.input_shapes() == [(3, 10), (1, 20)]
    codes = input_samples(g, 300)
    ours = run_ir(g, codes)
    theirs = cell_oracle(path).run(g.input_real(codes))
    assert np.array_equal(g.output_real(ours).reshape(300, -1), theirs)
    assert np.array_equal(OrtReference(reference_model(g)).run(codes), ours)
    x, h0 = g.split_inputs(codes)
    from_zero = run_ir(g, pack([x, np.zeros_like(h0)]))
    assert np.mean(from_zero != ours) > 0.1 and np.unique(ours).size > 20


def quant_lstm_from_states(path):
    """A QuantLSTM called as brevitas documents it, ``rnn(x, hx, cx)`` with ``hx``, ``cx`` of
    shape (layers, batch, hidden): its export reads ``hx[0]`` / ``cx[0]`` (a ``Gather`` of each
    graph input) through the output / cell-state quantizers into H0 and C0.  Brevitas' default
    float-scale activation quantizers, fixed-point weights; calibrated, then exported."""
    import torch
    import brevitas.nn as qnn
    from brevitas.export import export_qonnx
    from brevitas.quant import Int8WeightPerTensorFixedPoint

    class FromStates(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = qnn.QuantLSTM(10, 20, batch_first=True, bias=False, weight_quant=Int8WeightPerTensorFixedPoint)

        def forward(self, x, h0, c0):
            return self.rnn(x, h0, c0)[0]

    torch.manual_seed(0)
    module = FromStates().train()
    with torch.no_grad():
        for _ in range(8):
            module(torch.randn(4, 3, 10), torch.randn(1, 4, 20), torch.randn(1, 4, 20))
        export_qonnx(module.eval(), (torch.randn(1, 3, 10), torch.randn(1, 1, 20), torch.randn(1, 1, 20)), str(path),
                     dynamo=False, input_names=["x", "h0", "c0"], output_names=["y"])
    return path


def test_quant_lstm_from_both_states(tmp_path):
    """``rnn(x, h0, c0)``: H0 and C0 are the op's second and third inputs (each graph input's
    ``hx[0]`` a reshape before its Quant); the reference equals the file in float64 and the
    onnxruntime form on full-range codes of all three, and c0 changes the output."""
    path = quant_lstm_from_states(tmp_path / "m.onnx")
    g = api.load_model(path)
    (cell,) = g.nodes
    assert (cell.attrs.h0_input, cell.attrs.c0_input) == (True, True) and cell.inputs == g.inputs
    assert g.input_shapes() == [(3, 10), (20,), (20,)]
    codes = input_samples(g, 300)
    ours = run_ir(g, codes)
    assert np.array_equal(g.output_real(ours).reshape(300, -1), cell_oracle(path).run(g.input_real(codes)))
    assert np.array_equal(OrtReference(reference_model(g)).run(codes), ours)
    x, h0, c0 = g.split_inputs(codes)
    assert np.mean(run_ir(g, pack([x, h0, np.zeros_like(c0)])) != ours) > 0.1 and np.unique(ours).size > 20

    def weights_listed_first(m):  # the exporter lists the weights among the inputs too
        inputs = list(m.graph.input)
        del m.graph.input[:]
        m.graph.input.extend(inputs[3:] + inputs[:3])

    reordered = _edited(path, weights_listed_first)
    assert np.array_equal(g.output_real(ours).reshape(300, -1), cell_oracle(reordered).run(g.input_real(codes)))


def test_c0_without_h0_and_a_gather_of_another_layer_are_refused_in_one_line(tmp_path):
    def h0_constant(m):
        cell = next(n for n in m.graph.node if n.op_type == "QuantLSTMCell")
        m.graph.initializer.append(onnx.numpy_helper.from_array(np.zeros((1, 20), np.float32), "zero_h0"))
        cell.input[1] = "zero_h0"

    path = _edited(quant_lstm_from_states(tmp_path / "m.onnx"), h0_constant)
    refused_in_one_line(path, r"C0 '[^']+' is a tensor of the graph and H0 a constant; the LSTM takes H0 alone or H0 "
                              r"and C0 as inputs")

    def second_layer(m):
        index = next(n for n in m.graph.node if n.op_type == "Gather").input[1]
        m.graph.initializer.append(onnx.numpy_helper.from_array(np.array(1, np.int64), "layer_1"))
        for n in m.graph.node:
            if n.op_type == "Gather" and n.input[1] == index:
                n.input[1] = "layer_1"

    path = _edited(quant_lstm_from_states(tmp_path / "n.onnx"), second_layer)
    refused_in_one_line(path, r"\(Gather\): of the graph input 'h0' \(shape \[1, 20\] per sample\) before its Quant, "
                              r"at axis 0 index 1; only index 0 of axis 0 of an input of declared shape \(1, 1, ...\)")


def _h0_edit(edit):
    """The file with ``edit(model, cell, h0_quant)`` applied."""

    def apply(m):
        cell = next(n for n in m.graph.node if n.op_type == "QuantLSTMCell")
        edit(m, cell, next(n for n in m.graph.node if n.output[0] == cell.input[1]))

    return apply


def _set_quant_input(m, quant, k: int, edit) -> None:
    """Input ``k`` of the Quant node ``quant`` (an initializer or a Constant) := ``edit(value)``."""
    inits = {i.name: i for i in m.graph.initializer}
    consts = {n.output[0]: n.attribute[0].t for n in m.graph.node if n.op_type == "Constant"}
    name = quant.input[k]
    value = onnx.numpy_helper.to_array(inits[name] if name in inits else consts[name])
    m.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(edit(value), np.float32), f"edited_{k}"))
    quant.input[k] = f"edited_{k}"


@pytest.mark.parametrize("edit,match", [
    ((1, lambda scale: scale / 2), r"H0 '[^']+' has scale \[[0-9.e-]+\]; the state's is [0-9.e-]+ \(quantize H0 "
                                   r"with the cell's output quantizer\)"),
    ((3, lambda bits: bits + 1), r"initial state h0 holds 20 values of .* in \[-256, 255\]; the cell's state is 20 "
                                 r"codes of .* in \[-128, 127\] \(quantize it with the state's own quantizer\)"),
], ids=["another_scale", "a_wider_range"])
def test_an_h0_off_the_hidden_states_codes_is_refused_in_one_line(tmp_path, edit, match):
    """The cell reads h0 as it is: codes of another scale or range are not the hidden state's."""
    k, change = edit
    path = _edited(hls4ml_quant_lstm_h0(tmp_path / "m.onnx"), _h0_edit(lambda m, cell, quant: _set_quant_input(
        m, quant, k, change)))
    refused_in_one_line(path, match)


def test_a_c0_on_the_output_quantizers_scale_is_refused_in_one_line(tmp_path):
    """C0 from the graph through a Quant with the output quantizer's scale, not the cell state's."""

    def c0_from_the_graph(m, cell, quant):
        m.graph.input.append(onnx.helper.make_tensor_value_info("x2", onnx.TensorProto.FLOAT, [1, 1, 20]))
        m.graph.node.insert(0, onnx.helper.make_node("Quant", ["x2", *quant.input[1:]], ["c0_q"], name="c0_quant",
                                                     domain=quant.domain, **{a.name: onnx.helper.get_attribute_value(a)
                                                                             for a in quant.attribute}))
        cell.input[2] = "c0_q"

    path = _edited(hls4ml_quant_lstm_h0(tmp_path / "m.onnx"), _h0_edit(c0_from_the_graph))
    refused_in_one_line(path, r"C0 'c0_q' has scale \[[0-9.e-]+\]; the state's is [0-9.e-]+ \(quantize C0 with the cell's "
                              r"cell_state quantizer\)")


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
    last state, ``y[:, -1]`` (its first step) a crop of the sequence, one step."""
    model = brevitas_quant_lstm("bidirectional")(tmp_path / "m.onnx")
    whole = run_cell_onnx(model, {"input": np.ones((1, 5, 8), np.float32)})["output"]
    for index, ops in ((0, ["lstm"]), (-1, ["lstm", "crop", "flatten"])):
        read = tmp_path / f"read{index}.onnx"
        read.write_bytes(model.read_bytes())
        g = api.load_model(_edited(read, _reversed_cell_read_at(index)))
        assert [n.op for n in g.nodes] == ops
        assert g.nodes[0].attrs.reverse and g.nodes[0].attrs.return_sequences == (index != 0)
        codes = g.input_map.codes(np.ones((1, 5, 8), np.float32))
        assert np.array_equal(g.real(g.output, run_ir(g, codes)).reshape(-1), whole[0, index, 16:])
