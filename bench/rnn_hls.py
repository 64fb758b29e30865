"""The quantized RNNs of paper 3 (sentiment LSTM / GRU, ConvLSTM frame predictor) compiled to
HLS and verified bit for bit.

For each cell (LSTM, GRU) and weight kind (fp, binary, ternary, quaternary): the model
trained by ``tessera train rnn`` (reused from --work; trained with the defaults when
missing) is exported from its embedded input to its logits (``export_sentiment``, a
fixed ``--steps`` window), compiled for io_parallel and io_stream (streaming over time
steps), and verified on 1,000 random full-range sequences plus real test sentences
(the last ``--steps`` tokens of every test sentence at least that long, embedded by the
model's own quantized embedding).  Also measured: the exact reference against the
brevitas forward of the same model on every verified sequence (count of differing
outputs), accuracy of the C-simulation and of brevitas on the real windows, compile time,
C-simulation build time, emulation throughput vs the onnxruntime reference, the
C-simulation's peak memory, weight storage bits.  The ConvLSTM frame predictor
(``export_forecaster``: encoder, forecaster and read-out on 4x4 patches of the frames) is
verified on 1,000 random sequences plus real moving-digits test sequences and compared
with brevitas on the real ones.  Writes docs/results/rnn_hls.json, .md, .png.

    python bench/rnn_hls.py                       # everything (about 30-60 min on 2 cores)
    python bench/rnn_hls.py --cells gru --weights binary --io stream
"""

from __future__ import annotations

import argparse
import json
import platform
import warnings
from pathlib import Path

import numpy as np

from hls_bench import COMMON_HEADER, common_cells, csim_peak_rss_mb, measure_project, plot_speed
from tessera.compiler import api
from tessera.compiler.errors import UnsupportedModelError
from tessera.compiler.reference.model import OrtReference, reference_model
from tessera.compiler.samples import sample_codes

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = ("fp", "binary", "ternary", "quaternary")
#: The independent executor of the recurrent cells (no ONNX executor runs them).
BREVITAS = "brevitas' forward of the trained module"


def prepare(cell: str, weights: str, work: Path, steps: int, max_real: int):
    """(model, onnx path, real embedded windows .npy, their labels, token ids)."""
    import torch

    from tessera.models.data.sentiment import Vocab, encode_batch, load_sentiment
    from tessera.models.rnn.export import export_sentiment
    from tessera.models.rnn.train import load_checkpoint, train_rnn

    mdir = work / f"{cell}_{weights}"
    if not (mdir / "checkpoint.pt").exists():
        train_rnn(cell, weights, "sentiment", mdir, progress=False, threads=1)
    model = load_checkpoint(mdir / "checkpoint.pt")
    metrics = json.loads((mdir / "metrics.json").read_text())
    hdir = work / f"{cell}_{weights}_hls"
    hdir.mkdir(parents=True, exist_ok=True)
    onnx_path = hdir / f"sentiment_{steps}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_sentiment(model, onnx_path, seq_len=steps)
    data = load_sentiment(seed=metrics.get("data_seed", 0))
    vocab = Vocab.from_json(json.loads((mdir / "vocab.json").read_text()))
    ids, lengths = encode_batch(vocab, data.test_texts, 10_000)
    keep = np.flatnonzero(lengths >= steps)[:max_real]
    # the last `steps` tokens: the classifier reads the state after a sentence's last token
    ids = np.stack([ids[i, lengths[i] - steps:lengths[i]] for i in keep]) if len(keep) else ids[:0, :steps]
    with torch.no_grad():
        emb = model.embedding(torch.from_numpy(ids)).numpy()
    real = hdir / f"test_windows_{steps}.npy"
    np.save(real, emb)
    return model, onnx_path, real, data.test_labels[keep], ids


def brevitas_from_embedded(model, x: np.ndarray) -> np.ndarray:
    """The brevitas model from its embedded input (float32 torch, as trained) -> logits."""
    import torch

    with torch.no_grad():
        out, _ = model.rnn(torch.from_numpy(np.asarray(x, dtype=np.float32)))
        return model.output_quant(model.classifier(model.head_quant(out[:, -1]))).numpy().astype(np.float64)


def bench_one(cell, weights, io, work, steps, samples, max_real) -> dict:
    model, onnx_path, real, labels, ids = prepare(cell, weights, work, steps, max_real)
    graph = api.load_model(onnx_path)
    prj = work / f"{cell}_{weights}_hls" / f"prj_{io}"
    row = {"cell": cell, "weights": weights, "steps": steps,
           **measure_project(onnx_path, prj, io, samples, data=real, user_samples=0,
                             oracle=api.Oracle(BREVITAS, lambda x: brevitas_from_embedded(model, x)))}
    # the exact reference against brevitas on the same sequences (random + real)
    sim = api.simulation(prj)
    codes = np.concatenate([sample_codes(graph.values[graph.input], samples, seed=0), api.input_codes(prj, real)])
    ref = OrtReference(reference_model(graph)).run(codes)
    fin, fout = graph.values[graph.input].ftype.frac, graph.values[graph.output].ftype.frac
    brev = brevitas_from_embedded(model, np.ldexp(codes.astype(np.float64), -fin))
    differ = int(np.sum(np.ldexp(ref.astype(np.float64), -fout) != brev))
    y_real = sim.run_codes(codes[samples:])
    import torch

    with torch.no_grad():
        brev_tokens = model(torch.from_numpy(ids)).numpy()
    row.update({
        "brevitas_outputs_compared": int(ref.size), "brevitas_differing_outputs": differ,
        "real_windows": int(len(labels)),
        "csim_accuracy_real_windows": float(np.mean(np.argmax(y_real, axis=1) == labels)),
        "brevitas_accuracy_real_windows": float(np.mean(np.argmax(brev_tokens, axis=1) == labels)),
        "csim_peak_rss_mib": csim_peak_rss_mb(prj, codes[:50]),
        "hidden": int(model.hidden_size), "embed_dim": int(model.embed_dim),
    })
    return row


def bench_convlstm(weights, io, work, samples, max_real) -> dict:
    """The moving-digits frame predictor: patches of the 10 input frames -> logits of the
    10 predicted frames (encoder, forecaster, 1x1 read-out)."""
    import torch

    from tessera.models.data.moving_digits import load_moving_digits
    from tessera.models.rnn.export import export_forecaster
    from tessera.models.rnn.networks import depth_to_space, space_to_depth
    from tessera.models.rnn.train import load_checkpoint, train_rnn

    mdir = work / f"convlstm_{weights}"
    if not (mdir / "checkpoint.pt").exists():
        train_rnn("convlstm", weights, "moving-digits", mdir, progress=False, threads=1)
    model = load_checkpoint(mdir / "checkpoint.pt")
    metrics = json.loads((mdir / "metrics.json").read_text())
    cfg = metrics["config"]
    hdir = work / f"convlstm_{weights}_hls"
    hdir.mkdir(parents=True, exist_ok=True)
    onnx_path = hdir / "forecaster.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_forecaster(model, onnx_path, in_frames=cfg["in_frames"], size=cfg["size"])
    data = load_moving_digits(cfg["n_train"], cfg["n_test"], cfg["n_frames"], cfg["size"], cfg["n_digits"],
                              seed=metrics.get("data_seed", 0))
    frames = torch.from_numpy(data.test[:max_real, :cfg["in_frames"]]).float().div_(255.0).unsqueeze(2)
    real = hdir / "test_patches.npy"
    np.save(real, space_to_depth(frames, model.patch).numpy())
    graph = api.load_model(onnx_path)
    prj = hdir / f"prj_{io}"
    def forward(patches: np.ndarray) -> np.ndarray:  # the exported graph's function: patches -> logit patches
        with torch.no_grad():
            x = depth_to_space(torch.from_numpy(patches.astype(np.float32)), model.patch)
            return space_to_depth(model(x), model.patch).numpy().astype(np.float64)

    row = {"cell": "convlstm", "weights": weights, "steps": f"{cfg['in_frames']}+{cfg['n_frames'] - cfg['in_frames']}",
           **measure_project(onnx_path, prj, io, samples, data=real, user_samples=0, tb_samples=8,
                             oracle=api.Oracle(BREVITAS, forward))}
    codes = api.input_codes(prj, real)
    ref = OrtReference(reference_model(graph)).run(codes)
    with torch.no_grad():
        brev = space_to_depth(model(frames), model.patch).numpy().astype(np.float64)
    differ = int(np.sum(np.ldexp(ref.astype(np.float64), -graph.values[graph.output].ftype.frac) != brev))
    row.update({"brevitas_outputs_compared": int(ref.size), "brevitas_differing_outputs": differ,
                "real_windows": int(len(codes)), "csim_accuracy_real_windows": None, "brevitas_accuracy_real_windows": None,
                "brevitas_test_mse_per_frame": metrics.get("test", {}).get("mse_per_frame"),
                "csim_peak_rss_mib": csim_peak_rss_mb(prj, codes[:4]),
                "hidden": int(model.hidden_channels), "embed_dim": int(model.patch ** 2)})
    return row


def _acc(v) -> str:
    return "-" if v is None else f"{v:.4f}"


def write_outputs(results: list[dict], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "bench/rnn_hls.py",
           "machine": {"cpus": __import__("os").cpu_count(), "platform": platform.platform()}, "results": results}
    (out / "rnn_hls.json").write_text(json.dumps(doc, indent=1))
    lines = ["# Quantized RNNs on HLS: verification, agreement with brevitas, cost", "",
             "Generated by `python bench/rnn_hls.py`; raw numbers in `rnn_hls.json`.  Each row: the sentiment model "
             "trained by `tessera train rnn` (defaults, seed 0), exported from its embedded input to its logits over a "
             "fixed window of steps, compiled, built with g++ and verified on random full-range sequences plus real "
             "test-sentence windows.  ConvLSTM rows: the moving-digits frame predictor (`export_forecaster`: 10 input "
             "frames as 4x4 patches -> encoder -> forecaster -> 1x1 read-out logits of 10 frames), verified on random "
             "full-range sequences plus real test sequences; its *brevitas differs* counts the real sequences' outputs. "
             " *mismatches*: C-simulation outputs differing from the exact onnxruntime reference (`==`).  *independent check*: outputs of the exact reference equal to brevitas' forward of the trained module (no ONNX executor runs the cells) on every verified sequence, random and real.  *brevitas differs*: outputs of brevitas' float32 forward of the same model that "
             "differ from the exact reference, on the same sequences.  Accuracies: on the real windows (the last steps of "
             "test sentences at least that long, read from a zero state). *C-sim MiB*: peak resident memory of the "
             "C-simulation's worker process while it runs 50 sequences (4 for ConvLSTM), above its memory once it has "
             "loaded the library (Linux VmHWM - VmRSS).  Times: wall clock on a shared 2-core machine (upper bounds).  A "
             "*refused* row: `compile`'s design-size guard (docs/hls-checks.md), so not built.", "",
             f"| cell | weights | io | steps | {COMMON_HEADER} | brevitas differs | C-sim acc | brevitas acc | "
             "weight bits | max acc bits | C-sim MiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "refused" in r:
            lines.append(f"| {r['cell']} | {r['weights']} | {r['io_type']} | refused: {r['refused']} |")
            continue
        lines.append(
            f"| {r['cell']} | {r['weights']} | {r['io_type']} | {r['steps']} | {common_cells(r)} | "
            f"{r['brevitas_differing_outputs']}/{r['brevitas_outputs_compared']} | {_acc(r['csim_accuracy_real_windows'])} | "
            f"{_acc(r['brevitas_accuracy_real_windows'])} | {r['weight_bits']:,} | {r['max_accumulator_bits']} | "
            f"{r['csim_peak_rss_mib']} |")
    (out / "rnn_hls.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for r in results if "refused" not in r]
    labels = [f"{r['cell']} {r['weights']}\n{r['io_type'][3:]}" for r in results]
    xs = np.arange(len(results))
    fig, axes = plt.subplots(1, 3, figsize=(max(12, 1.4 * len(results)), 4.5))
    plot_speed(axes[:2], results, labels, unit="sequences")
    axes[2].bar(xs, [r["weight_bits"] / 8192 for r in results])
    axes[2].set_ylabel("KiB")
    axes[2].set_title("weight + bias storage")
    axes[2].set_xticks(xs, labels, rotation=60, ha="right", fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "rnn_hls.png", dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", nargs="*", default=["lstm", "gru", "convlstm"], choices=["lstm", "gru", "convlstm"])
    ap.add_argument("--convlstm-samples", type=int, default=1000, help="random full-range sequences for ConvLSTM")
    ap.add_argument("--convlstm-real", type=int, default=50, help="real test sequences for ConvLSTM")
    ap.add_argument("--weights", nargs="*", default=list(WEIGHTS), choices=list(WEIGHTS))
    ap.add_argument("--io", nargs="*", default=["parallel", "stream"], choices=["parallel", "stream"])
    ap.add_argument("--steps", type=int, default=16, help="sequence window (time steps) of the compiled design")
    ap.add_argument("--samples", type=int, default=1000, help="random full-range sequences")
    ap.add_argument("--real", type=int, default=500, help="at most this many real test windows")
    ap.add_argument("--work", type=Path, default=ROOT / "runs" / "rnn")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--append", action="store_true", help="keep the other rows of an existing rnn_hls.json")
    args = ap.parse_args()
    if args.render_only:
        write_outputs(json.loads((args.out / "rnn_hls.json").read_text())["results"], args.out)
        return
    results = []
    if args.append and (args.out / "rnn_hls.json").exists():
        results = json.loads((args.out / "rnn_hls.json").read_text())["results"]
    for cell in args.cells:
        for weights in args.weights:
            for io in args.io:
                try:
                    if cell == "convlstm":
                        r = bench_convlstm(weights, io, args.work, args.convlstm_samples, args.convlstm_real)
                    else:
                        r = bench_one(cell, weights, io, args.work, args.steps, args.samples, args.real)
                except UnsupportedModelError as exc:  # the design-size guard: not synthesizable, so not compiled
                    r = {"cell": cell, "weights": weights, "io_type": f"io_{io}", "refused": str(exc)}
                results = [x for x in results if (x["cell"], x["weights"], x["io_type"]) != (cell, weights, r["io_type"])]
                print(json.dumps({k: v for k, v in r.items() if k not in ("user_model", "verify_seconds")}), flush=True)
                results.append(r)
                write_outputs(results, args.out)


if __name__ == "__main__":
    main()
