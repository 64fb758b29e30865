"""The sections about what was checked and measured: the last verification (``verify.json``),
an RTL project's synthesis results beside da4ml's estimate (``synth.json``), and a
partitioned project's blocks (the manifest's partition)."""

from __future__ import annotations

from ..project import Manifest, PartitionEntry
from ..synth.run import SynthReport, SynthResult
from .design import DesignRecord
from .markup import Column, code, definitions, element, number, paragraph, table, text
from .verification import VerificationRecord


def verdict_banner(verified: VerificationRecord | None) -> str:
    if verified is None:
        return element("p", text("Not verified yet."), class_="verdict none")
    return element("p", text(verified.verdict), class_="verdict ok" if verified.passed else "verdict bad")


def verification_section(verified: VerificationRecord | None, model_file: str | None) -> str:
    """The verdict, the counts, each check's line, when and with what."""
    if verified is None:
        command = f"tessera verify {model_file or 'MODEL'} PRJ"
        return verdict_banner(None) + element(
            "p", text("Run "), code(command), text(" to compare the simulation with the exact reference and the model "
                                                  "file itself on every output; this page then shows the result and "
                                                  "the value ranges the samples reached."), class_="note")
    facts = [("samples", text(f"{verified.samples:,} ({verified.random_samples:,} random over the full input range, "
                              f"{verified.data_samples:,} from --data)")),
             ("outputs compared", text(f"{verified.outputs:,}")),
             (f"{verified.simulator} mismatches", text(f"{verified.mismatches:,}")),
             ("integer semantics mismatches", text(f"{verified.semantics_mismatches:,}")),
             (f"testbench ({verified.testbench_tool})",
              text(("passed: " if verified.testbench_passed else "FAILED: ") + verified.testbench_line)),
             ("independent check", text(verified.independent_line.removeprefix("independent check: ")))]
    facts += [("also", text(line)) for line in verified.other_lines]
    facts += [("model file", code(verified.model)), ("verified on", text(f"{verified.date} (UTC)")),
              ("took", text(f"{verified.seconds:.1f} s"))]
    versions = ", ".join(f"{name} {version}" for name, version in verified.versions.items())
    facts.append(("versions", text(versions)))
    return verdict_banner(verified) + definitions(facts)


def synthesis_row(result: SynthResult) -> list[str]:
    c = result.counts
    lut_ratio = f"{c.lut_slots:,} ({result.lut_ratio:.2f} per estimated LUT)"
    fmax = "—" if result.place is None else f"{result.place.fmax_mhz:.1f} MHz (target {result.place.clock_mhz:g})"
    wrapper = "" if result.wrapper is None else f" + serial wrapper ({result.wrapper.register_bits:,} register bits)"
    return [text(result.target), text(result.part), text(f"{c.luts:,}"), text(f"{result.lut_estimate:,}"),
            text(lut_ratio), text(f"{c.ffs:,}"), text(f"{result.register_bits:,}{wrapper}"), text(f"{c.carries:,}"),
            text(f"{c.dsps:,}"), text(f"{c.brams:,}"), text(f"{c.ios:,}"), text(fmax), text(f"{result.seconds:.0f} s")]


SYNTH_COLUMNS = [Column("target"), Column("part"), Column("LUT (Yosys)", True), Column("LUT (da4ml estimate)", True),
                 Column("LUT slots", True, "LUTs a part must hold (ECP5: a carry cell is two LUT4 slots)"),
                 Column("FF (Yosys)", True), Column("register bits (estimate)", True), Column("carry", True),
                 Column("DSP", True), Column("BRAM18", True), Column("IO", True), Column("routed Fmax"),
                 Column("took", True)]


def synthesis_section(prj, manifest: Manifest, record: DesignRecord) -> str:
    """Each target's counts and Fmax beside the estimate, or how to get them."""
    rtl = manifest.rtl
    est = (f"da4ml's estimate: {rtl.lut_estimate:,} LUT, {rtl.register_bits:,} register bits; latency {rtl.latency} "
           f"clock cycles ({rtl.stages} stages at {rtl.pipeline} adder delays each), one sample per clock.")
    results = SynthReport.read(prj).results
    if not results:
        return paragraph(est, "note") + element(
            "p", text("Not synthesized yet: "), code("tessera synth PRJ --target ecp5-85k|ecp5-45k|ecp5-25k|xcup|xc7"),
            text(" counts the cells with Yosys and, on ECP5, places and routes for a routed Fmax."), class_="note")
    rows = [synthesis_row(r) for r in results.values()]
    return paragraph(est, "note") + table(SYNTH_COLUMNS, rows, caption="Yosys cell counts (and nextpnr's routed Fmax on "
                                                                       "ECP5) against the estimate", class_="data synth")


def partition_section(entry: PartitionEntry) -> str:
    kernels = sorted(set(entry.kernels.values()))
    facts = [("mode", text(entry.mode)), ("grid", text(" x ".join(map(str, entry.grid)) + f" ({entry.blocks} blocks)")),
             ("cut after", code(entry.cut)), ("block kernels", text(", ".join(kernels) or "—")),
             ("tail", text(entry.tail or "none")),
             ("redundant compute", text(f"{100 * entry.redundant_compute:.1f} %")),
             ("halo", text(f"{number(entry.halo_bytes)} bytes")),
             ("largest block", text(f"{number(entry.max_block_bytes)} bytes"))]
    return paragraph("The volume runs as blocks: each block kernel is a project of its own under the folder named; "
                     "the layers after the cut run once in the tail.", "note") + definitions(facts)


__all__ = ["partition_section", "synthesis_section", "verdict_banner", "verification_section"]
