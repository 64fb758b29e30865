"""ONNX's linear quantizers, read as the spec defines them at every opset from 10:
``QuantizeLinear`` is ``y = saturate(round_half_even(x / y_scale) + y_zero_point)`` and
``DequantizeLinear`` is ``(x - x_zero_point) * x_scale``, per tensor or along ``axis`` (opset
13 on), on the integer types (2, 4, 8 and 16 bits, signed or not; int32 for
DequantizeLinear).  Brevitas' QCDQ export writes them (with a ``Clip`` on the codes between
the two for narrow or sub-8-bit ranges); nothing turns them into another form first, so a
per-axis scale keeps its axis.

* ``DequantizeLinear`` of integer constants (an int8 / uint8 / int32 initializer, or the codes
  of a QuantizeLinear of a constant): the integer weights ``x - x_zero_point`` with the scale
  of every element (:class:`~..values.Const` with codes and scale), exact;
* ``QuantizeLinear`` of a constant: its integer codes, a constant (the division decided in
  exact rationals);
* ``QuantizeLinear`` of an activation: its codes wait for their DequantizeLinear
  (:class:`~..values.QuantizedCodes`), a ``Clip`` between them narrowing their range;
* the pair on an activation is one quantizer.  With one zero point ``z`` and codes in
  ``[lo, hi]``, ``y - z = clamp(round_half_even(x / s), lo - z, hi - z)`` (an integer moves
  out of a clamp and a rounding): QONNX's ``Quant`` with scale ``s`` (per tensor or per
  channel), zero point 0 and that range, read by the Quant handler like any Quant (where the
  range is no bit width's, a clip of the real value to ``[(lo - z) s, (hi - z) s]`` first;
  on the graph input with a scale per channel, that range is the input quantizer's own, one
  for every channel).  Zero points that differ per channel are the Quant's own zero points where every one is
  even (``round_half_even(v) + z == round_half_even(v + z)`` for even ``z``); an odd one
  rounds ties the other way and is refused.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import onnx
from onnx import TensorProto, helper

from ...errors import UnsupportedModelError
from ...exact.rounding import Rounding
from ...ir.types import bits_for_range, power_of_two_exponent
from ...ops import quant
from ..attributes import attribute
from ..load import QONNX_DOMAIN
from ..real import check_finite, clip_real, constant_codes
from ..registry import handles
from ..state import ImportState
from ..values import Const, Pending, QuantizedCodes, RawInput, fractions
from .quantizers import quant_node

#: The integer code types of QuantizeLinear / DequantizeLinear and their ranges.
CODE_RANGES = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127), TensorProto.UINT16: (0, 65535),
               TensorProto.INT16: (-32768, 32767), TensorProto.UINT4: (0, 15), TensorProto.INT4: (-8, 7),
               TensorProto.UINT2: (0, 3), TensorProto.INT2: (-2, 1), TensorProto.INT32: (-2**31, 2**31 - 1)}
#: float64 holds every integer times a scale of this many significant bits or fewer exactly.
FLOAT64_BITS = 53


def _element_type(state: ImportState, name: str) -> int | None:
    """The ONNX element type of a tensor of the model (an initializer, a Constant's, or as shape
    inference recorded it)."""
    g = state.model.graph
    for t in g.initializer:
        if t.name == name:
            return t.data_type
    for n in g.node:
        if n.op_type == "Constant" and name in n.output:
            value = attribute(n, "value")
            return value.data_type if isinstance(value, onnx.TensorProto) else None
    for vi in [*g.value_info, *g.input, *g.output]:
        if vi.name == name:
            return vi.type.tensor_type.elem_type
    return None


def _code_range(state: ImportState, node: onnx.NodeProto) -> tuple[int, int]:
    """The range of a QuantizeLinear's codes: its zero point's type, else ``output_dtype``
    (opset 21), else uint8 (the spec's default)."""
    zero = node.input[2] if len(node.input) > 2 and node.input[2] else None
    dtype = _element_type(state, zero) if zero else (attribute(node, "output_dtype", 0) or TensorProto.UINT8)
    if dtype not in CODE_RANGES or dtype == TensorProto.INT32:
        name = TensorProto.DataType.Name(dtype) if dtype in TensorProto.DataType.values() else str(dtype)
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): codes of type {name} are not supported (only "
                                    "the integer types int2/uint2 to int16/uint16)")
    return CODE_RANGES[dtype]


def _parameters(state: ImportState, node: onnx.NodeProto, rank: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(scale, zero point, axis counted from the batch) of a QuantizeLinear / DequantizeLinear;
    scale and zero point one value (per tensor) or a vector along the axis."""
    scale = state.const(state.input_name(node, 1, "the scale"), node, "the scale").astype(np.float64)
    zero = state.optional_const(node, 2, "the zero point")
    zero = np.zeros(1) if zero is None else zero.astype(np.float64)
    check_finite(scale, node, node.input[1])
    if np.any(scale <= 0):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): scale {float(scale[scale <= 0][0]):.9g} is "
                                    "not positive")
    axis = int(attribute(node, "axis", 1))
    axis = axis + rank if axis < 0 else axis
    if scale.size == 1 and zero.size == 1:
        return scale.reshape(1), zero.reshape(1), axis
    if state.opset < 13:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a scale of shape {list(scale.shape)} at "
                                    f"opset {state.opset}: one scale per tensor only (axis arrives in opset 13)")
    if scale.ndim != 1 or zero.size not in (1, scale.size) or not 0 <= axis < rank:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): scale {list(scale.shape)} / zero point "
                                    f"{list(zero.shape)} along axis {attribute(node, 'axis', 1)} of a rank-{rank} "
                                    "tensor: only one value, or one per index of the axis")
    return scale, np.broadcast_to(zero.reshape(-1), scale.shape), axis


def _along(values: np.ndarray, axis: int, shape: tuple[int, ...], node: onnx.NodeProto) -> np.ndarray:
    """One value, or a vector broadcast along ``axis`` of ``shape``."""
    if values.size == 1:
        return values.reshape(())
    if shape[axis] != values.size:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {values.size} scales along axis {axis} of a "
                                    f"tensor of shape {list(shape)}")
    dims = [1] * len(shape)
    dims[axis] = values.size
    return values.reshape(dims)


def _rank(state: ImportState, name: str, node: onnx.NodeProto) -> int:
    shape = state.shape_of(name)
    if not shape and not isinstance(state.values.get(name), Const):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): the shape of its input '{name}' is unknown")
    return len(shape) + 1


@handles("QuantizeLinear")
def quantize_linear(state: ImportState, node: onnx.NodeProto) -> None:
    lo, hi = _code_range(state, node)
    x = state.values.get(node.input[0])
    if isinstance(x, Const):
        scale, zero, axis = _parameters(state, node, x.value.ndim)
        s, z = _along(scale, axis, x.value.shape, node), _along(zero, axis, x.value.shape, node)
        check_finite(x.value, node, node.input[0])
        big = float(2**62)  # no clamp before the zero point is added: the codes' range clamps after
        rounded = constant_codes(x.value, np.broadcast_to(s, x.value.shape), np.zeros(1), -big, big, Rounding.ROUND,
                                 False)
        state.values[node.output[0]] = Const(np.clip(rounded + z, lo, hi))
        return
    scale, zero, axis = _parameters(state, node, _rank(state, node.input[0], node))
    state.values[node.output[0]] = QuantizedCodes(node.input[0], scale, zero, axis, lo, hi, node)


@handles("DequantizeLinear")
def dequantize_linear(state: ImportState, node: onnx.NodeProto) -> None:
    x = state.values.get(node.input[0])
    if isinstance(x, Const):
        _dequantize_constant(state, node, x)
    elif isinstance(x, QuantizedCodes):
        _dequantize_codes(state, node, x)
    else:
        raise UnsupportedModelError(f"node '{node.name}' (DequantizeLinear): its input '{node.input[0]}' is neither "
                                    "integer constants nor the codes of a QuantizeLinear; not supported")


def _dequantize_constant(state: ImportState, node: onnx.NodeProto, x: Const) -> None:
    """Integer constants: the weights ``codes - zero`` with their scale, exact."""
    codes = x.value
    if x.float_scaled or np.any(codes != np.round(codes)):
        raise UnsupportedModelError(f"node '{node.name}' (DequantizeLinear): its input '{node.input[0]}' is not "
                                    "integer codes")
    scale, zero, axis = _parameters(state, node, codes.ndim)
    ints = codes - _along(zero, axis, codes.shape, node)
    full = np.broadcast_to(_along(scale, axis, codes.shape, node), codes.shape).astype(np.float64)
    top = int(np.abs(ints).max(initial=0))
    digits = max(Fraction(float(v)).numerator.bit_length() for v in np.unique(scale))
    if top.bit_length() + digits > FLOAT64_BITS:
        raise UnsupportedModelError(
            f"node '{node.name}' (DequantizeLinear): code {top} times a scale of {digits} significant bits is not a "
            f"float64 number ({top.bit_length() + digits} bits > {FLOAT64_BITS}); not supported")
    value = ints * full
    state.values[node.output[0]] = Const(value) if power_of_two_exponent(scale) is not None else \
        Const(value, ints, full)


def _bit_range(lo: int, hi: int) -> tuple[int, bool, bool] | None:
    """(bits, signed, narrow) of the QONNX Quant whose codes are exactly ``[lo, hi]`` (1-bit
    signed, bipolar in QONNX, excluded), None when no bit width's range is."""
    bits, signed = bits_for_range(lo, hi)
    for narrow in (False, True):
        if (bits >= 2 or not signed) and (quant.min_int(signed, narrow, bits), quant.max_int(signed, narrow, bits)) == \
                (lo, hi):
            return bits, signed, narrow
    return None


def _dequantize_codes(state: ImportState, node: onnx.NodeProto, codes: QuantizedCodes) -> None:
    """A QuantizeLinear -> DequantizeLinear pair on an activation: one QONNX Quant (see the
    module's docstring), named after the DequantizeLinear (after the QuantizeLinear where a
    nonlinearity waits for it)."""
    q = codes.node
    rank = _rank(state, codes.source, node)
    scale, zero, axis = _parameters(state, node, rank)
    if not (np.array_equal(scale, codes.scale) and np.array_equal(zero, codes.zero) and
            (scale.size == 1 or axis == codes.axis)):
        raise UnsupportedModelError(f"node '{node.name}' (DequantizeLinear): its scale / zero point / axis differ from "
                                    f"those of QuantizeLinear '{q.name}'; not supported")
    if scale.size > 1 and axis != 1:
        raise UnsupportedModelError(f"node '{node.name}' (DequantizeLinear): per-axis quantization of an activation "
                                    f"along axis {axis}, not its channels (axis 1); not supported")
    zeros = np.unique(zero)
    if zeros.size == 1:
        z, quant_zero = int(zeros[0]), np.zeros(1)
    elif np.all(zeros % 2 == 0):
        z, quant_zero = 0, zero
    else:
        raise UnsupportedModelError(
            f"node '{node.name}' (DequantizeLinear): zero points {zeros[:4].astype(int).tolist()} differ per channel and "
            f"{int(zeros[zeros % 2 != 0][0])} is odd: round_half_even(v) + z differs from round_half_even(v + z) "
            "on ties, a per-channel range the quantizer does not model")
    lo, hi = codes.lo - z, codes.hi - z
    source, form = codes.source, _bit_range(lo, hi)
    raw = state.values.get(source)
    if form is None and isinstance(raw, RawInput) and scale.size > 1:  # per channel, one code range: the input's
        per_channel = lambda v: fractions(_along(v, axis, (1, *raw.shape), node).ravel())  # noqa: E731
        state.quantize_input(node, raw, per_channel(scale), per_channel(quant_zero), lo, hi, Rounding.ROUND)
        return
    if form is None and (zeros.size > 1 or scale.size > 1 or isinstance(state.values.get(source), Pending)):
        raise UnsupportedModelError(f"node '{node.name}' (DequantizeLinear): codes in [{codes.lo}, {codes.hi}] with "
                                    "per-channel parameters or after a nonlinearity: a range no bit width has; not "
                                    "supported")
    if form is None:  # clamp(R(v), lo, hi) == R(clamp(v, lo, hi)) for integer bounds
        bits, signed = bits_for_range(lo, hi)
        form = max(bits, 2) if signed else bits, signed, False
        clip = helper.make_node("Clip", [source], [f"{node.output[0]}:codes_range"], name=node.name)
        s = Fraction(float(scale[0]))
        clip_real(state, clip, lo * s, hi * s)
        source = clip.output[0]
    shape = (1, *state.shape_of(codes.source)) if scale.size > 1 else (1,)
    inputs = []
    for what, value in (("scale", _along(scale, axis, shape, node)), ("zero", _along(quant_zero, axis, shape, node)),
                        ("bits", np.array(float(form[0])))):
        name = f"{node.output[0]}:{what}"
        state.values[name] = Const(np.asarray(value, dtype=np.float64))
        inputs.append(name)
    name = q.name if q.name in state.deferred else node.name
    quant_node(state, helper.make_node("Quant", [source, *inputs], [node.output[0]], name=name, domain=QONNX_DOMAIN,
                                       signed=int(form[1]), narrow=int(form[2]), rounding_mode="ROUND"))
    if node.output[0] in state.graph.origin:
        state.graph.origin[node.output[0]] = node.name


def clip_constant_or_codes(state: ImportState, node: onnx.NodeProto, lo: Fraction | None, hi: Fraction | None) -> bool:
    """A ``Clip`` of a constant (folded) or of a QuantizeLinear's codes (their range narrowed);
    False for anything else."""
    x = state.values.get(node.input[0])
    if isinstance(x, Const) and not x.float_scaled:
        low, high = (None if b is None else float(b) for b in (lo, hi))
        state.values[node.output[0]] = Const(np.clip(x.value, low, high))
        return True
    if not isinstance(x, QuantizedCodes):
        return False
    low = x.lo if lo is None else max(x.lo, -((-lo.numerator) // lo.denominator))
    high = x.hi if hi is None else min(x.hi, hi.numerator // hi.denominator)
    if low > high:
        raise UnsupportedModelError(f"node '{node.name}' (Clip): clips the codes of '{x.node.name}' to nothing")
    state.values[node.output[0]] = replace(x, lo=low, hi=high)
    return True


__all__ = ["CODE_RANGES", "clip_constant_or_codes", "dequantize_linear", "quantize_linear"]
