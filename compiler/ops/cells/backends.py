"""The three back ends a cell step runs on (:mod:`.cells.program`): the integer semantics
(:class:`NumpyArith`), the onnxruntime reference (:class:`OnnxArith`) and the interval
analysis that types the HLS kernel (:class:`IntervalArith`)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ...errors import UnsupportedModelError
from ...ir.types import FixedType, TensorType
from ...exact.requant import MAX_PRODUCT_BITS, Step, apply_thresholds, shared_multiply_shift, thresholds
from ...exact.integer import exact_einsum, interval_dot
from ..base import limb_kernel
from ..quant import Attrs as QuantAttrs
from ..quant import requantize

#: Widest intermediate of a cell: every back end computes in int64.
MAX_CELL_WIDTH = 62
#: The codes a ConvLSTM convolves (its input and hidden state: checked signed 8-bit).
INT8_CODES = TensorType((1,), FixedType(8, 0, True), -128, 127)


@dataclass(frozen=True)
class Fx:
    """A value inside a cell step: back-end payload ``v`` whose real value is
    ``v * mult * 2**-frac`` (``mult`` odd: 1 on power-of-two grids, the odd part of a
    float scale otherwise)."""

    v: Any
    frac: int
    mult: int = 1

    @property
    def scale(self) -> Fraction:
        return scale_of(self.mult, self.frac)


def scale_of(mult: int, frac: int) -> Fraction:
    """``mult * 2**-frac`` exactly."""
    return Fraction(mult, 1 << frac) if frac >= 0 else Fraction(mult << -frac)


@dataclass(frozen=True, eq=False)
class StepForm:
    """A requantization by a rational slope (a float scale), one step or one per row (a
    bias per row), over the reachable interval of its input: the thresholds (the
    definition, run by the integer semantics and the reference) and the proven
    multiply-shift ``(M * x + C_row) >> shift`` the kernel computes."""

    steps: tuple[Step, ...]
    sign: int
    thr: np.ndarray  # (rows, K) int64
    mult: int | None  # None: no multiply-shift fits; the kernel compares with the thresholds
    adds: tuple[int, ...]
    shift: int

    @property
    def qmin(self) -> int:
        return self.steps[0].qmin


# ---------------------------------------------------------------------------------------
# back ends
# ---------------------------------------------------------------------------------------


class NumpyArith:
    """int64 codes, arrays with a leading batch dimension; ``forms``: the step forms of the
    op's analysis (scaled requantizations)."""

    def __init__(self, forms: dict | None = None) -> None:
        self.forms = forms or {}

    def record(self, name: str, x: Fx) -> None:
        pass

    def requant_steps(self, a, name: str, steps):
        f = self.forms[name]
        if len(f.steps) == 1:
            return apply_thresholds(f.sign, f.thr[0], f.qmin, a)
        y = np.empty_like(a)
        for j in range(len(f.steps)):
            y[:, j] = apply_thresholds(f.sign, f.thr[j], f.qmin, a[:, j])
        return y

    def const(self, codes: np.ndarray) -> Any:
        return np.asarray(codes, dtype=np.int64)

    def matmul(self, x, w: np.ndarray):
        return exact_einsum("...i,oi->...o", x, w)

    def conv(self, x, w: np.ndarray):
        k = w.shape[-1]
        p = k // 2
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        h, wd = x.shape[2], x.shape[3]
        win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, :h, :wd]
        return exact_einsum("nchwij,ocij->nohw", win, w)

    def add(self, a, b):
        return a + b

    def mul(self, a, b):
        return a * b

    def shl(self, a, k: int):
        return a << np.int64(k)

    def requant(self, a, in_frac: int, q: QuantAttrs):
        return requantize(q, a, in_frac)

    def lut(self, a, table: np.ndarray, lo: int):
        return table[a - lo]


class IntervalArith:
    """Payloads are inclusive integer intervals ``(lo, hi)`` over all reachable codes;
    :meth:`record` keeps the fixed-point type of each named intermediate."""

    def __init__(self, threshold_kernels: bool = False) -> None:
        #: the op's kernel can requantize by comparing with thresholds (else: a multiply-shift)
        self.threshold_kernels = threshold_kernels
        self.types: dict[str, FixedType] = {}
        self.ranges: dict[str, tuple[int, int]] = {}
        self.mults: dict[str, int] = {}
        self.forms: dict[str, StepForm] = {}

    def requant_steps(self, a, name: str, steps):
        """Thresholds and the proven shared multiply-shift of ``steps`` over ``a``; the
        kernel's product ``M * x + C`` is recorded as ``<name>_ms``.  Where no multiply-shift
        fits and ``threshold_kernels``, the kernel compares with the thresholds (one step)."""
        lo, hi = a
        st = [thresholds(s, lo, hi) for s in steps]
        found = shared_multiply_shift(list(steps), lo, hi, st)
        thr = np.array([[int(v) for v in t] for _, t in st], dtype=np.int64).reshape(len(steps), -1)
        if found is None:
            width = FixedType.for_range(min(lo, 0), max(hi, 0), 0).width
            # the kernel's threshold form: one step, increasing, thresholds exact in the float64
            # weight files hls4ml writes
            if not self.threshold_kernels or len(steps) > 1 or st[0][0] != 1 or width > 53:
                raise UnsupportedModelError(f"{name}: its float-scale requantization of {width}-bit values has no proven "
                                            f"multiply-shift within {MAX_PRODUCT_BITS} bits (too many significant bits "
                                            "in the scales it combines)")
            self.forms[name] = StepForm(tuple(steps), st[0][0], thr, None, (), 0)
        else:
            mult, adds, shift = found
            self.forms[name] = StepForm(tuple(steps), st[0][0], thr, mult, tuple(adds), shift)
            ends = [mult * v + c for v in (lo, hi) for c in adds]
            self.record(f"{name}_ms", Fx((min(ends), max(ends)), 0))
        outs = [s.exact(v) for s in steps for v in (lo, hi)]
        return min(outs), max(outs)

    def record(self, name: str, x: Fx) -> None:
        lo, hi = x.v
        t = FixedType.for_range(min(lo, 0), max(hi, 0), x.frac)
        if t.width > MAX_CELL_WIDTH:
            raise UnsupportedModelError(f"{name} needs {t.width} bits, more than the {MAX_CELL_WIDTH} the exact flow supports")
        self.types[name], self.ranges[name], self.mults[name] = t, (lo, hi), x.mult

    def const(self, codes: np.ndarray):
        return int(np.min(codes)), int(np.max(codes))

    def matmul(self, x, w: np.ndarray):
        lo, hi = min(x[0], 0), max(x[1], 0)  # zero: also covers padding and empty sums
        mn, mx = interval_dot(w.reshape(w.shape[0], -1), lo, hi, axis=1)
        return int(min(mn)), int(max(mx))

    conv = matmul

    def add(self, a, b):
        return a[0] + b[0], a[1] + b[1]

    def mul(self, a, b):
        p = [a[i] * b[j] for i in (0, 1) for j in (0, 1)]
        return min(p), max(p)

    def shl(self, a, k: int):
        return a[0] << k, a[1] << k

    def requant(self, a, in_frac: int, q: QuantAttrs):
        lo, hi = requantize(q, np.array(a, dtype=np.int64), in_frac)
        return int(lo), int(hi)

    def lut(self, a, table: np.ndarray, lo: int):
        seg = table[a[0] - lo: a[1] - lo + 1]
        return int(seg.min()), int(seg.max())


class OnnxArith:
    """Emits int64 ONNX nodes through the reference's ``OnnxBuilder``."""

    def __init__(self, builder, forms: dict | None = None, spatial: int = 0) -> None:
        self.builder = builder
        self.forms = forms or {}
        self.spatial = spatial  # axes after the row (channel) axis: 2 for a ConvLSTM's frames

    def record(self, name: str, x: Fx) -> None:
        pass

    def requant_steps(self, a: str, name: str, steps) -> str:
        """``qmin + #{k : sign * a >= t_k}`` per row: integer comparisons, exact."""
        b, f = self.builder, self.forms[name]
        u = b.op("Unsqueeze", [b.op("Mul", [a, b.const(np.array(f.sign, dtype=np.int64))]),
                               b.const(np.array([-1], dtype=np.int64))])
        t = f.thr.reshape(len(f.steps), *([1] * self.spatial), -1) if len(f.steps) > 1 else f.thr[0]
        ge = b.op("Cast", [b.op("GreaterOrEqual", [u, b.const(t.astype(np.int64))])], to="int64")
        count = b.op("ReduceSum", [ge, b.const(np.array([-1], dtype=np.int64))], keepdims=0)
        return b.op("Add", [count, b.const(np.array(f.qmin, dtype=np.int64))])

    def const(self, codes: np.ndarray) -> str:
        return self.builder.const(np.asarray(codes, dtype=np.int64))

    def matmul(self, x: str, w: np.ndarray) -> str:
        return self.builder.op("MatMul", [x, self.builder.const(np.ascontiguousarray(w.T).astype(np.int64))])

    def conv(self, x: str, w: np.ndarray) -> str:
        """'same' 2D convolution of int8 codes, one ConvInteger per 7-bit weight limb."""
        p = w.shape[-1] // 2
        acc = limb_kernel(self.builder, "ConvInteger", x, INT8_CODES, w, out_axis=0, pads=[p, p, p, p])
        if acc is None:
            raise UnsupportedModelError(f"a {w.shape} cell convolution's int32 sums could overflow")
        return acc

    def add(self, a: str, b_: str) -> str:
        return self.builder.op("Add", [a, b_])

    def mul(self, a: str, b_: str) -> str:
        return self.builder.op("Mul", [a, b_])

    def shl(self, a: str, k: int) -> str:
        return self.builder.op("Mul", [a, self.builder.const(np.array(1 << k, dtype=np.int64))])

    def requant(self, a: str, in_frac: int, q: QuantAttrs) -> str:
        builder = self.builder
        shift = in_frac - q.out.frac
        if shift > 0:
            a = builder.int_shift_round(a, shift, q.rounding)
        elif shift < 0:
            a = self.shl(a, -shift)
        a = builder.op("Max", [a, builder.const(np.array(q.qmin, dtype=np.int64))])
        return builder.op("Min", [a, builder.const(np.array(q.qmax, dtype=np.int64))])

    def lut(self, a: str, table: np.ndarray, lo: int) -> str:
        idx = self.builder.op("Sub", [a, self.builder.const(np.array(lo, dtype=np.int64))])
        return self.builder.op("Gather", [self.builder.const(table.astype(np.int64)), idx], axis=0)


class Prefixed:
    """A back end whose recorded names get a prefix (two cells in one op)."""

    def __init__(self, inner, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix

    def record(self, name: str, x: Fx) -> None:
        self.inner.record(self.prefix + name, x)

    def requant_steps(self, a, name: str, steps):
        return self.inner.requant_steps(a, self.prefix + name, steps)

    def __getattr__(self, item):
        return getattr(self.inner, item)
