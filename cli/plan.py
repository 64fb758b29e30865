"""``tessera calibrate`` and ``tessera plan train``: the training performance model's
commands (:mod:`tessera.training.perfmodel`, docs/perfmodel.md).  torch is imported by the
commands, so that the compiler's commands start without it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .app import console, handle_errors, main, out, parse_bytes


@main.command("calibrate")
@click.option("--model", default="cosmoflow", show_default=True, type=click.Choice(["cosmoflow", "cosmoflow-mlperf"]),
              help="Model whose layer shapes are measured.")
@click.option("--width", type=float, help="Channel width multiplier (default: the trainer's).")
@click.option("--size", type=int, help="Input edge (default: the trainer's).")
@click.option("--ranks", default="2,4", show_default=True, help="Process counts of the gloo microbenchmarks.")
@click.option("--quick", is_flag=True, help="A few seconds: small sizes, one thread count, 2 processes (tests).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Where the layers run: cuda measures them on the GPU and the transfers on CUDA tensors.")
@click.option("-o", "--out", "out_path", type=click.Path(path_type=Path),
              help="Calibration JSON (default: <cache>/perfmodel/calibration.json).")
@handle_errors
def calibrate_cmd(model, width, size, ranks, quick, device, out_path):
    """Measure this machine for the training performance model: forward + backward of every
    layer shape, an Adam step, the sample reader, gloo point-to-point / all-reduce /
    all-gather latency and bandwidth."""
    from ..training.calibrate import calibrate
    from ..training.perfmodel import default_calibration_path

    try:
        counts = sorted({int(r) for r in ranks.split(",")})
    except ValueError:
        raise click.BadParameter(f"'{ranks}' is not a comma-separated list of process counts") from None
    if any(r < 2 for r in counts):
        raise click.BadParameter("process counts must be >= 2", param_hint="--ranks")
    with console.status("calibrating (microbenchmarks)") as st:
        cal = calibrate(model, width, size, ranks=counts, quick=quick, log=lambda s: st.update(s.strip()),
                        device=device)
    path = cal.save(out_path or default_calibration_path())
    s = cal.meta["seconds"]
    where = f"{cal.meta.get('device_name')}, " if cal.device == "cuda" else ""
    backends = "/".join(sorted(set(cal.meta["comm_backends"].values())))
    out.print(f"calibrated {where}{cal.cores} cores, threads {cal.threads}, {backends} at {', '.join(cal.p2p)} processes "
              f"({s['compute']:.0f} s layers, {s['io']:.0f} s reader, {s['comm']:.0f} s communication) -> {path}")


@main.group("plan")
def plan_group():
    """Plan a run with the performance models."""


@plan_group.command("train")
@click.argument("model", type=click.Choice(["cosmoflow", "cosmoflow-mlperf"]))
@click.option("--ranks", type=int, required=True, help="Processes (data x spatial).")
@click.option("--mem", "mem", help="Memory cap per rank, e.g. 16GiB (default: none).")
@click.option("--batch-size", "batch", type=int, help="Global mini-batch (default: the trainer's).")
@click.option("--size", type=int, help="Input edge (default: the trainer's).")
@click.option("--width", type=float, help="Channel width multiplier (default: the trainer's).")
@click.option("--threads", type=int, help="Threads per rank (default: max(1, cores // ranks)).")
@click.option("--calibration", "cal_path", type=click.Path(path_type=Path),
              help="Calibration JSON (default: <cache>/perfmodel/calibration.json).")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Write every prediction as JSON here.")
@handle_errors
def plan_train(model, ranks, mem, batch, size, width, threads, cal_path, json_path):
    """Choose the data x spatial decomposition of MODEL over RANKS processes: predicted step
    time and memory per rank of every candidate; the fastest that fits --mem."""
    from rich.table import Table

    from ..models.train3d import DEFAULTS
    from ..training.perfmodel import Calibration, choose, default_calibration_path, format_bytes, model_spec

    if ranks < 1:
        raise click.BadParameter("must be >= 1", param_hint="--ranks")
    cap = parse_bytes(mem) if mem else None
    cal = Calibration.load(cal_path or default_calibration_path())
    spec = model_spec(model, width, size)
    batch = batch or int(DEFAULTS[model]["batch_size"])
    plan = choose(cal, spec, ranks, batch, cap, threads)
    table = Table(title=f"{model} {spec.size}^3 width {spec.width:g}, global batch {batch}, {ranks} ranks "
                        f"({cal.cores} cores calibrated)")
    for col in ("data x grid", "threads", "step (s)", "compute", "comm", "I/O", "memory / rank", "fits", ""):
        table.add_column(col, justify="left" if col in ("data x grid", "fits", "") else "right")
    for p in sorted(plan.predictions, key=lambda p: p.step_s):
        table.add_row(p.label, str(p.threads), f"{p.step_s:.3f}", f"{p.compute_s * p.oversubscription:.3f}",
                      f"{p.comm_s:.3f}", f"{p.io_s * p.io_oversubscription:.3f}", format_bytes(p.mem_bytes),
                      "yes" if plan.feasible(p) else "no", "<- chosen" if p is plan.chosen else "")
    out.print(table)
    c = plan.chosen
    shared = "ranks > GPUs" if cal.device == "cuda" else "ranks x threads > cores"
    over = f", compute shared {c.oversubscription:g}x ({shared})" if c.oversubscription > 1 else ""
    out.print(f"chosen: --data-parallel {c.data} --spatial {c.grid} (torchrun --nproc-per-node {ranks}): "
              f"predicted {c.step_s:.3f} s/step, {format_bytes(c.mem_bytes)} per rank{over}")
    if json_path:
        Path(json_path).write_text(json.dumps({
            "model": model, "size": spec.size, "width": spec.width, "batch": batch, "ranks": ranks,
            "mem_cap": cap, "chosen": c.label, "predictions": [p.to_dict() for p in plan.predictions]}, indent=1))
