"""Elementwise ops: ``Relu``, ``LeakyRelu``, ``Clip``, the nonlinearities that fuse with
their Quant into a table (``Sigmoid``, ``Tanh``), arithmetic with constants and between
branches (``Add``, ``Sub``, ``Mul``, ``Div``), ``BatchNormalization`` and a trailing
``Softmax``.

Constant arithmetic and BatchNormalization act on a value in flight (the real constants
after a layer, exact rationals: :mod:`..real`) or on the raw input before its Quant.  A clip
there (ReLU is the clip to ``[0, inf)``) becomes the bounds of the Quant after it
(:mod:`..clips`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import onnx

from ...errors import UnsupportedModelError
from ...ir.types import dyadic_codes, dyadic_parts
from ...exact.requant import Step
from ...exact.rounding import Rounding
from ...ops import OPS, Trait, leakyrelu, lut, maximum, merge, relu, rescale, staircase
from ..attributes import attribute, schema_default
from ..load import QUANTIZERS
from ..inflight import bend, bends_in_flight
from ..real import (Quantizer, as_affine, check_finite, clip_real, constant_arith, per_channel, quant_of_affine,
                    real_add, weight_codes)
from ..registry import handles
from ..state import ImportState
from ..values import Affine, Const, RawInput, Tensor, fractions
from .qcdq import clip_constant_or_codes


@handles("Relu")
def relu_node(state: ImportState, node: onnx.NodeProto) -> None:
    """``max(v, 0)``: on a value in flight or the raw input, a clip for the Quant after it; on
    codes ``q`` meaning ``(q - z) * s`` (``s > 0``), ``max(q, z)``: read only by quantizers,
    that clip in flight (any real ``z``); else on codes, ``max(q, 0)`` for ``z = 0`` and the
    primitive's clamp for an integer ``z``; refused for another ``z`` (real 0 has no code)."""
    if isinstance(state.values.get(node.input[0]), (Affine, RawInput)):
        clip_real(state, node, Fraction(0), None)
        return
    x = state.tensor(node.input[0], node)
    meaning = state.graph.scales.get(x)
    if meaning is None or not any(meaning.zero):
        state.add(node, relu.OP, [x], relu.Attrs(), keeps_scale=True)  # max(0, (q - 0) * s) = max(0, q) * s
        return
    if all(u.op_type in QUANTIZERS for u in state.users(node.output[0])):
        clip_real(state, node, Fraction(0), None)
        return
    pairs = meaning.each()
    odd = [z for _, z in pairs if z.denominator != 1]
    if odd:
        raise UnsupportedModelError(
            f"node '{node.name}' (Relu): on codes with zero point {float(odd[0]):g} (from '{state.graph.origin.get(x, x)}')"
            f", real 0 is code {float(odd[0]):g}, no integer: supported only where quantizers alone read it")
    hi = state.type_of(x).hi
    steps = tuple(Step(Fraction(1), Fraction(0), Rounding.ROUND, int(z), max(int(z), hi)) for _, z in pairs)
    state.add(node, rescale.OP, [x], rescale.Attrs(steps[:1] if len(set(steps)) == 1 else steps,
                                                   rescale.out_type(min(s.qmin for s in steps), max(s.qmax for s in steps))),
              reads_real=True)
    state.graph.scales[node.output[0]] = meaning


@handles("Clip")
def clip(state: ImportState, node: onnx.NodeProto) -> None:
    """``clip(x, min, max)`` between a layer and its Quant (the value in flight), on the input
    before its Quant (a bound of the input's quantizer), on a constant, or on the codes of a
    QuantizeLinear (their range)."""
    if state.opset < 11:
        bounds = [attribute(node, "min"), attribute(node, "max")]
    else:
        bounds = [state.const_or_none(node.input[i], node) if len(node.input) > i else None for i in (1, 2)]
    if any(b is not None and np.asarray(b).size != 1 for b in bounds):
        raise UnsupportedModelError(f"node '{node.name}' (Clip): min / max must be one number each")
    lo, hi = (None if b is None else Fraction(float(np.asarray(b, dtype=np.float64).ravel()[0])) for b in bounds)
    if lo is not None and hi is not None and lo > hi:
        raise UnsupportedModelError(f"node '{node.name}' (Clip): min {float(lo)} is above max {float(hi)}")
    if not clip_constant_or_codes(state, node, lo, hi):
        clip_real(state, node, lo, hi)


@handles("LeakyRelu")
def leaky_relu(state: ImportState, node: onnx.NodeProto) -> None:
    """On codes of a power-of-two grid, its own op (an exact dyadic slope); on a value in
    flight or codes with a real meaning, a bend of the line (any rational slope) that the
    Quant after it ends (:func:`..inflight.bend`)."""
    alpha = np.float64(np.float32(attribute(node, "alpha", 0.01)))
    if bends_in_flight(state, node):
        bend(state, node, (Fraction(float(alpha)),))
        return
    try:
        code, frac = dyadic_codes(np.array([alpha]))
    except ValueError:
        raise UnsupportedModelError(f"node '{node.name}' (LeakyRelu): slope {alpha} is not a fixed-point number") from None
    state.add(node, leakyrelu.OP, [state.tensor(node.input[0], node)], leakyrelu.Attrs(int(code[0]), int(frac)))


@handles("PRelu")
def prelu(state: ImportState, node: onnx.NodeProto) -> None:
    """``x >= 0 ? x : slope * x`` with a constant slope, one or one per channel: a bend of the
    line that the Quant after it ends; one dyadic slope on codes of a power-of-two grid is the
    LeakyRelu op."""
    slope = state.const(state.input_name(node, 1, "the slope"), node, "the slope")
    check_finite(slope, node, node.input[1])
    x = state.values.get(node.input[0])
    shape = state.type_of(x.value if isinstance(x, Affine) else state.tensor(node.input[0], node)).shape
    slopes = per_channel(node, slope, shape, "slope")
    if len(slopes) == 1 and not bends_in_flight(state, node):
        try:
            code, frac = dyadic_codes(np.array([float(slopes[0])]))
        except ValueError:
            code = None
        if code is not None:
            state.add(node, leakyrelu.OP, [state.tensor(node.input[0], node)], leakyrelu.Attrs(int(code[0]), int(frac)))
            return
    bend(state, node, slopes)


@handles("Max", "Min")
def max_min(state: ImportState, node: onnx.NodeProto) -> None:
    """The elementwise maximum / minimum of two branches: codes of power-of-two grids (aligned by
    exact shifts) or codes of one real meaning (a positive scale keeps their order); branches on
    different real scales or still in flight are refused in one line."""
    names = list(node.input)
    kinds = [state.values.get(v) for v in names]
    if len(names) != 2 or any(isinstance(k, (Const, RawInput)) for k in kinds):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): only two activations (no constant operand) "
                                    f"are supported, got {len(names)} inputs")
    if any(isinstance(k, Affine) for k in kinds):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): reads a value with a real scale before its "
                                    "Quant; requantize the branches (e.g. a QuantIdentity) first")
    a, b = (state.tensor(v, node) for v in names)
    meanings = [state.graph.scales.get(v) for v in (a, b)]
    if meanings != [None, None] and (meanings[0] != meanings[1] or
                                     state.type_of(a).ftype.frac != state.type_of(b).ftype.frac):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): its branches' codes have different real "
                                    "scales or zero points; quantize both with one quantizer first")
    state.add(node, maximum.OP, [a, b], maximum.Attrs(minimum=node.op_type == "Min"), keeps_scale=True)


#: The attributes of each tabulated function, in the order ``lut.FUNCTIONS`` takes them
TABLE_PARAMS = {"Sigmoid": (), "Tanh": (), "HardSigmoid": ("alpha", "beta"), "HardSwish": (), "Elu": ("alpha",),
                "Selu": ("alpha", "gamma"), "Celu": ("alpha",), "Softsign": (), "Softplus": (),
                "ThresholdedRelu": ("alpha",)}


@handles(*TABLE_PARAMS)
def lookup_table(state: ImportState, node: onnx.NodeProto) -> None:
    """A nonlinearity must feed exactly one Quant: the pair becomes one lookup table (the
    function in float64 with the model's float32 attributes, then the Quant's rounding)."""
    params = tuple(float(np.float32(attribute(node, name, schema_default(node, name, state.opset))))
                   for name in TABLE_PARAMS[node.op_type])
    if node.op_type == "Celu" and params[0] == 0:
        raise UnsupportedModelError(f"node '{node.name}' (Celu): attribute alpha=0 is not supported")
    function = node.op_type.lower()
    if _reads_line(state, node):
        _staircase(state, node, function, params)
        return
    in_scale = _table_input_scale(state, node)
    state.defer_to_quant(node, lut.OP, lambda q: lut.Attrs(function, q, params, in_scale=in_scale),
                         "a nonlinearity must be followed by a Quant to be exact",
                         make_scaled=lambda q, mult: lut.Attrs(function, q, params, mult, in_scale),
                         reads_real=in_scale is not None)


def _table_input_scale(state: ImportState, node: onnx.NodeProto) -> tuple[int, int] | None:
    """``(frac, mult)`` of input codes with one float scale ``mult * 2**-frac`` and zero point 0
    (a table reads their real values itself); None for codes of their own grid."""
    x = state.values.get(node.input[0])
    meaning = state.graph.scales.get(x.name) if isinstance(x, Tensor) else None
    return None if meaning is None else dyadic_parts(meaning.scale[0])


def _reads_line(state: ImportState, node: onnx.NodeProto) -> bool:
    """Whether the nonlinearity reads what no table indexes: a value in flight, codes with
    per-channel scales, a zero point or an accumulator's meaning, or more codes than a table holds."""
    x = state.values.get(node.input[0])
    if isinstance(x, Affine):
        return True
    if not isinstance(x, Tensor):
        return False
    meaning = state.graph.scales.get(x.name)
    if meaning is not None and (meaning.channels > 1 or meaning.zero[0] != 0 or meaning.accumulator):
        return True
    t = state.type_of(x.name)
    return t.hi - t.lo + 1 > lut.MAX_DOMAIN


def _staircase(state: ImportState, node: onnx.NodeProto, function: str, params: tuple[float, ...]) -> None:
    """The nonlinearity of a real line on integer codes, with its Quant: one staircase of
    thresholds per channel (:mod:`...ops.staircase`), every reachable code evaluated."""
    x = state.values[node.input[0]]
    if isinstance(x, Affine):
        f = x
    else:
        pairs = state.graph.scales[x.name].each() if x.name in state.graph.scales else \
            [(Fraction(2) ** -state.type_of(x.name).ftype.frac, Fraction(0))]
        f = Affine(x.name, tuple(s for s, _ in pairs), tuple(-z * s for s, z in pairs))
    lines = tuple(staircase.Line(a, b, k, f.lo, f.hi) for (a, b), k in zip(f.each(), f.knees()))
    lines = lines[:1] if len(set(lines)) == 1 else lines
    state.defer_to_quant(node, staircase.OP, lambda q: staircase.Attrs(function, q, lines, params),
                         "a nonlinearity must be followed by a Quant to be exact",
                         make_scaled=lambda q, mult: staircase.Attrs(function, q, lines, params, mult),
                         reads_real=True, inputs=[f.value])


@handles("Round")
def round_node(state: ImportState, node: onnx.NodeProto) -> None:
    """ONNX ``Round`` (half to even) of a real value: a quantizer of scale 1 whose bounds hold
    every reachable value (Brevitas' bilinear upsampling rounds its interpolation onto the
    input's grid as ``Round(v / s) * s``).  Its integer codes go on in flight, scale 1."""
    f = as_affine(state, node.input[0], node)
    t = state.type_of(f.value)
    ends = [a * v + b for a, b in f.each() for v in (t.lo, t.hi)]
    ends += [e * k for e in ends for k in f.knees()] + ([Fraction(0)] if f.knee else [])
    ends = [min(max(e, f.lo if f.lo is not None else e), f.hi if f.hi is not None else e) for e in ends]
    q = Quantizer((Fraction(1),), (Fraction(0),), math.floor(min(ends)), math.ceil(max(ends)), Rounding.ROUND)
    codes = quant_of_affine(state, node, f, q)
    state.values[node.output[0]] = Affine(codes, (Fraction(1),), (Fraction(0),), source=node.name)


# -- arithmetic ------------------------------------------------------------------------
@handles("Sub")
def sub(state: ImportState, node: onnx.NodeProto) -> None:
    """A constant operand (as ``Mul`` / ``Div``); two branches: the residual merge with the second
    branch's weight negated (aligned exactly where scales are real, :func:`..real.real_add`)."""
    kinds = [state.values.get(v) for v in node.input]
    if any(isinstance(k, (Const, RawInput)) for k in kinds):
        constant_operand(state, node)
        return
    if real_add(state, node, negate=True):
        return
    a, b = node.input
    state.add(node, merge.ADD, [state.tensor(a, node), state.tensor(b, node)], merge.Attrs((1,), (-1,)))


@handles("Mul", "Div")
def constant_operand(state: ImportState, node: onnx.NodeProto) -> None:
    if not constant_arith(state, node):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): only a constant operand on a layer's "
                                    "output (before its Quant) or on the input (before its first Quant) is supported")


@handles("Add")
def add(state: ImportState, node: onnx.NodeProto) -> None:
    """A constant on a value in flight or on the raw input (folded); two branches (a merge,
    aligned exactly where scales are real); a constant bias after a MatMul / Conv (folded
    into the layer)."""
    kinds = [state.values.get(v) for v in node.input]
    tokens = next((v for v in node.input if v in state.token_layers and isinstance(state.values.get(v), Affine)), None)
    if tokens is not None:
        _token_bias_in_flight(state, node, tokens)
        return
    if any(isinstance(k, (Affine, RawInput)) for k in kinds) and constant_arith(state, node):
        return
    if real_add(state, node):
        return
    if not any(isinstance(k, Const) for k in kinds):
        a, c = node.input
        state.add(node, merge.ADD, [state.tensor(a, node), state.tensor(c, node)], merge.Attrs())
        return
    _fold_bias(state, node)


def _fold_bias(state: ImportState, node: onnx.NodeProto) -> None:
    """``layer(x) + b`` with a constant ``b``: the bias of the layer."""
    a, c = node.input
    if isinstance(state.values.get(a), Const):
        a, c = c, a
    src = state.tensor(a, node)
    b = state.const(c, node, "one operand")
    if src in state.token_layers:
        _fold_token_bias(state, node, a, src, b)
        return
    prod = state.graph.producer(src)
    layer = OPS[prod.op] if prod is not None else None
    if layer is None or Trait.LINEAR not in layer.traits or prod.attrs.bias is not None:
        raise UnsupportedModelError(f"node '{node.name}' (Add): only a constant bias after MatMul/Conv is supported")
    shape = state.type_of(src).shape
    each = per_channel(node, b, shape, "the bias")  # one per output channel: its broadcast checked
    if layer.bias_size(prod.attrs) != shape[0]:
        raise UnsupportedModelError(f"node '{node.name}' (Add): bias of shape {list(b.shape)} does not match the layer")
    bcodes, btype = weight_codes(np.array([float(v) for v in each] * (shape[0] // len(each))),
                                 f"node '{node.name}' bias")
    if len(state.users(a)) != 1:
        raise UnsupportedModelError(f"node '{node.name}' (Add): the layer output '{a}' is also used before its bias")
    prod.attrs = layer.with_bias(prod.attrs, bcodes, btype)
    prod.output = node.output[0]  # the Add folds into the layer
    state.graph.origin[prod.output] = node.name
    state.values[node.output[0]] = Tensor(node.output[0])


def _token_bias_in_flight(state: ImportState, node: onnx.NodeProto, a: str) -> None:
    """``tokens @ W + b`` with float-scaled weights: the sums are in flight, and a bias per
    output feature is a per-channel offset of the convolution's accumulator, before the
    transpose back to tokens (after it the features lie on the last axis, where no meaning
    is per channel).  So the transpose waits: the Quant that must follow rounds the
    accumulator per feature, then the transpose moves its codes (``state.moved_after_quant``);
    at the graph output, the transpose moves the accumulator, each element keeping its
    feature's meaning (``real.affine_output``)."""
    c = node.input[1] if node.input[0] == a else node.input[0]
    b = np.asarray(state.const(c, node, "one operand"), dtype=np.float64)
    back = state.graph.producer(state.values[a].value)  # the transpose of the accumulator codes
    features = state.type_of(back.inputs[0]).shape[0]
    users = state.users(node.output[0])
    output = not users and any(o.name == node.output[0] for o in state.model.graph.output)
    if b.size not in (1, features) or (b.size > 1 and b.shape[-1] != features) or len(state.users(a)) != 1 or \
            not (output or (len(users) == 1 and users[0].op_type in ("Quant", "IntQuant"))):
        raise UnsupportedModelError(f"node '{node.name}' (Add): a constant of shape {list(b.shape)} after float-scaled "
                                    f"sums over tokens is supported as their bias (one value per output feature, "
                                    f"{features}) before a Quant or as the graph output only")
    check_finite(b, node, c)
    state.token_layers.pop(a)
    state.graph.nodes.remove(back)
    state.graph.origin.pop(back.output, None)
    pre = state.values[a]
    pairs = pre.each() if pre.channels > 1 else pre.each() * features
    bias = fractions(np.broadcast_to(b.reshape(-1), (features,)))
    state.values[node.output[0]] = replace(pre, value=back.inputs[0], a=tuple(m for m, _ in pairs),
                                           b=tuple(o + v for (_, o), v in zip(pairs, bias)), source=node.name)
    state.moved_after_quant[node.output[0]] = back


def _fold_token_bias(state: ImportState, node: onnx.NodeProto, a: str, src: str, b: np.ndarray) -> None:
    """``tokens @ W + b`` with one bias value per output feature (the last axis) or one: the
    bias of the 1x1 convolution computing the MatMul (:func:`.linear._token_matmul`)."""
    layer = state.token_layers.pop(src)
    features = state.type_of(layer.output).shape[0]
    v = np.asarray(b, dtype=np.float64)
    if v.size not in (1, features) or (v.size > 1 and v.shape[-1] != features) or layer.attrs.bias is not None or \
            len(state.users(a)) != 1:
        raise UnsupportedModelError(f"node '{node.name}' (Add): a constant of shape {list(v.shape)} after a MatMul over "
                                    f"tokens is supported as its bias only (one value per output feature, "
                                    f"{features}, and nothing else reading the MatMul)")
    check_finite(v, node, node.input[1])
    bcodes, btype = weight_codes(np.broadcast_to(v.reshape(-1), (features,)).copy(), f"node '{node.name}' bias")
    layer.attrs = OPS[layer.op].with_bias(layer.attrs, bcodes, btype)
    back = state.graph.producer(src)  # the transpose back to tokens: now the Add's output
    back.output = node.output[0]
    state.graph.origin[back.output] = node.name
    state.values[node.output[0]] = Tensor(node.output[0])


# -- BatchNormalization and a trailing Softmax ---------------------------------------------
@handles("BatchNormalization")
def batch_normalization(state: ImportState, node: onnx.NodeProto) -> None:
    """The folded affine ``A_c * x + B_c`` (float64 once, docs/bit-exact.md) on a value in flight:
    a layer's accumulator, or codes with their real meaning (after a Quant, a pool, ...) that
    the next Quant rounds."""
    gamma, beta, mean, var = (np.asarray(state.const(state.input_name(node, i, what), node, f"input '{node.input[i]}'"),
                                         dtype=np.float64)
                              for i, what in ((1, "scale"), (2, "bias"), (3, "mean"), (4, "variance")))
    eps = float(np.float32(attribute(node, "epsilon", 1e-5)))
    if len({gamma.size, beta.size, mean.size, var.size}) != 1:
        raise UnsupportedModelError(f"node '{node.name}' (BatchNormalization): scale, bias, mean and variance have "
                                    f"{gamma.size}, {beta.size}, {mean.size} and {var.size} values; one per channel each")
    if np.any(var + eps <= 0):
        raise UnsupportedModelError(f"node '{node.name}' (BatchNormalization): variance + epsilon is not positive")
    if isinstance(state.values.get(node.input[0]), (Const, RawInput)):
        raise UnsupportedModelError(f"node '{node.name}' (BatchNormalization): on a constant or on the raw input (no "
                                    "Quant before it) is not supported")
    f = as_affine(state, node.input[0], node)  # a layer's accumulator, or any codes with their real meaning
    if f.clipped:
        raise UnsupportedModelError(f"node '{node.name}' (BatchNormalization): after a ReLU/Clip without a Quant "
                                    "between them is not supported")
    scale = gamma / np.sqrt(var + eps)  # float64, once: the model's meaning (docs/bit-exact.md)
    shift = beta - scale * mean
    A, B = fractions(scale), fractions(shift)
    shape = state.type_of(f.value).shape
    if len(A) != shape[0] or len(B) != shape[0]:
        raise UnsupportedModelError(f"node '{node.name}' (BatchNormalization): {len(A)} channels for a tensor of "
                                    f"shape {list(shape)}")
    pairs = f.each() if f.channels > 1 else [f.each()[0]] * len(A)
    state.values[node.output[0]] = replace(f, a=tuple(A[c] * p[0] for c, p in enumerate(pairs)),
                                           b=tuple(A[c] * p[1] + B[c] for c, p in enumerate(pairs)), source=node.name)


@handles("Softmax")
def softmax(state: ImportState, node: onnx.NodeProto) -> None:
    """A trailing Softmax: the design computes its logits exactly and stops there (a one-line
    notice; the independent check compares the logits)."""
    outputs = [o.name for o in state.model.graph.output]
    if outputs != [node.output[0]]:
        readers = state.users(node.output[0])
        where = (f"its output is read by node '{readers[0].name}'" if readers else
                 f"it produces one of the graph's {len(outputs)} outputs" if node.output[0] in outputs else
                 "its output is not the graph's output")
        raise UnsupportedModelError(f"node '{node.name}' (Softmax): {where}, and a float Softmax over a row has no "
                                    "exact finite table (each output, exp(x_i) / sum_j exp(x_j), reads the whole row and is "
                                    "irrational unless the row's values are all equal); "
                                    "only a Softmax producing the graph's one output is compiled (the design then "
                                    "outputs its logits)")
    state.values[node.output[0]] = state.values.get(node.input[0])
    state.graph.softmax = node.name


__all__ = ["add", "batch_normalization", "clip", "constant_operand", "leaky_relu", "lookup_table", "prelu", "relu_node",
           "softmax"]
