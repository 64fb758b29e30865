"""The design-size guard: arrays the project completely partitions into registers.

In io_parallel hls4ml writes ``#pragma HLS ARRAY_PARTITION variable=layerN_out complete``
for every layer's output (and ``ARRAY_RESHAPE complete`` for the input): each value is its
own register.  Vitis HLS refuses ("partitioned elements number (N) has exceeded the
threshold") to completely partition an array of more elements than the project's
``config_array_partition -maximum_size`` (hls4ml writes 4096 into ``project.tcl``), and the
registers of all these arrays must fit the part.  :func:`size_guard`:

- raises the project's ``maximum_size`` to the largest such array, with a one-line notice
  naming its layer (what hls4ml's maintainers tell users to do by hand), when the registers
  fit;
- refuses, in one line naming the largest layer, when the arrays' bits exceed the
  flip-flops the part offers (:attr:`HlsOptions.register_bits`, set from the estimator's part
  table at ``utilization``): such a design cannot be built, only C-simulated; io_stream
  (FIFOs and line buffers instead of whole maps) or a block partition is the way.

io_stream projects keep no whole feature map in registers; nothing to check.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..ops import IoType

#: hls4ml's project setting (``MaximumSize``, written as ``maximum_size`` into project.tcl).
HLS4ML_MAXIMUM_SIZE = 4096


@dataclass(frozen=True)
class RegisterArray:
    layer: str  # the IR node whose output it is ("input" for the design's input)
    elements: int
    bits: int  # elements x the value's width


@dataclass(frozen=True)
class SizeDecision:
    maximum_size: int
    notice: str | None
    arrays: tuple[RegisterArray, ...]

    @property
    def register_bits(self) -> int:
        return sum(a.bits for a in self.arrays)


def partitioned_arrays(graph: Graph, io_type: IoType) -> list[RegisterArray]:
    """Arrays an io_parallel project completely partitions: the inputs and every output."""
    if IoType(io_type) != IoType.PARALLEL:
        return []
    ins = [graph.values[v] for v in graph.inputs]
    out = [RegisterArray("input" if len(ins) == 1 else f"input {k}", t.size, t.size * t.ftype.width)
           for k, t in enumerate(ins)]
    for node in graph.nodes:
        t = graph.values[node.output]
        out.append(RegisterArray(node.name, t.size, t.size * t.ftype.width))
    return out


def size_guard(graph: Graph, io_type: IoType, maximum_size: int = HLS4ML_MAXIMUM_SIZE,
               register_bits: int | None = None, part: str = "") -> SizeDecision:
    """The project's ``maximum_size`` and notice for ``graph`` (see the module docstring)."""
    arrays = tuple(partitioned_arrays(graph, io_type))
    if not arrays:
        return SizeDecision(maximum_size, None, arrays)
    largest = max(arrays, key=lambda a: (a.elements, a.bits))
    total = sum(a.bits for a in arrays)
    if register_bits is not None and total > register_bits:  # register_bits: the part's share (api.hls_options)
        raise UnsupportedModelError(
            f"io_parallel keeps every feature map in registers: {total:,} bits in all (layer '{largest.layer}' alone "
            f"{largest.elements:,} values), more than the {register_bits:,} flip-flops {part or 'the part'} offers; "
            "compile with --io-type stream or a block partition (--grid)")
    if largest.elements <= maximum_size:
        return SizeDecision(maximum_size, None, arrays)
    return SizeDecision(largest.elements, (
        f"notice: maximum_size raised from {maximum_size} to {largest.elements} in project.tcl: io_parallel partitions "
        f"layer '{largest.layer}''s {largest.elements:,}-value output into registers, and Vitis HLS refuses larger arrays "
        f"than config_array_partition -maximum_size ({total:,} register bits in all)"), arrays)


__all__ = ["HLS4ML_MAXIMUM_SIZE", "RegisterArray", "SizeDecision", "partitioned_arrays", "size_guard"]
