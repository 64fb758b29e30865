"""``tessera check``: the three g++-only checks of a generated project, in one report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..project import Manifest
from .fifo import DEFAULT_SAMPLES, FifoReport, fifo_check
from .lint import Finding, lint_view
from .synth import SyntaxReport, synthesis_syntax, synthesis_view
from .weights import WeightsReport, scan_weights


@dataclass
class CheckReport:
    project: Path
    syntax: SyntaxReport | None = None
    weights: WeightsReport | None = None
    lint: list[Finding] = field(default_factory=list)
    linted: bool = False
    fifo: FifoReport | None = None

    @property
    def ok(self) -> bool:
        return ((self.syntax is None or self.syntax.ok) and (self.weights is None or self.weights.ok) and not self.lint
                and (self.fifo is None or self.fifo.ok))

    def lines(self) -> list[str]:
        out = []
        if self.syntax is not None:
            out.append(("ok    " if self.syntax.ok else "FAIL  ") + self.syntax.line())
        if self.weights is not None:
            out.append(("ok    " if self.weights.ok else "FAIL  ") + self.weights.line())
        if self.linted:
            out.append(("ok    lint: nothing Vitis HLS rejects" if not self.lint else
                        f"FAIL  lint: {len(self.lint)} findings, first {self.lint[0].line_text()}"))
        if self.fifo is not None:
            out.append(("ok    " if self.fifo.ok else "FAIL  ") + self.fifo.line())
        return out

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "synthesis_syntax": None if self.syntax is None else {"ok": self.syntax.ok, "seconds": self.syntax.seconds,
                                                                   "errors": list(self.syntax.errors)},
            "weights": None if self.weights is None else {
                "ok": self.weights.ok, "arrays": self.weights.arrays, "values": self.weights.values,
                "shortened_for_gxx": list(self.weights.shortened), "findings": self.weights.findings},
            "lint": None if not self.linted else [f.line_text() for f in self.lint],
            "fifo": None if self.fifo is None else {
                "applicable": self.fifo.applicable, "ok": self.fifo.ok, "seconds": self.fifo.seconds,
                "samples": self.fifo.samples, "deadlock": list(self.fifo.deadlock), "detail": self.fifo.detail,
                "fifos": [{"name": p.name, "depth": p.depth, "peak": p.peak} for p in self.fifo.peaks]},
        }


def project_folders(prj: str | Path) -> list[Path]:
    """The HLS projects inside ``prj``: itself, or a partitioned project's kernels and tail."""
    prj = Path(prj)
    part = Manifest.read(prj).partition
    return [prj] if part is None else [prj / folder for folder in part.folders()]


def check_project(prj: str | Path, syntax: bool = True, lint: bool = True, fifo: bool = True,
                  fifo_samples: int = DEFAULT_SAMPLES, depths: dict[str, int] | None = None,
                  weights: bool = True) -> CheckReport:
    """Run the chosen checks on project ``prj`` (the weights scan always goes with the syntax
    pass: it covers the values the syntax pass leaves out of large arrays)."""
    rep, arrays = CheckReport(Path(prj)), None
    if weights or syntax:
        rep.weights, arrays = scan_weights(prj)
    if syntax:
        rep.syntax = synthesis_syntax(prj, arrays)
    if lint:
        rep.lint, rep.linted = lint_view(synthesis_view(prj, arrays)), True
    if fifo:
        rep.fifo = fifo_check(prj, fifo_samples, depths)
    return rep


__all__ = ["CheckReport", "check_project", "project_folders"]
