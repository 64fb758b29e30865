"""Shape and data movement: ``Flatten``, ``Reshape``, ``Transpose``, ``DepthToSpace``,
``Concat``, ``Slice`` (positive steps: a crop), ``Split`` (crops), ``Gather`` (steps or
features of a sequence: a crop, or a recurrent op's last state), and what passes its input
on (``Identity``, ``Dropout`` at inference) or holds a value (``Constant``).

Codes are moved, not changed; a flatten or reshape of the raw input before its Quant (or a
``Gather`` of the one index of its leading unit axis) gives the design's input the new shape;
a transpose or reshape of a constant moves the constant."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import UnsupportedModelError
from ...ir.graph import Node
from ...ops import OPS, Trait, crop, depthtospace, flatten, merge, transpose
from ..attributes import attribute, required_attribute
from ..inflight import in_flight, join, move
from ..real import reshape_input
from ..registry import handles
from ..state import ImportState
from ..values import Const, RawInput, Tensor


#: the QONNX quantizers whose handler applies a transpose waiting for them (``moved_after_quant``)
ROUNDING_QUANTS = ("Quant", "IntQuant")


@handles("Flatten")
def flatten_node(state: ImportState, node: onnx.NodeProto) -> None:
    axis = state.axis(node, node.input[0], 1)
    raw = state.values.get(node.input[0])
    if isinstance(raw, RawInput) and axis == 1:
        reshape_input(state, node, raw, (math.prod(raw.shape),))
        return
    if axis != 1:
        raise UnsupportedModelError(f"node '{node.name}' (Flatten): attribute axis={attribute(node, 'axis')} is not "
                                    "supported (only 1)")
    _flatten(state, node)


def _flatten(state: ImportState, node: onnx.NodeProto) -> None:
    """Codes flattened; a value in flight keeps flying, its constants one per element."""
    codes_moved(state, node, flatten.OP, flatten.Attrs())


def codes_moved(state: ImportState, node: onnx.NodeProto, op, attrs) -> None:
    """``op``, which moves codes, on the node's input: a value in flight keeps flying, its
    constants moved with the codes (:func:`..inflight.move`)."""
    if in_flight(state, node.input[0]):
        move(state, node, op, attrs)
        return
    state.add(node, op, [state.tensor(node.input[0], node)], attrs)


@handles("Reshape")
def reshape(state: ImportState, node: onnx.NodeProto) -> None:
    shape = state.const(state.input_name(node, 1, "the target shape"), node, "the target shape").astype(np.int64).ravel()
    zero_copies = not attribute(node, "allowzero", 0)  # allowzero=0: a 0 copies the input's dimension
    x = state.values.get(node.input[0])
    if isinstance(x, Const):
        _reshape_constant(state, node, x, shape, zero_copies)
        return
    if len(shape) != 2 or shape[1] not in (-1, int(np.prod(state.shape_of(node.input[0])))) or \
            not (shape[0] in (-1, 1) or (shape[0] == 0 and zero_copies)):
        raise UnsupportedModelError(f"node '{node.name}' (Reshape): only flattening to (N, -1) is supported, got "
                                    f"{shape.tolist()} (allowzero={attribute(node, 'allowzero', 0)})")
    raw = state.values.get(node.input[0])
    if isinstance(raw, RawInput):
        reshape_input(state, node, raw, (math.prod(raw.shape),))
        return
    _flatten(state, node)


def _reshape_constant(state: ImportState, node: onnx.NodeProto, x: Const, shape: np.ndarray, zero_copies: bool) -> None:
    """A constant reshaped as ONNX does (a 0 copies the input's dimension unless ``allowzero``,
    one -1 takes the rest), its codes and scales with it (:func:`moved_constant`)."""
    dims = [int(x.value.shape[i]) if v == 0 and zero_copies and i < x.value.ndim else int(v) for i, v in enumerate(shape)]
    try:
        target = np.empty(x.value.shape).reshape(dims).shape
    except ValueError:
        raise UnsupportedModelError(f"node '{node.name}' (Reshape): a constant of shape {list(x.value.shape)} cannot take "
                                    f"the shape {shape.tolist()}") from None
    state.values[node.output[0]] = moved_constant(x, lambda a: np.reshape(a, target))


@handles("Transpose")
def transpose_node(state: ImportState, node: onnx.NodeProto) -> None:
    """Of a constant (brevitas' ``Transpose`` of a QuantLinear's quantized weight): the
    constant transposed.  Of activations, swapping the two axes after the batch (e.g. frames
    (N, T, C, H, W) <-> volume (N, C, T, H, W) around a per-frame 1x1x1 Conv, a 1D map (N, C, T)
    -> a sequence (N, T, C)): a relabelling, no data movement."""
    perm = list(attribute(node, "perm", []))
    x = state.values.get(node.input[0])
    if isinstance(x, Const):
        state.values[node.output[0]] = moved_constant(x, lambda a: np.transpose(a, perm or None))
        return
    if len(perm) < 3 or perm[:3] != [0, 2, 1] or perm[3:] != list(range(3, len(perm))):
        raise UnsupportedModelError(f"node '{node.name}' (Transpose): only swapping axes 1 and 2 is supported, got {perm}")
    if in_flight(state, node.input[0]) and x.channels > 1 and len(state.type_of(x.value).shape) == 2:
        _transpose_after_quant(state, node, x)
        return
    codes_moved(state, node, transpose.OP, transpose.Attrs())


def moved_constant(x: Const, move) -> Const:
    """A constant whose elements ``move`` permutes or reshapes (a Transpose, a Reshape of a
    quantized initializer: qonnx's FoldTransposeIntoQuantInit).  A Const holds every element's
    value and, where quantized with a float scale, every element's code and scale, so the move
    of each array is the Quant of the moved initializer with its scale and zero point moved
    alike: exact, whatever the broadcast of the scale."""
    if not x.float_scaled:
        return Const(move(x.value))
    return Const(move(x.value), move(np.broadcast_to(x.codes, x.value.shape)), move(np.broadcast_to(x.scale, x.value.shape)))


def _transpose_after_quant(state: ImportState, node: onnx.NodeProto, x) -> None:
    """A 1D map in flight ``(C, T)`` whose channels have their own constants (a QuantConv1d's
    bias, with ``return_quant_tensor=False``) permuted into a sequence ``(T, C)``: after the
    transpose the channels lie on the last axis, where no meaning is per channel, so the
    transpose waits for the Quant that must follow (``state.moved_after_quant``): it rounds each
    channel on the map, then the transpose moves the codes."""
    users = state.live_users(node.output[0])
    if len(users) != 1 or users[0].op_type not in ROUNDING_QUANTS:
        raise UnsupportedModelError(f"node '{node.name}' (Transpose): moves the channels of '{x.source}', whose real "
                                    "scales or offsets differ per channel, apart; requantize it (a Quant) first")
    state.values[node.output[0]] = dataclasses.replace(x, source=node.name)
    state.moved_after_quant[node.output[0]] = Node(node.name, transpose.OP.name, [x.value], node.output[0],
                                                   transpose.Attrs())


@handles("DepthToSpace")
def depth_to_space(state: ImportState, node: onnx.NodeProto) -> None:
    """Channel blocks onto the spatial grid (PixelShuffle): codes moved, not changed (a value in
    flight keeps flying: ESPCN's last convolution, then PixelShuffle, then its Quant)."""
    mode = str(attribute(node, "mode", "DCR"))
    if mode not in ("DCR", "CRD"):
        raise UnsupportedModelError(f"node '{node.name}' (DepthToSpace): attribute mode={mode} is not DCR or CRD")
    attrs = depthtospace.Attrs(int(required_attribute(node, "blocksize")), mode == "CRD")
    codes_moved(state, node, depthtospace.OP, attrs)


@handles("Concat")
def concat(state: ImportState, node: onnx.NodeProto) -> None:
    """Along channels (axis 1), of two or more activations: codes of any grids, codes with
    real meanings (each channel keeps its own) or values in flight (:func:`..inflight.join`);
    along the features (axis 2) of recurrent sequences (:func:`_join_sequences`)."""
    if state.axis(node, node.input[0]) == 2 and len(node.input) >= 2 and all(_is_sequence(state, v) for v in node.input):
        _join_sequences(state, node)
        return
    if state.axis(node, node.input[0]) != 1 or len(node.input) < 2:
        raise UnsupportedModelError(f"node '{node.name}' (Concat): only two or more inputs along channels (axis 1) are "
                                    f"supported, got axis={attribute(node, 'axis')} and {len(node.input)} inputs")
    join(state, node)


def _is_sequence(state: ImportState, name: str) -> bool:
    """A recurrent op's output sequence ``(N, T, H)``."""
    value = state.values.get(name)
    prod = state.graph.producer(name) if isinstance(value, Tensor) else None
    return prod is not None and Trait.SEQUENCE in OPS[prod.op].traits and getattr(prod.attrs, "return_sequences", False) \
        and len(state.type_of(name).shape) == 2


def _join_sequences(state: ImportState, node: onnx.NodeProto) -> None:
    """Sequences side by side along their features: a bidirectional layer's forward and
    reversed cells, both in time order.  A sequence has one scale for every feature, so the
    inputs must share theirs (brevitas' bidirectional QuantLSTM shares its output quantizer
    between the directions)."""
    names = [state.tensor(v, node) for v in node.input]
    meanings = {state.graph.scales.get(v) for v in names}
    fracs = {state.type_of(v).ftype.frac for v in names}
    if len(meanings) > 1 or (meanings != {None} and len(fracs) > 1):
        scales = [state.graph.scales.get(v).scale[0] if v in state.graph.scales else
                  Fraction(1, 2 ** state.type_of(v).ftype.frac) for v in names]
        raise UnsupportedModelError(
            f"node '{node.name}' (Concat): joins sequences whose codes have the scales "
            f"{', '.join(f'{float(s):.9g}' for s in scales)} along their features; a sequence has one scale for "
            "every feature (quantize the directions with one quantizer, as brevitas' bidirectional layers do)")
    value = names[0]
    for i, name in enumerate(names[1:], 1):
        value = state.add(node, merge.CONCAT, [value, name], merge.Attrs(features=True), keeps_scale=True,
                          part=None if i == len(names) - 1 else f"concat{i}").output


@handles("Slice")
def slice_node(state: ImportState, node: onnx.NodeProto) -> None:
    """``x[:, c0:c1:cs, a0:a1:s0, ...]`` with positive steps: a box of channels and spatial
    positions, or of a sequence's steps and features (:func:`_crop`), each bound clamped to
    its axis as ONNX does."""
    rank = len(state.known_shape(node.input[0], node)) + 1
    if state.opset >= 10:
        starts, ends = (_bounds(state.const(state.input_name(node, i, what), node, what))
                        for i, what in ((1, "the starts"), (2, "the ends")))
        axes, steps = (state.optional_const(node, i, what) for i, what in ((3, "the axes"), (4, "the steps")))
    else:
        starts, ends = (np.asarray(attribute(node, k, []), dtype=np.int64).reshape(-1) for k in ("starts", "ends"))
        axes, steps = attribute(node, "axes"), None
    axes = np.arange(len(starts)) if axes is None else np.asarray(axes, dtype=np.int64).reshape(-1) % rank
    steps = np.ones(len(starts), dtype=np.int64) if steps is None else np.asarray(steps, dtype=np.int64).reshape(-1)
    if np.any(steps < 1):
        raise UnsupportedModelError(f"node '{node.name}' (Slice): steps={steps.tolist()} are not supported (only "
                                    "positive steps)")
    if not len(starts) == len(ends) == len(axes) == len(steps) == len(set(axes.tolist())) or not len(axes):
        raise UnsupportedModelError(f"node '{node.name}' (Slice): starts={starts.tolist()}, ends={ends.tolist()}, "
                                    f"axes={axes.tolist()} and steps={steps.tolist()} are not one bound pair per "
                                    "distinct axis")
    dims = (1, *state.known_shape(node.input[0], node))
    clamp = lambda v, a: int(np.clip(v + dims[a] if v < 0 else v, 0, dims[a]))  # noqa: E731
    box = {}
    for a, b, e, step in zip(axes.tolist(), starts.tolist(), ends.tolist(), steps.tolist()):
        begin, end = clamp(b, a), clamp(e, a)
        box[a] = (begin, -(-(end - begin) // step) if end > begin else 0, step)
    _crop(state, node, box)


def _bounds(values: np.ndarray) -> np.ndarray:
    """Slice bounds as integers; constants are held as float64, where torch's ``x[1:]`` end
    (INT64_MAX) rounds past int64: clipped to +-2**62 first (any bound past the axis clamps)."""
    return np.clip(np.asarray(values, dtype=np.float64), -2.0**62, 2.0**62).astype(np.int64).reshape(-1)


def _crop(state: ImportState, node: onnx.NodeProto, box: dict[int, tuple[int, int, int]]) -> None:
    """The node's input cut to ``box`` (ONNX axis -> (first, count, step), the other axes
    whole): the ``crop`` op, codes copied; a value in flight keeps flying, each kept channel's
    constants with it."""
    dims = (1, *state.known_shape(node.input[0], node))
    rank = len(dims)
    if box.get(0, (0, 1, 1))[:2] != (0, 1) or any(n < 1 for _, n, _ in box.values()):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): the box {dict(sorted(box.items()))} "
                                    "(first, count, step per axis) selects nothing or slices the batch")
    spans = [box.get(a, (0, dims[a], 1)) for a in range(2, rank)]
    c0, k, cs = box.get(1, (0, dims[1], 1))
    attrs = crop.Attrs(tuple(b for b, _, _ in spans), tuple(n for _, n, _ in spans), c0, k,
                       tuple(t for _, _, t in spans) if any(t != 1 for _, _, t in spans) else (), cs)
    codes_moved(state, node, crop.OP, attrs)


@handles("Split")
def split(state: ImportState, node: onnx.NodeProto) -> None:
    """Pieces along one non-batch axis, each output a :func:`_crop` of its extent; without
    sizes, equal parts (opset 18: the last one smaller where they do not divide the axis)."""
    dims = (1, *state.known_shape(node.input[0], node))
    axis = int(attribute(node, "axis", 0)) % len(dims)
    sizes = state.optional_const(node, 1, "the split") if state.opset >= 13 else attribute(node, "split")
    n = len(node.output)
    if sizes is None and (state.opset >= 18 or dims[axis] % n == 0):
        sizes = [-(-dims[axis] // n)] * (n - 1) + [dims[axis] - (n - 1) * -(-dims[axis] // n)]
    sizes = [int(v) for v in np.asarray(sizes if sizes is not None else [], dtype=np.int64).reshape(-1)]
    if axis == 0 or len(sizes) != n or sum(sizes) != dims[axis] or min(sizes) < 1:
        raise UnsupportedModelError(f"node '{node.name}' (Split): sizes {sizes} along axis {axis} of shape "
                                    f"{list(dims)} into {n} outputs are not supported")
    start = 0
    for out, size in zip(node.output, sizes):
        if out:
            piece = onnx.helper.make_node("Split", [node.input[0]], [out], name=f"{node.name}/{out}")
            _crop(state, piece, {axis: (start, size, 1)})
        start += size


@handles("Gather")
def gather(state: ImportState, node: onnx.NodeProto) -> None:
    """Steps of a sequence ``(N, T, F)`` (axis 1) or features (axis 2), or a channel or
    position of a 1D map: one index (the axis dropped) or evenly spaced indices, a crop
    (:func:`_crop`; one index then a flatten).  The last step a recurrent op processes (time
    T - 1; time 0 for a reversed cell, whose sequence is in time order), read by nothing else,
    is the op's last hidden state itself (e.g. a classifier on the final state).  On the raw
    input before its Quant: the one index of a leading axis of length 1, a reshape."""
    raw = state.values.get(node.input[0])
    if isinstance(raw, RawInput):
        _gather_input(state, node, raw)
        return
    idx = state.const(state.input_name(node, 1, "the index"), node, "the index").astype(np.int64)
    axis = state.axis(node, node.input[0], 0)
    if not in_flight(state, node.input[0]) and _last_state(state, node, axis, idx):
        return
    shape = (1, *state.known_shape(node.input[0], node))
    picked = np.where(idx < 0, idx + shape[axis], idx).reshape(-1) if axis in (1, 2) and len(shape) == 3 else None
    spacing = np.unique(np.diff(picked)) if picked is not None and picked.size else None
    if picked is None or idx.ndim > 1 or np.any(picked < 0) or np.any(picked >= shape[axis]) or \
            (spacing is not None and (spacing.size > 1 or np.any(spacing < 1))):
        raise UnsupportedModelError(
            f"node '{node.name}' (Gather): indices {idx.tolist()} at axis {attribute(node, 'axis', 0)} of shape "
            f"{list(shape)}; supported: one index or evenly increasing indices of axis 1 or 2 of a sequence (N, T, F) "
            "or a 1D map")
    box = {axis: (int(picked[0]), int(picked.size), int(spacing[0]) if picked.size > 1 else 1)}
    if idx.ndim == 1:
        _crop(state, node, box)
        return
    one = onnx.helper.make_node("Gather", [node.input[0]], [f"{node.output[0]}.index"], name=f"{node.name}/index")
    _crop(state, one, box)
    codes_moved(state, onnx.helper.make_node("Flatten", [one.output[0]], [node.output[0]], name=node.name), flatten.OP,
                flatten.Attrs())


def _last_state(state: ImportState, node: onnx.NodeProto, axis: int | None, idx: np.ndarray) -> bool:
    """``y[:, t]`` of a recurrent op's sequence read by nothing else, ``t`` the last step it
    processes: the op then outputs its last hidden state (True), else nothing is done."""
    value = state.values.get(node.input[0])
    prod = state.graph.producer(value.name) if isinstance(value, Tensor) else None
    if prod is None or Trait.SEQUENCE not in OPS[prod.op].traits or not getattr(prod.attrs, "return_sequences", False):
        return False
    steps = state.type_of(value.name).shape[0]
    last = (0, -steps) if prod.attrs.reverse else (-1, steps - 1)
    if axis != 1 or idx.ndim != 0 or int(idx) not in last or len(state.live_users(value.name)) != 1:
        return False
    src = value.name
    prod.attrs = dataclasses.replace(prod.attrs, return_sequences=False)
    state.inferred.pop(src, None)
    if src in state.graph.scales:  # float-scale codes: the last state's codes mean what the sequence's did
        state.graph.scales[node.output[0]] = state.graph.scales.pop(src)
    prod.output = node.output[0]
    state.graph.origin[prod.output] = node.name
    state.values[node.output[0]] = Tensor(node.output[0])
    return True


def _gather_input(state: ImportState, node: onnx.NodeProto, raw: RawInput) -> None:
    """``x[0]`` of a graph input of shape ``(1, 1, ...)`` (brevitas' ``hx[0]``, a one-layer
    QuantLSTM's initial state of shape (layers, batch, hidden)): the file's leading axis goes
    and its batch axis takes its place, both of length 1, so the values stay as they are, in
    their order: a reshape of the input to ``shape[1:]``."""
    idx = state.const(state.input_name(node, 1, "the index"), node, "the index").astype(np.int64)
    axis = state.axis(node, node.input[0], 0)
    declared = next(i.type.tensor_type.shape.dim for i in state.model.graph.input if i.name == raw.source)
    batch_of_one = len(declared) > 0 and declared[0].HasField("dim_value") and declared[0].dim_value == 1
    if axis != 0 or idx.ndim != 0 or int(idx) not in (0, -1) or not batch_of_one or not raw.shape or raw.shape[0] != 1:
        raise UnsupportedModelError(
            f"node '{node.name}' (Gather): of the graph input '{raw.source}' (shape {list(raw.shape)} per sample) before "
            f"its Quant, at axis {attribute(node, 'axis', 0)} index {idx.tolist()}; only index 0 of axis 0 of an input of "
            "declared shape (1, 1, ...) is supported (a reshape)")
    reshape_input(state, node, raw, raw.shape[1:])


# -- what passes its input on, or holds a value ------------------------------------------
@handles("Identity")
def identity(state: ImportState, node: onnx.NodeProto) -> None:
    state.values[node.output[0]] = state.values.get(node.input[0])


@handles("Dropout")
def dropout(state: ImportState, node: onnx.NodeProto) -> None:
    """Dropout at inference passes its input: refuse a training_mode that is not a constant
    False, and a mask output that something reads."""
    if len(node.input) > 2 and node.input[2]:
        mode = state.values.get(node.input[2])
        if not isinstance(mode, Const) or np.any(mode.value):
            raise UnsupportedModelError(f"node '{node.name}' (Dropout): input training_mode must be a constant False")
    if len(node.output) > 1 and node.output[1] and state.users(node.output[1]):
        raise UnsupportedModelError(f"node '{node.name}' (Dropout): the mask output is not supported")
    identity(state, node)


@handles("Constant")
def constant(state: ImportState, node: onnx.NodeProto) -> None:
    """The value of a Constant node (``value``, ``value_float(s)``, ``value_int(s)``), float64."""
    if len(node.attribute) != 1:
        raise UnsupportedModelError(f"node '{node.name}' (Constant): needs exactly one value attribute, "
                                    f"has {len(node.attribute)}")
    a = node.attribute[0]
    if a.name == "value":
        value = numpy_helper.to_array(a.t).astype(np.float64)
    else:
        value = np.asarray(onnx.helper.get_attribute_value(a), dtype=np.float64)
    state.values[node.output[0]] = Const(value)


__all__ = ["concat", "constant", "depth_to_space", "dropout", "flatten_node", "gather", "identity", "reshape",
           "transpose_node"]
