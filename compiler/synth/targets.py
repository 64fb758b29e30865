"""What ``tessera synth`` can synthesize for: a typed registry of targets, each a family (how
Yosys maps it, whether nextpnr places it), a part with its published capacity, and the
measured constants that predict a run before it starts.

Part capacities, from the vendors' data sheets:

* ECP5 (Lattice FPGA-DS-02012, ECP5 and ECP5-5G Family Data Sheet, Table 1.1 "ECP5 and
  ECP5-5G Family Selection Guide"): LFE5U-25F 24K LUTs, 56 sysMEM blocks (18 Kb), 28 18x18
  multipliers; LFE5U-45F 44K, 108, 72; LFE5U-85F 84K, 208, 156.  The exact LUT4 counts are
  nextpnr-ecp5's (``Total LUT4s: n/24288``, 43848, 83640: two LUT4s and two flip-flops per
  slice, so as many flip-flops).  User IOs of the CABGA381 package (the ULX3S and Colorlight
  i5 boards' package; the same table): 197 (25F), 203 (45F), 205 (85F).
* Artix-7 XC7A100T (Xilinx DS180, 7 Series FPGAs Data Sheet: Overview, Artix-7 table):
  63,400 LUTs, 126,800 flip-flops, 240 DSP48E1, 135 36 Kb block RAMs (270 RAMB18).
* Alveo U250's XCU250 (Xilinx DS962, as the estimator's catalogue, ``estimate/parts.py``):
  1,728,000 LUTs, 3,456,000 flip-flops, 12,288 DSP48E2, 2,688 36 Kb block RAMs.

Block RAM is counted in 18 Kb blocks on every family (a RAMB36 is two).

IOs: an ECP5 target is a whole chip, its ports the package's pins: a design whose ports
(data bits + clk, rst, in_valid, out_valid) exceed the package's user IOs is synthesized
behind the serial wrapper (``wrapper.py``).  A Xilinx target is synthesized as a core inside
a larger design (out of context, as an Alveo kernel behind the shell, or a block beside a
processor): its ports are on-chip nets, never wrapped, and their count is reported (Yosys's
IBUF / OBUF cells)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Family(Enum):
    """How a target is synthesized (its Yosys template) and whether nextpnr places it."""

    ECP5 = "ecp5"
    XILINX = "xilinx"

    @property
    def places(self) -> bool:
        """Whether an open place and route exists here (nextpnr-ecp5; none for Xilinx parts)."""
        return self is Family.ECP5


@dataclass(frozen=True)
class Part:
    """A part's capacity: LUTs (LUT4s on ECP5, LUT6s on Xilinx), flip-flops, multipliers or
    DSP slices, 18 Kb block RAMs, user IOs of its package (None: not limited, see the module)."""

    name: str
    luts: int
    ffs: int
    dsps: int
    brams: int
    ios: int | None
    source: str


@dataclass(frozen=True)
class TimeModel:
    """CPU seconds a run takes, from da4ml's LUT estimate ``n`` of the design: Yosys
    ``yosys_s + yosys_per_lut * n`` (linear: one ABC call over the flattened design);
    nextpnr (ECP5) ``place_s + place_per_lut * n + place_per_lut2 * n ** 2`` (placement about
    linear, routing growing with the wires times the congestion).  Measured on this project's
    designs (docs/synth.md)."""

    yosys_s: float
    yosys_per_lut: float
    place_s: float = 0.0
    place_per_lut: float = 0.0
    place_per_lut2: float = 0.0

    def yosys(self, luts: int) -> float:
        return self.yosys_s + self.yosys_per_lut * luts

    def place(self, luts: int) -> float:
        return self.place_s + self.place_per_lut * luts + self.place_per_lut2 * luts ** 2


@dataclass(frozen=True)
class Target:
    """A ``--target``: its family, Yosys's name of the architecture, the part, nextpnr's device
    flag and package (ECP5), the measured LUTs a da4ml estimated LUT becomes (LUT4 slots, a
    CCU2C counting two, on ECP5), and the time model."""

    key: str
    family: Family
    arch: str
    part: Part
    luts_per_estimate: float
    time: TimeModel
    device_flag: str | None = None
    package: str | None = None

    @property
    def template(self) -> str:
        """The Yosys script's template (``hls_templates/rtl/``)."""
        return f"rtl/synth_{self.family.value}.ys.tpl"


#: The constants, fitted to CPU seconds measured here (docs/synth.md: the designs and the figures).
ECP5_TIME = TimeModel(yosys_s=2.0, yosys_per_lut=0.0037, place_s=1.0, place_per_lut=0.012, place_per_lut2=2.5e-6)
XILINX_TIME = TimeModel(yosys_s=8.0, yosys_per_lut=0.0046)
#: Measured LUT4 slots (LUT4 + 2 per CCU2C) per da4ml-estimated LUT on ECP5 and LUTs per
#: estimated LUT on Xilinx, the lowest seen (docs/synth.md): the fit check refuses only what
#: cannot fit.  nextpnr packs about 20 % more LUT4s than Yosys counts (feed-through LUTs):
#: :data:`ECP5_PACKED` flags a design that may not place.
ECP5_LUTS_PER_ESTIMATE = 1.35
XILINX_LUTS_PER_ESTIMATE = 1.0
ECP5_PACKED = 1.2

_ECP5_DS = "Lattice FPGA-DS-02012, Table 1.1; LUT4 counts as nextpnr-ecp5 reports them"


def _ecp5(size: str, luts: int, dsps: int, brams: int, ios: int) -> Target:
    part = Part(f"LFE5U-{size}F-6BG381C", luts, luts, dsps, brams, ios, _ECP5_DS)
    return Target(f"ecp5-{size}k", Family.ECP5, "ecp5", part, ECP5_LUTS_PER_ESTIMATE, ECP5_TIME, f"--{size}k",
                  "CABGA381")


TARGETS: dict[str, Target] = {
    "ecp5-85k": _ecp5("85", 83_640, 156, 208, 205),
    "ecp5-45k": _ecp5("45", 43_848, 72, 108, 203),
    "ecp5-25k": _ecp5("25", 24_288, 28, 56, 197),
    "xcup": Target("xcup", Family.XILINX, "xcup",
                   Part("XCU250-FIGD2104-2L-E", 1_728_000, 3_456_000, 12_288, 2 * 2_688, None,
                        "Xilinx DS962 (Alveo U200/U250 data sheet)"),
                   XILINX_LUTS_PER_ESTIMATE, XILINX_TIME),
    "xc7": Target("xc7", Family.XILINX, "xc7",
                  Part("XC7A100T-1CSG324C", 63_400, 126_800, 240, 2 * 135, None,
                       "Xilinx DS180 (7 Series FPGAs overview, Artix-7 table)"),
                  XILINX_LUTS_PER_ESTIMATE, XILINX_TIME),
}

__all__ = ["ECP5_LUTS_PER_ESTIMATE", "ECP5_PACKED", "ECP5_TIME", "Family", "Part", "TARGETS", "Target", "TimeModel",
           "XILINX_LUTS_PER_ESTIMATE", "XILINX_TIME"]
