"""The C-simulation of a partitioned project (:mod:`..partition.project`): the block
kernels' and the tail's C-simulations, run by the schedule of :class:`..partition.runtime.Partition`
recomputed from the project's model; and :func:`open_sim`, the simulation of any project.

:class:`PartitionedSim` has :class:`.csim.CSim`'s interface, so ``tessera emulate`` and
``tessera verify`` run partitioned projects as they run others.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import ProjectError, SimulationError
from ..ir.graph import Graph
from ..project import Manifest
from .build import Builder, last_error_line, require_gxx
from .csim import CSim, default_workers
from .rtlsim import RtlSim

#: C-simulations of distinct kernels kept running per slot of a partitioned project.
KEPT_SIMS = 4


class PartitionedSim:
    """The C-simulation of a partitioned project: the block kernels (in worker processes)
    and the tail, scheduled by :class:`..partition.runtime.Partition` from the project's model."""

    def __init__(self, prj: str | Path, workers: int = 1):
        from ..partition.runtime import Partition  # the frontend and the planner: for partitioned projects only
        from ..pipeline import compile_ir

        self.prj = Path(prj).resolve()
        self.manifest = Manifest.read(self.prj)
        if self.manifest.partition is None:
            raise ProjectError(f"{prj} is not a partitioned project")
        self.partition = self.manifest.partition
        self.graph = compile_ir(self.prj / "model.onnx", self.manifest.declared_type)
        self.part = Partition.plan(self.graph, self.partition.grid, self.partition.mode, self.partition.cut)
        self.workers = workers
        self._sims: dict[tuple[str, int], CSim] = {}  # (kernel, slot) -> its C-simulation, kept between runs

    def _sim(self, kernel: str, slot: int, workers: int = 1) -> CSim:
        """The C-simulation of ``kernel`` for one slot; the least recently used ones beyond
        :data:`KEPT_SIMS` per slot are stopped (a 3D grid has up to 27 distinct kernels)."""
        key = (kernel, slot)
        sim = self._sims.pop(key, None) or CSim(kernel, workers)
        self._sims[key] = sim  # most recent last
        mine = [k for k in self._sims if k[1] == slot]
        for old in mine[:-KEPT_SIMS]:
            self._sims.pop(old).close()
        return sim

    def _run_kernels(self, tasks: list) -> list:
        """The schedule's tasks [(graph, codes, trace)] on their compiled kernels, on ``workers``
        slots, each a thread driving its own C-simulation processes (samples of a lone task,
        the tail, spread over all)."""
        kernels = [self.kernel_for(g) for g, _, _ in tasks]
        if len(tasks) == 1:
            return [(self._sim(kernels[0], -1, self.workers).run_codes(tasks[0][1]), 0)]
        slots = max(1, min(self.workers, len(tasks)))
        out: list = [None] * len(tasks)

        def slot_run(slot: int) -> None:
            for i in range(slot, len(tasks), slots):
                out[i] = (self._sim(kernels[i], slot).run_codes(tasks[i][1]), 0)

        with ThreadPoolExecutor(slots) as pool:
            list(pool.map(slot_run, range(slots)))
        return out

    def close(self) -> None:
        """Stop the kernels' C-simulation processes."""
        for sim in self._sims.values():
            sim.close()
        self._sims = {}

    def _projects(self) -> list[Path]:
        return [self.prj / folder for folder in self.partition.folders()]

    def build(self, rebuild: bool = False, progress=None, testbench: bool = False) -> None:
        """Every block kernel's and the tail's library, built side by side (``progress(1)``
        after each); the partitioned host is their testbench (``testbench``: nothing more to build)."""
        builder = Builder(jobs=1, shards=1)  # the kernels side by side, each in one unit
        with ThreadPoolExecutor(default_workers()) as pool:
            for report in pool.map(lambda prj: builder.build(prj, rebuild, testbench=False), self._projects()):
                if report.rebuilt:
                    self.close()  # running kernels hold old libraries
                if progress:
                    progress(1)

    def kernel_for(self, g: Graph) -> str:
        from ..partition.project import signature

        if g.input == self.part.cut:  # the tail
            return str(self.prj / self.partition.tail)
        k = self.partition.kernels.get(signature(g))
        if k is None:
            raise ProjectError(f"{self.prj} has no kernel for {g.nodes[0].name} on input {g.values[g.input].shape} "
                               "(compiled from another model or partition?)")
        return str(self.prj / k)

    def run_codes(self, codes: np.ndarray, progress=None) -> np.ndarray:
        codes = np.asarray(codes)
        self.manifest.input.require_shape(codes)
        self.build()
        y = self.part.run(codes, workers=self.workers, progress=progress, runner=self._run_kernels)
        if progress and self.partition.tail:
            progress(1)
        return y

    def progress_total(self, n_samples: int) -> int:
        """What :meth:`run_codes` reports progress in: block (or layer x block) runs, + the tail."""
        return self.part.n_tasks() + (1 if self.partition.tail else 0)

    def testbench(self) -> tuple[int, str]:
        """Build and run the C++ host on the reference samples."""
        require_gxx()
        self.build()
        res = subprocess.run(["bash", "build_host.sh"], cwd=self.prj, capture_output=True, text=True)
        text = (res.stdout + res.stderr).strip()
        if res.returncode not in (0, 1):
            raise SimulationError(f"partitioned host failed in {self.prj}: {last_error_line(text)}")
        return res.returncode, text.splitlines()[-1] if text else ""


def open_sim(prj: str | Path, workers: int | None = None) -> CSim | PartitionedSim | RtlSim:
    """The simulation of a project, on ``workers`` processes (default:
    :func:`.csim.default_workers`): an HLS project's C-simulation, partitioned or not, or an
    RTL project's Verilator simulation."""
    workers = workers or default_workers()
    manifest = Manifest.read(prj)
    if manifest.rtl is not None:
        return RtlSim(prj, workers)
    return PartitionedSim(prj, workers) if manifest.partition is not None else CSim(prj, workers)


__all__ = ["KEPT_SIMS", "PartitionedSim", "open_sim"]
