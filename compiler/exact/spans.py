"""Boxes of spatial positions and the per-dimension arithmetic of which inputs an output reads.

A *span* is a half-open box ``((a0, b0), (a1, b1), ...)`` over a value's spatial dims
(``(C, D, H, W)`` -> ``(D, H, W)``).  Each spatial op maps a span of its output to the span
of its input that it reads (``OpDef.input_span``), unclipped: indices outside ``[0, size)``
are the op's zero padding.  These rules are the one definition of halo arithmetic: the
partition planner (``partition/regions.py``) and the training companion's spatial sharding
(``training/``) both use them.
"""

from __future__ import annotations

Span = tuple[tuple[int, int], ...]


def window_input(a: int, b: int, k: int, s: int, p: int) -> tuple[int, int]:
    """Outputs [a, b) of a window op (kernel k, stride s, begin padding p) read inputs
    [a*s - p, (b-1)*s - p + k)."""
    return a * s - p, (b - 1) * s - p + k


def transposed_input(a: int, b: int, k: int, s: int, p: int) -> tuple[int, int]:
    """Outputs [a, b) of a transposed convolution: output o gathers inputs i with
    o + p - kk = i * s, kk in [0, k)."""
    return -((-(a + p - k + 1)) // s), (b - 1 + p) // s + 1


def upsample_input(a: int, b: int, f: int) -> tuple[int, int]:
    """Outputs [a, b) of nearest upsampling by f read inputs [a // f, (b-1) // f + 1)."""
    return a // f, (b - 1) // f + 1


def window_span(span: Span, kernel, strides, pads) -> Span:
    """The input span of a window op (kernel, strides and begin pads per dim)."""
    return tuple(window_input(lo, hi, kernel[i], strides[i], pads[i]) for i, (lo, hi) in enumerate(span))


__all__ = ["Span", "transposed_input", "upsample_input", "window_input", "window_span"]
