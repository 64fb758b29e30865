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
overlapped-tile plans (``plan_overlapped``) of candidate grids, each up to the cut
``tessera compile`` makes for it (``choose_cut``), fewest blocks first (as ``grid_for_budget`` orders them), the first whose best design fits
every resource (a bytes budget alone, ``grid_for_budget``'s criterion, does not capture
the DSP / LUT / FF that io_parallel arrays and unrolled layers cost).
"""

from __future__ import annotations

import bisect
import itertools
from functools import lru_cache

import numpy as np

from ..errors import UnsupportedModelError
from ..ir.graph import Graph
from ..ops import OPS, Trait
from ..ops.base.cost import Work
from ..partition import Plan, choose_cut, parse_grid, plan_overlapped, segment_output
from .model import IO_TYPES, Design, LayerWork, estimate, layer_works
from .parts import Part

#: Largest number of blocks, and of block counts, the automatic grid search considers.
MAX_BLOCKS = 512
MAX_GRIDS = 24


def candidate_grids(extent: tuple[int, ...], max_blocks: int = MAX_BLOCKS) -> list[tuple[int, ...]]:
    """Block grids over the segment output, more than one block: 1, 2, 3 or a power of two
    blocks per dim (at most the extent), fewest blocks first, then the most even."""
    per_dim = [[k for k in (1, 2, 3, *(2 ** i for i in range(2, 13))) if k <= n] for n in extent]
    grids = [g for g in itertools.product(*per_dim) if 1 < int(np.prod(g)) <= max_blocks]
    return sorted(grids, key=lambda g: (int(np.prod(g)), max(g) - min(g), g))


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
                    plan: Plan | None = None, clock_ns: float = 5.0, utilization: float = 0.8) -> Design:
    """The fitting design with the smallest II, unpartitioned or on ``plan``'s block grid
    (or the largest-reuse design, which does not fit, when none does)."""
    lws = layer_works(graph, io_type, plan)
    options = {lw.node: valid_reuse_factors(lw.work) for lw in lws}
    fixed = max([lw.blocks * lw.work.steps for lw in lws if not lw.work.reusable] + [1])
    floor = max([fixed] + [lw.blocks * lw.work.steps for lw in lws if lw.work.reusable])
    targets = sorted({floor} | {lw.blocks * lw.work.steps * r for lw in lws if lw.work.reusable
                                for r in options[lw.node] if lw.blocks * lw.work.steps * r >= floor})

    def design(t: int) -> Design:
        return estimate(graph, part, _reuse_for(lws, options, t), io_type, strategy, None, clock_ns, utilization, plan, lws)

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


def partitionable(graph: Graph) -> bool:
    """A leading 3D spatial segment (what ``tessera compile --partition`` cuts into AxBxC
    blocks) with at least one op whose output pixels read a neighbourhood (window or
    scatter): a segment without one has nothing to tile."""
    if (len(graph.inputs), len(graph.outputs)) != (1, 1):
        return False
    try:
        value = segment_output(graph)
    except UnsupportedModelError:
        return False
    if value == graph.input or len(graph.values[value].shape) != 4:
        return False
    segment = graph.nodes[:[n.output for n in graph.nodes].index(value) + 1]
    return any(OPS[n.op].traits & {Trait.WINDOW, Trait.SCATTER} for n in segment)


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
        # `best` is the least-resource unpartitioned design; with B blocks only the
        # volume-proportional part of it can shrink, at most B-fold: fewer blocks than its
        # worst utilization over the limit cannot fit.  One grid (the most even) per count.
        need = max(best.utilization.values()) / utilization
        grids = {}
        for grid in candidate_grids(graph.values[value].shape[1:]):
            grids.setdefault(int(np.prod(grid)), grid)
        for grid in [g for n, g in sorted(grids.items()) if n >= need][:MAX_GRIDS]:
            try:
                plan = plan_overlapped(graph, grid, choose_cut(graph, grid))  # the cut compile makes
            except UnsupportedModelError:
                continue  # a grid the planner cannot tile (e.g. finer than the input) or that saves nothing
            d = choose_for_grid(graph, part, plan=plan, **kw)
            if d.fits:
                return d
        return best
    if not partitionable(graph):
        raise UnsupportedModelError("this model has no spatial segment to partition into blocks")
    grid = tuple(partition)
    return choose_for_grid(graph, part, plan=plan_overlapped(graph, grid, choose_cut(graph, grid)), **kw)


def choose_reuse(graph: Graph, part: Part | str, io_type: str = "io_parallel", strategy: str = "latency",
                 clock_ns: float = 5.0, utilization: float = 0.8) -> dict[str, int]:
    """Per-layer reuse factors (node name -> R) of the chosen unpartitioned design: what
    ``tessera compile --reuse auto`` passes to hls4ml."""
    from .parts import get_part

    p = get_part(part) if isinstance(part, str) else part
    d = choose_for_grid(graph, p, io_type, strategy, None, clock_ns, utilization)
    return {layer.node: layer.reuse for layer in d.layers if layer.mults}


def sweep_reuse(graph: Graph, part: Part, io_type: str = "io_parallel", strategy: str = "latency",
                plan: Plan | None = None, clock_ns: float = 5.0, max_points: int = 24) -> list[Design]:
    """Designs for one reuse factor R applied to every layer (each layer's largest allowed
    factor <= R), R over powers of two: the reuse / resource / II trade-off for the plot."""
    lws = layer_works(graph, io_type, plan)
    options = {lw.node: valid_reuse_factors(lw.work) for lw in lws}
    top = max([rs[-1] for rs in options.values()] + [1])
    out = []
    for r in sorted({int(v) for v in np.geomspace(1, top, num=min(max_points, 2 + int(np.log2(top))))}):
        reuse = {n: rs[bisect.bisect_right(rs, r) - 1] for n, rs in options.items()}
        out.append(estimate(graph, part, reuse, io_type, strategy, None, clock_ns, plan=plan, works=lws))
    return out


__all__ = ["MAX_BLOCKS", "choose_design", "choose_for_grid", "choose_reuse", "partitionable", "sweep_reuse",
           "valid_reuse_factors"]
