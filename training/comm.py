"""The collectives of the trainer on the device its tensors live on.

Every point-to-point transfer and collective of :mod:`.halo`, :mod:`.spatial` and the
trainer goes through these functions.  NCCL takes CUDA tensors; gloo takes host tensors for
every operation and CUDA tensors for only some of them (its point-to-point ``send`` /
``recv`` read host memory).  So several ranks can share one GPU -- which NCCL refuses --
with gloo as their backend: a CUDA tensor is copied into host memory, exchanged there, and
the result copied back (:func:`host_staged`).  The values are the same bytes; only the
transfer takes the longer way.

Small bookkeeping tensors (counts, byte totals, group member lists) are made on
:func:`bookkeeping_device`: NCCL has no host-memory path, so under NCCL they go to the
current GPU.

:data:`STAGE_ALWAYS` stages host tensors too (copies into fresh host buffers): the tests
run the staging path on CPU with it (tests/training/test_comm.py), and :data:`STAGED`
counts the staged operations and the bytes copied (both ways).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.distributed as dist

__all__ = ["STAGED", "STAGE_ALWAYS", "all_gather", "all_reduce", "bookkeeping_device", "host_staged", "send_recv"]

#: stage every tensor through a host copy, host tensors included (tests of the staging path)
STAGE_ALWAYS = False
#: operations and bytes that went through host copies in this process
STAGED = {"ops": 0, "bytes": 0}


def host_staged(t: torch.Tensor, group=None) -> bool:
    """Whether an operation on ``t`` over ``group`` goes through a host copy: gloo and a
    tensor outside host memory (or :data:`STAGE_ALWAYS`)."""
    if STAGE_ALWAYS:
        return True
    return t.device.type != "cpu" and dist.get_backend(group) == "gloo"


def bookkeeping_device() -> torch.device:
    """Where a small tensor for a collective of the default group must live: the current
    GPU under NCCL, host memory otherwise."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _host_copy(t: torch.Tensor) -> torch.Tensor:
    h = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=t.is_cuda)
    h.copy_(t)
    STAGED["ops"] += 1
    STAGED["bytes"] += t.numel() * t.element_size()
    return h


def _host_empty(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=t.is_cuda)


def send_recv(sends: Sequence[tuple[int, torch.Tensor]], recvs: Sequence[tuple[int, torch.Tensor]]) -> None:
    """Send each ``(peer, tensor)`` of ``sends`` and receive into each ``(peer, tensor)`` of
    ``recvs`` (global ranks, default group), all at once (``batch_isend_irecv``)."""
    staged = any(host_staged(t) for _, t in list(sends) + list(recvs))
    if staged:
        sends = [(peer, _host_copy(t)) for peer, t in sends]
        targets = list(recvs)
        recvs = [(peer, _host_empty(t)) for peer, t in recvs]
    ops = [dist.P2POp(dist.isend, t, peer) for peer, t in sends] + \
          [dist.P2POp(dist.irecv, t, peer) for peer, t in recvs]
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    if staged:
        for (_, t), (_, h) in zip(targets, recvs):
            t.copy_(h)
            STAGED["bytes"] += h.numel() * h.element_size()


def all_reduce(t: torch.Tensor, group=None, op=dist.ReduceOp.SUM) -> torch.Tensor:
    """``dist.all_reduce`` of ``t`` in place (``group=None``: the default group)."""
    if host_staged(t, group):
        h = _host_copy(t)
        dist.all_reduce(h, op=op, group=group)
        t.copy_(h)
        STAGED["bytes"] += h.numel() * h.element_size()
    else:
        dist.all_reduce(t, op=op, group=group)
    return t


def all_gather(parts: list[torch.Tensor], t: torch.Tensor, group=None) -> list[torch.Tensor]:
    """``dist.all_gather`` of ``t`` from every member of ``group`` into ``parts``."""
    if host_staged(t, group):
        hp = [_host_empty(p) for p in parts]
        dist.all_gather(hp, _host_copy(t), group=group)
        for p, h in zip(parts, hp):
            p.copy_(h)
            STAGED["bytes"] += h.numel() * h.element_size()
    else:
        dist.all_gather(parts, t, group=group)
    return parts
