"""The trainer's transfers on their devices (tessera.training.comm, mesh.resolve_device) and
the memory goal's arithmetic, on CPU.

CUDA tensors under gloo go through host copies; here :data:`comm.STAGE_ALWAYS` sends CPU
tensors the same way (fresh host buffers, the exchange there, the results copied back), so
the staging path runs without a GPU: its results are exact, and a sharded training step
through it equals the single-process step with the bounds of test_equivalence.py.  Which
backend and GPU a rank takes is checked with CUDA's answers replaced (no GPU needed).
"""

from __future__ import annotations

import os
import socket

import pytest
import torch

from tessera.training import comm
from tessera.training.check import EquivalenceSpec, run_equivalence
from tessera.training.memory import memory_goal
from tessera.training.mesh import MeshError, SpatialGrid as G, resolve_device
from tessera.training.samples import brain_resolution


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _transfers(rank: int, world: int, port: int, stage: bool, folder: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    comm.STAGE_ALWAYS = stage
    comm.STAGED.update(ops=0, bytes=0)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    send = torch.arange(6, dtype=torch.int64).reshape(2, 3) + 100 * rank
    got = torch.full((2, 3), -1, dtype=torch.int64)
    comm.send_recv([(nxt, send)], [(prv, got)])
    total = comm.all_reduce(torch.tensor([rank + 0.5, 2.0 ** -40], dtype=torch.float64))
    parts = [torch.zeros(3, dtype=torch.int32) for _ in range(world)]
    comm.all_gather(parts, torch.tensor([rank, -rank, 7], dtype=torch.int32))
    torch.save({"got": got, "total": total, "parts": parts, "staged": dict(comm.STAGED)}, f"{folder}/r{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.dist
@pytest.mark.parametrize("stage", [True, False], ids=["staged", "direct"])
def test_transfers_exact_staged_or_not(tmp_path, stage):
    """Point-to-point, all-reduce and all-gather give the exact values through host copies
    and without them; the staged runs count every operation and byte they copied."""
    import torch.multiprocessing as mp

    world = 3
    mp.start_processes(_transfers, args=(world, _port(), stage, str(tmp_path)), nprocs=world, join=True,
                       start_method="fork")
    for rank in range(world):
        r = torch.load(tmp_path / f"r{rank}.pt")
        prv = (rank - 1) % world
        assert torch.equal(r["got"], torch.arange(6, dtype=torch.int64).reshape(2, 3) + 100 * prv)
        assert torch.equal(r["total"], torch.tensor([0.5 + 1.5 + 2.5, 3 * 2.0 ** -40], dtype=torch.float64))
        assert all(torch.equal(p, torch.tensor([q, -q, 7], dtype=torch.int32)) for q, p in enumerate(r["parts"]))
        # staged: one send copied out and one receive copied back (48 + 48 bytes), the all-reduce
        # out and back (16 + 16), the all-gather's own part out and three parts back (12 + 36)
        want = {"ops": 3, "bytes": 48 + 48 + 16 + 16 + 12 + 36} if stage else {"ops": 0, "bytes": 0}
        assert r["staged"] == want


@pytest.mark.dist
def test_sharded_step_through_host_copies_equals_single_process():
    """CosmoFlow (halo exchanges, BatchNorm and percentile collectives, the gather before the
    tail, the gradient all-reduce) on 2 ranks with every transfer staged through host copies:
    the float64 step equals the single-process step (the bounds of test_equivalence.py), and
    the transfers did go through the copies."""
    r = run_equivalence(EquivalenceSpec("cosmoflow", (11, 11, 11), grid=G(2, 1, 1), width=0.125, steps=1,
                                        dtype="float64", host_staging=True))
    for key in ("output", "loss", "input_grad", "grads"):
        assert r[key]["max_rel"] <= 1e-5, (key, r[key])
    assert r["staged_ops"] > 0 and r["backend"] == "gloo" and r["devices"] == ["cpu"]


def _cuda(monkeypatch, gpus: int, local_rank: int, local_world: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world))


def test_backend_and_device_of_a_rank(monkeypatch):
    """NCCL with one GPU per rank; ranks that outnumber the GPUs share them over gloo
    (round-robin); CPU is gloo; NCCL without a GPU per rank, or without CUDA, is refused."""
    _cuda(monkeypatch, 2, 1, 2)
    assert resolve_device() == ("nccl", torch.device("cuda", 1))
    _cuda(monkeypatch, 1, 3, 4)
    assert resolve_device() == ("gloo", torch.device("cuda", 0))
    assert resolve_device("gloo", "cuda") == ("gloo", torch.device("cuda", 0))
    assert resolve_device(device="cpu") == ("gloo", torch.device("cpu"))
    with pytest.raises(MeshError, match="NCCL needs one GPU per rank: 4 ranks on this node, 1 GPU"):
        resolve_device("nccl")
    _cuda(monkeypatch, 2, 3, 4)
    assert resolve_device() == ("gloo", torch.device("cuda", 1))
    _cuda(monkeypatch, 0, 0, 1)
    assert resolve_device() == ("gloo", torch.device("cpu"))
    with pytest.raises(MeshError, match="no CUDA device"):
        resolve_device(device="cuda")
    with pytest.raises(MeshError, match="NCCL backend needs CUDA tensors"):
        resolve_device("nccl", "cpu")


def test_memory_goal_arithmetic():
    """M_P against 1.15 M_1 / P + C, C the largest figure held between steps."""
    gib = 1 << 30
    peaks = {1: [8 * gib], 2: [4 * gib + 100, 4 * gib + 300], 4: [7 * gib // 2] * 4}
    between = {1: [gib], 2: [gib, gib + 8], 4: [gib] * 4}
    rows = {r.P: r for r in memory_goal(peaks, between)}
    assert rows[1].ratio == 1.0 and rows[1].within_goal and rows[1].constant == gib + 8
    assert rows[2].peak == 4 * gib + 300 and rows[2].single_over_P == 4 * gib
    assert rows[2].limit == 1.15 * (8 * gib) / 2 + gib + 8 and rows[2].within_goal
    # 3.5 GiB against 1.15 x 2 GiB + C = 3.3 GiB: 1.75 x single / P, outside the goal
    assert rows[4].ratio == 1.75 and rows[4].limit == 1.15 * (8 * gib) / 4 + gib + 8 and not rows[4].within_goal
    assert rows[4].ratio_without_constant == (7 * gib // 2 - gib - 8) / ((8 * gib - gib - 8) / 4)
    with pytest.raises(ValueError, match="P = 1"):
        memory_goal({2: [1]}, {2: [1]})


def test_brain_patch_resolution():
    """U-Net patches come from the 2 mm template while they fit its 35-voxel validation
    slab, from the 1 mm template beyond (64^3)."""
    assert [brain_resolution(p) for p in (16, 24, 32, 35, 36, 64)] == [2, 2, 2, 2, 1, 1]
