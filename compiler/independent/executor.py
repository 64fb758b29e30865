"""The independent executor: the user's own ONNX file, run by code that shares nothing with
Tessera's reading of it.

``verify`` proves that the C-simulation computes what the exact reference computes; both
come from the IR the frontend builds.  This module closes the loop to the model itself: the
user's original file runs in ONNX's own reference evaluator (``onnx.reference``), with
qonnx's functions for the QONNX custom ops (``Quant`` / ``IntQuant``, ``BipolarQuant``, ``Trunc``,
``MultiThreshold``), and for the recurrent cells no ONNX runtime executes (``QuantLSTMCell``,
``QuantGRUCell``, ``QuantConvLSTMCell``) the float64 cell executor of :mod:`.cells`,
in float64 (initializers, inputs and every float tensor upcast), and its output must equal the
exact reference's on every sample.

float64 decides every value of a power-of-two quantized model exactly except where the
model itself divides or calls a transcendental function (an average, a sigmoid): a Quant
after such a value can round either way when the exact value sits on a rounding boundary
float64 cannot represent.  A differing sample is accepted as such only when it is *proven*
so: at the first node whose output differs (compared node by node with the exact values),
it is a Quant and every differing element's pre-rounding value lies within
:data:`BOUNDARY_DISTANCE` (relative) of a rounding boundary of its mode.  Those outputs are
counted and listed, never silently accepted; every other difference fails ``verify``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ..errors import first_line
from ..frontend.load import RECURRENT_OPS
from ..ir.graph import pack
from ..reference.interpret import run_ir
from ..verdict import Difference, Execution, IndependentReport, NodeDifference, UndecidableSample
from .cells import cell_ops

#: A Quant's pre-rounding value this close (relative) to a rounding boundary of its mode is
#: one float64 may misplace: it rounds each division or transcendental once (2**-53
#: relative), far below this bound; exact values further away are decided alike.
BOUNDARY_DISTANCE = 2.0**-40
#: The domains of the QONNX custom ops (qonnx's own, and the names older exports use).
QONNX_DOMAINS = ("qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas")
EXECUTOR = "the user's model (ONNX reference evaluator, float64, qonnx's QONNX ops)"
#: The executor's name where the file has recurrent cells (run by :mod:`.cells`).
CELL_EXECUTOR = "the user's model (ONNX reference evaluator, float64, qonnx's QONNX ops, the cell executor)"
#: Differences listed in the report at most; differing samples diagnosed node by node at most.
LISTED = 10
DIAGNOSED = 50
#: Rounding modes that round to nearest (their boundaries are the half-integers).
NEAREST = ("ROUND", "HALF_EVEN", "HALF_UP", "HALF_DOWN")


class IndependentError(Exception):
    """The user's file could not be run by the independent executor."""


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def qonnx_ops() -> list[type]:
    """ONNX reference-evaluator ops for the QONNX custom ops of every domain, each calling
    qonnx's own function (no code of Tessera's semantics), and the recurrent cells
    (:func:`.cells.cell_ops`)."""
    from onnx.reference.op_run import OpRun
    from qonnx.custom_op.general.bipolar_quant import binary_quant
    from qonnx.custom_op.general.multithreshold import multithreshold
    from qonnx.custom_op.general.quant import quant
    from qonnx.custom_op.general.trunc import trunc_v1, trunc_v2

    def run_quant(self, x, scale, zeropt, bitwidth, signed=1, narrow=0, rounding_mode="ROUND"):
        return (quant(x, scale, zeropt, bitwidth, bool(signed), bool(narrow), _text(rounding_mode)),)

    def run_bipolar(self, x, scale):
        return (binary_quant(x, scale),)

    def run_trunc(self, x, scale, zeropt, in_bits, *rest, rounding_mode="FLOOR", narrow=0, signed=1):
        if len(rest) == 1:  # v1: (x, scale, zeropt, input_bit_width, output_bit_width)
            return (trunc_v1(x, scale, zeropt, in_bits, rest[0], _text(rounding_mode)),)
        out_scale, out_bits = rest  # v2: ..., output_scale, output_bit_width
        return (trunc_v2(x, scale, zeropt, in_bits, narrow, signed, out_scale, out_bits, _text(rounding_mode)),)

    def run_multithreshold(self, x, thresholds, out_dtype="", out_scale=1.0, out_bias=0.0, data_layout="NCHW"):
        y = multithreshold(x, thresholds, out_scale, out_bias, channels_last=_text(data_layout).endswith("C"))
        return (np.asarray(y, dtype=x.dtype),)

    runs = {"Quant": run_quant, "IntQuant": run_quant, "BipolarQuant": run_bipolar, "Trunc": run_trunc,
            "MultiThreshold": run_multithreshold}
    return [type(op, (OpRun,), {"op_domain": domain, "_run": fn, "__module__": __name__})
            for domain in QONNX_DOMAINS for op, fn in runs.items()] + [_inference_batchnorm(OpRun), _global_max_pool(OpRun),
                                                                  _max_pool(OpRun), *_linear_quantizers(OpRun),
                                                                  *cell_ops(OpRun, QONNX_DOMAINS)]


def _linear_quantizers(base: type) -> list[type]:
    """ONNX QuantizeLinear and DequantizeLinear on integer codes as the spec writes them, at
    every opset from 10: ``saturate(round_half_even(x / y_scale) + y_zero_point)`` and
    ``(x - x_zero_point) * x_scale``, per tensor, per axis or per block (onnx's own
    ``reshape_input``), in float64.  onnx's reference evaluator (1.x) has no DequantizeLinear
    below opset 19 (``No implementation for operator 'DequantizeLinear' domain '' and version
    14``), turns codes into float32 first and quotients into int32."""
    from onnx.helper import np_dtype_to_tensor_dtype, tensor_dtype_to_np_dtype
    from onnx.reference.ops._quant_utils import reshape_input

    ranges = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127), TensorProto.UINT16: (0, 65535),
              TensorProto.INT16: (-32768, 32767), TensorProto.UINT4: (0, 15), TensorProto.INT4: (-8, 7),
              TensorProto.UINT2: (0, 3), TensorProto.INT2: (-2, 1)}

    def codes_of(dtype: int) -> tuple[int, int]:
        if dtype not in ranges:
            raise ValueError(f"codes of type {TensorProto.DataType.Name(dtype)}: only integer codes are run in float64")
        return ranges[dtype]

    def quantize(self, x, y_scale, y_zero_point=None, axis=1, saturate=1, block_size=0, output_dtype=0, precision=0):
        if precision:
            raise ValueError(f"QuantizeLinear with precision={precision} is not run in float64")
        dtype = np_dtype_to_tensor_dtype(y_zero_point.dtype) if y_zero_point is not None else \
            (output_dtype or TensorProto.UINT8)
        lo, hi = codes_of(dtype)
        y = np.rint(x / reshape_input(y_scale, x.shape, axis, block_size or None))
        if y_zero_point is not None:
            y = y + reshape_input(y_zero_point.astype(np.float64), x.shape, axis, block_size or None)
        return (np.clip(y, lo, hi).astype(tensor_dtype_to_np_dtype(dtype)),)

    def dequantize(self, x, x_scale, x_zero_point=None, axis=1, block_size=0, output_dtype=0):
        dtype = np_dtype_to_tensor_dtype(x.dtype)
        if dtype != TensorProto.INT32:
            codes_of(dtype)
        y = x.astype(np.float64)
        if x_zero_point is not None:
            y = y - reshape_input(x_zero_point.astype(np.float64), x.shape, axis, block_size or None)
        y = y * reshape_input(x_scale, x.shape, axis, block_size or None)
        return (y.astype(tensor_dtype_to_np_dtype(output_dtype) if output_dtype else x_scale.dtype),)

    return [type(op, (base,), {"op_domain": "", "_run": fn, "__module__": __name__})
            for op, fn in (("QuantizeLinear", quantize), ("DequantizeLinear", dequantize))]


def _inference_batchnorm(base: type) -> type:
    """ONNX BatchNormalization at inference, as the spec writes it: ``(x - mean) /
    sqrt(var + epsilon) * scale + B`` over axis 1.  onnx's reference evaluator (1.x) computes
    opsets 9-13 with the batch's statistics whenever ``momentum`` is set (its default), which is
    not what an exported model means."""

    def run(self, x, scale, bias, mean, var, epsilon=1e-5, momentum=None, training_mode=0, spatial=1, is_test=1):
        if training_mode:
            raise ValueError("BatchNormalization with training_mode=1 is not an inference graph")
        shape = (1, -1) + (1,) * (x.ndim - 2)
        eps = np.float64(np.float32(epsilon))
        y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) + bias.reshape(shape)
        return (y.astype(x.dtype),)

    return type("BatchNormalization", (base,), {"op_domain": "", "_run": run, "__module__": __name__})


def _global_max_pool(base: type) -> type:
    """ONNX GlobalMaxPool as the spec writes it: the maximum over every spatial axis.  onnx's
    reference evaluator (1.x) reduces only the last two axes, wrong for a 3D input."""

    def run(self, x):
        return (x.max(axis=tuple(range(2, x.ndim)), keepdims=True),)

    return type("GlobalMaxPool", (base,), {"op_domain": "", "_run": run, "__module__": __name__})


def _max_pool(base: type) -> type:
    """ONNX MaxPool as the spec writes it: pads ``[x1_begin, x2_begin, ..., x1_end, ...]`` of
    -inf, ``auto_pad``, ``ceil_mode`` (a last window starting in the end padding dropped),
    dilations.  onnx's reference evaluator (1.x) pairs the pads per axis wrongly when every
    stride is 1 (pads [2, 1, 2, 1] on a 7x3 input gave 8x4, not 9x3)."""

    def run(self, x, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None, pads=None, storage_order=0,
            strides=None):
        n = len(kernel_shape)
        size = x.shape[2:]
        strides, dilations = list(strides or [1] * n), list(dilations or [1] * n)
        ext = [(k - 1) * d + 1 for k, d in zip(kernel_shape, dilations)]
        auto = _text(auto_pad or "NOTSET")
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out = [-(-size[i] // strides[i]) for i in range(n)]
            total = [max(0, (out[i] - 1) * strides[i] + ext[i] - size[i]) for i in range(n)]
            begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
            pads = begin + [t - b for t, b in zip(total, begin)]
        else:
            pads = [0] * (2 * n) if auto == "VALID" or pads is None else list(pads)
            out = []
            for i in range(n):
                span = size[i] + pads[i] + pads[n + i] - ext[i]
                o = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
                if ceil_mode and (o - 1) * strides[i] >= size[i] + pads[i]:
                    o -= 1
                out.append(o)
        padded = np.full(x.shape[:2] + tuple(size[i] + pads[i] + pads[n + i] + ext[i] + strides[i]
                                                  for i in range(n)), -np.inf)
        padded[(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + size[i]) for i in range(n))] = x
        y = np.full(x.shape[:2] + tuple(out), -np.inf)
        for offset in np.ndindex(*kernel_shape):
            view = tuple(slice(offset[i] * dilations[i], offset[i] * dilations[i] + (out[i] - 1) * strides[i] + 1, strides[i])
                         for i in range(n))
            y = np.maximum(y, padded[(slice(None), slice(None)) + view])
        y = y.astype(x.dtype)
        return (y,) if len(self.output) < 2 else (y, np.zeros(y.shape, dtype=np.int64))

    return type("MaxPool", (base,), {"op_domain": "", "_run": run, "__module__": __name__})


def float64_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose float tensors are all float64: initializers, constants,
    inputs, outputs, value infos, and casts to float."""
    m = copy.deepcopy(model)
    low = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)

    def up(t: onnx.TensorProto) -> onnx.TensorProto:
        if t.data_type in low:
            return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name)
        return t

    g = m.graph
    # older exports use the custom-op domains without importing an opset for them
    known = {o.domain for o in m.opset_import}
    for domain in sorted({n.domain for n in g.node if n.domain in QONNX_DOMAINS} - known):
        m.opset_import.append(onnx.helper.make_opsetid(domain, 1))
    inits = [up(t) for t in g.initializer]
    del g.initializer[:]
    g.initializer.extend(inits)
    for vi in [*g.input, *g.output, *g.value_info]:
        if vi.type.tensor_type.elem_type in low:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                a.t.CopyFrom(up(a.t))
            elif node.op_type == "Cast" and a.name == "to" and a.i in low:
                a.i = TensorProto.DOUBLE
    return m


def _fixed_shape(value: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    """A graph input's whole declared shape, batch included, where every dimension is fixed."""
    dims = value.type.tensor_type.shape.dim
    if not dims or not all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


class IndependentExecutor:
    """The user's file in float64 in ONNX's reference evaluator: :meth:`run` gives its output
    for real-valued inputs, :meth:`run_all` every node's output too."""

    def __init__(self, model: onnx.ModelProto, softmax: bool = False, outputs: list[str] | None = None):
        self.model = float64_model(model)
        g = self.model.graph
        inits = {i.name for i in g.initializer}
        ins = [i for i in g.input if i.name not in inits]
        self.inputs = [i.name for i in ins]
        #: the outputs compared (by default every one but constants -- initializers, Constant
        #: nodes; after a recurrent cell's sequence, which is the first, the cell's last
        #: states are left out, as the design leaves them out)
        constants = inits | {o for n in g.node if n.op_type == "Constant" for o in n.output}
        self.outputs = list(outputs) if outputs else [o.name for o in g.output if o.name not in constants]
        first = next((n for n in g.node if self.outputs[0] in n.output), None)
        if not outputs and first is not None and first.op_type in RECURRENT_OPS:
            self.outputs = self.outputs[:1]
        if softmax:  # the design stops before the trailing Softmax: compare its input, the logits
            last = next(n for n in g.node if self.outputs[0] in n.output)
            self.outputs = [last.input[0]]
        self.input_dims = [[d.dim_value if d.HasField("dim_value") else 0 for d in i.type.tensor_type.shape.dim[1:]]
                           for i in ins]
        #: each input's whole declared shape where every dimension is fixed (else None): a
        #: time-major file ((T, 1, F): brevitas' batch_first=False) holds one sample in it
        self.whole_shapes = [_fixed_shape(i) for i in ins]
        # a batch dimension fixed to 1 (e.g. a Reshape to (1, -1)): one sample at a time
        self.per_sample = any(len(dims) > 0 and dims[0].HasField("dim_value") and dims[0].dim_value == 1
                              for dims in (i.type.tensor_type.shape.dim for i in ins))
        self.nodes = list(g.node)
        self.session = self._session(self.outputs)
        self._all = None

    def _session(self, outputs: list[str]):
        from onnx.reference import ReferenceEvaluator

        m = self.model
        if outputs != [o.name for o in m.graph.output]:
            m = copy.deepcopy(self.model)
            known = {o.name for o in m.graph.output}
            m.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in outputs if n not in known)
        try:
            return ReferenceEvaluator(m, new_ops=qonnx_ops())
        except Exception as exc:  # noqa: BLE001 - the user's file: one line
            raise IndependentError(first_line(exc)) from None

    def _feeds(self, x: np.ndarray | list[np.ndarray]) -> list[np.ndarray]:
        """Each input's float64 array (one input: ``x``; several: ``x`` is their list), in the
        file's shape (the design's input may be the model's reshaped; a sample that fills a
        file's whole fixed shape -- time-major, ``(T, 1, F)`` -- in that shape, one per row)."""
        xs = [x] if len(self.inputs) == 1 else list(x)
        feeds = []
        for a, dims, whole in zip(xs, self.input_dims, self.whole_shapes):
            a = np.asarray(a, dtype=np.float64)
            if self._one_sample(a, whole):
                a = a.reshape(len(a), *whole)
            elif dims and all(dims) and a[0].size == int(np.prod(dims)):
                a = a.reshape(len(a), *dims)
            feeds.append(a)
        return feeds

    @staticmethod
    def _one_sample(a: np.ndarray, whole: tuple[int, ...] | None) -> bool:
        """Whether one sample of ``a`` fills the file's whole fixed input shape ``whole`` whose
        batch is not its leading axis (a time-major sequence of batch 1)."""
        return whole is not None and len(whole) > 1 and whole[0] != 1 and a[0].size == int(np.prod(whole))

    def _evaluate(self, session, names: list[str], x: np.ndarray | list[np.ndarray]) -> list[np.ndarray]:
        feeds = self._feeds(x)
        # rows that are the file's whole input (time-major): run one by one, each row as it is
        rows = [w is not None and w[0] != 1 and a.shape[1:] == tuple(w) for a, w in zip(feeds, self.whole_shapes)]
        n, step = len(feeds[0]), 1 if self.per_sample or any(rows) else 256
        chunk = lambda a, row, i: a[i] if row else a[i:i + step]  # noqa: E731
        try:
            outs = [session.run(names, {k: chunk(a, row, i) for k, a, row in zip(self.inputs, feeds, rows)})
                    for i in range(0, n, step)]
        except Exception as exc:  # noqa: BLE001
            raise IndependentError(first_line(exc)) from None
        joined = []
        for k in range(len(names)):
            parts = [np.asarray(o[k], dtype=np.float64) for o in outs]
            # shape arithmetic (Shape/Gather) yields scalars: one per chunk; a time-major
            # file's values hold one sample each: one row per sample
            joined.append(np.stack(parts) if parts[0].ndim == 0 or any(rows) else np.concatenate(parts))
        return joined

    def run(self, x: np.ndarray | list[np.ndarray]) -> np.ndarray:
        """The compared outputs on ``x``, packed (``ir.graph.pack``)."""
        return pack(self._evaluate(self.session, self.outputs, x))

    def run_all(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """The first output of every node (and the graph output) on ``x``."""
        names = list(dict.fromkeys(n.output[0] for n in self.nodes if n.output and n.output[0]))
        if self._all is None:
            self._all = self._session(names)
        return dict(zip(names, self._evaluate(self._all, names, x)))


def run_file(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every graph output of the user's file on ``feeds`` (input name -> array, in the file's
    own shape, batch included), run in float64 as the independent check runs it."""
    executor = IndependentExecutor(model, outputs=[o.name for o in model.graph.output])
    values = executor.session.run(executor.outputs, {k: np.asarray(v, dtype=np.float64) for k, v in feeds.items()})
    return {name: np.asarray(v, dtype=np.float64) for name, v in zip(executor.outputs, values)}


@dataclass(frozen=True)
class Diagnosis:
    """One differing sample, diagnosed node by node: where it first differs (None: at no node
    before the graph output), and whether that is a rounding float64 cannot decide."""

    at: NodeDifference | None
    undecidable: bool = False


def _boundary_distance(v: np.ndarray, mode: str) -> np.ndarray:
    """Relative distance of pre-rounding values to the nearest rounding boundary of ``mode``
    (half-integers for the round-to-nearest modes, integers for the others)."""
    shift = 0.5 if mode.upper() in NEAREST else 0.0
    d = np.abs((v - shift) - np.round(v - shift))
    return d / np.maximum(np.abs(v), 1.0)


def _quant_inputs(executor: IndependentExecutor, node: onnx.NodeProto, values: dict) -> tuple[np.ndarray, str] | None:
    """(pre-rounding value x / scale + zero point, rounding mode) of a Quant node, or of a
    DequantizeLinear of a QuantizeLinear's codes (``x / y_scale``, rounded half to even; a
    Clip of the codes between them)."""
    inits = {i.name: numpy_helper.to_array(i) for i in executor.model.graph.initializer}
    get = lambda n: values[n] if n in values else inits.get(n)  # noqa: E731
    if node.op_type == "DequantizeLinear":
        return _quantize_linear_input(executor, node, get)
    if node.op_type not in ("Quant", "IntQuant"):
        return None
    x, scale, zp = get(node.input[0]), get(node.input[1]), get(node.input[2])
    if x is None or scale is None or zp is None:
        return None
    mode = next((_text(onnx.helper.get_attribute_value(a)) for a in node.attribute if a.name == "rounding_mode"), "ROUND")
    return np.asarray(x, dtype=np.float64) / scale + zp, mode


def _quantize_linear_input(executor: IndependentExecutor, node: onnx.NodeProto, get) -> tuple[np.ndarray, str] | None:
    """``x / y_scale`` of the QuantizeLinear whose codes (through Clips) a DequantizeLinear
    reads, for one sample (no batch axis)."""
    from onnx.reference.ops._quant_utils import reshape_input

    producers = {o: n for n in executor.nodes for o in n.output}
    q = producers.get(node.input[0])
    while q is not None and q.op_type == "Clip":
        q = producers.get(q.input[0])
    if q is None or q.op_type != "QuantizeLinear" or get(q.input[0]) is None or get(q.input[1]) is None:
        return None
    x = np.asarray(get(q.input[0]), dtype=np.float64)[None]
    axis = next((int(onnx.helper.get_attribute_value(a)) for a in q.attribute if a.name == "axis"), 1)
    return (x / reshape_input(np.asarray(get(q.input[1]), dtype=np.float64), x.shape, axis))[0], "ROUND"


def diagnose(executor: IndependentExecutor, graph, x: np.ndarray | list[np.ndarray], exact_values: dict[str, np.ndarray]
             ) -> list[Diagnosis]:
    """Per sample of ``x``: the first ONNX node whose output differs from the exact value of
    the IR value it corresponds to, and whether that difference is a rounding float64 cannot
    decide.  ``exact_values``: IR value -> exact real values."""
    values = executor.run_all(x)
    by_node = {v: k for k, v in graph.origin.items()}  # ONNX node name -> IR value
    out = []
    for i in range(len(x[0]) if isinstance(x, list) else len(x)):  # samples (x: one array per input)
        found = Diagnosis(None)
        for node in executor.nodes:
            ir = by_node.get(node.name)
            if ir is None or ir in graph.in_flight or ir not in exact_values or node.output[0] not in values:
                continue
            theirs, ours = values[node.output[0]][i], exact_values[ir][i]
            if theirs.size != ours.size:
                found = Diagnosis(NodeDifference(node.name, shape_mismatch=f"shape {list(theirs.shape)} in the user's "
                                                 f"model, {list(ours.shape)} compiled"))
                break
            differ = np.flatnonzero(theirs.reshape(-1) != ours.reshape(-1))
            if not differ.size:
                continue
            pre = _quant_inputs(executor, node, {k: v[i] for k, v in values.items()})
            undecidable = False
            if pre is not None:
                v, mode = pre
                dist = _boundary_distance(np.asarray(v).reshape(-1)[differ], mode)
                undecidable = bool(np.all(dist <= BOUNDARY_DISTANCE))
            e = int(differ[0])
            found = Diagnosis(NodeDifference(
                node.name, e, float(ours.reshape(-1)[e]), float(theirs.reshape(-1)[e]),
                None if pre is None else float(np.asarray(pre[0]).reshape(-1)[e]), None if pre is None else pre[1]),
                undecidable)
            break
        out.append(found)
    return out


def output_differences(graph, theirs: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Which of the packed outputs ``theirs`` (float64 values of the user's model, ``(N,
    values)``) differ from the exact reference's codes ``ref``: each port compared by value,
    or for an accumulator no Quant rounds (e.g. logits), where an exact rational float64 may
    not hold, read on the port's code grid (docs/bit-exact.md)."""
    n = len(theirs)
    ours = [o.reshape(n, -1) for o in graph.split_outputs(graph.output_real(ref))]
    mine = [r.reshape(n, -1) for r in graph.split_outputs(ref)]
    found, start = [], 0
    for port, o, r in zip(graph.output_ports, ours, mine):
        t = theirs[:, start:start + o.shape[1]]
        start += o.shape[1]
        scale = graph.scales.get(port.value)
        if scale is not None and scale.accumulator:
            decoded, on_grid = scale.decode(t, graph.values[port.value].shape)
            found.append(~(on_grid.reshape(n, -1) & (decoded.reshape(n, -1) == r)))
        else:
            found.append(t != o)
    return np.concatenate(found, axis=1)


def independent_check(model: onnx.ModelProto, graph, codes: np.ndarray, ref: np.ndarray,
                      unrunnable: list[str] | None = None) -> IndependentReport:
    """Run the user's ``model`` on ``codes`` (as real values) and compare with the exact
    reference's output codes ``ref``: every output equal, or proven undecidable in float64.
    ``unrunnable``: op types of the model no ONNX executor runs (no check then)."""
    if unrunnable:
        return IndependentReport(None, Execution.NO_EXECUTOR, f"no ONNX executor runs {', '.join(unrunnable)}")
    cells = any(n.op_type in RECURRENT_OPS for n in model.graph.node)
    rep = IndependentReport(CELL_EXECUTOR if cells else EXECUTOR)
    n = len(codes)
    try:
        executor = IndependentExecutor(model, softmax=graph.softmax is not None,
                                       outputs=[p.onnx_name for p in graph.output_ports])
        theirs = executor.run(graph.input_real(codes)).reshape(n, -1)
    except IndependentError as exc:
        rep.execution, rep.reason = Execution.FAILED_TO_RUN, str(exc)
        return rep
    ours = graph.output_real(ref).reshape(n, -1)
    rep.samples, rep.outputs = n, int(ours.size)
    same_shape = theirs.shape == ours.shape
    if same_shape:
        differ = output_differences(graph, theirs, ref)
        rep.equal = int((~differ).sum())
        bad = np.flatnonzero(differ.any(axis=1))
        for s_, o_ in np.argwhere(differ)[:LISTED]:
            rep.first_differences.append(Difference(int(s_), int(o_), float(ours[s_, o_]), float(theirs[s_, o_])))
    else:  # nothing to compare element by element: every output differs
        rep.differing_outputs = rep.outputs
        bad = np.arange(n)
    if not len(bad):
        return rep
    diagnosed = bad[:DIAGNOSED]
    values = run_ir(graph, np.asarray(codes)[diagnosed], keep=set(graph.origin))
    exact = {v: graph.real(v, c) for v, c in values.items()}
    for sample, found in zip(diagnosed, diagnose(executor, graph, graph.input_real(np.asarray(codes)[diagnosed]), exact)):
        k = int(differ[sample].sum()) if same_shape else 0
        if found.undecidable and same_shape:
            rep.undecidable_outputs += k
            if len(rep.undecidable) < LISTED:
                rep.undecidable.append(UndecidableSample(int(sample), k, found.at))
            continue
        rep.differing_outputs += k
        if rep.first_differing_node is None and found.at is not None:
            rep.first_differing_node = found.at.describe()
    if same_shape:  # samples beyond the diagnosed ones are not proven undecidable
        rep.differing_outputs += int(differ[bad[DIAGNOSED:]].sum())
    if rep.differing_outputs and rep.first_differing_node is None:
        rep.first_differing_node = ("the graph output (no node before it differs)" if same_shape else
                                    f"the graph output ({theirs.shape[1]} values per sample in the user's model, "
                                    f"{ours.shape[1]} compiled)")
    return rep


__all__ = ["BOUNDARY_DISTANCE", "CELL_EXECUTOR", "Diagnosis", "EXECUTOR", "IndependentError", "IndependentExecutor", "diagnose",
           "float64_model", "independent_check", "output_differences", "qonnx_ops", "run_file"]
