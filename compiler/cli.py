"""The ``tessera`` command.  Exit codes: see docs/cli.md (and ``errors.py``)."""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .errors import TesseraError
from .estimate.cli import auto_reuse, parse_reuse

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 200)

EXIT_MISMATCH = 1
EXIT_INTERNAL = 10


def _handle_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        debug = click.get_current_context().find_root().params.get("debug", False)
        try:
            return fn(*args, **kwargs)
        except TesseraError as exc:
            if debug:
                raise
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            if getattr(exc, "hard_exit", False):
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(exc.exit_code)
            sys.exit(exc.exit_code)
        except click.exceptions.ClickException:
            raise  # usage errors: click prints them and exits 2
        except KeyboardInterrupt:
            console.print("[bold red]interrupted[/]")
            sys.exit(130)
        except Exception as exc:  # anything else is our bug: say so in one line
            if debug:
                raise
            first = str(exc).splitlines()[0] if str(exc) else ""
            console.print(f"[bold red]internal error:[/] {type(exc).__name__}: {escape(first)} (rerun with --debug for a traceback)",
                          highlight=False, soft_wrap=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True, disable=not console.is_terminal)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="tessera")
def main(debug: bool) -> None:
    """Tessera: quantized neural networks to FPGAs through hls4ml, verified bit for bit."""
    import warnings

    if not debug:  # third-party chatter (brevitas, hls4ml) would bury our one-line messages
        warnings.filterwarnings("ignore", category=UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)


@main.command("compile")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(path_type=Path), help="Project folder to create.")
@click.option("--io-type", type=click.Choice(["parallel", "stream"]), default="parallel", show_default=True)
@click.option("--reuse", default="1", show_default=True, callback=parse_reuse,
              help="hls4ml reuse factor, or 'auto': per-layer factors from the estimator's chooser for --part.")
@click.option("--part", default="xcu250", show_default=True, help="FPGA part (xcu250, vu9p, zu9eg or a full part name).")
@click.option("--clock", "clock_period", type=float, default=5.0, show_default=True, help="Clock period in ns.")
@click.option("--project-name", default="tessera_model", show_default=True)
@click.option("--tb-samples", type=int, default=64, show_default=True, help="Reference samples written for the testbench.")
@click.option("--force", is_flag=True, help="Replace a non-empty output folder.")
@click.option("--partition", "grid_text", help="3D CNNs: run the volume as AxBxC blocks (e.g. 2x2x1), or 'auto': "
              "the fewest blocks that fit --onchip-budget, or without a budget the performance model's grid for --part.")
@click.option("--onchip-budget", help="Bytes one block's working set may use on chip (e.g. 4MiB, 512KiB); implies "
              "--partition auto.")
@click.option("--partition-mode", type=click.Choice(["overlap", "exchange"]), default="overlap", show_default=True,
              help="overlap: blocks read their halo and recompute it; exchange: per-layer halo exchange.")
@_handle_errors
def compile_cmd(model, out_dir, io_type, reuse, part, clock_period, project_name, tb_samples, force, grid_text,
                onchip_budget, partition_mode):
    """Compile a QONNX/QCDQ MODEL into a complete Vitis HLS project."""
    from .emit import write_project
    from .frontend import compile_ir
    from .lower.hls4ml_lower import HlsOptions

    t0 = time.perf_counter()
    opts = HlsOptions(io_type=f"io_{io_type}", reuse=1 if reuse == "auto" else reuse, part=part, clock_period=clock_period,
                      project_name=project_name)
    with console.status("reading and typing the model"):
        graph = compile_ir(model)
    if reuse == "auto":
        opts = auto_reuse(graph, opts)
    if grid_text == "auto" and onchip_budget is None:
        # the performance model's chooser: the block grid (if any) that fits --part
        import numpy as np

        from .estimate.chooser import choose_design
        from .estimate.parts import get_part

        with console.status(f"choosing a block grid for {part} (estimates)"):
            design = choose_design(graph, get_part(part), opts.io_type, partition="auto")
        if design.grid is None or int(np.prod(design.grid)) == 1:
            out.print(f"the unpartitioned design fits {part} (estimate): compiling without blocks")
            grid_text = None
        else:
            grid_text = "x".join(map(str, design.grid))
            out.print(f"estimate: {grid_text} blocks fit {part}")
    if grid_text is None and onchip_budget is None:
        with console.status(f"writing the HLS project ({opts.io_type}) with hls4ml"):
            prj = write_project(graph, model, out_dir, opts, tb_samples=tb_samples, force=force)
        out.print(f"compiled {model} -> {prj} ({len(graph.nodes)} ops, {opts.io_type}, reuse {reuse}) in "
                  f"{time.perf_counter() - t0:.1f} s")
        return
    prj, info = _compile_partitioned(graph, model, out_dir, opts, grid_text, onchip_budget, partition_mode, force)
    out.print(f"compiled {model} -> {prj}: {'x'.join(map(str, info['grid']))} blocks ({partition_mode}), "
              f"{len(info['kernels'])} block kernels, tail: {info['tail'] or 'none'}, in {time.perf_counter() - t0:.1f} s")


def parse_bytes(text: str) -> int:
    """'4MiB', '512 KiB', '2GB', '1e6' -> bytes."""
    import re

    m = re.fullmatch(r"\s*([0-9.eE+]+)\s*([KMGT]?)(i?)B?\s*", text or "")
    if not m:
        raise click.UsageError(f"cannot read '{text}' as a number of bytes (e.g. 4MiB, 512KiB, 1e6)")
    base = 1024 if m.group(3) or not m.group(2) else 1000
    return int(float(m.group(1)) * base ** "_KMGT".index(m.group(2) or "_"))


def _compile_partitioned(graph, model, out_dir, opts, grid_text, onchip_budget, mode, force):
    from .partition.plan import grid_for_budget
    from .emit import read_manifest
    from .partition.project import write_partitioned_project
    from .partition.runtime import Partition, parse_grid

    with console.status("planning the partition"):
        if grid_text in (None, "auto"):
            grid = grid_for_budget(graph, parse_bytes(onchip_budget), mode).grid
        else:
            grid = parse_grid(grid_text)
        part = Partition.plan(graph, grid, mode)
        report = part.report()
    if onchip_budget is not None and report.max_block_bytes > parse_bytes(onchip_budget):
        from .errors import UnsupportedModelError

        raise UnsupportedModelError(f"{'x'.join(map(str, grid))} blocks need {report.max_block_bytes} bytes, more than "
                                    f"--onchip-budget {onchip_budget}")
    out.print(f"partition {'x'.join(map(str, grid))} ({mode}): cut after '{part.cut}', redundant compute "
              f"{100 * report.redundant_fraction:.1f} %, halo {report.halo_bytes:,} bytes, largest block "
              f"{report.max_block_bytes:,} bytes")
    n = len(part.block_tasks()) if mode == "overlap" else len(part.layer_graphs())
    with _progress() as p:
        task = p.add_task("writing block kernels", total=n)
        prj = write_partitioned_project(graph, model, out_dir, opts, part, force=force,
                                        progress=lambda k: p.advance(task, k))
    return prj, read_manifest(prj)["partition"]


@main.command()
@click.argument("project", type=click.Path(path_type=Path))
@click.option("--input", "input_path", required=True, type=click.Path(path_type=Path), help=".npy of real-valued inputs (N, *shape).")
@click.option("--output", "output_path", required=True, type=click.Path(path_type=Path), help=".npy to write.")
@click.option("--codes", is_flag=True, help="Input and output are integer codes instead of real values.")
@click.option("--workers", type=int, help="Partitioned projects: worker processes running blocks (default: the CPUs).")
@_handle_errors
def emulate(project, input_path, output_path, codes, workers):
    """Run PROJECT's g++ C-simulation on an input array (partitioned projects: every block
    in parallel worker processes, then the tail)."""
    import numpy as np

    from .errors import InputDataError
    from .partition.project import open_sim
    from .partition.runtime import default_workers
    from .verify import load_inputs

    sim = open_sim(project, workers or default_workers())
    if codes:
        try:
            x = np.load(input_path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputDataError(f"cannot read input array {input_path}: {exc}") from None
        if not np.issubdtype(x.dtype, np.integer):
            raise InputDataError(f"{input_path}: --codes needs an integer array, got {x.dtype}")
        lo, hi = sim.manifest["input"]["range"]
        if x.size and (x.min() < lo or x.max() > hi):
            raise InputDataError(f"{input_path}: codes outside the input type's range [{lo}, {hi}]")
    else:
        x = load_inputs(input_path, sim.manifest)
    with console.status("building the C-simulation (g++)"):
        sim.build()
    with _progress() as p:
        total = sim.progress_total(len(x)) if hasattr(sim, "progress_total") else len(x)
        task = p.add_task("emulating" if total == len(x) else f"emulating {len(x)} samples as blocks", total=total)
        y = sim.run_codes(x, progress=lambda k: p.advance(task, k))
    result = y if codes else np.ldexp(y.astype(np.float64), -sim.manifest["output"]["frac"])
    output_path.parent.mkdir(parents=True, exist_ok=True)
    np.save(output_path, result)
    out.print(f"emulated {len(x)} samples -> {output_path}")


@main.command("verify")
@click.argument("model", type=click.Path(path_type=Path))
@click.argument("project", type=click.Path(path_type=Path))
@click.option("--samples", type=int, default=1000, show_default=True, help="Random inputs over the full input type range.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--data", type=click.Path(path_type=Path), help="Also verify on these real-valued inputs (.npy).")
@click.option("--user-samples", type=int, default=100, show_default=True,
              help="Samples on which the user's exported model is run for the agreement count (0 to skip).")
@click.option("--expected", type=click.Path(path_type=Path),
              help="The training framework's outputs (.npy, real values) on --data: count those that differ from the "
                   "exact reference (e.g. brevitas' float32 rounding); reported, not a failure.")
@click.option("--report", type=click.Path(path_type=Path), help="Write the JSON report here.")
@_handle_errors
def verify_cmd(model, project, samples, seed, data, user_samples, expected, report):
    """Check PROJECT's C-simulation == the exact reference of MODEL on every output."""
    from .verify import verify

    if samples < 0:
        raise click.BadParameter("must be >= 0", param_hint="--samples")
    with _progress() as p:
        task = p.add_task("C-simulation", total=None)
        rep = verify(model, project, samples=samples, seed=seed, data=data, user_samples=user_samples,
                     progress=lambda k: p.advance(task, k), expected=expected)
    if report:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(rep.to_dict(), indent=1))
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
    ok = rep.mismatches == 0 and rep.reference_vs_integer_semantics_mismatches == 0 and rep.testbench.startswith("passed")
    if rep.reference_vs_integer_semantics_mismatches:
        out.print(f"reference vs integer semantics: {rep.reference_vs_integer_semantics_mismatches} mismatches")
    out.print(f"verified: {rep.samples} samples, {rep.outputs} outputs, {rep.mismatches} mismatches")
    if not ok:
        sys.exit(EXIT_MISMATCH)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@_handle_errors
def inspect(model, as_json):
    """Show MODEL's ops, fixed-point types, accumulator widths and MACs."""
    from .emit import layer_table
    from .frontend import compile_ir

    graph = compile_ir(model)
    rows = layer_table(graph)
    tin = graph.values[graph.input]
    if as_json:
        out.print_json(json.dumps({"input": {"shape": list(tin.shape), "type": tin.ftype.describe()}, "layers": rows}))
        return
    table = Table(title=f"{model}  (input {tin.shape} {tin.ftype.describe()}, sN.fF = N-bit signed with F fractional bits)")
    for col in ("node", "op", "shape", "type", "hls type", "code range", "MACs"):
        table.add_column(col, justify="right" if col == "MACs" else "left")
    for r, node in zip(rows, graph.nodes):
        table.add_row(r["node"], r["op"], str(tuple(r["shape"])), r["type"], graph.values[node.output].ftype.hls(),
                      f"[{r['range'][0]}, {r['range'][1]}]", f"{r['macs']:,}")
    out.print(table)
    out.print(f"total MACs per sample: {sum(r['macs'] for r in rows):,}")


def _train(name: str, out_dir: Path, epochs, seed):
    from ..models.data.cache import DataUnavailable
    from ..models.train import train_model
    from ..models.zoo import ZOO
    from .errors import DataError, UnsupportedModelError

    if name not in ZOO:
        raise UnsupportedModelError(f"unknown model '{name}'; choose one of: {', '.join(ZOO)}")
    try:
        return train_model(name, out_dir, epochs=epochs, seed=seed, progress=console.is_terminal)
    except DataUnavailable as exc:
        raise DataError(str(exc)) from None


@main.command()
def models():
    """List the model zoo."""
    from ..models.zoo import ZOO

    table = Table(title="tessera model zoo")
    for col in ("name", "data", "input", "epochs", "description"):
        table.add_column(col)
    for name, spec in ZOO.items():
        table.add_row(name, spec.dataset, str(tuple(spec.input_shape)), str(spec.epochs), spec.description)
    out.print(table)


CNN3D_MODELS = ("cosmoflow", "cosmoflow-mlperf", "unet3d")


def _distributed(data_parallel: int, spatial: str) -> bool:
    """The distributed trainer runs under torchrun (``WORLD_SIZE`` set) or when a mesh
    larger than one rank is asked for (which then has to come from torchrun)."""
    import os

    from ..training.mesh import parse_grid

    world = data_parallel * parse_grid(spatial).size
    if "WORLD_SIZE" in os.environ:
        return True
    if world > 1:
        raise click.UsageError(f"--data-parallel {data_parallel} --spatial {spatial} needs {world} processes: "
                               f"torchrun --nproc-per-node {world} -m tessera.training train ...")
    return False


@main.command()
@click.argument("name")
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), help="Folder for model.onnx, checkpoint, metrics.")
@click.option("--epochs", type=int, help="Epochs (default: the model's).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--cell", type=click.Choice(["lstm", "gru", "convlstm"]), help="rnn: the recurrent cell.")
@click.option("--weights", type=click.Choice(["fp", "binary", "ternary", "quaternary"]), help="rnn: weight quantization.")
@click.option("--task", type=click.Choice(["sentiment", "moving-digits"]), help="rnn: the task (default from the cell).")
@click.option("--size", type=int, help="3D CNNs: input edge (volume / patch size).")
@click.option("--width", type=float, help="3D CNNs: channel width multiplier.")
@click.option("--data-parallel", "data_parallel", type=int, default=1, show_default=True,
              help="3D CNNs under torchrun: data-parallel replicas.")
@click.option("--spatial", default="1x1x1", show_default=True,
              help="3D CNNs under torchrun: split of each sample along D x H x W (e.g. 2x2x1).")
@click.option("--n-samples", "n_samples", type=int, help="3D CNNs: volumes generated (train + validation).")
@click.option("--batch-size", "batch_size", type=int, help="3D CNNs: global mini-batch.")
@click.option("--lr", type=float, help="3D CNNs: learning rate.")
@click.option("--data-dir", "data_dir", type=click.Path(path_type=Path), help="Distributed: folder of HDF5 samples.")
@click.option("--resume", is_flag=True, help="Distributed: continue from the checkpoint in --output.")
@click.option("--checkpoint-every", "checkpoint_every", type=int, help="Distributed: also checkpoint every N steps.")
@click.option("--collective-timeout", "timeout_s", type=float,
              help="Distributed: seconds a rank waits for the others before the job fails (default 600).")
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), help="Distributed: default nccl with CUDA, else gloo.")
@click.option("--bn-stats", "bn_stats", type=click.Choice(["global", "replica"]),
              help="Distributed: BatchNorm statistics over all ranks (default) or each data replica's spatial group.")
@_handle_errors
def train(name, out_dir, epochs, seed, cell, weights, task, size, width, data_parallel, spatial, n_samples,
          batch_size, lr, data_dir, resume, backend, bn_stats, checkpoint_every, timeout_s):
    """Quantization-aware training, exported to QONNX.

    NAME is a zoo model (see `tessera models`), `rnn` (with --cell and --weights), or one of
    the 3D CNNs cosmoflow, cosmoflow-mlperf, unet3d (with --size/--width).  Under torchrun the
    3D CNNs train data x spatial parallel (--data-parallel, --spatial; docs/training.md).
    """
    from ..models.data.cache import DataUnavailable
    from .errors import DataError

    rnn_opts, cnn_opts = (cell, weights, task), (size, width)
    if name != "rnn" and any(v is not None for v in rnn_opts):
        raise click.UsageError("--cell/--weights/--task apply to `tessera train rnn` only")
    dist_opts = (n_samples, batch_size, lr, data_dir, backend, bn_stats, checkpoint_every, timeout_s)
    if name not in CNN3D_MODELS and (any(v is not None for v in cnn_opts + dist_opts) or resume
                                     or data_parallel != 1 or spatial != "1x1x1"):
        raise click.UsageError(f"--size/--width/--data-parallel/--spatial/... apply to the 3D CNNs "
                               f"({', '.join(CNN3D_MODELS)}) only")
    if name in CNN3D_MODELS and not _distributed(data_parallel, spatial) and \
            (any(v is not None for v in dist_opts) or resume):
        raise click.UsageError("--n-samples/--batch-size/--lr/--data-dir/--resume/--backend/--bn-stats need the distributed "
                               "trainer: launch with torchrun (docs/training.md)")
    try:
        if name == "rnn":
            from ..models.rnn.train import train_rnn_cli

            if cell is None or weights is None:
                raise click.UsageError("`tessera train rnn` needs --cell and --weights")
            train_rnn_cli(cell, weights, task=task, epochs=epochs, seed=seed, output=out_dir, progress=console.is_terminal)
        elif name in CNN3D_MODELS and _distributed(data_parallel, spatial):
            from ..training.mesh import parse_grid
            from ..training.trainer import DistTrainConfig, train_distributed

            cfg = DistTrainConfig(name, out_dir or Path("runs") / name, data=data_parallel, grid=parse_grid(spatial),
                                  epochs=epochs, size=size, width=width, n_samples=n_samples, batch_size=batch_size,
                                  lr=lr, seed=seed, data_dir=data_dir, resume=resume, backend=backend,
                                  bn_stats=bn_stats or "global", checkpoint_every=checkpoint_every,
                                  **({"timeout_s": timeout_s} if timeout_s else {}))
            res = train_distributed(cfg, progress=console.is_terminal)
            if res.metrics:
                out.print(f"trained {name} on {data_parallel} x {spatial} ranks: validation MSE {res.metric:.4f} "
                          f"(train-mean predictor {res.baseline:.4f}) -> {cfg.out_dir}")
        elif name in CNN3D_MODELS:
            from ..models.train3d import train_cnn3d

            res = train_cnn3d(name, out_dir or Path("runs") / name, epochs=epochs, seed=seed, size=size, width=width,
                              progress=console.is_terminal)
            out.print(f"trained {name} -> {res.onnx_path}")
        else:
            res = _train(name, out_dir or Path("runs") / name, epochs, seed)
            out.print(f"trained {name}: test accuracy {res.final_test_accuracy:.4f} in {res.train_seconds:.1f} s -> {res.onnx_path}")
    except DataUnavailable as exc:
        raise DataError(str(exc)) from None


@main.command()
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=Path("runs/demo"), show_default=True)
@click.option("--model", "name", default="digits_cnn_w8a8", show_default=True, help="Zoo model to train and deploy.")
@click.option("--epochs", type=int, help="Training epochs (default: the zoo's).")
@click.option("--io-type", type=click.Choice(["parallel", "stream"]), default="parallel", show_default=True)
@click.option("--samples", type=int, default=1000, show_default=True, help="Random full-range inputs to verify.")
@_handle_errors
def demo(out_dir, name, epochs, io_type, samples):
    """The whole flow on a small default: train, export, compile, emulate, verify."""
    import numpy as np

    from .emit import write_project
    from .frontend import compile_ir
    from .lower.hls4ml_lower import HlsOptions
    from .sim.csim import CSim
    from .verify import load_inputs, verify

    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    console.rule(f"1/4 train {name}")
    res = _train(name, out_dir / "model", epochs, 0)
    out.print(f"trained {name} (quantization-aware, power-of-two scales): test accuracy {res.final_test_accuracy:.4f}")
    console.rule("2/4 compile to an HLS project (hls4ml, Vitis back end)")
    graph = compile_ir(res.onnx_path)
    prj = write_project(graph, res.onnx_path, out_dir / "hls_project", HlsOptions(io_type=f"io_{io_type}"), force=True)
    out.print(f"project: {prj}")
    console.rule("3/4 emulate the real test set in C-simulation (g++)")
    sim = CSim(prj)
    with console.status("building the C-simulation (g++)"):
        sim.build()
    x = load_inputs(res.test_inputs_path, sim.manifest)
    with _progress() as p:
        task = p.add_task("emulating", total=len(x))
        y = sim.run_codes(x, progress=lambda k: p.advance(task, k))
    labels = np.load(res.test_labels_path)
    acc = float(np.mean(np.argmax(y.reshape(len(y), -1), axis=1) == labels))
    out.print(f"C-simulation accuracy on the {len(x)} held-out test samples: {acc:.4f}")
    console.rule("4/4 verify bit-exactly against the onnxruntime reference")
    with _progress() as p:
        task = p.add_task("C-simulation", total=None)
        rep = verify(res.onnx_path, prj, samples=samples, data=res.test_inputs_path, progress=lambda k: p.advance(task, k))
    report = out_dir / "verify_report.json"
    report.write_text(json.dumps({**rep.to_dict(), "csim_test_accuracy": acc}, indent=1))
    out.print(f"testbench (g++): {rep.testbench}")
    out.print(f"report: {report}  ({time.perf_counter() - t0:.0f} s in all)")
    out.print(f"verified: {rep.samples} samples, {rep.outputs} outputs, {rep.mismatches} mismatches")
    if rep.mismatches or rep.reference_vs_integer_semantics_mismatches or not rep.testbench.startswith("passed"):
        sys.exit(EXIT_MISMATCH)


from .estimate.cli import estimate_cmd  # noqa: E402  (registered last: the command module imports this one lazily)
main.add_command(estimate_cmd)
from ..training.plan_cli import calibrate_cmd, plan_group  # noqa: E402  (training performance model)
main.add_command(calibrate_cmd)
main.add_command(plan_group)
