"""QONNX (and QCDQ) -> typed IR.

Cleans the model with qonnx's own transformations, then walks it once: ``Quant`` on
constants becomes exact integer weight codes, ``Quant`` on activations becomes a
``requant`` node, and the few layer ops we support map one to one.  Anything else is
refused with the op type and node name.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import UnsupportedModelError
from ..ir.graph import Graph, Node
from ..ir.types import MAX_ELEMENTS, dyadic_codes
from ..ops import (OPS, Trait, avgpool, conv, convtranspose, dense, depthtospace, flatten, globalavgpool, leakyrelu, lut, maxpool, merge,
                   relu, transpose, upsample)
from ..ops.base import OpDef
from .averages import Averages
from .clips import Clips, compose_clip
from .attributes import ceil_mode_extra, check_attributes, explicit_pads, nearest_sources, schema_default
from .real import Affine, Padded, RealOps, input_datatype, normalize_domains, parse_input_type, weight_codes
from .real import Const as _Const
from .real import node_attr as _attr
from .recurrent import RECURRENT_OPS, import_convlstm, import_gru, import_lstm

ALIAS_OPS = {"Identity", "Dropout"}
QCDQ_OPS = {"QuantizeLinear", "DequantizeLinear"}
_NAME_TAG = "tessera-original-name:"


@dataclass
class _Pending:
    """Output of a nonlinearity waiting for its Quant (they become one lookup table)."""

    node: str


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    """The value of a Constant node (``value``, ``value_float(s)``, ``value_int(s)``), float64."""
    a = node.attribute[0]
    if a.name == "value":
        return numpy_helper.to_array(a.t).astype(np.float64)
    return np.asarray(onnx.helper.get_attribute_value(a), dtype=np.float64)


def _inference_dropout(imp: "_Importer", node: onnx.NodeProto) -> None:
    """Dropout at inference passes its input: refuse a training_mode that is not a constant
    False, and a mask output that something reads."""
    if len(node.input) > 2 and node.input[2]:
        mode = imp.env.get(node.input[2])
        if not isinstance(mode, _Const) or np.any(mode.value):
            raise UnsupportedModelError(f"node '{node.name}' (Dropout): input training_mode must be a constant False")
    if len(node.output) > 1 and node.output[1] and any(node.output[1] in u.input for u in imp.model.graph.node):
        raise UnsupportedModelError(f"node '{node.name}' (Dropout): the mask output is not supported")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else ""


def clean(model: onnx.ModelProto) -> onnx.ModelProto:
    """qonnx clean-up (shape inference, constant folding, unique names); QCDQ -> Quant first."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.cleanup import cleanup_model

    model = onnx.ModelProto.FromString(model.SerializeToString())
    if any(n.op_type in RECURRENT_OPS for n in model.graph.node):
        # qonnx cannot infer the shapes of the recurrent custom ops and refuses the graph;
        # their graphs (brevitas' / tessera's exports) are read as written.
        return model
    for node in model.graph.node:  # keep the user's node names for messages (qonnx renames nodes)
        if node.name:
            node.doc_string = _NAME_TAG + node.name
    wrapper = ModelWrapper(model)
    try:
        wrapper = cleanup_model(wrapper)
        if any(n.op_type in QCDQ_OPS for n in wrapper.model.graph.node):
            from qonnx.transformation.qcdq_to_qonnx import QCDQToQuant

            # QCDQToQuant needs the tensor types that the clean-up's shape inference adds.
            wrapper = cleanup_model(wrapper.transform(QCDQToQuant()))
    except Exception as exc:  # qonnx raises many kinds; report the first line
        raise UnsupportedModelError(f"qonnx clean-up failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    cleaned = wrapper.model
    originals = [n.doc_string[len(_NAME_TAG):] for n in cleaned.graph.node if n.doc_string.startswith(_NAME_TAG)]
    if len(set(originals)) == len(originals):
        for n in cleaned.graph.node:
            if n.doc_string.startswith(_NAME_TAG):
                n.name, n.doc_string = n.doc_string[len(_NAME_TAG):], ""
    return cleaned


class _Importer(Averages, Clips, RealOps):
    def __init__(self, model: onnx.ModelProto, input_datatype: str | None = None):
        self.model = model
        self.input_datatype = input_datatype
        #: float operations on the input before its Quant: real = mul * x + add
        self.pre = (Fraction(1), Fraction(0))
        #: a Clip / ReLU of that preprocessed input: real bounds (None: unbounded)
        self.pre_clip: tuple = (None, None)
        #: quantized constants with float scales: Quant output -> (integer codes, scale per element)
        self.qconsts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        g = model.graph
        inits = {i.name for i in g.initializer}
        real_inputs = [i for i in g.input if i.name not in inits]
        producers = {o: n for n in g.node for o in n.output}
        first = producers.get(g.output[0].name) if g.output else None
        recurrent_out = first is not None and first.op_type in RECURRENT_OPS
        if len(real_inputs) != 1 or (len(g.output) != 1 and not recurrent_out):
            raise UnsupportedModelError(
                f"the model has {len(real_inputs)} inputs and {len(g.output)} outputs; one of each is supported"
            )
        #: a recurrent cell's graph may also output its last states (h, c): the compiled
        #: design outputs the first graph output; nodes that only feed the others are skipped
        self.dropped_outputs = [o.name for o in g.output[1:]]
        self.live = _ancestors(g, g.output[0].name)
        self.onnx_input = real_inputs[0]
        self.env: dict[str, Any] = {i.name: _Const(numpy_helper.to_array(i).astype(np.float64)) for i in g.initializer}
        dims = [d.dim_value if d.HasField("dim_value") else None for d in self.onnx_input.type.tensor_type.shape.dim]
        if not dims or any(d is None or d <= 0 for d in dims[1:]):
            raise UnsupportedModelError(f"input '{self.onnx_input.name}' needs a static shape, got {dims}")
        if math.prod(dims[1:]) > MAX_ELEMENTS:
            raise UnsupportedModelError(f"input '{self.onnx_input.name}' has {math.prod(dims[1:]):,} elements per sample "
                                        f"(shape {dims[1:]}), more than the {MAX_ELEMENTS:,} a design can index")
        self.input_shape = tuple(int(d) for d in dims[1:])
        self.graph = Graph(input="", output="", onnx_input=self.onnx_input.name, onnx_output=g.output[0].name)
        self.pending_input = self.onnx_input.name
        # Quant node name -> (op, inputs, attrs factory): ops fused with the Quant that follows them
        self.deferred: dict[str, tuple] = {}

    # -- helpers -------------------------------------------------------------------------
    attr = staticmethod(_attr)

    def const_or_none(self, name: str, node: onnx.NodeProto) -> np.ndarray | None:
        """A constant input's value, None for an absent (empty-named) one; refuses activations."""
        if not name:
            return None
        return self.const(name, node, f"input '{name}'")

    def const(self, name: str, node: onnx.NodeProto, what: str) -> np.ndarray:
        v = self.env.get(name)
        if not isinstance(v, _Const):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {what} must be a constant")
        return v.value

    def const_value(self, name: str) -> np.ndarray | None:
        v = self.env.get(name)
        return v.value if isinstance(v, _Const) else None

    def value(self, name: str, node: onnx.NodeProto) -> str:
        if name == self.pending_input and (self.input_datatype or self.input_type):
            self.typed_input(name, node)
        if name == self.pending_input:
            raise UnsupportedModelError(
                f"graph input '{name}' feeds {node.op_type} node '{node.name}' without a Quant: "
                "quantize the input (e.g. brevitas QuantIdentity) or declare its type (--input-type fixed<16,6>)"
            )
        v = self.env.get(name)
        if isinstance(v, Affine):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}) reads the real-valued output of '{v.source}' "
                                        "(scaled by real constants) that no Quant requantizes")
        if not isinstance(v, str):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): input '{name}' must be an activation")
        return v

    def add(self, node: onnx.NodeProto, op: OpDef, inputs: list[str], attrs: Any, keeps_scale: bool = False,
            reads_real: bool = False) -> None:
        """Append ``op`` on ``inputs``.  Codes with a real scale may feed a linear op, an op that
        only selects codes (the scale carried on: ``keeps_scale``), or an op whose output the
        caller puts in flight with its real meaning (``reads_real``)."""
        out = node.output[0]
        scaled = [v for v in inputs if v in self.graph.scales]
        if scaled and Trait.LINEAR not in op.traits and not reads_real:
            if (Trait.CODE_SELECT not in op.traits and not keeps_scale) or len(inputs) != 1:
                raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}) reads codes with a float scale or zero "
                                            f"point (from '{self.graph.origin.get(scaled[0], scaled[0])}'); not supported")
            self.graph.scales[out] = self.graph.scales[scaled[0]]
        self.graph.nodes.append(Node(node.name or out, op.name, inputs, out, attrs))
        self.graph.origin[out] = node.name
        self.env[out] = out

    # -- ops -----------------------------------------------------------------------------
    def _linear(self, node, x: str, w: np.ndarray, b: np.ndarray | None, op_module, orient=lambda a: a, out_axis=0,
                **extra) -> None:
        """A linear op (dense / conv / convtranspose module): weights and bias as exact codes
        (float-scaled weights or inputs: on integer codes, the real constants in flight)."""
        if self.float_weights(node.input[1], x):
            self.real_linear(node, x, node.input[1], w, b, op_module, orient, out_axis, **extra)
            return
        wcodes, wtype = weight_codes(w, f"node '{node.name}' weights")
        bcodes, btype = weight_codes(b, f"node '{node.name}' bias") if b is not None else (None, None)
        self.add(node, op_module.OP, [x], op_module.Attrs(wcodes, wtype, bcodes, btype, **extra))

    def on_Gemm(self, node: onnx.NodeProto) -> None:
        if _attr(node, "transA", 0) or _attr(node, "alpha", 1.0) != 1.0 or _attr(node, "beta", 1.0) != 1.0:
            raise UnsupportedModelError(f"node '{node.name}' (Gemm): only alpha=beta=1, transA=0 is supported")
        w = self.const(node.input[1], node, "the weight")
        orient = (lambda a: a.T) if _attr(node, "transB", 0) else (lambda a: a)
        b = self.const(node.input[2], node, "the bias").reshape(-1) if len(node.input) > 2 and node.input[2] else None
        self._linear(node, self.value(node.input[0], node), orient(w), b, dense, orient, out_axis=1)

    def on_MatMul(self, node: onnx.NodeProto) -> None:
        w = self.const(node.input[1], node, "the weight (second input)")
        if w.ndim != 2:
            raise UnsupportedModelError(f"node '{node.name}' (MatMul): weight must be 2D, got {w.shape}")
        self._linear(node, self.value(node.input[0], node), w, None, dense, out_axis=1)

    def axis(self, node: onnx.NodeProto, value_name: str, default=None) -> int | None:
        """The node's ``axis`` attribute, negative values counted from the end of the input's
        rank (batch included); None when it cannot be resolved."""
        axis = _attr(node, "axis", default)
        if axis is None or axis >= 0:
            return axis
        rank = len(self._shape_of(value_name)) + 1
        return axis + rank if rank > 1 else None

    def on_Concat(self, node: onnx.NodeProto) -> None:
        if self.axis(node, node.input[0]) != 1 or len(node.input) != 2:
            raise UnsupportedModelError(f"node '{node.name}' (Concat): only two inputs along channels (axis 1) are "
                                        f"supported, got axis={_attr(node, 'axis')} and {len(node.input)} inputs")
        self.add(node, merge.CONCAT, [self.value(v, node) for v in node.input], merge.Attrs())

    def on_Add(self, node: onnx.NodeProto) -> None:
        a, c = node.input
        if any(isinstance(self.env.get(v), Affine) or v == self.pending_input for v in node.input) and \
                self.constant_arith(node):
            return
        if self.real_add(node):
            return
        if not any(isinstance(self.env.get(v), _Const) for v in node.input):
            self.add(node, merge.ADD, [self.value(a, node), self.value(c, node)], merge.Attrs())
            return
        if isinstance(self.env.get(a), _Const):
            a, c = c, a
        src = self.value(a, node)
        b = self.const(c, node, "one operand")
        prod = self.graph.producer(src)
        layer = OPS[prod.op] if prod is not None else None
        if layer is None or Trait.LINEAR not in layer.traits or prod.attrs.bias is not None:
            raise UnsupportedModelError(f"node '{node.name}' (Add): only a constant bias after MatMul/Conv is supported")
        bcodes, btype = weight_codes(b.reshape(-1), f"node '{node.name}' bias")
        if bcodes.size != layer.bias_size(prod.attrs):
            raise UnsupportedModelError(f"node '{node.name}' (Add): bias of shape {b.shape} does not match the layer")
        if sum(a in n.input for n in self.model.graph.node) != 1:
            raise UnsupportedModelError(f"node '{node.name}' (Add): the layer output '{a}' is also used before its bias")
        prod.attrs = layer.with_bias(prod.attrs, bcodes, btype)
        prod.output = node.output[0]  # the Add folds into the layer
        self.graph.origin[prod.output] = node.name
        self.env[node.output[0]] = node.output[0]

    def window(self, node: onnx.NodeProto, kernel: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(strides, explicit pads) of a window op: ``auto_pad`` resolved with the ONNX formula
        on the input's spatial shape, ``kernel_shape`` checked against the weights."""
        n = len(kernel)
        given = _attr(node, "kernel_shape")
        if given is not None and tuple(int(k) for k in given) != tuple(kernel):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute kernel_shape={list(given)} "
                                        f"does not match the weights' {list(kernel)}")
        strides = tuple(int(v) for v in _attr(node, "strides", [1] * n))
        padded = self.env.get(node.input[0])
        if isinstance(padded, Padded):  # a zero Pad before: its pads join the op's own
            self.env[node.input[0]] = padded.value
            own = self.window(node, kernel)[1]
            return strides, tuple(a + b for a, b in zip(own, padded.pads))
        pads = _attr(node, "pads")
        auto_pad = str(_attr(node, "auto_pad", "NOTSET"))
        spatial = self._shape_of(node.input[0])[1:] if auto_pad.startswith("SAME") else (0,) * n
        if auto_pad.startswith("SAME") and len(spatial) != n:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute auto_pad={auto_pad} needs the "
                                        "input's shape, which is unknown")
        return strides, explicit_pads(node, auto_pad, tuple(spatial), tuple(kernel), strides,
                                      None if pads is None else tuple(int(p) for p in pads))

    def on_Pad(self, node: onnx.NodeProto) -> None:
        """A constant zero Pad of the spatial axes read only by a Conv or an AveragePool: its
        pads join theirs (a zero is real 0 on codes without a zero point)."""
        if self.opset < 11:
            mode, pads, value = _attr(node, "mode", "constant"), _attr(node, "pads"), _attr(node, "value", 0.0)
        else:
            mode, pads = _attr(node, "mode", "constant"), self.const(node.input[1], node, "pads")
            value = self.const_or_none(node.input[2], node) if len(node.input) > 2 else None
            if len(node.input) > 3 and node.input[3]:
                raise UnsupportedModelError(f"node '{node.name}' (Pad): the axes input is not supported")
        pads = [int(p) for p in np.asarray(pads).ravel()]
        value = 0.0 if value is None else float(np.asarray(value).ravel()[0])
        users = [u for u in self.model.graph.node if node.output[0] in u.input]
        rank = len(pads) // 2
        if mode != "constant" or value != 0 or min(pads, default=0) < 0 or rank < 3 or any(pads[i] for i in (0, 1, rank, rank + 1)):
            raise UnsupportedModelError(f"node '{node.name}' (Pad): mode={mode} value={value} pads={pads}; only a constant "
                                        "zero pad of the spatial axes is supported")
        if len(users) != 1 or users[0].op_type not in ("Conv", "AveragePool"):
            raise UnsupportedModelError(f"node '{node.name}' (Pad): only a Pad read by exactly one Conv or AveragePool is "
                                        "supported (its pads join theirs)")
        x = self.value(node.input[0], node)
        if x in self.graph.scales and any(z != 0 for z in self.graph.scales[x].zero):
            raise UnsupportedModelError(f"node '{node.name}' (Pad): padding codes with a zero point is not supported "
                                        "(real 0 is not code 0)")
        self.env[node.output[0]] = Padded(x, tuple(pads[2:rank] + pads[rank + 2:]), node.name)

    def on_Conv(self, node: onnx.NodeProto) -> None:
        w = self.const(node.input[1], node, "the weight")
        n = w.ndim - 2
        if n not in (1, 2, 3):
            raise UnsupportedModelError(f"node '{node.name}' (Conv): {n}D convolution is not supported (1D, 2D and 3D are)")
        strides, pads = self.window(node, tuple(w.shape[2:]))
        b = self.const(node.input[2], node, "the bias") if len(node.input) > 2 and node.input[2] else None
        self._linear(node, self.value(node.input[0], node), w, b, conv, strides=strides, pads=pads,
                     group=int(_attr(node, "group", 1)))

    def on_ConvTranspose(self, node: onnx.NodeProto) -> None:
        w = self.const(node.input[1], node, "the weight")
        n = w.ndim - 2
        if n not in (2, 3):
            raise UnsupportedModelError(f"node '{node.name}' (ConvTranspose): only 2D/3D is supported")
        if str(_attr(node, "auto_pad", "NOTSET")).startswith("SAME"):
            raise UnsupportedModelError(f"node '{node.name}' (ConvTranspose): attribute auto_pad="
                                        f"{_attr(node, 'auto_pad')} is not supported (only NOTSET, VALID)")
        if any(_attr(node, "output_padding", [0] * n)):
            raise UnsupportedModelError(f"node '{node.name}' (ConvTranspose): attribute output_padding="
                                        f"{list(_attr(node, 'output_padding'))} is not supported (only zeros)")
        strides, pads = self.window(node, tuple(w.shape[2:]))
        b = self.const(node.input[2], node, "the bias") if len(node.input) > 2 and node.input[2] else None
        self._linear(node, self.value(node.input[0], node), w, b, convtranspose, out_axis=1, strides=strides, pads=pads)

    def defer_to_quant(self, node: onnx.NodeProto, op: OpDef, make, why: str) -> None:
        """``node`` must feed exactly one Quant (else refused: ``why``); the pair becomes one
        ``op`` node, its attributes ``make(the Quant's attrs)``, built when the Quant is read."""
        users = [u for u in self.model.graph.node if node.output[0] in u.input]
        if len(users) != 1 or users[0].op_type not in ("Quant", "Trunc"):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {why}")
        self.deferred[users[0].name] = (op, [self.value(node.input[0], node)], make)
        self.env[node.output[0]] = _Pending(node.name)

    def _lut(self, node: onnx.NodeProto, function: str) -> None:
        """Sigmoid/Tanh must feed exactly one Quant: the pair becomes one lookup table."""
        self.defer_to_quant(node, lut.OP, lambda q: lut.Attrs(function, q),
                            "a nonlinearity must be followed by a Quant to be exact")

    def on_QuantLSTMCell(self, node: onnx.NodeProto) -> None:
        import_lstm(self, node)

    def on_QuantGRUCell(self, node: onnx.NodeProto) -> None:
        import_gru(self, node)

    def on_QuantConvLSTMCell(self, node: onnx.NodeProto) -> None:
        import_convlstm(self, node)

    def on_Transpose(self, node: onnx.NodeProto) -> None:
        """Swapping the two axes after the batch (e.g. frames (N, T, C, H, W) <-> volume
        (N, C, T, H, W) around a per-frame 1x1x1 Conv): a relabelling, no data movement."""
        perm = list(_attr(node, "perm", []))
        if len(perm) < 3 or perm[:3] != [0, 2, 1] or perm[3:] != list(range(3, len(perm))):
            raise UnsupportedModelError(f"node '{node.name}' (Transpose): only swapping axes 1 and 2 is supported, got {perm}")
        self.add(node, transpose.OP, [self.value(node.input[0], node)], transpose.Attrs())

    def on_DepthToSpace(self, node: onnx.NodeProto) -> None:
        """Channel blocks onto the spatial grid (PixelShuffle): codes moved, not changed."""
        x = self.value(node.input[0], node)
        mode = _attr(node, "mode", "DCR")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode not in ("DCR", "CRD"):
            raise UnsupportedModelError(f"node '{node.name}' (DepthToSpace): attribute mode={mode} is not DCR or CRD")
        scale = self.graph.scales.get(x)
        if scale is not None and (len(scale.scale) > 1 or len(scale.zero) > 1):
            raise UnsupportedModelError(f"node '{node.name}' (DepthToSpace): on codes with per-channel scales (the "
                                        "channels would be moved apart from their scales); not supported")
        self.add(node, depthtospace.OP, [x], depthtospace.Attrs(int(_attr(node, "blocksize")), mode == "CRD"))

    def on_Gather(self, node: onnx.NodeProto) -> None:
        """``y[:, t]`` of a recurrent op's output sequence, for the last processed step only:
        the op then outputs its last hidden state (e.g. a classifier on the final state)."""
        src = self.value(node.input[0], node)
        prod = self.graph.producer(src)
        idx = self.const(node.input[1], node, "the index")
        seq = prod is not None and getattr(prod.attrs, "return_sequences", False)
        steps = self.graph.values[self.graph.input].shape[0] if seq else 0
        if not seq or self.axis(node, node.input[0], 0) != 1 or idx.size != 1 or int(idx.ravel()[0]) not in (-1, steps - 1):
            raise UnsupportedModelError(
                f"node '{node.name}' (Gather): only the last step (axis 1, index -1) of a recurrent output is supported")
        if sum(src in n.input for n in self.model.graph.node if n.name in self.live) != 1:
            raise UnsupportedModelError(f"node '{node.name}' (Gather): the sequence '{src}' is also used elsewhere")
        prod.attrs = dataclasses.replace(prod.attrs, return_sequences=False)
        prod.output = node.output[0]
        self.graph.origin[prod.output] = node.name
        self.env[node.output[0]] = node.output[0]

    def on_Sigmoid(self, node: onnx.NodeProto) -> None:
        self._lut(node, "sigmoid")

    def on_Tanh(self, node: onnx.NodeProto) -> None:
        self._lut(node, "tanh")

    def on_Resize(self, node: onnx.NodeProto) -> None:
        """Nearest upsampling by integer factors: the ONNX index mapping of the node's
        coordinate transformation and nearest mode must be the copy ``floor(out / scale)``."""
        if self.opset < 11:
            raise UnsupportedModelError(f"node '{node.name}' (Resize): opset {self.opset} Resize is not supported "
                                        "(opset 11 or newer)")
        x = self.value(node.input[0], node)
        if len(node.input) > 3 and node.input[3]:
            raise UnsupportedModelError(f"node '{node.name}' (Resize): input sizes is not supported (give scales)")
        scales = self.const(node.input[2], node, "the scales") if len(node.input) > 2 and node.input[2] else None
        if scales is None or scales.size < 4 or np.any(scales[:2] != 1) or np.any(scales != np.round(scales)) or np.any(scales < 1):
            raise UnsupportedModelError(f"node '{node.name}' (Resize): needs constant integer scales >= 1 on spatial dims only")
        factors = tuple(int(v) for v in scales[2:])
        transform = str(_attr(node, "coordinate_transformation_mode", schema_default(node, "coordinate_transformation_mode",
                                                                                     self.opset)))
        nearest = str(_attr(node, "nearest_mode", schema_default(node, "nearest_mode", self.opset)))
        spatial = self._shape_of(node.input[0])[1:]
        where = f"attributes coordinate_transformation_mode={transform!r}, nearest_mode={nearest!r}"
        if len(spatial) != len(factors) or not all(spatial):
            raise UnsupportedModelError(f"node '{node.name}' (Resize): the input's shape is unknown, so {where} cannot "
                                        "be checked")
        for d, (n_in, f) in enumerate(zip(spatial, factors)):
            try:
                src = nearest_sources(n_in * f, n_in, float(f), transform, nearest)
            except ValueError:
                raise UnsupportedModelError(f"node '{node.name}' (Resize): {where} are not supported") from None
            want = np.arange(n_in * f) // f
            if not np.array_equal(src, want):
                j = int(np.flatnonzero(src != want)[0])
                raise UnsupportedModelError(
                    f"node '{node.name}' (Resize): {where} read input {int(src[j])} for output {j} of the x{f} "
                    f"upsampling of spatial dim {d}; only the nearest copy floor(output / {f}) = {int(want[j])} is "
                    "modelled")
        self.add(node, upsample.OP, [x], upsample.Attrs(factors))

    def on_Relu(self, node: onnx.NodeProto) -> None:
        if self.real_relu(node):
            return
        if node.input[0] == self.pending_input:  # max(0, .) of the input before its Quant: a bound of it
            self.pre_clip = compose_clip(self.pre_clip, (Fraction(0), None))
            self.pending_input = node.output[0]
            return
        x = self.value(node.input[0], node)
        if x in self.graph.scales and any(z != 0 for z in self.graph.scales[x].zero):
            raise UnsupportedModelError(f"node '{node.name}' (Relu): on codes with a non-zero zero point is not supported")
        self.add(node, relu.OP, [x], relu.Attrs(), keeps_scale=True)  # max(0, (q - 0) * s) = max(0, q) * s

    def on_MaxPool(self, node: onnx.NodeProto) -> None:
        k = tuple(int(v) for v in _attr(node, "kernel_shape"))
        n = len(k)
        if n not in (1, 2, 3):
            raise UnsupportedModelError(f"node '{node.name}' (MaxPool): {n}D pooling is not supported (1D, 2D and 3D are)")
        if len(node.output) > 1 and node.output[1] and any(node.output[1] in u.input for u in self.model.graph.node):
            raise UnsupportedModelError(f"node '{node.name}' (MaxPool): the Indices output is not supported")
        s, pads = self.window(node, k)
        x = self.value(node.input[0], node)
        if int(_attr(node, "ceil_mode", 0)):
            # ONNX's ceil(...) + 1 outputs: the last windows reach past the end, into padding
            # that takes no part (a window entirely in it is refused by the op)
            extra = ceil_mode_extra(self.type_of(x).shape[1:], k, s, pads)
            pads = tuple(pads[:n]) + tuple(p + e for p, e in zip(pads[n:], extra))
        self.add(node, maxpool.OP, [x], maxpool.Attrs(k, s, tuple(pads) if any(pads) else ()))

    def on_GlobalMaxPool(self, node: onnx.NodeProto) -> None:
        """The maximum over the spatial axes: a max pool whose window is the whole input."""
        x = self.value(node.input[0], node)
        spatial = tuple(self.type_of(x).shape[1:])
        if len(spatial) not in (2, 3):
            raise UnsupportedModelError(f"node '{node.name}' (GlobalMaxPool): on a {len(spatial)}D input; 2D and 3D are "
                                        "supported")
        self.add(node, maxpool.OP, [x], maxpool.Attrs(spatial, spatial))

    def on_LeakyRelu(self, node: onnx.NodeProto) -> None:
        alpha = np.float64(np.float32(_attr(node, "alpha", 0.01)))
        try:
            code, frac = dyadic_codes(np.array([alpha]))
        except ValueError:
            raise UnsupportedModelError(f"node '{node.name}' (LeakyRelu): slope {alpha} is not a fixed-point number") from None
        self.add(node, leakyrelu.OP, [self.value(node.input[0], node)], leakyrelu.Attrs(int(code[0]), int(frac)))

    def on_Flatten(self, node: onnx.NodeProto) -> None:
        if node.input[0] == self.pending_input and self.axis(node, node.input[0], 1) == 1:
            self.bypass_input(node, (math.prod(self.input_shape),))
            return
        if self.axis(node, node.input[0], 1) != 1:
            raise UnsupportedModelError(f"node '{node.name}' (Flatten): attribute axis={_attr(node, 'axis')} is not "
                                        "supported (only 1)")
        self.add(node, flatten.OP, [self.value(node.input[0], node)], flatten.Attrs())

    def on_Reshape(self, node: onnx.NodeProto) -> None:
        shape = self.const(node.input[1], node, "the target shape").astype(np.int64).ravel()
        zero_copies = not _attr(node, "allowzero", 0)  # allowzero=0: a 0 copies the input's dimension
        if len(shape) != 2 or shape[1] not in (-1, int(np.prod(self._shape_of(node.input[0])))) or \
                not (shape[0] in (-1, 1) or (shape[0] == 0 and zero_copies)):
            raise UnsupportedModelError(f"node '{node.name}' (Reshape): only flattening to (N, -1) is supported, got "
                                        f"{shape.tolist()} (allowzero={_attr(node, 'allowzero', 0)})")
        if node.input[0] == self.pending_input:
            self.bypass_input(node, (math.prod(self.input_shape),))
            return
        self.add(node, flatten.OP, [self.value(node.input[0], node)], flatten.Attrs())

    def _shape_of(self, name: str) -> tuple[int, ...]:
        for vi in list(self.model.graph.value_info) + list(self.model.graph.input):
            if vi.name == name:
                return tuple(d.dim_value for d in vi.type.tensor_type.shape.dim[1:])
        return ()

    def run(self) -> Graph:
        for node in self.model.graph.node:
            if node.name not in self.live:
                continue
            check_attributes(node, self.opset)
            if node.op_type == "Constant":
                self.env[node.output[0]] = _Const(_constant_value(node))
                continue
            if node.op_type == "Dropout":
                _inference_dropout(self, node)
            if node.op_type in ALIAS_OPS:
                self.env[node.output[0]] = self.env.get(node.input[0])
                continue
            handler = getattr(self, f"on_{node.op_type}", None)
            if handler is None:
                raise UnsupportedModelError(f"unsupported op '{node.op_type}' (node '{node.name}')")
            try:
                handler(node)
            except (ValueError, IndexError, KeyError, TypeError, ArithmeticError) as exc:
                # malformed inputs that slipped past the checks above: still one line, naming the node
                raise UnsupportedModelError(
                    f"node '{node.name}' ({node.op_type}) is malformed: {type(exc).__name__}: {_first_line(exc)}") from None
        if self.pending_input is not None:
            raise UnsupportedModelError(f"graph input '{self.pending_input}' is never quantized (no Quant node reads it)")
        out = self.env.get(self.model.graph.output[0].name)
        if isinstance(out, Affine):
            out = self.affine_output(out)
        if not isinstance(out, str):
            raise UnsupportedModelError(f"graph output '{self.model.graph.output[0].name}' is not computed from the input")
        self.graph.output = out
        return self.graph


def _ancestors(g: onnx.GraphProto, value: str) -> set[str]:
    """Names of the nodes that ``value`` depends on."""
    producers = {o: n for n in g.node for o in n.output}
    live, todo = set(), [value]
    while todo:
        n = producers.get(todo.pop())
        if n is not None and n.name not in live:
            live.add(n.name)
            todo.extend(i for i in n.input if i)
    return live


def import_model(model: onnx.ModelProto, input_type: str | None = None) -> Graph:
    """Cleaned QONNX/QCDQ model -> untyped-node IR (input typed; run passes to type the rest).
    ``input_type``: the declared type of a float input that no Quant reads."""
    model = normalize_domains(model)
    imp = _Importer(clean(model), input_datatype(model))
    imp.input_type = parse_input_type(input_type) if input_type else None
    imp.graph.input_type = input_type
    return imp.run()
