"""The collectives of spatial parallelism, as autograd Functions over ``torch.distributed``.

A 5D activation ``(N, C, D, H, W)`` of global spatial extent ``E`` is split over the ranks
of a spatial group into the blocks of :func:`tessera.compiler.partition.regions.grid_blocks`
(``n * i // k``: sizes differ by at most one, any extent).  Everything here moves boxes of
those blocks between ranks with point-to-point ``isend``/``irecv`` batched by
:func:`torch.distributed.batch_isend_irecv`:

* :func:`halo` -- each rank assembles the (unclipped) input span its output block reads,
  from its own block, its neighbours' blocks (any distance: a halo wider than a block reaches
  past the next neighbour, corners included) and ``fill`` outside the volume (zero padding
  only at the global boundary).  Backward: the transpose -- every received box's gradient goes
  back to its owner and is added to its block (halo-gradient accumulation).
* :func:`halo_layer` -- the same exchange fused with one window layer (convolution,
  transposed convolution, average / max pooling), saving only the rank's block and the
  received halo boxes for backward (not the assembled span).
* :func:`gather_spatial` -- every rank of the group gets the whole volume (before the dense
  tail).  Backward: each rank keeps the gradient of its own block (the tail runs alike on all
  ranks of the group, so every rank holds the full gradient already).
  :func:`gather_batch` does the same for the samples of the data replicas.
* :func:`sync_batch_norm` -- BatchNorm training statistics reduced over a process group
  (one ``all_reduce`` of per-channel sums, squares and counts forward, one of the two
  gradient sums backward); parameter gradients stay local partial sums.
* :func:`dist_abs_percentile` -- the exact ``k``-th value of ``|x|`` over a process group
  (brevitas' activation-scale statistic): each rank contributes its ``m`` largest values,
  ``m = n - k + 1`` of the global count ``n``, which must contain the global ``m``-th largest.
  Backward: the gradient (summed over the group) is shared equally by the elements equal to
  the selected value (brevitas' ``kthvalue`` gives all of it to one of them, chosen by the
  selection algorithm: an order no sharded run can reproduce; ties are common on quantized
  grids, e.g. the maximum of an average pool of int8 codes).

The halo spans come from :mod:`tessera.compiler.partition.regions`, the one definition of
halo arithmetic shared with the compiler's partition planner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..compiler.partition.regions import Span, grid_blocks
from . import comm

__all__ = [
    "Exchange",
    "blocks",
    "dist_abs_percentile",
    "gather_batch",
    "gather_spatial",
    "shared_grad",
    "halo",
    "halo_layer",
    "LayerOp",
    "plan_exchange",
    "span_size",
    "sync_batch_norm",
]


def blocks(extent: Sequence[int], grid: Sequence[int]) -> list[Span]:
    """The spatial blocks of ``extent`` over ``grid``, row-major (spatial rank order)."""
    return [span for _, span in grid_blocks(tuple(int(e) for e in extent), tuple(grid))]


def span_size(span: Span) -> tuple[int, ...]:
    return tuple(b - a for a, b in span)


def _intersect(a: Span, b: Span) -> Span | None:
    out = tuple((max(x[0], y[0]), min(x[1], y[1])) for x, y in zip(a, b))
    return None if any(lo >= hi for lo, hi in out) else out


def _slices(box: Span, origin: Span) -> tuple[slice, ...]:
    """Index of global ``box`` inside a tensor ``(N, C, ...)`` that holds ``origin``."""
    return (slice(None), slice(None)) + tuple(slice(lo - o, hi - o) for (lo, hi), (o, _) in zip(box, origin))


@dataclass(frozen=True)
class Exchange:
    """One rank's part of assembling ``need`` (global, unclipped) from the blocks.

    ``own``: this rank's block; ``local``: ``own & need`` (copied, not sent); ``sends``:
    ``(global peer rank, box of own block the peer needs)``; ``recvs``: ``(peer, box of its
    block this rank needs)``.
    """

    own: Span
    need: Span
    local: Span | None
    sends: tuple[tuple[int, Span], ...]
    recvs: tuple[tuple[int, Span], ...]

    @property
    def halo_voxels(self) -> int:
        """Voxels received from other ranks (per sample and channel)."""
        return sum(math.prod(span_size(b)) for _, b in self.recvs)


def plan_exchange(block_spans: Sequence[Span], needs: Sequence[Span], extent: Sequence[int],
                  me: int, rank_of: Callable[[int], int]) -> Exchange:
    """The exchange of spatial rank ``me`` when spatial rank ``q`` owns ``block_spans[q]``
    and needs ``needs[q]`` (unclipped).  ``rank_of(q)``: the global rank of spatial rank ``q``."""
    whole = tuple((0, int(e)) for e in extent)
    clipped = [_intersect(n, whole) for n in needs]
    own = block_spans[me]
    sends, recvs = [], []
    for q, blk in enumerate(block_spans):
        if q == me:
            continue
        if clipped[q] is not None and (box := _intersect(own, clipped[q])) is not None:
            sends.append((rank_of(q), box))
        if clipped[me] is not None and (box := _intersect(blk, clipped[me])) is not None:
            recvs.append((rank_of(q), box))
    local = _intersect(own, clipped[me]) if clipped[me] is not None else None
    return Exchange(own, tuple(needs[me]), local, tuple(sends), tuple(recvs))


def _p2p(sends: list[tuple[int, torch.Tensor]], recvs: list[tuple[int, torch.Tensor]]) -> None:
    comm.send_recv(sends, recvs)


def _assemble(x: torch.Tensor, ex: Exchange, fill: float, keep: bool = False):
    """The span ``ex.need`` from this rank's block ``x`` and the neighbours' boxes
    (``keep``: also return the received boxes, to rebuild the span without traffic)."""
    n, c = x.shape[:2]
    bufs = [(peer, box, x.new_empty((n, c, *span_size(box)))) for peer, box in ex.recvs]
    _p2p([(peer, x[_slices(box, ex.own)].contiguous()) for peer, box in ex.sends],
         [(peer, buf) for peer, _, buf in bufs])
    out = _rebuild(x, [buf for _, _, buf in bufs], ex, fill)
    return (out, [buf for _, _, buf in bufs]) if keep else out


def _rebuild(x: torch.Tensor, bufs: Sequence[torch.Tensor], ex: Exchange, fill: float) -> torch.Tensor:
    n, c = x.shape[:2]
    out = x.new_full((n, c, *span_size(ex.need)), fill)
    if ex.local is not None:
        out[_slices(ex.local, ex.need)] = x[_slices(ex.local, ex.own)]
    for (_, box), buf in zip(ex.recvs, bufs):
        out[_slices(box, ex.need)] = buf
    return out


def _accumulate(g: torch.Tensor, ex: Exchange) -> torch.Tensor:
    """Transpose of :func:`_assemble`: gradient of the assembled span -> gradient of ``own``."""
    n, c = g.shape[:2]
    gx = g.new_zeros((n, c, *span_size(ex.own)))
    if ex.local is not None:
        gx[_slices(ex.local, ex.own)] += g[_slices(ex.local, ex.need)]
    bufs = [(peer, box, g.new_empty((n, c, *span_size(box)))) for peer, box in ex.sends]
    _p2p([(peer, g[_slices(box, ex.need)].contiguous()) for peer, box in ex.recvs],
         [(peer, buf) for peer, _, buf in bufs])
    for _, box, buf in bufs:
        gx[_slices(box, ex.own)] += buf
    return gx


class _Halo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ex: Exchange, fill: float):
        ctx.ex = ex
        return _assemble(x.detach().contiguous(), ex, fill)

    @staticmethod
    def backward(ctx, g):
        return _accumulate(g.contiguous(), ctx.ex), None, None


def halo(x: torch.Tensor, ex: Exchange, fill: float = 0.0) -> torch.Tensor:
    """``x`` (this rank's block ``ex.own``) -> the tensor of span ``ex.need``."""
    return _Halo.apply(x, ex, fill)


@dataclass(frozen=True)
class LayerOp:
    """A window layer run on the assembled span: ``kind`` ``'conv'``, ``'convt'``,
    ``'avgpool'`` or ``'maxpool'``; ``pads``: zero padding the op adds at the global
    boundary (``((lo, hi),) * 3``, conv only); ``crop``: output rows kept (``((lo, hi),) * 3``,
    transposed conv only)."""

    kind: str
    kernel: tuple[int, int, int]
    stride: tuple[int, int, int]
    groups: int = 1
    pads: tuple = ((0, 0),) * 3
    crop: tuple | None = None
    divisor: int | None = None


def _conv_pads(pads, kernel, stride, span) -> tuple[list[int], list[int], tuple[slice, ...] | None]:
    """How a conv on the span realises the boundary padding ``pads``: the convolution's own
    symmetric padding per dim, the rest added with ``F.pad`` (order W, H, D), and the output
    rows kept (``None``: all).

    Per dim the convolution pads ``max(lo, hi)`` on both sides when that keeps its output
    grid aligned (the surplus rows on the short side are a multiple of the stride), and the
    surplus output rows are cropped; otherwise it pads ``min(lo, hi)`` and ``F.pad`` the rest.
    So a rank computes with the kernels of the single-process layer: CPU convolutions
    accumulate differently with and without their own padding (``bench/training_equivalence.py``:
    CosmoFlow's first float32 weight gradient on 1 x 2x1x1 came 1.2e-5 from the single-process
    one with ``F.pad``, 3.1e-6 with this split)."""
    sym, flat, crop, cropped = [], [0] * 6, [], False
    for d, ((lo, hi), k, s, n) in enumerate(zip(pads, kernel, stride, span)):
        big = max(lo, hi)
        want = (n + lo + hi - k) // s + 1
        if (big - lo) % s == 0:
            sym.append(big)
            c0 = (big - lo) // s
            cropped |= c0 != 0 or (n + 2 * big - k) // s + 1 != want
            crop.append(slice(c0, c0 + want))
        else:
            m = min(lo, hi)
            sym.append(m)
            flat[2 * (2 - d)], flat[2 * (2 - d) + 1] = lo - m, hi - m
            crop.append(slice(None))
    return sym, flat, ((slice(None), slice(None)) + tuple(crop)) if cropped else None


class _HaloLayer(torch.autograd.Function):
    """Halo exchange + one window layer.  Saves this rank's block (shared with the layer
    that produced it) and the received halo boxes, not the assembled span: the backward
    rebuilds the span without traffic, so a rank holds its block's activations plus halos."""

    @staticmethod
    def forward(ctx, x, weight, bias, ex: Exchange, op: LayerOp):
        fill = float("-inf") if op.kind == "maxpool" else 0.0
        xd = x.detach()
        ext, bufs = _assemble(xd, ex, fill, keep=True)
        indices = None
        if op.kind == "conv":
            sym, flat, crop = _conv_pads(op.pads, op.kernel, op.stride, ext.shape[2:])
            y = F.conv3d(F.pad(ext, flat) if any(flat) else ext, weight, bias, op.stride, sym, 1, op.groups)
            if crop is not None:
                ctx.full_shape = y.shape
                y = y[crop]
        elif op.kind == "convt":
            y = F.conv_transpose3d(ext, weight, bias, op.stride, 0, 0, op.groups, 1)
            ctx.full_shape = y.shape
            y = y[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in op.crop)]
        elif op.kind == "avgpool":
            y = F.avg_pool3d(ext, op.kernel, op.stride, 0, False, True, op.divisor)
        elif op.kind == "maxpool":
            y, indices = F.max_pool3d(ext, op.kernel, op.stride, 0, 1, False, True)
        else:
            raise ValueError(f"unknown layer kind {op.kind!r}")
        ctx.ex, ctx.op, ctx.fill, ctx.n_bufs = ex, op, fill, len(bufs)
        ctx.has_w, ctx.has_b = weight is not None, bias is not None
        ctx.save_for_backward(xd, weight, indices, *bufs)
        return y.contiguous()

    @staticmethod
    def backward(ctx, g):
        xd, weight, indices, *bufs = ctx.saved_tensors
        ex, op = ctx.ex, ctx.op
        ext = _rebuild(xd, bufs, ex, ctx.fill)
        g = g.contiguous()
        gw = gb = None
        if op.kind == "conv":
            sym, flat, crop = _conv_pads(op.pads, op.kernel, op.stride, ext.shape[2:])
            xp = F.pad(ext, flat) if any(flat) else ext
            if crop is not None:
                gfull = g.new_zeros(ctx.full_shape)
                gfull[crop] = g
                g = gfull
            gi, gw, gb = torch.ops.aten.convolution_backward(
                g, xp, weight, [weight.shape[0]] if ctx.has_b else None, list(op.stride), sym,
                [1, 1, 1], False, [0, 0, 0], op.groups, [True, ctx.needs_input_grad[1], ctx.has_b])
            if any(flat):
                w0, w1, h0, h1, d0, d1 = flat
                gi = gi[:, :, d0:gi.shape[2] - d1, h0:gi.shape[3] - h1, w0:gi.shape[4] - w1]
        elif op.kind == "convt":
            gfull = g.new_zeros(ctx.full_shape)
            gfull[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in op.crop)] = g
            gi, gw, gb = torch.ops.aten.convolution_backward(
                gfull, ext, weight, [weight.shape[1] * op.groups] if ctx.has_b else None, list(op.stride),
                [0, 0, 0], [1, 1, 1], True, [0, 0, 0], op.groups, [True, ctx.needs_input_grad[1], ctx.has_b])
        elif op.kind == "avgpool":
            gi = torch.ops.aten.avg_pool3d_backward(g, ext, list(op.kernel), list(op.stride), [0, 0, 0],
                                                    False, True, op.divisor)
        else:
            gi = torch.ops.aten.max_pool3d_with_indices_backward(g, ext, list(op.kernel), list(op.stride),
                                                                 [0, 0, 0], [1, 1, 1], False, indices)
        gx = _accumulate(gi.contiguous(), ex)
        return gx, gw, gb, None, None


def halo_layer(x: torch.Tensor, weight, bias, ex: Exchange, op: LayerOp) -> torch.Tensor:
    """Layer ``op`` on this rank's output block, reading the span ``ex.need`` (halo
    exchange forward, halo-gradient accumulation backward)."""
    return _HaloLayer.apply(x, weight, bias, ex, op)


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, ex: Exchange):
        ctx.ex = ex
        return _assemble(x.detach().contiguous(), ex, 0.0)

    @staticmethod
    def backward(ctx, g):
        return g[_slices(ctx.ex.own, ctx.ex.need)].contiguous(), None


def gather_spatial(x: torch.Tensor, ex: Exchange) -> torch.Tensor:
    """The whole volume (``ex.need`` = the extent) on every rank of the spatial group;
    backward returns this rank's block of the (replicated) gradient."""
    return _Gather.apply(x, ex)


class _GatherBatch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, counts: tuple[int, ...], index: int, group):
        ctx.rows = (sum(counts[:index]), sum(counts[:index + 1]))
        pad = max(counts)
        buf = x.new_zeros((pad, *x.shape[1:]))
        buf[:len(x)] = x.detach()
        parts = [torch.empty_like(buf) for _ in counts]
        comm.all_gather(parts, buf.contiguous(), group=group)
        return torch.cat([p[:c] for p, c in zip(parts, counts)])

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.rows
        return g[a:b].contiguous(), None, None, None


def gather_batch(x: torch.Tensor, counts: Sequence[int], index: int, group) -> torch.Tensor:
    """The samples of every data replica of ``group`` (``counts[i]`` rows from member ``i``;
    this rank is member ``index``) on every member; backward returns this rank's rows of the
    (replicated) gradient."""
    if group is None:
        return x
    return _GatherBatch.apply(x, tuple(int(c) for c in counts), int(index), group)


class _Shared(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, parts: int):
        ctx.parts = parts
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g / ctx.parts, None


def shared_grad(x: torch.Tensor, parts: int) -> torch.Tensor:
    """Identity whose gradient is divided by ``parts``: for a tensor of the sharded part
    (e.g. a quantizer scale) that the replicated tail uses alike on ``parts`` ranks, so that
    the all-reduce of the sharded gradients counts the tail's contribution once."""
    return x if parts == 1 else _Shared.apply(x, parts)


# --- BatchNorm over a group ----------------------------------------------------------------


def _all_reduce(t: torch.Tensor, group) -> torch.Tensor:
    if group is not None:
        comm.all_reduce(t, group=group)
    return t


class _SyncBN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps: float, momentum: float,
                group):
        c = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        # per-channel sums in float64 (what torch's CPU batch norm accumulates in), one channel
        # at a time to bound the transient copy
        s1 = torch.stack([x[:, i].double().sum() for i in range(c)])
        s2 = torch.stack([x[:, i].double().square().sum() for i in range(c)])
        count = torch.tensor([x.numel() // c], dtype=torch.float64, device=x.device)
        stats = _all_reduce(torch.cat([s1, s2, count]), group)
        n = stats[-1]
        mean = stats[:c] / n
        var = (stats[c:2 * c] / n - mean * mean).clamp_min(0.0)
        invstd = 1.0 / torch.sqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                unbiased = var * n / max(float(n) - 1.0, 1.0)
                running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
                running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
        shape = [1, c] + [1] * (x.dim() - 2)
        mean_f = mean.to(x.dtype).view(shape)
        invstd_f = invstd.to(x.dtype).view(shape)
        # torch's CPU transform, operation for operation: y = x * alpha + beta with
        # alpha = invstd * w, beta = b - mean * alpha (float32)
        alpha = invstd_f * weight.view(shape)
        beta = bias.view(shape) - mean_f * alpha
        y = x * alpha + beta
        ctx.save_for_backward(x, weight, mean_f, invstd_f)
        ctx.group, ctx.n, ctx.dims = group, float(n), dims
        return y

    @staticmethod
    def backward(ctx, g):
        # torch's CPU batch-norm backward, with the two per-channel sums (float64, like
        # torch's accumulators) over the group
        x, weight, mean_f, invstd_f = ctx.saved_tensors
        c = x.shape[1]
        shape = [1, c] + [1] * (x.dim() - 2)
        xc = x - mean_f
        sum_g = torch.stack([g[:, i].sum(dtype=torch.float64) for i in range(c)])
        dot = torch.stack([(g[:, i] * xc[:, i]).sum(dtype=torch.float64) for i in range(c)])
        tot = _all_reduce(torch.cat([sum_g, dot]), ctx.group)
        invstd = invstd_f.reshape(-1).double()
        mean_g = (tot[:c] / ctx.n).to(x.dtype).view(shape)
        k = (tot[c:] * invstd * invstd / ctx.n).to(x.dtype).view(shape)
        gx = (g - mean_g - xc * k) * invstd_f * weight.view(shape)  # torch's order of operations
        # parameter gradients: this rank's partial sums (the gradient all-reduce adds them)
        return gx, (dot * invstd).to(x.dtype), sum_g.to(x.dtype), None, None, None, None, None


def sync_batch_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                    running_mean: torch.Tensor | None, running_var: torch.Tensor | None,
                    eps: float, momentum: float, group) -> torch.Tensor:
    """Training-mode BatchNorm with statistics over ``group`` (``None``: this rank only)."""
    return _SyncBN.apply(x, weight, bias, running_mean, running_var, eps, momentum, group)


# --- the activation quantizers' percentile statistic ------------------------------------------


class _DistKth(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, q: float, group):
        a = x.detach().abs().reshape(-1)
        n_local = a.numel()
        n = int(_all_reduce(torch.tensor([n_local], dtype=torch.int64, device=x.device), group).item())
        k = int(math.floor(0.01 * q * n + 0.5))  # brevitas' AbsPercentile: 1-indexed k-th smallest
        m = n - k + 1                              # = m-th largest
        t = min(m, n_local)
        buf = a.new_full((m,), -1.0)
        buf[:t] = a.topk(t).values
        if group is not None:
            parts = [torch.empty_like(buf) for _ in range(dist.get_world_size(group))]
            comm.all_gather(parts, buf, group=group)
            buf = torch.cat(parts)
        value = buf.topk(m).values[-1]
        # every element equal to the value (ties are common on a quantized grid) gets an
        # equal share of the gradient: a choice that does not depend on the sharding
        ties = torch.nonzero(a == value).reshape(-1)
        count = _all_reduce(torch.tensor([ties.numel()], dtype=torch.int64, device=x.device), group)
        ctx.group, ctx.shape, ctx.count = group, x.shape, int(count.item())
        ctx.save_for_backward(ties, torch.sign(x.detach().reshape(-1)[ties]))
        return value.clone()

    @staticmethod
    def backward(ctx, g):
        ties, sign = ctx.saved_tensors
        g = _all_reduce(g.detach().clone().reshape(1), ctx.group)
        gx = g.new_zeros(ctx.shape)
        gx.view(-1)[ties] = g[0] / ctx.count * sign
        return gx, None, None


def dist_abs_percentile(x: torch.Tensor, q: float, group) -> torch.Tensor:
    """brevitas ``AbsPercentile(q)`` of the tensor formed by ``x`` on every rank of ``group``."""
    return _DistKth.apply(x, q, group)
