"""Yosys's ``stat -json`` of a synthesized design, as typed counts.

What is counted, per family (the cell names Yosys 0.70 maps to):

* LUTs: ECP5 ``LUT4``; Xilinx ``LUT1`` .. ``LUT6`` and ``INV``.  An ``INV`` is a LUT1 in the
  netlist Yosys writes (``synth_xilinx`` maps a lone inverter to it; Vivado would place it in
  a LUT or fold it into a neighbour), so it counts as one LUT: the count is an upper bound of
  what the netlist occupies.  The ECP5 wide-function muxes (``PFUMX``, ``L6MUX21``) and the
  Xilinx ``MUXF7`` / ``MUXF8`` / ``MUXF9`` are slice muxes, not LUTs.
* shift-register LUTs (Xilinx ``SRL16E`` / ``SRLC32E``: delay lines Yosys moved from
  flip-flops into LUTs) and LUT RAM (Xilinx ``RAM*``, ECP5 ``TRELLIS_DPR16X4``): counted apart.
* flip-flops: ECP5 ``TRELLIS_FF``; Xilinx ``FDRE``, ``FDSE``, ``FDCE``, ``FDPE`` (and latches
  ``LDCE`` / ``LDPE``).
* carry cells: ECP5 ``CCU2C`` (a slice's two LUT4s as a 2-bit adder: it occupies two LUT4
  slots), Xilinx ``CARRY4`` (7 series) / ``CARRY8`` (UltraScale+), which use the LUTs
  already counted.
* multipliers: ECP5 ``MULT18X18D``, Xilinx ``DSP48E1`` / ``DSP48E2``.
* block RAM in 18 Kb blocks: ECP5 ``DP16KD`` / ``PDPW16KD``, Xilinx ``RAMB18E1`` / ``RAMB18E2``
  (one) and ``RAMB36E1`` / ``RAMB36E2`` (two).
* IO: the top module's port bits (``num_port_bits``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SimulationError

#: cell type -> (what it counts as, how many)
CELLS: dict[str, tuple[str, int]] = {
    "LUT4": ("luts", 1),
    **{f"LUT{k}": ("luts", 1) for k in range(1, 7) if k != 4},
    "INV": ("luts", 1),
    "SRL16E": ("srls", 1), "SRLC16E": ("srls", 1), "SRLC32E": ("srls", 1),
    "TRELLIS_DPR16X4": ("lutrams", 1),
    **{c: ("lutrams", 1) for c in ("RAM32X1D", "RAM64X1D", "RAM128X1D", "RAM32M", "RAM64M", "RAM32M16", "RAM64M8",
                                   "RAM32X1S", "RAM64X1S", "RAM128X1S", "RAM256X1S")},
    **{c: ("ffs", 1) for c in ("TRELLIS_FF", "FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE")},
    "CCU2C": ("carries", 1), "CARRY4": ("carries", 1), "CARRY8": ("carries", 1),
    "MULT18X18D": ("dsps", 1), "DSP48E1": ("dsps", 1), "DSP48E2": ("dsps", 1),
    "DP16KD": ("brams", 1), "PDPW16KD": ("brams", 1), "RAMB18E1": ("brams", 1), "RAMB18E2": ("brams", 1),
    "RAMB36E1": ("brams", 2), "RAMB36E2": ("brams", 2),
}
#: LUT4 slots a cell occupies on ECP5 besides its LUT4s (a CCU2C is a slice's two LUT4s)
ECP5_SLOTS = {"CCU2C": 2}
#: Cells known and not counted: slice muxes, clock and IO buffers, constants.
UNCOUNTED = frozenset({"PFUMX", "L6MUX21", "MUXF7", "MUXF8", "MUXF9", "BUFG", "IBUF", "OBUF", "IB", "OB", "VCC", "GND"})


@dataclass(frozen=True)
class CellCounts:
    """A synthesized design's resources (see the module for what each counts) and every cell
    type with its count (Yosys's ``$scopeinfo`` bookkeeping cells left out)."""

    luts: int
    ffs: int
    carries: int
    dsps: int
    brams: int
    ios: int
    srls: int = 0
    lutrams: int = 0
    cells: dict[str, int] = field(default_factory=dict)

    @property
    def lut_slots(self) -> int:
        """LUTs a part must hold: the LUTs, plus two LUT4 slots per ECP5 CCU2C, plus the
        shift-register LUTs (a Xilinx carry uses LUTs already counted)."""
        return self.luts + self.srls + sum(n * self.cells.get(c, 0) for c, n in ECP5_SLOTS.items())

    @classmethod
    def of_stat(cls, stat: dict, top: str) -> "CellCounts":
        """The counts of module ``top`` in ``stat -json``'s output."""
        modules = stat["modules"]
        module = modules.get(f"\\{top}", modules.get(top))
        if module is None:
            raise KeyError(f"module {top} is not in the statistics (modules: {', '.join(modules)})")
        cells = {str(k): int(v) for k, v in module["num_cells_by_type"].items() if not str(k).startswith("$scopeinfo")}
        counts = dict.fromkeys(("luts", "ffs", "carries", "dsps", "brams", "srls", "lutrams"), 0)
        for cell, n in cells.items():
            what, each = CELLS.get(cell, ("", 0))
            if what:
                counts[what] += each * n
        return cls(ios=int(module["num_port_bits"]), cells=cells, **counts)

    @classmethod
    def read(cls, path: Path, top: str) -> "CellCounts":
        """The counts in a ``stat -json`` file, or one line saying why not."""
        try:
            return cls.of_stat(json.loads(path.read_text()), top)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SimulationError(f"Yosys's statistics {path} are unreadable ({type(exc).__name__}: {exc})") from None

    def unknown(self) -> list[str]:
        """Cell types this module does not count (a primitive new to a Yosys version)."""
        return sorted(c for c in self.cells if c not in CELLS and c not in UNCOUNTED and not c.startswith("$"))

    def to_json(self) -> dict:
        return {"luts": self.luts, "ffs": self.ffs, "carries": self.carries, "dsps": self.dsps, "brams": self.brams,
                "ios": self.ios, "srls": self.srls, "lutrams": self.lutrams, "cells": dict(self.cells)}

    @classmethod
    def from_json(cls, d: dict) -> "CellCounts":
        return cls(int(d["luts"]), int(d["ffs"]), int(d["carries"]), int(d["dsps"]), int(d["brams"]), int(d["ios"]),
                   int(d["srls"]), int(d["lutrams"]), {str(k): int(v) for k, v in d["cells"].items()})


__all__ = ["CELLS", "CellCounts", "ECP5_SLOTS", "UNCOUNTED"]
