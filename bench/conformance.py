"""The peers' models (tests/conformance/) through Tessera and through hls4ml 1.3's
documented QONNX flow, side by side, in one run -> docs/results/conformance.{json,md,png}.

Per case and io type: Tessera compiles, verifies (C-simulation == exact reference == the
user's file run in float64 by the independent executor, every output) and runs ``tessera
check`` on the project -- or refuses in one line, its reason recorded; hls4ml converts the
file (``cleanup_model``, channels-last, ``GemmToMatMul``, ``config_from_onnx_model(
default_precision='fixed<16,6>')``, Vitis) and predicts the same real inputs, compared with
the file run in float64: converts?, % of outputs exactly equal, max |diff| (its flow gets
:data:`HLS4ML_LIMIT_S` per model: a flow that loops is a row that says so).

    python bench/conformance.py [--samples 200] [--only NAME ...] [--keep-rows] [--out DIR]
    python bench/conformance.py --merge A/conformance.json B/conformance.json   # runs side by side

``--keep-rows`` measures only ``--only`` and keeps the other rows of the last
``conformance.json`` (each row records the date of its run).  The document is written after
every row, so an interrupted run leaves what it measured (and says how many rows that is);
``--merge`` writes it from the rows of runs of disjoint ``--only`` sets made side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.machinery
import importlib.util
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np

from hls_bench import hls_checks, independent_summary
from realworld import compare, hls4ml_predict

ROOT = Path(__file__).resolve().parents[1]


def _load_cases():
    """tests/conformance/catalog.py (the test suite's models: one definition), its folder
    imported as the package ``conformance_cases``."""
    spec = importlib.machinery.ModuleSpec("conformance_cases", None, is_package=True)
    spec.submodule_search_locations = [str(ROOT / "tests" / "conformance")]
    sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    return importlib.import_module("conformance_cases.catalog")


cases_module = _load_cases()
CASES, Case = cases_module.CASES, cases_module.Case


def _inputs(path: Path, case: Case, samples: int) -> np.ndarray | list[np.ndarray]:
    """The real inputs both tools get (one array, or one per input of a model of several):
    the centres of random full-range input codes (Tessera's input quantizers), or uniform
    values in [-2, 2) when Tessera refuses the model."""
    import onnx

    from tessera.compiler import api
    from tessera.compiler.errors import TesseraError
    from tessera.compiler.samples import input_samples

    model = onnx.load(str(path))
    inits = {i.name for i in model.graph.initializer}
    dims = [[d.dim_value for d in i.type.tensor_type.shape.dim[1:]] for i in model.graph.input if i.name not in inits]
    try:
        graph = api.load_model(path, case.input_type)
        x = graph.input_real(input_samples(graph, samples, seed=0))
        xs = [x] if len(dims) == 1 else x
    except TesseraError:
        xs = [np.random.default_rng(k).uniform(-2, 2, (samples, *d)) for k, d in enumerate(dims)]
    xs = [a.reshape(samples, *d) for a, d in zip(xs, dims)]
    return xs[0] if len(xs) == 1 else xs


def tessera_row(path: Path, case: Case, io: str, work: Path, samples: int) -> dict:
    from tessera.compiler import api
    from tessera.compiler.errors import TesseraError

    prj = work / f"{case.name}_{io}_tessera"
    t0 = time.perf_counter()
    try:
        result = api.compile_model(path, prj, api.CompileOptions(io_type=io, input_type=case.input_type, force=True,
                                                                  tb_samples=4))
    except TesseraError as exc:
        return {"verified": False, "refused": str(exc)}
    rep = api.verify_project(path, result.project, api.VerifyOptions(samples=samples, user_samples=0,
                                                                     require_independent=True,
                                                                     oracle=case.oracle(path) if case.oracle else None))
    return {"verified": rep.passed, "verdict": rep.verdict(), "outputs": rep.outputs, "mismatches": rep.mismatches,
            "independent": independent_summary(rep), "hls_checks": hls_checks(result.project),
            "equal_pct": round(100 * rep.independent.equal / max(rep.outputs, 1), 2),
            "seconds": round(time.perf_counter() - t0, 1)}


#: seconds hls4ml's flow may take on one model before its row says it gave no result
HLS4ML_LIMIT_S = 300


@contextlib.contextmanager
def time_limit(seconds: int):
    """TimeoutError in this (main) thread after ``seconds``: a peer tool that loops on a model
    is a row of the table, not the end of the run."""
    def expire(signum, frame):
        raise TimeoutError(f"no result within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def hls4ml_row(path: Path, case: Case, x: np.ndarray, io: str, work: Path) -> dict:
    import onnx

    from tessera.compiler.independent import IndependentExecutor

    with time_limit(HLS4ML_LIMIT_S):
        y, info = hls4ml_predict(path, x, work / f"{path.stem}_{io}_hls4ml", io_type=io)
    if y is None:
        return info | {"converts": False}
    truth = IndependentExecutor(onnx.load(str(path))).run(x) if case.oracle is None else case.oracle(path).run(x)
    return info | {"converts": True} | compare(y, False, None, truth)


def run(cases: list[Case], samples: int, work: Path, on_row=lambda rows: None) -> list[dict]:
    """Every case in each of its io types; ``on_row(rows)`` after each row (the document is
    written as the run goes, so an interrupted run leaves the rows it measured)."""
    rows = []
    for case in cases:
        path = case.model(work / "models")
        x = _inputs(path, case, samples)
        for io in case.io_types:
            print(f"{case.name} {io} ...", flush=True)
            rows.append({"case": case.name, "peer": case.peer, "io_type": io, "run": time.strftime("%Y-%m-%d"),
                         "tessera": tessera_row(path, case, io, work, samples),
                         "hls4ml": hls4ml_row(path, case, x, io, work)})
            on_row(rows)
    return rows


def _cell_tessera(t: dict) -> str:
    if "refused" in t:
        return f"refused: {t['refused'][:140]}"
    checks = t["hls_checks"]
    return (f"{'verified' if t['verified'] else 'FAILED'}: {t['outputs']:,} outputs, {t['mismatches']} mismatches, "
            f"{t['equal_pct']} % equal to the file; check {'ok' if checks['ok'] else 'FAIL'}")


def _cell_hls4ml(h: dict) -> str:
    if not h.get("converts"):
        return f"does not convert: {h.get('error', '')[:120]}"
    diff = h.get("max_abs_diff")
    return f"{h['equal_pct']} % equal, max abs diff {diff:.3g}" if diff is not None else f"{h.get('note', '')}"


def render(doc: dict, out: Path) -> None:
    rows = doc["rows"]
    lines = ["# Conformance: the peers' models, Tessera beside hls4ml 1.3", "",
             f"`python bench/conformance.py` ({', '.join(sorted({r.get('run', doc['date']) for r in rows}))}, "
             f"{doc['samples']} samples per model; {doc['seconds']:.0f} s of runs). Models: "
             "tests/conformance/, each citing the peer test it mirrors."
             + ("" if len(rows) == doc.get("catalog_rows", len(rows)) else
                f" **{len(rows)} of the catalog's {doc['catalog_rows']} model x io rows measured** (the run did "
                "not reach the others)."), "",
             f"Tessera: {doc['verified']} of {len(rows)} model x io rows verified (C-simulation == exact reference == "
             f"the file in float64, every output), {doc['checked']} of {doc['verified']} pass `tessera check`; "
             f"{doc['refused']} refused in one line. hls4ml: {doc['hls4ml_converts']} convert, "
             f"{doc['hls4ml_exact']} equal the file on every output.", "",
             "| model | peer test | io | Tessera | hls4ml |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['peer']} | {r['io_type']} | {_cell_tessera(r['tessera'])} | "
                     f"{_cell_hls4ml(r['hls4ml'])} |")
    (out / "conformance.md").write_text("\n".join(lines) + "\n")
    _plot(rows, out / "conformance.png")


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['case']} ({r['io_type'][3:]})" for r in rows]
    ours = [r["tessera"].get("equal_pct", 0.0) if r["tessera"].get("verified") else 0.0 for r in rows]
    theirs = [r["hls4ml"].get("equal_pct", 0.0) if r["hls4ml"].get("converts") else 0.0 for r in rows]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.5))
    ax.barh(y - 0.2, ours, 0.4, label="Tessera (verified; 0 where refused)", color="#2a7ab8")
    ax.barh(y + 0.2, theirs, 0.4, label="hls4ml 1.3 QONNX flow (0 where it does not convert)", color="#e08a2c")
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("% of outputs exactly equal to the user's file in float64")
    ax.set_xlim(0, 100)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(kept: dict, measured: dict, samples: int, seconds: float, out: Path) -> dict:
    """conformance.{json,md,png} from the measured rows and the kept ones, in the catalog's order."""
    order = [(c.name, io) for c in CASES for io in c.io_types]
    rows = [measured.get(k) or kept[k] for k in order if k in measured or k in kept]
    verified = [r for r in rows if r["tessera"].get("verified")]
    doc = {"date": time.strftime("%Y-%m-%d"), "samples": samples, "seconds": seconds, "rows": rows,
           "measured_rows": len(rows), "catalog_rows": len(order),
           "verified": len(verified), "checked": sum(r["tessera"]["hls_checks"]["ok"] for r in verified),
           "refused": sum("refused" in r["tessera"] for r in rows),
           "hls4ml_converts": sum(bool(r["hls4ml"].get("converts")) for r in rows),
           "hls4ml_exact": sum(r["hls4ml"].get("equal_pct") == 100.0 for r in rows)}
    (out / "conformance.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    render(doc, out)
    return doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--only", nargs="*", help="case names (default: every case)")
    ap.add_argument("--keep-rows", action="store_true",
                    help="keep the rows of conformance.json for cases this run does not measure (each row says its run)")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="JSON",
                    help="measure nothing: write the document from the rows of these conformance.json files "
                         "(runs of disjoint --only sets, side by side)")
    ap.add_argument("--work", type=Path, default=ROOT / "out" / "conformance")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.only or c.name in args.only]
    args.work.mkdir(parents=True, exist_ok=True)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    kept, earlier = {}, 0.0
    if args.keep_rows and (out / "conformance.json").is_file():
        last = json.loads((out / "conformance.json").read_text())
        kept = {(r["case"], r["io_type"]): dict(r, run=r.get("run", "earlier")) for r in last["rows"]}
        earlier = last["seconds"]  # the kept rows' runs, counted with this one
    if args.merge:
        kept |= {(r["case"], r["io_type"]): r for path in args.merge for r in json.loads(path.read_text())["rows"]}
        write(kept, {}, args.samples, sum(json.loads(p.read_text())["seconds"] for p in args.merge), out)
        return
    t0 = time.perf_counter()
    measured: dict = {}

    def on_row(rows: list[dict]) -> None:
        measured.update({(r["case"], r["io_type"]): r for r in rows})
        write(kept, measured, args.samples, earlier + time.perf_counter() - t0, out)

    run(cases, args.samples, args.work, on_row)
    doc = write(kept, measured, args.samples, earlier + time.perf_counter() - t0, out)
    rows = doc["rows"]
    print(f"{doc['verified']}/{len(rows)} verified, {doc['refused']} refused; hls4ml converts {doc['hls4ml_converts']}, "
          f"exact {doc['hls4ml_exact']}; wrote {out}/conformance.{{json,md,png}}")


if __name__ == "__main__":
    main()
