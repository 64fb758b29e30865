"""Running a partitioned model: tile the volume, run every block (in parallel worker
processes), recompute or exchange halos, stitch the segment's output and run the gathered
tail.  The same schedule drives two kinds of kernels:

- ``reference``: each block / layer / tail graph on the integer reference (no project
  needed: the planner's emulation, and the benchmark at full size);
- ``csim``: the compiled block kernels' and the tail's g++ C-simulations of a partitioned
  project (:mod:`.project`).

Both are bit-identical to the unpartitioned model by construction and tested so.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..reference.interpret import run_ir
from .exchange import ownership, plan_exchange, run_exchange
from .execute import _run_node
from .plan import grid_blocks, plan_overlapped
from .regions import Span
from .specialise import block_graph, cut_for_grid, layer_graph, tail_graph

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


def default_workers() -> int:
    return max(1, min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8))


# --- worker side: graphs are sent once per task; arrays are the blocks' regions ----------

def _run_graph(args):
    g, x = args
    return run_ir(g, x)


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
        p = cls(graph, tuple(grid), mode, cut or cut_for_grid(graph, tuple(grid)))
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
            block_fn=None, tail_fn=None) -> np.ndarray:
        """Output codes of the whole model on input codes ``x`` (N, C, D, H, W).
        ``block_fn(kind, key, graph, x_region)`` runs one block (overlap: kind "block", key
        the block index) or one layer of one block (exchange: kind "layer", key (node name,
        block index)); default: the integer reference in ``workers`` processes.
        ``progress(k)`` is called as blocks finish."""
        seg = self._run_overlap(x, workers, progress, block_fn) if self.mode == "overlap" else \
            self._run_exchange(x, workers, progress, block_fn)
        tail = self.tail()
        if tail is None:
            return seg
        return run_ir(tail, seg) if tail_fn is None else tail_fn(tail, seg)

    def _map(self, tasks, workers, progress, block_fn, kind):
        """Results of ``tasks`` [(key, graph, x_region)] in order."""
        if block_fn is not None:
            out = []
            for key, g, xr in tasks:
                out.append(block_fn(kind, key, g, xr))
                if progress:
                    progress(1)
            return out
        if workers <= 1 or len(tasks) == 1:
            out = []
            for _, g, xr in tasks:
                out.append(run_ir(g, xr))
                if progress:
                    progress(1)
            return out
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(_run_graph, (g, xr)) for _, g, xr in tasks]
            out = []
            for f in futures:
                out.append(f.result())
                if progress:
                    progress(1)
            return out

    def _run_overlap(self, x, workers, progress, block_fn):
        tasks = []
        for idx, block in self.blocks():
            g, region = block_graph(self.graph, self.cut, block, name=f"block {idx}")
            tasks.append((idx, g, x[_sl(region)]))
        outs = self._map(tasks, workers, progress, block_fn, "block")
        seg = np.zeros((len(x), *self.graph.values[self.cut].shape), dtype=np.int64)
        for (_, block), y in zip(self.blocks(), outs):
            seg[_sl(block)] = y
        return seg

    def _run_exchange(self, x, workers, progress, block_fn):
        """Layer by layer (:func:`.exchange.run_exchange`): every block holds its own box of
        each value, a layer's input tile is assembled from the owners' boxes (the halo
        exchange) and the layer's block graph runs on it; merges (several inputs, no halo)
        run on the blocks' own boxes."""

        def layer_fn(node, items):
            if len(node.inputs) != 1:
                out = [_run_node(self.graph, node, local, out_box) for _, local, out_box in items]
                if progress:
                    progress(len(items))
                return out
            tasks = []
            for idx, local, out_box in items:
                g, region = layer_graph(self.graph, node, out_box, name=f"{node.name} block {idx}")
                xr, have = local[node.inputs[0]]
                assert have == region
                tasks.append(((node.name, idx), g, xr))
            return self._map(tasks, workers, progress, block_fn, "layer")

        return run_exchange(self.graph, self.cut, self.grid, x, layer_fn=layer_fn)

    def n_tasks(self) -> int:
        """Blocks (overlap) or layer x block runs (exchange): the progress total."""
        if self.mode == "overlap":
            return len(self.blocks())
        own = ownership(self.graph, self.cut, self.grid)
        layers = sum(1 for n in self.graph.nodes[:[m.output for m in self.graph.nodes].index(self.cut) + 1]
                     if n.output in own)
        return layers * int(np.prod(self.grid))


__all__ = ["MODES", "Partition", "default_workers", "parse_grid"]
