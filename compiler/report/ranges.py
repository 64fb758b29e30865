"""Value ranges: per design input and layer output, the codes the verified samples reached
against the codes its type holds and the range type inference proved reachable, drawn as a
strip of the type's bits placed by their weight (``2^k``; the job of hls4ml's profiling
plot), with the high bits no sample needed called out.

Bits are counted from the least significant up: a range needs the width of the smallest
two's-complement (or, for an unsigned type, unsigned) integer holding it."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.types import FixedType
from .design import DesignRecord
from .markup import Column, element, empty, number, table, text
from .verification import VerificationRecord

#: Width of one bit's cell in the strip at most, of the whole strip at most, and the margin
#: either side of it (pixels).
CELL, STRIP, PAD = 12.0, 420.0, 12.0
STRIP_HEIGHT = 16


def bits_needed(lo: int, hi: int, signed: bool) -> int:
    """Bits of the smallest integer type of this signedness holding every code in [lo, hi]."""
    if not signed:
        return max(1, max(hi, 0).bit_length())
    return max((-lo - 1).bit_length() if lo < 0 else 0, hi.bit_length() if hi > 0 else 0) + 1


@dataclass(frozen=True)
class RangeRow:
    """One value: its label, type, inferred reachable codes and the codes reached (None: not
    verified, or a value the verification did not record)."""

    label: str
    ftype: FixedType
    lo: int
    hi: int
    reached: tuple[int, int] | None

    @property
    def reachable_bits(self) -> int:
        return min(self.ftype.width, bits_needed(self.lo, self.hi, self.ftype.signed))

    @property
    def reached_bits(self) -> int | None:
        if self.reached is None:
            return None
        return min(self.ftype.width, bits_needed(*self.reached, self.ftype.signed))

    @property
    def unused_high_bits(self) -> int | None:
        """High bits of the type no verified sample needed."""
        used = self.reached_bits
        return None if used is None else self.ftype.width - used

    def top(self) -> int:
        """The weight (exponent) of the type's highest bit."""
        return self.ftype.width - self.ftype.frac - 1


def rows_of(record: DesignRecord, verified: VerificationRecord | None) -> list[RangeRow]:
    reached = verified.reached if verified is not None else {}
    rows = [RangeRow(f"input: {p.name}", p.ftype, p.lo, p.hi, reached.get(p.value)) for p in record.inputs]
    rows += [RangeRow(layer.node, layer.ftype, layer.lo, layer.hi, reached.get(layer.output)) for layer in record.layers]
    return rows


@dataclass(frozen=True)
class Scale:
    """The strip's x axis: bit weights from ``high`` down to ``low``, ``cell`` pixels each."""

    high: int
    low: int
    cell: float

    @classmethod
    def of(cls, rows: list[RangeRow]) -> "Scale":
        high = max((r.top() for r in rows), default=0)
        low = min((-r.ftype.frac for r in rows), default=0)
        return cls(high, low, min(CELL, STRIP / max(1, high - low + 1)))

    @property
    def width(self) -> float:
        return (self.high - self.low + 1) * self.cell + 2 * PAD

    def x(self, weight: int) -> float:
        """Left edge of the cell of bit weight ``weight``."""
        return PAD + (self.high - weight) * self.cell


def strip(row: RangeRow, scale: Scale) -> str:
    """The type's bits as cells: reached (or, unverified, reachable), reachable but never
    reached, and beyond the reachable range."""
    reachable, reached = row.reachable_bits, row.reached_bits
    cells = []
    for k in range(row.ftype.width):  # k: bit index from the least significant
        weight = k - row.ftype.frac
        if reached is not None and k < reached:
            kind = "reached"
        elif k < reachable:
            kind = "unreached" if reached is not None else "reachable"
        else:
            kind = "beyond"
        cells.append(empty("rect", x=f"{scale.x(weight) + 0.5:.1f}", y=1, width=f"{max(1.0, scale.cell - 1):.1f}",
                           height=STRIP_HEIGHT - 2, class_=f"bit {kind}"))
    point = scale.x(-1) if scale.low <= -1 else scale.width - PAD
    mark = empty("line", x1=f"{point:.1f}", x2=f"{point:.1f}", y1=0, y2=STRIP_HEIGHT, class_="point")
    return element("svg", *cells, mark, class_="strip", width=f"{scale.width:.0f}",
                   height=STRIP_HEIGHT, viewBox=f"0 0 {scale.width:.0f} {STRIP_HEIGHT}", role="img",
                   aria_label=f"{row.label}: bits of {row.ftype.describe()}")


def axis(scale: Scale) -> str:
    """Tick labels (2^k) above the strips' column."""
    step = 4 if scale.cell >= 8 else 8 if scale.cell >= 4 else 16
    ticks = []
    for weight in range(scale.high, scale.low - 1, -1):
        if weight % step == 0:
            x = scale.x(weight) + scale.cell / 2
            ticks.append(element("text", text(f"2^{weight}"), x=f"{x:.1f}", y=11, class_="tick"))
    return element("svg", *ticks, class_="strip axis", width=f"{scale.width:.0f}",
                   height=14, viewBox=f"0 0 {scale.width:.0f} 14", aria_hidden="true")


def range_words(pair: tuple[int, int] | None) -> str:
    return "—" if pair is None else f"[{pair[0]:,}, {pair[1]:,}]"


def unused_words(row: RangeRow) -> str:
    unused = row.unused_high_bits
    if unused is None:
        return "—"
    return element("strong", text(f"{unused} of {row.ftype.width}"), class_="warn") if unused else "0"


def columns(scale: Scale) -> list[Column]:
    return [Column("value"), Column("type"), Column("type's codes"), Column("reachable (inferred)"),
            Column("reached (samples)"), Column("high bits unused", True, "type bits no verified sample needed"),
            Column("bits by weight", markup=axis(scale))]


#: The strip's colours, as its legend names them.
LEGEND = {"reached": "reached by the samples", "unreached": "reachable, never reached: unused high bits",
          "reachable": "reachable (not verified yet)", "beyond": "outside the reachable range"}


def legend(verified: bool) -> str:
    kinds = ("reached", "unreached", "beyond") if verified else ("reachable", "beyond")
    return element("p", *(element("span", element("i", class_=f"swatch bit {kind}"), text(LEGEND[kind]),
                                  class_="legend-item") for kind in kinds), class_="legend")


def callout(rows: list[RangeRow]) -> str:
    """A line naming how many values never needed their top bits, and the most wasteful one."""
    unused = [r for r in rows if r.unused_high_bits]
    if not unused:
        return ""
    worst = max(unused, key=lambda r: r.unused_high_bits)
    return element("p", text(f"{len(unused)} of {len(rows)} values never needed their top bits on these samples; "
                             f"most: {worst.label}, {worst.unused_high_bits} of {worst.ftype.width} bits."),
                   class_="callout")


def ranges_section(record: DesignRecord, verified: VerificationRecord | None) -> str:
    """The table of value ranges with a bit strip per row, its legend and call-out."""
    rows = rows_of(record, verified)
    scale = Scale.of(rows)
    cells = [[element("span", text(r.label), class_="name"), text(r.ftype.describe()),
              text(range_words((r.ftype.min_code, r.ftype.max_code))), text(range_words((r.lo, r.hi))),
              text(range_words(r.reached)), unused_words(r), strip(r, scale)] for r in rows]
    note = "not verified yet: the strips show the range type inference proved reachable" if verified is None else \
        f"reached on the {verified.samples:,} verified samples (the integer semantics of every layer)"
    return (element("p", text(note), class_="note") + legend(verified is not None) + callout(rows)
            + table(columns(scale), cells, class_="data ranges"))


__all__ = ["RangeRow", "bits_needed", "ranges_section", "rows_of"]
