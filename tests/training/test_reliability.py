"""Reliability of the distributed trainer (issue 9; the training rows of docs/reliability.md).

* A job killed at any point (every process ``SIGKILL``ed, or rank 0 killed half way through
  writing a checkpoint) resumes from the last checkpoint and repeats the uninterrupted run:
  the same per-step losses, validation results and final weights, bit for bit (CPU, gloo,
  one thread per rank).
* A rank that dies mid-step ends the job within a bounded time (no rank hangs in a
  collective); with ``torchrun --max-restarts 1 ... --resume`` the job restarts from the last
  checkpoint and again repeats the uninterrupted run.
* A bad HDF5 sample (missing, truncated, not HDF5, without its datasets, wrongly shaped,
  non-finite values) is an error naming the file and the sample index; the CLI prints it on
  one line and the job stops (policy: error, never skip).

Faults inside the trainer come from ``TESSERA_FAULT_INJECT``, installed into the trainer's
hooks by the launcher ``faults.py`` beside this file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from tessera.compiler.errors import DataError
from tessera.models.data.cosmology import TARGET_KEY, VOLUME_KEY, write_sample
from tessera.models.runs import atomic_path
from tessera.training.data import SampleError
from tessera.training.halo import blocks
from tessera.training.samples import Samples, augment_index, read_sample_target

FAULT_EXIT_CODE = 86  # faults.py's exit code for an injected rank exit
FAULTS = Path(__file__).with_name("faults.py")

N, SIZE = 12, 12  # 10 training universes (steps of 4, 4, 2) and 2 validation ones
EPOCHS, STEPS = 3, 9
TRAIN = ["train", "cosmoflow", "--spatial", "2x1x1", "--width", "0.125", "--batch-size", "4",
         "--epochs", str(EPOCHS)]


def _folder(d: Path, n: int = N, size: int = SIZE) -> Path:
    rng = np.random.default_rng(0)
    for i in range(n):
        write_sample(d / f"univ_{i:06d}.h5", rng.gamma(1.0, 1.0, size=(size,) * 3 + (4,)).astype(np.float32),
                     rng.uniform(-1, 1, 4).astype(np.float32))
    (d / "manifest.json").write_text(json.dumps({"config": {"n_samples": n, "size": size, "samples_per_cosmology": 1}}))
    return d


def _torchrun_cmd(args, nproc=2, max_restarts=None):
    with socket.socket() as s:  # other test runs may share the machine: no fixed port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    restarts = [] if max_restarts is None else ["--max-restarts", str(max_restarts)]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", str(port),
            *restarts, str(FAULTS), *map(str, args)]


def _env(fault: str | None = None) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for k in ("WORLD_SIZE", "TESSERA_FAULT_INJECT", "TORCHELASTIC_RESTART_COUNT"):
        env.pop(k, None)
    if fault:
        env["TESSERA_FAULT_INJECT"] = fault
    return env


def _torchrun(args, fault=None, max_restarts=None, timeout=300):
    t0 = time.perf_counter()
    r = subprocess.run(_torchrun_cmd(args, max_restarts=max_restarts), capture_output=True, text=True,
                       env=_env(fault), timeout=timeout)
    return r, time.perf_counter() - t0


def _descendants(pid: int) -> list[int]:
    """All processes below ``pid`` (torchrun starts its workers in sessions of their own, so
    killing torchrun's process group would leave them running)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _checkpoint(out: Path) -> dict:
    return torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=False)


def _assert_same_run(out: Path, ref: dict):
    """The run in ``out`` went exactly as the uninterrupted one: per-step and per-epoch
    losses, validation results, final weights."""
    m = json.loads((out / "metrics.json").read_text())
    assert len(m["step_loss"]) == STEPS
    assert m["step_loss"] == ref["metrics"]["step_loss"]  # bit for bit (floats from JSON round-trip exactly)
    assert m["train_loss"] == ref["metrics"]["train_loss"]
    assert m["val"] == ref["metrics"]["val"]
    model = _checkpoint(out)["model"]
    assert model.keys() == ref["model"].keys()
    differ = [k for k in model if not torch.equal(model[k], ref["model"][k])]
    assert not differ, differ
    return m


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run: no step checkpoints, no faults."""
    root = tmp_path_factory.mktemp("reliability")
    data = _folder(root / "data")
    out = root / "reference"
    r, _ = _torchrun([*TRAIN, "--data-dir", data, "-o", out])
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    assert len(m["step_loss"]) == STEPS and len(set(m["step_loss"])) == STEPS
    return {"data": data, "metrics": m, "model": _checkpoint(out)["model"]}


# --- kills and restarts (processes) -----------------------------------------------------


@pytest.mark.dist
def test_killed_job_and_killed_checkpoint_write_resume_to_the_same_run(reference, tmp_path):
    out = tmp_path / "run"
    args = [*TRAIN, "--data-dir", reference["data"], "-o", out, "--checkpoint-every", "2"]
    # 1. the whole job (agent and both ranks) SIGKILLed as soon as the first checkpoint exists
    p = subprocess.Popen(_torchrun_cmd(args), env=_env(), start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.perf_counter()
    while not (out / "checkpoint.pt").exists() and p.poll() is None and time.perf_counter() - t0 < 240:
        time.sleep(0.01)
    for pid in [p.pid, *_descendants(p.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    killed_at = len(_checkpoint(out)["history"]["step_loss"])
    assert 2 <= killed_at < STEPS and not (out / "metrics.json").exists()

    # 2. resumed; rank 0 killed half way through writing the checkpoint after the last step
    r, _ = _torchrun([*args, "--resume"], fault=f"checkpoint:step={STEPS}")
    assert r.returncode != 0 and "Signal 9 (SIGKILL)" in r.stderr, r.stderr[-3000:]
    partial = list(out.glob(".checkpoint.*.tmp.pt"))
    assert len(partial) == 1  # the cut-off write, never renamed over checkpoint.pt
    with pytest.raises(Exception):
        torch.load(partial[0], map_location="cpu", weights_only=False)
    ck = _checkpoint(out)  # the previous checkpoint, whole
    assert len(ck["history"]["step_loss"]) == 8 and (ck["epoch"], ck["position"]) == (2, 8)
    assert not (out / "metrics.json").exists()

    # 3. resumed again: the uninterrupted run, bit for bit
    r, _ = _torchrun([*args, "--resume"])
    assert r.returncode == 0, r.stderr[-3000:]
    m = _assert_same_run(out, reference)
    assert m["resumed_from"] == {"epoch": 2, "position": 8, "step": 8}
    assert not list(out.glob(".checkpoint.*.tmp.pt"))  # the stale temporary file is cleared


@pytest.mark.dist
def test_rank_killed_mid_step_restarts_from_the_last_checkpoint(reference, tmp_path):
    out = tmp_path / "run"
    # rank 1 exits during step 6 on torchrun's first attempt; the last checkpoint is step 4's
    # (mid-epoch); --resume on a fresh folder starts from scratch
    r, seconds = _torchrun([*TRAIN, "--data-dir", reference["data"], "-o", out, "--checkpoint-every", "2", "--resume"],
                           fault="exit:step=6:rank=1:attempt=0", max_restarts=1)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"failed (exitcode: {FAULT_EXIT_CODE}) local_rank: 1" in r.stderr, r.stderr[-3000:]  # attempt 0 died
    m = _assert_same_run(out, reference)
    assert m["resumed_from"] == {"epoch": 1, "position": 4, "step": 4}
    assert seconds < 120


@pytest.mark.dist
def test_rank_killed_mid_step_without_restarts_fails_fast(reference, tmp_path):
    out = tmp_path / "run"
    r, seconds = _torchrun([*TRAIN, "--data-dir", reference["data"], "-o", out], fault="exit:step=2:rank=1",
                           max_restarts=0, timeout=120)
    ended = time.time()
    assert r.returncode != 0
    assert f"exitcode  : {FAULT_EXIT_CODE}" in r.stderr, r.stderr[-3000:]  # rank 1, the root cause
    died = float(re.search(r"fault injected: exit at step 2 on rank 1 \(time ([0-9.]+)\)", r.stderr).group(1))
    # rank 0, blocked in a collective with the dead rank, did not hang: the job is gone seconds later
    assert ended - died < 30 and seconds < 90, (ended - died, seconds)
    assert not (out / "metrics.json").exists()


@pytest.mark.dist
def test_hanging_rank_fails_the_job_within_the_collective_timeout(reference, tmp_path):
    """Rank 1 stays alive but stops answering mid-step: rank 0's halo exchange / collective
    gives up after --collective-timeout, exits 11 with a one-line error, and torchrun stops
    the hanging rank; the job ends instead of waiting torch's default 30 minutes."""
    out = tmp_path / "run"
    limit = 8
    r, seconds = _torchrun([*TRAIN, "--data-dir", reference["data"], "-o", out, "--collective-timeout", limit],
                           fault="hang:step=2:rank=1", max_restarts=0, timeout=240)
    ended = time.time()
    assert r.returncode != 0, r.stderr[-3000:]
    stuck = float(re.search(r"fault injected: hang at step 2 on rank 1 \(time ([0-9.]+)\)", r.stderr).group(1))
    assert limit <= ended - stuck < limit + 40, (ended - stuck, r.stderr[-3000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error: rank 0: another rank stopped answering")]
    assert lines, r.stderr[-3000:]
    assert "exitcode  : 11" in r.stderr
    assert not (out / "metrics.json").exists()


@pytest.mark.dist
def test_corrupt_sample_stops_the_job_with_a_one_line_error(reference, tmp_path):
    data = shutil.copytree(reference["data"], tmp_path / "data")
    bad = data / "univ_000003.h5"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    r, seconds = _torchrun([*TRAIN, "--data-dir", data, "-o", tmp_path / "run"], timeout=120)
    assert r.returncode != 0 and seconds < 60
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error: ")]
    assert lines and all(ln.startswith(f"error: sample 3 ({bad}): ") and "truncated" in ln for ln in lines), \
        r.stderr[-3000:]
    assert "exitcode  : 9" in r.stderr  # DataError's exit code, from the rank(s) that read it
    assert "Traceback" not in "\n".join(ln for ln in r.stderr.splitlines() if "sample 3" in ln)


# --- bad HDF5 samples (no processes) ------------------------------------------------------


def _good(path: Path, size: int = SIZE, seed: int = 0) -> np.ndarray:
    vol = np.random.default_rng(seed).gamma(1.0, 1.0, size=(size,) * 3 + (4,)).astype(np.float32)
    write_sample(path, vol, np.arange(4, dtype=np.float32) / 4)
    return vol


def _truncate(frac):
    def f(p):
        p.write_bytes(p.read_bytes()[: int(p.stat().st_size * frac)])
    return f


def _rewrite(volume=None, target=None, drop=None):
    def f(p):
        with h5py.File(p, "r") as h:
            d = {k: h[k][...] for k in h.keys()}
        vol_key, tgt_key = VOLUME_KEY, TARGET_KEY
        if volume is not None:
            d[vol_key] = volume(d[vol_key])
        if target is not None:
            d[tgt_key] = target(d[tgt_key])
        if drop:
            d.pop({"volume": vol_key, "target": tgt_key}[drop])
        p.unlink()
        with h5py.File(p, "w") as h:
            for k, v in d.items():
                h.create_dataset(k, data=v)
    return f


def _set(z, value, whole_planes=False):
    """``value`` at planes ``z`` (one voxel of each, or all of them) of channel 2."""
    def f(v):
        v = v.copy()
        v[(z, slice(None), slice(None), 2) if whole_planes else (z, 5, 5, 2)] = value
        return v
    return f


# each: how the file is broken, a phrase of the message
BAD = {
    "missing file": (lambda p: p.unlink(), "cannot open"),
    "empty file": (lambda p: p.write_bytes(b""), "not a readable HDF5 sample"),
    "not HDF5": (lambda p: p.write_text("univ 3\n" * 100), "not a readable HDF5 sample"),
    "truncated to 10%": (_truncate(0.1), "truncated"),
    "truncated to 50%": (_truncate(0.5), "truncated"),
    "truncated to 99%": (_truncate(0.99), "truncated"),
    "no volume dataset": (_rewrite(drop="volume"), "no dataset"),
    "no target dataset": (_rewrite(drop="target"), "no dataset"),
    "smaller volume": (_rewrite(volume=lambda v: v[:10, :10, :10]), "has shape (10, 10, 10, 4), expected (12, 12, 12, 4)"),
    "3 channels": (_rewrite(volume=lambda v: v[..., :3]), "has shape (12, 12, 12, 3), expected (12, 12, 12, 4)"),
    "3-d volume": (_rewrite(volume=lambda v: v[..., 0]), "has shape (12, 12, 12), expected"),
    "3 targets": (_rewrite(target=lambda t: t[:3]), "target"),
    # planes z and 11 - z: rank 0's block (z < 6) holds one of them under any flip / permutation
    "NaN voxels": (_rewrite(volume=_set([1, 10], np.nan, whole_planes=True)), "non-finite"),
    "inf voxels": (_rewrite(volume=_set([2, 9], np.inf, whole_planes=True)), "non-finite"),
    "negative count": (_rewrite(volume=lambda v: v - 5.0), "non-finite"),
    "NaN target": (_rewrite(target=lambda t: np.full_like(t, np.nan)), "non-finite target"),
}


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("augment", [False, True])
def test_bad_sample_is_an_error_naming_file_and_index(tmp_path, case, augment):
    for i in range(4):
        _good(tmp_path / f"univ_{i:06d}.h5", seed=i)
    break_it, phrase = BAD[case]
    bad = tmp_path / "univ_000002.h5"
    break_it(bad)
    span = blocks((SIZE,) * 3, (2, 1, 1))[0]  # rank 0's block: z 0..5
    s = Samples(tmp_path, 4, span, SIZE)
    sym_of = (lambda i: augment_index(SIZE, np.random.default_rng(i), shifts=False)) if augment else None
    assert s.read([0, 1], sym_of)[0].shape == (2, 4, 6, SIZE, SIZE)  # the good ones read
    with pytest.raises(SampleError) as e:
        s.read([1, 2, 3], sym_of)
    msg = str(e.value)
    assert msg.startswith(f"sample 2 ({bad}): ") and phrase in msg, msg
    assert "\n" not in msg and isinstance(e.value, DataError) and e.value.exit_code == 9


@pytest.mark.parametrize("case", ["missing file", "truncated to 50%", "no target dataset", "3 targets", "NaN target"])
def test_bad_target_is_an_error_naming_file_and_index(tmp_path, case):
    """Every rank reads the whole mini-batch's targets (the replicated tail's loss)."""
    _good(tmp_path / "univ_000000.h5")
    BAD[case][0](tmp_path / "univ_000000.h5")
    s = Samples(tmp_path, 1, ((0, 6), (0, SIZE), (0, SIZE)), SIZE)
    with pytest.raises(SampleError, match=rf"^sample 0 \({tmp_path / 'univ_000000.h5'}\): "):
        read_sample_target(s, 0)


def test_nan_outside_a_ranks_block_is_found_by_the_rank_that_reads_it(tmp_path):
    """Each rank checks what it reads: a NaN in block 1 passes rank 0 and stops rank 1."""
    _good(tmp_path / "univ_000000.h5")
    _rewrite(volume=_set([9], np.nan))(tmp_path / "univ_000000.h5")
    b0, b1 = blocks((SIZE,) * 3, (2, 1, 1))
    assert np.isfinite(Samples(tmp_path, 1, b0, SIZE).read([0])[0]).all()
    with pytest.raises(SampleError, match="sample 0 .*1 non-finite values"):
        Samples(tmp_path, 1, b1, SIZE).read([0])


def test_atomic_write_keeps_the_old_file_when_the_writer_fails(tmp_path):
    path = tmp_path / "checkpoint.pt"
    torch.save({"step": 1}, path)
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"half a checkpo")
            raise RuntimeError("killed")
    assert torch.load(path, weights_only=False) == {"step": 1}
    assert list(tmp_path.iterdir()) == [path]  # the temporary file is gone


def test_garbled_header_bytes_are_a_sample_error_or_harmless(tmp_path):
    """16 random bytes written over each 16-byte run of the first 2 KiB (superblock, object
    headers, B-tree, local heap): every read either raises SampleError naming the file or
    succeeds (the bytes were unused); none escapes as another exception."""
    path = tmp_path / "univ_000000.h5"
    _good(path)
    raw, rng = path.read_bytes(), np.random.default_rng(0)
    outcomes = {"error": 0, "read": 0}
    for start in range(0, 2048, 16):
        b = bytearray(raw)
        b[start:start + 16] = rng.integers(0, 256, 16, dtype=np.uint8).tobytes()
        path.write_bytes(bytes(b))
        s = Samples(tmp_path, 1, ((0, 6), (0, SIZE), (0, SIZE)), SIZE)
        try:
            s.read([0])
            read_sample_target(s, 0)
            outcomes["read"] += 1
        except SampleError as e:
            assert str(e).startswith(f"sample 0 ({path}): ") and "\n" not in str(e)
            outcomes["error"] += 1
    assert outcomes["error"] >= 16, outcomes  # the structure is damaged often enough to matter
