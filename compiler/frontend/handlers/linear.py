"""Linear ops: ``Conv`` (1D/2D/3D, grouped), ``ConvTranspose`` (1D/2D/3D), ``Gemm`` and
``MatMul`` (of a vector, or of each token of a sequence).  Weights and biases become exact
integer codes; float-scaled weights or inputs run on integer codes with the real constants in
flight (:func:`..real.real_linear`).  A constant ``Add`` after one of them is its bias
(``handlers/elementwise.py``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

import numpy as np
import onnx

from ...errors import UnsupportedModelError
from ...ir.types import dyadic_codes, power_of_two_exponent
from ...ops import conv, convtranspose, dense, transpose
from ..attributes import attribute
from ..real import real_linear, weight_codes
from ..registry import handles
from ..state import ImportState
from ..values import Const
from .shape import codes_moved
from .windows import window


def _same(a: np.ndarray) -> np.ndarray:
    return a


def linear(state: ImportState, node: onnx.NodeProto, x: str, weight: Const, w: np.ndarray, b: np.ndarray | None,
           op_module, orient: Callable[[np.ndarray], np.ndarray] = _same, out_axis: int = 0, **extra) -> None:
    """A linear op (dense / conv / convtranspose module): weights and bias as exact codes
    (float-scaled weights or inputs: on integer codes, the real constants in flight)."""
    if weight.float_scaled or x in state.graph.scales:
        real_linear(state, node, x, weight, w, b, op_module, orient, out_axis, **extra)
        return
    wcodes, wtype = weight_codes(w, f"node '{node.name}' weights")
    bcodes, btype = weight_codes(b, f"node '{node.name}' bias") if b is not None else (None, None)
    state.add(node, op_module.OP, [x], op_module.Attrs(wcodes, wtype, bcodes, btype, **extra))


def _weight(state: ImportState, node: onnx.NodeProto, what: str = "the weight") -> Const:
    return state.constant(state.input_name(node, 1, what), node, what)


@handles("Conv")
def conv_node(state: ImportState, node: onnx.NodeProto) -> None:
    weight = _weight(state, node)
    w = weight.value
    n = w.ndim - 2
    if n not in (1, 2, 3):
        raise UnsupportedModelError(f"node '{node.name}' (Conv): {n}D convolution is not supported (1D, 2D and 3D are)")
    dilations = _dilations(node, n)
    strides, pads = window(state, node, tuple(w.shape[2:]), dilations)
    weight = _dilated(weight, dilations)
    b = state.optional_const(node, 2, "the bias")
    linear(state, node, state.tensor(node.input[0], node), weight, weight.value, b, conv, strides=strides, pads=pads,
           group=int(attribute(node, "group", 1)))


@handles("ConvTranspose")
def conv_transpose(state: ImportState, node: onnx.NodeProto) -> None:
    weight = _weight(state, node)
    w = weight.value
    n = w.ndim - 2
    if n not in (1, 2, 3):
        raise UnsupportedModelError(f"node '{node.name}' (ConvTranspose): {n}D is not supported (1D, 2D and 3D are)")
    if str(attribute(node, "auto_pad", "NOTSET")).startswith("SAME"):
        raise UnsupportedModelError(f"node '{node.name}' (ConvTranspose): attribute auto_pad="
                                    f"{attribute(node, 'auto_pad')} is not supported (only NOTSET, VALID)")
    extra = tuple(int(v) for v in attribute(node, "output_padding", [0] * n))
    strides, pads = window(state, node, tuple(w.shape[2:]))
    weight = _dilated(weight, _dilations(node, n))
    if len(extra) != n or any(not 0 <= e < s for e, s in zip(extra, strides)):
        raise UnsupportedModelError(f"node '{node.name}' (ConvTranspose): attribute output_padding={list(extra)} is "
                                    f"not one value per axis below the strides {list(strides)}")
    b = state.optional_const(node, 2, "the bias")
    linear(state, node, state.tensor(node.input[0], node), weight, weight.value, b, convtranspose, out_axis=1,
           strides=strides, pads=pads, output_padding=extra if any(extra) else ())


def _dilations(node: onnx.NodeProto, n: int) -> tuple[int, ...]:
    dilations = tuple(int(v) for v in attribute(node, "dilations", [1] * n))
    if len(dilations) != n or min(dilations) < 1:
        raise UnsupportedModelError(f"node '{node.name}' ({node.op_type}): attribute dilations={list(dilations)} is not "
                                    f"one positive value per spatial axis")
    return dilations


def _dilated(weight: Const, dilations: tuple[int, ...]) -> Const:
    """A dilated kernel as the dense kernel that computes the same sums: tap ``k`` at ``k * d``,
    zeros between (exact: a zero weight adds nothing).  Float-scaled codes keep each output
    channel's scale on the zeros."""
    if set(dilations) == {1}:
        return weight

    def spread(a: np.ndarray, fill) -> np.ndarray:
        kernel = a.shape[2:]
        out = np.empty(a.shape[:2] + tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations)), dtype=a.dtype)
        out[...] = fill
        out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dilations)] = a
        return out

    corner = lambda a: a[(slice(None), slice(None)) + (slice(0, 1),) * (a.ndim - 2)]  # noqa: E731
    if weight.float_scaled:
        return Const(spread(weight.value, 0.0), spread(weight.codes, 0), spread(weight.scale, corner(weight.scale)))
    return Const(spread(weight.value, 0.0))


def _transposed(a: np.ndarray) -> np.ndarray:
    return a.T


@handles("Gemm")
def gemm(state: ImportState, node: onnx.NodeProto) -> None:
    """``alpha * A B' + beta * C``: alpha folded into the weight, beta into the bias, exactly."""
    if attribute(node, "transA", 0):
        raise UnsupportedModelError(f"node '{node.name}' (Gemm): attribute transA=1 is not supported")
    alpha, beta = float(attribute(node, "alpha", 1.0)), float(attribute(node, "beta", 1.0))
    weight = _weight(state, node)
    orient = _transposed if attribute(node, "transB", 0) else _same
    if weight.value.ndim != 2:
        raise UnsupportedModelError(f"node '{node.name}' (Gemm): weight must be 2D, got {weight.value.shape}")
    b = state.optional_const(node, 2, "the bias")
    b = _exact_product(node, b.reshape(-1), beta, "beta * C") if b is not None else None
    weight = _times_alpha(node, weight, alpha, real_bias=b is not None and not _power_of_two(beta))
    linear(state, node, state.tensor(node.input[0], node), weight, orient(weight.value), b, dense, orient, out_axis=1)


def _power_of_two(v: float) -> bool:
    return power_of_two_exponent(np.float64(v)) is not None


def _times_alpha(node: onnx.NodeProto, weight: Const, alpha: float, real_bias: bool) -> Const:
    """``alpha * weight``: a power of two scales the values; any other factor becomes the scale
    of the weight's integer codes (a float-scaled weight: its products stay integers and alpha
    travels as the real constant it is), as does a bias ``beta * C`` off the power-of-two grids
    (``real_bias``).  A negative alpha negates the codes."""
    if alpha == 1.0 and not real_bias:
        return weight
    if alpha == 0.0 or not np.isfinite(alpha):
        raise UnsupportedModelError(f"node '{node.name}' (Gemm): attribute alpha={alpha:g} is not supported")
    value = _exact_product(node, weight.value, alpha, "alpha * B")
    sign, magnitude = (-1 if alpha < 0 else 1), abs(alpha)
    if weight.float_scaled:
        return Const(value, sign * weight.codes, _exact_product(node, weight.scale, magnitude, "alpha * B's scale"))
    if _power_of_two(magnitude) and not real_bias:
        return Const(value)
    try:
        codes, frac = dyadic_codes(weight.value)
    except ValueError as exc:
        raise UnsupportedModelError(f"node '{node.name}' (Gemm): the weight: {exc}") from None
    return Const(value, sign * codes, np.full(codes.shape, np.ldexp(magnitude, -frac)))


def _exact_product(node: onnx.NodeProto, values: np.ndarray, factor: float, what: str) -> np.ndarray:
    """``factor * values`` in float64, refused in one line where float64 does not hold it exactly."""
    product = np.asarray(values, dtype=np.float64) * factor
    for v, p in zip(np.unique(values).tolist(), (np.unique(values) * factor).tolist()):
        if Fraction(p) != Fraction(v) * Fraction(factor):
            raise UnsupportedModelError(f"node '{node.name}' (Gemm): {what} = {factor:.9g} * {v:.9g} is not a float64 "
                                        "number; not supported")
    return product


@handles("MatMul")
def matmul(state: ImportState, node: onnx.NodeProto) -> None:
    weight = _weight(state, node, "the weight (second input)")
    if weight.value.ndim != 2:
        raise UnsupportedModelError(f"node '{node.name}' (MatMul): weight must be 2D, got {weight.value.shape}")
    x = state.tensor(node.input[0], node)
    if len(state.type_of(x).shape) == 2:
        _token_matmul(state, node, x, weight)
        return
    linear(state, node, x, weight, weight.value, None, dense, out_axis=1)


def _token_matmul(state: ImportState, node: onnx.NodeProto, x: str, weight: Const) -> None:
    """``x @ W`` on a sequence of tokens ``(N, T, C)``, each token through the same weights: a
    1x1 convolution over the tokens, on the sequence transposed to ``(C, T)`` and transposed
    back (both transposes relabel the buffer: the tokens are stored step by step, which is the
    convolution's channels-last order).  A constant Add after it is the convolution's bias."""
    out = node.output[0]
    channels = state.add(node, transpose.OP, [x], transpose.Attrs(), part="channels").output
    as_kernel = lambda a: np.ascontiguousarray(a.T[:, :, None])  # noqa: E731 - (C, K) -> (K, C, 1)
    kernel = Const(as_kernel(weight.value), *((as_kernel(weight.codes), as_kernel(weight.scale))
                                             if weight.float_scaled else ()))
    sums = onnx.helper.make_node("MatMul", [channels, node.input[1]], [f"{out}.tokens"], name=node.name)
    linear(state, sums, channels, kernel, kernel.value, None, conv, strides=(1,), pads=(0, 0))
    layer = state.graph.nodes[-1]
    codes_moved(state, onnx.helper.make_node("Transpose", [sums.output[0]], [out], name=f"{node.name}/tokens"),
                transpose.OP, transpose.Attrs())
    state.token_layers[out] = layer


__all__ = ["conv_node", "conv_transpose", "gemm", "linear", "matmul"]
