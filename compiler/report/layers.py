"""The layer table (one row per layer: op, input / weight / accumulator / output types, the
requantization, MACs, reuse factor and the estimated figures, with the design's totals) and
the requantization table (each requantizing layer's form, constants and why it is exact)."""

from __future__ import annotations

from .design import DesignRecord, LayerCost, LayerRecord
from .markup import Column, element, number, paragraph, table, text

#: The estimate's columns: (heading, field of LayerCost, tooltip).
COST_COLUMNS = (("latency", "latency", "estimated clock cycles of one pass"),
                ("II", "ii", "estimated initiation interval, cycles"), ("LUT", "lut", "estimated LUTs"),
                ("FF", "ff", "estimated flip-flops"), ("DSP", "dsp", "estimated DSP slices"),
                ("BRAM18", "bram18", "estimated 18 Kb block RAM tiles"))


def requant_words(layer: LayerRecord) -> str:
    """The requantization column: the form and that it is proven (or exact), or the op's form."""
    r = layer.requantization
    if r is not None:
        return f"{r.form}, {'proven' if r.exactness.startswith('proven') else 'exact'}"
    return layer.form or "—"


def cost_of(layer: LayerRecord, key: str) -> int | None:
    return None if layer.cost is None else getattr(layer.cost, key)


def layer_cells(index: int, layer: LayerRecord, costs: list[tuple[str, str, str]], with_reuse: bool) -> list[str]:
    cells = [text(index), element("span", text(layer.node), title=layer.output, class_="name"), text(layer.op),
             text(", ".join(layer.input_types) or "—"), text(layer.weight or "—"), text(layer.accumulator or "—"),
             text(f"{layer.ftype.describe()} ({', '.join(str(s) for s in layer.shape)})"),
             element("span", text(requant_words(layer)), class_="wrap"), text(number(layer.macs or None, "—"))]
    if with_reuse:
        cells.append(text(number(layer.reuse)))
    return cells + [text(number(cost_of(layer, key))) for _, key, _ in costs]


def total_cells(record: DesignRecord, costs: list[tuple[str, str, str]], with_reuse: bool) -> list[str]:
    totals = record.estimate.totals if record.estimate is not None else LayerCost()
    cells = ["", text("design"), "", "", "", "", "", "", text(number(record.macs))]
    if with_reuse:
        cells.append("")
    return cells + [text(number(getattr(totals, key))) for _, key, _ in costs]


def layer_table(record: DesignRecord) -> str:
    """One row per layer; estimate columns the record has no figure for are left out."""
    costs = [c for c in COST_COLUMNS if any(cost_of(layer, c[1]) is not None for layer in record.layers)]
    with_reuse = any(layer.reuse is not None for layer in record.layers)
    columns = [Column("#", True), Column("layer"), Column("op"), Column("inputs"), Column("weights"),
               Column("accumulator"), Column("output (shape)"), Column("requantization"),
               Column("MACs", True, "multiply-accumulates per sample")]
    if with_reuse:
        columns.append(Column("reuse", True, "hls4ml reuse factor"))
    columns += [Column(heading, True, tip) for heading, _, tip in costs]
    rows = [layer_cells(i, layer, costs, with_reuse) for i, layer in enumerate(record.layers, 1)]
    return table(columns, rows, caption=f"{len(record.layers)} layers in dataflow order; types as sW.fF (W bits, F "
                 "fractional, s signed / u unsigned)", class_="data layers",
                 footer=total_cells(record, costs, with_reuse))


def constants_words(layer: LayerRecord) -> str:
    r = layer.requantization
    words = "; ".join(r.constants)
    return words + (f"; ... {r.unlisted_channels} more channels" if r.unlisted_channels else "")


def requantization_cells(layer: LayerRecord) -> list[str]:
    r = layer.requantization
    return [element("span", text(layer.node), class_="name"), text(r.form), element("code", text(r.formula)),
            text(r.channels), element("span", text(constants_words(layer)), class_="wrap"),
            element("span", text(r.exactness), class_="wrap")]


def requantization_table(record: DesignRecord) -> str:
    found = [layer for layer in record.layers if layer.requantization is not None]
    if not found:
        return paragraph("No layer requantizes with constants of its own.", "note")
    columns = [Column("layer"), Column("form"), Column("computes"), Column("channels", True), Column("constants"),
               Column("why it is exact")]
    rows = [requantization_cells(layer) for layer in found]
    return table(columns, rows, class_="data requant")


def estimate_words(record: DesignRecord) -> str:
    est = record.estimate
    if est is None:
        return record.estimate_missing or "no estimate"
    clock = f" at {est.clock_ns:g} ns" if est.clock_ns else ""
    part = f"{est.part}{clock}; " if est.part else ""
    fits = "" if est.fits is None else ("; fits the part" if est.fits else "; does NOT fit the part")
    return f"Estimates: {est.source}; {part}{est.note}{fits}."


def layers_section(record: DesignRecord) -> str:
    return (paragraph(estimate_words(record), "note") + layer_table(record) + element("h3", text("Requantizations"))
            + requantization_table(record))


__all__ = ["layer_table", "layers_section", "requantization_table"]
