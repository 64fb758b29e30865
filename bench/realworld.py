"""Real-world models, exactly: Tessera and hls4ml 1.3 side by side on models we did not write.

Models: the six files of the public QONNX model zoo (``../shared/third_party/qonnx_model_zoo``
beside the checkout, or ``$TESSERA_THIRD_PARTY``), ``brevitas_examples.bnn_pynq``'s TFC /
SFC / LFC / CNV in their shipped bit widths and ResNet-18 4W4A (its float input declared
``fixed<8,1>``), exported with ``export_qonnx`` at random initialisation with non-trivial
BatchNorm statistics (TFC / SFC also after ``TRAIN_EPOCHS`` epochs on the real training
digits), ``brevitas_examples.super_resolution``'s ESPCN x2 (two quantizer configurations,
``models/super_resolution.py``), ``brevitas_examples.text_to_speech``'s MelGAN generator
(``models/melgan.py``, io_stream, its float spectrogram declared ``fixed<16,6>``), and the Brevitas default-quantizer
models of ``models/brevitas_default.py`` (all exported into the work folder; no weights
enter the repository).  The zoo files are measured in both io types (``zoo <name> io_stream``
rows: both tools compile the file for io_stream; the other models in the io type their
shapes call for).  ``--keep-rows`` measures only ``--models`` and keeps the other rows of
the last ``realworld.json`` (each row records its run).

Per model, in one run, on the same real inputs (random full-range codes mapped to the
centre of their input interval; plus the 1,000 real test digits for the 28x28 MNIST models):

- Tessera: ``compile`` + ``verify`` (g++ C-simulation == exact reference on every output,
  exact reference == the user's file in float64 on every output: ONNX's reference evaluator,
  or for recurrent cells the file's float64 cell executor), compile and C-sim build
  seconds, and the estimator's resources of the requantization layers (``rescale``); the
  project's own testbench on 64 of the samples (16 for ResNet-18);
- hls4ml 1.3 through its documented QONNX flow (qonnx clean-up, ``ConvertToChannelsLastAndClean``,
  ``GemmToMatMul``, ``config_from_onnx_model(default_precision='fixed<16,6>')``,
  ``convert_from_onnx_model``, Vitis back end, the row's io type; the legacy custom-op domains
  renamed to qonnx's first, as Tessera does): converts?, its C-simulation ``predict`` compared
  with the same float64 executor.

"Equal" is ``==`` for outputs a Quant rounds; an output no Quant rounds (logits, TensorNorm)
is an exact rational float64 may not hold, and both tools' values are read on its code grid
(the code within a quarter step, docs/bit-exact.md).  A trailing Softmax: Tessera compiles the
logits (compared with the executor's logits); hls4ml computes the Softmax (compared with the
executor's Softmax).  Writes docs/results/realworld.{json,md,png}.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from tessera.models.bnn_pynq import BNN_PYNQ, INPUT_TYPES, RESNET18, export_bnn_pynq
from tessera.models.brevitas_default import BREVITAS_DEFAULT, export_brevitas_default
from tessera.models.melgan import INPUT_TYPE as MELGAN_INPUT_TYPE, export_melgan
from tessera.models.super_resolution import ESPCN, export_espcn

ROOT = Path(__file__).resolve().parents[1]
ZOO = Path(os.environ.get("TESSERA_THIRD_PARTY", ROOT.parent / "shared" / "third_party")) / "qonnx_model_zoo" / "models"
#: "bnn_pynq <name> trained": TFC / SFC after this many epochs on the real training digits
TRAIN_EPOCHS = 3
ZOO_MODELS = {
    "zoo TFC_1W1A": ("MNIST/Brevitas_FINN_TFC/TFC/TFC_1W1A.onnx", None, True),
    "zoo TFC_1W2A": ("MNIST/Brevitas_FINN_TFC/TFC/TFC_1W2A.onnx", None, True),
    "zoo TFC_2W2A": ("MNIST/Brevitas_FINN_TFC/TFC/TFC_2W2A.onnx", None, True),
    "zoo jettagging": ("JetTagging/QKeras_hls4ml_3layer/qkeras_jettagging.onnx", "fixed<16,6>", False),
    "zoo unsw_nb15": ("UNSW_NB15/unsw_nb15_mlp_w2a2/unsw_nb15-mlp-w2a2.onnx", None, False),
    "zoo kwsmlp": ("GSCV2/kwsmlp_w3a3/kwsmlp_w3a3.onnx", None, False),
}


#: hls4ml's flow on one model is given this long (on MelGAN it ran past 20 minutes without
#: writing its project)
HLS4ML_TIMEOUT_S = 900
#: brevitas_examples' MelGAN generator (models/melgan.py) and its samples (verified, the
#: user model's and the testbench's): 1,024 outputs a sample, each of its checks seconds a sample
MELGAN = "melgan generator"
MELGAN_SAMPLES = 16
#: a zoo label with this suffix: the same file compiled for io_stream (both tools)
STREAM = " io_stream"
#: The project testbench's samples for ResNet-18 (64 for every other model): its standalone
#: testbench runs one core at ~11 s a sample; verify's C-simulation covers every sample.
RESNET18_TB_SAMPLES = 16


def hls4ml_predict(model_path: Path, x: np.ndarray | list[np.ndarray], out_dir: Path,
                   io_type: str = "io_parallel", timeout_s: int = HLS4ML_TIMEOUT_S) -> tuple[np.ndarray | None, dict]:
    """hls4ml 1.3's documented QONNX flow on the user's file (``x``: one array per input), in a
    child process given ``timeout_s``; (outputs, every output of a sample side by side; timings
    or error)."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=lambda: send.send(_hls4ml_flow(model_path, x, out_dir, io_type)))
    child.start()
    if receive.poll(timeout_s):
        result = receive.recv()
        child.join()
        return result
    child.kill()
    child.join()
    return None, {"error": f"did not finish within {timeout_s // 60} minutes (qonnx clean-up and channels-last "
                           "conversion, convert, compile, predict)"}


def _hls4ml_flow(model_path: Path, x: np.ndarray | list[np.ndarray], out_dir: Path,
                 io_type: str) -> tuple[np.ndarray | None, dict]:
    import onnx

    from tessera.compiler.frontend.load import normalize_domains

    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            import hls4ml
            from qonnx.core.modelwrapper import ModelWrapper
            from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
            from qonnx.transformation.gemm_to_matmul import GemmToMatMul
            from qonnx.util.cleanup import cleanup_model

            m = cleanup_model(ModelWrapper(normalize_domains(onnx.load(str(model_path)))))
            m = cleanup_model(m.transform(ConvertToChannelsLastAndClean()).transform(GemmToMatMul()))
            cfg = hls4ml.utils.config.config_from_onnx_model(m, granularity="name", backend="Vitis",
                                                             default_precision="fixed<16,6>")
            hm = hls4ml.converters.convert_from_onnx_model(m, output_dir=str(out_dir), io_type=io_type,
                                                           backend="Vitis", hls_config=cfg)
            t1 = time.perf_counter()
            hm.compile()
            t2 = time.perf_counter()
            xs = x if isinstance(x, list) else [x]  # several inputs: one array each
            xin = [np.ascontiguousarray((a if a.ndim <= 2 else np.moveaxis(a, 1, -1)).astype(np.float32))
                   for a in xs]  # channels-last after the conversion
            pred = hm.predict(xin if len(xin) > 1 else xin[0])
            n = len(xs[0])
            y = np.concatenate([np.asarray(p, dtype=np.float64).reshape(n, -1)
                                for p in (pred if isinstance(pred, list) else [pred])], axis=1)
    except Exception as exc:  # noqa: BLE001 - a row of the table, not a crash of the bench
        import re

        text = re.sub(r" at 0x[0-9a-f]+", "", " ".join(str(exc).split()))[:160]
        return None, {"error": f"{type(exc).__name__}: {text}"}
    return y, {"convert_s": round(t1 - t0, 2), "compile_s": round(t2 - t1, 2)}


def compare(theirs: np.ndarray, ours_codes_like, graph, executor_out: np.ndarray) -> dict:
    """% equal (the rule of the module docstring), max |diff|, argmax agreement of ``theirs``
    against the executor's outputs."""
    n = len(executor_out)
    a, b = np.asarray(theirs, dtype=np.float64).reshape(n, -1), executor_out.reshape(n, -1)
    if a.shape != b.shape:
        return {"equal_pct": 0.0, "max_abs_diff": None, "argmax_pct": None, "note": f"shape {a.shape} vs {b.shape}"}
    scale = graph.scales.get(graph.output) if ours_codes_like else None
    if scale is not None and scale.accumulator:
        shape = graph.values[graph.output].shape
        qa, oka = scale.decode(a, shape)
        qb, okb = scale.decode(b, shape)
        equal = (qa == qb).reshape(n, -1) & oka.reshape(n, -1) & okb.reshape(n, -1)
    else:
        equal = a == b
    return {"equal_pct": round(100 * float(equal.mean()), 2), "max_abs_diff": float(np.max(np.abs(a - b))),
            "argmax_pct": round(100 * float(np.mean(a.argmax(axis=1) == b.argmax(axis=1))), 1) if a.shape[1] > 1 else None}


def run_model(label: str, path: Path, input_type: str | None, digits: bool, work: Path, samples: int,
              io_type: str | None = None, tb_samples: int = 64, user_samples: int = 100) -> dict:
    from hls_bench import measure_project

    import onnx
    from tessera.compiler import api
    from tessera.compiler.estimate.model import estimate
    from tessera.compiler.estimate.parts import get_part
    from tessera.compiler.independent import IndependentExecutor
    from tessera.compiler.ops import rescale
    from tessera.compiler.samples import sample_codes
    from tessera.models.rnn.onnx_run import cell_oracle

    row: dict = {"model": label, "file": path.name}
    safe = label.replace(" ", "_")
    data = None
    if digits:
        from tessera.models.data.digits import load_digits

        data = work / "digits_test.npy"
        if not data.exists():
            np.save(data, load_digits()[2])
    graph = api.load_model(path, input_type)
    io_type = io_type or ("stream" if any(len(graph.values[n.output].shape) == 3 for n in graph.nodes) else "parallel")
    oracle = cell_oracle(path)
    try:
        row["tessera"] = measure_project(path, work / f"{safe}_tessera", io_type, samples, data=data,
                                         input_type=input_type, oracle=oracle, tb_samples=tb_samples,
                                         user_samples=min(user_samples, samples))
    except Exception as exc:  # noqa: BLE001
        row["tessera"] = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"}
    des = estimate(graph, get_part("xcu250"), io_type=f"io_{io_type}")
    forms = [r["form"] for r in api.layer_table(graph) if r["op"] == rescale.OP.name]
    rq = [ly for ly in des.layers if ly.op == rescale.OP.name]
    row["requant"] = {"layers": len(rq), "forms": forms, "dsp": sum(ly.dsp for ly in rq), "lut": sum(ly.lut for ly in rq),
                      "ff": sum(ly.ff for ly in rq), "multipliers": sum(ly.multipliers for ly in rq)}
    # the same real inputs for hls4ml and the executor
    codes = sample_codes(graph.values[graph.input], samples, seed=0)
    x = graph.input_real(codes)
    if data is not None:
        x = np.concatenate([x.reshape(len(x), -1), np.load(data).reshape(len(np.load(data)), -1)])
    dims = [d.dim_value for d in onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim[1:]]
    x = x.reshape(len(x), *dims) if all(dims) and int(np.prod(dims)) == x[0].size else x
    y, info = hls4ml_predict(path, x, work / f"{safe}_hls4ml", io_type=f"io_{io_type}")
    if y is None:
        row["hls4ml"] = info | {"converts": False}
        return row
    full = IndependentExecutor(onnx.load(str(path))).run(x) if oracle is None else oracle.run(x)
    row["hls4ml"] = info | {"converts": True} | compare(y, False, graph, full)
    return row


def recheck(doc: dict, work: Path, out: Path) -> None:
    """``tessera check`` of each row's project, where the folder in ``work`` is the one the
    row's run wrote (its manifest dated the row's run); the row records the check's date."""
    from hls_bench import checks_cell, hls_checks

    for r in doc["rows"]:
        prj = work / f"{r['model'].replace(' ', '_')}_tessera"
        manifest = prj / "tessera.json"
        if "error" in r["tessera"] or not manifest.is_file() or \
                time.strftime("%Y-%m-%d", time.localtime(manifest.stat().st_mtime)) != r.get("run"):
            r["tessera"].pop("hls_checks", None)
            continue
        t0 = time.perf_counter()
        r["tessera"]["hls_checks"] = hls_checks(prj) | {"run": time.strftime("%Y-%m-%d")}
        print(json.dumps({"model": r["model"], "checks": checks_cell(r["tessera"]),
                          "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
        (out / "realworld.json").write_text(json.dumps(doc, indent=1))


def render(doc: dict, out: Path) -> None:
    import matplotlib
    from hls_bench import checks_cell

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    runs = sorted({r.get("run", "earlier") for r in rows})
    when = "in one run" if len(runs) == 1 else (f"each row in one run of both tools (runs: {', '.join(runs)}; "
                                                "`--keep-rows`)")
    lines = ["# Real-world models: Tessera and hls4ml 1.3 side by side", "",
             f"Measured {when} (`python bench/realworld.py`), {doc['cores']} cores, on models we did not write: the six "
             "files of the public QONNX model zoo, `brevitas_examples.bnn_pynq` exported at random initialisation with "
             "non-trivial BatchNorm statistics (`export_qonnx` with its defaults: on torch 2.13 the dynamo exporter; the "
             f"`trained` rows: TFC / SFC after {TRAIN_EPOCHS} epochs of Adam on the 4,000 real training digits), "
             "`brevitas_examples.super_resolution`'s ESPCN x2 (`models/super_resolution.py`: 3x16x16 images in [0, 1], "
             "random initialisation with drawn BatchNorm statistics, activation scales calibrated on random images; its "
             "last convolution's real-valued output through the PixelShuffle into an 8-bit QuantReLU), "
             "`brevitas_examples.text_to_speech`'s MelGAN generator (`models/melgan.py`: 80 mel channels x 4 frames to "
             "1,024 audio samples, 8-bit, its last layer a 16-bit QuantTanh of a convolution's accumulator; random "
             "initialisation, activation scales calibrated on random log-mel spectrograms; its float spectrogram "
             "declared `fixed<16,6>`, io_stream), "
             "and models written with Brevitas' default quantizers (`models/brevitas_default.py`: float scales, "
             "per-channel weights, BatchNorm, a residual add, a depthwise-separable block, TruncAvgPool, a global "
             "average pool, a PixelShuffle, a QuantLSTM; exported with brevitas' TorchScript exporter, untrained except "
             "for the activation statistics of the PixelShuffle and QuantLSTM models). "
             "The jet tagger's float input is declared `--input-type fixed<16,6>` (hls4ml's default precision). Tessera: verified samples (random full-range + the 1,000 real test digits for "
             "the MNIST models), g++ C-simulation vs exact reference, and exact reference vs the user's file in float64 "
             "(ONNX reference evaluator, qonnx's QONNX ops; for the QuantLSTM, which no ONNX executor runs, the file's "
             "float64 cell executor `models/rnn/onnx_run.py`). ResNet-18's float input is declared `fixed<8,1>`. hls4ml: its documented QONNX flow, `fixed<16,6>` default "
             "precision, the row's io type, `predict` vs the same float64 executor on the same inputs. The six zoo files "
             "are measured in both io types (the `io_stream` rows). Rules: see "
             "`bench/realworld.py`'s docstring; a trailing Softmax is compared as logits for Tessera, as probabilities "
             "for hls4ml. *HLS checks*: `tessera check` of the row's project as its run wrote it (`--checks-only`, "
             "docs/hls-checks.md; '-': that project is no longer kept).", "",
             "| model | Tessera io | verified samples | outputs | C-sim mismatches | equal to the user's model | compile s | "
             "C-sim build s | requantization (estimate, xcu250) | hls4ml converts? | hls4ml equal % | hls4ml max abs diff | "
             "hls4ml argmax % | hls4ml convert + compile s | HLS checks (synthesis / lint / FIFOs) |", "|" + "---|" * 15]
    for r in rows:
        t, h, q = r["tessera"], r["hls4ml"], r["requant"]
        if "error" in t:
            tcells = f"- | - | - | - | refused: {t['error']} | - | - "
        else:
            ind = t["independent"]
            tcells = (f"{t['io_type']} | {t['verify_samples']:,} | {t['verify_outputs']:,} | {t['mismatches']} | "
                      f"{ind['equal']:,}/{ind['outputs']:,} | {t['compile_s']} | {t['csim_build_s']}")
        forms = sorted(set(f.split(":")[0] for f in q["forms"]))
        qcell = f"{q['layers']} layers ({', '.join(forms) or '-'}): {q['dsp']} DSP, {q['lut']:,} LUT"
        if h.get("converts"):
            hcells = (f"yes | {h['equal_pct']} | {h['max_abs_diff']:.3g} | {h['argmax_pct'] if h['argmax_pct'] is not None else '-'}"
                      f" | {h['convert_s']} + {h['compile_s']}")
        else:
            hcells = f"no: {h.get('error', '')} | - | - | - | -"
        lines.append(f"| {r['model']} | {tcells} | {qcell} | {hcells} | {checks_cell(t)} |")
    ok = [r for r in rows if "error" not in r["tessera"]]
    total = sum(r["tessera"]["independent"]["outputs"] for r in ok)
    equal = sum(r["tessera"]["independent"]["equal"] for r in ok)
    mism = sum(r["tessera"]["mismatches"] for r in ok)
    models = len({r["model"].removesuffix(STREAM) for r in rows})
    lines += ["", f"Tessera: {len(ok)} of {len(rows)} rows ({models} models, the zoo's in both io types) compiled and "
              f"verified; {mism} C-simulation mismatches; {equal:,} of {total:,} outputs equal to the user's model. "
              f"hls4ml converted {sum(bool(r['hls4ml'].get('converts')) for r in rows)} of {len(rows)}.", "",
              "![realworld](realworld.png)", ""]
    (out / "realworld.md").write_text("\n".join(lines))
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.7), 4))
    xs = np.arange(len(rows))
    tes = [100 * r["tessera"]["independent"]["equal"] / max(r["tessera"]["independent"]["outputs"], 1)
           if "error" not in r["tessera"] else 0 for r in rows]
    hl = [r["hls4ml"].get("equal_pct", 0) if r["hls4ml"].get("converts") else 0 for r in rows]
    ax.bar(xs - 0.2, tes, 0.4, label="Tessera (C-sim verified)")
    ax.bar(xs + 0.2, hl, 0.4, label="hls4ml 1.3 QONNX flow")
    for i, r in enumerate(rows):
        if not r["hls4ml"].get("converts"):
            ax.text(i + 0.2, 2, "fails", rotation=90, ha="center", fontsize=7)
    ax.set_xticks(xs, [r["model"] for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("% of outputs equal to the user's model")
    ax.set_ylim(0, 125)
    ax.set_yticks([0, 20, 40, 60, 80, 100])
    ax.legend(fontsize=8, loc="upper center", ncol=2)
    fig.tight_layout()
    fig.savefig(out / "realworld.png", dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=[*ZOO_MODELS, *(f"{m}{STREAM}" for m in ZOO_MODELS),
                                                    *(f"bnn_pynq {m}" for m in (*BNN_PYNQ, RESNET18)),
                                                    *(f"bnn_pynq {m} trained" for m in BNN_PYNQ if m[:3] in ("tfc", "sfc")),
                                                    *(f"brevitas {m}" for m in BREVITAS_DEFAULT),
                                                    *(f"espcn {m}" for m in ESPCN), MELGAN])
    ap.add_argument("--keep-rows", action="store_true",
                    help="keep the rows of realworld.json for models this run does not measure (each row says its run)")
    ap.add_argument("--samples", type=int, default=1000, help="random full-range inputs per model")
    ap.add_argument("--conv-samples", type=int, default=1000,
                    help="random inputs for the convolutional models (CNV's io_stream C-simulation takes ~0.5 s a sample "
                         "on 2 cores, ResNet-18's ~5 s)")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "bench_realworld")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--checks-only", action="store_true",
                    help="run `tessera check` on the rows' projects kept in --work (those written on the row's run "
                         "date) and record it in the rows")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.render_only or args.checks_only:
        doc = json.loads((args.out / "realworld.json").read_text())
        if args.checks_only:
            recheck(doc, args.work, args.out)
        render(doc, args.out)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    run = time.strftime("%Y-%m-%d %H:%M")  # the invocation: rows of several runs on one day stay apart
    kept = []
    if args.keep_rows and (args.out / "realworld.json").is_file():
        kept = [dict(r, run=r.get("run", "earlier")) for r in json.loads((args.out / "realworld.json").read_text())["rows"]
                if r["model"] not in args.models]
    rows = []
    for label in args.models:
        t0 = time.perf_counter()
        base = label.removesuffix(STREAM)
        if base in ZOO_MODELS:
            rel, input_type, digits = ZOO_MODELS[base]
            path = ZOO / rel
            if not path.exists():
                raise SystemExit(f"{path} is missing: the QONNX model zoo is expected at {ZOO} (set TESSERA_THIRD_PARTY)")
        elif label.startswith("espcn "):
            name = label.split()[-1]
            path = args.work / "espcn" / f"{name}.onnx"
            if not path.exists():
                export_espcn(name, path)
            input_type, digits = None, False
        elif label == MELGAN:
            path = args.work / "melgan" / "generator.onnx"
            if not path.exists():
                export_melgan(path)
            input_type, digits = MELGAN_INPUT_TYPE, False
        elif label.startswith("brevitas "):
            name = label.split()[-1]
            path = args.work / "brevitas_default" / f"{name}.onnx"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                export_brevitas_default(name, path)
            input_type, digits = None, False
        else:
            name, trained = label.split()[1], label.endswith(" trained")
            path = args.work / "bnn_pynq" / f"{name}{'_trained' if trained else ''}.onnx"
            if not path.exists():
                export_bnn_pynq(name, path, epochs=TRAIN_EPOCHS if trained else 0)
            input_type, digits = INPUT_TYPES.get(name), "fc" in name
        conv = "cnv" in label or RESNET18 in label or label.startswith("espcn ")
        samples = MELGAN_SAMPLES if label == MELGAN else args.conv_samples if conv else args.samples
        row = run_model(label, path, input_type, digits, args.work, samples,
                        io_type="stream" if label.endswith(STREAM) or label == MELGAN else None,
                        tb_samples=RESNET18_TB_SAMPLES if RESNET18 in label else MELGAN_SAMPLES if label == MELGAN else 64)
        row["seconds"] = round(time.perf_counter() - t0, 1)
        row["run"] = run
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("model", "seconds")} | {"tessera": row["tessera"].get("mismatches", "err"),
                                                                      "hls4ml": row["hls4ml"].get("equal_pct")}), flush=True)
        order = {m: i for i, m in enumerate(ap.get_default("models"))}
        every = sorted(kept + rows, key=lambda r: order.get(r["model"], len(order)))
        doc = {"cores": os.cpu_count(), "samples": args.samples, "conv_samples": args.conv_samples, "rows": every}
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "realworld.json").write_text(json.dumps(doc, indent=1))
    render(doc, args.out)


if __name__ == "__main__":
    main()
