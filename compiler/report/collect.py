"""The design record (:class:`.design.DesignRecord`) of a compiled graph: each op asked for
its facets (types, requantization, form, MACs, cost), the estimator for the figures of the
back end's design.

The estimates are those ``tessera estimate`` prints: the HLS back end's analytical model
(``estimate/model.py``: per layer DSP / LUT / FF / RAMB18, II and latency at the project's
reuse factors, io type and part) and, for an RTL design, da4ml's cost model of its adder graphs
(``estimate/rtl.py``: LUTs per layer; registers and latency per design)."""

from __future__ import annotations

from ..errors import TesseraError, first_line
from ..estimate.model import estimate
from ..estimate.parts import get_part
from ..estimate.rtl import estimate_rtl
from ..ir.graph import Graph, Node
from ..lower.hls4ml_lower import HlsOptions
from ..ops import OPS, IoType, Trait
from .design import DesignRecord, EstimateSummary, LayerCost, LayerRecord, PortRecord

#: Where each back end's estimate comes from (the report's words).
HLS_SOURCE = "Tessera's analytical model of the hls4ml kernels (docs/estimate.md), not a synthesis result"
RTL_SOURCE = "da4ml's cost model of the traced adder graphs (docs/rtl.md), not a synthesis result"


def layer_kind(node: Node, requantizes: bool) -> str:
    """How the drawing colours a layer: by the op's traits, never its name."""
    traits = OPS[node.op].traits
    if Trait.LINEAR in traits:
        return "linear"
    if Trait.SEQUENCE in traits:
        return "recurrent"
    if requantizes:
        return "requant"
    if Trait.MERGE in traits:
        return "merge"
    if traits & {Trait.RESHAPE} or (Trait.CODE_SELECT in traits and not traits & {Trait.WINDOW, Trait.ELEMENTWISE}):
        return "reshape"
    if traits & {Trait.WINDOW, Trait.SCATTER, Trait.MAP}:
        return "window"
    return "elementwise"


def weight_words(graph: Graph, node: Node, io: IoType) -> tuple[str, str]:
    """(weight type, accumulator type) in words for a layer with weights (empty: none).  A
    linear op's output is its accumulator; a cell's widths are its cost facet's."""
    op = OPS[node.op]
    ins, out = [graph.values[v] for v in node.inputs], graph.values[node.output]
    if Trait.LINEAR in op.traits:
        kind = op.weight_kind(node.attrs)
        weight = node.attrs.wtype.describe() + ("" if kind == "int" else f" ({kind})")
        return weight, out.ftype.describe()
    if Trait.SEQUENCE in op.traits:
        work = op.cost(node.attrs, ins, out, io)
        kind = "" if work.weight_kind == "int" else f" ({work.weight_kind})"
        return (f"{work.w_bits}-bit{kind}" if work.w_bits else "", f"{work.acc_bits}-bit" if work.acc_bits else "")
    return "", ""


def layer_record(graph: Graph, node: Node, io: IoType, reuse: int | None, cost: LayerCost | None) -> LayerRecord:
    op = OPS[node.op]
    ins, out = [graph.values[v] for v in node.inputs], graph.values[node.output]
    requant = op.requantization(node.attrs, ins, out)
    weight, accumulator = weight_words(graph, node, io)
    return LayerRecord(node.name, node.op, layer_kind(node, requant is not None), tuple(node.inputs), node.output,
                       tuple(out.shape), out.ftype, int(out.lo), int(out.hi), tuple(t.ftype.describe() for t in ins),
                       weight, accumulator, requant, op.form(node.attrs, ins, out), int(op.macs(node.attrs, ins, out)),
                       reuse, cost)


def ports(graph: Graph, which) -> tuple[PortRecord, ...]:
    return tuple(PortRecord(p.onnx_name, p.value, tuple(graph.values[p.value].shape), graph.values[p.value].ftype,
                            int(graph.values[p.value].lo), int(graph.values[p.value].hi)) for p in which)


def hls_estimate(graph: Graph, opts: HlsOptions, grid: tuple[int, ...] | None
                 ) -> tuple[dict[str, LayerCost], EstimateSummary | None, str]:
    """Per-layer figures, the summary, or why there is none (a part outside the catalogue)."""
    try:
        part = get_part(opts.part)
        reuse = {n.name: opts.layer_reuse.get(n.name, opts.reuse) for n in graph.nodes}
        design = estimate(graph, part, reuse, str(opts.io_type), opts.strategy.lower(), grid, opts.clock_period)
    except TesseraError as exc:
        return {}, None, f"no estimate: {exc}"
    costs = {e.node: LayerCost(e.latency, e.ii, e.lut, e.ff, e.dsp, e.bram18) for e in design.layers}
    totals = design.totals
    blocks = f"; {design.n_blocks} blocks of the grid, each layer of the segment run once per block" if grid else ""
    summary = EstimateSummary(HLS_SOURCE, f"{part.name} ({part.device})", opts.clock_period,
                              LayerCost(design.latency, design.ii, totals["lut"], totals["ff"], totals["dsp"],
                                        totals["bram18"]), design.fits,
                              f"{opts.io_type}, {opts.strategy} strategy{blocks}")
    return costs, summary, ""


def rtl_estimate(graph: Graph, pipeline: int, traced=None) -> tuple[dict[str, LayerCost], EstimateSummary | None, str]:
    try:
        found = estimate_rtl(graph, pipeline, traced)
    except TesseraError as exc:
        return {}, None, f"no estimate: {first_line(exc)}"
    costs = {e.node: LayerCost(lut=e.luts) for e in found.layers}
    summary = EstimateSummary(RTL_SOURCE, "", None, LayerCost(latency=found.latency, ii=1, lut=found.luts, ff=found.ffs),
                              None, f"{found.stages} pipeline stages at {pipeline} adder delays each, one sample per "
                                    "clock; per layer only LUTs")
    return costs, summary, ""


def design_record(graph: Graph, model_file: str | None, opts: HlsOptions, backend: str, pipeline: int,
                  grid: tuple[int, ...] | None = None, traced=None) -> DesignRecord:
    """The record of ``graph`` compiled with ``opts`` by ``backend`` (``rtl``: at ``pipeline``
    adder delays per stage, ``traced`` its trace when the caller has it, else it is traced
    again; ``grid``: a partitioned HLS design's blocks)."""
    rtl = backend == "rtl"
    costs, summary, missing = rtl_estimate(graph, pipeline, traced) if rtl else hls_estimate(graph, opts, grid)
    layers = tuple(layer_record(graph, n, opts.io_type, None if rtl else opts.layer_reuse.get(n.name, opts.reuse),
                                costs.get(n.name)) for n in graph.nodes)
    return DesignRecord(backend, model_file, ports(graph, graph.input_ports), ports(graph, graph.output_ports), layers,
                        summary, missing)


__all__ = ["HLS_SOURCE", "RTL_SOURCE", "design_record", "layer_kind"]
