"""Per-op cost rules: what one layer's kernel does for one sample, before a reuse factor.

One registry, :data:`COST_RULES`, maps an op name to a rule ``rule(node, ins, out, io)``
returning a :class:`Work`: the multipliers of one pipelined iteration of the kernel (the
products hls4ml's ``multiplier_limit`` counts at reuse 1), how many iterations a sample
takes, the non-multiply datapath, stored weights and on-chip buffers.  The kernel loop
structure each rule describes is that of the kernel Tessera emits: hls4ml's
``dense_latency`` / ``conv_2d_latency_cl`` (one output pixel per iteration, parallelization
factor 1) and Tessera's own kernels (``hls_templates``: one output pixel, or one hidden unit
of one recurrent step, per ``PIPELINE II = reuse_factor`` iteration).  See docs/estimate.md
for every formula and its source.  Everything here is an estimate, not a synthesis result.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..ir.graph import Node
from ..ir.types import FixedType, TensorType
from ..ops import OPS
from ..ops.cellprog import Weights
from .parts import DSP_A_BITS, DSP_B_BITS

#: Bits per stored weight code of a codebook (binary: 1 bit, b -> 2b - 1; ternary 2; quaternary 3).
CODEBOOK_BITS = {"binary": 1, "ternary": 2, "quaternary": 3}
#: A product whose operand widths sum to at most this many bits is built from LUTs (an
#: assumption following the hls4ml studies, see docs/estimate.md), wider ones use DSP48E2s.
LUT_MULT_MAX_BITS = 10
#: Bits of one LUT6 used as a read-only memory (64 x 1).
LUT6_BITS = 64


@dataclass(frozen=True)
class Work:
    """One layer's kernel for one sample, independent of the reuse factor."""

    macs: int  # multiply-accumulates per sample (the op's own MAC rule)
    mults: int = 0  # products of one pipelined iteration at reuse 1
    steps: int = 1  # pipelined iterations per sample, each started every `reuse` cycles
    taps: int = 1  # products summed into one accumulator (adder-tree depth)
    mult_kind: str = "none"  # dsp | lut | none
    dsp_per_mult: int = 0
    lut_per_mult: int = 0
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


# -- weights --------------------------------------------------------------------------------


def _int_bits(codes) -> int:
    if codes is None or not len(codes):
        return 0
    return int(codes.size * FixedType.for_range(min(int(codes.min()), 0), max(int(codes.max()), 0), 0).width)


def _cells(a) -> list:
    """The recurrent cells of an op's attrs: itself (LSTM, GRU) or encoder and forecaster (ConvLSTM)."""
    if hasattr(a, "gates"):
        return [a]
    return [c for c in (getattr(a, "encoder", None), getattr(a, "forecaster", None)) if c is not None]


def cell_matrices(cell) -> list[Weights]:
    return [w for g in cell.gates for w in (g.wx, g.wh) if w is not None]


def codebook_kind(mats: list[Weights]) -> str:
    kinds = {w.kind for w in mats}
    return kinds.pop() if len(kinds) == 1 else "int"


def stored_width(mats: list[Weights]) -> int:
    """Bits per stored code: the codebook's storage width, or the integer code width."""
    return CODEBOOK_BITS.get(codebook_kind(mats)) or max(w.ftype.width for w in mats)


def node_weight_bits(node: Node) -> int:
    """Bits of a node's weights and biases as stored: linear layers at their inferred
    fixed-point width; recurrent cells at their codebook's storage width (1/2/3 bits) or
    their integer code width, plus biases."""
    a = node.attrs
    if hasattr(a, "weight"):
        bits = a.weight.size * a.wtype.width
        if a.bias is not None:
            bits += a.bias.size * a.btype.width
        return int(bits)
    bits = 0
    for cell in _cells(a):
        mats = cell_matrices(cell)
        bits += sum(w.codes.size for w in mats) * stored_width(mats)
        for g in cell.gates:
            bits += sum(_int_bits(getattr(g, b, None)) for b in ("bias", "bx", "bh"))
    return int(bits)


def mult_cost(kind: str, x_bits: int, w_bits: int) -> tuple[str, int, int]:
    """(dsp | lut, LUTs per multiplier, DSP48E2s per multiplier) of one product.

    Codebook weights multiply by sign selection (binary, ternary) plus a one-bit shift
    (quaternary): a conditional negation of x, about one LUT per bit.  Narrow integer
    products (operand widths summing to <= LUT_MULT_MAX_BITS) are LUT array multipliers,
    about x_bits * w_bits LUTs.  Wider products use DSP48E2 slices (27 x 18 bits), tiled.
    """
    if kind in CODEBOOK_BITS:
        return "lut", x_bits + (1 if kind == "quaternary" else 0), 0
    if x_bits + w_bits <= LUT_MULT_MAX_BITS:
        return "lut", x_bits * w_bits, 0
    tiles = min(math.ceil(x_bits / DSP_A_BITS) * math.ceil(w_bits / DSP_B_BITS),
                math.ceil(x_bits / DSP_B_BITS) * math.ceil(w_bits / DSP_A_BITS))
    return "dsp", 0, tiles


def _bits(t: TensorType) -> int:
    return t.ftype.width


def _prod(xs) -> int:
    return int(np.prod(xs)) if len(xs) else 1


def _macs(node: Node, ins: list[TensorType], out: TensorType) -> int:
    return int(OPS[node.op].macs(node.attrs, ins, out))


def _linear(node, ins, out, *, mults: int, taps: int, steps: int, kind: str, w_bits: int,
            reuse_dims=None, line_buffer_bits: int = 0, fill_steps: int = 0, state_bits: int = 0,
            acc_bits: int | None = None, lanes: int = 0, lut_per_lane: int = 0) -> Work:
    x = ins[0]
    mk, lut_m, dsp_m = mult_cost(kind, _bits(x), w_bits)
    acc = acc_bits if acc_bits is not None else _bits(out)
    return Work(macs=_macs(node, ins, out), mults=mults, steps=steps, taps=taps, mult_kind=mk, dsp_per_mult=dsp_m,
                lut_per_mult=lut_m, x_bits=_bits(x), w_bits=w_bits, acc_bits=acc, lanes=lanes,
                lut_per_lane=lut_per_lane, ff_per_lane=acc if lanes else 0, weight_bits=node_weight_bits(node),
                state_bits=state_bits, line_buffer_bits=line_buffer_bits, out_bits=out.size * _bits(out),
                fill_steps=fill_steps, reuse_dims=reuse_dims)


def _weight_kind(attrs) -> str:
    return Weights(attrs.weight, attrs.wtype.frac).kind


def _padded(attrs, x: TensorType) -> list[int]:
    n = len(x.shape) - 1
    pads = getattr(attrs, "pads", (0,) * (2 * n))
    return [x.shape[1 + i] + pads[i] + pads[n + i] for i in range(n)]


def _window_buffer(x: TensorType, k0: int, padded: list[int]) -> tuple[int, int]:
    """(line-buffer bits, fill iterations) of a window kernel in io_stream: the last k0
    padded rows (2D) / planes (3D) of all channels, filled before the first output."""
    plane = _prod(padded[1:])
    return k0 * plane * x.shape[0] * _bits(x), (k0 - 1) * plane


# -- rules ---------------------------------------------------------------------------------


def _dense(node, ins, out, io):
    n_in, n_out = node.attrs.weight.shape
    return _linear(node, ins, out, mults=n_in * n_out, taps=n_in, steps=1, kind=_weight_kind(node.attrs),
                   w_bits=node.attrs.wtype.width, reuse_dims=(n_in, n_out))


def _conv(node, ins, out, io):
    a, x = node.attrs, ins[0]
    f, c = a.weight.shape[:2]
    k = a.weight.shape[2:]
    padded = _padded(a, x)
    buf, fill = _window_buffer(x, k[0], padded)
    stream = io == "io_stream"
    return _linear(node, ins, out, mults=_prod(k) * c * f, taps=_prod(k) * c,
                   steps=_prod(padded) if stream else _prod(out.shape[1:]), kind=_weight_kind(a),
                   w_bits=a.wtype.width, reuse_dims=(_prod(k) * c, f) if a.ndim == 2 else None,
                   line_buffer_bits=buf if stream else 0, fill_steps=fill if stream else 0)


def _convtranspose(node, ins, out, io):
    """Gather form (hls_templates/convtranspose3d): each output pixel sums C x prod(ceil(k/s))
    input taps per filter; io_stream keeps a ring of ceil(k0/s0) input planes."""
    a, x = node.attrs, ins[0]
    c, f = a.weight.shape[:2]
    k = a.weight.shape[2:]
    per_dim = [math.ceil(ki / si) for ki, si in zip(k, a.strides)]
    taps = c * _prod(per_dim)
    stream = io == "io_stream"
    ring = per_dim[0] * _prod(x.shape[2:]) * c * _bits(x)
    return _linear(node, ins, out, mults=taps * f, taps=taps, steps=_prod(out.shape[1:]), kind=_weight_kind(a),
                   w_bits=a.wtype.width, line_buffer_bits=ring if stream else 0,
                   fill_steps=(per_dim[0] - 1) * _prod(out.shape[2:]) if stream else 0)


def _recurrent(node, ins, out, io, *, mults: int, taps: int, steps: int, frames: int = 1):
    """LSTM / GRU / ConvLSTM kernels (hls_templates/rnn): the Hidden (x Pixels) loop is
    pipelined with II = reuse; one iteration computes every gate of one unit (one pixel)."""
    cells = _cells(node.attrs)
    mats = [w for cell in cells for w in cell_matrices(cell)]
    kind = codebook_kind(mats)
    x = ins[0]
    hidden = cells[0].hidden
    w_bits = stored_width(mats)
    # h, c and the next h of every cell, per pixel (frames = pixels of one frame)
    state = sum(3 * hidden * frames * c.out.out.width for c in cells) if hasattr(cells[0], "cell") else \
        2 * hidden * frames * node.attrs.out.out.width
    tables = sum((g.acc.qmax - g.acc.qmin + 1) * g.act.out.out.width for c in cells for g in c.gates)
    gates = len(cells[0].gates)
    return _linear(node, ins, out, mults=mults, taps=taps, steps=steps, kind=kind, w_bits=w_bits,
                   state_bits=state + tables, acc_bits=_bits(x) + w_bits + max(1, math.ceil(math.log2(taps))),
                   lanes=gates, lut_per_lane=_bits(out))


def _lstm(node, ins, out, io):
    t, i = ins[0].shape
    a = node.attrs
    gates = 3 if a.cifg else 4
    return _recurrent(node, ins, out, io, mults=gates * (i + a.hidden), taps=i + a.hidden, steps=t * a.hidden)


def _gru(node, ins, out, io):
    t, i = ins[0].shape
    a = node.attrs
    return _recurrent(node, ins, out, io, mults=3 * (i + a.hidden), taps=i + a.hidden, steps=t * a.hidden)


def _convlstm(node, ins, out, io):
    t, c, hh, ww = ins[0].shape
    a = node.attrs
    enc, pix = a.encoder, hh * ww
    mults = 4 * (c + enc.hidden) * enc.kernel ** 2
    steps = t * enc.hidden * pix
    if a.forecaster is not None:
        mults += 4 * enc.hidden * a.forecaster.kernel ** 2
        steps += a.steps_out * enc.hidden * pix
    return _recurrent(node, ins, out, io, mults=mults, taps=(c + enc.hidden) * enc.kernel ** 2, steps=steps, frames=pix)


def _pool(node, ins, out, io):
    """Max / average pooling: one output pixel per iteration, C x K comparators or adders."""
    a, x = node.attrs, ins[0]
    k = _prod(a.kernel)
    padded = _padded(a, x)
    stream = io == "io_stream"
    buf, fill = _window_buffer(x, a.kernel[0], padded)
    extra = max(1, math.ceil(math.log2(k))) if node.op == "avgpool" else 0
    return Work(macs=_macs(node, ins, out), steps=_prod(padded) if stream else _prod(out.shape[1:]),
                lanes=x.shape[0] * k, lut_per_lane=_bits(x) + extra, ff_per_lane=_bits(out),
                line_buffer_bits=buf if stream else 0, fill_steps=fill if stream else 0,
                out_bits=out.size * _bits(out))


def _upsample(node, ins, out, io):
    x = ins[0]
    stream = io == "io_stream"
    return Work(macs=_macs(node, ins, out), steps=_prod(out.shape[1:]), lanes=x.shape[0], lut_per_lane=_bits(x),
                ff_per_lane=_bits(x), line_buffer_bits=_prod(x.shape[2:]) * x.shape[0] * _bits(x) if stream else 0,
                out_bits=out.size * _bits(out))


def _lanes(t: TensorType, io: str) -> tuple[int, int]:
    """(lanes, iterations): io_parallel computes every element at once; io_stream one word
    (one pixel's channels, one sequence step's features) per iteration."""
    if io == "io_parallel" or len(t.shape) <= 1:
        return t.size, 1
    if len(t.shape) == 2:  # (T, F) sequences
        return t.shape[1], t.shape[0]
    return t.shape[0], _prod(t.shape[1:])


def _elementwise(lut_per_bit: int):
    def rule(node, ins, out, io):
        lanes, steps = _lanes(out, io)
        return Work(macs=_macs(node, ins, out), steps=steps, lanes=lanes, lut_per_lane=lut_per_bit * _bits(out),
                    ff_per_lane=_bits(out), out_bits=out.size * _bits(out))
    return rule


def _lut(node, ins, out, io):
    """A lookup table per lane: (input codes) x (output bits) of ROM in LUT6s."""
    x = ins[0]
    lanes, steps = _lanes(out, io)
    rom = (x.hi - x.lo + 1) * _bits(out)
    return Work(macs=_macs(node, ins, out), steps=steps, lanes=lanes, lut_per_lane=math.ceil(rom / LUT6_BITS),
                ff_per_lane=_bits(out), out_bits=out.size * _bits(out))


def _crop(node, ins, out, io):
    """A box of the input: wires in io_parallel; io_stream reads every input word and
    forwards those inside the box (a word register per channel)."""
    x = ins[0]
    if io == "io_parallel":
        return Work(macs=_macs(node, ins, out), steps=0, out_bits=out.size * _bits(out))
    return Work(macs=_macs(node, ins, out), steps=_prod(x.shape[1:]), lanes=x.shape[0], ff_per_lane=_bits(x))


def _layout(node, ins, out, io):
    """Flatten / Transpose: relabel an array or a stream, no logic."""
    return Work(macs=_macs(node, ins, out), steps=0)


#: op -> cost rule (every op of ``OPS`` has one, tested; ``quant.py`` is the requantizer ``requant``).
COST_RULES: dict[str, Callable[[Node, list[TensorType], TensorType, str], Work]] = {
    "dense": _dense,
    "conv": _conv,
    "convtranspose": _convtranspose,
    "lstm": _lstm,
    "gru": _gru,
    "convlstm": _convlstm,
    "maxpool": _pool,
    "avgpool": _pool,
    "upsample": _upsample,
    "relu": _elementwise(1),
    "leakyrelu": _elementwise(2),
    "requant": _elementwise(2),
    "add": _elementwise(1),
    "concat": _elementwise(0),
    "lut": _lut,
    "crop": _crop,
    "flatten": _layout,
    "transpose": _layout,
}


def node_work(node: Node, ins: list[TensorType], out: TensorType, io: str) -> Work:
    return COST_RULES[node.op](node, ins, out, io)


def without_padding(node: Node) -> Node:
    """The node with its zero padding removed: a block's local input span already holds the
    padding (zero-filled), as the overlapped-tile execution runs it."""
    a = node.attrs
    if not hasattr(a, "pads"):
        return node
    return dataclasses.replace(node, attrs=dataclasses.replace(a, pads=(0,) * len(a.pads)))


__all__ = ["CODEBOOK_BITS", "COST_RULES", "LUT_MULT_MAX_BITS", "Work", "codebook_kind", "mult_cost", "node_weight_bits",
           "node_work", "stored_width", "without_padding"]
