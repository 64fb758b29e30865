"""Real-valued constants between quantizers, folded exactly into one requantization.

The importer's handlers for what users' models put between a layer and the Quant that ends
it: float and per-channel scales, zero points, BatchNormalization (folded once in float64,
``A = gamma / sqrt(var + eps)``, ``B = beta - A * mean``: those rationals are the model's
meaning), Mul/Add/Sub/Div by constants, a ReLU; and before the first Quant, float operations
on the input (the same kinds), or an input typed by a ``finn_datatype`` annotation.

A layer's output in flight is an :class:`Affine`: ``real = a_c * acc + b_c`` per channel on
the layer's integer accumulator ``acc``, with exact :class:`~fractions.Fraction` values.  A
``Quant`` (or ``BipolarQuant``) reading it becomes one ``rescale`` node
(:mod:`..ops.rescale`, the primitive of :mod:`..ops.affine`); a graph output reading it is
the accumulator itself, its meaning recorded (:class:`..ir.meaning.CodeScale`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any
from fractions import Fraction

import numpy as np
import onnx

from ..errors import UnsupportedModelError
from ..ir.meaning import CodeScale, InputMap
from ..ir.types import MAX_WIDTH, FixedType, TensorType, bits_for_range, dyadic_codes, power_of_two_exponent
from ..ops import OPS, Trait, merge, quant, rescale
from ..ops.affine import Step
from ..ops.rounding import Rounding, div_round_int, round_float
from .clips import clip_codes, compose_clip
from .load import LEGACY_DOMAINS, QONNX_DOMAIN, datatype_range, input_datatype, normalize_domains, parse_input_type

@dataclass
class Const:
    """A constant value (initializer, Constant node or folded constant), float64."""

    value: np.ndarray


@dataclass
class Padded:
    """Output of a zero ``Pad`` of the spatial axes, folded into the window op reading it."""

    value: str
    pads: tuple[int, ...]  # begins of each spatial dim, then ends (ONNX order)
    node: str


def node_attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            v = onnx.helper.get_attribute_value(a)
            return v.decode() if isinstance(v, bytes) else v
    return default


def check_finite(values: np.ndarray, node: onnx.NodeProto, name: str) -> None:
    """Refuse a constant with NaN or Inf: a Quant would silently saturate it to a code."""
    bad = ~np.isfinite(values)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): constant '{name}' holds {int(bad.sum())} "
                                    f"NaN/Inf value(s), first {values[where]} at index {where}")


def fractions(values: np.ndarray) -> tuple[Fraction, ...]:
    return tuple(Fraction(float(v)) for v in np.asarray(values, dtype=np.float64).ravel())


@dataclass(frozen=True)
class Affine:
    """``real = clip(a_c * acc + b_c, lo, hi)`` on ``value``'s codes (``lo`` / ``hi``: a ReLU's or
    a Clip's real bounds, None for none)."""

    value: str
    a: tuple[Fraction, ...]  # one per channel (axis 0), or one
    b: tuple[Fraction, ...]
    lo: Fraction | None = None
    hi: Fraction | None = None
    source: str = ""  # the ONNX node whose output it is

    @property
    def channels(self) -> int:
        return max(len(self.a), len(self.b))

    @property
    def clipped(self) -> bool:
        return self.lo is not None or self.hi is not None

    def each(self) -> list[tuple[Fraction, Fraction]]:
        n = self.channels
        return [(self.a[c if len(self.a) > 1 else 0], self.b[c if len(self.b) > 1 else 0]) for c in range(n)]


def _per_channel(node: onnx.NodeProto, c: np.ndarray, shape: tuple[int, ...]) -> tuple[Fraction, ...]:
    """A constant operand as one value or one per channel of a (C, ...) tensor (batch-first
    ONNX broadcasting: (C,) for vectors, (1, C, 1, ...) / (C, 1, ...) for maps)."""
    v = np.asarray(c, dtype=np.float64)
    if v.size == 1:
        return fractions(v)
    chans = shape[0] if shape else 0
    squeezed = v.reshape([d for d in v.shape if d != 1] or [1])
    rank = len(shape)
    ok = squeezed.shape == (chans,) and (v.ndim <= 1 and rank == 1 or v.shape[-rank:][:1] == (chans,) or
                                         (v.ndim >= rank and v.shape[v.ndim - rank] == chans))
    if not ok:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): constant of shape {list(v.shape)} is neither a "
                                    f"scalar nor one value per channel of a tensor of shape {list(shape)}")
    return fractions(squeezed)


def weight_codes(values: np.ndarray, what: str) -> tuple[np.ndarray, FixedType]:
    try:
        codes, frac = dyadic_codes(values)
    except ValueError as exc:
        raise UnsupportedModelError(f"{what}: {exc} (quantize it with a power-of-two scale)") from None
    ftype = FixedType.for_range(min(int(codes.min()), 0), max(int(codes.max()), 0), frac)
    if ftype.width > MAX_WIDTH:
        raise UnsupportedModelError(f"{what}: needs {ftype.width} bits as fixed point (quantize it)")
    return codes, ftype


def constant_codes(x: np.ndarray, scale: np.ndarray, lo: int, hi: int, rounding: Rounding, bipolar: bool) -> np.ndarray:
    """QONNX Quant codes of constant values (float64 integers): ``clip(R(x / scale))``, the
    division exact (float64, with values near a rounding boundary decided in exact rationals)."""
    v = x / scale
    if bipolar:
        return np.where(v >= 0, 1.0, -1.0)
    codes = round_float(np.clip(v, lo, hi), rounding)
    if power_of_two_exponent(scale) is None:
        shape = np.broadcast_shapes(x.shape, scale.shape)
        xs, ss = np.broadcast_to(x, shape), np.broadcast_to(scale, shape)
        near = (np.abs(v - np.floor(v) - 0.5) < 1e-6) | (np.abs(v - np.round(v)) < 1e-6)  # any mode's boundaries
        for i in zip(*np.nonzero(near)):
            q = Fraction(float(xs[i])) / Fraction(float(ss[i]))
            codes[i] = min(max(div_round_int(q.numerator, q.denominator, rounding), lo), hi)
    return codes


class Quantizers:
    """Mixin of the importer: QONNX ``Quant`` / ``BipolarQuant`` on constants, the input and activations."""

    def quant_params(self, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray, int]:
        scale = self.const(node.input[1], node, "the scale")
        zp = self.const(node.input[2], node, "the zero point")
        bits = self.const(node.input[3], node, "the bit width")
        if not np.all(np.isfinite(zp)) or np.any(zp != np.round(zp)):
            raise UnsupportedModelError(f"node '{node.name}' (Quant): zero point {zp.ravel()[:4]} is not an integer")
        if bits.size != 1 or bits.ravel()[0] != int(bits.ravel()[0]) or not 1 <= int(bits.ravel()[0]) <= MAX_WIDTH:
            raise UnsupportedModelError(f"node '{node.name}' (Quant): bit width {bits.ravel()[:4]} is not an integer in 1..{MAX_WIDTH}")
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            bad = next(float(s) for s in scale.ravel() if not (np.isfinite(s) and s > 0))
            raise UnsupportedModelError(f"node '{node.name}' (Quant): scale {bad:.9g} is not a positive finite number")
        return scale, power_of_two_exponent(scale), int(bits.ravel()[0])

    def on_Quant(self, node: onnx.NodeProto) -> None:
        scale, exp, bits = self.quant_params(node)
        signed, narrow = bool(node_attr(node, "signed", 1)), bool(node_attr(node, "narrow", 0))
        try:
            rounding = Rounding.parse(node_attr(node, "rounding_mode", "ROUND"))
        except ValueError:
            raise UnsupportedModelError(f"node '{node.name}' (Quant): unknown rounding mode "
                                        f"{str(node_attr(node, 'rounding_mode')).upper()}") from None
        src = node.input[0]
        x = self.env.get(src)
        zp = self.const(node.input[2], node, "the zero point")
        if isinstance(x, Const):
            try:
                shape = np.broadcast_shapes(x.value.shape, scale.shape, zp.shape)
            except ValueError:
                raise UnsupportedModelError(f"node '{node.name}' (Quant): scale {list(scale.shape)} / zero point "
                                            f"{list(zp.shape)} do not broadcast to its input {list(x.value.shape)}") from None
            check_finite(x.value, node, src)
            if np.any(zp != 0):
                raise UnsupportedModelError(f"node '{node.name}' (Quant): zero point {zp.ravel()[:4]} on a constant is not "
                                            "supported")
            bipolar = bits == 1 and signed  # QONNX: 1-bit signed Quant is bipolar
            lo, hi = quant.min_int(signed, narrow, bits), quant.max_int(signed, narrow, bits)
            codes = constant_codes(x.value, scale, lo, hi, rounding, bipolar)
            full = np.broadcast_to(scale, shape).astype(np.float64)
            self.env[node.output[0]] = Const(codes * full)
            if exp is None:
                self.qconsts[node.output[0]] = (codes, full)
            return
        if scale.size != 1 or zp.size != 1:
            raise UnsupportedModelError(f"node '{node.name}' (Quant): per-channel activation scales or zero points "
                                        f"(shapes {list(scale.shape)}, {list(zp.shape)}) are not supported")
        fscale, fzero = Fraction(float(scale.ravel()[0])), Fraction(float(zp.ravel()[0]))
        bipolar = bits == 1 and signed
        exact_grid = exp is not None and fzero == 0 and not bipolar
        if src == self.pending_input and (not exact_grid or self.pre != (1, 0) or self.pre_clip != (None, None)):
            self.input_quant(node, fscale, fzero, bits, signed, narrow, rounding, bipolar)
            return
        if isinstance(x, Affine) or (isinstance(x, str) and (x in self.graph.scales or not exact_grid)):
            f = self.as_affine(src, node)
            lo, hi = quant.min_int(signed, narrow, bits), quant.max_int(signed, narrow, bits)
            if node.name in self.deferred:
                raise UnsupportedModelError(f"node '{node.name}' (Quant): a float scale after "
                                            f"{self.deferred[node.name][0].name} is not supported")
            self.quant_of_affine(node, f, fscale, fzero, lo, hi, rounding, bipolar)
            return
        if bipolar:
            raise UnsupportedModelError(f"node '{node.name}' (Quant): 1-bit (bipolar) activations here are not supported")
        attrs = quant.Attrs(FixedType(bits, -int(exp.ravel()[0]), signed), narrow, rounding)
        if node.name in self.deferred:
            op, inputs, make = self.deferred.pop(node.name)
            self.add(node, op, inputs, make(attrs))
            return
        if src == self.pending_input:
            self.graph.input = node.output[0]
            self.graph.origin[node.output[0]] = node.name
            self.graph.input_quant = attrs
            self.graph.values[node.output[0]] = TensorType(self.input_shape, attrs.out, attrs.qmin, attrs.qmax)
            self.env[node.output[0]] = node.output[0]
            self.pending_input = None
            return
        self.add(node, quant.OP, [self.value(src, node)], attrs)

    def on_BipolarQuant(self, node: onnx.NodeProto) -> None:
        src = node.input[0]
        x = self.env.get(src)
        scale = self.const(node.input[1], node, "the scale")
        if scale.size != 1 or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise UnsupportedModelError(f"node '{node.name}' (BipolarQuant): scale {scale.ravel()[:4]} is not one positive "
                                        "finite number")
        if isinstance(x, Const):
            check_finite(x.value, node, src)
            codes = np.where(x.value / scale >= 0, 1.0, -1.0)
            self.env[node.output[0]] = Const(codes * scale)
            if power_of_two_exponent(scale) is None:
                self.qconsts[node.output[0]] = (codes, np.broadcast_to(scale, codes.shape).astype(np.float64))
            return
        fscale = Fraction(float(scale.ravel()[0]))
        if src == self.pending_input:
            self.input_quant(node, fscale, Fraction(0), 1, True, False, Rounding.ROUND, True)
            return
        self.quant_of_affine(node, self.as_affine(src, node), fscale, Fraction(0), 0, 1, Rounding.ROUND, True)


class RealOps(Quantizers):
    """Mixin of the importer (``qonnx_import._Importer``): float scales, BatchNorm, constant
    arithmetic, input preprocessing and datatype-typed inputs."""

    # -- types of values already imported -----------------------------------------------
    def type_of(self, value: str) -> TensorType:
        """The type of an imported value (inferred now from its producers)."""
        memo: dict[str, TensorType] = {}

        def go(v: str) -> TensorType:
            if v in self.graph.values:
                return self.graph.values[v]
            if v not in memo:
                n = self.graph.producer(v)
                memo[v] = OPS[n.op].infer(n.attrs, [go(i) for i in n.inputs], n.name)
            return memo[v]

        return go(value)

    def code_scale(self, value: str) -> tuple[Fraction, Fraction]:
        """(scale, zero) of a value's codes, per tensor; refuses per-channel activation scales."""
        cs = self.graph.scales.get(value)
        if cs is None:
            return Fraction(2) ** -self.type_of(value).ftype.frac, Fraction(0)
        if len(cs.scale) != 1 or len(cs.zero) != 1 or cs.accumulator:
            raise UnsupportedModelError(f"value '{value}': per-channel activation scales are not supported as a layer input")
        return cs.scale[0], cs.zero[0]

    def as_affine(self, name: str, node: onnx.NodeProto) -> Affine:
        v = self.env.get(name)
        if isinstance(v, Affine):
            return v
        value = self.value(name, node)
        s, z = self.code_scale(value)
        return Affine(value, (s,), (-z * s,), source=self.graph.origin.get(value, ""))

    def is_real(self, name: str) -> bool:
        """Whether a value is a layer's accumulator in flight (an Affine) or a linear op's output."""
        v = self.env.get(name)
        if isinstance(v, Affine):
            return True
        prod = self.graph.producer(v) if isinstance(v, str) else None
        return prod is not None and Trait.LINEAR in OPS[prod.op].traits

    # -- weights -------------------------------------------------------------------------
    def float_weights(self, name: str, x: str | None) -> bool:
        """Whether a linear op with weight ``name`` (and input value ``x``) takes the exact
        real path: non power-of-two weight scales, or an input with a real code scale."""
        return name in self.qconsts or (x is not None and x in self.graph.scales)

    def real_linear(self, node, x: str, wname: str, w: np.ndarray, b: np.ndarray | None, op_module, orient,
                    out_axis: int, **extra) -> None:
        """A linear op on integer weight codes; its output in flight as an :class:`Affine`."""
        if wname in self.qconsts:
            codes, scale = (orient(a) for a in self.qconsts[wname])
        else:
            codes, wtype = weight_codes(w, f"node '{node.name}' weights")
            scale = np.full(w.shape, 2.0 ** -wtype.frac)
        moved = np.moveaxis(scale, out_axis, 0).reshape(scale.shape[out_axis], -1)
        if np.any(moved != moved[:, :1]):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): weight scales vary along the input axis; "
                                        "only per-output-channel scales are supported")
        s_x, z_x = self.code_scale(x)
        if z_x != 0 and any(extra.get("pads", ())):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a zero point {z_x} on a padded input is "
                                        "not supported (the padding is real 0, not code 0)")
        wsum = np.moveaxis(codes, out_axis, 0).reshape(codes.shape[out_axis], -1).sum(axis=1)
        a = tuple(s_x * Fraction(float(s)) for s in moved[:, 0])
        bias = fractions(b) if b is not None else (Fraction(0),) * len(a)
        bb = tuple(bias[c] - a[c] * z_x * int(wsum[c]) for c in range(len(a)))
        wcodes = np.asarray(codes, dtype=np.int64)
        wtype = FixedType.for_range(min(int(wcodes.min()), 0), max(int(wcodes.max()), 0), 0)
        self.add(node, op_module.OP, [x], op_module.Attrs(wcodes, wtype, None, None, **extra))
        self.env[node.output[0]] = Affine(node.output[0], a, bb, source=node.name)

    # -- constant arithmetic on a layer's output, or on the input before its Quant -----------
    def constant_arith(self, node: onnx.NodeProto) -> bool:
        """Mul/Add/Sub/Div with one constant operand on an accumulator or on the input: folded.
        False when the node is no such case (the caller handles it)."""
        a, c = node.input[0], node.input[1]
        ca, cc = self.const_value(a), self.const_value(c)
        if (ca is None) == (cc is None):
            return False
        if ca is not None and node.op_type in ("Sub", "Div"):
            if node.op_type == "Div" or a == self.pending_input or c == self.pending_input:
                raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a constant divided by (or minus) an "
                                            "activation is not supported")
        x, k = (c, ca) if ca is not None else (a, cc)
        if x == self.pending_input:
            return self._pre_arith(node, k)
        if not self.is_real(x):
            return False
        f = self.as_affine(x, node)
        shape = self.type_of(f.value).shape
        kk = _per_channel(node, k, shape)
        if f.clipped:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): constant arithmetic after a ReLU/Clip without "
                                        "a Quant between them is not supported")
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
        self.env[node.output[0]] = replace(f, a=tuple(p[0] for p in new), b=tuple(p[1] for p in new), source=node.name)
        return True

    def _pre_arith(self, node, k: np.ndarray) -> bool:
        if np.asarray(k).size != 1:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): preprocessing of the input by a "
                                        f"non-scalar constant of shape {list(np.shape(k))} is not supported")
        kv = Fraction(float(np.asarray(k).ravel()[0]))
        mul, add = self.pre
        if node.op_type == "Div":
            if kv == 0:
                raise UnsupportedModelError(f"node '{node.name}' (Div): division by zero")
            kv, op = 1 / kv, "Mul"
        else:
            op = node.op_type
        if op == "Mul":
            m, a = kv, Fraction(0)
        elif op == "Add":
            m, a = Fraction(1), kv
        elif self.const_value(node.input[0]) is not None:  # k - x
            m, a = Fraction(-1), kv
        else:
            m, a = Fraction(1), -kv
        self.pre = (mul * m, add * m + a)
        # a clip of the input before this op, carried through it (bounds swap when m < 0)
        bounds = tuple(None if b is None else b * m + a for b in self.pre_clip)
        self.pre_clip = bounds if m > 0 else bounds[::-1]
        self.pending_input = node.output[0]
        return True

    def bypass_input(self, node: onnx.NodeProto, shape: tuple[int, ...]) -> None:
        """A reshape of the input before its Quant: the design's input takes the new shape."""
        if math.prod(shape) != math.prod(self.input_shape):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): reshapes the input {list(self.input_shape)} "
                                        f"to {list(shape)}")
        self.graph.model_input_shape = self.graph.model_input_shape or self.input_shape
        self.input_shape = tuple(int(d) for d in shape)
        self.pending_input = node.output[0]

    def on_Mul(self, node: onnx.NodeProto) -> None:
        self._arith(node)

    def on_Sub(self, node: onnx.NodeProto) -> None:
        self._arith(node)

    def on_Div(self, node: onnx.NodeProto) -> None:
        self._arith(node)

    def _arith(self, node: onnx.NodeProto) -> None:
        if not self.constant_arith(node):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): only a constant operand on a layer's "
                                        "output (before its Quant) or on the input (before its first Quant) is supported")

    def on_Softmax(self, node: onnx.NodeProto) -> None:
        """A trailing Softmax: the design computes its logits exactly and stops there (a
        one-line notice; the independent check compares the logits)."""
        if node.output[0] != self.model.graph.output[0].name:
            raise UnsupportedModelError(f"node '{node.name}' (Softmax): only a Softmax producing the graph output is "
                                        "supported (the design then outputs its logits)")
        self.env[node.output[0]] = self.env.get(node.input[0])
        self.graph.softmax = node.name

    # -- BatchNormalization ------------------------------------------------------------------
    def on_BatchNormalization(self, node: onnx.NodeProto) -> None:
        gamma, beta, mean, var = (np.asarray(self.const(i, node, f"input '{i}'"), dtype=np.float64) for i in node.input[1:5])
        eps = float(np.float32(self.attr(node, "epsilon", 1e-5)))
        if np.any(var + eps <= 0):
            raise UnsupportedModelError(f"node '{node.name}' (BatchNormalization): variance + epsilon is not positive")
        if not self.is_real(node.input[0]):
            raise UnsupportedModelError(f"node '{node.name}' (BatchNormalization): only after a MatMul/Gemm/Conv (on its "
                                        "accumulator) is supported")
        f = self.as_affine(node.input[0], node)
        if f.clipped:
            raise UnsupportedModelError(f"node '{node.name}' (BatchNormalization): after a ReLU/Clip without a Quant "
                                        "between them is not supported")
        scale = gamma / np.sqrt(var + eps)  # float64, once: the model's meaning (docs/bit-exact.md)
        shift = beta - scale * mean
        A, B = fractions(scale), fractions(shift)
        shape = self.type_of(f.value).shape
        if len(A) != shape[0]:
            raise UnsupportedModelError(f"node '{node.name}' (BatchNormalization): {len(A)} channels for a tensor of "
                                        f"shape {list(shape)}")
        pairs = f.each() if f.channels > 1 else [f.each()[0]] * len(A)
        self.env[node.output[0]] = replace(f, a=tuple(A[c] * p[0] for c, p in enumerate(pairs)),
                                           b=tuple(A[c] * p[1] + B[c] for c, p in enumerate(pairs)), source=node.name)

    # -- quantizers reading real values ------------------------------------------------------
    def real_add(self, node: onnx.NodeProto) -> bool:
        """An Add of two activations, one with a real scale or in flight: ``k1_c * q1 + k2_c * q2``
        on aligned codes, integer ``k = s / A_c`` from the exact scales; in flight as an Affine."""
        if len(node.input) != 2 or any(isinstance(self.env.get(v), Const) for v in node.input) or not any(
                isinstance(e, Affine) or (isinstance(e, str) and e in self.graph.scales) for e in map(self.env.get, node.input)):
            return False
        terms = [self.as_affine(v, node) for v in node.input]
        for f in terms:
            if f.clipped or min(a for a, _ in f.each()) <= 0:
                raise UnsupportedModelError(f"node '{node.name}' (Add): reads '{f.source}' " + (
                    "after a ReLU/Clip without a Quant" if f.clipped else "with a non-positive scale") +
                    "; requantize it (e.g. a QuantIdentity) before the Add")
        types = [self.type_of(f.value) for f in terms]
        top = max(t.ftype.frac for t in types)
        ks, slope, offset = ([], []), [], []
        for c in range(max(f.channels for f in terms)):
            pairs = [f.each()[c % f.channels] for f in terms]
            r = [a * Fraction(2) ** (t.ftype.frac - top) for (a, _), t in zip(pairs, types)]  # real per aligned code
            den = math.lcm(*(v.denominator for v in r))
            num = [int(v * den) for v in r]
            for k, v in zip(ks, num):
                k.append(v // math.gcd(*num))
            slope.append(Fraction(math.gcd(*num), den))
            offset.append(sum(b for _, b in pairs))
        one = lambda v: tuple(v[:1]) if len(set(v)) == 1 else tuple(v)  # noqa: E731
        attrs = merge.Attrs(one(ks[0]), one(ks[1]))
        try:
            merge.ADD.infer(attrs, types, node.name)
        except UnsupportedModelError as exc:
            raise UnsupportedModelError(f"{exc}: aligning the real scales of '{terms[0].source}' and '{terms[1].source}' "
                                        "exactly; requantize a branch (e.g. a QuantIdentity) before the Add") from None
        self.add(node, merge.ADD, [f.value for f in terms], attrs, reads_real=True)
        self.env[node.output[0]] = Affine(node.output[0], one(slope), one(offset), source=node.name)
        return True

    def real_relu(self, node: onnx.NodeProto) -> bool:
        v = self.env.get(node.input[0])
        if not isinstance(v, Affine):
            return False
        lo, hi = compose_clip((v.lo, v.hi), (Fraction(0), None))
        self.env[node.output[0]] = replace(v, lo=lo, hi=hi, source=node.name)
        return True

    def quant_of_affine(self, node: onnx.NodeProto, f: Affine, scale: Fraction, zero: Fraction, qmin: int, qmax: int,
                        rounding: Rounding, bipolar: bool) -> None:
        """The Quant ending a layer: one rescale node (per-channel steps of the primitive)."""
        if zero != int(zero):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): zero point {float(zero)} is not an integer")
        if bipolar and f.clipped:
            raise UnsupportedModelError(f"node '{node.name}' (BipolarQuant): after a ReLU/Clip is not supported")
        lo, hi = clip_codes(scale, zero, rounding, qmin, qmax, (f.lo, f.hi))
        steps = tuple(Step(a / scale, b / scale + (0 if bipolar else zero), rounding, 0 if bipolar else lo,
                           1 if bipolar else hi, bipolar) for a, b in f.each())
        if len(set(steps)) == 1:
            steps = steps[:1]
        exp = power_of_two_exponent(np.array([float(scale)]))
        po2 = exp is not None and Fraction(float(scale)) == scale and zero == 0 and not bipolar
        frac = -int(exp[0]) if po2 else 0
        width, signed = bits_for_range(*((0, 1) if bipolar else (qmin, qmax)))
        out = FixedType(width, frac, signed)
        self.add(node, rescale.OP, [f.value], rescale.Attrs(steps, out))
        if not po2:
            self.graph.scales[node.output[0]] = CodeScale((2 * scale,), (Fraction(1, 2),)) if bipolar else \
                CodeScale((scale,), (zero,))

    def input_quant(self, node: onnx.NodeProto, scale: Fraction, zero: Fraction, bits: int, signed: bool, narrow: bool,
                    rounding: Rounding, bipolar: bool) -> None:
        """The model's first Quant on real input (float operations before it folded in)."""
        mul, add = self.pre
        if mul <= 0:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): the input is scaled by {float(mul)} before "
                                        "its Quant; only positive factors are supported")
        qmin, qmax = (0, 1) if bipolar else (quant.min_int(signed, narrow, bits), quant.max_int(signed, narrow, bits))
        if bipolar and self.pre_clip != (None, None):
            raise UnsupportedModelError(f"node '{node.name}' (BipolarQuant): after a ReLU/Clip of the input is not supported")
        lo, hi = clip_codes(scale, zero, rounding, qmin, qmax, self.pre_clip)
        step = Step(mul / scale, add / scale + (0 if bipolar else zero), rounding, lo, hi, bipolar)
        out = node.output[0]
        width, sgn = bits_for_range(qmin, qmax)
        self.graph.input = out
        self.graph.origin[out] = node.name
        self.graph.input_quant = quant.Attrs(FixedType(width, 0, sgn), False, "ROUND")
        self.graph.input_map = InputMap(step, lo, hi)
        self.graph.values[out] = TensorType(self.input_shape, FixedType(width, 0, sgn), lo, hi)
        self.graph.scales[out] = CodeScale((2 * scale,), (Fraction(1, 2),)) if bipolar else CodeScale((scale,), (zero,))
        self.env[out] = out
        self.pending_input = None

    def typed_input(self, name: str, node: onnx.NodeProto) -> None:
        """An input no Quant reads, typed by its ``finn_datatype`` (its values are the codes)
        or by the declared ``--input-type`` (real data rounded half to even onto it, saturating)."""
        mul, add = self.pre
        if self.pre_clip != (None, None):
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): a ReLU/Clip of an input no Quant reads is "
                                        "not supported")
        if self.input_type is not None:
            t = self.input_type
            step = Step(Fraction(2) ** t.frac, Fraction(0), Rounding.ROUND, t.min_code, t.max_code)
            self.graph.input = name
            self.graph.input_quant = quant.Attrs(t, False, "ROUND")
            self.graph.input_map = InputMap(step, t.min_code, t.max_code) if mul != 1 or add != 0 else None
            self.graph.values[name] = TensorType(self.input_shape, t, t.min_code, t.max_code)
            if (mul, add) != (1, 0):
                s = mul * Fraction(2) ** -t.frac
                self.graph.scales[name] = CodeScale((s,), (-add / s,))
            self.env[name] = name
            self.pending_input = None
            return
        rng = datatype_range(self.input_datatype or "")
        if rng is None:
            return
        if mul == 0:
            raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): the input is multiplied by 0")
        lo, hi = rng
        width, signed = bits_for_range(lo, hi)
        self.graph.input = name
        self.graph.origin[name] = self.graph.origin.get(name, "")
        self.graph.input_quant = quant.Attrs(FixedType(width, 0, signed), False, "ROUND")
        self.graph.input_map = InputMap(None, lo, hi)
        self.graph.values[name] = TensorType(self.input_shape, FixedType(width, 0, signed), lo, hi)
        self.graph.scales[name] = CodeScale((mul,), (-add / mul,))
        self.env[name] = name
        self.pending_input = None

    def affine_output(self, f: Affine) -> str:
        """A graph output no Quant rounds: the accumulator, its exact meaning recorded."""
        if f.clipped:
            raise UnsupportedModelError(f"node '{f.source}': a ReLU/Clip at the graph output without a Quant is not "
                                        "supported")
        if any(a == 0 for a, _ in f.each()):
            raise UnsupportedModelError(f"node '{f.source}': an output channel is multiplied by 0")
        pairs = f.each()
        self.graph.scales[f.value] = CodeScale(tuple(a for a, _ in pairs), tuple(-b / a for a, b in pairs), accumulator=True)
        self.graph.origin[f.value] = f.source
        return f.value


__all__ = ["Const", "Padded", "Quantizers", "check_finite", "constant_codes", "node_attr", "weight_codes", "Affine", "LEGACY_DOMAINS", "QONNX_DOMAIN", "RealOps", "datatype_range", "input_datatype", "normalize_domains"]
