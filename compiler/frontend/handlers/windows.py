"""Window and spatial ops: ``Pad`` (folded into the window op reading it), ``MaxPool``,
``GlobalMaxPool``, ``AveragePool``, ``GlobalAveragePool`` (and ``ReduceMean`` over the spatial
axes), nearest ``Resize``; and the
window geometry every window op shares (:func:`window`).

An average is not a fixed-point number.  On a power-of-two grid with a power-of-two ``Quant``
after it, ``AveragePool`` / ``GlobalAveragePool`` fuse with that Quant into one op
(``avgpool`` / ``globalavgpool``: the window sum and one exact rational rounding); with a QONNX
``Trunc`` after it (power-of-two scale, zero point 0), with the Trunc's inner rounding onto its
scale's grid, the Trunc's own rounding after it (:func:`_trunc_rounding`).  Anywhere
else (float scales, zero points, a float-scaled Quant after it) the average is the exact
window sum ``S`` (a depthwise convolution whose weights are all 1) with its real meaning
``s_x * S / n - z_x * s_x`` in flight, so that the Quant after it is one proven ``rescale``
(the requantization primitive of docs/bit-exact.md).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnx

from ...errors import UnsupportedModelError
from ...exact.rounding import Rounding, div_round_int
from ...ir.types import MAX_WIDTH, FixedType, bits_for_range, power_of_two_exponent
from ...ops import avgpool, conv, crop, flatten, globalavgpool, interpolate, maxpool, quant, upsample
from ...ops import pad as pad_op
from ..attributes import (attribute, ceil_mode_extra, explicit_pads, nearest_coordinates, nearest_sources,
                          required_attribute, schema_default)
from ..inflight import ascending, move
from ..load import QUANTIZERS
from ..registry import handles
from ..state import ImportState
from ..values import Affine, Const, Padded, RawInput, Tensor
from .quantizers import drops_no_bits


def window(state: ImportState, node: onnx.NodeProto, kernel: tuple[int, ...],
           dilations: tuple[int, ...] = ()) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(strides, explicit pads) of a window op: ``auto_pad`` resolved with the ONNX formula
    on the input's spatial shape (a dilated kernel spans ``(k - 1) * d + 1``), ``kernel_shape``
    checked against the weights; the pads of a zero ``Pad`` before it added to its own."""
    n = len(kernel)
    given = attribute(node, "kernel_shape")
    if given is not None and tuple(int(k) for k in given) != tuple(kernel):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute kernel_shape={list(given)} "
                                    f"does not match the weights' {list(kernel)}")
    strides = tuple(int(v) for v in attribute(node, "strides", [1] * n))
    padded = state.values.get(node.input[0])
    if isinstance(padded, Padded):  # a zero Pad before: its pads join the op's own
        state.values[node.input[0]] = Tensor(padded.value)
        own = window(state, node, kernel, dilations)[1]
        return strides, tuple(a + b for a, b in zip(own, padded.pads))
    pads = attribute(node, "pads")
    auto_pad = str(attribute(node, "auto_pad", "NOTSET"))
    spatial = state.known_shape(node.input[0], node)[1:] if auto_pad.startswith("SAME") else (0,) * n
    if auto_pad.startswith("SAME") and len(spatial) != n:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute auto_pad={auto_pad} needs the "
                                    "input's shape, which is unknown")
    span = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations or (1,) * n))
    return strides, explicit_pads(node, auto_pad, tuple(spatial), span, strides,
                                  None if pads is None else tuple(int(p) for p in pads))


def kernel_shape(node: onnx.NodeProto) -> tuple[int, ...]:
    return tuple(int(v) for v in required_attribute(node, "kernel_shape"))


def window_dilations(state: ImportState, node: onnx.NodeProto, n: int, since: int) -> tuple[int, ...]:
    """A pool's ``dilations`` (every 1 when absent), one positive value per spatial axis; refused
    before opset ``since``, whose schema of the op has none (the file would mean two things)."""
    given = attribute(node, "dilations")
    if given is not None and state.opset < since:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute dilations={list(given)} is not in "
                                    f"the opset {state.opset} schema of {node.op_type} (opset {since} or newer)")
    dilations = tuple(int(v) for v in (given if given is not None else [1] * n))
    if len(dilations) != n or min(dilations) < 1:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute dilations={list(dilations)} is not "
                                    f"one positive value per spatial axis")
    return dilations


def _dilated_span(kernel: tuple[int, ...], dilations: tuple[int, ...]) -> tuple[int, ...]:
    return tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations))


@handles("Pad")
def pad(state: ImportState, node: onnx.NodeProto) -> None:
    """A constant zero Pad of the spatial axes read only by a Conv or an AveragePool: its
    pads join theirs (a zero is real 0 on codes without a zero point).  A ``reflect`` or
    ``edge`` Pad copies codes: the ``pad`` op, read by anything (:func:`_copy_pad`)."""
    if state.opset < 11:
        mode, pads, value = attribute(node, "mode", "constant"), required_attribute(node, "pads"), \
            attribute(node, "value", 0.0)
    else:
        mode, pads = attribute(node, "mode", "constant"), state.const(state.input_name(node, 1, "pads"), node, "pads")
        value = state.const_or_none(node.input[2], node) if len(node.input) > 2 else None
        if len(node.input) > 3 and node.input[3]:
            raise UnsupportedModelError(f"node '{node.name}' (Pad): the axes input is not supported")
    pads = [int(p) for p in np.asarray(pads).ravel()]
    value = 0.0 if value is None or not np.size(value) else float(np.asarray(value).ravel()[0])
    users = state.users(node.output[0])
    rank = len(pads) // 2
    spatial = min(pads, default=0) >= 0 and rank >= 3 and not any(pads[i] for i in (0, 1, rank, rank + 1))
    if mode in COPY_MODES and spatial:
        _copy_pad(state, node, pad_op.Attrs(tuple(pads[2:rank] + pads[rank + 2:]), COPY_MODES[mode]))
        return
    if mode != "constant" or value != 0 or not spatial:
        raise UnsupportedModelError(f"node '{node.name}' (Pad): mode={mode} value={value} pads={pads}; only a constant "
                                    "zero pad, or a reflect or edge pad, of the spatial axes is supported")
    if len(users) != 1 or users[0].op_type not in ("Conv", "AveragePool"):
        raise UnsupportedModelError(f"node '{node.name}' (Pad): only a Pad read by exactly one Conv or AveragePool is "
                                    "supported (its pads join theirs)")
    x = state.tensor(node.input[0], node)
    if x in state.graph.scales and any(z != 0 for z in state.graph.scales[x].zero):
        raise UnsupportedModelError(f"node '{node.name}' (Pad): padding codes with a zero point is not supported "
                                    "(real 0 is not code 0)")
    state.values[node.output[0]] = Padded(x, tuple(pads[2:rank] + pads[rank + 2:]), node.name)


#: ONNX Pad modes whose padding copies codes
COPY_MODES = {mode.value: mode for mode in pad_op.PadMode}


def _copy_pad(state: ImportState, node: onnx.NodeProto, attrs: pad_op.Attrs) -> None:
    """A reflect or edge Pad: copies of codes, so any real meaning of the codes (a value in
    flight, float scales, zero points) carries through."""
    v = state.values.get(node.input[0])
    if isinstance(v, Affine):
        move(state, node, pad_op.OP, attrs, v)
        return
    state.add(node, pad_op.OP, [state.tensor(node.input[0], node)], attrs)


@handles("MaxPool")
def max_pool(state: ImportState, node: onnx.NodeProto) -> None:
    k = kernel_shape(node)
    n = len(k)
    if n not in (1, 2, 3):
        raise UnsupportedModelError(f"node '{node.name}' (MaxPool): {n}D pooling is not supported (1D, 2D and 3D are)")
    if len(node.output) > 1 and node.output[1] and state.users(node.output[1]):
        raise UnsupportedModelError(f"node '{node.name}' (MaxPool): the Indices output is not supported")
    dilations = window_dilations(state, node, n, since=10)
    s, pads = window(state, node, k, dilations)
    f, x = _maximum_input(state, node)
    if int(attribute(node, "ceil_mode", 0)):
        # ONNX's ceil(...) + 1 outputs: the last windows reach past the end, into padding
        # that takes no part (a window entirely in it is refused by the op)
        extra = ceil_mode_extra(state.type_of(x).shape[1:], _dilated_span(k, dilations), s, pads)
        pads = tuple(pads[:n]) + tuple(p + e for p, e in zip(pads[n:], extra))
    _maximum(state, node, f, x, maxpool.Attrs(k, s, tuple(pads) if any(pads) else (),
                                              dilations if max(dilations) > 1 else ()))


@handles("GlobalMaxPool")
def global_max_pool(state: ImportState, node: onnx.NodeProto) -> None:
    """The maximum over the spatial axes: a max pool whose window is the whole input."""
    f, x = _maximum_input(state, node)
    spatial = tuple(state.type_of(x).shape[1:])
    if len(spatial) not in (2, 3):
        raise UnsupportedModelError(f"node '{node.name}' (GlobalMaxPool): on a {len(spatial)}D input; 2D and 3D are "
                                    "supported")
    _maximum(state, node, f, x, maxpool.Attrs(spatial, spatial))


def _maximum_input(state: ImportState, node: onnx.NodeProto) -> tuple[Affine | None, str]:
    """(the value in flight as a non-decreasing function of its codes, or None; the IR value
    the maximum reads)."""
    v = state.values.get(node.input[0])
    if isinstance(v, Affine):
        f = ascending(state, node, v)
        return f, f.value
    return None, state.tensor(node.input[0], node)


def _maximum(state: ImportState, node: onnx.NodeProto, f: Affine | None, x: str, attrs: maxpool.Attrs) -> None:
    if f is not None:
        move(state, node, maxpool.OP, attrs, f)
        return
    state.add(node, maxpool.OP, [x], attrs)


# -- averages --------------------------------------------------------------------------
@handles("AveragePool")
def average_pool(state: ImportState, node: onnx.NodeProto) -> None:
    k = kernel_shape(node)
    n = len(k)
    why = "must be 2D/3D and followed by exactly one Quant to be exact"
    if n not in (2, 3):
        raise UnsupportedModelError(f"node '{node.name}' (AveragePool): {why}")
    # a Pad before: its zeros are data, counted by the divisor (only where the pool pads nothing itself)
    explicit = isinstance(state.values.get(node.input[0]), Padded)
    cip = bool(attribute(node, "count_include_pad", 0))
    own_pads = any(attribute(node, "pads", ())) or attribute(node, "auto_pad", "NOTSET") not in ("NOTSET", "VALID")
    if explicit and own_pads and not cip:
        raise UnsupportedModelError(f"node '{node.name}' (AveragePool): pads of its own with count_include_pad=0 after "
                                    "a Pad are not supported (the divisor would count some padding and not other)")
    dilations = window_dilations(state, node, n, since=19)
    s, pads = window(state, node, k, dilations)
    cip = cip or explicit
    on_grid = _average_on_grid(state, node)
    if int(attribute(node, "ceil_mode", 0) or 0):
        pads = _ceil_pads(state, node, k, s, pads, refuse_partial=cip or not on_grid, dilations=dilations)
    dilated = dilations if max(dilations) > 1 else ()
    inner = _trunc_rounding(state, node) if on_grid else None
    if inner is not None:
        state.add(node, avgpool.OP, [state.tensor(node.input[0], node)], avgpool.Attrs(k, s, pads, cip, inner, dilated))
        return
    if on_grid:
        state.defer_to_quant(node, avgpool.OP, lambda q: avgpool.Attrs(k, s, pads, cip, q, dilated), why)
        return
    if any(pads) and not cip:
        raise UnsupportedModelError(
            f"node '{node.name}' (AveragePool): count_include_pad=0 with pads {list(pads)} on real-scaled codes is not "
            "supported (its divisor varies by position; pad explicitly or use count_include_pad=1)")
    _window_sum(state, node, k, s, pads, dilations)


def _ceil_pads(state: ImportState, node: onnx.NodeProto, k, s, pads, refuse_partial: bool,
               dilations: tuple[int, ...] = ()) -> tuple[int, ...]:
    """``ceil_mode=1``: ONNX's ``ceil((L - k) / s) + 1`` outputs.  A last window that runs past
    the end averages its valid elements only (count_include_pad=0): the overhang is extra end
    padding of the exact average.  Refused with ``refuse_partial`` (count_include_pad=1 counts
    the declared pads and not the overhang; the window sum on real scales has one divisor)
    and where a window would lie past the input entirely."""
    n = len(k)
    k = _dilated_span(k, dilations or (1,) * n)
    size = state.type_of(state.tensor(node.input[0], node)).shape[1:]
    extra = ceil_mode_extra(size, k, s, pads)
    for i, e in enumerate(extra):
        if not e:
            continue
        if refuse_partial:
            raise UnsupportedModelError(
                f"node '{node.name}' (AveragePool): ceil_mode=1 adds a partial last window on spatial axis {i} "
                "(its divisor differs from the others); supported only with count_include_pad=0 on a power-of-two "
                "grid")
        last = (size[i] + pads[i] + pads[n + i] + e - k[i]) // s[i] * s[i] - pads[i]
        if last >= size[i]:
            raise UnsupportedModelError(f"node '{node.name}' (AveragePool): ceil_mode=1 puts the last window on "
                                        f"spatial axis {i} entirely past the input")
    return tuple(pads[:n]) + tuple(p + e for p, e in zip(pads[n:], extra))


@handles("GlobalAveragePool")
def global_average_pool(state: ImportState, node: onnx.NodeProto) -> None:
    """The mean over the spatial axes (no attributes)."""
    on_grid = _average_on_grid(state, node)
    inner = _trunc_rounding(state, node) if on_grid else None
    if inner is not None:
        state.add(node, globalavgpool.OP, [state.tensor(node.input[0], node)], globalavgpool.Attrs(inner))
        return
    if on_grid:
        state.defer_to_quant(node, globalavgpool.OP, globalavgpool.Attrs,
                             "must be followed by exactly one Quant to be exact (an average is not a fixed-point "
                             "number)")
        return
    spatial = tuple(state.type_of(state.tensor(node.input[0], node)).shape[1:])
    _window_sum(state, node, spatial, spatial, (0,) * (2 * len(spatial)))


@handles("ReduceMean")
def reduce_mean(state: ImportState, node: onnx.NodeProto) -> None:
    """``x.mean((2, 3))``: the mean over every spatial axis.  With the axes kept it is a
    ``GlobalAveragePool``; without (``keepdims=0``, torch's default) it is the exact channel
    sum with its average in flight (:func:`_window_sum`), flattened to ``(N, C)``."""
    rank = len(state.known_shape(node.input[0], node)) + 1
    axes = state.optional_const(node, 1, "the axes") if state.opset >= 18 else attribute(node, "axes")
    axes = sorted({int(a) % rank for a in np.asarray(axes, dtype=np.int64).reshape(-1)}) if axes is not None else None
    keepdims = int(attribute(node, "keepdims", 1))
    if axes != list(range(2, rank)) or keepdims not in (0, 1):
        empty = " (empty axes, noop_with_empty_axes=1: an identity)" if axes is None and \
            int(attribute(node, "noop_with_empty_axes", 0)) else ""
        raise UnsupportedModelError(
            f"node '{node.name}' (ReduceMean): axes={axes if axes is not None else 'all'}{empty} is not supported: only "
            f"the mean over every spatial axis ({list(range(2, rank))})")
    if keepdims:
        global_average_pool(state, node)
        return
    kept = f"{node.output[0]}.kept"
    spatial = tuple(state.type_of(state.tensor(node.input[0], node)).shape[1:])
    _window_sum(state, onnx.helper.make_node("ReduceMean", [node.input[0]], [kept], name=node.name), spatial, spatial,
                (0,) * (2 * len(spatial)))
    move(state, onnx.helper.make_node("Flatten", [kept], [node.output[0]], name=f"{node.name}/flatten"), flatten.OP,
         flatten.Attrs())


def _average_on_grid(state: ImportState, node: onnx.NodeProto) -> bool:
    """Whether the average's input is on a power-of-two grid and exactly one Quant with a
    power-of-two scale and zero point 0 reads it (the fused, exact-division form); also True
    where the fused form's own checks refuse the node in one line."""
    v = state.values.get(node.input[0])
    if isinstance(v, (Affine, RawInput)) or (isinstance(v, Tensor) and v.name in state.graph.scales):
        return isinstance(v, RawInput)  # the input's own refusal (no Quant before the pool)
    users = state.users(node.output[0])
    if len(users) != 1 or users[0].op_type not in QUANTIZERS:
        return True
    q = users[0]
    scale, zero = (state.values.get(v) for v in q.input[1:3])
    if not isinstance(scale, Const) or not isinstance(zero, Const):
        return True
    return scale.value.size == 1 and power_of_two_exponent(scale.value) is not None and not np.any(zero.value)


def _trunc_rounding(state: ImportState, node: onnx.NodeProto) -> quant.Attrs | None:
    """The inner rounding of the QONNX ``Trunc`` (v2) reading an average on a power-of-two grid
    with a power-of-two scale ``s`` and zero point 0, where it drops bits: ``u = round(avg / s)``
    half to even, unclamped (``trunc_v2`` clamps only after its division by ``t``), as the
    Quant the average fuses with -- its type holds every such ``u`` (an average lies between
    the least and the greatest code of its input, 0 included: the padding), so it never
    saturates.  The Trunc then rounds ``u / t`` (``u`` on its scale's grid: its own inner
    rounding is the identity).  None for any other reader."""
    users = state.users(node.output[0])
    if len(users) != 1 or users[0].op_type != "Trunc" or len(users[0].input) != 6 or drops_no_bits(state, users[0]):
        return None
    scale, zero = (state.values.get(v) for v in users[0].input[1:3])
    if not (isinstance(scale, Const) and isinstance(zero, Const)) or scale.value.size != 1 or \
            power_of_two_exponent(scale.value) is None or np.any(zero.value):
        return None
    frac = -int(power_of_two_exponent(scale.value).ravel()[0])
    x = state.type_of(state.tensor(node.input[0], node))
    lo, hi = (div_round_int(v << max(frac - x.ftype.frac, 0), 1 << max(x.ftype.frac - frac, 0), Rounding.ROUND)
              for v in (min(x.lo, 0), max(x.hi, 0)))
    width, signed = bits_for_range(lo, hi)
    if width > MAX_WIDTH:
        raise UnsupportedModelError(f"node '{users[0].name}' (Trunc): the average's values on its scale "
                                    f"{float(scale.value.ravel()[0]):g} need {width} bits (at most {MAX_WIDTH})")
    return quant.Attrs(FixedType(width, frac, signed), False, Rounding.ROUND)


def _window_sum(state: ImportState, node: onnx.NodeProto, kernel: tuple[int, ...], strides, pads,
                dilations: tuple[int, ...] = ()) -> None:
    """The exact window sum ``S`` of each channel, its average in flight as an Affine; a dilated
    window sums its taps with a kernel of ones between zeros."""
    x = state.tensor(node.input[0], node)
    pairs = state.code_scale(x).each()
    zeros = [z for _, z in pairs if z]
    if zeros and any(pads):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a zero point {float(zeros[0]):g} on a padded "
                                    "input is not supported (the padding is real 0, not code 0)")
    c = state.type_of(x).shape[0]
    dilations = dilations or (1,) * len(kernel)
    ones = np.zeros((c, 1, *_dilated_span(kernel, dilations)), dtype=np.int64)
    ones[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dilations)] = 1
    state.add(node, conv.OP, [x], conv.Attrs(ones, FixedType(1, 0, False), None, None, tuple(strides), tuple(pads),
                                            group=c))
    count = math.prod(kernel)
    state.values[node.output[0]] = Affine(node.output[0], tuple(s / count for s, _ in pairs),
                                          tuple(-z * s for s, z in pairs), source=node.name)


# -- upsampling ---------------------------------------------------------------------------
#: The largest upsampling factor a fractional nearest Resize is built from (per axis).
MAX_RESAMPLE_FACTOR = 32


@handles("Resize")
def resize(state: ImportState, node: onnx.NodeProto) -> None:
    """Nearest Resize: every output reads the input index ONNX's coordinate transformation and
    nearest mode give it.  Integer factors whose copy is ``floor(out / scale)`` are one
    upsampling; any other scales (fractional, below 1, or another index map) are the exact
    composite ``in[floor((j * q + o) / p)]`` per axis -- an upsampling by ``p``, a crop from
    ``o`` and a max pool of kernel 1 and stride ``q`` (a pick) -- with the smallest ``p``
    whose map equals ONNX's on every output index, else refused in one line."""
    if state.opset < 11:
        raise UnsupportedModelError(f"node '{node.name}' (Resize): opset {state.opset} Resize is not supported "
                                    "(opset 11 or newer)")
    if str(attribute(node, "mode", "nearest")) == "linear":
        interpolate_resize(state, node)
        return
    x = state.tensor(node.input[0], node)
    nearest = str(attribute(node, "nearest_mode", schema_default(node, "nearest_mode", state.opset)))
    transform, spatial, scales = resize_geometry(state, node, f"nearest_mode={nearest!r}")
    where = f"attributes coordinate_transformation_mode={transform!r}, nearest_mode={nearest!r}"
    steps = []
    for d, (n_in, scale) in enumerate(zip(spatial, scales)):
        n_out = resized_length(node, d, n_in, scale)
        try:
            src = nearest_sources(n_out, n_in, Fraction(scale), transform, nearest)
            other = nearest_sources(n_out, n_in, Fraction(scale), transform, nearest, resized=n_in * Fraction(scale))
            exact = nearest_coordinates(n_out, n_in, Fraction(scale), transform)
            rounded = nearest_coordinates(n_out, n_in, scale, transform)
        except ValueError:
            raise UnsupportedModelError(f"node '{node.name}' (Resize): {where} are not supported") from None
        said = f"node '{node.name}' (Resize): {where} with scale {scale:g} on spatial dim {d} ({n_in} -> {n_out})"
        if not np.array_equal(src, other):
            j = int(np.flatnonzero(src != other)[0])
            raise UnsupportedModelError(
                f"{said} reads input {int(src[j])} or {int(other[j])} for output {j} as the resized length is {n_out} "
                f"(the output's) or {n_in * scale:g} ({n_in} x {scale:g}): the file's meaning is ambiguous")
        missed = next((j for j, (e, r) in enumerate(zip(exact, rounded)) if (2 * e).denominator == 1 and e != r), None)
        if missed is not None:  # a coordinate on a rounding or neighbour boundary that float64 misses
            raise UnsupportedModelError(
                f"{said}: output {missed}'s input coordinate is exactly {exact[missed]}, {rounded[missed]!r} in "
                "float64; executors disagree on such a boundary, so the file's meaning is ambiguous")
        step = _resample_step(src, n_in)
        if step is None:
            raise UnsupportedModelError(
                f"node '{node.name}' (Resize): {where} with scale {scale:g} on spatial dim {d} read inputs "
                f"{src[:8].tolist()}...; no upsampling by at most {MAX_RESAMPLE_FACTOR} and pick of every q-th "
                "element gives that index map")
        steps.append((*step, n_out))
    _resample(state, node, x, steps)


def resize_geometry(state: ImportState, node: onnx.NodeProto, mode: str) -> tuple[str, tuple[int, ...], list[float]]:
    """A Resize's coordinate transformation, its input's spatial shape and its spatial scales
    (constant, positive, none on the batch or channels; given as scales, not sizes)."""
    if len(node.input) > 3 and node.input[3]:
        raise UnsupportedModelError(f"node '{node.name}' (Resize): input sizes is not supported (give scales)")
    scales = state.optional_const(node, 2, "the scales")
    if scales is None or scales.size < 3 or np.any(scales[:2] != 1) or np.any(scales <= 0):
        raise UnsupportedModelError(f"node '{node.name}' (Resize): needs constant positive scales on spatial dims only")
    transform = str(attribute(node, "coordinate_transformation_mode",
                              schema_default(node, "coordinate_transformation_mode", state.opset)))
    spatial = state.known_shape(node.input[0], node)[1:]
    if len(spatial) != scales.size - 2 or not all(spatial):
        raise UnsupportedModelError(f"node '{node.name}' (Resize): the input's shape is unknown, so attributes "
                                    f"coordinate_transformation_mode={transform!r}, {mode} cannot be checked")
    return transform, spatial, [float(v) for v in scales[2:]]


def resized_length(node: onnx.NodeProto, d: int, n_in: int, scale: float) -> int:
    """ONNX's output length ``floor(n_in * scale)`` (the float32 scale), refused where it is 0."""
    n_out = int(math.floor(n_in * np.float32(scale)))
    if n_out < 1:
        raise UnsupportedModelError(f"node '{node.name}' (Resize): scale {scale:g} on spatial dim {d} of length "
                                    f"{n_in} leaves no output (floor({n_in} x {scale:g}) = {n_out})")
    return n_out


def _resample_step(src: np.ndarray, n_in: int) -> tuple[int, int, int] | None:
    """The smallest ``(p, o, q)`` with ``src[j] == floor((j * q + o) / p)`` for every output
    index ``j`` (None: no ``p`` up to :data:`MAX_RESAMPLE_FACTOR` does).  ``o`` lies in
    ``[p * src[0], p * src[0] + p)``, and ``q`` near ``p`` times the mean step of ``src``."""
    j, last = np.arange(len(src)), len(src) - 1
    for p in range(1, MAX_RESAMPLE_FACTOR + 1):
        span = int(src[-1] - src[0])
        qs = range(1, 2) if last == 0 else range(max(1, p * (span - 1) // last), p * (span + 1) // last + 2)
        for q in qs:
            for o in range(p * int(src[0]), p * int(src[0]) + p):
                if np.array_equal((j * q + o) // p, src):
                    return p, o, q
    return None


def interpolate_resize(state: ImportState, node: onnx.NodeProto) -> None:
    """Linear Resize: per axis, each output reads the two inputs around the exact coordinate
    ONNX's transformation gives it (the file's float32 scale; indices clamped, as ONNX's edge
    padding does) with rational weights ``1 - r`` and ``r``; the integer numerators over a
    common denominator are an :mod:`...ops.interpolate` node whose sums the value carries in
    flight, scaled by ``1 / D``, to the Quant (or output) that ends it.  Refused in one line:
    antialiasing a downscale (another filter), a coordinate the file's two readings of the
    resized length place differently, sums wider than the reference holds."""
    transform, spatial, scales = resize_geometry(state, node, "mode='linear'")
    if attribute(node, "antialias", 0) and min(scales) < 1:
        raise UnsupportedModelError(f"node '{node.name}' (Resize): attribute antialias=1 with a downscale (scales "
                                    f"{scales}) is not supported")
    axes = []
    for d, (n_in, scale) in enumerate(zip(spatial, scales)):
        n_out = resized_length(node, d, n_in, scale)
        try:
            coords = nearest_coordinates(n_out, n_in, Fraction(scale), transform)
            other = nearest_coordinates(n_out, n_in, Fraction(scale), transform, resized=n_in * Fraction(scale))
        except ValueError:
            raise UnsupportedModelError(f"node '{node.name}' (Resize): attribute coordinate_transformation_mode="
                                        f"{transform!r} is not supported in mode 'linear'") from None
        if coords != other:
            j = next(j for j, (a, b) in enumerate(zip(coords, other)) if a != b)
            raise UnsupportedModelError(
                f"node '{node.name}' (Resize): coordinate_transformation_mode={transform!r} with scale {scale:g} on "
                f"spatial dim {d} places output {j} at {float(coords[j]):g} or {float(other[j]):g} as the resized "
                f"length is {n_out} (the output's) or {n_in * scale:g}: the file's meaning is ambiguous")
        rounded = nearest_coordinates(n_out, n_in, scale, transform)
        # an integer coordinate k that float64 places just above k: ONNX's reference evaluator then
        # reads the neighbours (k - 1, k) with weights (1, 0) (below k, or at k = 0, it reads in[k])
        missed = next((j for j, (e, r) in enumerate(zip(coords, rounded)) if e.denominator == 1 and r > e >= 1), None)
        if missed is not None:
            raise UnsupportedModelError(
                f"node '{node.name}' (Resize): coordinate_transformation_mode={transform!r} with scale {scale:g} on "
                f"spatial dim {d}: output {missed}'s input coordinate is exactly {coords[missed]}, "
                f"{rounded[missed]!r} in float64; executors disagree on its neighbours, so the file's meaning is "
                "ambiguous")
        axes.append(linear_axis(coords, n_in))
    attrs = interpolate.Attrs(tuple(axes))
    f = state.values.get(node.input[0])
    if isinstance(f, Affine):
        if f.piecewise:
            raise UnsupportedModelError(f"node '{node.name}' (Resize): interpolates the output of '{f.source}', bent by "
                                        "a ReLU/Clip/LeakyRelu before a Quant; not supported")
        a, b, value = f.a, f.b, f.value
    else:
        value = state.tensor(node.input[0], node)
        pairs = state.code_scale(value).each()
        a, b = tuple(s for s, _ in pairs), tuple(-z * s for s, z in pairs)
    ir = state.add(node, interpolate.OP, [value], attrs, reads_real=True)
    state.values[node.output[0]] = Affine(ir.output, tuple(v / attrs.denominator for v in a), b, source=node.name)


def linear_axis(coords: list[Fraction], n_in: int) -> interpolate.Axis:
    """The two inputs and integer weights of each output at exact coordinate ``x``:
    ``(1 - r) in[i] + r in[i + 1]`` with ``i = floor(x)``, ``r = x - i``, indices clamped."""
    clamp = lambda i: min(max(i, 0), n_in - 1)  # noqa: E731
    parts = [(math.floor(x), x - math.floor(x)) for x in coords]
    den = math.lcm(*(r.denominator for _, r in parts))
    return interpolate.Axis(tuple((clamp(i), clamp(i + 1)) for i, _ in parts),
                            tuple((int((1 - r) * den), int(r * den)) for _, r in parts), den)


def _resample(state: ImportState, node: onnx.NodeProto, x: str, steps: list[tuple[int, int, int, int]]) -> None:
    """Per axis ``(p, o, q, n_out)``: an upsampling by ``p``, a crop from ``o`` of the
    ``(n_out - 1) * q + 1`` elements the picks span (unless the picks start at 0 and end
    there), a max pool of kernel 1 and stride ``q``; each only where it does something, the
    last as the node's output."""
    shape = state.type_of(x).shape[1:]
    ps, os_, qs, outs = (tuple(step[i] for step in steps) for i in range(4))
    plan = []
    if any(p != 1 for p in ps):
        plan.append((upsample.OP, upsample.Attrs(ps)))
    upsampled = tuple(n * p for n, p in zip(shape, ps))
    if any(os_) or tuple((u - 1) // q + 1 for u, q in zip(upsampled, qs)) != outs:  # else the picks end there
        plan.append((crop.OP, crop.Attrs(os_, tuple((m - 1) * q + 1 for m, q in zip(outs, qs)))))
    if any(q != 1 for q in qs):
        plan.append((maxpool.OP, maxpool.Attrs((1,) * len(steps), qs)))
    if not plan:  # scale 1: the input itself
        state.values[node.output[0]] = state.values[node.input[0]]
        return
    v = x
    for k, (op, attrs) in enumerate(plan):
        v = state.add(node, op, [v], attrs, part=None if k == len(plan) - 1 else f"resample{k}").output


__all__ = ["average_pool", "global_average_pool", "global_max_pool", "kernel_shape", "max_pool", "pad", "resize",
           "interpolate_resize", "linear_axis", "resize_geometry", "resized_length", "window"]
