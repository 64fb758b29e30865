"""The compiler's API: what the ``tessera`` command, the benchmarks and the tests call.

- :func:`load_model`: read, clean, import and type a QONNX / QCDQ file (the typed IR);
- :func:`compile_model`: a complete Vitis HLS project from a model file (unpartitioned, or
  as spatial blocks), with :func:`hls_options`, :func:`choose_grid` and :func:`plan_partition`
  as its steps for callers that report progress between them;
- :func:`emulate`: a project's g++ C-simulation on real-valued inputs or integer codes;
- :func:`verify_project`: C-simulation == the exact reference on every output
  (:class:`~.verify.VerifyReport`).

Every failure a user can cause is a :class:`~.errors.TesseraError` with a one-line message.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .errors import InputDataError, UnsupportedModelError
from .frontend import compile_ir
from .ir.graph import Graph
from .lower.hls4ml_lower import HlsOptions
from .ops import IoType
from .partition import Partition, grid_for_budget, parse_grid
from .verify import VerifyReport, quantize_inputs, read_array, verify
from .writer import layer_table, read_manifest, real_outputs, write_project

PathLike = str | Path


def load_model(path: PathLike, input_type: str | None = None) -> Graph:
    """The typed IR of a model file (every failure a one-line error naming the node);
    ``input_type``: the declared type of a float input no Quant reads (e.g. ``fixed<16,6>``)."""
    return compile_ir(path, input_type)


#: Share of the part's flip-flops io_parallel's completely partitioned arrays may take (the
#: estimator's default utilization): more is refused (lower/arrays.py).
REGISTER_UTILIZATION = 0.8


def hls_options(graph: Graph, io_type: IoType | str = IoType.PARALLEL, reuse: int | str = 1, part: str = "xcu250",
                clock_period: float = 5.0, project_name: str = "tessera_model") -> HlsOptions:
    """hls4ml options; ``reuse='auto'``: per-layer reuse factors from the estimator's chooser
    for ``part`` (the unpartitioned design, docs/estimate.md).  For a catalogue part the
    design-size guard (lower/arrays.py) counts io_parallel's register arrays against its
    flip-flops."""
    from .estimate.parts import PARTS as CATALOGUE, get_part

    known = part.lower() in CATALOGUE or any(part.lower() == p.name.lower() for p in CATALOGUE.values())
    opts = HlsOptions(io_type=io_type, reuse=1 if reuse == "auto" else int(reuse), part=part, clock_period=clock_period,
                      project_name=project_name,
                      register_bits=int(get_part(part).ff * REGISTER_UTILIZATION) if known else None)
    if reuse == "auto":
        from .estimate.chooser import choose_reuse

        opts = dataclasses.replace(opts, layer_reuse=choose_reuse(graph, opts.part, opts.io_type,
                                                                  clock_ns=opts.clock_period))
    return opts


def choose_grid(graph: Graph, part: str, io_type: IoType | str = IoType.PARALLEL) -> tuple[int, ...] | None:
    """The block grid the performance model's chooser picks for ``part`` (None: the
    unpartitioned design fits, or nothing can be partitioned)."""
    from .estimate.chooser import choose_design
    from .estimate.parts import get_part

    design = choose_design(graph, get_part(part), str(IoType(io_type)), partition="auto")
    if design.grid is None or int(np.prod(design.grid)) == 1:
        return None
    return tuple(design.grid)


def plan_partition(graph: Graph, grid: tuple[int, ...] | str | None = None, mode: str = "overlap",
                   onchip_budget: int | None = None) -> Partition:
    """The partitioned schedule of ``graph``: on ``grid`` (``AxBxC`` or a tuple), or the
    fewest blocks whose working set fits ``onchip_budget`` bytes."""
    if grid in (None, "auto"):
        if onchip_budget is None:
            raise UnsupportedModelError("a partition needs a block grid or an on-chip budget")
        grid = grid_for_budget(graph, onchip_budget, mode).grid
    elif isinstance(grid, str):
        grid = parse_grid(grid)
    part = Partition.plan(graph, tuple(grid), mode)
    report = part.report()
    if onchip_budget is not None and report.max_block_bytes > onchip_budget:
        raise UnsupportedModelError(f"{'x'.join(map(str, part.grid))} blocks need {report.max_block_bytes} bytes, more "
                                    f"than the on-chip budget of {onchip_budget}")
    return part


@dataclass
class CompileResult:
    project: Path
    graph: Graph
    options: HlsOptions
    partition: Partition | None
    seconds: float


#: Reference samples the testbench checks: the project's, and each kernel's of a partitioned one.
TB_SAMPLES, TB_SAMPLES_PER_KERNEL = 64, 4
#: ... by default at most this many input values in all (at least 4 samples): the testbench's
#: text files of a 32^3 x 4 volume are 1.5 MB a sample, and `verify` runs thousands anyway.
TB_VALUES = 1 << 20


def default_tb_samples(graph: Graph) -> int:
    """The testbench's reference samples when not given: :data:`TB_SAMPLES`, fewer for large inputs."""
    return int(min(TB_SAMPLES, max(4, TB_VALUES // graph.values[graph.input].size)))


def write(graph: Graph, model: PathLike, out_dir: PathLike, opts: HlsOptions, partition: Partition | None = None,
          tb_samples: int | None = None, force: bool = False, progress: Callable[[int], None] | None = None) -> Path:
    """Write the project of ``graph`` (as the blocks of ``partition`` when given; ``progress(k)``
    after each block kernel)."""
    if partition is None:
        return write_project(graph, model, out_dir, opts, tb_samples=tb_samples or default_tb_samples(graph), force=force)
    from .partition.project import write_partitioned_project

    return write_partitioned_project(graph, model, out_dir, opts, partition, tb_samples=tb_samples or TB_SAMPLES_PER_KERNEL,
                                     force=force, progress=progress)


def compile_model(model: PathLike, out_dir: PathLike, *, io_type: IoType | str = IoType.PARALLEL,
                  reuse: int | str = 1, part: str = "xcu250", clock_period: float = 5.0,
                  project_name: str = "tessera_model", tb_samples: int | None = None, force: bool = False,
                  grid: tuple[int, ...] | str | None = None, partition_mode: str = "overlap",
                  onchip_budget: int | None = None, progress: Callable[[int], None] | None = None,
                  input_type: str | None = None) -> CompileResult:
    """Compile ``model`` into a complete Vitis HLS project at ``out_dir``.

    ``grid``: run the leading 3D segment as blocks (``AxBxC``, a tuple, or ``'auto'``: the
    fewest blocks that fit ``onchip_budget``, or without a budget the performance model's
    grid for ``part``); ``onchip_budget`` alone implies ``'auto'``."""
    t0 = time.perf_counter()
    graph = load_model(model, input_type)
    opts = hls_options(graph, io_type, reuse, part, clock_period, project_name)
    if grid == "auto" and onchip_budget is None:
        grid = choose_grid(graph, part, opts.io_type)
    partition = None
    if grid is not None or onchip_budget is not None:
        partition = plan_partition(graph, grid, partition_mode, onchip_budget)
    prj = write(graph, model, out_dir, opts, partition, tb_samples=tb_samples, force=force, progress=progress)
    return CompileResult(prj, graph, opts, partition, time.perf_counter() - t0)


def notices(project: PathLike) -> list[str]:
    """The compile's notices recorded in a project (a partitioned one: its kernels' and tail's)."""
    m = read_manifest(project)
    part = m.get("partition")
    if not part:
        return list(m.get("notices", []))
    folders = [*part["kernels"].values(), *([part["tail"]] if part["tail"] else [])]
    found = [n for f in folders for n in read_manifest(Path(project) / f).get("notices", [])]
    return list(dict.fromkeys(found))


def _simulation(project: PathLike, workers: int | None):
    from .partition import default_workers
    from .partition.project import open_sim

    return open_sim(project, workers or default_workers())


def input_codes(project: PathLike, inputs: PathLike | np.ndarray, codes: bool = False) -> np.ndarray:
    """The design's input codes: real values (an array or a ``.npy``) through the model's
    input quantizer, or integer codes checked against the input type's range."""
    manifest = read_manifest(project)
    what = "input" if isinstance(inputs, np.ndarray) else str(inputs)
    x = inputs if isinstance(inputs, np.ndarray) else read_array(inputs)
    if not codes:
        return quantize_inputs(x, manifest, what)
    if not np.issubdtype(x.dtype, np.integer):
        raise InputDataError(f"{what}: --codes needs an integer array, got {x.dtype}")
    lo, hi = manifest["input"]["range"]
    if x.size and (x.min() < lo or x.max() > hi):
        raise InputDataError(f"{what}: codes outside the input type's range [{lo}, {hi}]")
    return x


def emulate(project: PathLike, inputs: PathLike | np.ndarray, *, codes: bool = False, workers: int | None = None,
            progress: Callable[[int], None] | None = None, sim=None) -> np.ndarray:
    """The project's g++ C-simulation on ``inputs`` (partitioned projects: every block in
    ``workers`` processes, then the tail).  Real-valued outputs, or codes with ``codes``."""
    sim = sim or _simulation(project, workers)
    x = input_codes(project, inputs, codes)
    sim.build()
    y = sim.run_codes(x, progress=progress)
    return y if codes else real_outputs(sim.manifest["output"], y)


def progress_total(project: PathLike, n_samples: int, sim=None) -> int:
    """What :func:`emulate` reports progress in for ``n_samples`` (samples, or block runs)."""
    sim = sim or _simulation(project, None)
    return sim.progress_total(n_samples) if hasattr(sim, "progress_total") else n_samples


def verify_project(model: PathLike, project: PathLike, *, samples: int = 1000, seed: int = 0,
                   data: PathLike | None = None, user_samples: int = 100, expected: PathLike | None = None,
                   progress: Callable[[int], None] | None = None, require_independent: bool = False,
                   oracle: Callable[[np.ndarray], np.ndarray] | None = None, oracle_name: str | None = None,
                   progress_total: Callable[[int], None] | None = None) -> VerifyReport:
    """The project's C-simulation against the exact reference of ``model`` on ``samples``
    random full-range inputs (and the real inputs of ``data``), and the exact reference
    against ``model`` itself run by an independent executor: every output compared
    (``VerifyReport.passed``).  Recurrent cells have no ONNX executor: ``oracle`` (real inputs
    -> real outputs, e.g. brevitas' forward of the trained module) is theirs on every sample,
    or ``expected`` (the framework's outputs on ``data``) on the real inputs."""
    return verify(model, project, samples=samples, seed=seed, data=data, user_samples=user_samples, progress=progress,
                  expected=expected, require_independent=require_independent, oracle=oracle, oracle_name=oracle_name,
                  progress_total=progress_total)


def simulation(project: PathLike, workers: int | None = None):
    """The C-simulation of a project (``build()``, ``run_codes``), partitioned or not."""
    return _simulation(project, workers)


__all__ = ["CompileResult", "REGISTER_UTILIZATION", "TB_SAMPLES", "TB_SAMPLES_PER_KERNEL", "TB_VALUES", "VerifyReport", "choose_grid", "compile_model", "notices",
           "default_tb_samples", "emulate", "hls_options", "input_codes", "real_outputs", "layer_table", "load_model", "plan_partition", "progress_total", "read_manifest",
           "simulation", "verify_project", "write"]
