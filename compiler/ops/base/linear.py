"""What the linear ops (dense, convolution, transposed convolution) share: integer weight
codes and an optional bias aligned onto the accumulator grid, and the exact accumulator
interval over every input the input type allows (the source of the accumulator width)."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

import numpy as np

from ...errors import UnsupportedModelError
from ...ir.types import MAX_WIDTH, FixedType, TensorType
from ...exact.integer import interval_dot
from .contract import OpDef, Trait
from .weights import Codebook, Weights

A = TypeVar("A")


def check_linear_attrs(attrs, x: TensorType, c_in: int, c_out: int, node: str, what: str) -> None:
    """Shapes of a conv-like op: input (c_in, *spatial), bias (c_out,), strides and pads per dim."""
    if len(x.shape) != attrs.ndim + 1 or x.shape[0] != c_in:
        raise UnsupportedModelError(f"node '{node}': {what} input shape {x.shape} does not match weights {attrs.weight.shape}")
    if attrs.bias is not None and attrs.bias.shape != (c_out,):
        raise UnsupportedModelError(f"node '{node}': bias of shape {attrs.bias.shape} does not match the weights")
    if len(attrs.strides) != attrs.ndim or len(attrs.pads) != 2 * attrs.ndim or min(attrs.strides) < 1 or min(attrs.pads) < 0:
        raise UnsupportedModelError(f"node '{node}': invalid strides {attrs.strides} or pads {attrs.pads}")


def linear_acc_frac(x: TensorType, wtype, btype) -> int:
    """Accumulator fractional bits: products have fx + fw, the bias fb; take the finer."""
    f = x.ftype.frac + wtype.frac
    return max(f, btype.frac) if btype is not None else f


def bias_aligned(bias: np.ndarray | None, btype, n_out: int, facc: int) -> np.ndarray:
    """Bias codes shifted onto the accumulator grid (zeros without a bias)."""
    if bias is None:
        return np.zeros(n_out, dtype=np.int64)
    shift = facc - btype.frac
    peak = int(np.abs(bias).max()) if bias.size else 0
    if peak and peak.bit_length() + shift > MAX_WIDTH:
        # the aligned bias alone would not fit the accumulator (and would overflow int64
        # for shifts past 63 bits): refuse instead of silently dropping it
        raise ValueError(f"the bias (up to {peak} x 2**{-btype.frac}) needs {peak.bit_length() + shift + 1} bits on the "
                         f"accumulator grid 2**-{facc}, more than the {MAX_WIDTH} the exact flow supports")
    return bias.astype(np.int64) << np.int64(shift)


def linear_acc_range(weight_rows, x: TensorType, shift: int, bias: np.ndarray) -> tuple[int, int]:
    """Exact accumulator interval over all inputs in [x.lo, x.hi].

    ``weight_rows`` yields (n_out, taps) integer matrices, one per group of outputs that sum
    the same taps (one for dense/conv, one per output phase for transposed convolution).
    The interval always contains 0, so every partial sum lies inside it too.
    """
    lo, hi = 0, 0
    for rows in weight_rows:
        mn, mx = interval_dot(rows, x.lo, x.hi, axis=1)
        lo = min(lo, min(int(m) * (1 << shift) + int(b) for m, b in zip(mn, bias)))
        hi = max(hi, max(int(m) * (1 << shift) + int(b) for m, b in zip(mx, bias)))
    return lo, hi


def finish_acc_onnx(builder, acc: str, shift: int, bias: np.ndarray) -> str:
    """int64 accumulator -> aligned to the accumulator grid, plus the aligned bias constant."""
    if shift:
        acc = builder.op("Mul", [acc, builder.const(np.array(1 << shift, dtype=np.int64))])
    return builder.op("Add", [acc, builder.const(bias)])


def bias_or_zeros(attrs, n_out: int, out: TensorType) -> tuple[np.ndarray, FixedType]:
    """The bias codes and type the HLS layer stores (zeros on the accumulator grid without one)."""
    bias = attrs.bias if attrs.bias is not None else np.zeros(n_out, dtype=np.int64)
    return bias, attrs.btype or FixedType(1, out.ftype.frac, False)


class LinearOp(OpDef[A]):
    """A linear op: ``weight`` / ``wtype`` codes and an optional ``bias`` / ``btype``."""

    traits = frozenset({Trait.LINEAR, Trait.RANGE_EXACT})

    def weight_bits(self, attrs) -> int:
        """Weights and biases at their inferred fixed-point widths."""
        total = attrs.weight.size * attrs.wtype.width
        if attrs.bias is not None:
            total += attrs.bias.size * attrs.btype.width
        return int(total)

    def with_bias(self, attrs, codes: np.ndarray, btype: FixedType):
        """The attributes with a bias (a constant Add folded into the layer)."""
        return dataclasses.replace(attrs, bias=codes, btype=btype)

    def weight_kind(self, attrs) -> Codebook:
        return Weights(attrs.weight, attrs.wtype.frac).kind


__all__ = ["LinearOp", "bias_aligned", "bias_or_zeros", "check_linear_attrs", "finish_acc_onnx",
           "linear_acc_frac", "linear_acc_range"]
