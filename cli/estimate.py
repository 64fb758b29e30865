"""``tessera estimate``: choose reuse factors (and a block grid) for a part and report the
estimated resources, II, latency and roofline share."""

from __future__ import annotations

from pathlib import Path

import click

from ..compiler import api
from ..compiler.estimate import choose_design, get_part, sweep_reuse
from ..compiler.estimate.report import layer_table, plot, summary_lines, write_json
from .app import check_output_path, console, handle_errors, main, out


@main.command("estimate")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--part", default="xcu250", show_default=True, help="xcu250 (Alveo U250), vu9p, zu9eg or their full part names.")
@click.option("--partition", default="auto", show_default=True,
              help="Block grid of the leading spatial segment: auto (only when the unpartitioned design does not fit), "
                   "none, or AxBxC.")
@click.option("--io-type", type=click.Choice(["auto", "parallel", "stream"]), default="auto", show_default=True,
              help="auto: the fitting io type with the higher throughput.")
@click.option("--strategy", type=click.Choice(["latency", "resource"]), default="latency", show_default=True,
              help="hls4ml strategy: weights as fabric constants (latency) or in block RAM (resource).")
@click.option("--clock", "clock_ns", type=float, default=5.0, show_default=True, help="Clock period in ns.")
@click.option("--utilization", type=float, default=0.8, show_default=True,
              help="Largest fraction of each resource a design may use to count as fitting.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Write the estimate as JSON here.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), help="Write the plot (PNG) here.")
@click.option("--input-type", help="Type of a float input that no Quant reads (as for compile).")
@click.option("--backend", type=click.Choice([api.BACKEND_HLS, api.BACKEND_RTL]), default=api.BACKEND_HLS,
              show_default=True, help="rtl: the fully unrolled Verilog design's LUTs, FFs and latency in clock cycles, "
              "read off the adder graphs compile --backend rtl builds.")
@click.option("--pipeline", type=click.IntRange(1), default=api.PIPELINE, show_default=True,
              help="--backend rtl: adder delays between pipeline registers (as for compile).")
@handle_errors
def estimate_cmd(model, part, partition, io_type, strategy, clock_ns, utilization, json_path, plot_path, input_type,
                 backend, pipeline):
    """Estimate MODEL on an FPGA part: per-layer reuse factors and block grid chosen to fit
    and maximize throughput (labelled estimates, see docs/estimate.md); with --backend rtl,
    the Verilog design's cells and latency (docs/rtl.md)."""
    if backend == api.BACKEND_RTL:
        return _estimate_rtl(model, input_type, pipeline, json_path)
    if not 0 < utilization <= 1:
        raise click.BadParameter("must be in (0, 1]", param_hint="--utilization")
    if clock_ns <= 0:
        raise click.BadParameter("must be > 0", param_hint="--clock")
    for path, option in ((json_path, "--json"), (plot_path, "--plot")):
        if path is not None:
            check_output_path(path, option)
    p = get_part(part)
    with console.status("reading and typing the model"):
        graph = api.load_model(model, input_type)
    io = io_type if io_type == "auto" else f"io_{io_type}"
    with console.status(f"choosing reuse factors{' and block grid' if partition != 'none' else ''} for {p.key}"):
        design = choose_design(graph, p, io, strategy, partition, clock_ns, utilization)
    out.print(layer_table(design, f"{model} on {p.key}"))
    for line in summary_lines(design):
        out.print(line, highlight=False)
    sweep = sweep_reuse(graph, p, design.io_type, strategy, design.plan, clock_ns) if (json_path or plot_path) else None
    if json_path:
        write_json(design, json_path, str(model), sweep)
        out.print(f"wrote {json_path}")
    if plot_path:
        plot(design, sweep, plot_path, Path(model).name)
        out.print(f"wrote {plot_path}")


def _estimate_rtl(model: Path, input_type: str | None, pipeline: int, json_path: Path | None) -> None:
    """``estimate --backend rtl``: a table of the layers' LUTs, then the design's line."""
    import json

    from rich.table import Table

    from ..compiler.estimate.rtl import estimate_rtl
    from .app import write_atomically

    if json_path is not None:
        check_output_path(json_path, "--json")
    with console.status("reading and typing the model"):
        graph = api.load_model(model, input_type)
    with console.status(f"tracing {len(graph.nodes)} layers into adder graphs (da4ml)"):
        est = estimate_rtl(graph, pipeline)
    table = Table(title=f"{model}: RTL design at {pipeline} adder delays per stage (estimates)")
    for col in ("node", "op", "LUT", "share"):
        table.add_column(col, justify="left" if col in ("node", "op") else "right")
    for r in est.layers:
        table.add_row(r.node, r.op, f"{r.luts:,}", f"{100 * r.luts / max(est.luts, 1):.1f} %")
    out.print(table)
    out.print(est.line(), highlight=False)
    if json_path is not None:
        write_atomically(json_path, json.dumps({"model": str(model), **est.to_json()}, indent=1).encode())
        out.print(f"wrote {json_path}")
