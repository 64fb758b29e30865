"""``tessera compile``, ``emulate``, ``verify`` and ``inspect``: the compiler's commands, on
top of :mod:`tessera.compiler.api`."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import click
from rich.table import Table

from ..compiler import api
from ..compiler.errors import InputDataError
from .app import (EXIT_MISMATCH, ConsoleObserver, check_output_path, handle_errors, main, out, parse_bytes, parse_reuse,
                  write_atomically)

COMPILE = api.CompileOptions()
VERIFY = api.VerifyOptions()


@main.command("compile")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(path_type=Path), help="Project folder to create.")
@click.option("--io-type", type=click.Choice(["parallel", "stream"]), default=str(COMPILE.io_type).removeprefix("io_"),
              show_default=True)
@click.option("--reuse", default=str(COMPILE.reuse), show_default=True, callback=parse_reuse,
              help=f"hls4ml reuse factor, or '{api.REUSE_AUTO}': per-layer factors from the estimator's chooser for --part.")
@click.option("--part", default=COMPILE.part, show_default=True, help="FPGA part (xcu250, vu9p, zu9eg or a full part name).")
@click.option("--clock", "clock_period", type=float, default=COMPILE.clock_period, show_default=True,
              help="Clock period in ns.")
@click.option("--project-name", default=COMPILE.project_name, show_default=True)
@click.option("--tb-samples", type=click.IntRange(1), help="Reference samples written for the testbench "
              f"[default: {api.TB_SAMPLES}, fewer for inputs over {api.TB_VALUES // api.TB_SAMPLES:,} values; "
              f"{api.TB_SAMPLES_PER_KERNEL} per block kernel of a partitioned project].")
@click.option("--force", is_flag=True, help="Replace a non-empty output folder.")
@click.option("--partition", "grid_text", help=f"3D CNNs: run the volume as AxBxC blocks (e.g. 2x2x1), or '{api.GRID_AUTO}': "
              "the fewest blocks that fit --onchip-budget, or without a budget the performance model's grid for --part.")
@click.option("--onchip-budget", help="Bytes one block's working set may use on chip (e.g. 4MiB, 512KiB); implies "
              "--partition auto.")
@click.option("--partition-mode", type=click.Choice(["overlap", "exchange"]), default=COMPILE.partition_mode,
              show_default=True, help="overlap: blocks read their halo and recompute it; exchange: per-layer halo exchange.")
@click.option("--input-type", help="Type of a float input that no Quant reads, e.g. fixed<16,6> (ufixed<W,I>, int<W>, "
              "uint<W>): real data are rounded half to even onto it, saturating.")
@click.option("--backend", type=click.Choice([api.BACKEND_HLS, api.BACKEND_RTL]), default=COMPILE.backend,
              show_default=True, help="hls: a Vitis HLS project through hls4ml; rtl: pipelined Verilog of the fully "
              "unrolled design through da4ml (RTL-simulated by verify and emulate, synthesized by 'tessera synth').")
@click.option("--pipeline", type=click.IntRange(1), default=COMPILE.pipeline, show_default=True,
              help="--backend rtl: adder delays between pipeline registers (fewer: a faster clock, more registers "
                   "and clock cycles of latency).")
@handle_errors
def compile_cmd(model, out_dir, io_type, reuse, part, clock_period, project_name, tb_samples, force, grid_text,
                onchip_budget, partition_mode, input_type, backend, pipeline):
    """Compile a QONNX/QCDQ MODEL into a complete Vitis HLS project, or (--backend rtl) a
    pipelined Verilog design."""
    check_output_path(out_dir, "--output", folder=True)
    options = api.CompileOptions(
        io_type=f"io_{io_type}", reuse=reuse, part=part, clock_period=clock_period, project_name=project_name,
        tb_samples=tb_samples, force=force, grid=grid_text, partition_mode=partition_mode, input_type=input_type,
        onchip_budget=parse_bytes(onchip_budget) if onchip_budget is not None else None, backend=backend,
        pipeline=pipeline)
    result = api.compile_model(model, out_dir, options, ConsoleObserver())
    out.print(result.summary(), markup=False, highlight=False, soft_wrap=True)
    for line in result.notices():
        out.print(line, markup=False, highlight=False, soft_wrap=True)


def npy_bytes(array) -> bytes:
    """``array`` as the bytes of a ``.npy`` file."""
    import numpy as np

    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def npz_bytes(arrays: dict) -> bytes:
    """``arrays`` (name -> array) as the bytes of an ``.npz`` file."""
    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


@main.command()
@click.argument("project", type=click.Path(path_type=Path))
@click.option("--input", "input_paths", required=True, multiple=True, type=click.Path(path_type=Path),
              help=".npy of real-valued inputs (N, *shape); a model with several inputs: one --input per input in "
                   "the model's order, or one .npz keyed by the model's input names.")
@click.option("--output", "output_paths", required=True, multiple=True, type=click.Path(path_type=Path),
              help=".npy to write; a model with several outputs: one --output per output in the model's order, or "
                   "one .npz (keyed by the model's output names).")
@click.option("--codes", is_flag=True, help="Input and output are integer codes instead of real values.")
@click.option("--workers", type=click.IntRange(1),
              help="Worker processes running samples, or a partitioned project's blocks (default: the CPUs).")
@handle_errors
def emulate(project, input_paths, output_paths, codes, workers):
    """Run PROJECT's g++ C-simulation on input arrays (partitioned projects: every block in
    parallel worker processes, then the tail)."""
    for path in output_paths:
        check_output_path(path, "--output")
    names = [e.name for e in api.Manifest.read(project).outputs]
    files = _output_files(output_paths, names)
    inputs = input_paths[0] if len(input_paths) == 1 else list(input_paths)
    result = api.emulate(project, inputs, codes=codes, workers=workers, observer=ConsoleObserver())
    arrays = [result] if len(names) == 1 else result
    if isinstance(files, Path):
        write_atomically(files, npz_bytes(dict(zip(names, arrays))))
    else:
        for path, array in zip(files, arrays):
            write_atomically(path, npy_bytes(array))
    where = ", ".join(map(str, output_paths))
    out.print(f"emulated {len(arrays[0])} samples -> {where}", markup=False, highlight=False)


def _output_files(paths: tuple[Path, ...], names: list[str]) -> Path | list[Path]:
    """Where ``emulate`` writes the outputs ``names``: one ``.npz`` for them all, or one
    ``.npy`` each; one line when the paths do not fit the outputs."""
    if len(paths) == 1 and paths[0].suffix == ".npz":
        return paths[0]
    if len(paths) != len(names):
        raise InputDataError(f"--output: {len(paths)} paths for the model's {len(names)} outputs "
                             f"({', '.join(names)}); give one .npy per output or one .npz")
    return list(paths)


def print_verify_report(rep) -> bool:
    """The report's lines, the last one the verdict; whether the project verified."""
    for line in rep.lines():
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    return rep.passed


@main.command("verify")
@click.argument("model", type=click.Path(path_type=Path))
@click.argument("project", type=click.Path(path_type=Path))
@click.option("--samples", type=click.IntRange(0), default=VERIFY.samples, show_default=True,
              help="Random inputs over the full input type range.")
@click.option("--seed", type=int, default=VERIFY.seed, show_default=True)
@click.option("--data", type=click.Path(path_type=Path),
              help="Also verify on these real-valued inputs (.npy; several inputs: an .npz keyed by input name).")
@click.option("--user-samples", type=click.IntRange(0), default=VERIFY.user_samples, show_default=True,
              help="Samples on which the user's exported model is run for the agreement count (0 to skip).")
@click.option("--expected", type=click.Path(path_type=Path),
              help="The training framework's outputs (.npy, real values) on --data, e.g. brevitas' forward: those "
                   "that differ are counted and reported (the independent check runs the file itself, recurrent "
                   "cells included; where it cannot run a recurrent file, these are that check).")
@click.option("--require-independent", is_flag=True,
              help="Fail when the independent executor cannot run the model.")
@click.option("--report", type=click.Path(path_type=Path), help="Write the JSON report here.")
@handle_errors
def verify_cmd(model, project, samples, seed, data, user_samples, expected, require_independent, report):
    """Check PROJECT's C-simulation == the exact reference of MODEL on every output, and the
    exact reference == MODEL itself run by an independent executor in float64."""
    if report is not None:
        check_output_path(report, "--report")
    options = api.VerifyOptions(samples=samples, seed=seed, data=data, expected=expected, user_samples=user_samples,
                                require_independent=require_independent)
    rep = api.verify_project(model, project, options, ConsoleObserver())
    if report is not None:
        write_atomically(report, json.dumps(rep.to_dict(), indent=1).encode())
    if not print_verify_report(rep):
        sys.exit(EXIT_MISMATCH)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--input-type", help="Type of a float input that no Quant reads (as for compile).")
@handle_errors
def inspect(model, as_json, input_type):
    """Show MODEL's ops, fixed-point types, accumulator widths, MACs and requantization forms
    (MODEL may also be a compiled project: its layers as compiled, and an RTL design's latency)."""
    if (model / api.MANIFEST).is_file():
        return _inspect_project(model, as_json)
    graph = api.load_model(model, input_type)
    rows = api.layer_table(graph)

    def ports(which) -> list[dict]:
        return [{"name": p.onnx_name, "shape": list(graph.values[p.value].shape),
                 "type": graph.values[p.value].ftype.describe()} for p in which]

    inputs, outputs = ports(graph.input_ports), ports(graph.output_ports)
    if as_json:
        out.print_json(json.dumps({"inputs": inputs, "outputs": outputs, "layers": rows}))
        return
    said = "; ".join(f"{p['name']} {tuple(p['shape'])} {p['type']}" for p in inputs)
    table = Table(title=f"{model}  (input{'s' if len(inputs) > 1 else ''} {said}, sN.fF = N-bit signed with F "
                        "fractional bits)")
    for col in ("node", "op", "shape", "type", "hls type", "code range", "MACs", "form"):
        table.add_column(col, justify="right" if col == "MACs" else "left")
    for r, node in zip(rows, graph.nodes):
        table.add_row(r["node"], r["op"], str(tuple(r["shape"])), r["type"], graph.values[node.output].ftype.hls(),
                      f"[{r['range'][0]}, {r['range'][1]}]", f"{r['macs']:,}", r["form"])
    out.print(table)
    out.print(f"total MACs per sample: {sum(r['macs'] for r in rows):,}")
    if len(outputs) > 1:
        out.print("outputs: " + "; ".join(f"{p['name']} {tuple(p['shape'])} {p['type']}" for p in outputs))


def _inspect_project(prj: Path, as_json: bool) -> None:
    """``inspect PRJ``: the layers as the manifest records them, the ports and the design."""
    m = api.Manifest.read(prj)
    if as_json:
        out.print_json(json.dumps({"backend": m.backend, "model": m.model_file,
                                   "inputs": [e.to_json() for e in m.inputs], "outputs": [e.to_json() for e in m.outputs],
                                   "layers": [r.to_json() for r in m.layers],
                                   "rtl": None if m.rtl is None else {"latency_cycles": m.rtl.latency,
                                                                      "stages": m.rtl.stages,
                                                                      "pipeline": m.rtl.pipeline,
                                                                      "lut_estimate": m.rtl.lut_estimate,
                                                                      "register_bits": m.rtl.register_bits}}))
        return
    table = Table(title=f"{prj}  ({m.backend} project of {m.model_file})")
    for col in ("node", "op", "shape", "type", "code range", "MACs", "form"):
        table.add_column(col, justify="right" if col == "MACs" else "left")
    for r in m.layers:
        table.add_row(r.node, r.op, str(tuple(r.shape)), r.ftype.describe(), f"[{r.lo}, {r.hi}]", f"{r.macs:,}", r.form)
    out.print(table)
    if m.rtl is not None:
        out.print(m.rtl.line(), markup=False, highlight=False, soft_wrap=True)
