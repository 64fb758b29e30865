"""ONNX export forms of the quantized cells.

Three forms, one per cell, documented in ``docs/rnn_export.md``:

* **LSTM** -- brevitas' own: ``export_qonnx(QuantLSTM, x, dynamo=False)`` gives
  ``Quant(x)`` -> ``QuantLSTMCell`` (domain ``qonnx.custom_op.general``; 48 inputs; see
  :func:`export_lstm`).
* **GRU** -- ``Quant(x)`` -> ``QuantGRUCell`` (domain ``tessera.custom_op``), weights and
  biases through QONNX ``Quant`` / ``BipolarQuant`` nodes, every internal quantizer in
  attributes (:func:`export_gru`).
* **ConvLSTM** -- ``Quant(x)`` -> ``QuantConvLSTMCell`` (domain ``tessera.custom_op``), same
  conventions (:func:`export_convlstm`).

Every export is taken in eval mode with weights and biases written *already quantized*:
initializers hold values exactly on their grid (the codebook for Connect weights), so each
``Quant`` / ``BipolarQuant`` node is an exact identity on its initializer.  Float (``fp``)
weights and their biases are plain float32 initializers without a ``Quant`` node.

:func:`.onnx_run.run_cell_onnx` executes any of the three forms from the ONNX file alone, in
float64 NumPy, following the documented semantics; the tests require it to agree *exactly*
with the brevitas model it was exported from.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx
import torch
from brevitas.proxy import BiasQuantProxyFromInjector
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from .cells import QuantConvLSTM, QuantGRU
from .quant import codebook_export_mode

__all__ = [
    "CUSTOM_DOMAIN",
    "QONNX_DOMAIN",
    "export_convlstm",
    "export_forecaster",
    "export_gru",
    "export_lstm",
    "export_sentiment",
    "quant_attrs",
]

QONNX_DOMAIN = "qonnx.custom_op.general"
CUSTOM_DOMAIN = "tessera.custom_op"

GRU_QUANTIZERS = ("reset_acc", "update_acc", "new_acc", "reset_sigmoid", "update_sigmoid",
                  "new_tanh", "output")
CONVLSTM_QUANTIZERS = ("input_acc", "forget_acc", "cell_acc", "output_acc", "input_sigmoid",
                       "forget_sigmoid", "cell_tanh", "output_sigmoid", "hidden_state_tanh",
                       "cell_state", "output")


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------


def _f(t) -> float:
    return float(torch.as_tensor(t).detach().cpu().reshape(-1)[0])


def quant_attrs(module: nn.Module, prefix: str) -> dict:
    """``{prefix}_scale/_bit_width/_signed/_narrow/_rounding_mode`` of an activation
    quantizer module (``QuantIdentity`` / ``QuantSigmoid`` / ``QuantTanh``), in eval mode."""
    proxy = module.act_quant
    return {
        f"{prefix}_scale": _f(proxy.scale()),
        f"{prefix}_bit_width": int(round(_f(proxy.bit_width()))),
        f"{prefix}_signed": int(bool(proxy.is_signed)),
        f"{prefix}_narrow": int(bool(proxy.is_narrow_range)),
        f"{prefix}_rounding_mode": str(proxy.rounding_mode or "ROUND"),
    }


@contextmanager
def _captured_biases(model: nn.Module):
    """Record the last quantized output (value, scale, bit width) of every bias proxy."""
    store: dict[int, tuple] = {}
    handles = []
    for m in model.modules():
        if isinstance(m, BiasQuantProxyFromInjector):
            def hook(mod, args, out, key=id(m)):
                if hasattr(out, "scale") and out.scale is not None:
                    store[key] = (out.value.detach().clone(), _f(out.scale), _f(out.bit_width))
            handles.append(m.register_forward_hook(hook))
    try:
        yield store
    finally:
        for h in handles:
            h.remove()


class _GraphBuilder:
    def __init__(self) -> None:
        self.nodes: list = []
        self.inits: list = []
        self._n = 0

    def const(self, name: str, value) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def weight(self, name: str, layer: nn.Module, shape: tuple[int, ...] | None = None) -> str:
        """Initializer of a quantized weight (+ its Quant node), or a float initializer;
        ``shape`` reshapes it (e.g. a 2D 1x1 kernel written as 3D 1x1x1)."""
        if layer.weight_quant.is_quant_enabled:
            qw = layer.quant_weight()
            value = qw.value.detach().cpu().numpy()
            value = value.reshape(shape) if shape is not None else value
            scale, bits = _f(qw.scale), int(round(_f(qw.bit_width)))
            self.const(name, value)
            out = f"{name}_q"
            s = self.const(f"{name}_scale", scale)
            if bits == 1:
                self.nodes.append(helper.make_node(
                    "BipolarQuant", [name, s], [out], name=f"BipolarQuant_{name}",
                    domain=QONNX_DOMAIN))
            else:
                z = self.const(f"{name}_zeropt", 0.0)
                b = self.const(f"{name}_bitwidth", float(bits))
                self.nodes.append(helper.make_node(
                    "Quant", [name, s, z, b], [out], name=f"Quant_{name}", domain=QONNX_DOMAIN,
                    signed=1, narrow=int(bool(layer.weight_quant.is_narrow_range)),
                    rounding_mode="ROUND"))
            return out
        value = layer.weight.detach().cpu().numpy()
        self.const(name, value.reshape(shape) if shape is not None else value)
        return name

    def bias(self, name: str, layer: nn.Module, captured: dict) -> str:
        if layer.bias is None:
            return ""
        key = id(layer.bias_quant)
        if layer.bias_quant.is_quant_enabled:
            if key not in captured:
                raise RuntimeError(f"bias {name}: no quantized value captured")
            value, scale, bits = captured[key]
            self.const(name, value.cpu().numpy())
            s = self.const(f"{name}_scale", scale)
            z = self.const(f"{name}_zeropt", 0.0)
            b = self.const(f"{name}_bitwidth", float(bits))
            out = f"{name}_q"
            self.nodes.append(helper.make_node(
                "Quant", [name, s, z, b], [out], name=f"Quant_{name}", domain=QONNX_DOMAIN,
                signed=1, narrow=0, rounding_mode="ROUND"))
            return out
        self.const(name, layer.bias.detach().cpu().numpy())
        return name

    def act_quant(self, x: str, module: nn.Module, out: str) -> str:
        a = quant_attrs(module, "q")
        s = self.const(f"{out}_scale", a["q_scale"])
        z = self.const(f"{out}_zeropt", 0.0)
        b = self.const(f"{out}_bitwidth", float(a["q_bit_width"]))
        self.nodes.append(helper.make_node(
            "Quant", [x, s, z, b], [out], name=f"Quant_{out}", domain=QONNX_DOMAIN,
            signed=a["q_signed"], narrow=a["q_narrow"], rounding_mode=a["q_rounding_mode"]))
        return out

    def model(self, name, inputs, outputs) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(graph, producer_name="tessera", opset_imports=[
            helper.make_opsetid("", 13), helper.make_opsetid(QONNX_DOMAIN, 1),
            helper.make_opsetid(CUSTOM_DOMAIN, 1)])
        m.ir_version = 8
        return m


def _eval_copy_state(module: nn.Module):
    was = module.training
    module.eval()
    return was


def _save(model: onnx.ModelProto, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


# ---------------------------------------------------------------------------------------
# LSTM: brevitas QuantLSTMCell
# ---------------------------------------------------------------------------------------


def export_lstm(lstm: nn.Module, path: str | Path, seq_len: int = 4) -> Path:
    """Export a single-layer ``QuantLSTM`` (from :func:`~.cells.quant_lstm`) with brevitas.

    Graph input ``x`` ``(1, seq_len, input_size)`` float; outputs ``y`` (every hidden state,
    ``(1, seq_len, H)``), ``h`` and ``c`` (last states, ``(1, 1, H)``).  Connect weights are
    written on their codebook (:func:`~.quant.codebook_export_mode`) and biases on their
    ``Int24Bias`` grid.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        from brevitas.export import export_qonnx

    was = _eval_copy_state(lstm)
    device = next(lstm.parameters()).device
    lstm.cpu()
    layer = lstm.layers[0][0]
    x = torch.zeros(1, seq_len, layer.input_size)
    saved = []
    try:
        with torch.no_grad(), codebook_export_mode(lstm):
            with _captured_biases(lstm) as cap:
                lstm(torch.randn(1, seq_len, layer.input_size))
            for gate in ("input", "forget", "cell", "output"):
                gp = getattr(layer, f"{gate}_gate_params")
                if gp is not None and gp.bias is not None and id(gp.bias_quant) in cap:
                    saved.append((gp.bias, gp.bias.data.clone()))
                    gp.bias.data.copy_(cap[id(gp.bias_quant)][0])
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore")
                export_qonnx(lstm, x, str(path), dynamo=False, input_names=["x"],
                             output_names=["y", "h", "c"], keep_initializers_as_inputs=False)
    finally:
        with torch.no_grad():
            for p, data in saved:
                p.data.copy_(data)
        lstm.to(device)
        lstm.train(was)
    return Path(path)


# ---------------------------------------------------------------------------------------
# GRU: tessera.custom_op::QuantGRUCell
# ---------------------------------------------------------------------------------------


def export_gru(gru: QuantGRU, path: str | Path, seq_len: int = 4) -> Path:
    """Export a :class:`~.cells.QuantGRU` as ``Quant(x)`` -> ``QuantGRUCell``.

    Node inputs: ``X`` (quantized, ``(N, T, I)``), ``H0`` (``(N, H)``), ``W_ih`` ``(3H, I)``,
    ``W_hh`` ``(3H, H)``, ``B_ih`` ``(3H,)``, ``B_hh`` ``(3H,)`` (rows r | z | n).  Outputs
    ``Y`` ``(N, T, H)``, ``H_last`` ``(N, H)``.  Attributes: ``hidden_size``,
    ``gate_order="rzn"``, ``batch_first=1`` and, for each quantizer ``q`` in
    ``reset_acc, update_acc, new_acc, reset_sigmoid, update_sigmoid, new_tanh, output``:
    ``q_scale`` (float), ``q_bit_width``, ``q_signed``, ``q_narrow`` (ints) and
    ``q_rounding_mode`` (``"ROUND"`` = round half to even).
    """
    was = _eval_copy_state(gru)
    device = next(gru.parameters()).device
    gru.cpu()
    try:
        with torch.no_grad(), codebook_export_mode(gru):
            with _captured_biases(gru) as cap:
                gru(torch.randn(1, seq_len, gru.input_size))
            g = _GraphBuilder()
            xq = g.act_quant("x", gru.input_quant, "x_quant")
            w_ih, w_hh = g.weight("W_ih", gru.ih), g.weight("W_hh", gru.hh)
            b_ih, b_hh = g.bias("B_ih", gru.ih, cap), g.bias("B_hh", gru.hh, cap)
            h0 = g.const("H0", np.zeros((1, gru.hidden_size), np.float32))
            attrs = {"hidden_size": gru.hidden_size, "gate_order": "rzn", "batch_first": 1}
            for q in GRU_QUANTIZERS:
                mod = getattr(gru, {"output": "output_quant"}.get(q, f"{q}_quant"))
                attrs.update(quant_attrs(mod, q))
            g.nodes.append(helper.make_node(
                "QuantGRUCell", [xq, h0, w_ih, w_hh, b_ih, b_hh], ["y", "h"],
                name="QuantGRUCell_0", domain=CUSTOM_DOMAIN, **attrs))
            model = g.model(
                "quant_gru",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq_len, gru.input_size])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq_len, gru.hidden_size]),
                 helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, gru.hidden_size])])
    finally:
        gru.to(device)
        gru.train(was)
    return _save(model, path)


# ---------------------------------------------------------------------------------------
# ConvLSTM: tessera.custom_op::QuantConvLSTMCell
# ---------------------------------------------------------------------------------------


def _convlstm_node(g: "_GraphBuilder", cell: QuantConvLSTM, cap: dict, prefix: str, xq: str, h0: str, c0: str,
                   steps: int, outputs: list[str]) -> None:
    """Append one ``QuantConvLSTMCell`` node (initializers named ``{prefix}W_x`` ...)."""
    has_x = cell.conv_x is not None
    if has_x:
        w_x = g.weight(f"{prefix}W_x", cell.conv_x)
        b = g.bias(f"{prefix}B", cell.conv_x, cap)
    else:
        w_x = ""
        b = g.bias(f"{prefix}B", cell.conv_h, cap)
    w_h = g.weight(f"{prefix}W_h", cell.conv_h)
    attrs = {"hidden_channels": cell.hidden_channels, "kernel_size": cell.kernel_size, "gate_order": "ifco",
             "bias_on": "x" if has_x else "h", "steps": int(steps)}
    for q in CONVLSTM_QUANTIZERS:
        attrs.update(quant_attrs(getattr(cell, f"{q}_quant"), q))
    g.nodes.append(helper.make_node("QuantConvLSTMCell", [xq, h0, c0, w_x, w_h, b], outputs,
                                    name=f"{prefix}QuantConvLSTMCell", domain=CUSTOM_DOMAIN, **attrs))


def export_convlstm(cell: QuantConvLSTM, path: str | Path, seq_len: int = 4,
                    height: int = 16, width: int = 16) -> Path:
    """Export a :class:`~.cells.QuantConvLSTM` as ``[Quant(x) ->] QuantConvLSTMCell``.

    Node inputs: ``X`` (quantized ``(N, T, C, H, W)``; the empty name when the cell has no
    input), ``H0``, ``C0`` (``(N, Hc, H, W)``), ``W_x`` ``(4Hc, C, k, k)`` (empty without
    input), ``W_h`` ``(4Hc, Hc, k, k)``, ``B`` ``(4Hc,)`` (channels i | f | c | o).
    Outputs ``Y`` ``(N, T, Hc, H, W)``, ``H_last``, ``C_last``.  Attributes:
    ``hidden_channels``, ``kernel_size`` (stride 1, zero "same" padding ``k // 2``),
    ``gate_order="ifco"``, ``bias_on`` (``"x"``: ``B`` belongs to ``conv_x``; ``"h"``: to
    ``conv_h``), ``steps`` (number of steps, needed when there is no input), and for each
    quantizer ``q`` in ``input_acc, forget_acc, cell_acc, output_acc, input_sigmoid,
    forget_sigmoid, cell_tanh, output_sigmoid, hidden_state_tanh, cell_state, output``:
    ``q_scale``, ``q_bit_width``, ``q_signed``, ``q_narrow``, ``q_rounding_mode``.
    Without input, ``H0`` and ``C0`` are graph inputs; with input they are zero
    initializers.  ``H0`` passes through the ``output`` quantizer and ``C0`` through the
    ``cell_state`` quantizer before the first step.
    """
    was = _eval_copy_state(cell)
    device = next(cell.parameters()).device
    cell.cpu()
    hc = cell.hidden_channels
    has_x = cell.conv_x is not None
    try:
        with torch.no_grad(), codebook_export_mode(cell):
            with _captured_biases(cell) as cap:
                st = (torch.rand(1, hc, height, width) - 0.5, torch.rand(1, hc, height, width) - 0.5)
                if has_x:
                    cell(torch.rand(1, seq_len, cell.input_channels, height, width), st)
                else:
                    cell(None, st, steps=seq_len)
            g = _GraphBuilder()
            inputs = []
            if has_x:
                inputs.append(helper.make_tensor_value_info(
                    "x", TensorProto.FLOAT, [1, seq_len, cell.input_channels, height, width]))
                xq = g.act_quant("x", cell.input_quant, "x_quant")
                h0 = g.const("H0", np.zeros((1, hc, height, width), np.float32))
                c0 = g.const("C0", np.zeros((1, hc, height, width), np.float32))
            else:
                xq = ""
                h0, c0 = "h0", "c0"
                inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, hc, height, width])
                           for n in (h0, c0)]
            _convlstm_node(g, cell, cap, "", xq, h0, c0, seq_len, ["y", "h", "c"])
            model = g.model("quant_convlstm", inputs, [
                helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq_len, hc, height, width]),
                helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, hc, height, width]),
                helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, hc, height, width])])
    finally:
        cell.to(device)
        cell.train(was)
    return _save(model, path)


def export_forecaster(model: nn.Module, path: str | Path, in_frames: int = 10, size: int = 64) -> Path:
    """Export a :class:`~.networks.ConvLSTMForecaster` as one graph for ``tessera compile``:
    from the space-to-depth patches of the input frames to the read-out logits.

    Input ``x`` ``(1, in_frames, patch**2, size / patch, size / patch)`` (pixels in [0, 1],
    already cut into patches; space-to-depth and depth-to-space stay on the host).  Graph:
    ``Quant`` (``frame_quant``) -> ``Quant`` (encoder input) -> ``QuantConvLSTMCell``
    (encoder) -> ``QuantConvLSTMCell`` (forecaster; ``H0``/``C0`` = the encoder's last
    states) -> ``Quant`` (forecaster output quantizer, as the model applies it before the
    read-out) -> ``Transpose`` (frames -> (N, Hc, T, H, W)) -> ``Conv`` 1x1x1 (the read-out,
    ``Int24Bias``) -> ``Quant`` (``output_quant``) -> ``Transpose`` -> ``logits``
    ``(1, out_frames, patch**2, size / patch, size / patch)``.
    """
    was = _eval_copy_state(model)
    device = next(model.parameters()).device
    model.cpu()
    p, hw = model.patch, size // model.patch
    c_in, hc, t_out = p * p, model.hidden_channels, model.out_frames
    try:
        with torch.no_grad(), codebook_export_mode(model):
            with _captured_biases(model) as cap:
                model(torch.rand(1, in_frames, 1, size, size))
            g = _GraphBuilder()
            xf = g.act_quant("x", model.frame_quant, "x_frames")
            xq = g.act_quant(xf, model.encoder.input_quant, "x_quant")
            zeros = np.zeros((1, hc, hw, hw), np.float32)
            _convlstm_node(g, model.encoder, cap, "enc_", xq, g.const("enc_H0", zeros), g.const("enc_C0", zeros),
                           in_frames, ["enc_y", "enc_h", "enc_c"])
            _convlstm_node(g, model.forecaster, cap, "fc_", "", "enc_h", "enc_c", t_out, ["fc_y", "fc_h", "fc_c"])
            hq = g.act_quant("fc_y", model.forecaster.output_quant, "fc_y_q")
            g.nodes.append(helper.make_node("Transpose", [hq], ["fc_volume"], name="Transpose_to_volume",
                                            perm=[0, 2, 1, 3, 4]))
            w = g.weight("W_readout", model.readout, shape=(c_in, hc, 1, 1, 1))
            b = g.bias("B_readout", model.readout, cap)
            g.nodes.append(helper.make_node("Conv", ["fc_volume", w, b], ["readout_out"], name="Conv_readout",
                                            kernel_shape=[1, 1, 1]))
            lq = g.act_quant("readout_out", model.output_quant, "logits_volume")
            g.nodes.append(helper.make_node("Transpose", [lq], ["logits"], name="Transpose_to_frames",
                                            perm=[0, 2, 1, 3, 4]))
        m = g.model("convlstm_forecaster",
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, in_frames, c_in, hw, hw])],
                    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, t_out, c_in, hw, hw])])
    finally:
        model.to(device)
        model.train(was)
    return _save(m, path)


# ---------------------------------------------------------------------------------------
# The sentiment classifier after its embedding: cell -> last state -> quantized classifier
# ---------------------------------------------------------------------------------------


def export_sentiment(model: nn.Module, path: str | Path, seq_len: int = 24) -> Path:
    """Export a :class:`~.networks.SentimentRNN` from its embedded input to its logits, one
    graph for ``tessera compile``.

    Input ``x``: the embedded sequence ``(1, seq_len, embed_dim)`` (the output of the
    ``QuantEmbedding`` table lookup, which stays on the host).  Graph: the cell's export
    form (:func:`export_lstm` / :func:`export_gru`), ``Gather(y, -1, axis=1)`` (the hidden
    state after the last step), ``head_quant`` (``Quant``), ``classifier`` (``Gemm`` with
    quantized weight and ``Int24Bias`` bias), ``output_quant`` (``Quant``) -> ``logits``
    ``(1, 2)``.  This equals ``model`` on sequences of exactly ``seq_len`` tokens
    (``lengths=None``).  ``fp`` models (float weights) export their float classifier.
    """
    import tempfile

    was = _eval_copy_state(model)
    device = next(model.parameters()).device
    model.cpu()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cell_path = Path(tmp) / "cell.onnx"
            (export_lstm if model.cell == "lstm" else export_gru)(model.rnn, cell_path, seq_len=seq_len)
            m = onnx.load(str(cell_path))
        with torch.no_grad(), _captured_biases(model) as cap:
            model(torch.randint(1, model.vocab_size, (1, seq_len)))
            g = _GraphBuilder()
            last = "y_last"
            g.inits.append(numpy_helper.from_array(np.array(-1, dtype=np.int64), "last_step"))
            g.nodes.append(helper.make_node("Gather", ["y", "last_step"], [last], name="Gather_last_step", axis=1))
            hq = g.act_quant(last, model.head_quant, "head_q")
            w = g.weight("W_cls", model.classifier)
            b = g.bias("B_cls", model.classifier, cap)
            g.nodes.append(helper.make_node("Gemm", [hq, w, b] if b else [hq, w], ["classifier_out"],
                                            name="Gemm_classifier", transB=1))
            g.act_quant("classifier_out", model.output_quant, "logits")
        keep = {n.name for n in m.graph.node if n.op_type != "Unsqueeze"}
        nodes = [n for n in m.graph.node if n.name in keep] + g.nodes
        del m.graph.node[:]
        m.graph.node.extend(nodes)
        m.graph.initializer.extend(g.inits)
        del m.graph.output[:]
        m.graph.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 2]))
        if not any(o.domain == QONNX_DOMAIN for o in m.opset_import):
            m.opset_import.append(helper.make_opsetid(QONNX_DOMAIN, 1))
    finally:
        model.to(device)
        model.train(was)
    return _save(m, path)
