"""What codes mean in the user's model: real values of codes, and the input's quantizer.

Most tensors hold fixed-point codes, real value ``code * 2**-frac`` (:class:`.types.FixedType`).
A tensor quantized with a float scale, a zero point or as bipolar holds integer codes whose
real value is ``(code - zero) * scale`` (:class:`CodeScale`, exact rationals, per tensor or
per channel); the graph records it in ``Graph.scales``.  The graph input's quantizer on real
data is :class:`InputMap` (an exact :class:`..exact.requant.Step` on float64 values, or the
integer values a ``finn_datatype`` annotation allows).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..exact.requant import Step, float_thresholds
from ..exact.rounding import Rounding


def _text(v: Fraction) -> str:
    return f"{v.numerator}/{v.denominator}"


def _frac(text: str) -> Fraction:
    return Fraction(text)


@dataclass(frozen=True)
class CodeScale:
    """``real = (code - zero) * scale``: scalars, one value per channel (axis 0), or for a
    tensor of several axes one per element (a graph output that is a per-step head's
    accumulator on a sequence: its features' constants on the last axis).

    ``accumulator``: the codes are a layer's integer accumulator that no Quant rounds (a
    graph output such as logits); its real value is an exact rational that float64 may not
    hold, so an executor's float64 value is compared on the code grid (docs/bit-exact.md)."""

    scale: tuple[Fraction, ...]
    zero: tuple[Fraction, ...]
    accumulator: bool = False

    @property
    def channels(self) -> int:
        """1 where one scale and zero point hold for every element, else the channels of axis 0."""
        return max(len(self.scale), len(self.zero))

    def each(self) -> list[tuple[Fraction, Fraction]]:
        """``(scale, zero)`` of every channel."""
        return [(self.scale[c if len(self.scale) > 1 else 0], self.zero[c if len(self.zero) > 1 else 0])
                for c in range(self.channels)]

    def _broadcast(self, values: tuple[Fraction, ...], shape: tuple[int, ...]) -> np.ndarray:
        v = np.array([float(x) for x in values], dtype=np.float64)
        if len(values) == 1:
            return v.reshape(())
        if len(shape) > 1 and len(values) != shape[0] and len(values) == int(np.prod(shape)):
            return v.reshape((1, *shape))  # one per element
        return v.reshape((1, -1) + (1,) * (len(shape) - 1))

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
    in): ``code = step.exact(x)``; with ``channel_steps`` instead (float operations per channel
    before it, e.g. a mean / std normalization), the step of each channel of a sample's first
    axis.  With ``cuts`` (an input that several quantizers read, each differently): the cell of
    the real line ``x`` lies in, ``code = lo + #{k : x >= cuts[k]}``, the cuts being every
    quantizer's float thresholds, so that each quantizer's code is a function of the cell.
    Without any: the input is typed by an annotation, the codes are the values themselves and
    must be integers in ``[lo, hi]``."""

    step: Step | None
    lo: int
    hi: int
    channel_steps: tuple[Step, ...] = ()
    cuts: tuple[float, ...] = ()

    def _per_channel(self, values: np.ndarray, each) -> np.ndarray:
        """``each(step, values)`` on every channel (axis 1 of ``(N, C, ...)``) with its own step."""
        return np.stack([each(s, values[:, c]) for c, s in enumerate(self.channel_steps)], axis=1)

    def codes(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if self.channel_steps:
            return self._per_channel(x, _codes)
        if self.cuts:
            return (self.lo + np.searchsorted(np.array(self.cuts), x, side="right")).astype(np.int64)
        if self.step is None:
            if np.any(x != np.round(x)) or np.any(x < self.lo) or np.any(x > self.hi):
                raise ValueError(f"input values must be integers in [{self.lo}, {self.hi}] (the input's datatype)")
            return x.astype(np.int64)
        return _codes(self.step, x)

    def centers(self, codes: np.ndarray) -> np.ndarray:
        """A real input per code, in the middle of the inputs that quantize to it (float64):
        what verify feeds the user's model for random codes."""
        c = np.asarray(codes, dtype=np.int64)
        if self.channel_steps:
            return self._per_channel(c, _centers)
        if self.cuts:
            return _cell_centers(np.array(self.cuts), c - self.lo)
        if self.step is None:
            return c.astype(np.float64)
        return _centers(self.step, c)

    def to_json(self) -> dict:
        d = {"lo": self.lo, "hi": self.hi}
        if self.channel_steps:
            d["channel_steps"] = [_step_json(s) for s in self.channel_steps]
        if self.cuts:
            d["cuts"] = [float(v).hex() for v in self.cuts]
        return d if self.step is None else {**d, **_step_json(self.step)}

    @staticmethod
    def from_json(d: dict) -> "InputMap":
        channels = tuple(_step_of(s) for s in d.get("channel_steps", ()))
        cuts = tuple(float.fromhex(v) for v in d.get("cuts", ()))
        return InputMap(_step_of(d) if "slope" in d else None, int(d["lo"]), int(d["hi"]), channels, cuts)


def _codes(step: Step, x: np.ndarray) -> np.ndarray:
    return (step.qmin + np.searchsorted(float_thresholds(step), x, side="right")).astype(np.int64)


def _centers(step: Step, codes: np.ndarray) -> np.ndarray:
    t = float_thresholds(step)
    width = float(1 / abs(step.slope))
    edges = np.concatenate([[t[0] - width], t, [t[-1] + width]]) if len(t) else np.array([-width, width])
    mid = (edges[:-1] + edges[1:]) / 2
    return mid[codes - step.qmin]


def _cell_centers(cuts: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """A float64 inside each cell ``[cuts[j - 1], cuts[j])`` (below the first cut, from the last
    on): the middle, or the cell's lower end where the middle rounds onto its upper end (a cell
    of one float64); the outer cells reach one widest cell beyond the cuts."""
    width = float(np.max(np.diff(cuts), initial=1.0))
    lower = np.concatenate([[cuts[0] - width], cuts])
    upper = np.concatenate([cuts, [cuts[-1] + width]])
    mid = lower + (upper - lower) / 2
    mid = np.where(mid < upper, mid, lower)
    return mid[cells]


def _step_json(s: Step) -> dict:
    return {"slope": _text(s.slope), "offset": _text(s.offset), "rounding": s.rounding.value, "qmin": s.qmin,
            "qmax": s.qmax, "bipolar": s.bipolar}


def _step_of(d: dict) -> Step:
    return Step(_frac(d["slope"]), _frac(d["offset"]), Rounding(d["rounding"]), int(d["qmin"]), int(d["qmax"]),
                bool(d["bipolar"]))


__all__ = ["CodeScale", "InputMap"]
