"""What codes mean in the user's model: real values of codes, and the input's quantizer.

Most tensors hold fixed-point codes, real value ``code * 2**-frac`` (:class:`.types.FixedType`).
A tensor quantized with a float scale, a zero point or as bipolar holds integer codes whose
real value is ``(code - zero) * scale`` (:class:`CodeScale`, exact rationals, per tensor or
per channel); the graph records it in ``Graph.scales``.  The graph input's quantizer on real
data is :class:`InputMap` (an exact :class:`..ops.affine.Step` on float64 values, or the
integer values a ``finn_datatype`` annotation allows).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..ops.affine import Step, float_thresholds
from ..ops.rounding import Rounding


def _text(v: Fraction) -> str:
    return f"{v.numerator}/{v.denominator}"


def _frac(text: str) -> Fraction:
    return Fraction(text)


@dataclass(frozen=True)
class CodeScale:
    """``real = (code - zero) * scale``: scalars, or one value per channel (axis 0).

    ``accumulator``: the codes are a layer's integer accumulator that no Quant rounds (a
    graph output such as logits); its real value is an exact rational that float64 may not
    hold, so an executor's float64 value is compared on the code grid (docs/bit-exact.md)."""

    scale: tuple[Fraction, ...]
    zero: tuple[Fraction, ...]
    accumulator: bool = False

    def _broadcast(self, values: tuple[Fraction, ...], shape: tuple[int, ...]) -> np.ndarray:
        v = np.array([float(x) for x in values], dtype=np.float64)
        return v.reshape((1, -1) + (1,) * (len(shape) - 1)) if len(values) > 1 else v.reshape(())

    def real(self, codes: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """float64 real values of int codes ``(N, *shape)`` (nearest float64 where inexact)."""
        c = np.asarray(codes, dtype=np.float64).reshape((-1, *shape))
        return (c - self._broadcast(self.zero, shape)) * self._broadcast(self.scale, shape)

    def decode(self, real: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(nearest codes, whether each value lies within a quarter step of its code)."""
        v = np.asarray(real, dtype=np.float64).reshape((-1, *shape))
        u = v / self._broadcast(self.scale, shape) + self._broadcast(self.zero, shape)
        q = np.round(u)
        return q.astype(np.int64), np.abs(u - q) <= 0.25

    def to_json(self) -> dict:
        return {"scale": [_text(v) for v in self.scale], "zero": [_text(v) for v in self.zero],
                "accumulator": self.accumulator}

    @staticmethod
    def from_json(d: dict) -> "CodeScale":
        return CodeScale(tuple(_frac(v) for v in d["scale"]), tuple(_frac(v) for v in d["zero"]), bool(d["accumulator"]))


@dataclass(frozen=True)
class InputMap:
    """Real input values -> the design's input codes.

    With ``step`` (the model's first Quant/BipolarQuant, float operations before it folded
    in): ``code = step.exact(x)``.  Without: the input is typed by an annotation, the codes
    are the values themselves and must be integers in ``[lo, hi]``."""

    step: Step | None
    lo: int
    hi: int

    def codes(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if self.step is None:
            if np.any(x != np.round(x)) or np.any(x < self.lo) or np.any(x > self.hi):
                raise ValueError(f"input values must be integers in [{self.lo}, {self.hi}] (the input's datatype)")
            return x.astype(np.int64)
        t = float_thresholds(self.step)
        return (self.step.qmin + np.searchsorted(t, x, side="right")).astype(np.int64)

    def centers(self, codes: np.ndarray) -> np.ndarray:
        """A real input per code, in the middle of the inputs that quantize to it (float64):
        what verify feeds the user's model for random codes."""
        c = np.asarray(codes, dtype=np.int64)
        if self.step is None:
            return c.astype(np.float64)
        t = float_thresholds(self.step)
        width = float(1 / abs(self.step.slope))
        edges = np.concatenate([[t[0] - width], t, [t[-1] + width]]) if len(t) else np.array([-width, width])
        mid = (edges[:-1] + edges[1:]) / 2
        return mid[c - self.step.qmin]

    def to_json(self) -> dict:
        if self.step is None:
            return {"lo": self.lo, "hi": self.hi}
        s = self.step
        return {"lo": self.lo, "hi": self.hi, "slope": _text(s.slope), "offset": _text(s.offset),
                "rounding": s.rounding.value, "qmin": s.qmin, "qmax": s.qmax, "bipolar": s.bipolar}

    @staticmethod
    def from_json(d: dict) -> "InputMap":
        if "slope" not in d:
            return InputMap(None, int(d["lo"]), int(d["hi"]))
        step = Step(_frac(d["slope"]), _frac(d["offset"]), Rounding(d["rounding"]), int(d["qmin"]), int(d["qmax"]),
                    bool(d["bipolar"]))
        return InputMap(step, int(d["lo"]), int(d["hi"]))


__all__ = ["CodeScale", "InputMap"]
