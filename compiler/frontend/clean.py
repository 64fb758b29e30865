"""qonnx's clean-up of a model before import: shape inference, constant folding (never of a
quantizer: QONNX's and ONNX's QuantizeLinear / DequantizeLinear stay for their handlers),
unique names."""

from __future__ import annotations

import onnx

from ..errors import UnsupportedModelError
from .load import RECURRENT_OPS

_NAME_TAG = "tessera-original-name:"
#: qonnx's clean-up keeps Quant on constants but folds qonnx 1.0's IntQuant (the same op) into
#: float32 values; IntQuant goes through it as Quant, marked, and is restored after.
_INT_QUANT_TAG = "tessera-int-quant:"


def clean(model: onnx.ModelProto) -> onnx.ModelProto:
    """qonnx clean-up (shape inference, constant folding, unique names).  The user's node
    names are kept for messages (qonnx renames nodes)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.cleanup import cleanup_model

    model = onnx.ModelProto.FromString(model.SerializeToString())
    if any(n.op_type in RECURRENT_OPS for n in model.graph.node):
        # qonnx cannot infer the shapes of the recurrent custom ops and refuses the graph;
        # their graphs (brevitas' / tessera's exports) are read as written.
        return model
    for node in model.graph.node:
        if node.name:
            node.doc_string = _NAME_TAG + node.name
        if node.op_type == "IntQuant":
            node.op_type, node.doc_string = "Quant", _INT_QUANT_TAG + node.doc_string
    wrapper = ModelWrapper(model)
    try:
        wrapper = cleanup_model(wrapper)  # QuantizeLinear / DequantizeLinear kept: handlers/qcdq.py
    except Exception as exc:  # noqa: BLE001 - qonnx raises many kinds on a model it cannot clean; report the first line
        raise UnsupportedModelError(f"qonnx clean-up failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    cleaned = wrapper.model
    for n in cleaned.graph.node:
        if n.doc_string.startswith(_INT_QUANT_TAG):
            n.op_type, n.doc_string = "IntQuant", n.doc_string[len(_INT_QUANT_TAG):]
    originals = [n.doc_string[len(_NAME_TAG):] for n in cleaned.graph.node if n.doc_string.startswith(_NAME_TAG)]
    if len(set(originals)) == len(originals):
        for n in cleaned.graph.node:
            if n.doc_string.startswith(_NAME_TAG):
                n.name, n.doc_string = n.doc_string[len(_NAME_TAG):], ""
    return cleaned


__all__ = ["clean"]
