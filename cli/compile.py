"""``tessera compile``, ``emulate``, ``verify`` and ``inspect``: the compiler's commands, on
top of :mod:`tessera.compiler.api`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from ..compiler import api
from .app import (EXIT_MISMATCH, build_simulation, console, handle_errors, main, out, parse_bytes, parse_reuse,
                  progress_bar)


@main.command("compile")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(path_type=Path), help="Project folder to create.")
@click.option("--io-type", type=click.Choice(["parallel", "stream"]), default="parallel", show_default=True)
@click.option("--reuse", default="1", show_default=True, callback=parse_reuse,
              help="hls4ml reuse factor, or 'auto': per-layer factors from the estimator's chooser for --part.")
@click.option("--part", default="xcu250", show_default=True, help="FPGA part (xcu250, vu9p, zu9eg or a full part name).")
@click.option("--clock", "clock_period", type=float, default=5.0, show_default=True, help="Clock period in ns.")
@click.option("--project-name", default="tessera_model", show_default=True)
@click.option("--tb-samples", type=int, help="Reference samples written for the testbench "
              f"[default: {api.TB_SAMPLES}, fewer for inputs over {api.TB_VALUES // api.TB_SAMPLES:,} values; "
              f"{api.TB_SAMPLES_PER_KERNEL} per block kernel of a partitioned project].")
@click.option("--force", is_flag=True, help="Replace a non-empty output folder.")
@click.option("--partition", "grid_text", help="3D CNNs: run the volume as AxBxC blocks (e.g. 2x2x1), or 'auto': "
              "the fewest blocks that fit --onchip-budget, or without a budget the performance model's grid for --part.")
@click.option("--onchip-budget", help="Bytes one block's working set may use on chip (e.g. 4MiB, 512KiB); implies "
              "--partition auto.")
@click.option("--partition-mode", type=click.Choice(["overlap", "exchange"]), default="overlap", show_default=True,
              help="overlap: blocks read their halo and recompute it; exchange: per-layer halo exchange.")
@click.option("--input-type", help="Type of a float input that no Quant reads, e.g. fixed<16,6> (ufixed<W,I>, int<W>, "
              "uint<W>): real data are rounded half to even onto it, saturating.")
@handle_errors
def compile_cmd(model, out_dir, io_type, reuse, part, clock_period, project_name, tb_samples, force, grid_text,
                onchip_budget, partition_mode, input_type):
    """Compile a QONNX/QCDQ MODEL into a complete Vitis HLS project."""
    t0 = time.perf_counter()
    budget = parse_bytes(onchip_budget) if onchip_budget is not None else None
    with console.status("reading and typing the model"):
        graph = api.load_model(model, input_type)
    if graph.softmax is not None:
        out.print(f"notice: the trailing Softmax '{graph.softmax}' is not compiled; the design outputs its logits "
                  "(exactly), which verify compares with the user's model")
    opts = api.hls_options(graph, f"io_{io_type}", reuse, part, clock_period, project_name)
    if grid_text == "auto" and budget is None:
        with console.status(f"choosing a block grid for {part} (estimates)"):
            grid = api.choose_grid(graph, part, opts.io_type)
        if grid is None:
            out.print(f"the unpartitioned design fits {part} (estimate): compiling without blocks")
            grid_text = None
        else:
            grid_text = "x".join(map(str, grid))
            out.print(f"estimate: {grid_text} blocks fit {part}")
    if grid_text is None and budget is None:
        with console.status(f"writing the HLS project ({opts.io_type}) with hls4ml"):
            prj = api.write(graph, model, out_dir, opts, tb_samples=tb_samples, force=force)
        out.print(f"compiled {model} -> {prj} ({len(graph.nodes)} ops, {opts.io_type}, reuse {reuse}) in "
                  f"{time.perf_counter() - t0:.1f} s")
        for line in api.notices(prj):
            out.print(line, highlight=False)
        return
    with console.status("planning the partition"):
        partition = api.plan_partition(graph, grid_text, partition_mode, budget)
        report = partition.report()
    grid = "x".join(map(str, partition.grid))
    out.print(f"partition {grid} ({partition_mode}): cut after '{partition.cut}', redundant compute "
              f"{100 * report.redundant_fraction:.1f} %, halo {report.halo_bytes:,} bytes, largest block "
              f"{report.max_block_bytes:,} bytes")
    n = len(partition.block_tasks()) if partition_mode == "overlap" else len(partition.layer_graphs())
    with progress_bar() as p:
        task = p.add_task("writing block kernels", total=n)
        prj = api.write(graph, model, out_dir, opts, partition, tb_samples=tb_samples, force=force,
                        progress=lambda k: p.advance(task, k))
    info = api.read_manifest(prj)["partition"]
    out.print(f"compiled {model} -> {prj}: {grid} blocks ({partition_mode}), {len(info['kernels'])} block kernels, "
              f"tail: {info['tail'] or 'none'}, in {time.perf_counter() - t0:.1f} s")
    for line in api.notices(prj):
        out.print(line, highlight=False)


@main.command()
@click.argument("project", type=click.Path(path_type=Path))
@click.option("--input", "input_path", required=True, type=click.Path(path_type=Path), help=".npy of real-valued inputs (N, *shape).")
@click.option("--output", "output_path", required=True, type=click.Path(path_type=Path), help=".npy to write.")
@click.option("--codes", is_flag=True, help="Input and output are integer codes instead of real values.")
@click.option("--workers", type=int, help="Worker processes running samples, or a partitioned project's blocks (default: the CPUs).")
@handle_errors
def emulate(project, input_path, output_path, codes, workers):
    """Run PROJECT's g++ C-simulation on an input array (partitioned projects: every block
    in parallel worker processes, then the tail)."""
    import numpy as np

    sim = api.simulation(project, workers)
    x = api.input_codes(project, input_path, codes)
    build_simulation(sim)
    with progress_bar() as p:
        total = api.progress_total(project, len(x), sim)
        task = p.add_task("emulating" if total == len(x) else f"emulating {len(x)} samples as blocks", total=total,
                          unit="samples" if total == len(x) else "blocks")
        y = api.emulate(project, x, codes=True, sim=sim, progress=lambda k: p.advance(task, k))
    result = y if codes else api.real_outputs(sim.manifest["output"], y)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    np.save(output_path, result)
    out.print(f"emulated {len(x)} samples -> {output_path}")


def print_verify_report(rep) -> bool:
    """The report's lines, the last one the verdict; whether the project verified."""
    for m in rep.first_mismatches:
        out.print(f"mismatch: sample {m['sample']} output {m['output']}: expected {m['expected']} got {m['got']}")
    out.print(f"testbench (g++): {rep.testbench}")
    if rep.user_model.get("skipped"):
        out.print(f"user model: not run ({rep.user_model['skipped']})")
    elif rep.user_model.get("error"):
        out.print(f"user model: not compared ({rep.user_model['error']})")
    elif rep.user_model:
        u = rep.user_model
        out.print(f"user model ({u['tool']}): {u['outputs'] - u['differing_outputs']}/{u['outputs']} outputs equal the exact reference")
    if rep.framework:
        f = rep.framework
        out.print(f"framework outputs (--expected): {f['outputs'] - f['differing_outputs']}/{f['outputs']} equal the exact "
                  f"reference" + (f" (max |difference| {f['max_abs_difference']:.3g})" if f["differing_outputs"] else ""))
    if rep.reference_vs_integer_semantics_mismatches:
        out.print(f"reference vs integer semantics: {rep.reference_vs_integer_semantics_mismatches} mismatches")
    out.print(escape(rep.independent_line()), soft_wrap=True, highlight=False)
    out.print(f"verified: {rep.samples} samples, {rep.outputs} outputs, {rep.mismatches} mismatches")
    return rep.passed


@main.command("verify")
@click.argument("model", type=click.Path(path_type=Path))
@click.argument("project", type=click.Path(path_type=Path))
@click.option("--samples", type=int, default=1000, show_default=True, help="Random inputs over the full input type range.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--data", type=click.Path(path_type=Path), help="Also verify on these real-valued inputs (.npy).")
@click.option("--user-samples", type=int, default=100, show_default=True,
              help="Samples on which the user's exported model is run for the agreement count (0 to skip).")
@click.option("--expected", type=click.Path(path_type=Path),
              help="The training framework's outputs (.npy, real values) on --data, e.g. brevitas' forward.  For "
                   "recurrent cells (no ONNX executor runs them) they are the independent check: a difference fails "
                   "verify; otherwise those that differ are counted and reported.")
@click.option("--require-independent", is_flag=True,
              help="Fail when no independent executor can run the model (recurrent cells without --expected).")
@click.option("--report", type=click.Path(path_type=Path), help="Write the JSON report here.")
@handle_errors
def verify_cmd(model, project, samples, seed, data, user_samples, expected, require_independent, report):
    """Check PROJECT's C-simulation == the exact reference of MODEL on every output, and the
    exact reference == MODEL itself run by an independent executor in float64."""
    if samples < 0:
        raise click.BadParameter("must be >= 0", param_hint="--samples")
    with progress_bar() as p:
        task = p.add_task("C-simulation", total=None)
        rep = api.verify_project(model, project, samples=samples, seed=seed, data=data, user_samples=user_samples,
                                 progress=lambda k: p.advance(task, k), progress_total=lambda n: p.update(task, total=n),
                                 expected=expected, require_independent=require_independent)
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(rep.to_dict(), indent=1))
    if not print_verify_report(rep):
        sys.exit(EXIT_MISMATCH)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--input-type", help="Type of a float input that no Quant reads (as for compile).")
@handle_errors
def inspect(model, as_json, input_type):
    """Show MODEL's ops, fixed-point types, accumulator widths, MACs and requantization forms."""
    graph = api.load_model(model, input_type)
    rows = api.layer_table(graph)
    tin = graph.values[graph.input]
    if as_json:
        out.print_json(json.dumps({"input": {"shape": list(tin.shape), "type": tin.ftype.describe()}, "layers": rows}))
        return
    table = Table(title=f"{model}  (input {tin.shape} {tin.ftype.describe()}, sN.fF = N-bit signed with F fractional bits)")
    for col in ("node", "op", "shape", "type", "hls type", "code range", "MACs", "form"):
        table.add_column(col, justify="right" if col == "MACs" else "left")
    for r, node in zip(rows, graph.nodes):
        table.add_row(r["node"], r["op"], str(tuple(r["shape"])), r["type"], graph.values[node.output].ftype.hls(),
                      f"[{r['range'][0]}, {r['range'][1]}]", f"{r['macs']:,}", r["form"])
    out.print(table)
    out.print(f"total MACs per sample: {sum(r['macs'] for r in rows):,}")
