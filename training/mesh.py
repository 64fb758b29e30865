"""The 2-level process mesh of hybrid data + spatial parallel training.

``world = data x spatial``: rank ``r = d * S + s`` is data-parallel replica ``d`` and spatial
shard ``s`` (row-major over the spatial grid ``(gD, gH, gW)``, ``S = gD * gH * gW``).  A
sample of the mini-batch lives on the ``S`` ranks of one spatial group; the ``D`` ranks that
hold the same spatial block of different samples form a data group.

The groups come from torch's :class:`~torch.distributed.device_mesh.DeviceMesh` (dims
``("data", "spatial")``); point-to-point halo traffic uses global ranks on the default group.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from ..compiler.errors import TesseraError
from . import comm

__all__ = ["Mesh", "MeshError", "SpatialGrid", "init_mesh", "parse_grid", "resolve_device"]


class MeshError(TesseraError):
    """The requested data x spatial mesh does not fit the launch or the volume."""

    exit_code = 2


class RankFailure(TesseraError):
    """Another rank stopped answering: a collective or halo exchange timed out (the rank
    hangs) or lost its peer (the rank died)."""

    exit_code = 11

    def __init__(self, message: str, hard_exit: bool = False):
        super().__init__(message)
        #: exit at once after the message (a timeout: tearing down a process group whose peer
        #: is stuck can abort the interpreter's shutdown, SIGABRT seen in CI, hiding the code)
        self.hard_exit = hard_exit


#: what gloo / NCCL / the store say when a peer is stuck or gone
PEER_FAILURE_WORDS = ("timed out", "timeout", "connection closed", "connection reset", "connection refused",
                      "broken pipe", "peer")


@dataclass(frozen=True)
class SpatialGrid:
    """How one sample is split: blocks along D, H and W."""

    d: int = 1
    h: int = 1
    w: int = 1

    def __post_init__(self):
        if min(self.d, self.h, self.w) < 1:
            raise MeshError(f"spatial grid {self} must have at least one block per dim")

    @property
    def dims(self) -> tuple[int, int, int]:
        return (self.d, self.h, self.w)

    @property
    def size(self) -> int:
        return self.d * self.h * self.w

    def coords(self, s: int) -> tuple[int, int, int]:
        return tuple(int(c) for c in np.unravel_index(s, self.dims))

    def __str__(self) -> str:
        return "x".join(map(str, self.dims))


def parse_grid(text: str) -> SpatialGrid:
    """``'2x2x1'`` -> ``SpatialGrid(2, 2, 1)``; ``'4'`` -> ``SpatialGrid(4, 1, 1)``."""
    try:
        parts = [int(p) for p in str(text).lower().split("x")]
    except ValueError:
        raise MeshError(f"--spatial {text!r}: expected AxBxC, e.g. 2x2x1") from None
    if not 1 <= len(parts) <= 3:
        raise MeshError(f"--spatial {text!r}: expected 1 to 3 factors (AxBxC)")
    return SpatialGrid(*(parts + [1] * (3 - len(parts))))


@dataclass(frozen=True)
class Mesh:
    """This process's place in the ``data x spatial`` mesh, and its process groups.

    ``world_group`` reduces what every rank computes a distinct part of (spatially sharded
    layers: gradients, BatchNorm and quantizer statistics); ``data_group`` reduces what the
    ranks of one spatial group compute alike (the dense tail after the gather);
    ``spatial_group`` is the sample's shards.
    """

    data: int
    grid: SpatialGrid
    rank: int
    device: torch.device
    data_group: object
    spatial_group: object
    world_group: object
    device_mesh: object = None

    @property
    def world(self) -> int:
        return self.data * self.grid.size

    @property
    def data_index(self) -> int:
        return self.rank // self.grid.size

    @property
    def spatial_index(self) -> int:
        return self.rank % self.grid.size

    def spatial_rank(self, s: int) -> int:
        """Global rank of spatial shard ``s`` in this rank's spatial group."""
        return self.data_index * self.grid.size + s

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def resolve_device(backend: str | None = None, device: str | None = None) -> tuple[str, torch.device]:
    """``(backend, this rank's device)`` for a launch of ``LOCAL_WORLD_SIZE`` ranks on this
    node (torchrun's environment; 1 without it), local rank ``LOCAL_RANK``.

    ``device``: ``'cuda'`` (default when CUDA is available) or ``'cpu'``.  On CPU the
    backend is gloo.  On CUDA it is NCCL with one GPU per rank when the node has a GPU for
    every local rank, else gloo with the ranks sharing the GPUs round-robin (local rank
    ``r`` on GPU ``r mod GPUs``; CUDA tensors staged through host memory where gloo needs
    it, :mod:`.comm`).  ``backend`` chooses explicitly; NCCL with fewer GPUs than ranks is
    refused (NCCL does not run two ranks on one GPU)."""
    if backend not in (None, "gloo", "nccl"):
        raise MeshError(f"backend {backend!r}: expected gloo or nccl")
    if device not in (None, "cpu", "cuda"):
        raise MeshError(f"device {device!r}: expected cpu or cuda")
    kind = device or ("cuda" if backend == "nccl" or torch.cuda.is_available() else "cpu")
    if kind == "cpu":
        if backend == "nccl":
            raise MeshError("the NCCL backend needs CUDA tensors: --device cuda, or --backend gloo on CPU")
        return "gloo", torch.device("cpu")
    if not torch.cuda.is_available():
        raise MeshError("--device cuda: no CUDA device is visible to this process")
    gpus = torch.cuda.device_count()
    local, local_world = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    if backend is None:
        backend = "nccl" if local_world <= gpus else "gloo"
    if backend == "nccl" and local_world > gpus:
        raise MeshError(f"NCCL needs one GPU per rank: {local_world} ranks on this node, {gpus} GPU(s); "
                        f"--backend gloo lets ranks share a GPU")
    return backend, torch.device("cuda", local % gpus)


def init_mesh(data: int, grid: SpatialGrid, backend: str | None = None, timeout_s: float | None = None,
              device: str | None = None) -> Mesh:
    """Initialise ``torch.distributed`` (``env://``, as torchrun sets it up) if needed and
    build the mesh.  ``backend`` and ``device``: see :func:`resolve_device` (default: NCCL
    with one GPU per rank when CUDA is available, gloo on CPU without it).  ``timeout_s``:
    how long a collective or halo exchange waits for the other ranks before it fails
    (default: torch's 30 minutes); the mesh's process groups get the same limit."""
    from torch.distributed.device_mesh import init_device_mesh

    backend, device = resolve_device(backend, device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = None if timeout_s is None else datetime.timedelta(seconds=float(timeout_s))
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, timeout=timeout)
    elif dist.get_backend() != backend:
        raise MeshError(f"the process group runs {dist.get_backend()}, not {backend}")
    world = dist.get_world_size()
    if world != data * grid.size:
        raise MeshError(f"world size {world} != data-parallel {data} x spatial {grid} "
                         f"({data * grid.size}); launch with torchrun --nproc-per-node "
                         f"{data * grid.size}")
    # the mesh only names process groups: gloo's groups are made as on CPU (a CUDA DeviceMesh
    # would map ranks to GPUs one to one), NCCL's on the GPUs
    dm = init_device_mesh("cuda" if backend == "nccl" else "cpu", (data, grid.size),
                          mesh_dim_names=("data", "spatial"))
    groups = {"data": dm.get_group("data"), "spatial": dm.get_group("spatial")}
    if timeout is not None:  # DeviceMesh's groups take torch's default timeout: same ranks, our limit
        groups = {name: _with_timeout(g, timeout) for name, g in groups.items()}
    return Mesh(data=data, grid=grid, rank=dist.get_rank(), device=device,
                data_group=groups["data"], spatial_group=groups["spatial"],
                world_group=dist.group.WORLD, device_mesh=dm)


def _with_timeout(group, timeout):
    """A process group over ``group``'s ranks with ``timeout`` (every rank calls this for
    every group of the mesh in the same order, as ``new_group`` requires)."""
    ranks_of = {}
    world = dist.get_world_size()
    # every rank must create every group: gather each rank's member list and build them all
    mine = torch.tensor(sorted(dist.get_process_group_ranks(group)) + [-1] * (world - group.size()), dtype=torch.int64,
                        device=comm.bookkeeping_device())
    allm = [torch.empty_like(mine) for _ in range(world)]
    comm.all_gather(allm, mine)
    result = None
    for t in allm:
        ranks = tuple(int(r) for r in t.tolist() if r >= 0)
        if ranks in ranks_of:
            continue
        ranks_of[ranks] = dist.new_group(list(ranks), timeout=timeout)
        if dist.get_rank() in ranks:
            result = ranks_of[ranks]
    return result


def init_restartable(backend: str | None, timeout_s: float | None = None, device: str | None = None) -> None:
    """Under ``torchrun --max-restarts``: join the process group through a store prefixed by
    the attempt (``TORCHELASTIC_RESTART_COUNT``).

    torchrun's static rendezvous (``--master-port``) keeps one TCPStore, hosted by the agent,
    for all attempts, and ``env://`` adds no attempt prefix (torch 2.13,
    ``distributed/rendezvous.py``: "We create a new TCPStore for every retry"), so a restarted
    rank can read the dead attempt's gloo addresses and fail to connect ("Connection refused",
    seen in about half the restarts here; pytorch/pytorch#135712 is the same with the c10d
    rendezvous).  Without torchrun's agent store this does nothing (``init_mesh`` uses
    ``env://``)."""
    if dist.is_initialized() or os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true":
        return
    backend, dev = resolve_device(backend, device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group(backend=backend,
                            store=dist.PrefixStore(f"tessera/attempt_{attempt}", store), rank=rank, world_size=world,
                            timeout=None if timeout_s is None else datetime.timedelta(seconds=float(timeout_s)))
