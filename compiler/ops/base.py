"""The contract every op module fulfils: one place per op for its integer semantics.

An op module defines an ``Attrs`` dataclass and an ``OpDef`` subclass with

- ``infer``: output shape, fixed-point type and reachable code range (from the input
  ranges and the actual weights: the source of every accumulator width),
- ``reference``: the integer semantics on int64 codes (numpy, batch-first),
- ``emit_onnx``: the same semantics as exact onnxruntime nodes (integer kernels, or
  float64 only where every intermediate is provably an integer below 2**53),
- ``lower``: the hls4ml layer(s) and the precisions/template parameters,
- ``macs``: multiply-accumulates per sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.types import MAX_WIDTH, TensorType


class OpDef:
    name = "?"

    def infer(self, attrs: Any, ins: list[TensorType], node: str) -> TensorType:
        raise NotImplementedError

    def reference(self, attrs: Any, xs: list[np.ndarray], ins: list[TensorType], out: TensorType) -> np.ndarray:
        raise NotImplementedError

    def emit_onnx(self, attrs: Any, b: Any, xs: list[str], ins: list[TensorType], out: TensorType) -> str:
        raise NotImplementedError

    def lower(self, attrs: Any, hl: Any, node: Any, ins: list[TensorType], out: TensorType) -> None:
        raise NotImplementedError

    def macs(self, attrs: Any, ins: list[TensorType], out: TensorType) -> int:
        return 0


def check_width(t: TensorType, node: str, what: str) -> TensorType:
    """Refuse types wider than the exact float64 bridge allows, naming the node."""
    if t.ftype.width > MAX_WIDTH:
        raise UnsupportedModelError(
            f"node '{node}': {what} needs {t.ftype.width} bits, more than the {MAX_WIDTH} the exact flow supports"
        )
    return t


def fits_int8(t: TensorType) -> str | None:
    """'int8' / 'uint8' when every reachable code fits that ONNX integer type, else None."""
    if 0 <= t.lo and t.hi <= 255:
        return "uint8"
    if -128 <= t.lo and t.hi <= 127:
        return "int8"
    return None


def int8_limbs(w: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """Balanced radix-128 digits of integer codes: ``w == sum(limb << shift)`` with every
    limb in [-64, 63] (an int8), one limb per 7 bits of ``w``.  Lets an integer-only ONNX
    kernel (ConvInteger: 8-bit operands) compute a product with wider weights exactly, one
    pass per limb."""
    rest = np.asarray(w, dtype=np.int64)
    limbs, shift = [], 0
    while True:
        digit = ((rest + 64) & 127) - 64
        limbs.append((digit.astype(np.int8), shift))
        rest = (rest - digit) >> 7
        shift += 7
        if not rest.any():
            return limbs


def interval_dot(w: np.ndarray, lo: int, hi: int, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact min and max of sum(w * x) over every x in [lo, hi]^n, reduced along ``axis``."""
    w = np.asarray(w, dtype=object)
    a, b = w * int(lo), w * int(hi)
    mx = np.where(w >= 0, b, a)
    mn = np.where(w >= 0, a, b)
    return mn.sum(axis=axis), mx.sum(axis=axis)


# -- shared by the linear ops (dense, conv, convtranspose) --------------------------------


def check_linear_attrs(attrs, x: TensorType, c_in: int, c_out: int, node: str, what: str) -> None:
    """Shapes of a conv-like op: input (c_in, *spatial), bias (c_out,), strides and pads per dim."""
    from ..errors import UnsupportedModelError

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


def finish_acc_onnx(b, acc: str, shift: int, bias: np.ndarray) -> str:
    """int64 accumulator -> aligned to the accumulator grid, plus the aligned bias constant."""
    if shift:
        acc = b.op("Mul", [acc, b.const(np.array(1 << shift, dtype=np.int64))])
    return b.op("Add", [acc, b.const(bias)])
