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
from enum import StrEnum

import numpy as np

from ...ir.types import TensorType

#: Bits of one LUT6 used as a read-only memory (64 x 1).
LUT6_BITS = 64
#: Depth of one LUT6 as a shift register (SRLC32E, UG574): bits per LUT of an ``ap_shift_reg``.
SRL_DEPTH = 32
#: (width, depth) configurations of a RAMB18E2 tile, simple dual port included (UG573).
BRAM18_SHAPES = ((1, 16384), (2, 8192), (4, 4096), (9, 2048), (18, 1024), (36, 512))


class Storage(StrEnum):
    """How an on-chip array is built: a RAM (registers, distributed RAM or block RAM tiles by
    its depth), or hls4ml's ``ap_shift_reg`` line buffers (shift-register LUTs)."""

    RAM = "ram"
    SHIFT = "shift register"


@dataclass(frozen=True)
class Memory:
    """One on-chip array of a kernel as its ``ARRAY_PARTITION`` pragmas leave it: ``banks``
    independent memories of ``depth`` words of ``word_bits`` (depth 1: registers)."""

    banks: int
    depth: int
    word_bits: int
    storage: Storage = Storage.RAM

    @property
    def bits(self) -> int:
        return self.banks * self.depth * self.word_bits

    @property
    def register_bits(self) -> int:
        """Flip-flops: a completely partitioned array is registers."""
        return self.bits if self.depth == 1 else 0

    @property
    def lutram_luts(self) -> int:
        """LUTs of RAM banks at most one LUT6 deep (64 words; RAM64X1D, UG574): distributed RAM."""
        if self.storage is not Storage.RAM or not 1 < self.depth <= LUT6_BITS:
            return 0
        return self.banks * self.word_bits

    @property
    def bram18(self) -> int:
        """RAMB18 tiles of its deeper RAM banks: per bank the tile shape that needs the fewest
        tiles."""
        if self.storage is not Storage.RAM or self.depth <= LUT6_BITS:
            return 0
        return self.banks * min(-(-self.word_bits // w) * -(-self.depth // d) for w, d in BRAM18_SHAPES)

    @property
    def srl_luts(self) -> int:
        """LUTs of its shift-register banks (one SRLC32E per bit per 32 words)."""
        if self.depth == 1 or self.storage is not Storage.SHIFT:
            return 0
        return self.banks * self.word_bits * -(-self.depth // SRL_DEPTH)


@dataclass(frozen=True)
class Work:
    """One layer's kernel for one sample, independent of the reuse factor."""

    macs: int  # multiply-accumulates per sample (the op's own MAC rule)
    mults: int = 0  # products of one pipelined iteration at reuse 1
    zero_mults: int = 0  # of those, products by a zero weight (hls4ml's n_zeros: no multiplier)
    steps: int = 1  # pipelined iterations per sample, each started every `reuse` cycles
    taps: int = 1  # products summed into one accumulator (adder-tree depth)
    weight_kind: str = "int"  # the weights' codebook (base.weights.Codebook): int, binary, ternary, quaternary
    x_bits: int = 0
    w_bits: int = 0
    acc_bits: int = 0
    lanes: int = 0  # non-multiply datapath lanes per iteration (comparators, adders, requantizers, tables)
    lut_per_lane: int = 0
    ff_per_lane: int = 0
    weight_bits: int = 0  # stored weights + biases
    state: tuple[Memory, ...] = ()  # arrays the kernel keeps in every io type (recurrent states, tables, frames)
    line_buffer: tuple[Memory, ...] = ()  # io_stream: line / plane buffers
    out_bits: int = 0  # the output tensor (io_parallel keeps it in registers)
    fill_steps: int = 0  # io_stream: input iterations before the first output
    reuse_dims: tuple[int, int] | None = None  # hls4ml's (n_in, n_out) reuse-factor rule; None: divisors of mults
    # products of each ALLOCATION region of a kernel with several (the recurrent cells' weight
    # products); the rest of `mults` is outside any. Empty: the whole kernel is one region.
    regions: tuple[int, ...] = ()

    @property
    def reusable(self) -> bool:
        return self.mults > 0

    def multipliers(self, reuse: int) -> int:
        """Multipliers at reuse factor ``reuse``: the ALLOCATION limit of each region
        (:func:`multiplier_limit`), plus one per product outside the regions."""
        if not self.mults:
            return 0
        if not self.regions:
            return multiplier_limit(self.mults, self.zero_mults, reuse)
        return sum(multiplier_limit(g, 0, reuse) for g in self.regions) + self.mults - sum(self.regions)

    def memories(self, io: str) -> tuple[Memory, ...]:
        """The kernel's on-chip arrays in io type ``io``."""
        return self.state + (self.line_buffer if io == "io_stream" else ())


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
                steps: int, kind: str, w_bits: int, reuse_dims=None, line_buffer: tuple[Memory, ...] = (),
                fill_steps: int = 0, state: tuple[Memory, ...] = (), acc_bits: int | None = None, lanes: int = 0,
                lut_per_lane: int = 0,
                zero_mults: int = 0, regions: tuple[int, ...] = ()) -> Work:
    """A kernel of products of the input with stored weights (dense, convolutions, cells)."""
    acc = acc_bits if acc_bits is not None else bits(out)
    return Work(macs=macs, mults=mults, zero_mults=zero_mults, steps=steps, taps=taps, weight_kind=kind, x_bits=bits(ins[0]), w_bits=w_bits,
                acc_bits=acc, lanes=lanes, lut_per_lane=lut_per_lane, ff_per_lane=acc if lanes else 0,
                weight_bits=weight_bits, state=state, line_buffer=line_buffer,
                out_bits=out.size * bits(out), fill_steps=fill_steps, reuse_dims=reuse_dims,
                regions=regions)


def padded(x: TensorType, pads: tuple[int, ...]) -> list[int]:
    """The spatial extent of ``x`` with its zero padding (begins then ends)."""
    n = len(x.shape) - 1
    return [x.shape[1 + i] + pads[i] + pads[n + i] for i in range(n)]


def plane_buffer(x: TensorType, out: TensorType, kernel, strides, pads) -> tuple[Memory, int]:
    """(the plane buffer, fill iterations) of Tessera's io_stream window kernels
    (``tessera_plane_walk``, hls_templates/common/nnet_tessera_stream.h; 1D and 2D windows
    with leading unit dims): ``planes[KD][H_ALL][W_ALL][C]`` partitioned completely over KD
    and C and cyclically by KH, KW over rows and columns, filled for ``(k_0 - 1)`` padded
    planes (rows) before the first output."""
    n = len(kernel)
    grow = lambda v, one: (one,) * (3 - n) + tuple(v)  # noqa: E731
    k, s, ins, outs = grow(kernel, 1), grow(strides, 1), grow(x.shape[1:], 1), grow(out.shape[1:], 1)
    begin = grow(pads[:n], 0)
    alls = [max((outs[i] - 1) * s[i] + k[i], ins[i] + begin[i]) for i in range(3)]
    mem = Memory(k[0] * k[1] * k[2] * x.shape[0], -(-alls[1] // k[1]) * -(-alls[2] // k[2]), bits(x))
    return mem, (kernel[0] - 1) * prod(padded(x, pads)[1:])


def line_buffer_2d(x: TensorType, k_height: int, pads) -> Memory:
    """hls4ml's io_stream 2D line buffer (``nnet_conv_stream.h``, ``shift_line_buffer``):
    ``ap_shift_reg<.., in_width> line_buffer[max(k_h - 1, 1)][C]``."""
    return Memory(max(k_height - 1, 1) * x.shape[0], padded(x, pads)[1], bits(x), Storage.SHIFT)


def window_registers(x: TensorType, kernel) -> Memory:
    """hls4ml's io_stream 1D window: the last ``k`` words of every channel in registers."""
    return Memory(prod(kernel) * x.shape[0], 1, bits(x))


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


__all__ = ["BRAM18_SHAPES", "LUT6_BITS", "Memory", "SRL_DEPTH", "Storage", "Work", "bits", "elementwise_work",
           "layout_work", "lanes", "line_buffer_2d", "linear_work", "padded", "plane_buffer", "prod", "table_work",
           "window_registers"]
