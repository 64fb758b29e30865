"""Hardware you can measure: the RTL back end on models we did not write, RTL-simulated,
synthesized, placed and routed with open tools, beside the estimator's figures.

Rows: the public QONNX model zoo's files the RTL back end accepts (``../shared/third_party/
qonnx_model_zoo`` beside the checkout, or ``$TESSERA_THIRD_PARTY``), ``jet_mlp_w4a4`` trained
here by ``tessera train`` (real training, into the work folder), and the conformance models
(``tests/conformance/``: peers' test models re-implemented in our words) the back end accepts,
up to ``--max-luts`` estimated LUTs.  Per row, in one run:

- ``compile --backend rtl`` (``--pipeline``, default the compiler's) and ``verify`` at RTL:
  Verilator == the exact reference on every output of ``--samples`` full-range samples (fewer
  for models of large inputs), and the reference == the user's file in float64 (the
  independent executor);
- ``estimate --backend rtl``: LUTs (da4ml's cost of the adder graphs), FFs, latency in cycles;
- ``synth --target xcup`` (Yosys ``synth_xilinx -flatten -family xcup``): LUT, FF, carry,
  DSP, BRAM counts, and the estimate's LUT error against them;
- ``synth --target ecp5-85k`` with nextpnr place and route at ``--clock`` MHz where the
  design fits and the time model predicts at most ``--place-minutes``: LUT4 slots, FFs and
  the routed Fmax; for the rows of ``PIPELINE_SWEEP`` (the two jet taggers) also at the other
  pipeline settings (each compiled and RTL-verified on 2,000 samples first), when the default
  setting routed.

``--keep-rows`` measures only ``--models`` and keeps the other rows of the last
``hardware.json`` (each row records its run).  Writes docs/results/hardware.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ZOO = Path(os.environ.get("TESSERA_THIRD_PARTY", ROOT.parent / "shared" / "third_party")) / "qonnx_model_zoo" / "models"
OUT = ROOT / "docs" / "results"
#: full-range samples verified at RTL (rows may ask for fewer)
SAMPLES = 10_000
#: rows whose Fmax is measured at several pipeline settings (adder delays per stage)
PIPELINE_SWEEP = {"zoo jettagging": (1, 4), "jet_mlp_w4a4": (1, 4)}
#: samples verified at the extra pipeline settings
SWEEP_SAMPLES = 2_000


@dataclass(frozen=True)
class Row:
    """A model: its label, how to get its file, its declared input type and samples."""

    name: str
    kind: str  # "zoo", "train" or "conformance"
    source: str  # zoo path, zoo model name or conformance case name
    input_type: str | None = None
    samples: int = SAMPLES


ZOO_ROWS = (
    Row("zoo jettagging", "zoo", "JetTagging/QKeras_hls4ml_3layer/qkeras_jettagging.onnx", "fixed<16,6>"),
    Row("zoo unsw_nb15", "zoo", "UNSW_NB15/unsw_nb15_mlp_w2a2/unsw_nb15-mlp-w2a2.onnx"),
    Row("zoo kwsmlp", "zoo", "GSCV2/kwsmlp_w3a3/kwsmlp_w3a3.onnx"),
    Row("zoo TFC_2W2A", "zoo", "MNIST/Brevitas_FINN_TFC/TFC/TFC_2W2A.onnx", samples=2_000),
    Row("zoo TFC_1W1A", "zoo", "MNIST/Brevitas_FINN_TFC/TFC/TFC_1W1A.onnx", samples=2_000),
    Row("zoo TFC_1W2A", "zoo", "MNIST/Brevitas_FINN_TFC/TFC/TFC_1W2A.onnx", samples=2_000),
)
TRAIN_ROWS = (Row("jet_mlp_w4a4", "train", "jet_mlp_w4a4"),)


def conformance_rows() -> tuple[Row, ...]:
    """Every conformance case, as a row (those the back end refuses say so in their row)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from conformance import CASES

    return tuple(Row(f"conformance {c.name}", "conformance", c.name, c.input_type, 2_000) for c in CASES)


def model_file(row: Row, work: Path) -> Path:
    """The row's model file: the zoo's, trained here, or a conformance case exported here."""
    if row.kind == "zoo":
        return ZOO / row.source
    if row.kind == "train":
        out = work / row.source
        if not (out / "model.onnx").is_file():
            subprocess.run([sys.executable, "-m", "tessera.cli", "train", row.source, "-o", str(out)], check=True)
        return out / "model.onnx"
    from conformance import CASES

    case = next(c for c in CASES if c.name == row.source)
    return case.model(work / "conformance")


def _verify(model: Path, prj: Path, samples: int) -> dict:
    from tessera.compiler import api

    rep = api.verify_project(model, prj, api.VerifyOptions(samples=samples, user_samples=0, require_independent=True))
    return {"verified": rep.passed, "samples": rep.samples, "outputs": rep.outputs, "mismatches": rep.mismatches,
            "independent_equal": rep.independent.equal, "testbench": rep.testbench.line, "verdict": rep.verdict(),
            "seconds": round(sum(vars(rep.seconds).values()), 1)}


def _synth(prj: Path, target: str, place: bool, clock: float, minutes: float) -> dict:
    """``synth`` of the project; where place and route is predicted past the budget, the
    synthesis alone (its counts), with the prediction's line kept as ``place_refused``."""
    from tessera.compiler.errors import TesseraError
    from tessera.compiler.synth.run import SynthOptions, predict, rtl_design, synthesize

    options = SynthOptions(target, clock, minutes, place)
    place_refused = None
    predicted = predict(rtl_design(prj), options.spec, place) if place and target.startswith("ecp5") else None
    if predicted is not None and predicted.seconds > minutes * 60:
        place_refused = f"not placed: nextpnr predicted {predicted.place_s / 60:.0f} min > {minutes:g}"
        options = SynthOptions(target, clock, minutes, False)
    try:
        result = synthesize(prj, options).to_json()
    except TesseraError as exc:  # its log's path is this machine's: the project folder keeps it
        return {"refused": re.sub(r" \(its log: [^)]*\)", "", str(exc))}
    return {**result, "place_refused": place_refused} if place_refused else result


def _compile(model: Path, prj: Path, row: Row, pipeline: int) -> dict:
    from tessera.compiler import api

    t0 = time.perf_counter()
    result = api.compile_model(model, prj, api.CompileOptions(backend=api.BACKEND_RTL, pipeline=pipeline,
                                                              input_type=row.input_type, force=True))
    rtl = api.Manifest.read(result.project).rtl
    return {"seconds": round(time.perf_counter() - t0, 1), "latency": rtl.latency, "stages": rtl.stages,
            "pipeline": pipeline, "ports": [rtl.n_in, rtl.in_width, rtl.n_out, rtl.out_width]}


def measure(row: Row, work: Path, args) -> dict:
    """One row, every step; a refusal or a budget stops the row with its line."""
    from tessera.compiler import api
    from tessera.compiler.errors import TesseraError
    from tessera.compiler.estimate.rtl import estimate_rtl
    from tessera.compiler.rtl.trace import refusal

    out = {"model": row.name, "run": time.strftime("%Y-%m-%d"), "pipeline": args.pipeline}
    try:
        model = model_file(row, work)
        graph = api.load_model(model, row.input_type)
    except TesseraError as exc:
        return {**out, "refused": f"frontend: {exc}"}
    why = refusal(graph)
    if why is not None:
        return {**out, "refused": why}
    t0 = time.perf_counter()
    est = estimate_rtl(graph, args.pipeline)
    out["estimate"] = {**est.to_json(), "seconds": round(time.perf_counter() - t0, 1)}
    if est.luts > args.max_luts:
        return {**out, "skipped": f"estimated {est.luts:,} LUT > --max-luts {args.max_luts:,}"}
    prj = work / "projects" / row.name.replace(" ", "_")
    try:
        out["compile"] = _compile(model, prj, row, args.pipeline)
    except TesseraError as exc:
        return {**out, "refused": str(exc)}
    out["verify"] = _verify(model, prj, row.samples)
    out["xcup"] = _synth(prj, "xcup", False, args.clock, args.synth_minutes)
    out["ecp5"] = _synth(prj, "ecp5-85k", True, args.clock, args.place_minutes)
    sweep = []
    routed = bool((out["ecp5"].get("place") or {}).get("fmax_mhz"))
    for p in PIPELINE_SWEEP.get(row.name, ()) if routed else ():  # a design that did not route: no sweep
        at = work / "projects" / f"{row.name.replace(' ', '_')}_p{p}"
        point = {"compile": _compile(model, at, row, p)}
        point["verify"] = _verify(model, at, SWEEP_SAMPLES)
        point["ecp5"] = _synth(at, "ecp5-85k", True, args.clock, args.place_minutes)
        sweep.append(point)
    out["sweep"] = sweep
    return out


# -- the page -------------------------------------------------------------------------------
def lut_error(row: dict) -> float | None:
    """The estimate's LUT error against Yosys' xcup count (None: no count)."""
    luts = row.get("xcup", {}).get("counts", {}).get("luts")
    if not luts or "estimate" not in row:
        return None
    return (row["estimate"]["luts"] - luts) / luts


def _fmax(synth: dict) -> str:
    place = synth.get("place") if synth else None
    if not place:
        return (synth.get("place_refused") or synth.get("refused") or "-") if synth else "-"
    return f"{place['fmax_mhz']:.1f} MHz" if place.get("fmax_mhz") else "not routed"


def _sweep(r: dict) -> str:
    return ", ".join(f"p{p['compile']['pipeline']}: {_fmax(p['ecp5'])}" for p in r.get("sweep", []))


def _row_line(r: dict) -> str:
    if "estimate" not in r or "verify" not in r:
        return f"| {r['model']} | {r.get('refused') or r.get('skipped')} |" + " |" * 9
    v, e, x, c = r["verify"], r["estimate"], r.get("xcup", {}), r.get("ecp5", {})
    xc = x.get("counts", {})
    cc = c.get("counts", {})
    err = lut_error(r)
    return (f"| {r['model']} | {v['samples']:,} / {v['outputs']:,} / {v['mismatches']} | "
            f"{r['compile']['latency']} | {e['luts']:,} / {e['ffs']:,} | "
            f"{xc.get('luts', 0):,} / {xc.get('ffs', 0):,} / {xc.get('carries', 0):,} | "
            f"{'-' if err is None else f'{100 * err:+.1f} %'} | "
            f"{c.get('lut_slots', 0):,} / {cc.get('ffs', 0):,} | {_fmax(c)} | "
            f"{_sweep(r) or '-'} | "
            f"{x.get('seconds', 0):.0f} / {c.get('seconds', 0):.0f} |")


def render(doc: dict, path: Path) -> None:
    rows = doc["rows"]
    measured = [r for r in rows if "verify" in r]
    errors = [abs(e) for e in (lut_error(r) for r in measured) if e is not None]
    lines = [
        "# Hardware you can measure: the RTL back end", "",
        f"`python bench/hardware.py` (runs of {', '.join(sorted({r['run'] for r in rows}))}; machine: {doc['machine']}).",
        "Each measured row: `compile --backend rtl`, `verify` at RTL (Verilator == exact reference == the file in "
        "float64), `estimate --backend rtl`, `synth --target xcup` (Yosys) and `synth --target ecp5-85k` (Yosys, "
        "nextpnr place and route at the row's clock).", "",
        f"**{len(measured)} designs RTL-verified: {sum(r['verify']['outputs'] for r in measured):,} outputs, "
        f"{sum(r['verify']['mismatches'] for r in measured)} mismatches.**",
        (f"Estimator against Yosys (xcup LUTs): median |error| {100 * float(np.median(errors)):.1f} % over "
         f"{len(errors)} designs." if errors else "No design was synthesized for xcup."), "",
        "| model | RTL-verified samples / outputs / mismatches | latency (cycles) | estimate LUT / FF | xcup LUT / FF / "
        "carry | LUT error | ECP5-85k LUT4 slots / FF | routed Fmax | Fmax at other --pipeline | seconds xcup / ecp5 |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(_row_line(r) for r in rows), "",
        "LUT error: (estimate - Yosys) / Yosys on xcup, LUT1-LUT6 and INV counted.  ECP5 LUT4 slots count a CCU2C "
        "carry cell as the two LUT4s it occupies.  Rows that say why they were not measured were refused by the RTL "
        "back end (one line, as `compile --backend rtl` says it) or skipped by the bench's size cap.",
    ]
    path.write_text("\n".join(lines) + "\n")


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in doc["rows"] if lut_error(r) is not None]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    est = [r["estimate"]["luts"] for r in rows]
    got = [r["xcup"]["counts"]["luts"] for r in rows]
    a.loglog(got, est, "o")
    lim = [min(est + got) * 0.8, max(est + got) * 1.25]
    a.plot(lim, lim, "k--", lw=0.8, label="estimate = Yosys")
    a.fill_between(lim, [v * 0.85 for v in lim], [v * 1.15 for v in lim], color="0.9", label="+-15 %")
    a.set(xlabel="Yosys LUTs (xcup)", ylabel="estimated LUTs (da4ml cost)", title="LUT estimate against synthesis")
    a.legend()
    for r in doc["rows"]:
        pts = [(r["compile"]["pipeline"], r["ecp5"].get("place") or {})] if "compile" in r else []
        pts += [(p["compile"]["pipeline"], p["ecp5"].get("place") or {}) for p in r.get("sweep", [])]
        pts = sorted((p, pl["fmax_mhz"]) for p, pl in pts if pl.get("fmax_mhz"))
        if pts:
            b.plot(*zip(*pts), "o-", label=r["model"])
    b.set(xlabel="--pipeline (adder delays per stage)", ylabel="routed Fmax on ECP5-85k (MHz)",
          title="Clock against pipelining")
    if b.lines:
        b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    from tessera.compiler import api

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "tessera_hardware")
    ap.add_argument("--models", nargs="*", help="only these rows (names as in the table)")
    ap.add_argument("--keep-rows", action="store_true", help="keep the other rows of the last hardware.json")
    ap.add_argument("--pipeline", type=int, default=api.PIPELINE)
    ap.add_argument("--clock", type=float, default=100.0, help="the clock nextpnr aims at (MHz)")
    ap.add_argument("--synth-minutes", type=float, default=30.0)
    ap.add_argument("--place-minutes", type=float, default=45.0)
    ap.add_argument("--max-luts", type=int, default=60_000, help="rows estimated above this are not synthesized")
    ap.add_argument("--no-conformance", action="store_true")
    args = ap.parse_args()
    rows = [*ZOO_ROWS, *TRAIN_ROWS, *(() if args.no_conformance else conformance_rows())]
    if args.models:
        rows = [r for r in rows if r.name in args.models]
    path = OUT / "hardware.json"
    kept = json.loads(path.read_text())["rows"] if args.keep_rows and path.is_file() else []
    kept = [r for r in kept if r["model"] not in {x.name for x in rows}]
    args.work.mkdir(parents=True, exist_ok=True)
    doc = {"machine": f"{os.cpu_count()} cores", "rows": kept}
    order = [r.name for r in (*ZOO_ROWS, *TRAIN_ROWS, *conformance_rows())]
    for row in rows:
        t0 = time.perf_counter()
        result = {**measure(row, args.work, args), "seconds": round(time.perf_counter() - t0, 1)}
        doc["rows"].append(result)
        doc["rows"].sort(key=lambda r: order.index(r["model"]) if r["model"] in order else len(order))
        path.write_text(json.dumps(doc, indent=1))
        render(doc, OUT / "hardware.md")
        print(f"{row.name}: {result.get('refused') or result.get('skipped') or 'measured'} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    plot(doc, OUT / "hardware.png")


if __name__ == "__main__":
    main()
