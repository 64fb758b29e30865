"""Shape and data movement: ``Flatten``, ``Reshape``, ``Transpose``, ``DepthToSpace``,
``Concat``, ``Slice`` (step 1: a crop), ``Split`` (crops), ``Gather`` (the last step of a
recurrent sequence), and what passes its input on (``Identity``, ``Dropout`` at inference) or
holds a value (``Constant``).

Codes are moved, not changed; a flatten or reshape of the raw input before its Quant (or a
``Gather`` of the one index of its leading unit axis) gives the design's input the new shape."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import UnsupportedModelError
from ...ops import OPS, Trait, crop, depthtospace, flatten, merge, transpose
from ..attributes import attribute, required_attribute
from ..inflight import in_flight, join, move
from ..real import reshape_input
from ..registry import handles
from ..state import ImportState
from ..values import Const, RawInput, Tensor


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
    if len(shape) != 2 or shape[1] not in (-1, int(np.prod(state.shape_of(node.input[0])))) or \
            not (shape[0] in (-1, 1) or (shape[0] == 0 and zero_copies)):
        raise UnsupportedModelError(f"node '{node.name}' (Reshape): only flattening to (N, -1) is supported, got "
                                    f"{shape.tolist()} (allowzero={attribute(node, 'allowzero', 0)})")
    raw = state.values.get(node.input[0])
    if isinstance(raw, RawInput):
        reshape_input(state, node, raw, (math.prod(raw.shape),))
        return
    _flatten(state, node)


@handles("Transpose")
def transpose_node(state: ImportState, node: onnx.NodeProto) -> None:
    """Swapping the two axes after the batch (e.g. frames (N, T, C, H, W) <-> volume
    (N, C, T, H, W) around a per-frame 1x1x1 Conv): a relabelling, no data movement."""
    perm = list(attribute(node, "perm", []))
    if len(perm) < 3 or perm[:3] != [0, 2, 1] or perm[3:] != list(range(3, len(perm))):
        raise UnsupportedModelError(f"node '{node.name}' (Transpose): only swapping axes 1 and 2 is supported, got {perm}")
    codes_moved(state, node, transpose.OP, transpose.Attrs())


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
    """``x[:, c0:c1, a0:a1, ...]`` with step 1: a box of channels and spatial positions
    (:func:`_crop`), each bound clamped to its axis as ONNX does."""
    rank = len(state.known_shape(node.input[0], node)) + 1
    if state.opset >= 10:
        starts, ends = (state.const(state.input_name(node, i, what), node, what).astype(np.int64).reshape(-1)
                        for i, what in ((1, "the starts"), (2, "the ends")))
        axes, steps = (state.optional_const(node, i, what) for i, what in ((3, "the axes"), (4, "the steps")))
    else:
        starts, ends = (np.asarray(attribute(node, k, []), dtype=np.int64).reshape(-1) for k in ("starts", "ends"))
        axes, steps = attribute(node, "axes"), None
    axes = np.arange(len(starts)) if axes is None else np.asarray(axes, dtype=np.int64).reshape(-1) % rank
    if steps is not None and np.any(np.asarray(steps) != 1):
        raise UnsupportedModelError(f"node '{node.name}' (Slice): steps={np.asarray(steps, dtype=np.int64).tolist()} "
                                    "are not supported (only 1)")
    if not len(starts) == len(ends) == len(axes) == len(set(axes.tolist())) or not len(axes):
        raise UnsupportedModelError(f"node '{node.name}' (Slice): starts={starts.tolist()}, ends={ends.tolist()} and "
                                    f"axes={axes.tolist()} are not one bound pair per distinct axis")
    dims = (1, *state.known_shape(node.input[0], node))
    clamp = lambda v, a: int(np.clip(v + dims[a] if v < 0 else v, 0, dims[a]))  # noqa: E731
    _crop(state, node, {int(a): (clamp(b, a), clamp(e, a)) for a, b, e in zip(axes, starts, ends)})


def _crop(state: ImportState, node: onnx.NodeProto, box: dict[int, tuple[int, int]]) -> None:
    """The node's input cut to ``box`` (ONNX axis -> [begin, end), the other axes whole): the
    ``crop`` op, codes copied; a value in flight keeps flying, each kept channel's constants
    with it."""
    dims = (1, *state.known_shape(node.input[0], node))
    rank = len(dims)
    if box.get(0, (0, 1)) != (0, 1) or any(e <= b for b, e in box.values()):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): the box {dict(sorted(box.items()))} selects "
                                    "nothing or slices the batch")
    spans = [box.get(a, (0, dims[a])) for a in range(2, rank)]
    c0, c1 = box.get(1, (0, dims[1]))
    attrs = crop.Attrs(tuple(b for b, _ in spans), tuple(e - b for b, e in spans), c0, c1 - c0)
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
            _crop(state, piece, {axis: (start, start + size)})
        start += size


@handles("Gather")
def gather(state: ImportState, node: onnx.NodeProto) -> None:
    """``y[:, t]`` of a recurrent op's output sequence, for the last processed step only
    (time T - 1; time 0 for a reversed cell, whose sequence is in time order): the op then
    outputs its last hidden state (e.g. a classifier on the final state).  On the raw input
    before its Quant: the one index of a leading axis of length 1, a reshape."""
    raw = state.values.get(node.input[0])
    if isinstance(raw, RawInput):
        _gather_input(state, node, raw)
        return
    src = state.tensor(node.input[0], node)
    prod = state.graph.producer(src)
    idx = state.const(state.input_name(node, 1, "the index"), node, "the index")
    seq = prod is not None and getattr(prod.attrs, "return_sequences", False)
    steps = state.graph.values[prod.inputs[0]].shape[0] if seq else 0
    last = (0, -steps) if seq and prod.attrs.reverse else (-1, steps - 1)
    if not seq or state.axis(node, node.input[0], 0) != 1 or idx.size != 1 or int(idx.ravel()[0]) not in last:
        raise UnsupportedModelError(
            f"node '{node.name}' (Gather): only the last step processed (axis 1, index -1; index 0 of a reversed cell) "
            "of a recurrent output is supported")
    if len(state.live_users(src)) != 1:
        raise UnsupportedModelError(f"node '{node.name}' (Gather): the sequence '{src}' is also used elsewhere")
    prod.attrs = dataclasses.replace(prod.attrs, return_sequences=False)
    if src in state.graph.scales:  # float-scale codes: the last state's codes mean what the sequence's did
        state.graph.scales[node.output[0]] = state.graph.scales.pop(src)
    prod.output = node.output[0]
    state.graph.origin[prod.output] = node.name
    state.values[node.output[0]] = Tensor(node.output[0])


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
