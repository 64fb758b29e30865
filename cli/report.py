"""``tessera report``: a project's report, one self-contained HTML file (docs/report.md)."""

from __future__ import annotations

from pathlib import Path

import click

from ..compiler.report import write_report
from ..compiler.report.page import REPORT_HTML
from .app import check_output_path, handle_errors, main, out


@main.command("report")
@click.argument("project", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help=f"The HTML file to write [default: PROJECT/{REPORT_HTML}].")
@handle_errors
def report_cmd(project, output):
    """Write PROJECT's report: the design drawn from its IR, the layer table with types,
    requantizations and estimates, the value ranges the verified samples reached, the last
    verification and an RTL project's synthesis, in one HTML file that needs nothing else
    (compile, verify and synth keep PROJECT/report.html current)."""
    if output is not None:
        check_output_path(output, "--output")
    path = write_report(project, output)
    out.print(f"report: {path}", markup=False, highlight=False, soft_wrap=True)
