"""``tessera report``: one self-contained HTML page of a project (docs/report.md).

``compile`` records the design (:func:`record_compile`: ``PRJ/design.json``), ``verify`` its
result and the value ranges the samples reached (:func:`record_verify`: ``PRJ/verify.json``),
and each of them, like ``synth``, rewrites ``PRJ/report.html`` (:func:`write_report`) at its
end; the page itself reads only the project folder."""

from __future__ import annotations

from pathlib import Path

from ..ir.graph import Graph
from ..lower.hls4ml_lower import HlsOptions
from ..project import Manifest
from ..verdict import VerifyReport
from .design import DESIGN_JSON, DesignRecord
from .page import REPORT_HTML, ReportPage, ReportSection, render_page, write_report
from .verification import VERIFY_JSON, VerificationRecord, record_verification


def record_compile(prj: str | Path, graph: Graph, opts: HlsOptions, backend: str, pipeline: int,
                   grid: tuple[int, ...] | None = None, traced=None) -> Path:
    """After a compile: the design record of ``graph`` in ``prj`` (an RTL design's
    ``traced``: its trace, when the caller has it), and the report; its path."""
    from .collect import design_record  # the estimator: not loaded by `tessera report`

    design_record(graph, Manifest.read(prj).model_file, opts, backend, pipeline, grid, traced).write(prj)
    return write_report(prj)


def record_verify(prj: str | Path, report: VerifyReport) -> Path:
    """After a verify: its record in ``prj``, and the report; its path."""
    record_verification(prj, report, Manifest.read(prj).backend)
    return write_report(prj)


__all__ = ["DESIGN_JSON", "DesignRecord", "REPORT_HTML", "ReportPage", "ReportSection", "VERIFY_JSON",
           "VerificationRecord", "record_compile", "record_verify", "render_page", "write_report"]
