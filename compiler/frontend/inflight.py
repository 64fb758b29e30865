"""Real-valued tensors in flight (:class:`.values.Affine`) through what moves, selects or
maxes their elements, and through piecewise-linear ops with rational slopes, exactly until
the Quant (or the graph output) that ends them.

An Affine is ``real = clip(leaky_c(a_c * acc + b_c))`` on a layer's integer accumulator
``acc`` (:mod:`.real`).  An op that only moves codes (a reshape, a transpose, DepthToSpace, a
slice, a concatenation) runs on ``acc`` and the per-channel constants move with the channels
as the op says (its ``carry_scale`` facet); a maximum runs on ``acc`` where the real value is
a non-decreasing function of it (every ``a_c >= 0``: channels with ``a_c < 0`` are negated
first, by a 1x1 depthwise convolution of weights -1, their ``a_c`` negated with them).  A
LeakyRelu or PRelu with any rational slope ``k`` bends the line (``knee``); the Quant after
it is ``max(Q(v), Q(k v))`` (:func:`.real.quant_of_affine`).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import onnx

from ..errors import UnsupportedModelError
from ..ir.meaning import CodeScale
from ..ir.types import FixedType
from ..ops import merge
from ..ops.base import OpDef
from .integer import integer_scale
from .real import as_affine, reads_scaled
from .state import ImportState
from .values import Affine


def in_flight(state: ImportState, name: str) -> bool:
    """Whether ``name`` is a real-valued tensor in flight."""
    return isinstance(state.values.get(name), Affine)


def one_or_each(values) -> tuple:
    """One value where every channel has the same, else one per channel."""
    values = tuple(values)
    return values[:1] if len(set(values)) <= 1 else values


def move(state: ImportState, node: onnx.NodeProto, op: OpDef, attrs, f: Affine | None = None) -> None:
    """``op`` (one that moves or selects codes) on a value in flight (``f``, default the node's
    input): on its accumulator, the constants of each channel moved with it (refused in one
    line where the op would move channels that differ apart)."""
    f = f or state.values[node.input[0]]
    ins = [state.type_of(f.value)]
    constants = {"a": one_or_each(f.a), "b": one_or_each(f.b), "knee": one_or_each(f.knee)}
    moved = {k: _carried(op, attrs, v, ins) for k, v in constants.items()}
    if any(v is None for v in moved.values()):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): moves the channels of '{f.source}', whose "
                                    "real scales or offsets differ per channel, apart; requantize it (a Quant) "
                                    "first")
    ir = state.add(node, op, [f.value], attrs, reads_real=True)
    state.values[node.output[0]] = replace(f, value=ir.output, a=moved["a"], b=moved["b"], knee=moved["knee"],
                                           source=node.name)


def _carried(op: OpDef, attrs, values: tuple, ins) -> tuple | None:
    """Per-channel constants, moved as the op moves a per-channel meaning of its codes."""
    if len(values) <= 1:
        return values
    carried = op.carry_scale(attrs, CodeScale(values, values), ins)
    return None if carried is None else carried.scale


def ascending(state: ImportState, node: onnx.NodeProto, f: Affine) -> Affine:
    """``f`` as a non-decreasing function of its codes: channels with ``a_c < 0`` negated by a
    1x1 depthwise convolution (weights +-1), their ``a_c`` with them.  Refused where a knee's
    negative slope makes it no monotone function."""
    if any(k < 0 for k in f.knees()):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): the maximum of '{f.source}', bent by a "
                                    "negative LeakyRelu/PRelu slope (no monotone function of its codes), before a "
                                    "Quant; not supported")
    pairs = f.each()
    if all(a >= 0 for a, _ in pairs):
        return f
    signs = [-1 if a < 0 else 1 for a, _ in pairs]
    flipped = integer_scale(state, node, f.value, signs, "negated")
    return replace(f, value=flipped, a=tuple(abs(a) for a, _ in pairs), b=tuple(b for _, b in pairs))


def bend(state: ImportState, node: onnx.NodeProto, slopes: tuple[Fraction, ...]) -> None:
    """A LeakyRelu / PRelu (slopes one or one per channel) on a value in flight or on codes
    with a real meaning: the line bends at 0, ``leaky(v) = v`` for ``v >= 0``, else ``k v``.  A
    clip before it becomes a clip after it (``leaky`` is monotone for ``k >= 0``)."""
    f = as_affine(state, node.input[0], node)
    if f.knee and any(k < 0 for k in f.knees()):
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a second LeakyRelu/PRelu after a negative "
                                    "slope without a Quant between them is not supported")
    if len(slopes) > 1 and f.channels > 1 and len(slopes) != f.channels:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): {len(slopes)} slopes for a value with "
                                    f"{f.channels} channels")
    n = max(len(slopes), f.channels)
    knees = [f.knees()[c if f.channels > 1 else 0] * slopes[c if len(slopes) > 1 else 0] for c in range(n)]
    lo, hi = f.lo, f.hi
    if f.clipped:
        if len(set(slopes)) > 1 or slopes[0] < 0:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a LeakyRelu/PRelu after a ReLU/Clip with "
                                        "slopes per channel or a negative slope, without a Quant between them, is not "
                                        "supported")
        lo, hi = (None if v is None else v if v >= 0 else v * slopes[0] for v in (lo, hi))
    pairs = f.each() if f.channels == n else f.each() * n
    state.values[node.output[0]] = replace(f, a=one_or_each(a for a, _ in pairs), b=one_or_each(b for _, b in pairs),
                                           knee=one_or_each(knees), lo=lo, hi=hi, source=node.name)


def bends_in_flight(state: ImportState, node: onnx.NodeProto) -> bool:
    """Whether a LeakyRelu / PRelu reads a value in flight or codes with a real meaning (else
    codes on a power-of-two grid, which its own op computes exactly)."""
    return reads_scaled(state, node.input[0])


def join(state: ImportState, node: onnx.NodeProto) -> None:
    """Concatenation along channels of two or more activations, pairwise (``merge.CONCAT``
    aligns the codes of different grids by exact shifts).  Codes on a power-of-two grid stay
    codes; codes with real meanings keep each channel's meaning; with a value in flight among
    them the result flies on, its constants per channel (every input's clip the same)."""
    terms = [as_affine(state, v, node) for v in node.input]
    if len({(f.lo, f.hi) for f in terms}) > 1:
        raise UnsupportedModelError(f"node '{node.name}' (Concat): its inputs are clipped differently (a ReLU/Clip on "
                                    "some and not others) before their Quant; not supported")
    joined = terms[0]
    for i, f in enumerate(terms[1:], 1):
        ir = state.add(node, merge.CONCAT, [joined.value, f.value], merge.Attrs(), reads_real=True,
                       part=None if i == len(terms) - 1 else f"concat{i}")
        frac = state.type_of(ir.output).ftype.frac
        a, b, knee = [], [], []
        for g in (joined, f):
            t = state.type_of(g.value)
            n = t.shape[0] if g.channels == 1 else 1  # one value for every channel: repeated
            a += [v * Fraction(2) ** (t.ftype.frac - frac) for v, _ in g.each()] * n
            b += [v for _, v in g.each()] * n
            knee += g.knees() * n
        joined = replace(joined, value=ir.output, a=tuple(a), b=tuple(b), knee=tuple(knee), source=node.name)
    kinds = [state.values.get(v) for v in node.input]
    out = node.output[0]
    if any(isinstance(k, Affine) for k in kinds):
        state.values[out] = replace(joined, a=one_or_each(joined.a), b=one_or_each(joined.b),
                                    knee=() if set(joined.knee) == {1} else one_or_each(joined.knee))
    elif any(reads_scaled(state, v) for v in node.input):
        state.graph.scales[out] = CodeScale(one_or_each(joined.a), one_or_each(-b / a for a, b in joined.each()))


__all__ = ["ascending", "bend", "bends_in_flight", "in_flight", "join", "move", "one_or_each"]
