"""The project writer: a complete Vitis HLS project, hls4ml's project + Tessera's exact
testbench and data.

The project is written into a temporary sibling folder and renamed at the end, so an
interrupted compile never leaves a folder that looks complete.  ``tessera.json`` records
the model hash, types and layouts that ``emulate`` and ``verify`` rely on.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import time
import warnings
from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Iterator

import numpy as np

from .ir.meaning import CodeScale
import onnx

from .. import __version__
from ..hls_templates import path as template_path, render
from .errors import ProjectError
from .ir.graph import Graph
from .lower.hls4ml_lower import HlsOptions, lower_to_hls4ml
from .ops import OPS
from .reference.model import OrtReference, reference_model
from .samples import sample_codes

MANIFEST = "tessera.json"


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def layer_table(graph: Graph) -> list[dict]:
    rows = []
    for node in graph.nodes:
        t = graph.values[node.output]
        ins = [graph.values[v] for v in node.inputs]
        rows.append({
            "node": node.name, "op": node.op, "shape": list(t.shape), "type": t.ftype.describe(),
            "width": t.ftype.width, "frac": t.ftype.frac, "signed": t.ftype.signed, "range": [t.lo, t.hi],
            "macs": OPS[node.op].macs(node.attrs, ins, t), "form": OPS[node.op].form(node.attrs, ins, t),
        })
    return rows


def io_entry(graph: Graph, value: str, perm: np.ndarray) -> dict:
    """The manifest's record of the design's input or output: shape, type, range, layout."""
    t = graph.values[value]
    entry = {"shape": list(t.shape), "width": t.ftype.width, "frac": t.ftype.frac, "signed": t.ftype.signed,
             "range": [t.lo, t.hi], "perm": perm.tolist()}
    if value in graph.scales:  # real = (code - zero) * scale (ir.meaning.CodeScale)
        entry["scale"] = graph.scales[value].to_json()
    return entry


def real_outputs(entry: dict, codes: np.ndarray) -> np.ndarray:
    """Real values of output codes from the manifest's output entry."""
    if "scale" in entry:
        return CodeScale.from_json(entry["scale"]).real(codes, tuple(entry["shape"])).reshape(np.shape(codes))
    return np.ldexp(np.asarray(codes, dtype=np.float64), -entry["frac"])


def input_quant_entry(graph: Graph) -> dict:
    """The manifest's record of the model's input quantizer (real values -> codes)."""
    q = graph.input_quant
    entry = {"width": q.out.width, "frac": q.out.frac, "signed": q.out.signed, "narrow": q.narrow,
             "rounding": q.rounding.value}
    if graph.input_map is not None:
        entry["input_map"] = graph.input_map.to_json()
    if graph.input_type is not None:
        entry["declared_type"] = graph.input_type
    if graph.model_input_shape is not None:  # real data may come in the model file's shape
        entry["model_shape"] = list(graph.model_input_shape)
    return entry


def options_entry(opts: HlsOptions) -> dict:
    """The manifest's record of the compile options (plain JSON values)."""
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in asdict(opts).items()}


def remove_stale_tmp(out: Path) -> list[Path]:
    """Delete the temporary folders of compiles into ``out`` whose process is gone (killed
    before its rename); a live compile's folder is left alone."""
    removed = []
    for tmp in out.parent.glob(f".{out.name}.tessera-tmp-*"):
        try:
            pid = int(tmp.name.rsplit("-", 1)[1])
            os.kill(pid, 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except (ValueError, PermissionError):
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        removed.append(tmp)
    return removed


@contextlib.contextmanager
def project_folder(out_dir: str | Path, force: bool = False) -> Iterator[Path]:
    """A project written atomically: yields a temporary sibling of ``out_dir``
    (``.<name>.tessera-tmp-<pid>``, its parent created) and, when the block ends without an
    error, replaces ``out_dir`` with it; otherwise removes it.  An interrupted compile never
    leaves a folder that looks complete.  A non-empty ``out_dir`` is refused without ``force``."""
    out = Path(out_dir).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ProjectError(f"output folder {out} exists and is not empty (use --force to replace it)")
    remove_stale_tmp(out)
    tmp = out.parent / f".{out.name}.tessera-tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        tmp.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        if out.is_dir():
            shutil.rmtree(out)
        elif out.exists():
            out.unlink()
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_project(graph: Graph, model_path: str | Path | None, out_dir: str | Path, opts: HlsOptions,
                  tb_samples: int = 64, force: bool = False) -> Path:
    """The project of ``graph`` at ``out_dir``: hls4ml's Vitis project, the exact reference,
    Tessera's testbench and its data, and the manifest."""
    with project_folder(out_dir, force) as tmp:
        t0 = time.perf_counter()
        model, lowering = lower_to_hls4ml(graph, opts, str(tmp))
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            model.write()
        cfg = tmp / "hls4ml_config.yml"
        cfg.write_text("\n".join("OutputDir: ." if ln.startswith("OutputDir:") else ln for ln in cfg.read_text().splitlines()) + "\n")

        ref_model = reference_model(graph)
        onnx.save(ref_model, tmp / "reference.onnx")
        pin, pout = lowering.perm[graph.input], lowering.perm[graph.output]
        codes = sample_codes(graph.values[graph.input], tb_samples, seed=1234)
        expected = OrtReference(ref_model).run(codes)
        n = len(codes)
        cin, cout = codes.reshape(n, -1)[:, pin], expected.reshape(n, -1)[:, pout]
        tb = tmp / "tb_data"
        tb.mkdir(exist_ok=True)
        np.savetxt(tb / "tessera_input_codes.txt", cin, fmt="%d")
        np.savetxt(tb / "tessera_expected_codes.txt", cout, fmt="%d")
        # hls4ml's own testbench (used by Vitis HLS csim) reads real values.
        fin, fout = graph.values[graph.input].ftype.frac, graph.values[graph.output].ftype.frac
        np.savetxt(tb / "tb_input_features.dat", np.ldexp(cin.astype(np.float64), -fin), fmt="%.17g")
        np.savetxt(tb / "tb_output_predictions.dat", np.ldexp(cout.astype(np.float64), -fout), fmt="%.17g")
        (tmp / "tessera_tb.cpp").write_text(render(
            "testbench/tessera_tb.cpp.tpl", project=opts.project_name, n_in=cin.shape[1], n_out=cout.shape[1],
            in_frac=fin, out_frac=fout))
        script = tmp / "build_tessera_tb.sh"
        script.write_text(template_path("testbench/build_tessera_tb.sh").read_text())
        script.chmod(0o755)

        manifest = {
            "tessera_version": __version__,
            "model_file": Path(model_path).name if model_path else None,
            "model_sha256": sha256(model_path) if model_path else None,
            "options": options_entry(opts),
            "input": io_entry(graph, graph.input, pin),
            "input_quant": input_quant_entry(graph),
            "output": io_entry(graph, graph.output, pout),
            "layers": layer_table(graph),
            "hls_layers": [{"name": L.name, "class": L.class_name,
                            "types": {k: str(v.precision) for k, v in L.types.items()}} for L in model.get_layers()],
            "notices": [lowering.size.notice] if lowering.size.notice else [],
            "register_arrays": {"maximum_size": lowering.size.maximum_size, "bits": lowering.size.register_bits},
            "testbench_samples": n,
            "lowering_seconds": round(time.perf_counter() - t0, 3),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return Path(out_dir).resolve()


def read_manifest(prj: str | Path) -> dict:
    p = Path(prj) / MANIFEST
    if not p.is_file():
        raise ProjectError(f"{prj} is not a Tessera project (no {MANIFEST}; was the compile interrupted?)")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError:
        raise ProjectError(f"{p} is corrupt (not JSON)") from None
