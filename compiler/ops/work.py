"""What one layer's kernel does for one sample, before a reuse factor: the ``cost`` facet.

Each op's ``cost`` returns a :class:`Work`: the products of one pipelined iteration of its
kernel (what hls4ml's ``multiplier_limit`` counts at reuse 1) and their operand widths and
weight codebook, how many iterations a sample takes, the non-multiply datapath, stored
weights and on-chip buffers.  The loop structure each op describes is that of the kernel
Tessera emits: hls4ml's ``dense_latency`` / ``conv_2d_latency_cl`` (one output pixel per
iteration, parallelization factor 1) and Tessera's own kernels (``hls_templates``: one
output pixel, or one hidden unit of one recurrent step, per ``PIPELINE II = reuse_factor``
iteration).  What the products and the datapath cost on a part (DSP or LUT multipliers,
resources, latency) is the estimator's (``estimate/model.py``); docs/estimate.md gives every
formula.  Everything here is an estimate, not a synthesis result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.types import TensorType

#: Bits of one LUT6 used as a read-only memory (64 x 1).
LUT6_BITS = 64


@dataclass(frozen=True)
class Work:
    """One layer's kernel for one sample, independent of the reuse factor."""

    macs: int  # multiply-accumulates per sample (the op's own MAC rule)
    mults: int = 0  # products of one pipelined iteration at reuse 1
    zero_mults: int = 0  # of those, products by a zero weight (hls4ml's n_zeros: no multiplier)
    steps: int = 1  # pipelined iterations per sample, each started every `reuse` cycles
    taps: int = 1  # products summed into one accumulator (adder-tree depth)
    weight_kind: str = "int"  # the weights' codebook (cellprog.Codebook): int, binary, ternary, quaternary
    x_bits: int = 0
    w_bits: int = 0
    acc_bits: int = 0
    lanes: int = 0  # non-multiply datapath lanes per iteration (comparators, adders, requantizers, tables)
    lut_per_lane: int = 0
    ff_per_lane: int = 0
    weight_bits: int = 0  # stored weights + biases
    state_bits: int = 0  # on-chip RAM the kernel needs in every io type (recurrent states, frames)
    line_buffer_bits: int = 0  # io_stream: line / plane buffers
    out_bits: int = 0  # the output tensor (io_parallel keeps it in registers)
    fill_steps: int = 0  # io_stream: input iterations before the first output
    reuse_dims: tuple[int, int] | None = None  # hls4ml's (n_in, n_out) reuse-factor rule; None: divisors of mults

    @property
    def reusable(self) -> bool:
        return self.mults > 0


def bits(t: TensorType) -> int:
    return t.ftype.width


def prod(xs) -> int:
    return int(np.prod(xs)) if len(xs) else 1


def multiplier_limit(mults: int, zero_mults: int, reuse: int) -> int:
    """Multipliers of a kernel whose pipelined iteration has ``mults`` products
    (``zero_mults`` of them by zero weights) started every ``reuse`` cycles: hls4ml's
    ``multiplier_limit = DIV_ROUNDUP(mults, reuse) - n_zeros / reuse``, the ``ALLOCATION``
    limit of its dense and convolution kernels and of Tessera's 3D convolution, and the
    estimator's multiplier count (estimate/model.py)."""
    return -(-mults // reuse) - zero_mults // reuse


def linear_work(ins: list[TensorType], out: TensorType, *, macs: int, weight_bits: int, mults: int, taps: int,
                steps: int, kind: str, w_bits: int, reuse_dims=None, line_buffer_bits: int = 0, fill_steps: int = 0,
                state_bits: int = 0, acc_bits: int | None = None, lanes: int = 0, lut_per_lane: int = 0,
                zero_mults: int = 0) -> Work:
    """A kernel of products of the input with stored weights (dense, convolutions, cells)."""
    acc = acc_bits if acc_bits is not None else bits(out)
    return Work(macs=macs, mults=mults, zero_mults=zero_mults, steps=steps, taps=taps, weight_kind=kind, x_bits=bits(ins[0]), w_bits=w_bits,
                acc_bits=acc, lanes=lanes, lut_per_lane=lut_per_lane, ff_per_lane=acc if lanes else 0,
                weight_bits=weight_bits, state_bits=state_bits, line_buffer_bits=line_buffer_bits,
                out_bits=out.size * bits(out), fill_steps=fill_steps, reuse_dims=reuse_dims)


def padded(x: TensorType, pads: tuple[int, ...]) -> list[int]:
    """The spatial extent of ``x`` with its zero padding (begins then ends)."""
    n = len(x.shape) - 1
    return [x.shape[1 + i] + pads[i] + pads[n + i] for i in range(n)]


def window_buffer(x: TensorType, k0: int, extent: list[int]) -> tuple[int, int]:
    """(line-buffer bits, fill iterations) of a window kernel in io_stream: the last k0
    padded rows (2D) / planes (3D) of all channels, filled before the first output."""
    plane = prod(extent[1:])
    return k0 * plane * x.shape[0] * bits(x), (k0 - 1) * plane


def lanes(t: TensorType, io: str) -> tuple[int, int]:
    """(lanes, iterations): io_parallel computes every element at once; io_stream one word
    (one pixel's channels, one sequence step's features) per iteration."""
    if io == "io_parallel" or len(t.shape) <= 1:
        return t.size, 1
    if len(t.shape) == 2:  # (T, F) sequences
        return t.shape[1], t.shape[0]
    return t.shape[0], prod(t.shape[1:])


def elementwise_work(out: TensorType, io: str, lut_per_bit: int, macs: int = 0) -> Work:
    """One lane per element (io_parallel) or per word (io_stream), ``lut_per_bit`` LUTs per output bit."""
    n, steps = lanes(out, io)
    return Work(macs=macs, steps=steps, lanes=n, lut_per_lane=lut_per_bit * bits(out), ff_per_lane=bits(out),
                out_bits=out.size * bits(out))


def table_work(x: TensorType, out: TensorType, io: str, macs: int = 0) -> Work:
    """A lookup table per lane: (input codes) x (output bits) of ROM in LUT6s."""
    n, steps = lanes(out, io)
    rom = (x.hi - x.lo + 1) * bits(out)
    return Work(macs=macs, steps=steps, lanes=n, lut_per_lane=math.ceil(rom / LUT6_BITS), ff_per_lane=bits(out),
                out_bits=out.size * bits(out))


def layout_work() -> Work:
    """A relabelling of an array or a stream: no logic."""
    return Work(macs=0, steps=0)


__all__ = ["LUT6_BITS", "Work", "bits", "elementwise_work", "layout_work", "lanes", "linear_work", "padded", "prod",
           "table_work", "window_buffer"]
