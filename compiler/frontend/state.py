"""The importer's state, every field declared (:class:`ImportState`), and what every handler
asks of it: constants, IR values, value types, consumers, and emitting IR nodes.

Handlers (``frontend/handlers/``) are functions of ``(state, node)``; they read and write
:attr:`ImportState.values` (ONNX tensor name -> one of the kinds of :mod:`.values`) and
append to :attr:`ImportState.graph`.  Installing the design's input (a ``Quant`` on the
graph input, or an input typed by ``finn_datatype`` / ``--input-type``) is here too, since
reading the raw input as an activation may install it."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import onnx

from ..errors import UnsupportedModelError
from ..exact.requant import Step
from ..exact.rounding import Rounding
from ..ir.graph import Graph, InputPort, Node
from ..ir.meaning import CodeScale, InputMap
from ..ir.types import FixedType, TensorType, bits_for_range
from ..ops import OPS, Trait, quant
from ..ops.base import OpDef
from .attributes import attribute
from .clips import clip_codes
from .load import QUANTIZERS, datatype_range
from .shared_input import InputReader, share_input
from .values import Affine, Const, Pending, RawInput, Tensor, Value


@dataclass
class Deferred:
    """An op that fuses with the ``Quant`` after it: built when that Quant is read, its
    attributes ``make(the Quant's attributes)``; for a Quant with one float scale ``mult *
    2**-frac`` (zero point 0), ``make_scaled(the attributes on 2**-frac, mult)`` where the op
    can hold such codes (None: it cannot).  ``reads_real``: its input codes carry a real scale
    the op reads itself."""

    op: OpDef
    inputs: list[str]
    make: Callable[[quant.Attrs], Any]
    make_scaled: Callable[[quant.Attrs, int], Any] | None = None
    reads_real: bool = False


@dataclass
class ImportState:
    """Everything the importer knows while it walks one cleaned model."""

    model: onnx.ModelProto
    opset: int
    graph: Graph
    #: ONNX tensor name -> what it stands for
    values: dict[str, Value]
    #: names of the nodes the graph output depends on (the others are skipped)
    live: set[str]
    #: the graph inputs' ``finn_datatype`` annotations by input name, and the declared ``--input-type``
    input_datatypes: dict[str, str] = field(default_factory=dict)
    input_type: FixedType | None = None
    #: a graph input's name -> the quantizers reading it, in the order they were read
    input_readers: dict[str, list[InputReader]] = field(default_factory=dict)
    #: Quant node name -> the op waiting to fuse with it
    deferred: dict[str, Deferred] = field(default_factory=dict)
    #: graph outputs after the first (a recurrent cell's last states): not part of the design
    dropped_outputs: list[str] = field(default_factory=list)
    #: a MatMul over tokens: its output (the sequence transposed back) -> the 1x1 convolution
    #: computing it, whose bias a constant Add after the MatMul becomes
    token_layers: dict[str, Node] = field(default_factory=dict)
    #: a value in flight whose codes a transpose moves only after the Quant that must follow
    #: rounds them (its constants differ per channel, axis 0): its name -> that transpose (an
    #: IR node outside the graph): after float-scaled token sums and their bias, the transpose
    #: back to tokens; a Transpose of a 1D map in flight into a sequence (a Conv1d before a
    #: QuantLSTM, permuted to (N, T, C))
    moved_after_quant: dict[str, Node] = field(default_factory=dict)
    #: IR value -> (its producer's attrs, its input types, its type): inference is pure, so a
    #: value is inferred again only when its producer's attributes or inputs changed
    inferred: dict[str, tuple[Any, tuple[TensorType, ...], TensorType]] = field(default_factory=dict, repr=False)

    # -- constants ----------------------------------------------------------------------
    def constant(self, name: str, node: onnx.NodeProto, what: str) -> Const:
        v = self.values.get(name)
        if not isinstance(v, Const):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {what} must be a constant")
        return v

    def const(self, name: str, node: onnx.NodeProto, what: str) -> np.ndarray:
        return self.constant(name, node, what).value

    def const_or_none(self, name: str, node: onnx.NodeProto) -> np.ndarray | None:
        """A constant input's value, None for an absent (empty-named) one; refuses activations."""
        return self.const(name, node, f"input '{name}'") if name else None

    def const_value(self, name: str) -> np.ndarray | None:
        v = self.values.get(name)
        return v.value if isinstance(v, Const) else None

    def input_name(self, node: onnx.NodeProto, index: int, what: str) -> str:
        """The name of the node's ``index``-th input, refused in one line when absent."""
        if index >= len(node.input) or not node.input[index]:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {what} (input {index}) is missing")
        return node.input[index]

    def optional_const(self, node: onnx.NodeProto, index: int, what: str) -> np.ndarray | None:
        """The node's ``index``-th input as a constant, None when absent."""
        if index >= len(node.input) or not node.input[index]:
            return None
        return self.const(node.input[index], node, what)

    # -- the graph's structure -----------------------------------------------------------
    def users(self, name: str) -> list[onnx.NodeProto]:
        """Every node of the model reading ``name``."""
        return [u for u in self.model.graph.node if name in u.input]

    def live_users(self, name: str) -> list[onnx.NodeProto]:
        return [u for u in self.model.graph.node if u.name in self.live and name in u.input]

    def shape_of(self, name: str) -> tuple[int, ...]:
        """The per-sample shape ONNX shape inference recorded for ``name`` (empty: unknown)."""
        for vi in list(self.model.graph.value_info) + list(self.model.graph.input):
            if vi.name == name:
                return tuple(d.dim_value for d in vi.type.tensor_type.shape.dim[1:])
        return ()

    def known_shape(self, name: str, node: onnx.NodeProto) -> tuple[int, ...]:
        """The per-sample shape of ``name``: ONNX shape inference's, else the IR value's it
        stands for; refused in one line where neither is known."""
        shape = self.shape_of(name)
        if shape and all(shape):
            return shape
        v = self.values.get(name)
        value = v.name if isinstance(v, Tensor) else v.value if isinstance(v, Affine) else None
        if value is None:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): the shape of input '{name}' is unknown")
        return tuple(self.type_of(value).shape)

    def axis(self, node: onnx.NodeProto, value_name: str, default=None) -> int | None:
        """The node's ``axis`` attribute, negative values counted from the end of the input's
        rank (batch included); None when it cannot be resolved."""
        axis = attribute(node, "axis", default)
        if axis is None or axis >= 0:
            return axis
        rank = len(self.shape_of(value_name)) + 1
        return axis + rank if rank > 1 else None

    # -- IR values -----------------------------------------------------------------------
    def tensor(self, name: str, node: onnx.NodeProto) -> str:
        """The IR value ``name`` stands for; the raw input is typed here when an annotation or
        ``--input-type`` says what it holds, refused otherwise."""
        v = self.values.get(name)
        if isinstance(v, RawInput) and (v.source in self.input_datatypes or self.input_type):
            self.type_input(name, v, node)
            v = self.values.get(name)
        if isinstance(v, RawInput):
            raise UnsupportedModelError(
                f"graph input '{name}' feeds {node.op_type} node '{node.name}' without a Quant: "
                "quantize the input (e.g. brevitas QuantIdentity) or declare its type (--input-type fixed<16,6>)")
        if isinstance(v, Affine):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}) reads the real-valued output of '{v.source}' "
                                        "(scaled by real constants) that no Quant requantizes")
        if not isinstance(v, Tensor):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): input '{name}' must be an activation")
        return v.name

    def type_of(self, value: str) -> TensorType:
        """The type of an imported IR value (inferred now from its producers)."""
        memo: dict[str, TensorType] = {}

        def go(v: str) -> TensorType:
            if v in self.graph.values:
                return self.graph.values[v]
            if v not in memo:
                n = self.graph.producer(v)
                ins = tuple(go(i) for i in n.inputs)
                known = self.inferred.get(v)
                if known is None or known[0] is not n.attrs or known[1] != ins:
                    known = (n.attrs, ins, OPS[n.op].infer(n.attrs, list(ins), n.name))
                    self.inferred[v] = known
                memo[v] = known[2]
            return memo[v]

        return go(value)

    def add(self, node: onnx.NodeProto, op: OpDef, inputs: list[str], attrs: Any, keeps_scale: bool = False,
            reads_real: bool = False, part: str | None = None) -> Node:
        """Append ``op`` on ``inputs`` as the node's output (or, with ``part``, as a value of the
        node's own between two IR ops: ``<output>.<part>``, computed by ``<node>/<part>``).
        Codes with a real scale may feed a linear op, an op that only selects codes (the scale
        carried on as the op says: ``carry_scale``; as it is: ``keeps_scale``), or an op whose
        output the caller puts in flight with its real meaning (``reads_real``)."""
        out = f"{node.output[0]}.{part}" if part else node.output[0]
        scaled = [v for v in inputs if v in self.graph.scales]
        if scaled and Trait.LINEAR not in op.traits and not reads_real:
            meaning = self.graph.scales[scaled[0]]
            carried = meaning if keeps_scale else \
                op.carry_scale(attrs, meaning, [self.type_of(v) for v in inputs]) if len(inputs) == 1 else None
            if carried is None:
                what = "per-channel scales or zero points" if meaning.channels > 1 else "a float scale or zero point"
                raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}) reads codes with {what} (from "
                                            f"'{self.graph.origin.get(scaled[0], scaled[0])}'); not supported")
            self.graph.scales[out] = carried
        ir = Node(f"{node.name}/{part}" if part else node.name or out, op.name, inputs, out, attrs)
        self.graph.nodes.append(ir)
        self.graph.origin[out] = node.name
        self.values[out] = Tensor(out)
        return ir

    def defer_to_quant(self, node: onnx.NodeProto, op: OpDef, make: Callable[[quant.Attrs], Any], why: str,
                       make_scaled: Callable[[quant.Attrs, int], Any] | None = None, reads_real: bool = False,
                       inputs: list[str] | None = None) -> None:
        """``node`` must feed exactly one Quant (else refused: ``why``); the pair becomes one
        ``op`` node on ``inputs`` (default: the node's first input), its attributes ``make(the
        Quant's attributes)`` (:class:`Deferred`), built when the Quant is read."""
        users = self.users(node.output[0])
        if len(users) != 1 or users[0].op_type not in QUANTIZERS:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {why}")
        inputs = inputs if inputs is not None else [self.tensor(node.input[0], node)]
        self.deferred[users[0].name] = Deferred(op, inputs, make, make_scaled, reads_real)
        self.values[node.output[0]] = Pending(node.name)

    def code_scale(self, value: str) -> CodeScale:
        """What a value's codes mean, ``(code - zero) * scale`` per tensor or per channel (axis
        0): its recorded scale, or its fixed-point grid ``2**-frac`` with zero 0."""
        cs = self.graph.scales.get(value)
        if cs is None:
            return CodeScale((Fraction(2) ** -self.type_of(value).ftype.frac,), (Fraction(0),))
        if cs.accumulator:
            raise UnsupportedModelError(f"value '{value}': a layer's accumulator no Quant rounds is read by another "
                                        "layer; not supported")
        return cs

    # -- the design's input --------------------------------------------------------------
    def _install_input(self, name: str, raw: RawInput, attrs: quant.Attrs, lo: int, hi: int,
                       input_map: InputMap | None, scale: CodeScale | None, step: Step | None) -> None:
        """A quantizer of the raw input (``step``: on real data, None where the input is typed
        or quantized per channel): the design's input, or where another quantizer already
        reads it differently, a table of the cell the design's input becomes (:mod:`.shared_input`)."""
        reader = InputReader(name, self.graph.origin.get(name, ""), TensorType(raw.shape, attrs.out, lo, hi), attrs,
                             input_map, scale, step)
        readers = self.input_readers.setdefault(raw.source, [])
        same = next((r for r in readers if r.same_codes(reader)), None)
        if same is not None:
            self.values[name] = Tensor(same.value)  # the same quantizer again (one per branch): the same codes
            return
        readers.append(reader)
        if scale is not None:
            self.graph.scales[name] = scale
        self.values[name] = Tensor(name)
        port = next((p for p in self.graph.input_ports if p.onnx_name == raw.source), None)
        if port is not None:
            share_input(self.graph, port, readers)
            return
        self.graph.input_ports.append(InputPort(name, raw.source, attrs, input_map,
                                                raw.model_shape if raw.reshaped else None))
        self.graph.values[name] = reader.type

    def quantize_input(self, node: onnx.NodeProto, raw: RawInput, scale: tuple[Fraction, ...],
                       zero: tuple[Fraction, ...], qmin: int, qmax: int, rounding: Rounding,
                       bipolar: bool = False) -> None:
        """The model's first Quant on real input (the float operations before it folded in):
        one step, or one per channel (axis 0 of a sample) where the operations, or the Quant's
        scale and zero point, are per channel: channel ``c``'s codes mean
        ``(code - zero_c) * scale_c``.  Codes in ``[qmin, qmax]`` (bipolar: {0, 1})."""
        bad = next((m for m, _ in raw.each() if m <= 0), None)
        if bad is not None:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): the input is scaled by {float(bad)} "
                                        "before its Quant; only positive factors are supported")
        if bipolar and raw.clip != (None, None):
            raise UnsupportedModelError(f"node '{node.name}' (BipolarQuant): after a ReLU/Clip of the input is not supported")
        channels = _input_channels(node, raw, len(scale), len(zero))
        pairs = [(scale[c % len(scale)], zero[c % len(zero)], *raw.each()[c % raw.channels]) for c in range(channels)]
        ranges = {clip_codes(s, z, rounding, qmin, qmax, raw.clip) for s, z, _, _ in pairs}
        if len(ranges) > 1:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a ReLU/Clip of the input before a "
                                        f"quantizer per channel gives its channels code ranges {sorted(ranges)[:2]} "
                                        "...; one range for every channel is supported")
        (lo, hi), = ranges
        steps = tuple(Step(m / s, a / s + (0 if bipolar else z), rounding, lo, hi, bipolar) for s, z, m, a in pairs)
        width, sgn = bits_for_range(qmin, qmax)
        self.graph.origin[node.output[0]] = node.name
        meaning = CodeScale(tuple(2 * s for s in scale), (Fraction(1, 2),)) if bipolar else CodeScale(scale, zero)
        one = steps[0] if len(set(steps)) == 1 else None
        self._install_input(node.output[0], raw, quant.Attrs(FixedType(width, 0, sgn), False, "ROUND"), lo, hi,
                            InputMap(one, lo, hi) if one else InputMap(None, lo, hi, steps), meaning, one)

    def quantize_input_on_grid(self, node: onnx.NodeProto, raw: RawInput, attrs: quant.Attrs) -> None:
        """A power-of-two Quant on the untouched input: its codes are the design's input type."""
        self.graph.origin[node.output[0]] = node.name
        step = Step(Fraction(2) ** attrs.out.frac, Fraction(0), attrs.rounding, attrs.qmin, attrs.qmax)
        self._install_input(node.output[0], raw, attrs, attrs.qmin, attrs.qmax, None, None, step)

    def type_input(self, name: str, raw: RawInput, node: onnx.NodeProto) -> None:
        """An input no Quant reads, typed by its ``finn_datatype`` (its values are the codes)
        or by the declared ``--input-type`` (real data rounded half to even onto it, saturating)."""
        if raw.clip != (None, None):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a ReLU/Clip of an input no Quant reads is "
                                        "not supported")
        pairs = raw.each()
        if any(m == 0 for m, _ in pairs):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): the input is multiplied by 0")
        unit = Fraction(2) ** -self.input_type.frac if self.input_type is not None else Fraction(1)
        meaning = CodeScale(tuple(m * unit for m, _ in pairs), tuple(-a / (m * unit) for m, a in pairs))  # per channel
        if self.input_type is not None:
            t = self.input_type
            step = Step(Fraction(2) ** t.frac, Fraction(0), Rounding.ROUND, t.min_code, t.max_code)
            self._install_input(name, raw, quant.Attrs(t, False, "ROUND"), t.min_code, t.max_code,
                                InputMap(step, t.min_code, t.max_code) if raw.preprocessed else None,
                                meaning if raw.preprocessed else None, None)
            return
        rng = datatype_range(self.input_datatypes.get(raw.source, ""))
        if rng is None:
            return
        lo, hi = rng
        width, signed = bits_for_range(lo, hi)
        self.graph.origin.setdefault(name, "")
        self._install_input(name, raw, quant.Attrs(FixedType(width, 0, signed), False, "ROUND"), lo, hi,
                            InputMap(None, lo, hi), meaning, None)


def _input_channels(node: onnx.NodeProto, raw: RawInput, scales: int, zeros: int) -> int:
    """The channels (axis 0 of a sample) of the input's quantizer: 1, or the one count of the
    preprocessing's and the Quant's per-channel constants."""
    counts = {n for n in (raw.channels, scales, zeros) if n > 1}
    if len(counts) > 1 or (counts and raw.shape[0] not in counts):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {scales} scales and {zeros} zero points for "
                                    f"an input of shape {list(raw.shape)} preprocessed with {raw.channels} per-channel "
                                    "constants; not one per channel")
    return counts.pop() if counts else 1


__all__ = ["Deferred", "ImportState"]
