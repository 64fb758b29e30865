"""QONNX quantizers: ``Quant`` (qonnx 1.0 also names it ``IntQuant``) and ``BipolarQuant`` on
constants, on the graph input and on activations, and ``Trunc`` (Brevitas' ``TruncAvgPool``).

A Quant on a constant gives integer codes (kept with their scale when it is not a power of
two; a zero point subtracted: ``(q - z) * s`` is the weight); on the raw input it becomes the
design's input quantizer (float operations before it folded in; per tensor or per channel; a
second, different quantizer of the same input makes the input the cell of the real line:
``frontend/shared_input.py``); on codes of a power-of-two
grid with zero point 0, a rounding mode and saturation ap_fixed has, a ``quant`` node (or the
op waiting to fuse with it); anywhere else -- a value in flight, scaled codes, scales or zero
points per channel, any real zero point, CEIL / UP, unsigned narrow range -- one ``rescale``
node, the primitive per channel.

``Trunc``, by qonnx's definition (``trunc_v2``): ``y = clamp(R(round(x / s + z) / t)) - z / t``,
times the output scale ``S``, where ``t = S / s`` (a power of two).  With ``t = 1`` it is a
Quant with ROUND.  Otherwise the inner half-even rounding ``u`` is exact integers: an
integer-linear function of the accumulator where it is one over the whole reachable range
(an average's window sum on the scale's grid: Brevitas' TruncAvgPool), or a rescale of its
own; ``clamp(R(u / t))`` is then one rescale.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import onnx
from onnx import helper

from ...errors import UnsupportedModelError
from ...exact.rounding import Rounding, div_round_int
from ...ir.meaning import CodeScale
from ...ir.types import MAX_WIDTH, FixedType, dyadic_codes, dyadic_parts, power_of_two_exponent
from ...ops import OPS, quant
from ..attributes import attribute
from ..load import QONNX_DOMAIN
from ..real import Quantizer, as_affine, check_finite, constant_codes, grid_frac, per_channel, quant_of_affine
from ..registry import handles
from ..state import ImportState
from ..values import Affine, Const, Pending, RawInput, Tensor, fractions, whole_number


def quant_params(state: ImportState, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    """(scale, zero point, power-of-two exponents of the scale or None, bit width) of a Quant."""
    scale, zp, bits = (state.const(state.input_name(node, i, what), node, what)
                       for i, what in ((1, "the scale"), (2, "the zero point"), (3, "the bit width")))
    if not np.all(np.isfinite(zp)):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): zero point {zp.ravel()[:4]} is not finite")
    width = whole_number(bits)
    if width is None or not 1 <= width <= MAX_WIDTH:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): bit width {bits.ravel()[:4]} is not an integer "
                                    f"in 1..{MAX_WIDTH}")
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        bad = next(float(s) for s in scale.ravel() if not (np.isfinite(s) and s > 0))
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): scale {bad:.9g} is not a positive finite "
                                    "number")
    return scale, zp, power_of_two_exponent(scale), width


def rounding_of(node: onnx.NodeProto, default: str = "ROUND") -> Rounding:
    try:
        return Rounding.parse(attribute(node, "rounding_mode", default))
    except ValueError:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): unknown rounding mode "
                                    f"{str(attribute(node, 'rounding_mode')).upper()}") from None


def _quant_constant(state: ImportState, node: onnx.NodeProto, x: Const, scale, zp, exp, bits: int, signed: bool,
                    narrow: bool, rounding: Rounding) -> None:
    """QONNX's quantizer on a constant: codes ``clip(R(x / s + z))``, value ``(codes - z) * s``.
    The integer weights are ``codes - z`` (a zero point's binary fraction, if any, moved into
    the scale: exact); a float scale stays beside them."""
    try:
        shape = np.broadcast_shapes(x.value.shape, scale.shape, zp.shape)
    except ValueError:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): scale {list(scale.shape)} / zero point "
                                    f"{list(zp.shape)} do not broadcast to its input {list(x.value.shape)}") from None
    check_finite(x.value, node, node.input[0])
    bipolar = bits == 1 and signed  # QONNX: 1-bit signed Quant is bipolar
    lo, hi = quant.min_int(signed, narrow, bits), quant.max_int(signed, narrow, bits)
    codes = constant_codes(x.value, scale, zp, lo, hi, rounding, bipolar)
    full = np.broadcast_to(scale, shape).astype(np.float64)
    zero = np.broadcast_to(zp, shape).astype(np.float64)
    try:
        zfrac = max(dyadic_codes(zero)[1], 0)
    except ValueError as exc:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): zero point: {exc}") from None
    ints = np.ldexp(np.broadcast_to(codes, shape) - zero, zfrac)  # (codes - z) * 2**zfrac: integers, exact
    if np.abs(ints).max(initial=0) >= 2.0 ** MAX_WIDTH or np.any(ints != np.round(ints)):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): codes minus the zero point need more than "
                                    f"{MAX_WIDTH} bits as integers")
    value = (np.broadcast_to(codes, shape) - zp) * full
    state.values[node.output[0]] = Const(value, ints, full * 2.0 ** -zfrac) if exp is None else Const(value)


@handles("Quant", "IntQuant", domain=QONNX_DOMAIN)
def quant_node(state: ImportState, node: onnx.NodeProto) -> None:
    """``Quant`` (qonnx 1.0 also names it ``IntQuant``): on a constant, its codes; on the raw
    input, the design's input quantizer; on codes of a power-of-two grid with zero point 0, a
    rounding and saturation ap_fixed expresses, a ``requant`` (or the op waiting to fuse with
    it); anywhere else (a value in flight, scaled codes, per-channel scales, zero points,
    CEIL / UP, unsigned narrow range) one ``rescale``."""
    scale, zp, exp, bits = quant_params(state, node)
    signed, narrow = bool(attribute(node, "signed", 1)), bool(attribute(node, "narrow", 0))
    rounding = rounding_of(node)
    x = state.values.get(node.input[0])
    if isinstance(x, Const):
        _quant_constant(state, node, x, scale, zp, exp, bits, signed, narrow, rounding)
        return
    q = Quantizer(*_per_channel(state, node, x, scale, zp), quant.min_int(signed, narrow, bits),
                  quant.max_int(signed, narrow, bits), rounding, bits == 1 and signed)
    grid = None if q.bipolar else grid_frac(q.meaning)
    if isinstance(x, RawInput):
        _quantize_raw_input(state, node, x, q, grid, bits, signed, narrow)
        return
    ap_fixed = rounding.ap_fixed is not None and not (narrow and not signed)
    if node.input[0] in state.moved_after_quant:
        _quant_then_move(state, node, x, q)
        return
    if isinstance(x, Affine) or (isinstance(x, Tensor) and (x.name in state.graph.scales or grid is None or
                                                             not ap_fixed)):
        quant_of_affine(state, node, as_affine(state, node.input[0], node), q)
        return
    if isinstance(x, Pending) and grid is None:
        _fuse_float_scale(state, node, q, bits, signed, narrow)
        return
    attrs = quant.Attrs(FixedType(bits, grid, signed), narrow, rounding)
    if node.name in state.deferred:
        deferred = state.deferred.pop(node.name)
        state.add(node, deferred.op, deferred.inputs, deferred.make(attrs), reads_real=deferred.reads_real)
        return
    state.add(node, quant.OP, [state.tensor(node.input[0], node)], attrs)


def _quant_then_move(state: ImportState, node: onnx.NodeProto, x: Affine, q: Quantizer) -> None:
    """The Quant after a transpose that waits for it (``state.moved_after_quant``: biased
    float-scaled token sums, a map in flight transposed into a sequence): rounded per channel
    on the accumulator, then the transpose moves the codes.  A Quant of one scale and zero
    point commutes with the transpose (it rounds every element alike), so this is the Quant of
    the transposed value; one per channel of the transposed value is refused."""
    back = state.moved_after_quant.pop(node.input[0])
    if q.meaning.channels > 1:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): per-channel scales or zero points after a "
                                    "transpose of a value in flight whose channels have their own constants (biased "
                                    "float-scaled sums over tokens, a map permuted into a sequence) are not supported")
    codes = quant_of_affine(state, node, x, q, part="features")
    state.add(node, OPS[back.op], [codes], back.attrs, keeps_scale=True)


def _fuse_float_scale(state: ImportState, node: onnx.NodeProto, q: Quantizer, bits: int, signed: bool,
                      narrow: bool) -> None:
    """The op waiting for this Quant, with its one float scale ``mult * 2**-frac`` (zero point
    0): the op holds the integer codes and the graph carries the scale; refused in one line
    where the op cannot, or the scale is per channel, has a zero point or is bipolar."""
    deferred = state.deferred[node.name]
    if deferred.make_scaled is None or q.meaning.channels > 1 or q.zero[0] != 0 or q.bipolar:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a float or per-channel scale, zero point or "
                                    f"bipolar output after {deferred.op.name} is not supported")
    frac, mult = dyadic_parts(q.scale[0])
    state.deferred.pop(node.name)
    attrs = quant.Attrs(FixedType(bits, frac, signed), narrow, q.rounding)
    state.add(node, deferred.op, deferred.inputs, deferred.make_scaled(attrs, mult), reads_real=deferred.reads_real)
    state.graph.scales[node.output[0]] = CodeScale((q.scale[0],), (Fraction(0),))


def _per_channel(state: ImportState, node: onnx.NodeProto, x, scale: np.ndarray, zp: np.ndarray
                 ) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    """An activation quantizer's scale and zero point, one for every element or one per channel
    of the tensor it quantizes."""
    if scale.size == 1 and zp.size == 1:
        return fractions(scale), fractions(zp)
    if isinstance(x, RawInput):
        shape = x.shape
    elif isinstance(x, Affine):
        shape = state.type_of(x.value).shape
    else:
        shape = state.type_of(state.tensor(node.input[0], node)).shape
    return per_channel(node, scale, shape, "scale"), per_channel(node, zp, shape, "zero point")


def _quantize_raw_input(state: ImportState, node: onnx.NodeProto, x: RawInput, q: Quantizer, grid: int | None,
                        bits: int, signed: bool, narrow: bool) -> None:
    """The model's first quantizer, on the real input: per tensor, or with a scale and zero
    point per channel (axis 0 of a sample: (C, 1, 1), (C, 1), or every element of a vector),
    its codes then carrying each channel's meaning for the layer that reads them."""
    scale, zero = (values[:1] if len(set(values)) == 1 else values for values in (q.scale, q.zero))
    if q.bipolar and any(zero):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a bipolar (1-bit signed) input quantizer "
                                    f"with zero point {float(next(z for z in zero if z)):g} is not supported")
    if grid is None or x.preprocessed:
        state.quantize_input(node, x, scale, zero, *((0, 1) if q.bipolar else (q.qmin, q.qmax)), q.rounding, q.bipolar)
        return
    state.quantize_input_on_grid(node, x, quant.Attrs(FixedType(bits, grid, signed), narrow, q.rounding))


@handles("BipolarQuant", domain=QONNX_DOMAIN)
def bipolar_quant(state: ImportState, node: onnx.NodeProto) -> None:
    x = state.values.get(node.input[0])
    scale = state.const(state.input_name(node, 1, "the scale"), node, "the scale")
    if scale.size != 1 or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise UnsupportedModelError(f"node '{node.name}' (BipolarQuant): scale {scale.ravel()[:4]} is not one positive "
                                    "finite number")
    if isinstance(x, Const):
        check_finite(x.value, node, node.input[0])
        codes = np.where(x.value / scale >= 0, 1.0, -1.0)
        if power_of_two_exponent(scale) is None:
            state.values[node.output[0]] = Const(codes * scale, codes, np.broadcast_to(scale, codes.shape).astype(np.float64))
        else:
            state.values[node.output[0]] = Const(codes * scale)
        return
    fscale = Fraction(float(scale.ravel()[0]))
    if isinstance(x, RawInput):
        state.quantize_input(node, x, (fscale,), (Fraction(0),), 0, 1, Rounding.ROUND, True)
        return
    quant_of_affine(state, node, as_affine(state, node.input[0], node),
                    Quantizer((fscale,), (Fraction(0),), 0, 1, Rounding.ROUND, bipolar=True))


# -- QONNX Trunc ----------------------------------------------------------------------
def drops_no_bits(state: ImportState, node: onnx.NodeProto) -> bool:
    """A 6-input (v2) Trunc whose output_scale equals its scale (one number each)."""
    if len(node.input) != 6:
        return False
    scale, out_scale = (state.values.get(node.input[i]) for i in (1, 4))
    return (isinstance(scale, Const) and isinstance(out_scale, Const) and scale.value.size == 1 and
            out_scale.value.size == 1 and float(scale.value.ravel()[0]) == float(out_scale.value.ravel()[0]))


@handles("Trunc", domain=QONNX_DOMAIN)
def trunc(state: ImportState, node: onnx.NodeProto) -> None:
    if len(node.input) != 6:
        raise UnsupportedModelError(f"node '{node.name}' (Trunc): the {len(node.input)}-input Trunc (QONNX Trunc v1) is "
                                    "not supported; only the 6-input form current brevitas exports")
    if drops_no_bits(state, node):
        as_quant = helper.make_node("Quant", [node.input[0], node.input[1], node.input[2], node.input[5]],
                                    list(node.output), name=node.name, domain=QONNX_DOMAIN,
                                    signed=int(attribute(node, "signed", 1)), narrow=int(attribute(node, "narrow", 0)),
                                    rounding_mode="ROUND")
        quant_node(state, as_quant)
        return
    scale, out_scale, zero, bits = (state.const(state.input_name(node, i, what), node, what).ravel() for i, what in (
        (1, "the scale"), (4, "the output scale"), (2, "the zero point"), (5, "the output bit width")))
    n = whole_number(bits)
    if scale.size != 1 or out_scale.size != 1 or zero.size != 1 or n is None or not 1 <= n <= MAX_WIDTH:
        raise UnsupportedModelError(f"node '{node.name}' (Trunc): only one scale, output scale, zero point and bit width "
                                    f"(1..{MAX_WIDTH}) are supported, got scale {scale[:4].tolist()}, zero "
                                    f"{zero[:4].tolist()}, bit width {bits[:4].tolist()}")
    check_finite(np.concatenate([scale, out_scale, zero]), node, "scale / zero point")
    s, big, z = (Fraction(float(v[0])) for v in (scale, out_scale, zero))
    t = big / s if s > 0 else Fraction(0)
    if s <= 0 or t.numerator & (t.numerator - 1) or t.denominator & (t.denominator - 1):
        raise UnsupportedModelError(f"node '{node.name}' (Trunc): output scale {float(big):.9g} over scale "
                                    f"{float(s):.9g} is {float(t):.9g}, not a power of two")
    signed, narrow = bool(attribute(node, "signed", 1)), bool(attribute(node, "narrow", 0))
    try:
        rounding = Rounding.parse(attribute(node, "rounding_mode", "FLOOR"))
    except ValueError as exc:
        raise UnsupportedModelError(f"node '{node.name}' (Trunc): {exc}") from None
    u = _trunc_round(state, node, as_affine(state, node.input[0], node), s, z)
    out = Quantizer((t,), (Fraction(0),), quant.min_int(signed, narrow, n), quant.max_int(signed, narrow, n), rounding)
    quant_of_affine(state, node, u, out, CodeScale((big,), (z / t,)))


def _trunc_round(state: ImportState, node: onnx.NodeProto, f: Affine, s: Fraction, z: Fraction) -> Affine:
    """Trunc's inner rounding ``u = round_half_even(v / s + z)`` of ``v = a * acc + b`` (clipped
    or not), as integers ``u`` in flight.  Where it is integer-linear in the accumulator over
    the whole reachable range -- ``u = m * acc + n``: an average's window sum on the scale's grid
    (TruncAvgPool), even where float32 holds the scale ``s_x / 9`` inexactly -- that Affine.  It
    is, per channel, when with ``m`` the integer nearest ``a / s`` the rest ``r(acc) = (a / s -
    m) * acc + b / s + z`` lies strictly within ``(n - 1/2, n + 1/2)`` at both ends of the range
    (it is linear, so everywhere between): then ``m * acc + r`` is never a tie and rounds to
    ``m * acc + n`` (an integer added to a value that is no tie rounds with it).  Otherwise ``u``
    is computed: a rescale of its own, its codes in flight."""
    x = state.type_of(f.value)
    linear = []
    for a, b in f.each():
        m = round(a / s)
        rest = [(a / s - m) * v + b / s + z for v in (x.lo, x.hi)]
        n = _round_half_even(rest[0])
        linear.append((m, n) if all(abs(r - n) < Fraction(1, 2) for r in rest) else None)
    bounds = tuple(None if v is None else Fraction(_round_half_even(v / s + z)) for v in (f.lo, f.hi))
    if all(linear):
        return Affine(f.value, tuple(m for m, _ in linear), tuple(Fraction(c) for _, c in linear), *bounds,
                      source=f.source)
    ends = [_round_half_even(a / s * v + b / s + z) for a, b in f.each() for v in (x.lo, x.hi)]
    inner = Quantizer((s,), (z,), min(ends), max(ends), Rounding.ROUND)
    codes = quant_of_affine(state, node, f, inner, part="round_half_even")
    return Affine(codes, (Fraction(1),), (Fraction(0),), *bounds, source=node.name)


def _round_half_even(v: Fraction) -> int:
    return div_round_int(v.numerator, v.denominator, Rounding.ROUND)


__all__ = ["bipolar_quant", "drops_no_bits", "quant_node", "quant_params", "rounding_of", "trunc"]
