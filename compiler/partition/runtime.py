"""Running a partitioned model: tile the volume, run every block (in parallel worker
processes), recompute or exchange halos, stitch the segment's output and run the gathered
tail.  The same schedule drives two kinds of kernels:

- ``reference``: each block / layer / tail graph on the integer reference (no project
  needed: the planner's emulation, and the benchmark at full size);
- ``csim``: the compiled block kernels' and the tail's g++ C-simulations of a partitioned
  project (:mod:`.project`), run by its simulation (:mod:`..sim.partitioned`) as the
  schedule's ``runner``.

Both are bit-identical to the unpartitioned model by construction and tested so.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..reference.interpret import run_ir
from .choose import choose_cut
from .exchange import block_box, ownership, plan_exchange, run_exchange
from .execute import run_node
from .plan import plan_overlapped
from .regions import Span, grid_blocks
from .specialise import block_graph, layer_graph, tail_graph

MODES = ("overlap", "exchange")


def parse_grid(text: str) -> tuple[int, ...]:
    try:
        grid = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        grid = ()
    if len(grid) != 3 or min(grid) < 1:
        raise UnsupportedModelError(f"block grid '{text}' is not of the form AxBxC with positive integers (e.g. 2x2x1)")
    return grid


def _sl(span: Span) -> tuple:
    return (slice(None), slice(None)) + tuple(slice(a, b) for a, b in span)


# --- worker side: a task is (block / layer / tail graph, input region codes, trace) ---------


def run_task(args) -> tuple[np.ndarray, int]:
    """One block / layer / tail graph on the integer reference: (output codes, peak bytes its
    arrays took while it ran (tracemalloc: numpy's allocations included), or 0 when not traced)."""
    g, x, trace = args
    if not trace:
        return run_ir(g, x), 0
    import tracemalloc

    tracemalloc.start()
    try:
        y = run_ir(g, x)
        return y, tracemalloc.get_traced_memory()[1] + x.nbytes
    finally:
        tracemalloc.stop()


@dataclass
class Partition:
    """A model's partitioned schedule: the cut, the grid, the mode and the graphs of the
    blocks (overlap) or of every layer per block (exchange), and the tail."""

    graph: Graph
    grid: tuple[int, ...]
    mode: str
    cut: str

    @classmethod
    def plan(cls, graph: Graph, grid: tuple[int, ...], mode: str = "overlap", cut: str | None = None) -> "Partition":
        if mode not in MODES:
            raise UnsupportedModelError(f"partition mode '{mode}': choose one of {', '.join(MODES)}")
        p = cls(graph, tuple(grid), mode, cut or choose_cut(graph, tuple(grid), mode))
        p.report()  # refuses impossible grids (alignment, empty blocks) before any work
        return p

    def report(self):
        """The planner's numbers for this schedule (an overlapped Plan or an ExchangePlan)."""
        if self.mode == "overlap":
            return plan_overlapped(self.graph, self.grid, self.cut)
        return plan_exchange(self.graph, self.grid, self.cut)

    def tail(self) -> Graph | None:
        return tail_graph(self.graph, self.cut)

    def blocks(self) -> list[tuple[tuple[int, ...], Span]]:
        return grid_blocks(self.graph.values[self.cut].shape[1:], self.grid)

    # ------------------------------------------------------------------ execution

    def run(self, x: np.ndarray, workers: int = 1, progress: Callable[[int], None] | None = None,
            stats: dict | None = None, runner: Callable[[list], list] | None = None) -> np.ndarray:
        """Output codes of the whole model on input codes ``x`` (N, C, D, H, W): every
        block (overlap) or every layer of every block (exchange) in ``workers`` processes,
        then the tail, each graph on the integer reference.  ``progress(k)`` is called as
        blocks finish.  ``stats`` receives per block index the input voxels moved to it and
        those of them that are halo (overlap: its region outside its own share of the input;
        exchange: received from other blocks, summed over the layers).  ``runner(tasks)``:
        runs [(graph, input codes, trace)] and returns [(output codes, peak bytes)] in order,
        instead of the pool (a partitioned project's C-simulations of the graphs' compiled
        kernels, whose own worker processes are kept between runs)."""
        self._pool = None
        self._runner = runner
        try:
            if runner is None and workers > 1 and np.prod(self.grid) > 1:
                # one pool of fresh worker processes (children of this one, not forks: each
                # holds only the data of the blocks it runs)
                self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
            seg = self._run_overlap(x, workers, progress, stats) if self.mode == "overlap" else \
                self._run_exchange(x, workers, progress, stats)
        finally:
            if self._pool is not None:
                self._pool.shutdown()
            self._pool = None
        tail = self.tail()
        if tail is None:
            return seg
        task = (tail, seg, False)
        return (run_task(task) if runner is None else runner([task])[0])[0]

    def _map(self, tasks, workers, progress, stats=None):
        """Results of ``tasks`` [(key, graph, x_region)] in order; with ``stats``, each
        task's traced peak bytes is kept as the largest of its block's ``peak_bytes_traced``."""
        trace = stats is not None
        payload = [(g, xr, trace) for _, g, xr in tasks]
        out = []
        if self._runner is not None:
            results = self._runner(payload)
        else:
            results = map(run_task, payload) if self._pool is None else self._pool.map(run_task, payload)
        for (key, _, _), (y, peak) in zip(tasks, results):
            out.append(y)
            if trace:
                st = stats.setdefault(key if self.mode == "overlap" else key[1], {})
                st["peak_bytes_traced"] = max(st.get("peak_bytes_traced", 0), peak)
            if progress:
                progress(1)
        return out

    def block_tasks(self) -> list[tuple[tuple[int, ...], Graph, Span]]:
        """Overlap mode: (block index, block graph, input region) per block (built once)."""
        if getattr(self, "_block_tasks", None) is None:
            self._block_tasks = [(idx, *block_graph(self.graph, self.cut, block, name=f"block {idx}"))
                                 for idx, block in self.blocks()]
        return self._block_tasks

    def layer_graphs(self) -> list[Graph]:
        """Exchange mode: the graph of every single-input layer for every block."""
        own = ownership(self.graph, self.cut, self.grid)
        out = []
        for node in self.graph.nodes[:[m.output for m in self.graph.nodes].index(self.cut) + 1]:
            if node.output in own and len(node.inputs) == 1:
                out += [layer_graph(self.graph, node, block_box(own[node.output], i))[0] for i in np.ndindex(*self.grid)]
        return out

    def _run_overlap(self, x, workers, progress, stats=None):
        tasks = [(idx, g, x[_sl(region)]) for idx, g, region in self.block_tasks()]
        if stats is not None:
            own = dict(grid_blocks(self.graph.values[self.graph.input].shape[1:], self.grid))
            for (idx, _, region), (_, _, xr) in zip(self.block_tasks(), tasks):  # the arrays sent
                inter = int(np.prod([max(0, min(b, d) - max(a, c)) for (a, b), (c, d) in zip(region, own[idx])]))
                voxels = int(np.prod(xr.shape[2:]))
                stats[idx] = {"input_voxels": voxels, "halo_voxels": voxels - inter}
        # (each block's traced peak memory is added by _map)
        outs = self._map(tasks, workers, progress, stats)
        seg = np.zeros((len(x), *self.graph.values[self.cut].shape), dtype=np.int64)
        for (_, block), y in zip(self.blocks(), outs):
            seg[_sl(block)] = y
        return seg

    def _run_exchange(self, x, workers, progress, stats=None):
        """Layer by layer (:func:`.exchange.run_exchange`): every block holds its own box of
        each value, a layer's input tile is assembled from the owners' boxes (the halo
        exchange) and the layer's block graph runs on it; merges (several inputs, no halo)
        run on the blocks' own boxes."""

        def layer_fn(node, items):
            if len(node.inputs) != 1:
                out = [run_node(self.graph, node, local, out_box) for _, local, out_box in items]
                if progress:
                    progress(len(items))
                return out
            tasks = []
            for idx, local, out_box in items:
                g, region = layer_graph(self.graph, node, out_box, name=f"{node.name} block {idx}")
                xr, have = local[node.inputs[0]]
                assert have == region
                tasks.append(((node.name, idx), g, xr))
            return self._map(tasks, workers, progress, stats)

        return run_exchange(self.graph, self.cut, self.grid, x, stats=stats, layer_fn=layer_fn)

    def n_tasks(self) -> int:
        """Blocks (overlap) or layer x block runs (exchange): the progress total."""
        if self.mode == "overlap":
            return len(self.blocks())
        own = ownership(self.graph, self.cut, self.grid)
        layers = sum(1 for n in self.graph.nodes[:[m.output for m in self.graph.nodes].index(self.cut) + 1]
                     if n.output in own)
        return layers * int(np.prod(self.grid))


__all__ = ["MODES", "Partition", "parse_grid"]
