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

Its C-simulation is :class:`~tessera.compiler.sim.partitioned.PartitionedSim`.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np

from ...hls_templates import path as template_path
from ..errors import ProjectError
from ..ir.graph import Graph
from ..lower.hls4ml_lower import HlsOptions, channels_last_perm
from ..ops import OPS
from ..project import Manifest, PartitionEntry
from ..reference.model import OrtReference, reference_model
from ..samples import sample_codes
from ..writer import project_folder, write_project
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
        pout = np.asarray(Manifest.read(tmp / "tail").outputs[0].perm) if tail is not None else channels_last_perm(out_t.shape)
        entry = PartitionEntry(part.mode, tuple(part.grid), part.cut, kernels, "tail" if tail is not None else None,
                               int(np.prod(part.grid)), report.redundant_fraction, int(report.halo_bytes),
                               int(report.max_block_bytes))
        manifest = Manifest.of(graph, model_path, opts, {graph.input: channels_last_perm(graph.values[graph.input].shape),
                                                         graph.output: pout}, partition=entry)
        _write_host(tmp, graph, part, kernels, opts, tail, manifest, tb_samples)
        manifest.write(tmp)
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


def _write_host(prj: Path, graph: Graph, part: Partition, kernels: dict, opts: HlsOptions, tail, manifest: Manifest,
                n: int) -> None:
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
    np.savetxt(tb / "input_codes.txt", manifest.input.hls_order(codes), fmt="%d")
    np.savetxt(tb / "expected_codes.txt", manifest.output.hls_order(expected), fmt="%d")
    shutil.copyfile(template_path("partition/partition_host.cpp"), prj / "partition_host.cpp")
    shutil.copyfile(template_path("partition/build_host.sh"), prj / "build_host.sh")
    (prj / "build_host.sh").chmod(0o755)


__all__ = ["signature", "write_partitioned_project"]
