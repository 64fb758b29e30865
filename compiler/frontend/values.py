"""What an ONNX tensor name stands for while the importer walks the graph: one of a closed
set of kinds (:data:`Value`), each a frozen dataclass.

* :class:`Const` -- a constant (initializer, ``Constant`` node, a quantized weight);
* :class:`RawInput` -- the graph input before its first ``Quant``, with the float
  operations on it folded in (``mul * x + add``, clipped);
* :class:`Tensor` -- an IR value: integer codes the design computes;
* :class:`Affine` -- a real-valued tensor in flight: real constants applied to a layer's
  integer accumulator, exact rationals, until a ``Quant`` or the graph output ends it;
* :class:`Padded` -- a zero ``Pad`` that the window op reading it folds into its own pads;
* :class:`Pending` -- a nonlinearity's output waiting for the ``Quant`` it fuses with;
* :class:`CellState` -- the last ``h`` or ``c`` of a recurrent IR node;
* :class:`QuantizedCodes` -- the integer codes of an ONNX ``QuantizeLinear`` of an
  activation, waiting for the ``DequantizeLinear`` that gives them their real meaning.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class Const:
    """A constant, float64.  A ``Quant`` with a scale that is not a power of two keeps its
    integer ``codes`` and the ``scale`` of every element (``value == codes * scale``): the
    linear op reading it multiplies codes and carries the scale as a real constant."""

    value: np.ndarray
    codes: np.ndarray | None = None
    scale: np.ndarray | None = None

    @property
    def float_scaled(self) -> bool:
        return self.codes is not None


@dataclass(frozen=True)
class RawInput:
    """A graph input (real data) before its first ``Quant``: ``real = mul_c * x + add_c``,
    one factor and term for every element or one per channel (axis 0 of a sample, e.g. a
    mean / std normalization), clipped to ``[lo, hi]`` (None: unbounded), of per-sample
    ``shape`` (a Flatten / Reshape before the Quant changes it: ``reshaped``; the file's
    shape is ``model_shape``); ``source``: the model file's input name."""

    shape: tuple[int, ...]
    source: str = "x"
    model_shape: tuple[int, ...] = ()
    mul: tuple[Fraction, ...] = (Fraction(1),)
    add: tuple[Fraction, ...] = (Fraction(0),)
    lo: Fraction | None = None
    hi: Fraction | None = None
    reshaped: bool = False

    @property
    def clip(self) -> tuple[Fraction | None, Fraction | None]:
        return self.lo, self.hi

    @property
    def channels(self) -> int:
        """1 where one factor and term hold for every element, else the channels of axis 0."""
        return max(len(self.mul), len(self.add))

    def each(self) -> list[tuple[Fraction, Fraction]]:
        """``(mul, add)`` of every channel."""
        return [(self.mul[c if len(self.mul) > 1 else 0], self.add[c if len(self.add) > 1 else 0])
                for c in range(self.channels)]

    @property
    def preprocessed(self) -> bool:
        return any(p != (1, 0) for p in self.each()) or self.clip != (None, None)


@dataclass(frozen=True)
class Tensor:
    """An IR value (its name in the IR graph)."""

    name: str


@dataclass(frozen=True)
class Affine:
    """``real = clip(leaky_c(a_c * acc + b_c), lo, hi)`` on ``value``'s codes, per channel
    (axis 0) or one for all (``lo`` / ``hi``: a ReLU's or a Clip's real bounds, None for none;
    ``knee``: a LeakyRelu's / PRelu's slopes, ``leaky_c(v) = v`` for ``v >= 0`` else
    ``knee_c * v``, one or one per channel, () for none)."""

    value: str
    a: tuple[Fraction, ...]
    b: tuple[Fraction, ...]
    lo: Fraction | None = None
    hi: Fraction | None = None
    source: str = ""  # the ONNX node whose output it is
    knee: tuple[Fraction, ...] = ()

    @property
    def channels(self) -> int:
        return max(len(self.a), len(self.b), len(self.knee))

    @property
    def clipped(self) -> bool:
        return self.lo is not None or self.hi is not None

    @property
    def piecewise(self) -> bool:
        """Whether a clip or a knee bends the line (no longer ``a * acc + b``)."""
        return self.clipped or bool(self.knee)

    def each(self) -> list[tuple[Fraction, Fraction]]:
        n = self.channels
        return [(self.a[c if len(self.a) > 1 else 0], self.b[c if len(self.b) > 1 else 0]) for c in range(n)]

    def knees(self) -> list[Fraction]:
        """The knee slope of every channel (1: a straight line)."""
        return [self.knee[c if len(self.knee) > 1 else 0] if self.knee else Fraction(1) for c in range(self.channels)]


@dataclass(frozen=True)
class Padded:
    """Output of a zero ``Pad`` of the spatial axes, folded into the window op reading it."""

    value: str  # the IR value padded
    pads: tuple[int, ...]  # begins of each spatial dim, then ends (ONNX order)
    node: str


@dataclass(frozen=True)
class Pending:
    """Output of a nonlinearity (or an average) waiting for its ``Quant``: the pair becomes one op."""

    node: str


@dataclass(frozen=True, eq=False)
class CellState:
    """The last ``h`` or ``c`` of a recurrent IR node (only a forecaster cell may read it)."""

    node: Any  # ir.graph.Node
    which: str  # "h" or "c"


@dataclass(frozen=True, eq=False)
class QuantizedCodes:
    """Output of an ONNX ``QuantizeLinear`` of ``source`` (not a constant): integer codes
    ``clamp(round_half_even(x / scale) + zero, lo, hi)``, ``scale`` and ``zero`` one value or
    one per index of ``axis`` (batch included).  A ``Clip`` between it and its
    ``DequantizeLinear`` narrows ``[lo, hi]``."""

    source: str
    scale: np.ndarray
    zero: np.ndarray
    axis: int
    lo: int
    hi: int
    node: Any  # the QuantizeLinear (onnx.NodeProto)


Value = Const | RawInput | Tensor | Affine | Padded | Pending | CellState | QuantizedCodes


def whole_number(values: np.ndarray) -> int | None:
    """The integer a one-element constant holds, None if it holds anything else (several
    values, a fraction, NaN or an infinity)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size != 1 or not np.isfinite(v).all() or v.ravel()[0] != np.round(v.ravel()[0]):
        return None
    return int(v.ravel()[0])


def fractions(values: np.ndarray) -> tuple[Fraction, ...]:
    """Exact rationals of float64 values, flattened."""
    return tuple(Fraction(float(v)) for v in np.asarray(values, dtype=np.float64).ravel())


__all__ = ["Affine", "CellState", "Const", "Padded", "Pending", "QuantizedCodes", "RawInput", "Tensor", "Value",
           "fractions", "whole_number"]
