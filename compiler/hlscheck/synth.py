"""The firmware as Vitis HLS compiles it: the ``__SYNTHESIS__`` branch, with g++ alone.

C-simulation compiles every ``#ifndef __SYNTHESIS__`` branch of hls4ml's and our code (weight
loading, printing) and never the synthesis side.  The open-source ap_types refuse
``__SYNTHESIS__`` outright (their headers ``#error`` on it), but including ``ap_fixed.h``,
``ap_int.h`` and ``hls_stream.h`` first and then defining ``__SYNTHESIS__`` before the
firmware keeps them (their include guards hold) and compiles every other header the way
Vitis HLS sees it.  :func:`synthesis_syntax` runs that translation unit through
``g++ -fsyntax-only``; :func:`synthesis_view` preprocesses it (with line markers) for the
lint of :mod:`.lint`.  A project with more weight values than g++ can hold in memory has
its largest arrays compiled with their first values (:mod:`.weights`, which reads every value).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ...hls_templates import Fields, render
from ..errors import ProjectError
from ..sim.build import BASE_FLAGS, require_gxx
from ..project import Manifest
from .weights import WeightArray, read_arrays, stand_ins

#: The translation unit, inside the project (beside the C-simulation's own units).
UNIT = ".csim/synthesis_view.cpp"
#: The stand-ins of the largest weight arrays, included by the unit before the firmware.
WEIGHTS_UNIT = ".csim/synthesis_weights.h"
#: g++ flags of the check: the C-simulation's language and include paths, no weights macro.
FLAGS = tuple(f for f in BASE_FLAGS if not f.startswith("-D") and f not in ("-fPIC", "-fno-gnu-unique"))


@dataclass(frozen=True)
class SyntaxReport:
    ok: bool
    seconds: float
    errors: tuple[str, ...]  # g++'s error lines (file:line: error: ...), at most 20

    def line(self) -> str:
        if self.ok:
            return f"synthesis branch compiles (g++ -fsyntax-only with __SYNTHESIS__, {self.seconds:.1f} s)"
        return f"synthesis branch does not compile: {self.errors[0] if self.errors else '(no message)'}"


@dataclass(frozen=True)
class SynthesisView(Fields):
    """The unit `tessera check` compiles as Vitis HLS would: the project's firmware after the
    weights file that stands in for its largest arrays."""

    template: ClassVar[str] = "sim/tessera_synthesis_view.cpp.tpl"
    project: str
    weights: str


def write_unit(prj: str | Path, arrays: list[WeightArray] | None = None) -> Path:
    """The synthesis translation unit of project ``prj`` (written, its path returned);
    ``arrays``: its weight arrays when the caller has read them."""
    prj = Path(prj)
    name = Manifest.read(prj).options.project_name
    unit = prj / UNIT
    unit.parent.mkdir(exist_ok=True)
    (prj / WEIGHTS_UNIT).write_text(stand_ins(read_arrays(prj) if arrays is None else arrays))
    unit.write_text(render(SynthesisView(project=name, weights=Path(WEIGHTS_UNIT).name)))
    return unit


def _gxx(prj: Path, *args: str, arrays: list[WeightArray] | None = None) -> subprocess.CompletedProcess:
    unit = write_unit(prj, arrays)
    return subprocess.run([require_gxx(), *FLAGS, *args, str(unit.relative_to(prj))], cwd=prj,
                          capture_output=True, text=True)


def synthesis_syntax(prj: str | Path, arrays: list[WeightArray] | None = None) -> SyntaxReport:
    """``g++ -fsyntax-only`` of the project's firmware with ``__SYNTHESIS__`` defined."""
    t0 = time.perf_counter()
    res = _gxx(Path(prj), "-fsyntax-only", arrays=arrays)
    errors = tuple(ln.strip() for ln in res.stderr.splitlines() if ": error:" in ln)[:20]
    if res.returncode != 0 and not errors:
        errors = tuple(res.stderr.strip().splitlines()[:1]) or (f"g++ exited {res.returncode}",)
    return SyntaxReport(res.returncode == 0, round(time.perf_counter() - t0, 2), errors)


def synthesis_view(prj: str | Path, arrays: list[WeightArray] | None = None) -> str:
    """The preprocessed synthesis unit (``g++ -E``, line markers kept)."""
    res = _gxx(Path(prj), "-E", arrays=arrays)
    if res.returncode != 0:
        err = [ln for ln in res.stderr.splitlines() if "error" in ln] or res.stderr.splitlines()[:1]
        raise ProjectError(f"preprocessing the synthesis view of {prj} failed: {err[0] if err else res.returncode}")
    return res.stdout


__all__ = ["FLAGS", "SyntaxReport", "SynthesisView", "UNIT", "WEIGHTS_UNIT", "synthesis_syntax", "synthesis_view",
           "write_unit"]
