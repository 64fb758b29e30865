"""The report page: one self-contained HTML file (inline SVG and CSS, no script, nothing
fetched) of a project, rendered from ``hls_templates/report/`` with typed fields.

It reads only the project: the manifest (``tessera.json``, through :class:`~..project.Manifest`),
the design record the compile wrote (``design.json``), the last verification
(``verify.json``) and an RTL project's synthesis results (``synth.json``).  Sections:
a summary, the design drawn from the IR, the layer table, the value ranges, the
verification, an RTL project's synthesis, a partitioned project's blocks, and where every
figure comes from."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ... import __version__
from ...hls_templates import Fields, path as template_path, render
from ..files import write_atomically
from ..project import Manifest
from ..synth.run import SynthReport
from .checks import partition_section, synthesis_section, verification_section
from .design import DesignRecord, manifest_record
from .drawing import drawing
from .layers import layers_section
from .markup import element, number, text
from .ranges import ranges_section
from .verification import VerificationRecord

#: The report's file in a project folder.
REPORT_HTML = "report.html"
#: The stylesheet inlined into every page.
STYLESHEET = "report/report.css"


@dataclass(frozen=True)
class ReportPage(Fields):
    """The page: its title, stylesheet, heading, subtitle, navigation, summary cards, the
    sections, the footer, and the generator's name."""

    template: ClassVar[str] = "report/page.html.tpl"
    title: str
    style: str
    heading: str
    subtitle: str
    navigation: str
    summary: str
    sections: str
    footer: str
    generator: str


@dataclass(frozen=True)
class ReportSection(Fields):
    """One section: its anchor, heading, an introduction and its body (markup)."""

    template: ClassVar[str] = "report/section.html.tpl"
    anchor: str
    heading: str
    intro: str
    body: str


@dataclass(frozen=True)
class Inputs:
    """Everything a page is made of, read from the project folder."""

    project: Path
    manifest: Manifest
    record: DesignRecord
    verified: VerificationRecord | None

    @classmethod
    def read(cls, prj: str | Path) -> "Inputs":
        prj = Path(prj)
        manifest = Manifest.read(prj)
        record = DesignRecord.read(prj) or manifest_record(manifest)
        return cls(prj, manifest, record, VerificationRecord.read(prj))


def card(label: str, value: str, detail: str = "", state: str = "") -> str:
    return element("div", element("div", text(label), class_="label"), element("div", text(value), class_="value"),
                   element("div", text(detail), class_="detail"), class_=f"card {state}".strip())


def backend_words(m: Manifest) -> str:
    if m.rtl is not None:
        return f"RTL: pipelined Verilog (da4ml), {m.rtl.pipeline} adder delays per stage"
    reuse = "per-layer reuse" if m.options.layer_reuse else f"reuse {m.options.reuse}"
    blocks = f", {' x '.join(map(str, m.partition.grid))} blocks" if m.partition is not None else ""
    return f"HLS: Vitis HLS project (hls4ml), {m.options.io_type}, {reuse}{blocks}"


def verdict_card(verified: VerificationRecord | None) -> str:
    if verified is None:
        return card("verification", "not verified yet", "tessera verify MODEL PRJ")
    return card("verification", "verified" if verified.passed else "FAILED",
                f"{verified.samples:,} samples, {verified.outputs:,} outputs, {verified.mismatches:,} mismatches",
                "ok" if verified.passed else "bad")


def estimate_card(record: DesignRecord) -> str:
    est = record.estimate
    if est is None:
        return card("estimate", "—", record.estimate_missing)
    t = est.totals
    counts = [f"{number(n)} {what}" for n, what in ((t.ff, "FF"), (t.dsp, "DSP"), (t.bram18, "BRAM18")) if n is not None]
    cycles = f"latency {number(t.latency)} cycles" + (f", II {number(t.ii)}" if t.ii is not None else "")
    return card("estimate", f"{number(t.lut)} LUT", f"{', '.join(counts)}; {cycles}")


def synthesis_card(prj: Path, m: Manifest) -> str:
    if m.rtl is None:
        return ""
    results = SynthReport.read(prj).results
    if not results:
        return card("synthesis", "not run", "tessera synth PRJ --target ...")
    r = list(results.values())[-1]
    fmax = f", {r.place.fmax_mhz:.1f} MHz routed" if r.place is not None else ""
    return card(f"synthesis ({r.target})", f"{r.counts.luts:,} LUT", f"{r.counts.ffs:,} FF{fmax}")


def ports_words(record: DesignRecord) -> str:
    def each(ports) -> str:
        return "; ".join(f"{p.name} ({', '.join(map(str, p.shape))}) {p.ftype.describe()}" for p in ports)

    return f"in: {each(record.inputs)} — out: {each(record.outputs)}"


def summary(page: Inputs) -> str:
    r, m = page.record, page.manifest
    return "".join([
        card("model", m.model_file or "(a kernel of a partitioned project)", backend_words(m)),
        card("layers", f"{len(r.layers)}", f"{number(r.macs)} MACs per sample"),
        card("ports", f"{len(r.inputs)} in, {len(r.outputs)} out", ports_words(r)),
        verdict_card(page.verified), estimate_card(r), synthesis_card(page.project, m)])


def section(anchor: str, heading: str, intro: str, body: str) -> tuple[str, str, str]:
    """(anchor, heading, rendered section)."""
    words = element("p", text(intro), class_="note") if intro else ""
    return anchor, heading, render(ReportSection(anchor, text(heading), words, body))


def sections(page: Inputs) -> list[tuple[str, str, str]]:
    r, m = page.record, page.manifest
    edges = "" if r.edges else " The project has no design record (compiled without one): boxes in layer order only."
    found = [
        section("design", "Design", "Each layer a box in dataflow order (its name, op, output shape, output type and "
                "the code range type inference proved reachable), an arrow per value it reads." + edges, drawing(r)),
        section("layers", "Layers", "", layers_section(r)),
        section("ranges", "Value ranges", "The codes each value reached on the verified samples against its type: "
                "high bits no sample needed are candidates for a narrower type.", ranges_section(r, page.verified)),
        section("verification", "Verification", "", verification_section(page.verified, m.model_file)),
    ]
    if m.rtl is not None:
        found.append(section("synthesis", "Synthesis", "", synthesis_section(page.project, m, r)))
    if m.partition is not None:
        found.append(section("partition", "Partition", "", partition_section(m.partition)))
    return found


SOURCES = (
    "Layers, types, code ranges, MACs and requantizations: the typed IR the compile built (design.json, "
    "written by compile; tessera.json).",
    "Estimates: the estimator's model (tessera estimate; docs/estimate.md, docs/rtl.md), not synthesis results.",
    "Verification and reached value ranges: the last tessera verify of this project (verify.json).",
    "Synthesis: the last tessera synth of each target (synth.json).",
)


def footer(page: Inputs, generated: str) -> str:
    items = element("ul", *(element("li", text(s)) for s in SOURCES))
    return (element("p", text("Where the numbers come from:")) + items +
            element("p", text(f"tessera {__version__} report of the project folder {page.project.resolve().name}, "
                              f"generated {generated} (UTC).")))


def render_page(prj: str | Path) -> str:
    """The report of project ``prj`` as HTML."""
    page = Inputs.read(prj)
    generated = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    found = sections(page)
    navigation = " ".join(element("a", text(heading), href=f"#{anchor}") for anchor, heading, _ in found)
    m = page.manifest
    name = m.model_file or page.project.name
    subtitle = f"{backend_words(m)} — project folder {page.project.resolve().name}"
    return render(ReportPage(text(f"{name} — tessera report"), template_path(STYLESHEET).read_text(),
                             text(f"{name}"), text(subtitle), navigation, summary(page),
                             "\n".join(body for _, _, body in found), footer(page, generated),
                             text(f"tessera {__version__}")))


def write_report(prj: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of ``prj`` to ``out`` (default ``PRJ/report.html``) through a
    temporary sibling renamed at the end; its path."""
    html = render_page(prj)
    path = Path(out) if out is not None else Path(prj) / REPORT_HTML
    return write_atomically(path, html).resolve()


__all__ = ["REPORT_HTML", "ReportPage", "ReportSection", "render_page", "write_report"]
