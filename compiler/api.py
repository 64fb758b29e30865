"""The compiler's API: what the ``tessera`` command, the benchmarks and the tests call.

- :func:`load_model`: read, clean, import and type a QONNX / QCDQ file (the typed IR);
- :func:`compile_model`: a complete Vitis HLS project from a model file (unpartitioned, or
  as spatial blocks) with :class:`CompileOptions`; an :class:`~.observer.Observer` sees its
  stages and notices (the command draws them); :func:`write` is its last step, for callers
  that time the steps apart;
- :func:`emulate`: a project's g++ C-simulation on real-valued inputs or integer codes;
- :func:`verify_project`: C-simulation == the exact reference on every output, and the
  reference == the user's file (:class:`~.verdict.VerifyOptions`, :class:`~.verdict.VerifyReport`).

Every failure a user can cause is a :class:`~.errors.TesseraError` with a one-line message.
The frontend, the writer, the verifier (onnx, qonnx, hls4ml) are imported by the functions
that use them: a caller that only emulates never loads them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import UnsupportedModelError
from .lower.hls4ml_lower import HlsOptions
from .observer import SILENT, Observer
from .ops import IoType
from .project import MANIFEST, Manifest
from .samples import read_inputs
from .verdict import Oracle, VerifyOptions, VerifyReport

if TYPE_CHECKING:
    from .ir.graph import Graph
    from .partition import Partition

PathLike = str | Path

#: ``CompileOptions.reuse``: per-layer reuse factors from the estimator's chooser for the part.
REUSE_AUTO = "auto"
#: ``CompileOptions.grid``: the fewest blocks that fit the on-chip budget, or without one the
#: performance model's grid for the part.
GRID_AUTO = "auto"
#: Reference samples the testbench checks: the project's, and each kernel's of a partitioned one.
TB_SAMPLES, TB_SAMPLES_PER_KERNEL = 64, 4
#: ... by default at most this many input values in all (at least 4 samples): the testbench's
#: text files of a 32^3 x 4 volume are 1.5 MB a sample, and `verify` runs thousands anyway.
TB_VALUES = 1 << 20
#: Share of the part's flip-flops io_parallel's completely partitioned arrays may take (the
#: estimator's default utilization): more is refused (lower/arrays.py).
REGISTER_UTILIZATION = 0.8
#: ``CompileOptions.backend``: an HLS project through hls4ml (the default), or Verilog.
BACKEND_HLS, BACKEND_RTL = "hls", "rtl"
#: ``CompileOptions.pipeline``: the RTL back end's adder delays between pipeline registers
#: (da4ml's latency cutoff): fewer, a higher clock for more registers and cycles.
PIPELINE = 2


@dataclass(frozen=True)
class CompileOptions:
    """What :func:`compile_model` builds: hls4ml's io type, reuse factor (or
    :data:`REUSE_AUTO`), part, clock and project name; the testbench's reference samples
    (None: :func:`default_tb_samples`); whether a non-empty output folder is replaced; the
    block grid of a 3D CNN (``AxBxC``, a tuple, :data:`GRID_AUTO`, or None: unpartitioned),
    its mode and on-chip budget in bytes (a budget alone implies :data:`GRID_AUTO`); the
    declared type of a float input no Quant reads (e.g. ``fixed<16,6>``); the back end
    (:data:`BACKEND_HLS`, or :data:`BACKEND_RTL`: Verilog of a fully unrolled design, with
    ``pipeline`` adder delays per stage)."""

    io_type: IoType | str = IoType.PARALLEL
    reuse: int | str = 1
    part: str = "xcu250"
    clock_period: float = 5.0
    project_name: str = "tessera_model"
    tb_samples: int | None = None
    force: bool = False
    grid: tuple[int, ...] | str | None = None
    partition_mode: str = "overlap"
    onchip_budget: int | None = None
    input_type: str | None = None
    backend: str = BACKEND_HLS
    pipeline: int = PIPELINE


def load_model(path: PathLike, input_type: str | None = None) -> Graph:
    """The typed IR of a model file (every failure a one-line error naming the node);
    ``input_type``: the declared type of a float input no Quant reads (e.g. ``fixed<16,6>``)."""
    from .pipeline import compile_ir

    return compile_ir(path, input_type)


def layer_table(graph: Graph) -> list[dict]:
    """Every node's row as ``tessera inspect`` prints it (:func:`.writer.layer_table`)."""
    from .writer import layer_table as rows

    return rows(graph)


def hls_options(graph: Graph, options: CompileOptions = CompileOptions()) -> HlsOptions:
    """hls4ml options; reuse :data:`REUSE_AUTO`: per-layer reuse factors from the estimator's
    chooser for the part (the unpartitioned design, docs/estimate.md).  For a catalogue part
    the design-size guard (lower/arrays.py) counts io_parallel's register arrays against its
    flip-flops."""
    from .estimate.parts import PARTS as CATALOGUE, get_part

    part = options.part
    known = part.lower() in CATALOGUE or any(part.lower() == p.name.lower() for p in CATALOGUE.values())
    auto = options.reuse == REUSE_AUTO
    opts = HlsOptions(io_type=options.io_type, reuse=1 if auto else int(options.reuse), part=part,
                      clock_period=options.clock_period, project_name=options.project_name,
                      register_bits=int(get_part(part).ff * REGISTER_UTILIZATION) if known else None)
    if auto:
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
    from .partition import Partition, grid_for_budget, parse_grid

    if grid in (None, GRID_AUTO):
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


@dataclass(frozen=True)
class CompileResult:
    """A compiled project: its folder, the typed IR, hls4ml's options, the partition (None:
    unpartitioned) and the seconds it took."""

    model: Path | None
    project: Path
    graph: Graph
    options: HlsOptions
    partition: Partition | None
    seconds: float

    def summary(self) -> str:
        """The compile's line: what was written where, in how long."""
        rtl = Manifest.read(self.project).rtl
        if rtl is not None:
            return (f"compiled {self.model} -> {self.project} (Verilog, {len(self.graph.nodes)} ops) in "
                    f"{self.seconds:.1f} s; {rtl.line()}")
        if self.partition is None:
            reuse = REUSE_AUTO if self.options.layer_reuse else self.options.reuse
            return (f"compiled {self.model} -> {self.project} ({len(self.graph.nodes)} ops, {self.options.io_type}, "
                    f"reuse {reuse}) in {self.seconds:.1f} s")
        info = Manifest.read(self.project).partition
        return (f"compiled {self.model} -> {self.project}: {'x'.join(map(str, self.partition.grid))} blocks "
                f"({self.partition.mode}), {len(info.kernels)} block kernels, tail: {info.tail or 'none'}, in "
                f"{self.seconds:.1f} s")

    def notices(self) -> list[str]:
        return notices(self.project)


def default_tb_samples(graph: Graph) -> int:
    """The testbench's reference samples when not given: :data:`TB_SAMPLES`, fewer for large inputs."""
    return int(min(TB_SAMPLES, max(4, TB_VALUES // sum(graph.values[v].size for v in graph.inputs))))


def write(graph: Graph, model: PathLike, out_dir: PathLike, options: CompileOptions = CompileOptions(),
          partition: Partition | None = None, observer: Observer = SILENT) -> CompileResult:
    """Write the project of ``graph`` (typed from ``model``) to ``out_dir``: unpartitioned, or
    as the blocks of ``partition`` (the observer sees each block kernel written); then its
    design record and report (``design.json``, ``report.html``: docs/report.md)."""
    t0 = time.perf_counter()
    hls = hls_options(graph, options)
    traced = None
    if options.backend == BACKEND_RTL:
        from .rtl.trace import trace
        from .writer import write_rtl_project

        with observer.stage(f"tracing {len(graph.nodes)} layers into adder graphs (da4ml)"):
            traced = trace(graph)  # kept for the report's estimate (compiler/report/collect.py)
        prj = write_rtl_project(graph, model, out_dir, hls, options.pipeline, options.tb_samples or
                                default_tb_samples(graph), options.force, observer, traced)
    elif partition is None:
        from .writer import write_project

        with observer.stage(f"writing the HLS project ({hls.io_type}) with hls4ml"):
            prj = write_project(graph, model, out_dir, hls, tb_samples=options.tb_samples or default_tb_samples(graph),
                                force=options.force)
    else:
        from .partition.project import write_partitioned_project

        kernels = len(partition.block_tasks()) if partition.mode == "overlap" else len(partition.layer_graphs())
        with observer.progress("writing block kernels", kernels, "kernels") as advance:
            prj = write_partitioned_project(graph, model, out_dir, hls, partition, force=options.force, progress=advance,
                                            tb_samples=options.tb_samples or TB_SAMPLES_PER_KERNEL)
    from .report import record_compile

    record_compile(prj, graph, hls, options.backend, options.pipeline, None if partition is None else tuple(partition.grid),
                   traced)
    return CompileResult(None if model is None else Path(model), prj, graph, hls, partition, time.perf_counter() - t0)


def _partition(graph: Graph, options: CompileOptions, observer: Observer) -> Partition | None:
    """The partition ``options`` ask for (None: unpartitioned), each choice a notice."""
    grid, part = options.grid, options.part
    if (grid is not None or options.onchip_budget is not None) and (len(graph.inputs), len(graph.outputs)) != (1, 1):
        raise UnsupportedModelError(f"a partitioned design has one input and one output; this model has "
                                    f"{len(graph.inputs)} inputs and {len(graph.outputs)} outputs (compile it "
                                    "without --partition / --onchip-budget)")
    if grid == GRID_AUTO and options.onchip_budget is None:
        with observer.stage(f"choosing a block grid for {part} (estimates)"):
            grid = choose_grid(graph, part, options.io_type)
        observer.notice(f"the unpartitioned design fits {part} (estimate): compiling without blocks" if grid is None
                        else f"estimate: {'x'.join(map(str, grid))} blocks fit {part}")
    if grid is None and options.onchip_budget is None:
        return None
    with observer.stage("planning the partition"):
        partition = plan_partition(graph, grid, options.partition_mode, options.onchip_budget)
        report = partition.report()
    observer.notice(f"partition {'x'.join(map(str, partition.grid))} ({partition.mode}): cut after '{partition.cut}', "
                    f"redundant compute {100 * report.redundant_fraction:.1f} %, halo {report.halo_bytes:,} bytes, "
                    f"largest block {report.max_block_bytes:,} bytes")
    return partition


def rtl_option_refusal(options: CompileOptions) -> str | None:
    """Why ``options`` cannot build an RTL project (None: they can)."""
    if options.backend not in (BACKEND_HLS, BACKEND_RTL):
        return f"unknown back end '{options.backend}' (choose {BACKEND_HLS} or {BACKEND_RTL})"
    if options.backend != BACKEND_RTL:
        return None
    if IoType(options.io_type) != IoType.PARALLEL or options.reuse != 1:
        return ("--backend rtl builds fully unrolled designs (io_parallel, reuse 1); --io-type stream and --reuse "
                "are for --backend hls")
    if options.grid is not None or options.onchip_budget is not None:
        return "--backend rtl builds one unpartitioned design; --partition and --onchip-budget are for --backend hls"
    if options.pipeline < 1:
        return f"--pipeline {options.pipeline}: at least one adder delay per stage"
    return None


def compile_model(model: PathLike, out_dir: PathLike, options: CompileOptions = CompileOptions(),
                  observer: Observer = SILENT) -> CompileResult:
    """Compile ``model`` into a complete Vitis HLS project (or, with ``backend`` rtl, a
    Verilog design) at ``out_dir``."""
    why = rtl_option_refusal(options)
    if why is not None:
        raise UnsupportedModelError(why)
    t0 = time.perf_counter()
    with observer.stage("reading and typing the model"):
        graph = load_model(model, options.input_type)
    if graph.constant_outputs:
        observer.notice(f"notice: the model's outputs {', '.join(graph.constant_outputs)} are constants, not computed "
                        "from the input: the design leaves them out")
    if graph.softmax is not None:
        observer.notice(f"notice: the trailing Softmax '{graph.softmax}' is not compiled; the design outputs its logits "
                        "(exactly), which verify compares with the user's model")
    result = write(graph, model, out_dir, options, _partition(graph, options, observer), observer)
    return dataclasses.replace(result, seconds=time.perf_counter() - t0)


def notices(project: PathLike) -> list[str]:
    """The compile's notices recorded in a project (a partitioned one: its kernels' and tail's)."""
    m = Manifest.read(project)
    if m.partition is None:
        return list(m.notices)
    found = [n for f in m.partition.folders() for n in Manifest.read(Path(project) / f).notices]
    return list(dict.fromkeys(found))


def simulation(project: PathLike, workers: int | None = None):
    """The C-simulation of a project (``build()``, ``run_codes``), partitioned or not."""
    from .sim.partitioned import open_sim

    return open_sim(project, workers)


def input_codes(project: PathLike, inputs, codes: bool = False) -> np.ndarray:
    """The design's packed input codes (``ir.graph.pack``) from ``inputs``
    (:func:`~.samples.read_inputs`: an array or ``.npy``; for several inputs a list, a dict by
    input name or an ``.npz``): real values through the model's input quantizers, or integer
    codes checked against each input type's range."""
    manifest = Manifest.read(project)
    arrays, what = read_inputs(inputs, manifest.input.names)
    return manifest.input_codes(arrays, what) if codes else manifest.quantize_inputs(arrays, what)


def emulate(project: PathLike, inputs, *, codes: bool = False, workers: int | None = None,
            observer: Observer = SILENT) -> np.ndarray | list[np.ndarray]:
    """The project's g++ C-simulation (an RTL project's Verilator simulation) on ``inputs`` (:func:`input_codes`; partitioned
    projects: every block in ``workers`` processes, then the tail).  Real-valued outputs, or
    codes with ``codes``: an array, or for several outputs a list in the model's order.  The
    observer sees the build (and its line) and the samples, or block runs, as they finish."""
    sim = simulation(project, workers)
    x = input_codes(project, inputs, codes)
    rtl = sim.manifest.rtl is not None
    with observer.stage("building the RTL simulation (Verilator)" if rtl else "building the C-simulation (g++)"):
        sim.build()
    if getattr(sim, "last_build", None) is not None:
        observer.notice(sim.last_build.line())
    total = sim.progress_total(len(x))
    label, unit = ("emulating", "samples") if total == len(x) else (f"emulating {len(x)} samples as blocks", "blocks")
    with observer.progress(label, total, unit) as advance:
        y = sim.run_codes(x, progress=advance)
    outputs = sim.manifest.output
    y = y if codes else outputs.real(y)
    return y if len(outputs.entries) == 1 else outputs.split(y)


def verify_project(model: PathLike, project: PathLike, options: VerifyOptions = VerifyOptions(),
                   observer: Observer = SILENT) -> VerifyReport:
    """The project's C-simulation against the exact reference of ``model`` and the reference
    against ``model`` itself run by an independent executor, on every output
    (:attr:`~.verdict.VerifyReport.passed`, its :meth:`~.verdict.VerifyReport.verdict`)."""
    from .report import record_verify
    from .verify import verify

    report = verify(model, project, options, observer)
    record_verify(project, report)  # verify.json and report.html
    return report


__all__ = ["BACKEND_HLS", "BACKEND_RTL", "CompileOptions", "CompileResult", "GRID_AUTO", "MANIFEST", "PIPELINE", "Manifest", "Oracle", "REGISTER_UTILIZATION", "REUSE_AUTO",
           "TB_SAMPLES", "TB_SAMPLES_PER_KERNEL", "TB_VALUES", "VerifyOptions", "VerifyReport", "choose_grid",
           "compile_model", "default_tb_samples", "emulate", "hls_options", "input_codes", "layer_table", "load_model",
           "notices", "plan_partition", "rtl_option_refusal", "simulation", "verify_project", "write"]
