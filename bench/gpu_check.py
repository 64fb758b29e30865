"""The training companion on a GPU: CUDA end to end, spatial equivalence on the device,
memory per rank, the performance model's predictions -- one run, one JSON.

    bench/gpu_check.sh --out DIR            # on a machine with CUDA (under 8 minutes on one H200)
    bench/gpu_check.sh --cpu --out DIR      # the same code paths on CPU at tiny sizes (rehearsal)

Stages (``run``; each is timed, a stage that fails is recorded and the next one runs, a stage
that would end past ``--budget-s`` is skipped with that reason):

1. ``e2e``: ``tessera train cosmoflow`` (128^3, width 1) and ``tessera train unet3d`` (64^3)
   under torchrun on one rank (NCCL on the GPU), one epoch, then ``--resume`` for a second:
   step times, ``torch.cuda.max_memory_allocated``, the checkpoint's resume point, the
   exported QONNX files (copied into the artifacts to be compiled and verified elsewhere).
   CosmoFlow reads generated HDF5 samples (exponential noise, :func:`write_noise_samples`:
   no data set to fetch); the U-Net the MNI152 patches from the data cache.
2. ``equivalence``: one float64 step of the sharded CosmoFlow and U-Net on P = 2 and 4
   ranks (:func:`tessera.training.check.run_equivalence` on the device: NCCL with a GPU per
   rank, else gloo with the ranks sharing the GPU) against the single-process step on the
   same device, with the bounds of tests/training/test_equivalence.py.
3. ``memory``: CosmoFlow 128^3 training steps on P = 1, 2, 4 ranks of one GPU
   (``step``, under torchrun): CUDA max allocated per rank against single / P.
4. ``perfmodel``: ``tessera calibrate --device cuda``, then ``tessera plan train`` for the
   configurations of stages 1 and 3: predicted against measured step times.
5. ``gpu_tests`` (``--stages 5``, not in the default run: it would pass 8 minutes): the tests
   marked ``gpu`` (tests/training/test_gpu.py).

``--cpu`` runs all of it on CPU with gloo at tiny sizes, every transfer staged through host
copies (:data:`tessera.training.comm.STAGE_ALWAYS`: the path CUDA tensors take under gloo).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tessera.training.memory import memory_goal

#: the bounds of tests/training/test_equivalence.py (one step, relative: max|a-b| / max|b|)
BOUND = 1e-5
GPU = {"cosmo_size": 128, "cosmo_width": 1.0, "unet_size": 64, "unet_width": 0.125, "n_samples": 8, "batch": 2,
       "eq_cosmo": (32, 0.25), "eq_unet": (32, 0.125), "mem_size": 128, "mem_width": 1.0, "mem_steps": 3}
CPU = {"cosmo_size": 16, "cosmo_width": 0.125, "unet_size": 16, "unet_width": 0.0625, "n_samples": 8, "batch": 2,
       "eq_cosmo": (11, 0.125), "eq_unet": (16, 0.0625), "mem_size": 16, "mem_width": 0.125, "mem_steps": 2}
#: (model, data replicas, spatial grid) of stage 2: P = 2 and 4, spatial and data x spatial
EQUIV = [("cosmoflow", 1, "2x1x1"), ("cosmoflow", 1, "2x2x1"), ("cosmoflow", 2, "2x1x1"),
         ("unet3d", 1, "1x1x2"), ("unet3d", 1, "2x2x1"), ("unet3d", 2, "2x1x1")]
MEM_GRIDS = {1: "1x1x1", 2: "2x1x1", 4: "2x2x1"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256_of(path: Path) -> str:
    """The file's sha256, hex (also read by gpu_report.py)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_noise_samples(folder: Path, n: int, size: int, seed: int = 0) -> Path:
    """``n`` CosmoFlow-layout HDF5 samples (``size^3 x 4`` counts drawn from an exponential
    distribution, 4 uniform targets in [-1, 1]) and their ``manifest.json``; sample ``i`` is
    drawn from ``numpy.random.default_rng([seed, i])``, so the files can be made again
    anywhere."""
    import numpy as np

    from tessera.models.data.cosmology import write_sample

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        vol = rng.standard_exponential((size, size, size, 4), dtype=np.float32)
        write_sample(folder / f"univ_{i:06d}.h5", vol, rng.uniform(-1, 1, 4).astype(np.float32))
    (folder / "manifest.json").write_text(json.dumps(
        {"config": {"n_samples": n, "size": size, "samples_per_cosmology": 1, "noise_seed": seed}}))
    return folder


# --- stage 3's worker: training steps of the sharded CosmoFlow on one rank -------------------


def step_main(a) -> int:
    """One rank (under torchrun): ``a.steps`` timed training steps after one warm-up;
    step times and memory to ``a.out`` (rank 0 writes every rank's record)."""
    import torch
    import torch.distributed as dist

    from tessera.models.cnn3d import build_cnn3d
    from tessera.models.train3d import DEFAULTS
    from tessera.training import comm
    from tessera.training.memory import cuda_memory
    from tessera.training.mesh import init_mesh, parse_grid
    from tessera.training.spatial import SpatialModel, shard_batch

    comm.STAGE_ALWAYS = a.stage_host
    mesh = init_mesh(a.data_parallel, parse_grid(a.spatial), backend=a.backend, device=a.device)
    dev = mesh.device
    cuda = dev.type == "cuda"
    torch.manual_seed(0)
    net = build_cnn3d("cosmoflow", width=a.width, input_size=a.size, in_channels=4, n_out=4,
                      **DEFAULTS["cosmoflow"]["options"]).to(dev)
    n_params = sum(p.numel() for p in net.parameters())
    sm = SpatialModel(net, mesh, (a.size,) * 3)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    blk = sm.input_block()
    n_local = len(range(a.batch)[shard_batch(a.batch, mesh.data, mesh.data_index)])
    g = torch.Generator().manual_seed(1 + mesh.rank)
    x = (torch.rand((n_local, 4, *[b - e for e, b in blk]), generator=g) * 2.0).to(dev)
    y = torch.zeros(a.batch, 4, device=dev)
    if cuda:
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    times = []
    for step in range(a.steps + 1):
        if cuda:
            torch.cuda.synchronize(dev)
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(sm(x), y, reduction="sum") / y.numel()
        loss.backward()
        sm.reduce_gradients()
        opt.step()
        if cuda:
            torch.cuda.synchronize(dev)
        if step:
            times.append(time.perf_counter() - t0)
    rec = {"rank": mesh.rank, "device": str(dev), "block": blk, "n_local": n_local, "n_params": n_params,
           "step_s": times, "step_s_median": statistics.median(times)}
    if cuda:
        # between steps every rank holds its parameters, gradients, Adam's moments and its input
        rec["cuda_memory"] = cuda_memory(dev)
    recs = [None] * mesh.world
    dist.all_gather_object(recs, rec)
    if mesh.is_main:
        out = {"backend": dist.get_backend(), "world": mesh.world, "data_parallel": mesh.data,
               "spatial": str(mesh.grid), "size": a.size, "width": a.width, "batch": a.batch,
               "staged_ops": comm.STAGED["ops"], "ranks": recs}
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(out, indent=1) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0


def equiv_main(a) -> int:
    """One equivalence configuration (stage 2) to ``a.out``."""
    from tessera.training.check import EquivalenceSpec, run_equivalence
    from tessera.training.mesh import parse_grid

    size, width = a.size, a.width
    spec = EquivalenceSpec(a.model, (size,) * 3, data=a.data_parallel, grid=parse_grid(a.spatial), width=width,
                           steps=1, dtype="float64", device=a.device, host_staging=a.stage_host)
    t0 = time.perf_counter()
    r = run_equivalence(spec)
    r["seconds"] = round(time.perf_counter() - t0, 2)
    keys = ("output", "loss", "input_grad", "grads")
    r["bound"] = BOUND
    r["passed"] = all(r[k]["max_rel"] <= BOUND for k in keys)
    a.out.write_text(json.dumps(r, indent=1, default=str) + "\n")
    return 0


# --- the orchestrator ------------------------------------------------------------------------


class Run:
    """Stages, their logs, the time budget and the results."""

    def __init__(self, a):
        self.a, self.cfg = a, CPU if a.cpu else GPU
        self.out = a.out
        self.work = Path(tempfile.mkdtemp(prefix="tessera-gpu-check-"))
        self.art = self.work / "artifacts"
        self.art.mkdir()
        self.t0 = time.perf_counter()
        self.res: dict = {"mode": "cpu" if a.cpu else "cuda", "stages": {}}
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if a.cpu:  # the rehearsal's ranks share two cores
            self.env.setdefault("OMP_NUM_THREADS", "1")
        self.env.pop("WORLD_SIZE", None)

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def log(self, msg: str) -> None:
        print(f"[{self.elapsed():6.1f} s] {msg}", flush=True)

    def sh(self, args: list[str], timeout: float, name: str) -> tuple[int, float]:
        """Run ``args``; its output into the log (and artifacts/<name>.log)."""
        t = time.perf_counter()
        self.log(f"$ {' '.join(str(x) for x in args)}")
        with open(self.art / f"{name}.log", "w") as logf:
            try:
                p = subprocess.run([str(x) for x in args], stdout=logf, stderr=subprocess.STDOUT, env=self.env,
                                   timeout=timeout, cwd=self.work)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc = 124
        sec = time.perf_counter() - t
        tail = (self.art / f"{name}.log").read_text(errors="replace").splitlines()[-6:]
        self.log(f"  rc {rc} in {sec:.1f} s" + ("" if rc == 0 else "\n    " + "\n    ".join(tail)))
        return rc, sec

    def torchrun(self, nproc: int, module_args: list[str], timeout: float, name: str) -> tuple[int, float]:
        return self.sh([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", nproc,
                        "--master-port", _port(), *module_args], timeout, name)

    def stage(self, name: str, fn, need_s: float) -> None:
        left = self.a.budget_s - self.elapsed()
        if left < need_s:
            self.res["stages"][name] = {"skipped": f"{left:.0f} s of the budget left, the stage needs about {need_s:.0f} s"}
            self.log(f"stage {name}: skipped ({left:.0f} s left)")
            return
        t = time.perf_counter()
        self.log(f"stage {name}")
        try:
            rec = fn()
        except Exception as exc:  # a stage's failure is a result: record it, run the next stage
            rec = {"error": f"{type(exc).__name__}: {exc}"}
            self.log(f"stage {name} failed: {rec['error']}")
        rec["seconds"] = round(time.perf_counter() - t, 1)
        self.res["stages"][name] = rec
        self.save()

    def save(self) -> None:
        self.res["wall_s"] = round(self.elapsed(), 1)
        (self.out / "gpu_check.json").write_text(json.dumps(self.res, indent=1, default=str) + "\n")


def _environment(cpu: bool) -> dict:
    import numpy
    import torch

    env = {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
           "cpu_count": os.cpu_count(), "cuda_available": torch.cuda.is_available()}
    for mod in ("brevitas", "onnx", "onnxruntime", "onnxoptimizer", "h5py", "nibabel"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception as exc:  # recorded, not fatal: the stage that needs it fails with its reason
            env[mod] = f"unavailable: {exc}"
    if torch.cuda.is_available() and not cpu:
        p = torch.cuda.get_device_properties(0)
        env.update(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), gpus=torch.cuda.device_count(),
                   device_name=torch.cuda.get_device_name(0), capability=f"{p.major}.{p.minor}",
                   total_memory_GiB=round(p.total_memory / 2**30, 1), cudnn_allow_tf32=torch.backends.cudnn.allow_tf32,
                   matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32)
        try:
            v = torch.cuda.nccl.version()
            env["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception as exc:  # recorded: the NCCL stages then say why they failed
            env["nccl"] = f"unavailable: {exc}"
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_mode",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
            env["nvidia_smi"] = q.stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            env["nvidia_smi"] = f"unavailable: {exc}"
    return env


def _train_stage(r: Run, model: str) -> dict:
    c, cpu = r.cfg, r.a.cpu
    size = c["cosmo_size"] if model == "cosmoflow" else c["unet_size"]
    width = c["cosmo_width"] if model == "cosmoflow" else c["unet_width"]
    out = r.work / model
    args = ["-m", "tessera.cli", "train", model, "--size", size, "--width", width, "--n-samples", c["n_samples"],
            "--batch-size", c["batch"], "-o", out, "--device", "cpu" if cpu else "cuda"]
    if model == "cosmoflow":
        data = r.work / "cosmo_data"
        if not (data / "manifest.json").is_file():
            t = time.perf_counter()
            write_noise_samples(data, c["n_samples"], size)
            r.log(f"  {c['n_samples']} noise samples at {size}^3 written in {time.perf_counter() - t:.1f} s")
        args += ["--data-dir", data]
    rec: dict = {"model": model, "size": size, "width": width, "n_samples": c["n_samples"], "batch": c["batch"]}
    for tag, extra in (("epoch1", ["--epochs", 1]), ("resume", ["--epochs", 2, "--resume"])):
        rc, sec = r.torchrun(1, args + extra, 240, f"{model}_{tag}")
        rec[tag] = {"rc": rc, "wall_s": round(sec, 1)}
        if rc != 0 and tag == "epoch1" and not cpu and "nccl" in (r.art / f"{model}_{tag}.log").read_text().lower():
            # NCCL itself failed: record it, and run the rest of the check on gloo
            rec["nccl_failure"] = (r.art / f"{model}_{tag}.log").read_text().splitlines()[-3:]
            args += ["--backend", "gloo"]
            rc, sec = r.torchrun(1, args + extra, 240, f"{model}_{tag}_gloo")
            rec[tag] = {"rc": rc, "wall_s": round(sec, 1)}
        if rc != 0:
            rec["error"] = f"{tag}: exit {rc} (artifacts/{model}_{tag}.log)"
            return rec
        m = json.loads((out / "metrics.json").read_text())
        rec[tag].update({k: m.get(k) for k in ("mesh", "step_seconds_median", "step_seconds", "cuda", "resumed_from",
                                               "train_seconds", "seconds", "metric", "n_params",
                                               "brain_resolution_mm")},
                        steps=len(m["step_loss"]), step_loss=m["step_loss"])
    # each launch's first step includes its one-time work (CUDA context, cuDNN's choices)
    later = rec["epoch1"]["step_seconds"][1:] + rec["resume"]["step_seconds"][1:]
    rec["step_s_steady_median"] = statistics.median(later) if later else None
    onnx = out / "model.onnx"
    rec["onnx"] = {"file": f"{model}.onnx", "bytes": onnx.stat().st_size, "sha256": sha256_of(onnx)}
    shutil.copy(onnx, r.art / f"{model}.onnx")
    tin = out / "test_inputs.npy"
    rec["test_inputs"] = {"sha256": sha256_of(tin), "bytes": tin.stat().st_size}
    if tin.stat().st_size <= 8 << 20:
        shutil.copy(tin, r.art / f"{model}_test_inputs.npy")
    shutil.copy(out / "metrics.json", r.art / f"{model}_metrics.json")
    # the resumed run continues the first one's step count and checkpoint position
    rec["resume_ok"] = rec["resume"]["resumed_from"] is not None and \
        rec["resume"]["resumed_from"]["step"] == rec["epoch1"]["steps"] and \
        rec["resume"]["step_loss"][:rec["epoch1"]["steps"]] == rec["epoch1"]["step_loss"]
    return rec


def _equiv_stage(r: Run) -> dict:
    c = r.cfg
    jobs = []
    for model, data, grid in EQUIV:
        size, width = c["eq_cosmo"] if model == "cosmoflow" else c["eq_unet"]
        name = f"equiv_{model}_{data}x{grid}"
        args = [sys.executable, Path(__file__).resolve(), "equiv", "--model", model, "--size", size, "--width", width,
                "--data-parallel", data, "--spatial", grid, "--device", "cpu" if r.a.cpu else "cuda",
                "--out", r.work / f"{name}.json"] + (["--stage-host"] if r.a.cpu else [])
        jobs.append((name, args))
    # three configurations at a time (each its own processes; nothing here is timed)
    with ThreadPoolExecutor(max_workers=3) as pool:
        rcs = list(pool.map(lambda j: r.sh(j[1], 180, j[0]), jobs))
    rows = []
    for (name, _), (rc, sec) in zip(jobs, rcs):
        path = r.work / f"{name}.json"
        if rc != 0 or not path.is_file():
            rows.append({"name": name, "error": f"exit {rc} (artifacts/{name}.log)"})
            continue
        d = json.loads(path.read_text())
        rows.append({"name": name, "model": d["spec"]["model"], "extent": d["spec"]["extent"],
                     "width": d["spec"]["width"], "data": d["spec"]["data"], "grid": d["spec"]["grid"],
                     "world": d["world"], "backend": d["backend"], "devices": d["devices"],
                     "staged_ops": d["staged_ops"], "dtype": d["spec"]["dtype"], "bound": d["bound"],
                     "passed": d["passed"], "n_params": d["n_params"], "wall_s": round(sec, 1),
                     **{k: d[k] for k in ("output", "loss", "input_grad", "grads")}})
    return {"rows": rows, "passed": all(x.get("passed") for x in rows)}


def _memory_stage(r: Run) -> dict:
    c = r.cfg
    rows = []
    for p, grid in MEM_GRIDS.items():
        path = r.work / f"mem_P{p}.json"
        args = [Path(__file__).resolve(), "step", "--size", c["mem_size"], "--width", c["mem_width"],
                "--batch", c["batch"], "--spatial", grid, "--steps", c["mem_steps"],
                "--device", "cpu" if r.a.cpu else "cuda", "--out", path]
        if not r.a.cpu:
            args += ["--backend", "gloo"] if p > _gpus() else []
        else:
            args += ["--stage-host"]
        rc, sec = r.torchrun(p, args, 150, f"mem_P{p}")
        if rc != 0:
            rows.append({"P": p, "error": f"exit {rc} (artifacts/mem_P{p}.log)"})
            continue
        d = json.loads(path.read_text())
        row = {"P": p, "grid": grid, "backend": d["backend"], "wall_s": round(sec, 1), "staged_ops": d["staged_ops"],
               "step_s_median": max(x["step_s_median"] for x in d["ranks"]), "n_params": d["ranks"][0]["n_params"]}
        if "cuda_memory" in d["ranks"][0]:
            row.update({f"{k}_per_rank": [x["cuda_memory"][k] for x in d["ranks"]]
                        for k in ("max_allocated", "allocated", "max_reserved")})
        rows.append(row)
    mem = [x for x in rows if "max_allocated_per_rank" in x]
    goal = [g.to_dict() for g in memory_goal({x["P"]: x["max_allocated_per_rank"] for x in mem},
                                              {x["P"]: x["allocated_per_rank"] for x in mem})] \
        if any(x["P"] == 1 for x in mem) else []
    return {"size": c["mem_size"], "width": c["mem_width"], "batch": c["batch"], "rows": rows, "goal": goal}


def _gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _perf_stage(r: Run) -> dict:
    c, cpu = r.cfg, r.a.cpu
    cal = r.work / "calibration.json"
    cal_args = ["-m", "tessera.cli", "calibrate", "--size", c["mem_size"], "--width", c["mem_width"], "-o", cal,
                "--device", "cpu" if cpu else "cuda"] + (["--quick"] if cpu else ["--ranks", "2,4"])
    rc, sec = r.sh([sys.executable, *cal_args], 240, "calibrate")
    rec: dict = {"calibrate_rc": rc, "calibrate_wall_s": round(sec, 1)}
    if rc != 0:
        rec["error"] = "calibrate failed (artifacts/calibrate.log)"
        return rec
    rec["calibration"] = json.loads(cal.read_text())
    shutil.copy(cal, r.art / "calibration.json")
    def plan(p: int):
        path = r.work / f"plan_P{p}.json"
        rc, _ = r.sh([sys.executable, "-m", "tessera.cli", "plan", "train", "cosmoflow", "--ranks", p, "--size",
                      c["mem_size"], "--width", c["mem_width"], "--batch-size", c["batch"], "--calibration", cal,
                      "--json", path], 60, f"plan_P{p}")
        return json.loads(path.read_text()) if rc == 0 else None

    with ThreadPoolExecutor(max_workers=3) as pool:
        plans = {p: v for p, v in zip(MEM_GRIDS, pool.map(plan, MEM_GRIDS)) if v is not None}
    rec["plans"] = {str(p): v for p, v in plans.items()}
    rec["predictions"] = compare_predictions(plans, r.res["stages"])
    return rec


def compare_predictions(plans: dict, stages: dict) -> list[dict]:
    """Predicted against measured step time for each measured CosmoFlow configuration:
    stage 1's trainer step (reads its samples: the whole prediction) and stage 3's steps
    (inputs already in memory: the prediction without its reader time)."""
    rows = []

    def pred(p: int, grid: str):
        plan = plans.get(p) or plans.get(str(p))
        if not plan:
            return None
        return next((x for x in plan["predictions"] if x["label"] == f"1 x {grid}"), None)

    e2e = stages.get("e2e_cosmoflow", {})
    if e2e.get("step_s_steady_median") is not None and (x := pred(1, "1x1x1")):
        rows.append({"what": "tessera train cosmoflow, 1 rank (reads its samples)", "P": 1,
                     "measured_s": e2e["step_s_steady_median"], "predicted_s": x["step_s"],
                     "predicted_io_s": x["io_s"] * x.get("io_oversubscription", 1.0)})
    for row in stages.get("memory", {}).get("rows", []):
        if "step_s_median" in row and (x := pred(row["P"], row["grid"])):
            io = x["io_s"] * x.get("io_oversubscription", 1.0)
            rows.append({"what": f"training steps, {row['P']} rank(s) {row['grid']} (inputs in memory)",
                         "P": row["P"], "measured_s": row["step_s_median"], "predicted_s": x["step_s"] - io,
                         "predicted_io_s": 0.0})
    for x in rows:
        x["error"] = (x["predicted_s"] - x["measured_s"]) / x["measured_s"]
    return rows


def run_main(a) -> int:
    a.out.mkdir(parents=True, exist_ok=True)
    r = Run(a)
    r.log(f"gpu_check: {'CPU rehearsal' if a.cpu else 'CUDA'}, work folder {r.work}")
    r.res["environment"] = _environment(a.cpu)
    r.log(json.dumps(r.res["environment"]))
    stages = set(a.stages.split(","))
    if "1" in stages:
        r.stage("e2e_cosmoflow", lambda: _train_stage(r, "cosmoflow"), 60)
        r.stage("e2e_unet3d", lambda: _train_stage(r, "unet3d"), 40)
        _pack(r.art, r.out, a.part_mib)  # the exported files are safe even if a later stage runs out of time
    if "3" in stages:
        r.stage("memory", lambda: _memory_stage(r), 50)
    if "2" in stages:
        r.stage("equivalence", lambda: _equiv_stage(r), 60)
    if "4" in stages:
        r.stage("perfmodel", lambda: _perf_stage(r), 110)
    if "5" in stages:
        r.stage("gpu_tests", lambda: _tests_stage(r), 100)
    r.save()
    shutil.copy(r.out / "gpu_check.json", r.art / "gpu_check.json")
    _pack(r.art, r.out, a.part_mib)
    r.log(f"done in {r.elapsed():.1f} s -> {r.out}")
    if not a.keep:
        shutil.rmtree(r.work, ignore_errors=True)
    return 0


def _pack(folder: Path, out: Path, part_mib: int) -> None:
    """``folder`` as ``artifacts.tar`` cut into parts of at most ``part_mib`` MiB
    (``cat artifacts.tar.part-* | tar x`` puts it together); a pack replaces the last one."""
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=".pack-"))
    with tarfile.open(tmp / "artifacts.tar", "w") as t:
        t.add(folder, arcname="artifacts")
    data = (tmp / "artifacts.tar").read_bytes()
    (tmp / "artifacts.tar").unlink()
    for k, i in enumerate(range(0, len(data), part_mib << 20)):
        (tmp / f"artifacts.tar.part-{k:02d}").write_bytes(data[i:i + (part_mib << 20)])
    for old in out.glob("artifacts.tar.part-*"):
        old.unlink()
    for part in sorted(tmp.iterdir()):
        part.rename(out / part.name)
    tmp.rmdir()


def _tests_stage(r: Run) -> dict:
    """The tests marked gpu (tests/training/test_gpu.py), where CUDA is; skipped on CPU."""
    root = Path(__file__).resolve().parents[1]
    rc, sec = r.sh([sys.executable, "-m", "pytest", root / "tests" / "training" / "test_gpu.py", "-n", "0", "-q", "-rs",
                    "-p", "no:cacheprovider", "--rootdir", root], 150, "gpu_tests")
    tail = (r.art / "gpu_tests.log").read_text(errors="replace").strip().splitlines()[-8:]
    return {"rc": rc, "wall_s": round(sec, 1), "summary": tail}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="every stage (what bench/gpu_check.sh runs)")
    r.add_argument("--cpu", action="store_true", help="the rehearsal: CPU, gloo, tiny sizes")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--stages", default="1,2,3,4", help="5: the tests marked gpu (about 2 minutes more)")
    r.add_argument("--budget-s", type=float, default=450.0, help="skip stages that would end past this")
    r.add_argument("--part-mib", type=int, default=15)
    r.add_argument("--keep", action="store_true", help="keep the work folder")
    for name in ("step", "equiv"):
        s = sub.add_parser(name)
        s.add_argument("--size", type=int, required=True)
        s.add_argument("--width", type=float, required=True)
        s.add_argument("--data-parallel", type=int, default=1)
        s.add_argument("--spatial", default="1x1x1")
        s.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
        s.add_argument("--stage-host", action="store_true", help="stage every transfer through host copies")
        s.add_argument("--out", type=Path, required=True)
    s = sub.choices["step"]
    s.add_argument("--batch", type=int, default=2, help="global mini-batch")
    s.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    s.add_argument("--backend", choices=["gloo", "nccl"])
    sub.choices["equiv"].add_argument("--model", choices=["cosmoflow", "unet3d"], required=True)
    a = ap.parse_args(argv)
    return {"run": run_main, "step": step_main, "equiv": equiv_main}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
