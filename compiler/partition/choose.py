"""The choices a partitioned design makes: where the spatial segment ends (the cut) for a
block grid, and the grid for an on-chip memory budget.  Both weigh the plans of both
modes (overlapped tiles, :mod:`.plan`; halo exchange, :mod:`.exchange`) and the gathered
tail (:mod:`.specialise`)."""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from .exchange import plan_exchange
from .plan import node_cost, plan_overlapped
from .regions import required_spans
from .specialise import cut_candidates, tail_bytes


def _planner(mode: str):
    return plan_overlapped if mode == "overlap" else plan_exchange


def choose_cut(graph: Graph, grid: tuple[int, ...], mode: str = "overlap") -> str:
    """The cut whose design needs the least on chip: the larger of one block's working set
    and the gathered tail's; then the least redundant compute; then the deepest.  With
    overlapped tiles a deep cut makes every block read (and recompute) most of the volume,
    so the cut is usually earlier than with halo exchange."""
    planner = _planner(mode)
    best, best_key, refused = None, None, []
    cuts = cut_candidates(graph, grid)
    for i, cut in enumerate(cuts):
        try:
            p = planner(graph, grid, cut)
        except UnsupportedModelError as exc:
            refused.append(exc)
            continue
        key = (max(p.max_block_bytes, tail_bytes(graph, cut)), round(p.redundant_fraction, 9), -i)
        if best_key is None or key < best_key:
            best, best_key = cut, key
    if any(g > 1 for g in grid):
        one = (1,) * len(grid)
        whole = max(plan_overlapped(graph, one, cuts[-1]).max_block_bytes, tail_bytes(graph, cuts[-1]))
        if best is None or best_key[0] >= whole:
            if refused:  # the deeper cuts that would have helped were refused: say why
                raise refused[-1]
            raise UnsupportedModelError(f"grid {'x'.join(map(str, grid))} ({mode}) saves no on-chip memory on this "
                                        f"model: every block still needs {best_key[0]} bytes")
    return best


def grid_candidates(extent: tuple[int, ...], max_blocks: int) -> list[tuple[int, ...]]:
    """Grids of 1, 2, 3 and powers of two blocks per dim (at most the extent), fewest blocks
    first, then the most even."""
    per_dim = [sorted({k for k in (1, 2, 3, *(2 ** i for i in range(2, 13))) if k <= n}) for n in extent]
    grids = [g for g in itertools.product(*per_dim) if np.prod(g) <= max_blocks]
    return sorted(grids, key=lambda g: (int(np.prod(g)), max(g) - min(g), g))


def grid_for_budget(graph: Graph, budget_bytes: int, mode: str = "overlap", max_blocks: int = 4096):
    """The plan (overlapped tiles, or halo exchange) with the fewest blocks, then the least
    redundant compute, whose every block's working set and the gathered tail's fit
    ``budget_bytes``; the segment is cut per grid (:func:`choose_cut`).  A clear error
    naming the layer that needs more when even the finest grid does not fit."""
    planner = _planner(mode)
    best, frugal = None, None  # frugal: (need, plan, cut) of the grid needing the least
    for g in grid_candidates(graph.values[graph.input].shape[1:], max_blocks):
        if best is not None and np.prod(g) > np.prod(best.grid):
            break
        try:
            cut = choose_cut(graph, g, mode)
            p = planner(graph, g, cut)
        except UnsupportedModelError:
            continue  # this grid cannot be carried through the layers: try the next
        need = max(p.max_block_bytes, tail_bytes(graph, cut))
        if frugal is None or need < frugal[0]:
            frugal = (need, p, cut)
        if need <= budget_bytes and (best is None or p.redundant_fraction < best.redundant_fraction):
            best = p
    if best is None:
        if frugal is None:
            raise UnsupportedModelError("no block grid can partition this model")
        need, p, cut = frugal
        grid_txt = "x".join(map(str, p.grid))
        if tail_bytes(graph, cut) > p.max_block_bytes:
            raise UnsupportedModelError(
                f"no block grid fits {budget_bytes} bytes: the best ({grid_txt}) still gathers {need} bytes for the "
                f"layers after '{graph.producer(cut).name}' (the unpartitioned tail)")
        worst = max(p.blocks, key=lambda b: b.peak_bytes)
        spans = required_spans(graph, p.value, worst.block)
        layer = max((n for n in graph.nodes if n.output in spans), key=lambda n: node_cost(graph, n, spans)[1])
        raise UnsupportedModelError(
            f"no block grid fits {budget_bytes} bytes: the most frugal ({grid_txt}) needs {need} bytes, most at "
            f"layer '{layer.name}' ({layer.op})")
    return best


__all__ = ["choose_cut", "grid_candidates", "grid_for_budget"]
