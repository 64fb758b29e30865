"""A graph input that several quantizers read, each differently (two ``QuantIdentity`` of one
input at different bit widths or scales, their branches joined again by a Concat or an Add).

Each quantizer on real (float64) data is a step whose float thresholds are the smallest
float64 reaching each of its codes (:func:`..exact.requant.float_thresholds`).  Together the
quantizers' thresholds, the *cuts*, split the real line into cells on each of which every
quantizer is constant.  The design's input is then the cell the real input lies in, ``j = #{k :
x >= cuts[k]}`` (:attr:`..ir.meaning.InputMap.cuts`), and each quantizer's codes are a table
of the cell (``ops/lut.py``'s explicit table): ``qmin + #{its thresholds <= the cell's lower
end}``, exact for every float64 input because each quantizer's thresholds are among the cuts.
Every cell is an input code, so the codes verify draws reach every code of every quantizer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedModelError
from ..exact.requant import Step, float_thresholds
from ..exact.rounding import Rounding
from ..ir.graph import Graph, InputPort, Node
from ..ir.meaning import CodeScale, InputMap
from ..ir.types import FixedType, TensorType, bits_for_range
from ..ops import lut, quant


@dataclass(frozen=True)
class InputReader:
    """One quantizer of a graph input: its IR value and ONNX node, the type, quantizer, map and
    meaning of its codes, and its step on real data (None: the input is typed by an annotation
    or a declared ``--input-type``, or quantized per channel: not one step)."""

    value: str
    node: str
    type: TensorType
    quant: quant.Attrs
    input_map: InputMap | None
    scale: CodeScale | None
    step: Step | None

    def same_codes(self, other: "InputReader") -> bool:
        """Whether both give the same codes with the same meaning (the same quantizer again)."""
        return (self.quant, self.input_map, self.scale, self.type) == \
            (other.quant, other.input_map, other.scale, other.type)


def share_input(graph: Graph, port: InputPort, readers: list[InputReader]) -> None:
    """The design's input becomes the cell of the real line (``port``), and every reader a
    table of it (lookup nodes first in the graph, replacing those of fewer readers)."""
    newest = readers[-1]
    refused = next((r for r in readers if r.step is None), None)
    first, again = (r.node or r.value for r in (readers[0], newest))
    if refused is not None or newest.type.shape != readers[0].type.shape:
        why = f"'{refused.node or refused.value}' is no one quantizer of every element (typed by a datatype or " \
            "--input-type, or quantized per channel: a table of the input's cells holds per tensor)" \
            if refused is not None else f"they read it in shapes {list(readers[0].type.shape)} and " \
            f"{list(newest.type.shape)}"
        raise UnsupportedModelError(f"node '{again}' quantizes the graph input that node '{first}' quantizes, "
                                    f"differently, and {why}; not supported")
    levels = sum(r.step.qmax - r.step.qmin for r in readers)
    if levels + 1 > lut.MAX_DOMAIN:  # before any threshold is searched: the cells' count is at most this
        raise UnsupportedModelError(f"node '{again}' quantizes the graph input that node '{first}' quantizes, "
                                    f"differently: its {len(readers)} quantizers have {levels + 1:,} codes in all, "
                                    f"up to as many cells of the real line, more than the {lut.MAX_DOMAIN:,} a "
                                    "table holds; not supported")
    thresholds = [float_thresholds(r.step) for r in readers]
    cuts = np.unique(np.concatenate(thresholds))
    cells = f"{readers[0].value}.cells"
    width, _ = bits_for_range(0, len(cuts))
    cell_type = FixedType(width, 0, False)
    values = {r.value for r in readers}
    graph.nodes = [_table(r, t, cuts, cells) for r, t in zip(readers, thresholds)] + \
        [n for n in graph.nodes if n.output not in values]
    for value in values:
        graph.values.pop(value, None)
    graph.values[cells] = TensorType(readers[0].type.shape, cell_type, 0, len(cuts))
    graph.origin.setdefault(cells, "")
    port.value, port.quant = cells, quant.Attrs(cell_type, False, Rounding.ROUND)
    port.input_map = InputMap(None, 0, len(cuts), cuts=tuple(float(c) for c in cuts))


def _table(reader: InputReader, thresholds: np.ndarray, cuts: np.ndarray, cells: str) -> Node:
    """The reader's codes as a table of the cell: the lowest cell its lowest code, each other
    cell (from its lower end ``cuts[j - 1]``) the count of the reader's thresholds reached."""
    step = reader.step
    codes = step.qmin + np.concatenate([[0], np.searchsorted(thresholds, cuts, side="right")])
    attrs = lut.Attrs("input_cell", quant.Attrs(reader.type.ftype, False, Rounding.ROUND),
                      codes=tuple(int(c) for c in codes))
    return Node(reader.node or reader.value, lut.OP.name, [cells], reader.value, attrs)


__all__ = ["InputReader", "share_input"]
