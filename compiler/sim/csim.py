"""g++ C-simulation of a generated project, called through hls4ml's C bridge."""

from __future__ import annotations

import hashlib
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..writer import read_manifest
from ..errors import InputDataError, SimulationError, ToolchainError


def require_gxx() -> str:
    gxx = shutil.which("g++")
    if gxx is None:
        raise ToolchainError("g++ not found on PATH: install a C++ compiler (e.g. apt-get install g++) for C-simulation")
    return gxx


def last_error_line(text: str) -> str:
    """The first line of a tool's output that names an error (else its first line), shortened."""
    lines = [ln for ln in text.splitlines() if "error" in ln.lower()] or text.strip().splitlines() or ["(no output)"]
    return lines[0].strip()[:300]


#: Beside the library: the hash of the sources it was built from (``source_hash``).
BUILD_HASH = ".tessera-build.sha256"


def source_hash(prj: Path) -> str:
    """sha256 of everything a project's C-simulation library is built from: ``firmware/``
    (the top function, the kernels, the weights, ap_types), the C bridge and the build
    script.  A library whose recorded hash differs is stale and is rebuilt."""
    files = [p for p in (prj / "firmware").rglob("*") if p.is_file() and p.suffix != ".so" and p.name != BUILD_HASH]
    files += [*prj.glob("*_bridge.cpp"), prj / "build_lib.sh"]
    h = hashlib.sha256()
    for p in sorted(f for f in files if f.is_file()):
        data = p.read_bytes()
        h.update(f"{p.relative_to(prj).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


class _Worker:
    """A child process holding one loaded C-simulation library (``_csim_worker.py``): a
    crash in the C++ code (assert, abort, segmentation fault, stack overflow) becomes a
    :class:`SimulationError` naming the signal and the sample, and the caller lives on."""

    def __init__(self, lib: Path, name: str):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_csim_worker.py")), str(lib), name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, x: np.ndarray, n_out: int, progress=None) -> np.ndarray:
        n = len(x)
        done = 0
        try:
            self.proc.stdin.write(np.array([n, x.shape[1], n_out], dtype=np.int64).tobytes())
            self.proc.stdin.write(np.ascontiguousarray(x, dtype=np.float64).tobytes())
            self.proc.stdin.flush()
            while True:
                b = self.proc.stdout.read(1)
                if b == b".":
                    done += 1
                    if progress is not None:
                        progress(1)
                    continue
                if b != b"!":
                    raise EOFError
                data = self.proc.stdout.read(8 * n * n_out)
                if len(data) != 8 * n * n_out:
                    raise EOFError
                return np.frombuffer(data, dtype=np.float64).reshape(n, n_out).copy()
        except (EOFError, BrokenPipeError, OSError):
            raise self._crashed(done) from None

    def _crashed(self, sample: int) -> SimulationError:
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        last = [ln.strip() for ln in text.splitlines() if ln.strip()]
        detail = f": {last[-1][:300]}" if last else ""
        return SimulationError(f"the C-simulation crashed ({how}) on sample {sample}{detail}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.stderr.close()


class CSim:
    """Builds ``firmware/<project>-*.so`` with the project's build_lib.sh and runs samples."""

    #: the testbench is its own g++ build of the sources (not of the library): it may be
    #: built while the library is
    testbench_uses_library = False

    def __init__(self, prj: str | Path):
        self.prj = Path(prj).resolve()
        self.manifest = read_manifest(self.prj)
        self.name = self.manifest["options"]["project_name"]
        self._proc: _Worker | None = None

    def library(self) -> Path | None:
        libs = sorted((self.prj / "firmware").glob(f"{self.name}-*.so"))
        return libs[-1] if libs else None

    def build(self, rebuild: bool = False) -> Path:
        """The C-simulation library, built when missing, when ``rebuild``, or when any source
        it was built from changed since (``source_hash``): never a stale one."""
        require_gxx()
        lib = self.library()
        stamp = self.prj / "firmware" / BUILD_HASH
        current = source_hash(self.prj)
        if lib is None or rebuild or not stamp.is_file() or stamp.read_text().strip() != current:
            self.close()  # a running child holds the old library
            for old in (self.prj / "firmware").glob(f"{self.name}-*.so"):
                old.unlink()
            stamp.unlink(missing_ok=True)
            res = subprocess.run(["bash", "build_lib.sh"], cwd=self.prj, capture_output=True, text=True)
            lib = self.library()
            if res.returncode != 0 or lib is None:
                raise SimulationError(f"C-simulation build failed in {self.prj}: {last_error_line(res.stderr + res.stdout)}")
            stamp.write_text(current + "\n")
        return lib

    def _worker(self) -> _Worker:
        if self._proc is None or not self._proc.alive():
            self._proc = _Worker(self.build(), self.name)
        return self._proc

    def close(self) -> None:
        """Stop the C-simulation's child process (also done when the object is collected)."""
        if self._proc is not None:
            self._proc.close()
            self._proc = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def run_codes(self, codes: np.ndarray, progress=None) -> np.ndarray:
        """int64 input codes in ONNX layout ``[N, *shape]`` -> int64 output codes, same layout."""
        m = self.manifest
        tin, tout = m["input"], m["output"]
        codes = np.asarray(codes)
        if codes.shape[1:] != tuple(tin["shape"]):
            raise InputDataError(f"input shape {codes.shape[1:]} does not match the model input {tuple(tin['shape'])}")
        n = len(codes)
        x = np.ldexp(codes.reshape(n, -1)[:, tin["perm"]].astype(np.float64), -tin["frac"])
        n_out = int(np.prod(tout["shape"]))
        y = self._worker().run(x, n_out, progress)
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
