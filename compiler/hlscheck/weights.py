"""The weights as synthesis sees them: every ``firmware/weights`` header, read in full.

C-simulation loads each weight array from its ``.txt`` file (hls4ml's ``load_weights_from_txt``
in the ``#ifndef __SYNTHESIS__`` branch); Vitis HLS synthesizes the initializer of the
header's ``__SYNTHESIS__`` branch instead.  Nothing else compares the two, so
:func:`scan_weights` reads every header and checks:

- its structure (include guard; both branches declare the same type, name and size);
- the initializer holds exactly the declared number of values, and each equals the ``.txt``
  value at the same position (what C-simulation computed with);
- each value is exact in its declared type (``ap_fixed``/``ap_ufixed``/``ap_int``/``ap_uint``
  from ``defines.h``: no rounding, no saturation on assignment);
- each literal reaches the type without rounding on both paths: the ``.txt`` path reads
  ``ap_fixed``/``ap_ufixed`` values through a ``double`` (``ap_int``/``ap_uint`` from their
  digits) and the header's literals are C++ ``double`` or 64-bit integer literals, so a value
  must be exact in float64 unless it is an integer of an ``ap_int``/``ap_uint`` type, and an
  integer literal must fit 64 bits.

g++ holds each class-type initializer as its own constructor call (its memory grows with
the values): on ResNet-18 (11 M weights) ``g++ -fsyntax-only`` ran out of memory.  So the
syntax pass compiles the headers as written while the project holds at most
:data:`FULL_VALUES` values; beyond that, the largest arrays are given to g++ with their first
:data:`KEPT_VALUES` values (:func:`stand_ins`: the same declaration, a shorter initializer)
and this scan covers every value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from ..ir.types import FixedType
from ..project import Manifest

#: Weight values the syntax pass compiles as written; larger projects get stand-ins.
FULL_VALUES = 131_072
#: Values a stand-in keeps (its declaration is the header's own).
KEPT_VALUES = 4_096
#: The hls4ml writer's header: guard, C-simulation declaration, synthesis initializer.
HEADER = re.compile(r"#ifndef (\w+)\s+#define \1\s+#ifndef __SYNTHESIS__\s+(\w+) (\w+)\[(\d+)\];\s+#else\s+"
                    r"(\w+) (\w+)\[(\d+)\] = \{([^}]*)\};\s+#endif\s+#endif\s*$")
TYPEDEF = re.compile(r"typedef\s+(ap_fixed|ap_ufixed|ap_int|ap_uint)\s*<\s*(-?\d+)\s*(?:,\s*(-?\d+))?[^<>;]*>\s*(\w+)\s*;")
INTEGER = re.compile(r"[-+]?\d+")
INT64 = 1 << 63


@dataclass(frozen=True)
class ScalarType:
    """A ``defines.h`` scalar typedef: its fixed-point type and whether hls4ml's ``.txt``
    loader reads it through a ``double`` (ap_fixed / ap_ufixed; ap_int / ap_uint: digits)."""

    ftype: FixedType
    through_double: bool

    def exact(self, value: Fraction) -> bool:
        """Whether assigning ``value`` to this type keeps it unchanged."""
        code = value * Fraction(2) ** self.ftype.frac
        return code.denominator == 1 and self.ftype.min_code <= code.numerator <= self.ftype.max_code


def scalar_types(defines: str) -> dict[str, ScalarType]:
    """The scalar typedefs of a project's ``defines.h``, by name."""
    out = {}
    for kind, width, integer, name in TYPEDEF.findall(defines):
        w = int(width)
        out[name] = ScalarType(FixedType(w, w - (int(integer) if integer else w), kind in ("ap_fixed", "ap_int")),
                               kind in ("ap_fixed", "ap_ufixed"))
    return out


@dataclass(frozen=True)
class WeightArray:
    """One weight header: its declaration, how many values its initializer holds, the first
    :data:`KEPT_VALUES` of them."""

    header: Path
    guard: str
    type_name: str
    name: str
    size: int
    count: int
    head: tuple[str, ...]


@dataclass
class WeightsReport:
    arrays: int = 0
    values: int = 0
    shortened: tuple[str, ...] = ()  # arrays the syntax pass saw with their first KEPT_VALUES values
    findings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def line(self) -> str:
        if self.findings:
            return f"weights: {len(self.findings)} findings, first {self.findings[0]}"
        short = (f"; g++ saw the first {KEPT_VALUES:,} values of the {len(self.shortened)} largest"
                 if self.shortened else "")
        return (f"weights: {self.arrays} arrays, {self.values:,} values: synthesis initializers == C-simulation's "
                f".txt, each exact in its type{short}")


def _tokens(text: str) -> list[str]:
    return [t.strip() for t in text.split(",")] if text.strip() else []


def parse_header(header: Path) -> tuple[WeightArray, list[str]] | None:
    """A weight header parsed, with all its initializer values (None: not the writer's form)."""
    m = HEADER.search(header.read_text())
    if m is None or m.group(2, 3, 4) != m.group(5, 6, 7):
        return None
    tokens = _tokens(m.group(8))
    return WeightArray(header, m.group(1), m.group(2), m.group(3), int(m.group(4)), len(tokens),
                       tuple(tokens[:KEPT_VALUES])), tokens


def headers(prj: Path) -> list[Path]:
    return sorted((prj / "firmware" / "weights").glob("*.h"))


def read_arrays(prj: str | Path) -> list[WeightArray]:
    """The weight arrays of project ``prj`` (headers not in the writer's form left out: the
    scan reports them)."""
    return [p[0] for p in map(parse_header, headers(Path(prj))) if p is not None]


def _literal_exact(token: str, value: Fraction, t: ScalarType) -> bool:
    if INTEGER.fullmatch(token):
        if not -INT64 <= value < INT64:
            return False
        if not t.through_double:
            return True
    try:
        return Fraction(float(token)) == value
    except (ValueError, OverflowError):
        return False


def _check_array(a: WeightArray, tokens: list[str], types: dict[str, ScalarType]) -> list[str]:
    where = f"{a.header.name} ({a.name})"
    if a.count != a.size:
        return [f"{where}: {a.count} initializer values for {a.size} elements"]
    t = types.get(a.type_name)
    if t is None:
        return [f"{where}: type {a.type_name} is not an ap_fixed/ap_ufixed/ap_int/ap_uint typedef of defines.h"]
    txt = a.header.with_suffix(".txt")
    if not txt.exists():
        return [f"{where}: no {txt.name} (C-simulation's copy)"]
    loaded = _tokens(txt.read_text())
    if len(loaded) != a.size:
        return [f"{where}: {txt.name} holds {len(loaded)} values for {a.size} elements"]
    values: dict[str, Fraction] = {}
    for tok in set(tokens) | set(loaded):
        try:
            values[tok] = Fraction(tok)
        except ValueError:
            return [f"{where}: value '{tok}' is not a number"]
    for tok in sorted(set(tokens)):
        if not t.exact(values[tok]):
            return [f"{where}: value {tok} is not exact in {a.type_name}"]
        if not _literal_exact(tok, values[tok], t):
            return [f"{where}: literal {tok} is rounded on its way to {a.type_name} (not exact in double or 64 bits)"]
    if tokens != loaded:
        for i, (x, y) in enumerate(zip(tokens, loaded)):
            if values[x] != values[y]:
                return [f"{where}: element {i} is {x} in synthesis and {y} in C-simulation ({txt.name})"]
    return []


def scan_weights(prj: str | Path) -> tuple[WeightsReport, list[WeightArray]]:
    """Check every weight header of project ``prj`` (see the module's docstring); also the
    arrays parsed, for :func:`stand_ins`."""
    prj = Path(prj)
    Manifest.read(prj)  # a Tessera project, or one line saying it is not
    defines = prj / "firmware" / "defines.h"
    if not defines.is_file():
        return WeightsReport(findings=["firmware/defines.h is missing: the project's types are unknown"]), []
    types = scalar_types(defines.read_text())
    rep, arrays = WeightsReport(), []
    for h in headers(prj):
        rep.arrays += 1
        parsed = parse_header(h)
        if parsed is None:
            rep.findings.append(f"{h.name}: not the writer's two declarations of one array under an include guard")
            continue
        arrays.append(parsed[0])
        rep.values += parsed[0].size
        rep.findings += _check_array(*parsed, types)
    rep.shortened = tuple(a.name for a in shortened(arrays))
    return rep, arrays


def shortened(arrays: list[WeightArray]) -> list[WeightArray]:
    """The arrays the syntax pass sees shortened: the largest first, until the values it
    compiles are at most :data:`FULL_VALUES`."""
    total, out = sum(a.count for a in arrays), []
    for a in sorted(arrays, key=lambda a: (-a.count, a.name)):
        if total <= FULL_VALUES or a.count <= KEPT_VALUES:
            break
        out.append(a)
        total -= a.count - KEPT_VALUES
    return out


def stand_ins(arrays: list[WeightArray]) -> str:
    """C++ that declares the :func:`shortened` arrays (their guard defined, so that their
    headers are skipped) with their first :data:`KEPT_VALUES` values."""
    short = shortened(arrays)
    lines = ["// Weight arrays that tessera check's syntax pass compiles with their first values only",
             "// (every value is checked by tessera/compiler/hlscheck/weights.py)."]
    if short:
        lines.append('#include "firmware/defines.h"')
    for a in short:
        lines += [f"#define {a.guard}",
                  f"{a.type_name} {a.name}[{a.size}] = {{{', '.join(a.head)}}};"]
    return "\n".join(lines) + "\n"


__all__ = ["FULL_VALUES", "KEPT_VALUES", "ScalarType", "WeightArray", "WeightsReport", "parse_header", "read_arrays",
           "scalar_types", "scan_weights", "shortened", "stand_ins"]
