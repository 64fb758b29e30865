"""Choose reuse factors (and, with ``partition='auto'``, a block grid) that fit a part and
maximize throughput.

Throughput is ``f_clk / II`` with ``II = max over layers of blocks x steps x R``.  For a
target II ``T`` every layer takes the largest allowed reuse factor with
``blocks x steps x R <= T`` (the fewest multipliers that still meet ``T``); resources then
only fall as ``T`` grows, so the smallest ``T`` whose design fits is found by bisection
over the candidate values ``blocks x steps x R``.  Allowed reuse factors: hls4ml's own
rule for the layers hls4ml implements (Dense, Conv2D: ``_validate_reuse_factor``), the
divisors of the multiplier count for Tessera's kernels (``PIPELINE II = reuse_factor``).

Block grid (``partition='auto'``): unpartitioned when that design fits; otherwise the
partition planner's grids for halving on-chip budgets (``grid_for_budget``: fewest blocks,
then least redundant compute, for each budget), the first whose best design fits.
"""

from __future__ import annotations

import bisect
from functools import lru_cache

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..partition import grid_for_budget, plan_overlapped, segment_output
from .costs import Work
from .model import IO_TYPES, Design, LayerWork, estimate, layer_works
from .parts import Part

#: Largest number of blocks the automatic grid search considers.
MAX_BLOCKS = 512


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@lru_cache(maxsize=None)
def _hls4ml_valid(n_in: int, n_out: int) -> tuple[int, ...]:
    from hls4ml.backends import get_backend

    backend = get_backend("Vitis")
    # every valid factor divides n_in * n_out (hls4ml's QoR condition), so test only those
    return tuple(r for r in _divisors(n_in * n_out) if backend._validate_reuse_factor(n_in, n_out, r))


def valid_reuse_factors(work: Work) -> list[int]:
    """Reuse factors a layer may take, ascending (always starting with 1)."""
    if not work.reusable:
        return [1]
    if work.reuse_dims is not None:
        return list(_hls4ml_valid(*work.reuse_dims))
    return _divisors(work.mults)


def _reuse_for(lws: list[LayerWork], options: dict[str, list[int]], target: int) -> dict[str, int] | None:
    out = {}
    for lw in lws:
        if not lw.work.reusable:
            continue
        per = lw.blocks * lw.work.steps
        rs = options[lw.node]
        k = bisect.bisect_right(rs, target // per if per else rs[-1]) - 1
        if k < 0:
            return None
        out[lw.node] = rs[k]
    return out


def choose_for_grid(graph: Graph, part: Part, io_type: str = "io_parallel", strategy: str = "latency",
                    grid: tuple[int, ...] | None = None, clock_ns: float = 5.0, utilization: float = 0.8) -> Design:
    """The fitting design with the smallest II on ``grid`` (or the largest-reuse design,
    which does not fit, when none does)."""
    works = layer_works(graph, io_type, grid)
    lws = works[0]
    options = {lw.node: valid_reuse_factors(lw.work) for lw in lws}
    fixed = max([lw.blocks * lw.work.steps for lw in lws if not lw.work.reusable] + [1])
    floor = max([fixed] + [lw.blocks * lw.work.steps for lw in lws if lw.work.reusable])
    targets = sorted({floor} | {lw.blocks * lw.work.steps * r for lw in lws if lw.work.reusable
                                for r in options[lw.node] if lw.blocks * lw.work.steps * r >= floor})

    def design(t: int) -> Design:
        return estimate(graph, part, _reuse_for(lws, options, t), io_type, strategy, grid, clock_ns, utilization, works)

    lo, hi = 0, len(targets) - 1
    if not design(targets[hi]).fits:
        return design(targets[hi])
    while lo < hi:
        mid = (lo + hi) // 2
        if design(targets[mid]).fits:
            hi = mid
        else:
            lo = mid + 1
    return design(targets[lo])


#: Ops whose output pixels read a neighbourhood: a segment without one has nothing to tile.
WINDOW_OPS = {"conv", "maxpool", "avgpool", "convtranspose", "upsample"}


def partitionable(graph: Graph) -> bool:
    """A leading spatial segment with spatial dims to cut and at least one window op."""
    try:
        value = segment_output(graph)
    except UnsupportedModelError:
        return False
    if value == graph.input or len(graph.values[value].shape) < 3:
        return False
    ops = {n.op for n in graph.nodes[:[n.output for n in graph.nodes].index(value) + 1]}
    return bool(ops & WINDOW_OPS)


def parse_grid(text: str) -> tuple[int, ...]:
    try:
        grid = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UnsupportedModelError(f"block grid '{text}' is not of the form AxBxC") from None
    if not grid or min(grid) < 1:
        raise UnsupportedModelError(f"block grid '{text}' needs positive block counts")
    return grid


def choose_design(graph: Graph, part: Part, io_type: str = "io_parallel", strategy: str = "latency",
                  partition: str | tuple[int, ...] | None = None, clock_ns: float = 5.0,
                  utilization: float = 0.8) -> Design:
    """Reuse factors, and the block grid when ``partition`` is 'auto' (or a given grid).
    ``io_type='auto'`` tries io_parallel and io_stream and keeps the fitting design with the
    smaller II (then latency); when neither fits, the one with the lower peak utilization."""
    if io_type == "auto":
        designs = [choose_design(graph, part, io, strategy, partition, clock_ns, utilization) for io in IO_TYPES]
        return min(designs, key=lambda d: (not d.fits, d.ii if d.fits else max(d.utilization.values()), d.latency))
    kw = dict(io_type=io_type, strategy=strategy, clock_ns=clock_ns, utilization=utilization)
    if isinstance(partition, str) and partition != "auto":
        partition = None if partition == "none" else parse_grid(partition)
    if partition is None or partition == "auto":
        best = choose_for_grid(graph, part, **kw)
        if partition is None or best.fits or not partitionable(graph):
            return best
        value = segment_output(graph)
        budget = plan_overlapped(graph, (1,) * (len(graph.values[value].shape) - 1), value).max_block_bytes
        seen = set()
        while budget > 1:
            budget //= 2
            try:
                plan = grid_for_budget(graph, budget, value, max_blocks=MAX_BLOCKS)
            except UnsupportedModelError:
                break
            if plan.grid in seen:
                continue
            seen.add(plan.grid)
            d = choose_for_grid(graph, part, grid=plan.grid, **kw)
            if d.fits:
                return d
        return best
    if not partitionable(graph):
        raise UnsupportedModelError("this model has no spatial segment to partition into blocks")
    return choose_for_grid(graph, part, grid=tuple(partition), **kw)


def choose_reuse(graph: Graph, part: Part | str, io_type: str = "io_parallel", strategy: str = "latency",
                 clock_ns: float = 5.0, utilization: float = 0.8) -> dict[str, int]:
    """Per-layer reuse factors (node name -> R) of the chosen unpartitioned design: what
    ``tessera compile --reuse auto`` passes to hls4ml."""
    from .parts import get_part

    p = get_part(part) if isinstance(part, str) else part
    d = choose_for_grid(graph, p, io_type, strategy, None, clock_ns, utilization)
    return {layer.node: layer.reuse for layer in d.layers if layer.mults}


def sweep_reuse(graph: Graph, part: Part, io_type: str = "io_parallel", strategy: str = "latency",
                grid: tuple[int, ...] | None = None, clock_ns: float = 5.0, max_points: int = 24) -> list[Design]:
    """Designs for one reuse factor R applied to every layer (each layer's largest allowed
    factor <= R), R over powers of two: the reuse / resource / II trade-off for the plot."""
    works = layer_works(graph, io_type, grid)
    options = {lw.node: valid_reuse_factors(lw.work) for lw in works[0]}
    top = max([rs[-1] for rs in options.values()] + [1])
    out = []
    for r in sorted({int(v) for v in np.geomspace(1, top, num=min(max_points, 1 + int(np.log2(top)) + 1))}):
        reuse = {n: rs[bisect.bisect_right(rs, r) - 1] for n, rs in options.items()}
        out.append(estimate(graph, part, reuse, io_type, strategy, grid, clock_ns, works=works))
    return out


__all__ = ["MAX_BLOCKS", "choose_design", "choose_for_grid", "choose_reuse", "parse_grid", "partitionable", "sweep_reuse",
           "valid_reuse_factors"]
