"""Every attribute of every ONNX op the importer reads is accounted for: modelled, or refused
in one line naming node, attribute and value.  Nothing is ignored.

:data:`ATTRIBUTES` lists, per ONNX op type the importer handles, every attribute of its ONNX
schema (all opsets 11 to 21; ``tests/frontend/test_attributes.py`` walks the schemas and
fails on one missing here) and of the QONNX / Tessera custom ops.  Each is one of

* :data:`MODELLED` -- the handler reads it and models every value it accepts, refusing the
  others itself (``pads``, ``strides``, ``auto_pad``, Resize's coordinate transformation);
* an :class:`Only` -- the values the flow models (the schema default among them); any other
  value, present or implied by the opset's default, is refused here;
* :data:`NO_EFFECT` -- the attribute cannot change what the modelled form computes (e.g.
  Resize's ``cubic_coeff_a`` in nearest mode, Dropout's ``ratio`` at inference); the reason
  is stated beside it.

Two computations the handlers share also live here: explicit pads of ``auto_pad`` SAME_* (the
ONNX formula), and the source index of ONNX nearest Resize, which must be the copy
``floor(out / scale)`` the upsampling op models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ..errors import UnsupportedModelError


@dataclass(frozen=True)
class Only:
    """The values of an attribute the flow models."""

    values: tuple
    why: str = ""

    def allows(self, v) -> bool:
        v = tuple(v) if isinstance(v, list) else v
        if self.values == ("ones",):  # a per-dimension list, absent meaning all ones
            return v is None or (isinstance(v, tuple) and all(d == 1 for d in v))
        return v in self.values


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: The quantizers inside the recurrent cell ops (docs/rnn_export.md): each has a scale, zero
#: point, bit width and signed / narrow / rounding_mode attributes or inputs.
LSTM_QUANTIZERS = ("output", "cell_state", "input_acc", "forget_acc", "cell_acc", "output_acc", "input_sigmoid",
                   "forget_sigmoid", "cell_tanh", "output_sigmoid", "hidden_state_tanh")
GRU_QUANTIZERS = ("reset_acc", "update_acc", "new_acc", "reset_sigmoid", "update_sigmoid", "new_tanh", "output")
CONVLSTM_QUANTIZERS = ("input_acc", "forget_acc", "cell_acc", "output_acc", "input_sigmoid", "forget_sigmoid",
                       "cell_tanh", "output_sigmoid", "hidden_state_tanh", "cell_state", "output")

MODELLED = _Marker("MODELLED")
NO_EFFECT = _Marker("NO_EFFECT")
ONES = Only(("ones",), "every dilation 1")

_POOL = {"kernel_shape": MODELLED, "strides": MODELLED, "pads": MODELLED, "auto_pad": MODELLED,
         "ceil_mode": Only((0, None), "floor mode"),  # None: opsets before 10 (floor)
         "dilations": MODELLED}  # taps `dilation` apart (ops/maxpool.py: tap_windows; handlers/windows.py)
_CONV = {"kernel_shape": MODELLED, "strides": MODELLED, "pads": MODELLED, "auto_pad": MODELLED,
         "group": MODELLED, "dilations": MODELLED}  # a dilated kernel: the dense kernel with zeros (handlers/linear.py)


def _quantizer_attributes(names, suffixes) -> dict:
    return {f"{q}_{s}": MODELLED for q in names for s in suffixes}


ATTRIBUTES: dict[str, dict[str, object]] = {
    "Conv": _CONV,
    "ConvTranspose": {**_CONV, "group": Only((1,), "no grouped transposed convolution"), "output_padding": MODELLED,
                      "output_shape": Only((None,), "no output_shape")},
    "Gemm": {"alpha": MODELLED, "beta": MODELLED, "transA": Only((0,)), "transB": MODELLED},
    "MatMul": {},
    "Add": {},
    "Sub": {},
    "Max": {},
    "Min": {},
    "Mul": {},
    "Div": {},
    # inference: the running statistics (training_mode refused; momentum only acts in training)
    "BatchNormalization": {"epsilon": MODELLED, "momentum": NO_EFFECT, "training_mode": Only((0, None), "inference"),
                           "spatial": Only((1, None), "spatial statistics")},
    "Softmax": {"axis": MODELLED},
    "Concat": {"axis": MODELLED},
    "Relu": {},
    "Clip": {"min": MODELLED, "max": MODELLED},
    "Pad": {"mode": MODELLED, "pads": MODELLED, "value": MODELLED},  # a constant zero pad (handlers/windows.py: pad); opset 6-10 attributes, inputs from opset 11
    "LeakyRelu": {"alpha": MODELLED},
    "PRelu": {},
    "Sigmoid": {},
    "Tanh": {},
    "HardSigmoid": {"alpha": MODELLED, "beta": MODELLED},
    "HardSwish": {},
    "Elu": {"alpha": MODELLED},
    "Selu": {"alpha": MODELLED, "gamma": MODELLED},
    "Celu": {"alpha": MODELLED},
    "Softsign": {},
    "Softplus": {},
    "ThresholdedRelu": {"alpha": MODELLED},
    "AveragePool": {**_POOL, "ceil_mode": MODELLED, "count_include_pad": MODELLED},  # ceil: see handlers/windows.py
    "GlobalAveragePool": {},
    "ReduceMean": {"axes": MODELLED, "keepdims": MODELLED, "noop_with_empty_axes": MODELLED},
    "GlobalMaxPool": {},
    "MaxPool": {**_POOL, "ceil_mode": MODELLED, "storage_order": NO_EFFECT},  # it orders the Indices output, which is refused
    "DepthToSpace": {"blocksize": MODELLED, "mode": MODELLED},
    "Flatten": {"axis": MODELLED},
    "Reshape": {"allowzero": MODELLED},
    "Resize": {"mode": Only((b"nearest", "nearest", b"linear", "linear"), "nearest-neighbour or linear"),
               "coordinate_transformation_mode": MODELLED, "nearest_mode": MODELLED,
               "axes": Only((None,), "scales on every axis"), "antialias": MODELLED,  # linear: refused on downscales
               # no effect on nearest or linear resizing without tf_crop_and_resize (refused), per the spec
               # (exclude_outside: a linear neighbour outside the input is the edge either way):
               "cubic_coeff_a": NO_EFFECT, "exclude_outside": NO_EFFECT, "extrapolation_value": NO_EFFECT,
               "keep_aspect_ratio_policy": NO_EFFECT},  # the last one only with `sizes`
    "Transpose": {"perm": MODELLED},
    "Gather": {"axis": MODELLED},
    "Slice": {"starts": MODELLED, "ends": MODELLED, "axes": MODELLED},  # attributes before opset 10
    "Split": {"axis": MODELLED, "split": MODELLED, "num_outputs": MODELLED},
    "Identity": {},
    "Round": {},
    "Dropout": {"ratio": NO_EFFECT, "seed": NO_EFFECT},  # inference: the input passes (training_mode refused)
    "Constant": {"value": MODELLED, "value_float": MODELLED, "value_floats": MODELLED, "value_int": MODELLED,
                 "value_ints": MODELLED, "sparse_value": Only((None,), "dense constants"),
                 "value_string": Only((None,), "numeric constants"), "value_strings": Only((None,), "numeric constants")},
    # QONNX custom ops (qonnx's IntQuant / BipolarQuant attributes)
    "Quant": {"signed": MODELLED, "narrow": MODELLED, "rounding_mode": MODELLED},
    "IntQuant": {"signed": MODELLED, "narrow": MODELLED, "rounding_mode": MODELLED},  # qonnx 1.0's name of Quant
    "BipolarQuant": {},
    # ONNX's linear quantizers on integer codes (handlers/qcdq.py); saturate acts on float8 codes only
    "QuantizeLinear": {"axis": MODELLED, "saturate": NO_EFFECT, "output_dtype": MODELLED,
                       "block_size": Only((0, None), "per tensor or per axis, no blocks"),
                       "precision": Only((0, None), "the division in the scale's own type")},
    "DequantizeLinear": {"axis": MODELLED, "block_size": Only((0, None), "per tensor or per axis, no blocks"),
                         "output_dtype": Only((0, None), "the scale's type")},
    "Trunc": {"signed": MODELLED, "narrow": MODELLED, "rounding_mode": MODELLED},  # v2; see handlers/quantizers.py
    # recurrent cells (docs/rnn_export.md): each quantizer's attributes, and the cell's own
    "QuantLSTMCell": {**_quantizer_attributes(LSTM_QUANTIZERS, ("signed", "narrow", "narrow_range", "rounding_mode")),
                      "batch_first": MODELLED, "reverse_input": MODELLED, "cifg": MODELLED},
    "QuantGRUCell": {**_quantizer_attributes(GRU_QUANTIZERS, ("scale", "bit_width", "signed", "narrow", "rounding_mode")),
                     "batch_first": MODELLED, "reverse_input": MODELLED, "hidden_size": MODELLED, "gate_order": MODELLED},
    "QuantConvLSTMCell": {**_quantizer_attributes(CONVLSTM_QUANTIZERS, ("scale", "bit_width", "signed", "narrow",
                                                                        "rounding_mode")),
                          "batch_first": MODELLED, "hidden_channels": MODELLED, "kernel_size": MODELLED,
                          "gate_order": MODELLED, "bias_on": MODELLED, "steps": MODELLED},
}


def attribute_value(a: onnx.AttributeProto):
    v = onnx.helper.get_attribute_value(a)
    return v.decode() if isinstance(v, bytes) else v


def attribute(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    """The value of the node's attribute ``name`` (strings decoded), ``default`` when absent."""
    for a in node.attribute:
        if a.name == name:
            return attribute_value(a)
    return default


def required_attribute(node: onnx.NodeProto, name: str) -> Any:
    """The value of an attribute the node must have, refused in one line when absent."""
    value = attribute(node, name)
    if value is None:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute {name} is missing")
    return value


def check_attributes(node: onnx.NodeProto, opset: int) -> None:
    """Refuse, naming node, attribute and value, any attribute of ``node`` (present, or the
    default its opset implies) that the flow does not model."""
    rules = ATTRIBUTES.get(node.op_type)
    if rules is None:
        return  # no handler: the importer refuses the op itself
    present = {a.name: attribute_value(a) for a in node.attribute}
    for name, value in present.items():
        if name not in rules:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute {name}={_show(value)} is not "
                                        "modelled")
    for name, rule in rules.items():
        if not isinstance(rule, Only):
            continue
        value = present.get(name, schema_default(node, name, opset))
        if not rule.allows(value):
            supported = rule.why or ", ".join(_show(v) for v in rule.values)
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute {name}={_show(value)} is not "
                                        f"supported (only {supported})")


def schema_default(node: onnx.NodeProto, name: str, opset: int):
    """The default of attribute ``name`` in ``node``'s ONNX schema at ``opset`` (None without one)."""
    if node.domain not in ("", "ai.onnx"):
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, opset)
    except Exception:  # noqa: BLE001 - no schema at this opset: no default
        return None
    a = schema.attributes.get(name)
    if a is None or not a.default_value.name:
        return None
    return attribute_value(a.default_value)


def _show(v) -> str:
    if isinstance(v, onnx.TensorProto):
        return f"<tensor {list(v.dims)}>"
    return repr(v) if isinstance(v, str) else str(v)


def explicit_pads(node: onnx.NodeProto, auto_pad: str, spatial: tuple[int, ...], kernel: tuple[int, ...],
                  strides: tuple[int, ...], pads: tuple[int, ...] | None) -> tuple[int, ...]:
    """The begin-then-end pads an ``auto_pad`` mode means (ONNX: SAME_* keep ``ceil(in / s)``
    outputs, the odd pad at the end for SAME_UPPER, at the begin for SAME_LOWER; VALID: none).
    Explicit ``pads`` together with an auto_pad other than NOTSET are refused."""
    n = len(kernel)
    if auto_pad in ("NOTSET", ""):
        return tuple(pads) if pads is not None else (0,) * (2 * n)
    if pads is not None and any(pads):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute auto_pad={auto_pad} together "
                                    f"with pads={list(pads)}")
    if auto_pad == "VALID":
        return (0,) * (2 * n)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute auto_pad={auto_pad!r} is not an "
                                    "ONNX auto_pad mode")
    begin, end = [], []
    for i in range(n):
        total = (math.ceil(spatial[i] / strides[i]) - 1) * strides[i] + kernel[i] - spatial[i]
        if total < 0:
            # The ONNX formula asks for a negative pad here; onnxruntime clamps it for AveragePool and
            # rejects it for MaxPool, the ONNX reference evaluator fails: no one meaning to model.
            raise UnsupportedModelError(
                f"node '{node.name}' ({node.op_type}): attribute auto_pad={auto_pad} with kernel_shape="
                f"{list(kernel)}, strides={list(strides)} on spatial size {list(spatial)} asks for a negative pad "
                f"({total} on axis {i}), which ONNX executors disagree on")
        small, big = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else big)
        end.append(big if auto_pad == "SAME_UPPER" else small)
    return tuple(begin + end)


def nearest_coordinates(out_len: int, in_len: int, scale, transform: str, resized=None) -> list:
    """The input coordinate ONNX's nearest Resize computes for each output index (opset 11+
    formulas, in the spec's order of operations): in float64 for a float ``scale``, exactly
    for a :class:`~fractions.Fraction` (then ``resized`` too).  ``resized``: the resized
    length the formulas of ``align_corners`` and ``pytorch_half_pixel`` read (default: the
    output's, ``out_len``; ONNX's reference evaluator takes ``in_len * scale``, which differs
    for fractional scales)."""
    length = out_len if resized is None else resized
    one = scale / scale  # 1 in the arithmetic of ``scale``
    half = one / 2
    return [_original_coordinate(i * one, in_len * one, out_len * one, length * one, scale, transform, half)
            for i in range(out_len)]


def nearest_sources(out_len: int, in_len: int, scale, transform: str, nearest_mode: str,
                    resized=None) -> np.ndarray:
    """The input index ONNX nearest Resize reads for each output index: the
    :func:`nearest_coordinates` rounded by ``nearest_mode``, clipped to the input."""
    half = scale / scale / 2
    return np.asarray([min(max(_nearest(x, nearest_mode, half), 0), in_len - 1)
                       for x in nearest_coordinates(out_len, in_len, scale, transform, resized)], dtype=np.int64)


def _original_coordinate(i, in_len, out_len, length, scale, transform: str, half):
    if transform == "half_pixel":
        return (i + half) / scale - half
    if transform == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / (in_len * scale))  # ONNX's offset for non-integer output sizes
        return offset + (i + half) / scale - half
    if transform == "pytorch_half_pixel":
        return (i + half) / scale - half if length != 1 else 0 * i
    if transform == "align_corners":
        return i * (in_len - 1) / (length - 1) if length != 1 else 0 * i
    if transform == "asymmetric":
        return i / scale
    raise ValueError(transform)


def _nearest(x, mode: str, half) -> int:
    low = math.floor(x)
    if mode == "round_prefer_floor":
        return low if x - low <= half else low + 1
    if mode == "round_prefer_ceil":
        return low if x - low < half else low + 1
    if mode == "floor":
        return low
    if mode == "ceil":
        return math.ceil(x)
    raise ValueError(mode)


def ceil_mode_extra(spatial: tuple[int, ...], kernel: tuple[int, ...], strides: tuple[int, ...],
                    pads: tuple[int, ...]) -> tuple[int, ...]:
    """Per spatial axis, the end padding a pool with ``ceil_mode=1`` adds: ONNX's
    ``ceil((L - k) / s) + 1`` outputs (``L`` the padded size) against floor's."""
    n = len(kernel)
    return tuple(-(-(spatial[i] + pads[i] + pads[n + i] - kernel[i]) // strides[i]) * strides[i] + kernel[i]
                 - spatial[i] - pads[i] - pads[n + i] for i in range(n))


__all__ = ["ATTRIBUTES", "CONVLSTM_QUANTIZERS", "GRU_QUANTIZERS", "LSTM_QUANTIZERS", "MODELLED", "NO_EFFECT", "Only",
           "attribute", "attribute_value", "required_attribute", "ceil_mode_extra", "check_attributes",
           "explicit_pads",
           "nearest_coordinates", "nearest_sources", "schema_default"]
