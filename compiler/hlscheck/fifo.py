"""Bounded-FIFO C-simulation: the io_stream design's FIFOs at their declared depths, its
layers running concurrently, as in hardware.

hls4ml's C-simulation calls the layers of the top function's DATAFLOW region one after the
other over unbounded ``hls::stream``s, so a FIFO too shallow for the design (a skip
connection whose FIFO fills while the other branch is still waiting for input) passes
C-simulation and deadlocks on the FPGA.  This check:

1. rewrites the top function (:func:`bounded_top`): every ``#pragma HLS STREAM
   variable=X depth=N`` gives stream ``X`` its depth ``N`` (or the depth a caller imposes,
   :func:`fifo_check`'s ``depths``), and every layer call becomes one process (thread) of
   the region, all started together at its end and joined;
2. compiles it against ``hls_templates/sim/tessera_bounded_stream.h`` (installed as
   ``hls_stream.h`` ahead of ap_types', which are seen as the C-simulation build sees them:
   :mod:`..sim.aptypes`): blocking reads and writes, bounded FIFOs, and a
   deadlock detector (every process of the region waiting);
3. runs the project's testbench on its first samples: outputs still compared with ``==``,
   a deadlock reported with the full FIFOs' names and depths, and each FIFO's peak
   occupancy (the depth the design needed on those samples).

io_parallel designs have no FIFOs: the check says so and passes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ...hls_templates import path as template_path
from ..errors import ProjectError
from ..ops import IoType
from ..project import Manifest
from ..sim.aptypes import VIEW_FLAG, derive_view
from ..sim.build import BASE_FLAGS, STACK_LIMIT, last_error_line, require_gxx

#: Where the check's sources and executable live inside the project.
FIFO_DIR = ".csim/fifo"
#: hls4ml's marker before the layer instantiations of the top function.
LAYERS_MARKER = "// hls-fpga-machine-learning insert layers"
STREAM_PRAGMA = re.compile(r"^(\s*)#pragma\s+HLS\s+STREAM\s+variable\s*=\s*(\w+)\s+depth\s*=\s*(\d+)\s*$")
LAYER_CALL = re.compile(r"^(\s*)((?:\w+::)*\w+\s*(?:<[^;]*>)?\s*\(.*\)\s*;)\s*(//.*)?$")
#: Samples of the testbench the check runs (a deadlock shows on the first sample).
DEFAULT_SAMPLES = 2
FLAGS = ("-O1", "-pthread", *(f for f in BASE_FLAGS if not f.startswith("-DWEIGHTS_DIR")),
         '-DWEIGHTS_DIR="firmware/weights"')


@dataclass(frozen=True)
class FifoPeak:
    name: str
    depth: int
    peak: int


@dataclass
class FifoReport:
    applicable: bool
    ok: bool
    seconds: float = 0.0
    samples: int = 0
    deadlock: tuple[str, ...] = ()  # the full FIFOs, "name (depth N)"
    peaks: list[FifoPeak] = field(default_factory=list)
    detail: str = ""

    def line(self) -> str:
        if not self.applicable:
            return "bounded FIFOs: none (io_parallel)"
        if self.ok:
            return (f"bounded FIFOs: {len(self.peaks)} FIFOs at their declared depths, {self.samples} "
                    f"sample{'s' if self.samples != 1 else ''} exact, no deadlock ({self.seconds:.1f} s)")
        if self.deadlock:
            return f"bounded FIFOs: deadlock, full FIFO {', '.join(self.deadlock)}"
        return f"bounded FIFOs: {self.detail}"


def bounded_top(source: str, depths: dict[str, int] | None = None) -> tuple[str, dict[str, int]]:
    """The top function with its FIFOs bounded and its layers as concurrent processes;
    also the depth of every bounded FIFO.  ``depths`` overrides declared depths by name."""
    depths = dict(depths or {})
    lines = source.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == LAYERS_MARKER)
    except StopIteration:
        raise ProjectError(f"the top function has no '{LAYERS_MARKER}' line: not an hls4ml project") from None
    end = max(i for i, ln in enumerate(lines) if ln.strip() == "}")
    out, bounded = lines[:start + 1] + ["    tessera_fifo::Region tessera_dataflow;"], {}
    for ln in lines[start + 1:end]:
        m = STREAM_PRAGMA.match(ln)
        call = LAYER_CALL.match(ln)
        if m:
            depth = depths.pop(m.group(2), int(m.group(3)))
            bounded[m.group(2)] = depth
            out += [ln, f"{m.group(1)}{m.group(2)}.tessera_bound({depth});"]
        elif call and not ln.lstrip().startswith(("hls::stream", "return")):
            out.append(f"{call.group(1)}tessera_dataflow.add([&]() {{ {call.group(2)} }});  {call.group(3) or ''}")
        else:
            out.append(ln)
    if depths:
        raise ProjectError(f"no FIFO named {', '.join(sorted(depths))} in the top function "
                           f"(its FIFOs: {', '.join(bounded) or 'none'})")
    out += ["    tessera_dataflow.run();", *lines[end:]]
    return "\n".join(out) + "\n", bounded


def _compile(gxx: str, prj: Path, src: str, obj: str) -> None:
    res = subprocess.run([gxx, f"-I{FIFO_DIR}", VIEW_FLAG, *FLAGS, "-c", src, "-o", obj], cwd=prj, capture_output=True,
                         text=True)
    if res.returncode != 0:
        raise ProjectError(f"bounded-FIFO build of {src} failed: {last_error_line(res.stderr)}")


def fifo_check(prj: str | Path, samples: int = DEFAULT_SAMPLES, depths: dict[str, int] | None = None,
               timeout: float = 900.0) -> FifoReport:
    """Run the project's testbench on its first ``samples`` samples with bounded FIFOs and
    concurrent layers (see the module's docstring)."""
    prj = Path(prj).resolve()
    options = Manifest.read(prj).options
    if options.io_type != IoType.STREAM:
        return FifoReport(applicable=False, ok=True)
    t0 = time.perf_counter()
    name = options.project_name
    work = prj / FIFO_DIR
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copyfile(template_path("sim/tessera_bounded_stream.h"), work / "hls_stream.h")
    top, bounded = bounded_top((prj / "firmware" / f"{name}.cpp").read_text(), depths)
    (work / f"{name}_bounded.cpp").write_text(top)
    for kind in ("input", "expected"):
        rows = (prj / "tb_data" / f"tessera_{kind}_codes.txt").read_text().splitlines()[:samples]
        (work / f"{kind}.txt").write_text("\n".join(rows) + "\n")
    gxx = require_gxx()
    derive_view(prj)  # ap_types as the C-simulation build sees them
    units = [(f"{FIFO_DIR}/{name}_bounded.cpp", f"{FIFO_DIR}/top.o"), ("tessera_tb.cpp", f"{FIFO_DIR}/tb.o")]
    with ThreadPoolExecutor(len(units)) as pool:
        list(pool.map(lambda u: _compile(gxx, prj, *u), units))
    exe = f"{FIFO_DIR}/tessera_fifo_tb"
    res = subprocess.run([gxx, "-pthread", *(o for _, o in units), "-o", exe], cwd=prj, capture_output=True, text=True)
    if res.returncode != 0:
        raise ProjectError(f"bounded-FIFO link failed: {last_error_line(res.stderr)}")
    try:
        run = subprocess.run(["bash", "-c", f"{STACK_LIMIT}./{exe} {FIFO_DIR}/input.txt {FIFO_DIR}/expected.txt"],
                             cwd=prj, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return FifoReport(True, False, round(time.perf_counter() - t0, 2), samples,
                          detail=f"no result after {timeout:.0f} s")
    text = run.stdout + run.stderr
    peaks = [FifoPeak(m.group(1), int(m.group(2)), int(m.group(3)))
             for m in re.finditer(r"tessera-fifo: FIFO (\w+) depth (\d+) peak (\d+)", text)]
    full = tuple(f"{m.group(1)} (depth {m.group(2)})" for m in re.finditer(r"full FIFO (\w+) depth (\d+)", text))
    report = FifoReport(True, run.returncode == 0, round(time.perf_counter() - t0, 2), samples, full, peaks)
    if run.returncode != 0 and not full:
        report.detail = last_error_line(text) if text.strip() else f"testbench exited {run.returncode}"
    missing = set(bounded) - {p.name for p in peaks}
    if report.ok and missing:
        report.ok, report.detail = False, f"FIFO {sorted(missing)[0]} was never used"
    return report


__all__ = ["DEFAULT_SAMPLES", "FifoPeak", "FifoReport", "bounded_top", "fifo_check"]
