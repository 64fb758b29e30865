"""``tessera check``: what C-simulation cannot show about a generated project, with g++
alone (docs/hls-checks.md): the synthesis branch compiles, the C++ uses nothing Vitis HLS
rejects, and the io_stream FIFOs at their declared depths do not deadlock."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..compiler.errors import ProjectError
from ..compiler.hlscheck.check import check_project, project_folders
from .app import EXIT_MISMATCH, check_output_path, console, handle_errors, main, out, write_atomically


def parse_depths(ctx, param, values) -> dict[str, int]:
    depths = {}
    for v in values:
        name, _, depth = v.partition("=")
        if not name or not depth.isdigit() or int(depth) < 1:
            raise click.BadParameter(f"'{v}' is not NAME=DEPTH with DEPTH >= 1")
        depths[name] = int(depth)
    return depths


@main.command("check")
@click.argument("project", type=click.Path(path_type=Path))
@click.option("--no-syntax", is_flag=True, help="Skip the synthesis-branch compile (g++ -fsyntax-only).")
@click.option("--no-lint", is_flag=True, help="Skip the lint for constructs Vitis HLS rejects.")
@click.option("--no-fifo", is_flag=True, help="Skip the bounded-FIFO C-simulation.")
@click.option("--fifo-samples", type=click.IntRange(1), default=2, show_default=True,
              help="Testbench samples the bounded-FIFO simulation runs.")
@click.option("--depth", "depths", multiple=True, callback=parse_depths, metavar="NAME=DEPTH",
              help="Simulate FIFO NAME at DEPTH instead of its declared depth (repeatable): try a smaller FIFO.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Write the report as JSON here.")
@handle_errors
def check_cmd(project, no_syntax, no_lint, no_fifo, fifo_samples, depths, json_path):
    """Check PROJECT (from `tessera compile`) for what Vitis HLS would reject or what would
    fail on the FPGA although C-simulation passes; exit 1 if any check fails."""
    if json_path is not None:
        check_output_path(json_path, "--json")
    folders = project_folders(project)
    if depths and len(folders) > 1:
        raise ProjectError("--depth names one project's FIFOs: check a kernel folder of the partitioned project")
    reports = []
    for prj in folders:
        with console.status(f"checking {prj.name}"):
            rep = check_project(prj, not no_syntax, not no_lint, not no_fifo, fifo_samples, depths)
        reports.append(rep)
        if len(folders) > 1:
            out.print(f"[bold]{prj.relative_to(project)}[/]")
        for line in rep.lines():
            out.print(line, highlight=False, markup=False)
        for f in rep.lint[1:]:
            out.print(f"      {f.line_text()}", highlight=False, markup=False)
        if rep.fifo is not None and rep.fifo.peaks:
            peaks = ", ".join(f"{p.name} {p.peak}/{p.depth}" for p in rep.fifo.peaks[::-1])
            out.print(f"      FIFO peak/depth: {peaks}", highlight=False, markup=False)
    if json_path:
        write_atomically(json_path, json.dumps({str(r.project): r.to_json() for r in reports}, indent=1).encode())
        out.print(f"wrote {json_path}")
    if not all(r.ok for r in reports):
        raise SystemExit(EXIT_MISMATCH)
