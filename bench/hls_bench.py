"""Measurements shared by the benchmarks that compile models to HLS projects.

``measure_project`` writes one project, builds its g++ C-simulation, and runs the full
``verify`` (random full-range inputs + optional real inputs); the emulation throughputs it
reports are those of the verification run itself (C-simulation and exact onnxruntime
reference on the same inputs, whose outputs are compared with ``==``).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from tessera.compiler import api
from tessera.compiler.hlscheck.check import check_project, project_folders
from tessera.compiler.ops import OPS
from tessera.compiler.sim.build import Builder
from tessera.compiler.sim.csim import CSim
from tessera.compiler.sim.objcache import ObjectCache


def weight_bits(graph) -> int:
    """Bits of every weight and bias tensor as stored (each op's ``weight_bits`` facet)."""
    return int(sum(OPS[node.op].weight_bits(node.attrs) for node in graph.nodes))


def csim_peak_rss_mb(prj: Path, codes) -> float:
    """Memory of the C-simulation (MiB): the peak resident memory of the worker process that
    runs ``codes`` through the project's library, minus its resident memory once started
    (interpreter, numpy, the loaded library)."""
    sim = CSim(prj, workers=1)
    try:
        sim.start(len(codes))
        before = sim.worker_memory_kib()[0][0]
        sim.run_codes(codes)
        return round((sim.worker_memory_kib()[0][1] - before) / 1024, 1)
    finally:
        sim.close()


def hls_checks(prj: Path) -> dict:
    """``tessera check`` of a project (every kernel of a partitioned one): the synthesis
    branch compiles and its weights equal C-simulation's, lint findings, bounded FIFOs
    (docs/hls-checks.md)."""
    reports = [check_project(p) for p in project_folders(prj)]
    fifo = [r.fifo for r in reports if r.fifo.applicable]
    return {"ok": all(r.ok for r in reports), "projects": len(reports),
            "synthesis_syntax": all(r.syntax.ok and r.weights.ok for r in reports),
            "synthesis_errors": [e for r in reports for e in (*r.syntax.errors, *r.weights.findings)][:5],
            "weight_values": sum(r.weights.values for r in reports),
            "lint_findings": [f.line_text() for r in reports for f in r.lint],
            "fifo": "none (io_parallel)" if not fifo else ("ok" if all(f.ok for f in fifo) else
                                                          "; ".join(f.line() for f in fifo if not f.ok)),
            "fifos": sum(len(f.peaks) for f in fifo)}


def checks_cell(r: dict) -> str:
    """'synthesis / lint / FIFOs' of :func:`hls_checks` (or '-' for rows measured before it)."""
    c = r.get("hls_checks")
    if not c:
        return "-"
    fifo = c["fifo"] if c["fifo"] != "ok" else f"{c['fifos']} ok"
    return (f"{'ok' if c['synthesis_syntax'] else 'FAIL'} / {len(c['lint_findings']) or 'ok'} / "
            f"{'none' if c['fifo'].startswith('none') else fifo}")


def measure_project(onnx_path: Path, prj: Path, io: str, samples: int, data: Path | None = None,
                    user_samples: int = 100, seed: int = 0, tb_samples: int = 64, oracle: api.Oracle | None = None,
                    input_type: str | None = None) -> dict:
    """Compile ``onnx_path`` into ``prj`` (``io`` = ``parallel`` | ``stream``), build the
    C-simulation from scratch and verify it (``oracle``: the independent executor of a model
    no ONNX executor runs).  Returns one JSON-ready row."""
    graph = api.load_model(onnx_path, input_type)
    compile_s = api.write(graph, onnx_path, prj, api.CompileOptions(io_type=f"io_{io}", force=True,
                                                                    tb_samples=tb_samples)).seconds
    t0 = time.perf_counter()
    Builder(cache=ObjectCache(None)).build(prj, rebuild=True, testbench=True)  # a first build: no stored objects
    build_s = time.perf_counter() - t0
    rep = api.verify_project(onnx_path, prj, api.VerifyOptions(samples=samples, seed=seed, data=data,
                                                               user_samples=user_samples, oracle=oracle))
    rows = api.layer_table(graph)
    sec = rep.seconds
    return {
        "io_type": f"io_{io}", "compile_s": round(compile_s, 2), "csim_build_s": round(build_s, 2),
        "csim_samples_per_s": round(rep.samples / max(sec.csim_run, 1e-9), 2),
        "ort_reference_samples_per_s": round(rep.samples / max(sec.reference, 1e-9), 2),
        "verify_samples": rep.samples, "verify_random_samples": rep.random_samples,
        "verify_data_samples": rep.data_samples, "verify_outputs": rep.outputs, "mismatches": rep.mismatches,
        "reference_vs_integer_semantics_mismatches": rep.reference_vs_integer_semantics_mismatches,
        "testbench": str(rep.testbench), "user_model": user_model_summary(rep), "independent": independent_summary(rep),
        "hls_checks": hls_checks(prj),
        "verify_seconds": asdict(sec),
        "macs": int(sum(r["macs"] for r in rows)), "weight_bits": weight_bits(graph),
        "max_accumulator_bits": max(r["width"] for r in rows), "ops": len(graph.nodes),
    }


def plot_speed(axes, results: list[dict], labels: list[str], unit: str = "samples", title: str = "") -> None:
    """Two panels: C-simulation vs onnxruntime-reference throughput (log) and build times."""
    import numpy as np

    xs = np.arange(len(results))
    axes[0].bar(xs - 0.2, [r["csim_samples_per_s"] for r in results], 0.4, label="g++ C-simulation")
    axes[0].bar(xs + 0.2, [r["ort_reference_samples_per_s"] for r in results], 0.4, label="onnxruntime exact reference")
    axes[0].set_yscale("log")
    axes[0].set_ylabel(f"{unit} / s")
    axes[0].set_title(title or "emulation throughput (same inputs, outputs equal)")
    axes[0].legend(fontsize=8)
    axes[1].bar(xs - 0.2, [r["compile_s"] for r in results], 0.4, label="compile (hls4ml project)")
    axes[1].bar(xs + 0.2, [r["csim_build_s"] for r in results], 0.4, label="C-sim build (g++)")
    axes[1].set_ylabel("seconds")
    axes[1].set_title("build times")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.set_xticks(xs, labels, rotation=60, ha="right", fontsize=7)


def independent_summary(rep) -> dict:
    """The independent check of a verify report, for a results row."""
    ind = rep.independent
    return {k: getattr(ind, k) for k in ("executor", "execution", "reason", "samples", "outputs", "equal",
                                         "undecidable_outputs", "differing_outputs", "first_differing_node")} | \
        {"passed": rep.independent_passed}


def user_model_summary(rep) -> dict | None:
    """The user's float32 tool against the exact reference, for a results row (None: not run)."""
    return None if rep.user_model is None else asdict(rep.user_model)


def independent_cell(r: dict) -> str:
    """'equal/outputs' of the independent check (or why there is none)."""
    ind = r.get("independent") or {}
    execution = ind.get("execution", "ran")
    if execution != "ran":
        return "none" if execution == "no executor" else "error"
    cell = f"{ind.get('equal', 0):,}/{ind.get('outputs', 0):,}"
    if ind.get("undecidable_outputs"):
        cell += f" ({ind['undecidable_outputs']} undecidable)"
    return cell


#: Header cells of :func:`common_cells`.
COMMON_HEADER = ("compile s | C-sim build s | C-sim samples/s | ORT ref samples/s | verified samples (random + data) | "
                 "outputs | mismatches | independent check (equal/outputs) | HLS checks (synthesis / lint / FIFOs)")


def common_cells(r: dict) -> str:
    """Markdown cells shared by the HLS benchmark tables: compile s | C-sim build s | C-sim/s |
    reference/s | verified samples (random + data) | outputs | mismatches | independent check |
    HLS checks."""
    return (f"{r['compile_s']} | {r['csim_build_s']} | {r['csim_samples_per_s']} | {r['ort_reference_samples_per_s']} | "
            f"{r['verify_samples']} ({r['verify_random_samples']} + {r['verify_data_samples']}) | "
            f"{r['verify_outputs']:,} | {r['mismatches']} | {independent_cell(r)} | {checks_cell(r)}")
