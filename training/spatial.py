"""Spatially sharded execution of a 3D CNN: :class:`SpatialModel`.

The model object is the unchanged single-process network (same modules, same parameter
names, same ``state_dict``; checkpoints and exports are those of
:mod:`tessera.models.train3d`).  :func:`SpatialModel` rewires it in place for one rank:

* ``Conv3d`` / brevitas ``QuantConv3d``: the convolution itself (after brevitas quantized
  the input, weights and bias) runs on the halo-extended block with the zero padding of the
  global boundary only (:func:`tessera.training.halo.halo_layer`);
* ``ConvTranspose3d`` / ``QuantConvTranspose3d``: runs on the inputs its output block
  gathers from and keeps its output block;
* ``AvgPool3d`` (``count_include_pad``), ``MaxPool3d``: the same scheme (max pooling pads
  with ``-inf``); nearest ``Upsample``: halo rows, repeat, crop;
* ``BatchNorm3d`` is replaced by :class:`DistBatchNorm3d` (same parameters and buffers,
  statistics over the mesh);
* every brevitas runtime activation statistic (``AbsPercentile``, the first
  ``ACT_STATS_STEPS`` training steps of each activation quantizer) becomes exact over the
  ranks that hold distinct parts of the tensor;
* the dense tail (CosmoFlow: from ``flatten``, or earlier when a block would get empty --
  paper 1: stay spatial while the volume is large) receives the gathered volumes of the whole
  mini-batch and runs alike on every rank.

Which input rows a rank needs is computed by the per-dimension rules of
:mod:`tessera.compiler.partition.regions` (``window_input``, ``transposed_input``,
``upsample_input``).  Elementwise layers (activations, quantizers, concatenation) need no
change: all tensors of one extent are split alike.

Gradients: call :meth:`SpatialModel.reduce_gradients` after ``backward``: the sharded
layers' parameter gradients are partial sums (summed over all ranks); the tail's are
complete on every rank.  The loss must be normalised by the *global* mini-batch (a tail's
output is the whole mini-batch's; a per-voxel output is the rank's block of its samples).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from ..compiler.errors import UnsupportedModelError
from ..compiler.partition.regions import transposed_input, upsample_input, window_input
from . import comm
from .halo import (Exchange, LayerOp, blocks, dist_abs_percentile, gather_batch, gather_spatial, halo, halo_layer,
                   plan_exchange, shared_grad, span_size, sync_batch_norm)
from .mesh import Mesh

__all__ = ["DistBatchNorm3d", "SpatialModel", "conv_extent", "shard_batch", "use_shared_percentile"]


def _t3(v) -> tuple[int, int, int]:
    return tuple(v) if isinstance(v, (tuple, list)) else (int(v),) * 3


def conv_extent(e: int, k: int, s: int, p: int, ceil_mode: bool = False) -> int:
    """Output extent of a window op (dilation 1)."""
    n = e + 2 * p - k
    return (-(-n // s) if ceil_mode else n // s) + 1


def _value(x):
    return x.value if hasattr(x, "value") and not isinstance(x, torch.Tensor) else x


def _with_value(x, v):
    """``v`` in place of the tensor of ``x`` (a brevitas QuantTensor keeps its scale etc.)."""
    return v if isinstance(x, torch.Tensor) else x.set(value=v)


@dataclass
class _Flow:
    """The global extent of the activation entering the next sharded spatial layer.

    Set from the input at every forward; each sharded layer checks that its input block
    has the size the extent implies and advances it to its output extent.  (The models'
    spatial layers form a chain: every one reads the previous one's output or a tensor of
    the same extent -- U-Net concatenations.)"""

    extent: tuple[int, int, int] | None = None


class DistBatchNorm3d(nn.BatchNorm3d):
    """``BatchNorm3d`` whose training statistics are reduced over ``group``."""

    def __init__(self, bn: nn.BatchNorm3d, group):
        super().__init__(bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats)
        if not bn.affine or not bn.track_running_stats or bn.momentum is None:
            raise UnsupportedModelError("sharded BatchNorm needs affine=True, running stats and a momentum")
        self.weight, self.bias = bn.weight, bn.bias
        self.running_mean, self.running_var = bn.running_mean, bn.running_var
        self.num_batches_tracked = bn.num_batches_tracked
        self.group = group

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        self.num_batches_tracked.add_(1)
        return sync_batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                               self.eps, self.momentum, self.group)


class _DistPercentile(nn.Module):
    """Drop-in for brevitas' ``AbsPercentile`` (no parameters or buffers)."""

    def __init__(self, q: float, group):
        super().__init__()
        self.q = q
        self.group = group

    def forward(self, x):
        return dist_abs_percentile(x, self.q, self.group)


def use_shared_percentile(net: nn.Module, group=None, skip: set[int] = frozenset()) -> nn.Module:
    """Replace every brevitas ``AbsPercentile`` statistic of ``net`` (in place) by the
    exact statistic over ``group`` (``None``: this process) whose gradient is shared by tied
    elements (:func:`tessera.training.halo.dist_abs_percentile`); modules whose id is in
    ``skip`` are left alone.  With ``group=None`` this is the single-process form that
    sharded training equals."""
    for parent in list(net.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__ == "AbsPercentile" and id(child) not in skip:
                if child.stats_reduce_dim is not None:
                    raise UnsupportedModelError("per-channel activation statistics are not supported sharded")
                setattr(parent, name, _DistPercentile(child.q, group))
    return net


def shard_batch(n: int, parts: int, index: int) -> slice:
    """Samples of data replica ``index``: ``[n*i//k, n*(i+1)//k)`` (the block convention)."""
    return slice(n * index // parts, n * (index + 1) // parts)


class SpatialModel(nn.Module):
    """``net`` (CosmoFlow / U-Net / a plain ``nn.Sequential`` of 3D layers) sharded over
    ``mesh`` for inputs of global spatial extent ``extent``.

    ``forward(x)``: ``x`` is this rank's block ``(n, C, *block)`` of the ``n`` samples of its
    data replica; returns the tail's output for the whole mini-batch (every rank alike) or,
    for a fully convolutional net, this rank's output block of its samples.

    ``bn_stats``: ``'global'`` (BatchNorm statistics over the whole mini-batch, every rank:
    equals single-process training) or ``'replica'`` (over the spatial group only: each data
    replica normalises over its own samples, like plain data-parallel BatchNorm).
    """

    def __init__(self, net: nn.Module, mesh: Mesh, extent: Sequence[int], bn_stats: str = "global"):
        super().__init__()
        if bn_stats not in ("global", "replica"):
            raise ValueError(f"bn_stats must be 'global' or 'replica', not {bn_stats!r}")
        self.net = net
        self.mesh = mesh
        self.extent = tuple(int(e) for e in extent)
        self.flow = _Flow()
        self.batch_counts: list[int] | None = None
        self.exchanges: dict[tuple, Exchange] = {}
        sharded, tail = self._split(net)
        self.tail_modules = tail
        world = mesh.world_group if mesh.world > 1 else None
        data = mesh.data_group if mesh.data > 1 else None
        spatial = mesh.spatial_group if mesh.grid.size > 1 else None
        bn_sharded = world if bn_stats == "global" else spatial
        tail_ids = {id(m) for t in tail for m in t.modules()}
        for parent in list(net.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.BatchNorm3d) and not isinstance(child, DistBatchNorm3d):
                    if id(child) not in tail_ids:
                        setattr(parent, name, DistBatchNorm3d(child, bn_sharded))
        # the tail runs on the whole mini-batch on every rank: its statistics are local
        for t in tail:
            use_shared_percentile(t, None)
        use_shared_percentile(net, world, skip=tail_ids)
        for m in sharded:
            self._shard(m)
        self._gather_before = self._install_gather(net, tail)
        tail_params = {id(p) for t in tail for p in t.parameters()}
        self.sharded_params = [p for p in net.parameters() if id(p) not in tail_params]
        self.tail_params = [p for p in net.parameters() if id(p) in tail_params]

    # --- which layers are sharded -----------------------------------------------------

    def _split(self, net: nn.Module) -> tuple[list[nn.Module], list[nn.Module]]:
        """(spatial modules to shard, top-level modules of the replicated tail)."""
        grid = self.mesh.grid.dims
        spatial_types = (nn.Conv3d, nn.ConvTranspose3d, nn.AvgPool3d, nn.MaxPool3d, nn.Upsample)
        if any(g > n for g, n in zip(grid, self.extent)):
            raise UnsupportedModelError(f"spatial grid {self.mesh.grid} is finer than the input "
                                        f"{'x'.join(map(str, self.extent))}")
        if hasattr(net, "features") and hasattr(net, "head"):  # CosmoFlow
            # gather before the first spatial layer whose output would leave a rank without voxels
            e, cut = self.extent, len(net.features)
            for i, m in enumerate(net.features):
                out = self._out_extent(m, e)
                if isinstance(m, spatial_types) and any(g > n for g, n in zip(grid, out)):
                    cut = i
                    break
                e = out
            self._cut = cut
            feats = list(net.features)
            sharded = [m for f in feats[:cut] for m in f.modules() if isinstance(m, spatial_types)]
            return sharded, feats[cut:] + [net.flatten, net.head]
        self._cut = None
        return [m for m in net.modules() if isinstance(m, spatial_types)], []

    @staticmethod
    def _out_extent(m: nn.Module, e: tuple[int, ...]) -> tuple[int, ...]:
        if isinstance(m, nn.Conv3d):
            k, s, p = _t3(m.kernel_size), _t3(m.stride), _t3(m.padding)
            return tuple(conv_extent(n, k[i], s[i], p[i]) for i, n in enumerate(e))
        if isinstance(m, (nn.AvgPool3d, nn.MaxPool3d)):
            k, s, p = _t3(m.kernel_size), _t3(m.stride or m.kernel_size), _t3(m.padding)
            return tuple(conv_extent(n, k[i], s[i], p[i], m.ceil_mode) for i, n in enumerate(e))
        if isinstance(m, nn.ConvTranspose3d):
            k, s, p, op = _t3(m.kernel_size), _t3(m.stride), _t3(m.padding), _t3(m.output_padding)
            return tuple((n - 1) * s[i] - 2 * p[i] + k[i] + op[i] for i, n in enumerate(e))
        if isinstance(m, nn.Upsample):
            f = _t3(m.scale_factor)
            return tuple(int(n * f[i]) for i, n in enumerate(e))
        return e

    # --- exchanges ----------------------------------------------------------------------

    def _exchange(self, key, in_extent, out_extent, rule, clip: bool = False):
        """The halo exchange of a layer mapping ``in_extent`` to ``out_extent``; ``rule(d, a,
        b)`` -> input rows ``[lo, hi)`` read by output rows ``[a, b)`` along dim ``d``.

        ``clip``: assemble only rows inside the volume and return, with the exchange, the
        zero padding ``((lo, hi) per dim)`` the layer adds itself at the global boundary."""
        k = (key, in_extent, out_extent, clip)
        if k not in self.exchanges:
            g = self.mesh.grid.dims
            ins, outs = blocks(in_extent, g), blocks(out_extent, g)
            needs = [tuple(rule(d, a, b) for d, (a, b) in enumerate(o)) for o in outs]
            mine = needs[self.mesh.spatial_index]
            pads = tuple((max(0, -lo), max(0, hi - n)) for (lo, hi), n in zip(mine, in_extent))
            if clip:
                needs = [tuple((max(0, lo), min(n, hi)) for (lo, hi), n in zip(nd, in_extent)) for nd in needs]
            ex = plan_exchange(ins, needs, in_extent, self.mesh.spatial_index, self.mesh.spatial_rank)
            self.exchanges[k] = (ex, pads if clip else ((0, 0),) * 3)
        return self.exchanges[k]

    def _enter(self, m: nn.Module, x: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
        e = self.flow.extent
        if e is None:
            raise RuntimeError("SpatialModel layers called outside SpatialModel.forward")
        want = span_size(blocks(e, self.mesh.grid.dims)[self.mesh.spatial_index])
        if tuple(x.shape[2:]) != want:
            raise UnsupportedModelError(
                f"{type(m).__name__}: local input {tuple(x.shape[2:])} is not this rank's block {want} "
                f"of extent {e} (the sharded layers must form a chain)")
        out = self._out_extent(m, e)
        if any(g > n for g, n in zip(self.mesh.grid.dims, out)):
            raise UnsupportedModelError(
                f"{type(m).__name__}: output extent {'x'.join(map(str, out))} is smaller than the spatial grid "
                f"{self.mesh.grid}; use a coarser --spatial grid or a larger input")
        return e, out

    def _shard(self, m: nn.Module) -> None:
        if isinstance(m, nn.Conv3d):
            if getattr(m, "return_quant_tensor", False) or m.padding_mode != "zeros" or _t3(m.dilation) != (1, 1, 1):
                raise UnsupportedModelError(f"{type(m).__name__}: only zero padding, dilation 1 and float outputs shard")
            m._conv_forward = functools.partial(self._conv_forward, m)
        elif isinstance(m, nn.ConvTranspose3d):
            if _t3(m.dilation) != (1, 1, 1) or m.groups != 1:
                raise UnsupportedModelError(f"{type(m).__name__}: only dilation 1, groups 1 shard")
            if hasattr(m, "conv_transpose3d_zeros_pad"):  # brevitas
                m.conv_transpose3d_zeros_pad = functools.partial(self._convt_brevitas, m)
            else:
                m.forward = functools.partial(self._convt_forward, m)
        elif isinstance(m, (nn.AvgPool3d, nn.MaxPool3d)):
            if isinstance(m, nn.AvgPool3d) and _t3(m.padding) != (0, 0, 0) and not m.count_include_pad:
                raise UnsupportedModelError("AvgPool3d with padding shards only with count_include_pad=True")
            if isinstance(m, nn.MaxPool3d) and (_t3(m.dilation) != (1, 1, 1) or m.return_indices):
                raise UnsupportedModelError("MaxPool3d: only dilation 1 without indices shards")
            m.forward = functools.partial(self._pool_forward, m)
        elif isinstance(m, nn.Upsample):
            if m.mode != "nearest" or m.scale_factor is None or any(float(f) != int(f) for f in _t3(m.scale_factor)):
                raise UnsupportedModelError("Upsample: only nearest with integer scale factors shards")
            m.forward = functools.partial(self._upsample_forward, m)

    # --- sharded layer bodies -------------------------------------------------------------

    def _conv_forward(self, m, inp, weight, bias):
        x = _value(inp)
        e, out = self._enter(m, x)
        k, s, p = _t3(m.kernel_size), _t3(m.stride), _t3(m.padding)
        ex, pads = self._exchange(id(m), e, out, lambda d, a, b: window_input(a, b, k[d], s[d], p[d]), clip=True)
        y = halo_layer(x, _value(weight), _value(bias), ex, LayerOp("conv", k, s, m.groups, pads))
        self.flow.extent = out
        return y

    def _convt(self, m, x, weight, bias):
        e, out = self._enter(m, x)
        k, s, p = _t3(m.kernel_size), _t3(m.stride), _t3(m.padding)
        ex, _ = self._exchange(id(m), e, out, lambda d, a, b: transposed_input(a, b, k[d], s[d], p[d]))
        own_out = blocks(out, self.mesh.grid.dims)[self.mesh.spatial_index]
        # local output row t of the transposed conv on the span is global row need_lo * s - p + t
        lo = [a - (n0 * s[d] - p[d]) for d, ((a, _), (n0, _)) in enumerate(zip(own_out, ex.need))]
        full = [(n1 - n0 - 1) * s[d] + k[d] for d, (n0, n1) in enumerate(ex.need)]
        size = span_size(own_out)
        if any(lo[d] + size[d] > full[d] for d in range(3)):
            raise UnsupportedModelError("ConvTranspose3d with output_padding does not shard")
        crop = tuple((lo[d], lo[d] + size[d]) for d in range(3))
        self.flow.extent = out
        return halo_layer(x, weight, bias, ex, LayerOp("convt", k, s, m.groups, crop=crop))

    def _convt_brevitas(self, m, x, weight, bias, output_padding):
        return self._convt(m, _value(x), _value(weight), _value(bias))

    def _convt_forward(self, m, x):
        return self._convt(m, x, m.weight, m.bias)

    def _pool_forward(self, m, inp):
        x = _value(inp)
        e, out = self._enter(m, x)
        k, s, p = _t3(m.kernel_size), _t3(m.stride or m.kernel_size), _t3(m.padding)
        if m.ceil_mode:
            raise UnsupportedModelError("pooling with ceil_mode does not shard")
        maxp = isinstance(m, nn.MaxPool3d)
        ex, _ = self._exchange(id(m), e, out, lambda d, a, b: window_input(a, b, k[d], s[d], p[d]))
        self.flow.extent = out
        op = LayerOp("maxpool" if maxp else "avgpool", k, s, divisor=None if maxp else m.divisor_override)
        y = halo_layer(x, None, None, ex, op)
        # as brevitas: max pooling keeps a QuantTensor's scale, average pooling returns a tensor
        return _with_value(inp, y) if maxp else y

    def _upsample_forward(self, m, inp):
        x = _value(inp)
        e, out = self._enter(m, x)
        f = tuple(int(v) for v in _t3(m.scale_factor))
        ex, _ = self._exchange(id(m), e, out, lambda d, a, b: upsample_input(a, b, f[d]))
        y = halo(x, ex)
        for d in range(3):
            y = y.repeat_interleave(f[d], dim=2 + d)
        own_out = blocks(out, self.mesh.grid.dims)[self.mesh.spatial_index]
        lo = [a - n0 * f[d] for d, ((a, _), (n0, _)) in enumerate(zip(own_out, ex.need))]
        size = span_size(own_out)
        self.flow.extent = out
        return _with_value(inp, y[:, :, lo[0]:lo[0] + size[0], lo[1]:lo[1] + size[1], lo[2]:lo[2] + size[2]])

    # --- gather before the tail -------------------------------------------------------------

    def _install_gather(self, net, tail) -> nn.Module | None:
        if not tail:
            return None
        first = tail[0]

        def pre_hook(mod, args):
            (inp,) = args
            x = _value(inp)
            e = self.flow.extent
            whole = tuple((0, n) for n in e)
            key = ("gather", e)
            if key not in self.exchanges:
                self.exchanges[key] = plan_exchange(
                    blocks(e, self.mesh.grid.dims), [whole] * self.mesh.grid.size, e,
                    self.mesh.spatial_index, self.mesh.spatial_rank)
            full = gather_spatial(x, self.exchanges[key])
            if self.batch_counts is not None:
                full = gather_batch(full, self.batch_counts, self.mesh.data_index, self.mesh.data_group)
            if isinstance(inp, torch.Tensor):
                return (full,)
            # a brevitas QuantTensor: its scale / zero point come from the sharded part and
            # reach the tail's gradient on every rank alike
            w = self.mesh.world
            return (inp.set(value=full, scale=shared_grad(inp.scale, w),
                            zero_point=shared_grad(inp.zero_point, w)),)

        first.register_forward_pre_hook(pre_hook)
        return first

    # --- forward / gradients ------------------------------------------------------------------

    def input_block(self) -> tuple[tuple[int, int], ...]:
        """This rank's span of the input volume."""
        return blocks(self.extent, self.mesh.grid.dims)[self.mesh.spatial_index]

    def forward(self, x):
        self.flow.extent = self.extent
        want = span_size(self.input_block())
        if tuple(x.shape[2:]) != want:
            raise UnsupportedModelError(f"input block {tuple(x.shape[2:])} != this rank's block {want}")
        self.batch_counts = None
        if self.tail_modules and self.mesh.data > 1:
            n = torch.tensor([len(x)], dtype=torch.int64, device=x.device)
            counts = [torch.empty_like(n) for _ in range(self.mesh.data)]
            comm.all_gather(counts, n, group=self.mesh.data_group)
            self.batch_counts = [int(c) for c in counts]
        try:
            return self.net(x)
        finally:
            self.flow.extent = None

    def reduce_gradients(self) -> None:
        """Sum the sharded layers' partial gradients over all ranks (one flattened
        ``all_reduce``).  The tail's gradients need none: every rank computed them on the
        whole mini-batch."""
        grads = [p.grad for p in self.sharded_params if p.grad is not None]
        if self.mesh.world == 1 or not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        comm.all_reduce(flat, group=self.mesh.world_group)
        off = 0
        for g in grads:
            g.copy_(flat[off:off + g.numel()].view_as(g))
            off += g.numel()
