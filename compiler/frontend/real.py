"""Real-valued constants between quantizers, folded exactly into one requantization.

What users' models put between a layer and the Quant that ends it: float and per-channel
scales, zero points, BatchNormalization (folded once in float64, ``A = gamma / sqrt(var +
eps)``, ``B = beta - A * mean``: those rationals are the model's meaning), Mul/Add/Sub/Div by
constants, a ReLU; and before the first Quant, float operations on the input (the same
kinds).

A layer's output in flight is an :class:`~.values.Affine`: ``real = a_c * acc + b_c`` per
channel on the layer's integer accumulator ``acc``, with exact :class:`~fractions.Fraction`
values.  A ``Quant`` (or ``BipolarQuant``) reading it becomes one ``rescale`` node
(:mod:`..ops.rescale`, the primitive of :mod:`..exact.requant`), or beyond 4095 levels one
``piecewise`` node (:mod:`..ops.piecewise`, :mod:`..exact.pieces`); a graph output reading it
is the accumulator itself, its meaning recorded (:class:`..ir.meaning.CodeScale`).  These
are functions of the importer's state that the handlers call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np
import onnx

from ..errors import UnsupportedModelError
from ..exact.pieces import Pieces
from ..exact.requant import Step
from ..exact.rounding import Rounding, div_round_int, round_float
from ..ir.meaning import CodeScale
from ..ir.types import MAX_WIDTH, FixedType, bits_for_range, dyadic_codes, power_of_two_exponent
from ..ops import OPS, Trait, maximum, merge, piecewise, relu, rescale
from .clips import clip_codes, compose_clip
from .integer import integer_scale
from .state import ImportState
from .values import Affine, Const, RawInput, Tensor, fractions


def check_finite(values: np.ndarray, node: onnx.NodeProto, name: str) -> None:
    """Refuse a constant with NaN or Inf: a Quant would silently saturate it to a code."""
    bad = ~np.isfinite(values)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): constant '{name}' holds {int(bad.sum())} "
                                    f"NaN/Inf value(s), first {values[where]} at index {where}")


def per_channel(node: onnx.NodeProto, c: np.ndarray, shape: tuple[int, ...], what: str = "constant"
                ) -> tuple[Fraction, ...]:
    """A constant operand as one value or one per channel of a (C, ...) tensor, as ONNX
    broadcasts it against ``(N, *shape)`` (aligned at the last axis: (C,) for vectors,
    (1, C, 1, ...) / (C, 1, ...) for maps; a (W,) constant on a map varies along its width and
    is refused, as is any constant that varies over the positions or widens the tensor)."""
    v = np.asarray(c, dtype=np.float64)
    check_finite(v, node, what)
    if v.size == 1:
        return fractions(v)
    try:
        full = np.broadcast_to(v, (1, *shape))[0].reshape(shape[0] if shape else 1, -1)
    except ValueError:
        full = None
    if full is None or not np.array_equal(full, np.repeat(full[:, :1], full.shape[1], axis=1)):
        how = "does not broadcast to" if full is None else "varies over the positions of"
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {what} of shape {list(v.shape)} {how} a "
                                    f"tensor of shape {list(shape)}; only a scalar or one value per channel is supported")
    return fractions(full[:, 0])


def weight_codes(values: np.ndarray, what: str) -> tuple[np.ndarray, FixedType]:
    """Integer codes of fixed-point constants on their finest power-of-two grid."""
    try:
        codes, frac = dyadic_codes(values)
    except ValueError as exc:
        raise UnsupportedModelError(f"{what}: {exc} (quantize it with a power-of-two scale)") from None
    ftype = FixedType.for_range(min(int(codes.min()), 0), max(int(codes.max()), 0), frac)
    if ftype.width > MAX_WIDTH:
        raise UnsupportedModelError(f"{what}: needs {ftype.width} bits as fixed point (quantize it)")
    return codes, ftype


def constant_codes(x: np.ndarray, scale: np.ndarray, zero: np.ndarray, lo: int, hi: int, rounding: Rounding,
                   bipolar: bool) -> np.ndarray:
    """QONNX Quant codes of constant values (float64 integers): ``clip(R(x / scale + zero))``,
    or ``+-1`` by the sign of ``x / scale + zero`` when bipolar; exact (float64, with values
    near a rounding boundary decided in exact rationals)."""
    v = x / scale + zero
    exact = power_of_two_exponent(scale) is not None and not np.any(zero)
    codes = np.where(v >= 0, 1.0, -1.0) if bipolar else round_float(np.clip(v, lo, hi), rounding)
    if not exact:
        shape = np.broadcast_shapes(x.shape, scale.shape, zero.shape)
        xs, ss, zs = (np.broadcast_to(a, shape) for a in (x, scale, zero))
        near = (np.abs(v - np.floor(v) - 0.5) < 1e-6) | (np.abs(v - np.round(v)) < 1e-6)  # any mode's boundaries
        for i in zip(*np.nonzero(near)):
            q = Fraction(float(xs[i])) / Fraction(float(ss[i])) + Fraction(float(zs[i]))
            codes[i] = (1 if q >= 0 else -1) if bipolar else \
                min(max(div_round_int(q.numerator, q.denominator, rounding), lo), hi)
    return codes


def common_unit(values: list[Fraction]) -> tuple[Fraction, list[int]]:
    """The largest rational ``u`` of which every value is an integer multiple, and the multiples
    (``values[i] == k[i] * u``): integer weights that align real scales exactly."""
    den = math.lcm(*(v.denominator for v in values))
    num = [int(v * den) for v in values]
    g = math.gcd(*num) or 1
    return Fraction(g, den), [n // g for n in num]


# -- values in flight ---------------------------------------------------------------------
def as_affine(state: ImportState, name: str, node: onnx.NodeProto) -> Affine:
    """A value as real constants on integer codes (an IR value: its own code scale)."""
    v = state.values.get(name)
    if isinstance(v, Affine):
        return v
    value = state.tensor(name, node)
    pairs = state.code_scale(value).each()
    return Affine(value, tuple(s for s, _ in pairs), tuple(-z * s for s, z in pairs),
                  source=state.graph.origin.get(value, ""))


def is_real(state: ImportState, name: str) -> bool:
    """Whether a value is a layer's accumulator in flight (an Affine) or a linear op's output."""
    v = state.values.get(name)
    if isinstance(v, Affine):
        return True
    prod = state.graph.producer(v.name) if isinstance(v, Tensor) else None
    return prod is not None and Trait.LINEAR in OPS[prod.op].traits


def reads_scaled(state: ImportState, name: str) -> bool:
    """Whether ``name`` is real-valued or an IR value whose codes carry a real scale."""
    v = state.values.get(name)
    return isinstance(v, Affine) or (isinstance(v, Tensor) and v.name in state.graph.scales)


# -- linear ops on float-scaled weights or inputs -----------------------------------------
def real_linear(state: ImportState, node: onnx.NodeProto, x: str, weight: Const, w: np.ndarray, b: np.ndarray | None,
                op_module, orient, out_axis: int, **extra) -> None:
    """A linear op on integer weight codes; its output in flight as an :class:`Affine`.  The
    input's scales and zero points per channel fold in exactly (:func:`_fold_input_scales`)."""
    if weight.float_scaled:
        codes, scale = orient(weight.codes), orient(weight.scale)
    else:
        codes, wtype = weight_codes(w, f"node '{node.name}' weights")
        scale = np.full(w.shape, 2.0 ** -wtype.frac)
    moved = np.moveaxis(scale, out_axis, 0).reshape(scale.shape[out_axis], -1)
    if np.any(moved != moved[:, :1]):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): weight scales vary along the input axis; "
                                    "only per-output-channel scales are supported")
    meaning = state.code_scale(x)
    zeros = [z for _, z in meaning.each() if z]
    if zeros and (any(extra.get("pads", ())) or Trait.SCATTER in op_module.OP.traits) and \
            all(z.denominator == 1 for z in zeros):
        x = _without_zero_points(state, node, x, meaning)
        meaning, zeros = state.code_scale(x), []
    if zeros and (any(extra.get("pads", ())) or Trait.SCATTER in op_module.OP.traits):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a zero point {float(zeros[0]):g} on a "
                                    "padded or transposed convolution's input is not supported (its padding and its "
                                    "scattered sums do not read every weight on every code)")
    s_w = [Fraction(float(v)) for v in moved[:, 0]]
    chan = _input_channels(node, np.shape(codes), out_axis, extra.get("group", 1), meaning.channels)
    wcodes, a, offset = _fold_input_scales(node, np.asarray(codes, dtype=np.int64), chan, out_axis, s_w, meaning)
    bias = fractions(b) if b is not None else (Fraction(0),) * len(a)
    bb = tuple(bias[c] + offset[c] for c in range(len(a)))
    wtype = FixedType.for_range(min(int(wcodes.min()), 0), max(int(wcodes.max()), 0), 0)
    attrs = op_module.Attrs(wcodes, wtype, None, None, **extra)
    if meaning.channels > 1:
        x_type = state.type_of(x)  # the input's own refusals, if any, first
        try:
            op_module.OP.infer(attrs, [x_type], node.name)
        except UnsupportedModelError as exc:
            raise UnsupportedModelError(f"{exc}: folding the per-channel scales of its input into {wtype.width}-bit "
                                        "integer weights; requantize the input per tensor first") from None
    state.add(node, op_module.OP, [x], attrs)
    state.values[node.output[0]] = Affine(node.output[0], a, bb, source=node.name)


def _without_zero_points(state: ImportState, node: onnx.NodeProto, x: str, meaning: CodeScale) -> str:
    """Codes ``q - z`` (integer zero points ``z``, per channel or one): the same real values
    with zero point 0, so that a padded or transposed convolution's zeros are real zeros (a
    1x1 depthwise convolution of weight 1 and bias ``-z``, exact)."""
    pairs = meaning.each()
    shifted = integer_scale(state, node, x, [1], "zero_point", [-int(z) for _, z in pairs])
    state.graph.scales[shifted] = CodeScale(tuple(s for s, _ in pairs), (Fraction(0),) * len(pairs))
    return shifted


def _input_channels(node: onnx.NodeProto, shape: tuple[int, ...], out_axis: int, group: int, channels: int) -> np.ndarray:
    """The input channel (of ``channels``) each weight multiplies: a convolution's weights are
    ``(O, C / group, *kernel)``; a dense layer's ``(in, out)`` and a transposed convolution's
    ``(C, O, *kernel)`` have it on axis 0.  One channel (0) for one scale on every element."""
    if channels == 1:
        return np.zeros(shape, dtype=np.int64)
    if out_axis == 0:
        per_group = max(shape[0] // group, 1)
        idx = (np.arange(shape[0]) // per_group)[:, None] * shape[1] + np.arange(shape[1])[None, :]
        idx = idx.reshape(idx.shape + (1,) * (len(shape) - 2))
    else:
        idx = np.arange(shape[0]).reshape((-1,) + (1,) * (len(shape) - 1))
    if int(idx.max()) + 1 != channels:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): its input has {channels} per-channel scales, "
                                    f"its weights {list(shape)} read {int(idx.max()) + 1} channels")
    return np.broadcast_to(idx, shape)


def _fold_input_scales(node: onnx.NodeProto, codes: np.ndarray, chan: np.ndarray, out_axis: int, s_w: list[Fraction],
                       meaning: CodeScale) -> tuple[np.ndarray, tuple[Fraction, ...], tuple[Fraction, ...]]:
    """``real_o = s_w[o] * sum(w * (q_i - z_i) * s_i)`` on integer weights: output ``o`` reads
    its input channels on the common unit ``A_o`` of their scales (:func:`common_unit`), each
    weight times the integer ``s_i / A_o``; the zero points give the offset
    ``-s_w[o] * sum(w * s_i * z_i)``.  Returns (weights, ``a_o = A_o * s_w[o]``, offsets)."""
    pairs = meaning.each()
    w_o, c_o = np.moveaxis(codes, out_axis, 0), np.moveaxis(chan, out_axis, 0)
    outs = w_o.shape[0]
    reads = c_o.reshape(outs, -1)
    factor, unit = np.ones((outs, len(pairs)), dtype=np.int64), []
    for o in range(outs):
        used = np.unique(reads[o])
        if o and np.array_equal(used, np.unique(reads[o - 1])):  # the same channels as the last output
            factor[o], unit = factor[o - 1], unit + unit[-1:]
            continue
        u, ks = common_unit([pairs[i][0] for i in used])
        top = max(ks) * int(np.abs(w_o[o]).max(initial=0))
        if top.bit_length() > MAX_WIDTH:
            raise UnsupportedModelError(
                f"node '{node.name}' ({node.op_type}): folding the per-channel scales of its input into integer "
                f"weights needs multiples up to {max(ks)} of their common unit {float(u):.6g}: weights of "
                f"{top.bit_length() + 1} bits, more than the {MAX_WIDTH} the exact flow supports; requantize the "
                "input per tensor first")
        factor[o, used], unit = ks, unit + [u]
    folded = w_o * np.take_along_axis(factor, reads, axis=1).reshape(w_o.shape)
    offset = [Fraction(0)] * outs
    if any(z for _, z in pairs):
        sums = np.zeros((outs, len(pairs)), dtype=np.int64)
        np.add.at(sums, (np.repeat(np.arange(outs), reads.shape[1]), reads.ravel()), w_o.reshape(outs, -1).ravel())
        offset = [-s_w[o] * sum(s * z * int(sums[o, i]) for i, (s, z) in enumerate(pairs) if z) for o in range(outs)]
    return np.moveaxis(folded, 0, out_axis), tuple(u * s for u, s in zip(unit, s_w)), tuple(offset)


# -- constant arithmetic on a layer's output, or on the input before its Quant -------------
def constant_arith(state: ImportState, node: onnx.NodeProto) -> bool:
    """Mul/Add/Sub/Div with one constant operand on an accumulator or on the input: folded.
    False when the node is no such case (the caller handles it)."""
    a, c = node.input[0], node.input[1]
    ca, cc = state.const_value(a), state.const_value(c)
    if (ca is None) == (cc is None):
        return False
    raw = isinstance(state.values.get(a), RawInput) or isinstance(state.values.get(c), RawInput)
    if ca is not None and node.op_type in ("Sub", "Div") and (node.op_type == "Div" or raw):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a constant divided by (or minus) an "
                                    "activation is not supported")
    x, k = (c, ca) if ca is not None else (a, cc)
    v = state.values.get(x)
    if isinstance(v, RawInput):
        return preprocess_input(state, node, v, k, constant_first=ca is not None)
    if not is_real(state, x):
        return False
    f = as_affine(state, x, node)
    kk = per_channel(node, k, state.type_of(f.value).shape)
    if f.piecewise:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): constant arithmetic after a ReLU/Clip/"
                                    "LeakyRelu without a Quant between them is not supported")
    pairs = f.each() if len(kk) == 1 or f.channels > 1 else [f.each()[0]] * len(kk)
    kk = kk * len(pairs) if len(kk) == 1 else kk
    if node.op_type == "Mul":
        new = [(a_ * k_, b_ * k_) for (a_, b_), k_ in zip(pairs, kk)]
    elif node.op_type == "Div":
        if any(k_ == 0 for k_ in kk):
            raise UnsupportedModelError(f"node '{node.name}' (Div): division by zero")
        new = [(a_ / k_, b_ / k_) for (a_, b_), k_ in zip(pairs, kk)]
    elif node.op_type == "Add":
        new = [(a_, b_ + k_) for (a_, b_), k_ in zip(pairs, kk)]
    elif ca is not None:  # k - x
        new = [(-a_, k_ - b_) for (a_, b_), k_ in zip(pairs, kk)]
    else:
        new = [(a_, b_ - k_) for (a_, b_), k_ in zip(pairs, kk)]
    state.values[node.output[0]] = replace(f, a=tuple(p[0] for p in new), b=tuple(p[1] for p in new), source=node.name)
    return True


def preprocess_input(state: ImportState, node: onnx.NodeProto, raw: RawInput, k: np.ndarray,
                     constant_first: bool) -> bool:
    """Mul/Add/Sub/Div of the raw input by a constant, one value or one per channel (a mean /
    std normalization): folded into its quantizer."""
    if raw.reshaped and np.asarray(k).size != 1:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): preprocessing of the reshaped input by a "
                                    f"constant of shape {list(np.shape(k))} is not supported")
    each = per_channel(node, k, raw.shape)
    if node.op_type == "Div" and any(v == 0 for v in each):
        raise UnsupportedModelError(f"node '{node.name}' (Div): division by zero")
    steps = [_input_step(node.op_type, v, constant_first) for v in each]  # (m, a): x -> m * x + a
    if raw.clip != (None, None) and len(set(steps)) > 1:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a ReLU/Clip of the input before a "
                                    "preprocessing per channel is not supported")
    m, a = steps[0]
    # a clip of the input before this op, carried through it (bounds swap when m < 0)
    bounds = tuple(None if b is None else b * m + a for b in raw.clip)
    lo, hi = bounds if m > 0 else bounds[::-1]
    pairs = raw.each() if len(steps) == 1 or raw.channels > 1 else raw.each() * len(steps)
    steps = steps * len(pairs) if len(steps) == 1 else steps
    if len(pairs) != len(steps):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {len(steps)} per-channel constants for an "
                                    f"input preprocessed per channel with {len(pairs)}")
    new = [(mul * m_, add * m_ + a_) for (mul, add), (m_, a_) in zip(pairs, steps)]
    state.values[node.output[0]] = replace(raw, mul=tuple(p[0] for p in new), add=tuple(p[1] for p in new), lo=lo,
                                           hi=hi)
    return True


def _input_step(op_type: str, k: Fraction, constant_first: bool) -> tuple[Fraction, Fraction]:
    """``(m, a)`` with the op's result ``m * x + a`` for a constant ``k``."""
    if op_type == "Div":
        return 1 / k, Fraction(0)
    if op_type == "Mul":
        return k, Fraction(0)
    if op_type == "Add":
        return Fraction(1), k
    return (Fraction(-1), k) if constant_first else (Fraction(1), -k)  # k - x, x - k


def reshape_input(state: ImportState, node: onnx.NodeProto, raw: RawInput, shape: tuple[int, ...]) -> None:
    """A reshape of the input before its Quant: the design's input takes the new shape."""
    if math.prod(shape) != math.prod(raw.shape):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): reshapes the input {list(raw.shape)} "
                                    f"to {list(shape)}")
    if raw.channels > 1 and tuple(shape[:1]) != raw.shape[:1]:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): reshapes the input preprocessed per channel "
                                    f"{list(raw.shape)} to {list(shape)}, off its channels")
    state.values[node.output[0]] = replace(raw, shape=tuple(int(d) for d in shape), reshaped=True)


def clip_real(state: ImportState, node: onnx.NodeProto, lo: Fraction | None, hi: Fraction | None) -> None:
    """``clip(x, lo, hi)`` of the raw input or of a value in flight: the bounds of the Quant after it."""
    v = state.values.get(node.input[0])
    if isinstance(v, RawInput):
        lo, hi = compose_clip(v.clip, (lo, hi))
        state.values[node.output[0]] = replace(v, lo=lo, hi=hi)
        return
    f = as_affine(state, node.input[0], node)
    lo, hi = compose_clip((f.lo, f.hi), (lo, hi))
    state.values[node.output[0]] = replace(f, lo=lo, hi=hi, source=node.name)


# -- merges of real-scaled branches ---------------------------------------------------------
def real_add(state: ImportState, node: onnx.NodeProto, negate: bool = False) -> bool:
    """An Add of two activations, one with a real scale or in flight: ``k1_c * q1 + k2_c * q2``
    on aligned codes, integer ``k = s / A_c`` from the exact scales; in flight as an Affine.
    ``negate``: a Sub, the second term's weight and offset negated."""
    if len(node.input) != 2 or any(isinstance(state.values.get(v), Const) for v in node.input) or \
            not any(reads_scaled(state, v) for v in node.input):
        return False
    terms = [as_affine(state, v, node) for v in node.input]
    for f in terms:
        if f.piecewise or min(a for a, _ in f.each()) <= 0:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): reads '{f.source}' " + (
                "after a ReLU/Clip/LeakyRelu without a Quant" if f.piecewise else "with a non-positive scale") +
                f"; requantize it (e.g. a QuantIdentity) before the {node.op_type}")
    types = [state.type_of(f.value) for f in terms]
    top = max(t.ftype.frac for t in types)
    ks, slope, offset = ([], []), [], []
    for c in range(max(f.channels for f in terms)):
        pairs = [f.each()[c % f.channels] for f in terms]
        r = [a * Fraction(2) ** (t.ftype.frac - top) for (a, _), t in zip(pairs, types)]  # real per aligned code
        unit, multiples = common_unit(r)
        sign = (1, -1 if negate else 1)
        for k, v, sg in zip(ks, multiples, sign):
            k.append(sg * v)
        slope.append(unit)
        offset.append(sum(sg * b for (_, b), sg in zip(pairs, sign)))
    one = lambda v: tuple(v[:1]) if len(set(v)) == 1 else tuple(v)  # noqa: E731
    attrs = merge.Attrs(one(ks[0]), one(ks[1]))
    try:
        merge.ADD.infer(attrs, types, node.name)
    except UnsupportedModelError as exc:
        raise UnsupportedModelError(f"{exc}: aligning the real scales of '{terms[0].source}' and '{terms[1].source}' "
                                    f"exactly; requantize a branch (e.g. a QuantIdentity) before the {node.op_type}") from None
    state.add(node, merge.ADD, [f.value for f in terms], attrs, reads_real=True)
    state.values[node.output[0]] = Affine(node.output[0], one(slope), one(offset), source=node.name)
    return True


# -- the Quant ending a value in flight, and a graph output without one --------------------
@dataclass(frozen=True)
class Quantizer:
    """A QONNX quantizer, exactly: ``clamp(R(v / scale + zero), qmin, qmax)``, or when bipolar
    ``+-1`` by the sign of ``v / scale + zero`` (codes {0, 1}).  Its codes mean ``(code - zero)
    * scale`` (bipolar: ``(2 code - 1 - zero) * scale``).  Scale and zero point hold for every
    element, or one per channel of axis 0; the zero point is any real (QONNX allows it)."""

    scale: tuple[Fraction, ...]
    zero: tuple[Fraction, ...]
    qmin: int
    qmax: int
    rounding: Rounding
    bipolar: bool = False

    @property
    def meaning(self) -> CodeScale:
        if self.bipolar:
            return CodeScale(tuple(2 * s for s in self.scale), tuple((1 + z) / 2 for z in self.zero))
        return CodeScale(self.scale, self.zero)

    def step(self, a: Fraction, b: Fraction, scale: Fraction, zero: Fraction, bounds: tuple) -> Step:
        """The primitive for real ``a * acc + b`` (clipped to ``bounds``) on one channel."""
        if self.bipolar:
            return Step(a / scale, b / scale + zero, Rounding.ROUND, 0, 1, True)
        lo, hi = clip_codes(scale, zero, self.rounding, self.qmin, self.qmax, bounds)
        return Step(a / scale, b / scale + zero, self.rounding, lo, hi)


def grid_frac(meaning: CodeScale) -> int | None:
    """The fractional bits of codes that are fixed-point numbers (one power-of-two scale, zero
    point 0), None for any other meaning."""
    if meaning.channels != 1 or meaning.zero[0] != 0:
        return None
    s = meaning.scale[0]
    num, den = s.numerator, s.denominator
    if num & (num - 1) or den & (den - 1):
        return None
    return den.bit_length() - num.bit_length()


def quant_of_affine(state: ImportState, node: onnx.NodeProto, f: Affine, q: Quantizer,
                    meaning: CodeScale | None = None, part: str | None = None) -> str:
    """The quantizer ending a value in flight: one rescale node, a step of the primitive per
    channel; for a quantizer of more levels than the rescale's thresholds hold (16 bits), one
    piecewise node, a step per channel or, where a knee bends the line, a step each side of
    real 0.  Its codes mean ``meaning`` (default: the quantizer's); ``part``: a value of the
    node's own (:meth:`ImportState.add`), not its output.  Returns the IR value's name."""
    meaning = meaning or q.meaning
    wide = not q.bipolar and piecewise.wide(q.qmin, q.qmax)
    if f.knee and not wide:
        return _quant_of_knee(state, node, f, q, meaning, part)
    if q.bipolar and f.clipped:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a bipolar quantizer after a ReLU/Clip is "
                                    "not supported")
    params = CodeScale(q.scale, q.zero).each()
    if f.channels > 1 and len(params) > 1 and f.channels != len(params):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {len(params)} per-channel scales for a value "
                                    f"with {f.channels} channels")
    pairs, knees = f.each(), f.knees()
    frac = None if q.bipolar else grid_frac(meaning)
    width, signed = bits_for_range(*((0, 1) if q.bipolar else (q.qmin, q.qmax)))
    out = FixedType(width, frac or 0, signed)
    channels = range(max(len(pairs), len(params)))
    if wide:
        functions = tuple(_bent_pieces(q, *pairs[c if len(pairs) > 1 else 0], knees[c if len(knees) > 1 else 0],
                                       *params[c if len(params) > 1 else 0], (f.lo, f.hi)) for c in channels)
        op, attrs = piecewise.OP, piecewise.Attrs(functions[:1] if len(set(functions)) == 1 else functions, out)
    else:
        steps = tuple(q.step(*pairs[c if len(pairs) > 1 else 0], *params[c if len(params) > 1 else 0], (f.lo, f.hi))
                      for c in channels)
        op, attrs = rescale.OP, rescale.Attrs(steps[:1] if len(set(steps)) == 1 else steps, out)
    ir = state.add(node, op, [f.value], attrs, reads_real=True, part=part)
    if frac is None:
        state.graph.scales[ir.output] = meaning
    return ir.output


def _bent_pieces(q: Quantizer, a: Fraction, b: Fraction, knee: Fraction, scale: Fraction, zero: Fraction,
                 bounds: tuple) -> Pieces:
    """The quantizer of ``clip(leaky(a x + b))`` on one channel's codes ``x``: the step of the
    line where ``a x + b >= 0``, the step of the bent line ``knee (a x + b)`` elsewhere."""
    line = q.step(a, b, scale, zero, bounds)
    if knee == 1:
        return Pieces((), (line,))
    bent = q.step(a * knee, b * knee, scale, zero, bounds)
    if a == 0:
        return Pieces((), (line if b >= 0 else bent,))
    if a > 0:  # a x + b >= 0 from x = ceil(-b / a) on
        return Pieces((math.ceil(-b / a),), (bent, line))
    return Pieces((math.floor(-b / a) + 1,), (line, bent))  # up to x = floor(-b / a)


def _quant_of_knee(state: ImportState, node: onnx.NodeProto, f: Affine, q: Quantizer, meaning: CodeScale,
                   part: str | None) -> str:
    """The quantizer of ``clip(leaky(v))``: ``leaky(v) = max(v, k v)`` for a knee slope ``k <= 1``
    (``min`` for ``k >= 1``), and the quantizer and the clip are monotone, so ``Q(clip(leaky(v)))
    = max(Q(clip(v)), Q(clip(k v)))``: two rescales of the same accumulator, each the primitive,
    and their elementwise maximum (minimum)."""
    knees = f.knees()
    if len({k > 1 for k in knees}) > 1:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): reads '{f.source}', whose LeakyRelu/PRelu "
                                    f"slopes lie on both sides of 1 ({float(min(knees)):g} .. {float(max(knees)):g}); "
                                    "not supported")
    stem = f"{part}." if part else ""
    line = quant_of_affine(state, node, replace(f, knee=()), q, meaning, part=f"{stem}line")
    pairs = f.each()
    bent = replace(f, a=tuple(a * k for (a, _), k in zip(pairs, knees)),
                   b=tuple(b * k for (_, b), k in zip(pairs, knees)), knee=())
    knee = quant_of_affine(state, node, bent, q, meaning, part=f"{stem}knee")
    ir = state.add(node, maximum.OP, [line, knee], maximum.Attrs(minimum=knees[0] > 1), reads_real=True, part=part)
    if line in state.graph.scales:
        state.graph.scales[ir.output] = state.graph.scales[line]
    return ir.output


def affine_output(state: ImportState, f: Affine, moved=None) -> str:
    """A graph output no Quant rounds: the accumulator, its exact meaning recorded.  A ReLU of
    ``a_c * acc`` (every ``a_c > 0``, no offset) is the ReLU of the codes.  ``moved``: a
    transpose waiting for a Quant that never comes (``state.moved_after_quant``: a per-step head
    on a sequence, its bias per output feature): it moves the accumulator's codes, and each
    output element keeps the meaning of the channel it came from (:func:`_moved_meaning`)."""
    node = next((n for n in state.model.graph.node if n.name == f.source), None)
    if node is not None and f.lo == 0 and f.hi is None and not f.knee and all(a > 0 and b == 0 for a, b in f.each()):
        f = replace(f, value=state.add(node, relu.OP, [f.value], relu.Attrs(), reads_real=True, part="relu").output,
                    lo=None)
    if f.piecewise:
        raise UnsupportedModelError(f"node '{f.source}': a ReLU/Clip/LeakyRelu at the graph output without a Quant is "
                                    "not supported")
    if any(a == 0 for a, _ in f.each()):
        raise UnsupportedModelError(f"node '{f.source}': an output channel is multiplied by 0")
    pairs = f.each()
    meaning = CodeScale(tuple(a for a, _ in pairs), tuple(-b / a for a, b in pairs), accumulator=True)
    value = f.value
    if moved is not None:
        step = onnx.helper.make_node("Transpose", [f.value], [moved.output], name=moved.name)
        value = state.add(step, OPS[moved.op], [f.value], moved.attrs, reads_real=True).output
        meaning = _moved_meaning(state, meaning, moved, f.value, value)
    state.graph.scales[value] = meaning
    state.graph.origin[value] = f.source
    return value


def _moved_meaning(state: ImportState, meaning: CodeScale, moved, before: str, after: str) -> CodeScale:
    """The meaning of codes per channel (axis 0 of ``before``) after ``moved`` moves them: one
    scale and zero point for every element of ``after``, the element's source channel's (the op's
    own semantics run on the elements' indices)."""
    if meaning.channels == 1:
        return meaning
    shape = state.type_of(before).shape
    where = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(1, *shape)
    source = OPS[moved.op].semantics(moved.attrs, [where], [state.type_of(before)], state.type_of(after))
    channel = np.asarray(source).reshape(-1) // (where.size // shape[0])
    each = meaning.each()
    return CodeScale(tuple(each[c][0] for c in channel), tuple(each[c][1] for c in channel), accumulator=True)


__all__ = ["Quantizer", "affine_output", "as_affine", "check_finite", "clip_real", "common_unit", "constant_arith",
           "constant_codes", "grid_frac", "is_real", "per_channel", "preprocess_input", "quant_of_affine", "reads_scaled",
           "real_add", "real_linear", "reshape_input", "weight_codes"]
