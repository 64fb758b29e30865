"""FPGA parts the estimator sizes designs for, with their published resource counts.

Counts are the whole device (all SLRs), from the vendor's product tables:

* Alveo U250 (XCU250-FIGD2104-2L-E): Alveo U200 and U250 Data Center Accelerator Cards
  Data Sheet, DS962; the card's FPGA is the same die size as a VU13P.
* Virtex UltraScale+ VU9P (XCVU9P): UltraScale Architecture and Product Data Sheet:
  Overview, DS890 (Virtex UltraScale+ device table).
* Zynq UltraScale+ ZU9EG (XCZU9EG): Zynq UltraScale+ MPSoC Data Sheet: Overview, DS891.

Block RAM is counted in 36 Kb blocks (4,608 bytes each) and UltraRAM in 288 Kb blocks
(36,864 bytes each), the block sizes of UltraScale+ (UG573, UltraScale Architecture Memory
Resources).  A DSP48E2 slice has a 27 x 18 two's-complement multiplier (UG579, UltraScale
Architecture DSP Slice).  These are the numbers every estimate in this package is measured
against; a design "fits" when every resource stays below ``utilization`` of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedModelError
from ..lower.hls4ml_lower import PARTS as PART_NAMES

#: Operand widths of one DSP48E2 multiplier (UG579).
DSP_A_BITS, DSP_B_BITS = 27, 18


@dataclass(frozen=True)
class Part:
    key: str
    name: str  # full Xilinx part name, as hls4ml's Part setting takes it
    device: str
    lut: int
    ff: int
    dsp: int
    bram36: int
    uram: int
    source: str

    @property
    def bram18(self) -> int:
        """RAMB18 tiles (two per RAMB36).  The kernels bind no array to UltraRAM, so the
        estimator does not count it as capacity."""
        return 2 * self.bram36

    def capacity(self) -> dict[str, int]:
        return {"dsp": self.dsp, "lut": self.lut, "ff": self.ff, "bram18": self.bram18}


PARTS: dict[str, Part] = {
    "xcu250": Part("xcu250", PART_NAMES["xcu250"], "Alveo U250", lut=1_728_000, ff=3_456_000, dsp=12_288,
                   bram36=2_688, uram=1_280, source="DS962 (Alveo U200/U250 data sheet)"),
    "vu9p": Part("vu9p", PART_NAMES["vu9p"], "Virtex UltraScale+ VU9P", lut=1_182_240, ff=2_364_480, dsp=6_840,
                 bram36=2_160, uram=960, source="DS890 (UltraScale architecture overview, Virtex UltraScale+ table)"),
    "zu9eg": Part("zu9eg", PART_NAMES["zu9eg"], "Zynq UltraScale+ ZU9EG", lut=274_080, ff=548_160, dsp=2_520,
                  bram36=912, uram=0, source="DS891 (Zynq UltraScale+ MPSoC overview)"),
}


def get_part(name: str) -> Part:
    """A catalogue part by short name (``xcu250``, ``vu9p``, ``zu9eg``) or full part name."""
    key = name.lower()
    if key in PARTS:
        return PARTS[key]
    for p in PARTS.values():
        if key == p.name.lower() or key.startswith(p.name.lower().split("-")[0] + "-"):
            return p
    raise UnsupportedModelError(f"no resource counts for part '{name}'; the catalogue has: "
                                + ", ".join(f"{p.key} ({p.name})" for p in PARTS.values()))


__all__ = ["DSP_A_BITS", "DSP_B_BITS", "PARTS", "Part", "get_part"]
