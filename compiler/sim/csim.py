"""g++ C-simulation of a generated project: the library :mod:`.build` compiles, run by
persistent worker processes (one per core), each calling the bridge on batches of samples."""

from __future__ import annotations

import mmap
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import SimulationError
from ..project import PACKED_ENTRY, Manifest
from .build import (STACK_LIMIT, TESTBENCH, BuildReport, Builder, last_error_line, library_path, require_gxx,
                    usable_cores)

#: A worker is started for every this many samples of a run, up to ``workers``: a worker
#: costs a process start (~0.2 s), worth it only when it has samples to run.
MIN_SAMPLES_PER_WORKER = 16
#: ... or for every this many seconds of work, as the last run measured it (a 3D volume's
#: samples take tens of milliseconds each: a handful of them is worth another worker).
MIN_SECONDS_PER_WORKER = 0.1


def default_workers() -> int:
    """Worker processes for C-simulations and partitioned runs: the usable cores (at most 8)."""
    return max(1, min(usable_cores(), 8))


class _Worker:
    """A child process holding one loaded C-simulation library (``_csim_worker.py``): a
    crash in the C++ code (assert, abort, segmentation fault, stack overflow) becomes a
    :class:`SimulationError` naming the signal and the sample, and the caller lives on."""

    #: seconds between two readings of the shared progress counter while a request runs
    POLL_S = 0.05

    def __init__(self, lib: Path, name: str):
        self.stderr = tempfile.TemporaryFile()
        fd, self.counter_path = tempfile.mkstemp(prefix="tessera-csim-progress-")
        os.write(fd, bytes(8))
        os.close(fd)
        with open(self.counter_path, "r+b") as f:
            self.shared = mmap.mmap(f.fileno(), 8)
        # one thread each: a library linked with OpenMP or BLAS would spin beside the other workers' cores
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", str(Path(__file__).with_name("_csim_worker.py")),
                                      str(lib), name, self.counter_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, env=env)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _done(self) -> int:
        return int.from_bytes(self.shared[:8], sys.byteorder, signed=True)

    def run(self, x: np.ndarray, n_out: int, progress=None, offset: int = 0) -> np.ndarray:
        """Outputs of samples ``x``; ``offset``: the index of ``x[0]`` in the caller's run
        (for the sample a crash names)."""
        n = len(x)
        self.shared[:8] = bytes(8)
        reported = 0
        out = self.proc.stdout.fileno()
        try:
            self.proc.stdin.write(np.array([n, x.shape[1], n_out], dtype=np.int64).tobytes())
            self.proc.stdin.write(np.ascontiguousarray(x, dtype=np.float64).tobytes())
            self.proc.stdin.flush()
            while not select.select([out], [], [], self.POLL_S)[0]:
                if progress is not None and (done := self._done()) > reported:
                    progress(done - reported)
                    reported = done
            if os.read(out, 1) != b"!":
                raise EOFError
            data = bytearray()
            while len(data) < 8 * n * n_out:
                chunk = os.read(out, 8 * n * n_out - len(data))
                if not chunk:
                    raise EOFError
                data += chunk
        except (EOFError, BrokenPipeError, OSError):
            raise self._crashed(offset + self._done()) from None
        if progress is not None and n > reported:
            progress(n - reported)
        return np.frombuffer(bytes(data), dtype=np.float64).reshape(n, n_out).copy()

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
        self.shared.close()
        Path(self.counter_path).unlink(missing_ok=True)


class CSim:
    """A project's C-simulation: :meth:`build` (:mod:`.build`), then :meth:`run_codes` on up
    to ``workers`` worker processes (default: the usable cores), kept between runs."""


    def __init__(self, prj: str | Path, workers: int | None = None):
        self.prj = Path(prj).resolve()
        self.manifest = Manifest.read(self.prj)
        self.name = self.manifest.options.project_name
        self.workers = max(1, workers or default_workers())
        self._procs: list[_Worker] = []
        self.last_build: BuildReport | None = None
        #: one worker's seconds per sample in the last run (None before the first)
        self.sample_s: float | None = None

    def library(self) -> Path | None:
        return library_path(self.prj, self.name)

    def build(self, rebuild: bool = False, testbench: bool = False) -> Path:
        """The C-simulation library (and, with ``testbench``, the testbench from the same
        objects), built when missing, when ``rebuild``, or when any source it was built from
        changed since (``source_hash``): never a stale one.  ``last_build`` says what was
        compiled and what was reused."""
        report = Builder(self.workers).build(self.prj, rebuild=rebuild, testbench=testbench)
        if report.rebuilt:
            self.close()  # running workers hold the old library
        self.last_build = report
        return report.library

    def _pool(self, k: int) -> list[_Worker]:
        """``k`` live workers; starting one first checks that the library is up to date."""
        self._procs = [p for p in self._procs if p.alive()]
        if len(self._procs) < k:
            lib = self.build(testbench=False)  # a rebuild stops the running workers
            self._procs = [p for p in self._procs if p.alive()]
            while len(self._procs) < k:
                self._procs.append(_Worker(lib, PACKED_ENTRY))
        return self._procs[:k]

    def worker_memory_kib(self) -> list[tuple[int, int]]:
        """(resident, peak resident) KiB of each live worker (Linux ``/proc``; empty elsewhere)."""
        found = []
        for p in self._procs:
            try:
                status = Path(f"/proc/{p.proc.pid}/status").read_text().splitlines()
            except OSError:
                continue
            kib = {ln.split(":")[0]: int(ln.split()[1]) for ln in status if ln.startswith(("VmRSS:", "VmHWM:"))}
            found.append((kib.get("VmRSS", 0), kib.get("VmHWM", 0)))
        return found

    def close(self) -> None:
        """Stop the C-simulation's child processes (also done when the object is collected)."""
        for p in self._procs:
            p.close()
        self._procs = []

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def workers_for(self, samples: int) -> int:
        """Workers a run of ``samples`` uses: one per :data:`MIN_SAMPLES_PER_WORKER`, or per
        :data:`MIN_SECONDS_PER_WORKER` of work at the last run's :attr:`sample_s`, whichever is
        more, up to ``workers`` and ``samples`` (outputs do not depend on it)."""
        k = samples // MIN_SAMPLES_PER_WORKER
        if self.sample_s is not None:
            k = max(k, int(samples * self.sample_s / MIN_SECONDS_PER_WORKER))
        return max(1, min(self.workers, samples, k))

    def start(self, samples: int) -> int:
        """Start (building first where needed) the workers a run of ``samples`` uses; their number."""
        return len(self._pool(self.workers_for(samples)))

    def run_values(self, x: np.ndarray, n_out: int, progress=None) -> np.ndarray:
        """The bridge's double values ``[n, n_in]`` -> ``[n, n_out]``, the samples split over the
        workers in contiguous shards; a crash names its sample (the first, if several)."""
        n = len(x)
        k = self.workers_for(n)
        procs = self._pool(k)
        t0 = time.perf_counter()
        if k == 1:
            y = procs[0].run(x, n_out, progress)
            self.sample_s = (time.perf_counter() - t0) / max(n, 1)
            return y
        lock = threading.Lock()

        def report(j: int) -> None:
            with lock:
                progress(j)

        bounds = np.linspace(0, n, k + 1).astype(int)
        with ThreadPoolExecutor(k) as ex:
            jobs = [ex.submit(p.run, x[a:b], n_out, report if progress else None, int(a))
                    for p, a, b in zip(procs, bounds[:-1], bounds[1:])]
            errors = [j.exception() for j in jobs]
        failed = [e for e in errors if e is not None]
        if failed:
            raise failed[0]
        self.sample_s = (time.perf_counter() - t0) * k / n
        return np.concatenate([j.result() for j in jobs])

    def bridge_inputs(self, codes: np.ndarray) -> np.ndarray:
        """int64 input codes in ONNX layout ``[N, *shape]`` -> the bridge's doubles ``[N, n_in]``
        (hls4ml's layout and real values, as its ``predict`` takes them)."""
        codes = np.asarray(codes)
        self.manifest.input.require_shape(codes)
        return self.manifest.input.to_hls(codes)

    def output_codes(self, y: np.ndarray) -> np.ndarray:
        """The bridge's output doubles ``[N, n_out]`` -> int64 codes in ONNX layout."""
        return self.manifest.output.from_hls(y)

    def run_codes(self, codes: np.ndarray, progress=None) -> np.ndarray:
        """int64 input codes in ONNX layout ``[N, *shape]`` -> int64 output codes, same layout."""
        x = self.bridge_inputs(codes)
        return self.output_codes(self.run_values(x, self.manifest.output.size, progress))

    def progress_total(self, n_samples: int) -> int:
        """What :meth:`run_codes` reports progress in: samples."""
        return n_samples

    def testbench(self) -> tuple[int, str]:
        """Run the project's own g++ testbench (built with the library) on its reference
        samples; returns (exit status, last line)."""
        self.build(testbench=True)
        res = subprocess.run(["bash", "-c", f"{STACK_LIMIT}./{TESTBENCH}"], cwd=self.prj, capture_output=True,
                             text=True)
        text = (res.stdout + res.stderr).strip()
        return res.returncode, text.splitlines()[-1] if text else ""


__all__ = ["CSim", "MIN_SAMPLES_PER_WORKER", "default_workers", "last_error_line", "require_gxx"]
