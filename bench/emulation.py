"""Emulation at the speed of the machine: Tessera's C-simulation beside hls4ml's and beside the
exact onnxruntime reference, per model, in one run, on the same model file and the same inputs.

Per model:

- **Tessera** (``compiler/sim``): compile (the project written); the C-simulation build with
  an empty object store (the first build on a new machine: the precompiled header is left
  to a background g++ at the lowest priority), with only the precompiled header stored (the
  first build of a new model on a machine that built one before), of the unchanged project, and of a second
  project compiled from the same file (objects reused); worker start; the first emulation of
  the inputs and a warm one (the workers kept), on all cores and on one.
- **hls4ml 1.3**, two ways: (a) its documented QONNX flow on the same file where it converts
  it (convert, ``compile()`` = its ``build_lib.sh`` at -O3, ``predict()`` = one ctypes call
  per sample); (b) ``compile()`` and ``predict()`` of Tessera's own project through
  ``hls4ml.converters.link_existing_project``: the same C++, built and run by hls4ml (its
  outputs must equal Tessera's, ``==``).
- **onnxruntime**: Tessera's exact reference (``OrtReference``) on the same codes, warm.
- **Whole processes**: ``tessera emulate`` of the row's inputs as a user runs it (the
  command in a new process: imports, the project read, the up-to-date check, worker start,
  the run, the output written), warm (the library built before), the fastest of
  :data:`WARM_RUNS` after a first; and ``tessera --help``, the fastest of :data:`HELP_RUNS`.

Every Tessera emulation is compared with the reference (``==`` on every output).  Ratios
are the result: first run = compile + cold build + first emulation, against hls4ml's convert
+ compile + predict (both sides' Python modules imported before anything is timed); warm emulation against hls4ml's predict and against the reference.
Writes docs/results/emulation.{json,md,png}.

    python bench/emulation.py                          # about 20 min on 2 cores
    python bench/emulation.py --models jet_mlp --work /tmp/emu
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _cores() -> int:
    return len(os.sched_getaffinity(0))


# ----------------------------------------------------------------------------- models


def zoo_model(name: str, work: Path) -> Path:
    from tessera.models.train import train_model

    mdir = work / name
    if not (mdir / "model.onnx").exists():
        train_model(name, mdir, progress=False)
    return mdir / "model.onnx"


def lstm_model(work: Path) -> Path:
    """The sentiment classifier of paper 3 (embedding 32, LSTM 64, ternary weights) at random
    initialisation, exported over 24 steps: the speed of emulation does not depend on training."""
    import torch

    from tessera.models.rnn.export import export_sentiment
    from tessera.models.rnn.networks import SentimentRNN

    path = work / "lstm_ternary_24.onnx"
    if not path.exists():
        torch.manual_seed(0)
        model = SentimentRNN("lstm", "ternary", 1000, 32, 64, stochastic=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_sentiment(model, path, seq_len=24)
    return path


def cosmoflow_model(work: Path, size: int = 32, width: float = 0.25) -> Path:
    from partition import export

    path = work / f"cosmoflow_{size}_w{width:g}.onnx"
    if not path.exists():
        export(size, width, path)
    return path


#: Warm emulations timed per configuration (the fastest is reported).
WARM_RUNS = 2
#: Runs of ``tessera --help`` timed (the fastest is reported).
HELP_RUNS = 5
#: Rows whose top function is also built other ways (:func:`flag_study`).
STUDY = ("digits_cnn io_parallel", "digits_cnn io_stream", "lstm ternary")
#: label -> (model file maker, io type, samples, block grid or None)
MODELS = {
    "jet_mlp": (lambda w: zoo_model("jet_mlp_w8a8", w), "io_parallel", 10_000, None),
    "digits_cnn io_parallel": (lambda w: zoo_model("digits_cnn_w8a8", w), "io_parallel", 1000, None),
    "digits_cnn io_stream": (lambda w: zoo_model("digits_cnn_w8a8", w), "io_stream", 1000, None),
    "lstm ternary": (lstm_model, "io_parallel", 1000, None),
    "cosmoflow 32^3": (cosmoflow_model, "io_stream", 40, None),
    "cosmoflow 32^3 2x2x1 blocks": (cosmoflow_model, "io_stream", 8, (2, 2, 1)),
}


# ----------------------------------------------------------------------------- Tessera


def _store(cache: Path, keep_pch: bool) -> None:
    """Empty the object store, or keep only its precompiled headers."""
    store = cache / "csim"
    if not keep_pch:
        shutil.rmtree(store, ignore_errors=True)
        return
    for p in store.rglob("*.o"):
        p.unlink()


def _quiet_store(cache: Path, limit_s: float = 600) -> None:
    """Wait for the background precompiled-header builds a cold build left: the emulation
    is timed on idle cores."""
    t0 = time.perf_counter()
    while any((cache / "csim").rglob("*.building")) and time.perf_counter() - t0 < limit_s:
        time.sleep(0.5)


def _folder(label: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in label)


def tessera(label: str, model: Path, io_type: str, grid, codes: np.ndarray, ref: np.ndarray, work: Path,
            cache: Path) -> dict:
    from tessera.compiler import api
    from tessera.compiler.sim.build import Builder

    prj = work / f"{_folder(label)}_tessera"
    t0 = time.perf_counter()
    api.compile_model(model, prj, api.CompileOptions(io_type=io_type, grid=grid, force=True))
    row = {"compile_s": time.perf_counter() - t0}

    def build(rebuild: bool) -> tuple[float, object]:
        t = time.perf_counter()
        sim = api.simulation(prj)
        if grid is None:
            report = Builder().build(prj, rebuild=rebuild)  # the library: what emulation needs
        else:
            sim.build(rebuild=rebuild)
            report = None
        return time.perf_counter() - t, report

    _store(cache, keep_pch=False)
    row["build_cold_s"], rep = build(True)
    if rep is not None:
        row["build_cold_units"] = {u.unit: round(u.seconds, 2) for u in rep.units}
    for kernel in ([prj] if grid is None else sorted(p.parent for p in prj.glob("*/*/tessera.json")) + [prj / "tail"]):
        if (kernel / "tessera.json").is_file():
            Builder().precompile(kernel)  # what the cold build left to the background, done now
    _store(cache, keep_pch=True)
    row["build_pch_s"], _ = build(True)
    row["rebuild_unchanged_s"], _ = build(False)
    if grid is None:
        other = work / f"{_folder(label)}_tessera_copy"
        api.compile_model(model, other, api.CompileOptions(io_type=io_type, force=True))
        t = time.perf_counter()
        rep = Builder().build(other)
        row["second_project_s"] = time.perf_counter() - t
        row["second_project_units_compiled"] = rep.compiled
    _quiet_store(cache)
    for workers in (_cores(), 1):
        sim = api.simulation(prj, workers)
        sim.build()
        t = time.perf_counter()
        started = sim.start(len(codes)) if hasattr(sim, "start") else 0
        t_start = time.perf_counter() - t
        t = time.perf_counter()
        got = sim.run_codes(codes)
        t_first = time.perf_counter() - t
        assert np.array_equal(got, ref), f"{label}: C-simulation != exact reference"
        t_warm = float("inf")
        for _ in range(WARM_RUNS):  # this machine's noise is about 10 %: the fastest of the warm runs
            t = time.perf_counter()
            got = sim.run_codes(codes)
            t_warm = min(t_warm, time.perf_counter() - t)
            assert np.array_equal(got, ref), f"{label}: C-simulation != exact reference"
        row[f"workers_{workers}"] = {"workers_started": started, "start_s": t_start, "first_s": t_first,
                                     "warm_s": t_warm, "warm_ms_per_sample": 1e3 * t_warm / len(codes)}
        if hasattr(sim, "close"):
            sim.close()
    row["project"] = str(prj)
    row["equal_to_reference"] = True
    return row


#: The cold build's variants (:func:`cold_build_study`): name and Builder arguments; the first is the default.
COLD_VARIANTS = (("default", {}), ("top function in one unit", {"shards": 1}),
                 ("weight loaders at the build's -O2", {"loader_opt": "2"}))


def cold_build_study(prj: Path, cache: Path) -> list[dict]:
    """The library's build with an empty object store, the default and each variant, the
    background precompiled header of the one before done first (idle cores for each)."""
    from tessera.compiler.sim.build import Builder

    out = []
    for name, kwargs in COLD_VARIANTS:
        _quiet_store(cache)
        _store(cache, keep_pch=False)
        t = time.perf_counter()
        rep = Builder(**kwargs).build(prj, rebuild=True)
        out.append({"variant": name, "build_s": time.perf_counter() - t, "shards": rep.shards,
                    "units": {u.unit: round(u.seconds, 2) for u in rep.units}})
        print(f"  cold build, {name}: {out[-1]['build_s']:.1f} s ({rep.shards} top units)", flush=True)
    _quiet_store(cache)
    Builder().build(prj, rebuild=True)  # the project as the bench left it
    return out


#: (opt, codegen opt, ap_types view) of the build study; the first is the build's default.
FLAG_VARIANTS = (("-O2", "g", True), ("-O2", "g", False), ("-O1", "g", True), ("-O3", "g", True), ("-O2", "0", True),
                 ("-O2", "2", True), ("-O3", "3", True))


def flag_study(prj: Path, codes: np.ndarray, ref: np.ndarray, n: int = 200) -> list[dict]:
    """The top function's compile seconds (no object store) and one core's ms per sample for
    each variant of the build (optimisation levels; ap_types as shipped or the C-simulation's
    view of them), the library called in this process; outputs == reference."""
    import ctypes

    from tessera.compiler.project import PACKED_ENTRY
    from tessera.compiler.sim.build import Builder
    from tessera.compiler.sim.csim import CSim
    from tessera.compiler.sim.objcache import ObjectCache

    sim = CSim(prj, workers=1)
    x = np.array(sim.bridge_inputs(codes[:n]), order="C")
    n_out = sim.manifest.output.size
    out = []
    for opt, codegen, view in (*FLAG_VARIANTS, FLAG_VARIANTS[0]):  # the default again last: the project as it was
        rep = Builder(cache=ObjectCache(None), opt=opt, codegen_opt=codegen, aptypes_view=view, shards=1).build(
            prj, rebuild=True, testbench=False)
        if (opt, codegen, view) == FLAG_VARIANTS[0] and out:
            break
        lib = ctypes.CDLL(str(rep.library))
        batch = lib.tessera_csim_batch
        batch.restype = ctypes.c_long
        batch.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long] * 3 + [ctypes.c_void_p]
        fn = ctypes.cast(getattr(lib, PACKED_ENTRY), ctypes.c_void_p)
        y, done = np.zeros((n, n_out)), ctypes.c_long(0)
        batch(fn, x.ctypes.data, y.ctypes.data, 2, x.shape[1], n_out, ctypes.addressof(done))  # weights loaded
        ms = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            batch(fn, x.ctypes.data, y.ctypes.data, n, x.shape[1], n_out, ctypes.addressof(done))
            ms = min(ms, 1e3 * (time.perf_counter() - t) / n)
        ap_types = rep.aptypes.value
        assert np.array_equal(sim.output_codes(y), ref[:n]), f"{opt} / -O{codegen} / {ap_types}: outputs differ"
        top = next(u.seconds for u in rep.units if u.unit == "top")
        out.append({"opt": opt, "codegen_opt": f"-O{codegen}", "ap_types": ap_types, "top_compile_s": top,
                    "ms_per_sample": ms})
        print(f"  {opt}, code_gen -O{codegen}, ap_types {ap_types}: top {top:.1f} s, {ms:.3f} ms/sample", flush=True)
    return out


def _tessera_command() -> list[str]:
    """``tessera`` as a user runs it: the console script beside this Python, else ``python -m tessera.cli``."""
    script = Path(sys.executable).with_name("tessera")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tessera.cli"]


def _process_seconds(args: list[str]) -> float:
    """Wall seconds of ``tessera ARGS`` in a new process (it must succeed)."""
    t = time.perf_counter()
    res = subprocess.run(_tessera_command() + args, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    assert res.returncode == 0, f"tessera {' '.join(args)}: {res.stderr[-500:]}"
    return seconds


def help_seconds() -> float:
    """``tessera --help`` in a new process, the fastest of :data:`HELP_RUNS`."""
    return min(_process_seconds(["--help"]) for _ in range(HELP_RUNS))


def whole_process(label: str, prj: Path, x_real: np.ndarray, expected: np.ndarray, work: Path) -> dict:
    """``tessera emulate`` of ``x_real`` in a new process, the library built before: the
    fastest of :data:`WARM_RUNS` after a first; its outputs equal to the reference's (``==``)."""
    inputs, outputs = work / f"{_folder(label)}_x.npy", work / f"{_folder(label)}_y.npy"
    np.save(inputs, x_real)
    args = ["emulate", str(prj), "--input", str(inputs), "--output", str(outputs)]
    first = _process_seconds(args)
    warm = min(_process_seconds(args) for _ in range(WARM_RUNS))
    assert np.array_equal(np.load(outputs).reshape(expected.shape), expected), f"{label}: tessera emulate != reference"
    return {"first_s": first, "warm_s": warm}


# ----------------------------------------------------------------------------- hls4ml


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def hls4ml_own_flow(label: str, model: Path, x_real: np.ndarray, work: Path) -> dict:
    """hls4ml's documented QONNX flow on the user's file (as bench/realworld.py runs it)."""
    from realworld import hls4ml_predict

    t0 = time.perf_counter()
    y, info = hls4ml_predict(model, x_real, work / f"{_folder(label)}_hls4ml_own")
    if y is None:
        return {"converts": False, "error": info.get("error")}
    total = time.perf_counter() - t0
    predict_s = total - info["convert_s"] - info["compile_s"]
    return {"converts": True, "convert_s": info["convert_s"], "compile_s": info["compile_s"], "predict_s": predict_s}


def hls4ml_same_project(prj: Path, codes: np.ndarray, tessera_codes: np.ndarray) -> dict:
    """hls4ml's compile() and predict() of Tessera's project: the same C++, built and run by hls4ml."""
    import hls4ml

    from tessera.compiler.sim.csim import CSim

    sim = CSim(prj, workers=1)
    x = sim.bridge_inputs(codes)
    cwd = os.getcwd()
    os.chdir(prj)  # the project's hls4ml_config.yml names OutputDir '.'
    try:
        with _quiet():
            m = hls4ml.converters.link_existing_project(".")
            t0 = time.perf_counter()
            m.compile()
            t1 = time.perf_counter()
            y = np.asarray(m.predict(np.ascontiguousarray(x)), dtype=np.float64)
            t2 = time.perf_counter()
            warm = float("inf")
            for _ in range(WARM_RUNS):  # as Tessera's warm runs: the fastest
                t = time.perf_counter()
                m.predict(np.ascontiguousarray(x))
                warm = min(warm, time.perf_counter() - t)
    finally:
        os.chdir(cwd)
        for lib in (prj / "firmware").glob("*.so"):  # hls4ml's own library beside Tessera's
            if lib != sim.library():
                lib.unlink()
    same = np.array_equal(sim.output_codes(y.reshape(len(x), -1)), tessera_codes)
    return {"compile_s": t1 - t0, "predict_s": t2 - t1, "predict_warm_s": warm, "equal_to_tessera": bool(same)}


# ----------------------------------------------------------------------------- one model


def run_model(label: str, work: Path, cache: Path) -> dict:
    from tessera.compiler import api
    from tessera.compiler.reference.model import OrtReference, reference_model
    from tessera.compiler.samples import sample_codes

    make, io_type, n, grid = MODELS[label]
    model = make(work)
    graph = api.load_model(model)
    codes = sample_codes(graph.values[graph.input], n, seed=7)
    ort = OrtReference(reference_model(graph))
    ort.run(codes[:4])
    t0 = time.perf_counter()
    ref = ort.run(codes)
    row = {"model": label, "file": model.name, "io_type": io_type, "grid": list(grid) if grid else None,
           "samples": int(n), "ort_reference_s": time.perf_counter() - t0, "cores": _cores()}
    print(f"[{label}] Tessera", flush=True)
    row["tessera"] = tessera(label, model, io_type, grid, codes, ref, work, cache)
    print(f"[{label}] hls4ml", flush=True)
    x_real = graph.input_real(codes).astype(np.float32)
    row["hls4ml_own_flow"] = hls4ml_own_flow(label, model, x_real, work) if io_type == "io_parallel" else \
        {"converts": None, "error": "run for io_parallel rows only (its documented flow)"}
    if grid is None:
        row["hls4ml_same_project"] = hls4ml_same_project(Path(row["tessera"]["project"]), codes, ref)
    print(f"[{label}] tessera emulate as a process", flush=True)
    row["tessera_process"] = whole_process(label, Path(row["tessera"]["project"]), x_real,
                                           graph.real(graph.output, ref), work)
    if grid is None:
        print(f"[{label}] cold build variants", flush=True)
        row["cold_build_study"] = cold_build_study(Path(row["tessera"]["project"]), cache)
    if label in STUDY:
        print(f"[{label}] optimisation levels", flush=True)
        row["flag_study"] = flag_study(Path(row["tessera"]["project"]), codes, ref)
    return row


# ----------------------------------------------------------------------------- report


def ratios(r: dict) -> dict:
    t, k = r["tessera"], r["cores"]
    first = t["compile_s"] + t["build_cold_s"] + t[f"workers_{k}"]["start_s"] + t[f"workers_{k}"]["first_s"]
    warm = t[f"workers_{k}"]["warm_s"]
    out = {"tessera_first_run_s": first, "warm_vs_ort": warm / r["ort_reference_s"],
           "scaling_1_to_all_workers": t["workers_1"]["warm_s"] / warm}
    own, same = r.get("hls4ml_own_flow") or {}, r.get("hls4ml_same_project") or {}
    if own.get("converts"):
        out["first_vs_hls4ml_own"] = first / (own["convert_s"] + own["compile_s"] + own["predict_s"])
        out["warm_vs_hls4ml_own_predict"] = warm / own["predict_s"]
    if same:
        out["first_vs_hls4ml_same"] = first / (t["compile_s"] + same["compile_s"] + same["predict_s"])
        out["warm_vs_hls4ml_same_predict"] = warm / same["predict_warm_s"]
        out["process_vs_hls4ml_same_predict"] = r["tessera_process"]["warm_s"] / same["predict_warm_s"]
        out["build_cold_vs_hls4ml_compile"] = t["build_cold_s"] / same["compile_s"]
    return out


def _f(v, digits=2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def process_lines(rows: list[dict], help_s: float) -> list[str]:
    """The whole-process section: ``tessera emulate`` as a user runs it, and ``tessera --help``."""
    lines = ["", "## Whole processes", "",
             f"`tessera emulate PROJECT --input X.npy --output Y.npy` in a new process, as a user runs it (Python's start "
             "and imports, the project read, the up-to-date check, worker start, the run, the output written), the "
             f"library built before: the fastest of {WARM_RUNS} runs after a first; its outputs equal the reference's "
             "(`==`).  Against hls4ml's warm `predict` of the same project *in* a process that has everything loaded.  "
             f"`tessera --help` in a new process: {help_s:.2f} s (the fastest of {HELP_RUNS}).", "",
             "| model | samples | `tessera emulate` first s | warm s | in-process warm s | hls4ml same project predict s | "
             "warm process vs hls4ml predict |", "|---|---|---|---|---|---|---|"]
    k = rows[0]["cores"]
    for r in rows:
        proc, same = r["tessera_process"], r.get("hls4ml_same_project")
        lines.append(f"| {r['model']} | {r['samples']:,} | {proc['first_s']:.2f} | {proc['warm_s']:.2f} | "
                     f"{r['tessera'][f'workers_{k}']['warm_s']:.2f} | {_f(same and same['predict_warm_s'])} | "
                     f"{_f(r['ratios'].get('process_vs_hls4ml_same_predict'))} |")
    return lines


def write_outputs(rows: list[dict], out: Path, help_s: float) -> None:
    for r in rows:
        r["ratios"] = ratios(r)
    (out / "emulation.json").write_text(json.dumps({"machine": platform.platform(), "cores": _cores(),
                                                    "tessera_help_s": help_s, "rows": rows}, indent=1) + "\n")
    k = rows[0]["cores"]
    lines = ["# Emulation speed: Tessera's C-simulation, hls4ml's and the exact onnxruntime reference", "",
             f"Generated by `python bench/emulation.py` on {k} cores ({platform.machine()}); raw numbers in "
             "`emulation.json`.  One run, the same model file and the same random full-range inputs for all. "
             "Tessera's outputs equal the exact reference on every output of every row (`==`), and hls4ml's build of "
             "Tessera's project equals Tessera's where it ran.  **Ratios are the result** (Tessera / other: below 1 is "
             "faster); absolute seconds depend on the machine.", "",
             "*first run*: compile + C-sim build with an empty object store + worker start + first emulation; hls4ml's: "
             "convert + compile + predict.  *warm*: the fastest of two more emulations of the same inputs (workers kept).  hls4ml (own "
             "flow): its documented QONNX flow on the file (io_parallel rows); hls4ml (same project): its compile() "
             "(build_lib.sh, -O3) and predict() of Tessera's project (warm: the fastest of two more predicts).", "",
             f"| model | samples | first run s | vs hls4ml own | vs hls4ml same project | warm s ({k} workers) | warm vs "
             "hls4ml own predict | warm vs hls4ml same predict | warm vs ORT reference | 1 -> "
             f"{k} workers speed-up |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        q, t = r["ratios"], r["tessera"]
        lines.append(f"| {r['model']} | {r['samples']:,} | {_f(q['tessera_first_run_s'], 1)} | "
                     f"{_f(q.get('first_vs_hls4ml_own'))} | {_f(q.get('first_vs_hls4ml_same'))} | "
                     f"{_f(t[f'workers_{k}']['warm_s'])} | {_f(q.get('warm_vs_hls4ml_own_predict'))} | "
                     f"{_f(q.get('warm_vs_hls4ml_same_predict'))} | {_f(q['warm_vs_ort'], 1)} | "
                     f"{_f(q['scaling_1_to_all_workers'])} |")
    lines += ["", "## Phases (seconds)", "",
              "| model | Tessera compile | build, empty store | build, precompiled header stored | rebuild unchanged | "
              "second project (units compiled) | worker start | first emulation | warm, 1 worker | ms/sample warm | "
              "hls4ml own: convert / compile / predict | hls4ml same project: compile / predict | ORT reference |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, own, same = r["tessera"], r.get("hls4ml_own_flow") or {}, r.get("hls4ml_same_project")
        wk = t[f"workers_{k}"]
        own_cell = (f"{own['convert_s']:.2f} / {own['compile_s']:.1f} / {own['predict_s']:.2f}" if own.get("converts")
                    else f"does not convert ({(own.get('error') or 'n/a')[:60]})")
        same_cell = f"{same['compile_s']:.1f} / {same['predict_s']:.2f}" if same else "n/a (blocks)"
        second = (f"{t['second_project_s']:.2f} ({t['second_project_units_compiled']})" if "second_project_s" in t
                  else "-")
        lines.append(f"| {r['model']} | {t['compile_s']:.2f} | {t['build_cold_s']:.1f} | {t['build_pch_s']:.1f} | "
                     f"{t['rebuild_unchanged_s']:.3f} | {second} | {wk['start_s']:.2f} | {wk['first_s']:.2f} | "
                     f"{t['workers_1']['warm_s']:.2f} | {wk['warm_ms_per_sample']:.3f} | {own_cell} | {same_cell} | "
                     f"{r['ort_reference_s']:.3f} |")
    lines += process_lines(rows, help_s)
    colds = [r for r in rows if r.get("cold_build_study")]
    if colds:
        names = [n for n, _ in COLD_VARIANTS]
        lines += ["", "## The cold build's choices, measured", "",
                  "The library's build with an empty object store (as in the first run), each variant after the "
                  "background precompiled header of the one before is done.  *top units*: the units the top function was "
                  "compiled in (`compiler/sim/shard.py`: one per core, at most one per layer with weights).  Seconds "
                  "(top units); one run each, this machine's noise is about 10-30 % on a build.", "",
                  "| model | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for r in colds:
            cells = [f"{v['build_s']:.1f} ({v['shards']})" for v in r["cold_build_study"]]
            lines.append(f"| {r['model']} | " + " | ".join(cells) + " |")
    studies = [r for r in rows if r.get("flag_study")]
    if studies:
        lines += ["", "## The build's choices, measured", "",
                  "The top function's unit compiled alone (one unit, no object store, no precompiled header) and one core's time per "
                  "sample, the library called in-process on 200 of the row's inputs (outputs equal to the reference in every "
                  "variant).  *code_gen*: the level of hls4ml's generated `nnet_code_gen.h` (io_parallel convolutions' "
                  "`fill_buffer`).  *ap_types*: the project's ap_types as shipped, or the C-simulation's view of them "
                  "(`compiler/sim/aptypes.py`: a non-volatile overload of `ap_private::clearUnusedBits`, so ap_fixed "
                  "arithmetic stays in registers).  The first line is Tessera's default.  Per sample: the fastest of 3 "
                  "runs; differences under about 10 % are this shared machine's noise.", "",
                  "| model | level | code_gen | ap_types | top unit s | ms / sample | vs default |",
                  "|---|---|---|---|---|---|---|"]
        for r in studies:
            base = r["flag_study"][0]["ms_per_sample"]
            for v in r["flag_study"]:
                lines.append(f"| {r['model']} | {v['opt']} | {v['codegen_opt']} | {v.get('ap_types', 'as shipped')} | "
                             f"{v['top_compile_s']:.1f} | {v['ms_per_sample']:.3f} | {v['ms_per_sample'] / base:.2f} |")
    (out / "emulation.md").write_text("\n".join(lines) + "\n")
    plot(rows, out / "emulation.png")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = rows[0]["cores"]
    labels = [r["model"] for r in rows]
    xs = np.arange(len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    first = [r["ratios"]["tessera_first_run_s"] for r in rows]
    own = [sum(r["hls4ml_own_flow"][p] for p in ("convert_s", "compile_s", "predict_s"))
           if (r.get("hls4ml_own_flow") or {}).get("converts") else np.nan for r in rows]
    same = [r["tessera"]["compile_s"] + r["hls4ml_same_project"]["compile_s"] + r["hls4ml_same_project"]["predict_s"]
            if r.get("hls4ml_same_project") else np.nan for r in rows]
    axes[0].bar(xs - 0.27, first, 0.27, label="Tessera (empty object store)")
    axes[0].bar(xs, own, 0.27, label="hls4ml, its QONNX flow")
    axes[0].bar(xs + 0.27, same, 0.27, label="hls4ml, Tessera's project")
    axes[0].set_ylabel("seconds")
    axes[0].set_title("first run: compile + build + emulate")
    per = lambda s, r: 1e3 * s / r["samples"]
    axes[1].bar(xs - 0.3, [per(r["tessera"][f"workers_{k}"]["warm_s"], r) for r in rows], 0.2, label=f"Tessera, {k} workers")
    axes[1].bar(xs - 0.1, [per(r["tessera"]["workers_1"]["warm_s"], r) for r in rows], 0.2, label="Tessera, 1 worker")
    axes[1].bar(xs + 0.1, [per(r["hls4ml_same_project"]["predict_warm_s"], r) if r.get("hls4ml_same_project") else np.nan
                           for r in rows], 0.2, label="hls4ml predict (same project)")
    axes[1].bar(xs + 0.3, [per(r["ort_reference_s"], r) for r in rows], 0.2, label="onnxruntime exact reference")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("ms per sample (warm)")
    axes[1].set_title("warm emulation")
    for ax in axes:
        ax.set_xticks(xs, labels, rotation=30, ha="right", fontsize=8)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def import_both() -> None:
    """Import what Tessera's compile and hls4ml's convert load on first use, before anything
    is timed: neither side's first run pays the Python imports (hls4ml's convert would
    otherwise find its modules loaded by Tessera's compile)."""
    with _quiet():
        import hls4ml  # noqa: F401
        from hls4ml.model.graph import ModelGraph  # noqa: F401
        from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean  # noqa: F401
        from qonnx.transformation.gemm_to_matmul import GemmToMatMul  # noqa: F401
        from qonnx.util.cleanup import cleanup_model  # noqa: F401

        from tessera.compiler import api  # noqa: F401
        from tessera.compiler.lower import extensions, hls4ml_lower  # noqa: F401
        from tessera.compiler.partition import project  # noqa: F401
        from tessera.compiler.sim import build, csim  # noqa: F401


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "bench_emulation")
    ap.add_argument("--models", help=f"comma-separated subset of: {', '.join(MODELS)}")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    a = ap.parse_args()
    labels = [m.strip() for m in a.models.split(",")] if a.models else list(MODELS)
    a.work.mkdir(parents=True, exist_ok=True)
    cache = a.work / "cache"
    os.environ["TESSERA_CACHE"] = str(cache)  # the bench's own object store: emptied for the cold builds
    import_both()
    help_s = help_seconds()
    print(json.dumps({"tessera_help_s": round(help_s, 3)}), flush=True)
    rows = []
    for label in labels:
        rows.append(run_model(label, a.work, cache))
        print(json.dumps({"model": label, **{k: round(v, 3) for k, v in ratios(rows[-1]).items()}}), flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    write_outputs(rows, a.out, help_s)
    print((a.out / "emulation.md").read_text())


if __name__ == "__main__":
    main()
