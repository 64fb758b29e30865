"""docs/results/gpu_check.md and .json from one ``bench/gpu_check.sh`` run, and the CPU
compile + verify of the QONNX files that run exported.

    python bench/gpu_report.py verify RESULTS [--samples 2]   # tessera compile + verify of each exported file
    python bench/gpu_report.py write RESULTS                  # docs/results/gpu_check.{md,json}

``RESULTS`` is the folder the run wrote (``gpu_check.json``, ``artifacts.tar.part-*``).
``verify`` unpacks the artifacts, compiles each exported model with ``tessera compile
--io-type stream`` and runs ``tessera verify`` on ``--samples`` random full-range inputs and,
one call each, the run's own validation inputs: the U-Net's came back with the run, CosmoFlow's are made
again from the generator's seed (:func:`gpu_check.write_noise_samples`) and used only if
their sha256 equals the one the run recorded.  Its results go to ``RESULTS/verify.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check import sha256_of  # noqa: E402 - the bench folder first

MIB = 2 ** 20


def unpack(results: Path) -> Path:
    """The artifacts folder of a run (unpacked once next to its parts)."""
    art = results / "artifacts"
    if not art.is_dir():
        data = b"".join(p.read_bytes() for p in sorted(results.glob("artifacts.tar.part-*")))
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "a.tar").write_bytes(data)
            with tarfile.open(Path(tmp) / "a.tar") as t:
                t.extractall(results, filter="data")
    return art


def _cosmo_inputs(run: dict, work: Path) -> tuple[Path, bool]:
    """CosmoFlow's validation inputs as the run's trainer saved them, made again here from the
    generator's seed, and whether their sha256 is the run's (numpy's float32 ``log1p`` is not
    correctly rounded, and its last bits depend on the CPU's SIMD path)."""
    import numpy as np

    sys.path.insert(0, str(Path(__file__).parent))
    from gpu_check import write_noise_samples
    from tessera.models.data.cosmology import read_sample
    from tessera.models.runs import save_npy
    from tessera.training.samples import Samples

    st = run["stages"]["e2e_cosmoflow"]
    folder = write_noise_samples(work / "cosmo_data", st["n_samples"], st["size"])
    val = Samples(folder, st["n_samples"], ((0, st["size"]),) * 3, st["size"]).val
    xs = np.stack([read_sample(folder / f"univ_{i:06d}.h5")[0] for i in val[:4]])
    path = work / "cosmoflow_test_inputs.npy"
    save_npy(path, xs.astype(np.float32))
    return path, sha256_of(path) == st["test_inputs"]["sha256"]


def _verify_once(onnx: Path, prj: Path, rep: Path, samples: int, data: Path | None) -> dict:
    """One ``tessera verify`` call; its report's counts."""
    t = time.perf_counter()
    v = subprocess.run([sys.executable, "-m", "tessera.cli", "verify", onnx, prj, "--samples", str(samples),
                        "--report", rep, *(["--data", str(data)] if data else [])], capture_output=True, text=True)
    rec = {"rc": v.returncode, "seconds": round(time.perf_counter() - t, 1), "out": v.stdout.strip().splitlines()[-2:]}
    if v.returncode == 0 or rep.is_file():
        d = json.loads(rep.read_text())
        ind = d.get("independent") or {}
        rec.update(samples=d["samples"], outputs=d["outputs"], mismatches=d["mismatches"],
                   independent_equal=ind.get("equal"), independent_outputs=ind.get("outputs"))
    else:
        rec["err"] = v.stderr.strip()[-600:]
    return rec


def verify_main(a) -> int:
    """Compile each exported file, then verify it in calls of a few samples each (one call
    over all samples held every intermediate of a 64^3 U-Net for all of them: 20 GB, more
    than this machine had): the random full-range inputs in one call, each of the run's
    validation inputs in a call of its own."""
    import numpy as np

    results = a.results
    run = json.loads((results / "gpu_check.json").read_text())
    art = unpack(results)
    work = results / "verify_work"
    work.mkdir(exist_ok=True)
    out = json.loads((results / "verify.json").read_text()) if (results / "verify.json").is_file() else {}
    for model in a.models:
        st = run["stages"].get(f"e2e_{model}", {})
        onnx = art / f"{model}.onnx"
        if not onnx.is_file() or sha256_of(onnx) != st.get("onnx", {}).get("sha256"):
            out[model] = {"error": "the exported file is missing or is not the one the run recorded"}
            continue
        if model == "unet3d":
            data, what = art / f"{model}_test_inputs.npy", "the run's validation inputs"
        else:
            data, same = _cosmo_inputs(run, work)
            what = "the run's validation samples, made again here from the generator's seed" + \
                ("" if same else " (not the same bytes: their sha256 differs from the run's)")
        prj = work / f"{model}_prj"
        old = out.get(model, {})
        if old.get("compile_rc") == 0 and (prj / "tessera.json").is_file() and old.get("onnx_sha256") == sha256_of(onnx):
            rec = {**old, "data": what}  # a verification cut off earlier: its project and finished calls stand
        else:
            t0 = time.perf_counter()
            c = subprocess.run([sys.executable, "-m", "tessera.cli", "compile", onnx, "-o", prj, "--io-type", "stream",
                                "--force"], capture_output=True, text=True)
            rec = {"onnx_sha256": sha256_of(onnx), "compile_rc": c.returncode,
                   "compile_s": round(time.perf_counter() - t0, 1), "compile_out": c.stdout.strip()[-400:],
                   "random_samples": a.samples, "data": what, "calls": []}
            if c.returncode != 0:
                rec["compile_err"] = c.stderr.strip()[-600:]
                out[model] = rec
                continue
        chunks = [("random", a.samples, None)]
        xs = np.load(data)
        for i in range(len(xs)):
            np.save(work / f"{model}_input_{i}.npy", xs[i:i + 1])
            chunks.append((f"input_{i}", 0, work / f"{model}_input_{i}.npy"))
        done = {x["chunk"] for x in rec["calls"] if x.get("rc") == 0 and "chunk" in x}
        rec["calls"] = [x for x in rec["calls"] if x.get("chunk") in done]
        for k, (name, n, d) in enumerate(chunks):
            if name in done:
                continue
            rec["calls"].append({"chunk": name, **_verify_once(onnx, prj, work / f"{model}_verify_{k}.json", n, d)})
            print(model, json.dumps(rec["calls"][-1])[:400], flush=True)
            (results / "verify.json").write_text(json.dumps({**out, model: rec}, indent=1) + "\n")
        calls = rec["calls"]
        if all("samples" in x for x in calls):
            rec.update(samples=sum(x["samples"] for x in calls), outputs=sum(x["outputs"] for x in calls),
                       mismatches=sum(x["mismatches"] for x in calls),
                       verify_s=round(sum(x["seconds"] for x in calls), 1),
                       independent={"equal": sum(x["independent_equal"] or 0 for x in calls),
                                    "outputs": sum(x["independent_outputs"] or 0 for x in calls)},
                       all_rc_zero=all(x["rc"] == 0 for x in calls))
        out[model] = rec
        (results / "verify.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


# --- the report ---------------------------------------------------------------------------------


def _mib(b) -> str:
    return f"{b / MIB:,.0f}"


def _e(x) -> str:
    return f"{x:.1e}"


def _e2e_rows(run: dict, ver: dict) -> list[str]:
    rows = ["| model | input | params | mesh | steps (epoch 1 + resumed) | step s (median, later steps) | first step s "
            "| CUDA max allocated MiB | resume | QONNX export | compile (CPU) | verified samples | outputs | mismatches "
            "| independent check |", "|" + "---|" * 15]
    for model in ("cosmoflow", "unet3d"):
        st = run["stages"].get(f"e2e_{model}")
        if not st or "epoch1" not in st or "resume" not in st:
            rows.append(f"| {model} | not run: {st.get('error') or st.get('skipped') if st else 'no record'} |" + " |" * 13)
            continue
        e1, e2 = st["epoch1"], st["resume"]
        v = ver.get(model, {})
        mem = max((e1.get("cuda") or {}).get("max_memory_allocated_per_rank") or [0],
                  default=0), max((e2.get("cuda") or {}).get("max_memory_allocated_per_rank") or [0], default=0)
        ind = v.get("independent") or {}
        rows.append(
            f"| {model} | {st['size']}^3, width {st['width']:g}, batch {st['batch']} | {e1['n_params']:,} | "
            f"{e1['mesh']['backend']}, {e1['mesh']['device']} | {e1['steps']} + {e2['steps'] - e1['steps']} | "
            f"{st['step_s_steady_median']:.3f} | {e1['step_seconds'][0]:.2f} | {_mib(max(mem))} | "
            f"{'same losses, from step ' + str(e2['resumed_from']['step']) if st['resume_ok'] else 'DIFFERS'} | "
            f"{st['onnx']['bytes'] / MIB:.1f} MiB | "
            + (f"{v['compile_s']:.0f} s | {v['samples']} | {v['outputs']:,} | {v['mismatches']} | "
               f"{ind.get('equal')}/{ind.get('outputs')} |" if "mismatches" in v else
               f"{v.get('compile_err') or v.get('error') or 'not run'} | | | | |"))
    rows.append("")
    for model in ("cosmoflow", "unet3d"):
        v = ver.get(model, {})
        if "mismatches" in v:
            real = v["samples"] - v["random_samples"]
            rows.append(f"*{model}*, verified on CPU (io_stream): {v['random_samples']} random full-range inputs"
                        + (f" and {real} of {v['data']}" if real else " (the run's validation inputs not verified: one "
                           f"verify call took {v['verify_s']:.0f} s on the 2-core machine)") + ".")
    return rows


def _equiv_rows(run: dict) -> list[str]:
    st = run["stages"].get("equivalence", {})
    rows = ["| model | input, width | data x grid | P | backend | devices | staged transfers | output | loss "
            "| input gradient | parameter gradients (worst) | bound | equal |", "|" + "---|" * 13]
    for x in st.get("rows", []):
        if "error" in x:
            rows.append(f"| {x['name']} | failed: {x['error']} |" + " |" * 11)
            continue
        rows.append(f"| {x['model']} | {x['extent'][0]}^3, {x['width']:g} | {x['data']} x {x['grid']} | {x['world']} | "
                    f"{x['backend']} | {', '.join(x['devices'])} | {x['staged_ops']:,} | {_e(x['output']['max_rel'])} | "
                    f"{_e(x['loss']['max_rel'])} | {_e(x['input_grad']['max_rel'])} | {_e(x['grads']['max_rel'])} "
                    f"(`{x['grads']['worst']}`) | {x['bound']:g} | {'yes' if x['passed'] else 'NO'} |")
    return rows


def _planned(run: dict, p: int, grid: str) -> dict | None:
    plan = run["stages"].get("perfmodel", {}).get("plans", {}).get(str(p))
    return next((x for x in plan["predictions"] if x["label"] == f"1 x {grid}"), None) if plan else None


def _memory_rows(run: dict) -> list[str]:
    st = run["stages"].get("memory", {})
    goal = {g["P"]: g for g in st.get("goal", [])}
    rows = ["| P | grid | backend | CUDA max allocated per rank MiB | single / P MiB | ratio | C MiB | goal 1.15 x "
            "single / P + C MiB | within | ratio of (M - C) | plan's memory per rank MiB (error) | step s |",
            "|" + "---|" * 12]
    for x in st.get("rows", []):
        if "error" in x:
            rows.append(f"| {x['P']} | failed: {x['error']} |" + " |" * 9)
            continue
        g = goal.get(x["P"], {})
        plan = _planned(run, x["P"], x["grid"])
        planned = f"{_mib(plan['mem_bytes'])} ({100 * (plan['mem_bytes'] / g['peak'] - 1):+.1f} %)" if plan and g else ""
        rows.append(f"| {x['P']} | {x['grid']} | {x['backend']} | "
                    f"{', '.join(_mib(b) for b in x.get('max_allocated_per_rank', []))} | {_mib(g['single_over_P'])} | "
                    f"{g['ratio']:.3f} | {_mib(g['constant'])} | {_mib(g['limit'])} | "
                    f"{'yes' if g['within_goal'] else 'no'} | {g['ratio_without_constant']:.3f} | {planned} | "
                    f"{x['step_s_median']:.3f} |" if g else f"| {x['P']} | {x['grid']} | {x['backend']} |" + " |" * 9)
    return rows


def _perf_rows(run: dict) -> list[str]:
    st = run["stages"].get("perfmodel", {})
    rows = ["| measured configuration | measured s | predicted s | of which the reader | of which compute x sharing "
            "| of which transfers | error |", "|---|---|---|---|---|---|---|"]
    for x in st.get("predictions", []):
        grid = "1x1x1" if x["P"] == 1 else {2: "2x1x1", 4: "2x2x1"}[x["P"]]
        plan = _planned(run, x["P"], grid) or {}
        comp = plan.get("compute_s", float("nan")) * plan.get("oversubscription", float("nan"))
        rows.append(f"| {x['what']} | {x['measured_s']:.3f} | {x['predicted_s']:.3f} | {x['predicted_io_s']:.3f} | "
                    f"{comp:.3f} (x{plan.get('oversubscription', float('nan')):g}) | {plan.get('comm_s', float('nan')):.3f} "
                    f"| {100 * x['error']:+.0f} % |")
    return rows


def _const_note(run: dict) -> list[str]:
    st = run["stages"].get("memory", {})
    rows = [x for x in st.get("rows", []) if "allocated_per_rank" in x]
    if not rows:
        return []
    n = rows[0]["n_params"]
    held = ", ".join(f"{_mib(max(x['allocated_per_rank']))} MiB at P = {x['P']}" for x in rows)
    blocks = ", ".join(f"{_mib(st['batch'] * 4 * st['size'] ** 3 * 4 / x['P'])}" for x in rows)
    return [f"Held between steps: {held}; of it the parameters, gradients and Adam's moments are "
            f"{_mib(16 * n)} MiB ({n:,} parameters x 16 bytes) and the input block {blocks} MiB.", ""]


def _perf_notes(run: dict) -> list[str]:
    """What the prediction table shows, in figures of this run."""
    one, four = _planned(run, 1, "1x1x1"), _planned(run, 4, "2x2x1")
    mem = {x["P"]: x for x in run["stages"].get("memory", {}).get("rows", []) if "step_s_median" in x}
    if not (one and four and 1 in mem and 4 in mem):
        return []
    rate = 3 * one["flops"] / mem[1]["step_s_median"] / 1e12
    return [f"At this size a layer's time on the GPU barely falls with its work: the calibrated compute per rank is "
            f"{one['compute_s']:.3f} s at one rank and {four['compute_s']:.3f} s at four ranks with a quarter of the "
            f"voxels each, and the one-rank step runs {one['flops'] / 1e9:.0f} GFLOP forward (about 3x that with "
            f"backward) at {rate:.2f} TFLOP/s: the steps are not bound by the GPU's arithmetic but by per-call costs, "
            f"which separate processes pay side by side (not measured apart here). The model has ranks sharing the "
            f"GPU take turns: x4 at four ranks, where the measured step is "
            f"{mem[4]['step_s_median'] / mem[1]['step_s_median']:.1f}x the one-rank step. The trainer's step is "
            f"mostly its reader (predicted {one['io_s']:.3f} s of {one['step_s']:.3f} s: the rank's two 32 MiB "
            f"samples read as HDF5 hyperslabs, augmented).", ""]


def write_main(a) -> int:
    run = json.loads((a.results / "gpu_check.json").read_text())
    for extra in a.extra or []:  # a later run of stages this one skipped, on the same kind of device
        more = json.loads((extra / "gpu_check.json").read_text())
        if more["environment"].get("device_name") != run["environment"].get("device_name"):
            raise SystemExit(f"{extra}: another device ({more['environment'].get('device_name')})")
        for name, rec in more["stages"].items():
            if "skipped" in run["stages"].get(name, {"skipped": ""}) and "skipped" not in rec:
                run["stages"][name] = {**rec, "run": f"a second run right after, of this stage alone ({more['wall_s']:.0f} s)",
                                       "skipped_in_first_run": run["stages"].get(name, {}).get("skipped")}
    ver = json.loads((a.results / "verify.json").read_text()) if (a.results / "verify.json").is_file() else {}
    env = run["environment"]
    st = run["stages"]
    perf = st.get("perfmodel", {})
    cal = perf.get("calibration", {})
    comm_backends = (cal.get("meta") or {}).get("comm_backends", {})
    tests = st.get("gpu_tests", {})
    lines = [
        "# The training companion on one H200 GPU",
        "",
        f"One run of `bench/gpu_check.sh` on one H200 GPU ({env.get('device_name')}, {env.get('total_memory_GiB')} GiB; "
        f"`nvidia-smi`: {env.get('nvidia_smi')}), {env.get('cpu_count')} CPU cores; Python {env['python']}, torch "
        f"{env['torch']}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, NCCL {env.get('nccl')}, brevitas "
        f"{env.get('brevitas')}. The script's wall time: {run['wall_s']:.0f} s (stages 1-4). Raw "
        "figures: `gpu_check.json`; "
        "the exported QONNX files were compiled and verified on a 2-core CPU machine by `python bench/gpu_report.py "
        "verify` (the files themselves are not in the repository). Float32 training steps on this GPU run with torch's "
        f"defaults (cuDNN TF32 {'on' if env.get('cudnn_allow_tf32') else 'off'}: the convolutions' inputs and weights "
        "are 8-bit codes times powers of two, which TF32 holds exactly).",
        "",
        "## 1. CUDA end to end, one rank",
        "",
        "`torchrun --nproc-per-node 1 -m tessera.cli train MODEL --device cuda ...` for one epoch, then again with "
        "`--epochs 2 --resume`; the QONNX file is the second run's export. CosmoFlow reads generated HDF5 samples "
        "(exponential noise, seeded: no data set is fetched), the U-Net MNI152 patches (64^3 from the 1 mm template). "
        "Step times are the trainer's (`metrics.json`: reading the rank's samples, forward, backward, optimizer); the "
        "median leaves out each launch's first step. Memory: `torch.cuda.max_memory_allocated` over the whole run "
        "(training, validation). *Resume*: the resumed run starts at the first run's step count and its per-step "
        "losses begin with the first run's, equal.",
        "",
        *_e2e_rows(run, ver),
        "",
        "## 2. Spatial parallelism on the device: one float64 step, sharded == single process",
        "",
        "`tessera.training.check.run_equivalence` with `device='cuda'`: the ranks and the single-process reference "
        "on the same GPU. With one GPU, NCCL refuses two ranks on it: the ranks use gloo with CUDA tensors, every "
        "transfer staged through host memory (*staged transfers*: operations copied, all ranks). Relative differences "
        "`max |a - b| / max |b|` per tensor, the worst parameter gradient named; the bound is the CPU tests'.",
        "",
        *_equiv_rows(run),
        "",
        "## 3. Memory per rank, CosmoFlow on one GPU",
        "",
        f"`bench/gpu_check.py step` under torchrun: CosmoFlow {st.get('memory', {}).get('size')}^3, width "
        f"{st.get('memory', {}).get('width')}, global batch {st.get('memory', {}).get('batch')}, P spatial ranks on one "
        "GPU, one warm-up and the timed steps. *CUDA max allocated*: `torch.cuda.max_memory_allocated` of each rank "
        "after its steps. *C*: what a rank holds between steps (`torch.cuda.memory_allocated` after a step: "
        "parameters, gradients, Adam's two moments, the input block), the largest over all P -- every process "
        "holds the replicated state whole. The goal: M_P <= 1.15 x M_1 / P + C. *ratio of (M - C)*: "
        "(M_P - C) / ((M_1 - C) / P). *Plan*: `tessera plan train`'s memory per rank from the calibration of "
        "section 4.",
        "",
        *_const_note(run),
        "",
        *_memory_rows(run),
        "",
        "## 4. The performance model on the device",
        "",
        f"`tessera calibrate --device cuda` ({perf.get('calibrate_wall_s')} s; layers on "
        f"{(cal.get('meta') or {}).get('device_name')}, transfers at {', '.join(sorted(comm_backends))} "
        f"processes on {', '.join(sorted(set(comm_backends.values())))}), then "
        "`tessera plan train cosmoflow --ranks P` for P = 1, 2, 4 at the configurations measured above. Ranks "
        "sharing one GPU are modelled as taking turns on it (compute x P / GPUs). The trainer's step includes its "
        "reader; the steps of section 3 have their inputs in memory, so their prediction leaves the reader out. "
        "Error: (predicted - measured) / measured. The U-Net is not predicted: the performance model covers "
        "CosmoFlow only.",
        "",
        *_perf_rows(run),
        "",
        *_perf_notes(run),
        "## 5. The tests marked gpu",
        "",
        f"`pytest tests/training/test_gpu.py` on the GPU: exit {tests.get('rc')}, "
        f"`{(tests.get('summary') or ['not run'])[-1].strip('= ')}`"
        + (f" -- in {tests['run']}; the first run skipped the stage ({tests['skipped_in_first_run']})."
           if tests.get("run") else "."),
        "",
        "## What ran on the GPU, and what did not",
        "",
        "Ran: the trainer on CUDA (NCCL with one rank), its checkpoint, resume and export; gloo with CUDA tensors "
        "(2 and 4 ranks on one GPU, transfers staged through host memory) in the equivalence check, the memory "
        "steps and the calibration's transfers; `tessera calibrate --device cuda`, `tessera plan train`; the "
        "tests marked gpu. Not run: NCCL between ranks and several GPUs (one GPU); multi-step trajectories on the "
        "GPU; the reliability tests (killed, hung, restarted ranks) and the CPU benches of training (equivalence "
        "sweeps, saved-activation memory); bf16 or mixed precision (the trainer trains in float32).",
        "",
    ]
    if run.get("notes"):
        lines += ["## Notes", "", *run["notes"], ""]
    out = ROOT / "docs" / "results"
    (out / "gpu_check.md").write_text("\n".join(lines))
    slim = json.loads(json.dumps(run))
    if "calibration" in slim["stages"].get("perfmodel", {}):
        c = slim["stages"]["perfmodel"]["calibration"]
        slim["stages"]["perfmodel"]["calibration"] = {k: c[k] for k in ("cores", "threads", "device", "gpus", "p2p",
                                                                          "allreduce", "allgather", "io", "adam", "meta")}
    for p in slim["stages"].get("perfmodel", {}).get("plans", {}).values():
        p["predictions"] = [{k: v for k, v in x.items() if k != "mem"} for x in p["predictions"]]
    slim["cpu_verify"] = ver
    (out / "gpu_check.json").write_text(json.dumps(slim, indent=1) + "\n")
    print(f"wrote {out / 'gpu_check.md'} and .json")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify")
    v.add_argument("results", type=Path)
    v.add_argument("--samples", type=int, default=2, help="random full-range inputs (besides the run's own)")
    v.add_argument("--models", nargs="+", default=["unet3d", "cosmoflow"])
    w = sub.add_parser("write")
    w.add_argument("results", type=Path)
    w.add_argument("--extra", type=Path, nargs="+", help="results of later runs of stages the first one skipped")
    a = ap.parse_args(argv)
    return {"verify": verify_main, "write": write_main}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
