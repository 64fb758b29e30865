"""g++ C-simulation of a generated project, called through hls4ml's C bridge."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np

from ..emit import read_manifest
from ..errors import InputDataError, SimulationError, ToolchainError


def require_gxx() -> str:
    gxx = shutil.which("g++")
    if gxx is None:
        raise ToolchainError("g++ not found on PATH: install a C++ compiler (e.g. apt-get install g++) for C-simulation")
    return gxx


def _last_error_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if "error" in ln.lower()] or text.strip().splitlines() or ["(no output)"]
    return lines[0].strip()[:300]


#: Stack of the thread that calls the C-simulation: io_parallel designs keep whole feature
#: maps in local arrays (a 32^3 U-Net overflowed the 8 MiB main-thread stack).  Virtual
#: memory only; pages are touched as the design uses them.
CSIM_STACK_BYTES = 1 << 30


def _run_with_stack(fn, *args):
    """``fn(*args)`` on a thread with a :data:`CSIM_STACK_BYTES` stack; re-raises its error."""
    result: dict = {}

    def target():
        try:
            result["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            result["error"] = exc

    old = threading.stack_size()
    threading.stack_size(CSIM_STACK_BYTES)
    try:
        t = threading.Thread(target=target, name="tessera-csim")
        t.start()
    finally:
        threading.stack_size(old)
    t.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")


class CSim:
    """Builds ``firmware/<project>-*.so`` with the project's build_lib.sh and runs samples."""

    def __init__(self, prj: str | Path):
        self.prj = Path(prj).resolve()
        self.manifest = read_manifest(self.prj)
        self.name = self.manifest["options"]["project_name"]
        self._fn = None

    def library(self) -> Path | None:
        libs = sorted((self.prj / "firmware").glob(f"{self.name}-*.so"))
        return libs[-1] if libs else None

    def build(self, rebuild: bool = False) -> Path:
        require_gxx()
        lib = self.library()
        if lib is None or rebuild:
            res = subprocess.run(["bash", "build_lib.sh"], cwd=self.prj, capture_output=True, text=True)
            lib = self.library()
            if res.returncode != 0 or lib is None:
                raise SimulationError(f"C-simulation build failed in {self.prj}: {_last_error_line(res.stderr + res.stdout)}")
        return lib

    def _function(self):
        if self._fn is None:
            lib = ctypes.cdll.LoadLibrary(str(self.build()))
            fn = getattr(lib, f"{self.name}_double")
            fn.restype = None
            fn.argtypes = [np.ctypeslib.ndpointer(ctypes.c_double, flags="C_CONTIGUOUS")] * 2
            self._fn = fn
        return self._fn

    def run_codes(self, codes: np.ndarray, progress=None) -> np.ndarray:
        """int64 input codes in ONNX layout ``[N, *shape]`` -> int64 output codes, same layout."""
        m = self.manifest
        tin, tout = m["input"], m["output"]
        codes = np.asarray(codes)
        if codes.shape[1:] != tuple(tin["shape"]):
            raise InputDataError(f"input shape {codes.shape[1:]} does not match the model input {tuple(tin['shape'])}")
        fn = self._function()
        n = len(codes)
        x = np.ldexp(codes.reshape(n, -1)[:, tin["perm"]].astype(np.float64), -tin["frac"])
        n_out = int(np.prod(tout["shape"]))
        y = np.zeros((n, n_out), dtype=np.float64)

        def run_all():
            for i in range(n):
                xi = np.ascontiguousarray(x[i])
                yi = np.zeros(n_out, dtype=np.float64)
                fn(xi, yi)
                y[i] = yi
                if progress is not None:
                    progress(1)

        _run_with_stack(run_all)
        scaled = np.ldexp(y, tout["frac"])
        if not np.all(scaled == np.round(scaled)):
            raise SimulationError("C-simulation produced values off the output type's grid")
        out = np.empty((n, n_out), dtype=np.int64)
        out[:, tout["perm"]] = scaled.astype(np.int64)
        return out.reshape(n, *tout["shape"])

    def testbench(self) -> tuple[int, str]:
        """Build and run the project's own g++ testbench; returns (exit status, last line)."""
        require_gxx()
        res = subprocess.run(["bash", "build_tessera_tb.sh"], cwd=self.prj, capture_output=True, text=True)
        text = (res.stdout + res.stderr).strip()
        return res.returncode, text.splitlines()[-1] if text else ""
