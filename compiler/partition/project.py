"""A partitioned HLS project: one Tessera project per distinct block kernel, one for the
gathered tail, the host code that runs them, and a manifest.

Layout::

    prj/tessera.json        the model's input/output, options, the partition (mode, grid,
                            cut, plan numbers) and the kernel of every schedule graph
    prj/model.onnx          the source model (the schedule is recomputed from it)
    prj/kernels/k<i>/       a complete project per distinct block graph (overlap) or
                            layer graph (exchange); blocks with equal graphs share one
    prj/tail/               the layers after the cut (absent when the segment is the model)
    prj/partition_host.cpp, build_host.sh, schedule.txt, tb_data/   the C++ host: tiles,
                            runs the kernels' C-simulation libraries, exchanges halos
                            (exchange mode) or not, stitches, runs the tail, compares with
                            the exact reference (==)

:class:`PartitionedSim` has :class:`~tessera.compiler.sim.csim.CSim`'s interface, so
``tessera emulate`` and ``tessera verify`` run partitioned projects as they run others.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

from ... import __version__
from ...hls_templates import path as template_path
from ..errors import ProjectError, SimulationError
from ..ir.graph import Graph
from ..lower.hls4ml_lower import HlsOptions, channels_last_perm
from ..ops import OPS
from ..reference.model import OrtReference, reference_model
from ..samples import sample_codes
from ..sim.build import Builder
from ..sim.csim import CSim, default_workers, last_error_line, require_gxx
from ..writer import (MANIFEST, input_quant_entry, io_entry, options_entry, project_folder, read_manifest, sha256,
                      write_project)
from .exchange import block_box, ownership
from .runtime import Partition
from .specialise import layer_graph


def signature(g: Graph) -> str:
    """Equal for block / layer graphs that compute the same function on the same shapes
    (the nodes, their local shapes, paddings and crops; weights belong to the node names)."""
    parts = [g.input, str(g.values[g.input].shape)]
    for n in g.nodes:
        a = n.attrs
        parts.append(f"{n.name}|{n.op}|{n.inputs}|{n.output}|{g.values[n.output].shape}|"
                     f"{getattr(a, 'pads', '')}|{getattr(a, 'starts', '')}|{getattr(a, 'sizes', '')}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _schedule_graphs(part: Partition) -> list[Graph]:
    if part.mode == "overlap":
        return [g for _, g, _ in part.block_tasks()]
    return part.layer_graphs()


def write_partitioned_project(graph: Graph, model_path: str | Path, out_dir: str | Path, opts: HlsOptions,
                              part: Partition, tb_samples: int = 4, force: bool = False, progress=None) -> Path:
    """Write the kernels (``progress(k)`` after each), the tail, the host and the manifest
    atomically (a temporary folder renamed at the end)."""
    with project_folder(out_dir, force) as tmp:
        tmp.mkdir()
        kernels: dict[str, str] = {}
        for g in _schedule_graphs(part):
            sig = signature(g)
            if sig not in kernels:
                name = f"k{len(kernels)}"
                write_project(g, None, tmp / "kernels" / name, replace(opts, project_name=f"{opts.project_name}_{name}"),
                              tb_samples=tb_samples)
                kernels[sig] = f"kernels/{name}"
            if progress:
                progress(1)
        tail = part.tail()
        if tail is not None:
            write_project(tail, None, tmp / "tail", replace(opts, project_name=f"{opts.project_name}_tail"),
                          tb_samples=tb_samples)
        shutil.copyfile(model_path, tmp / "model.onnx")
        report = part.report()
        out_t = graph.values[graph.output]
        pout = CSim(tmp / "tail").manifest["output"]["perm"] if tail is not None else channels_last_perm(out_t.shape).tolist()
        manifest = {
            "tessera_version": __version__,
            "model_file": Path(model_path).name,
            "model_sha256": sha256(model_path),
            "options": options_entry(opts),
            "input": io_entry(graph, graph.input, channels_last_perm(graph.values[graph.input].shape)),
            "input_quant": input_quant_entry(graph),
            "output": {**io_entry(graph, graph.output, np.asarray(pout))},
            "partition": {
                "mode": part.mode, "grid": list(part.grid), "cut": part.cut, "kernels": kernels,
                "tail": "tail" if tail is not None else None, "blocks": int(np.prod(part.grid)),
                "redundant_compute": report.redundant_fraction, "halo_bytes": int(report.halo_bytes),
                "max_block_bytes": int(report.max_block_bytes),
            },
        }
        _write_host(tmp, graph, part, kernels, opts, tail, pout, tb_samples)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return Path(out_dir).resolve()


def _box(span) -> str:
    return " ".join(map(str, [a for a, _ in span] + [b - a for a, b in span]))


def _schedule_lines(graph: Graph, part: Partition, kernels: dict, opts: HlsOptions) -> list[str]:
    """The C++ host's schedule: value buffers, kernel runs, merges and frees in order."""
    x_t = graph.values[graph.input]
    ids = {graph.input: 0}
    lines = [f"input {x_t.ftype.frac}"]

    def value(v: str) -> int:
        if v not in ids:
            ids[v] = len(ids)
        return ids[v]

    def kernel(g: Graph) -> str:
        k = kernels[signature(g)]
        return f"{k} {opts.project_name}_{k.split('/')[-1]}"

    steps = []
    if part.mode == "overlap":
        cut = value(part.cut)
        for (idx, block), (_, g, region) in zip(part.blocks(), part.block_tasks()):
            steps.append(f"run {kernel(g)} 0 {cut} {_box(region)} {_box(block)}")
    else:
        own = ownership(graph, part.cut, part.grid)
        nodes = [n for n in graph.nodes[:[m.output for m in graph.nodes].index(part.cut) + 1] if n.output in own]
        last_use = {v: i for i, n in enumerate(nodes) for v in n.inputs}
        for i, n in enumerate(nodes):
            ins, out = [value(v) for v in n.inputs], value(n.output)
            for idx in np.ndindex(*part.grid):
                box = block_box(own[n.output], idx)
                if len(n.inputs) == 1:
                    g, t = layer_graph(graph, n, box)
                    steps.append(f"run {kernel(g)} {ins[0]} {out} {_box(t)} {_box(box)}")
                elif OPS[n.op].host_merge_of(n.attrs) is not None:
                    steps.append(f"{OPS[n.op].host_merge_of(n.attrs)} {ins[0]} {ins[1]} {out} {_box(box)}")
                else:
                    raise ProjectError(f"the C++ host cannot merge with '{n.name}' ({n.op})")
            steps += [f"free {ids[v]}" for v in dict.fromkeys(n.inputs) if last_use[v] == i and v != part.cut]
    for v, i in sorted(ids.items(), key=lambda kv: kv[1]):
        t = graph.values[v]
        lines.append(f"value {i} {t.shape[0]} {' '.join(map(str, t.shape[1:]))}")
    return lines + steps + [f"segment {ids[part.cut]}"]


def _write_host(prj: Path, graph: Graph, part: Partition, kernels: dict, opts: HlsOptions, tail, pout, n: int) -> None:
    x_t = graph.values[graph.input]
    lines = _schedule_lines(graph, part, kernels, opts)
    out_t = graph.values[graph.output]
    n_out = int(np.prod(out_t.shape))
    lines.append(f"tail tail {opts.project_name}_tail {n_out} {out_t.ftype.frac}" if tail is not None
                 else f"notail {n_out} {out_t.ftype.frac}")
    (prj / "schedule.txt").write_text("\n".join(lines) + "\n")
    codes = sample_codes(x_t, n, seed=1234)
    expected = OrtReference(reference_model(graph)).run(codes)
    tb = prj / "tb_data"
    tb.mkdir()
    np.savetxt(tb / "input_codes.txt", codes.reshape(n, -1)[:, channels_last_perm(x_t.shape)], fmt="%d")
    np.savetxt(tb / "expected_codes.txt", expected.reshape(n, -1)[:, pout], fmt="%d")
    shutil.copyfile(template_path("partition/partition_host.cpp"), prj / "partition_host.cpp")
    shutil.copyfile(template_path("partition/build_host.sh"), prj / "build_host.sh")
    (prj / "build_host.sh").chmod(0o755)


#: C-simulations of distinct kernels kept running per slot of a partitioned project.
KEPT_SIMS = 4


class PartitionedSim:
    """The C-simulation of a partitioned project: the block kernels (in worker processes)
    and the tail, scheduled by :class:`.runtime.Partition` from the project's model."""


    def __init__(self, prj: str | Path, workers: int = 1):
        from ..frontend import compile_ir

        self.prj = Path(prj).resolve()
        self.manifest = read_manifest(self.prj)
        p = self.manifest.get("partition")
        if p is None:
            raise ProjectError(f"{prj} is not a partitioned project")
        self.graph = compile_ir(self.prj / "model.onnx", self.manifest["input_quant"].get("declared_type"))
        self.part = Partition.plan(self.graph, tuple(p["grid"]), p["mode"], p["cut"])
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
        """Block tasks [(kernel, codes, trace)] on ``workers`` slots, each a thread driving its
        own C-simulation processes (samples of a lone task, the tail, spread over all)."""
        if len(tasks) == 1:
            kernel, x, _ = tasks[0]
            return [(self._sim(kernel, -1, self.workers).run_codes(x), 0)]
        slots = max(1, min(self.workers, len(tasks)))
        out: list = [None] * len(tasks)

        def slot_run(slot: int) -> None:
            for i in range(slot, len(tasks), slots):
                kernel, x, _ = tasks[i]
                out[i] = (self._sim(kernel, slot).run_codes(x), 0)

        with ThreadPoolExecutor(slots) as pool:
            list(pool.map(slot_run, range(slots)))
        return out

    def close(self) -> None:
        """Stop the kernels' C-simulation processes."""
        for sim in self._sims.values():
            sim.close()
        self._sims = {}

    def _projects(self) -> list[Path]:
        p = self.manifest["partition"]
        return [self.prj / k for k in p["kernels"].values()] + ([self.prj / p["tail"]] if p["tail"] else [])

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
        if g.input == self.part.cut:  # the tail
            return str(self.prj / self.manifest["partition"]["tail"])
        k = self.manifest["partition"]["kernels"].get(signature(g))
        if k is None:
            raise ProjectError(f"{self.prj} has no kernel for {g.nodes[0].name} on input {g.values[g.input].shape} "
                               "(compiled from another model or partition?)")
        return str(self.prj / k)

    def run_codes(self, codes: np.ndarray, progress=None) -> np.ndarray:
        from ..errors import InputDataError

        codes = np.asarray(codes)
        if codes.shape[1:] != tuple(self.manifest["input"]["shape"]):
            raise InputDataError(f"input shape {codes.shape[1:]} does not match the model input "
                                 f"{tuple(self.manifest['input']['shape'])}")
        self.build()
        y = self.part.run(codes, workers=self.workers, kernel_for=self.kernel_for, progress=progress,
                          runner=self._run_kernels)
        if progress and self.manifest["partition"]["tail"]:
            progress(1)
        return y

    def progress_total(self, n_samples: int) -> int:
        """What :meth:`run_codes` reports progress in: block (or layer x block) runs, + the tail."""
        return self.part.n_tasks() + (1 if self.manifest["partition"]["tail"] else 0)

    def testbench(self) -> tuple[int, str]:
        """Build and run the C++ host on the reference samples."""
        require_gxx()
        self.build()
        res = subprocess.run(["bash", "build_host.sh"], cwd=self.prj, capture_output=True, text=True)
        text = (res.stdout + res.stderr).strip()
        if res.returncode not in (0, 1):
            raise SimulationError(f"partitioned host failed in {self.prj}: {last_error_line(text)}")
        return res.returncode, text.splitlines()[-1] if text else ""


def open_sim(prj: str | Path, workers: int = 1):
    """The simulation of a project: partitioned or not."""
    m = read_manifest(prj)
    return PartitionedSim(prj, workers) if m.get("partition") else CSim(prj, workers)


__all__ = ["PartitionedSim", "open_sim", "signature", "write_partitioned_project"]
