"""The project writer: a complete Vitis HLS project, hls4ml's project + Tessera's exact
testbench and data; or (:func:`write_rtl_project`) an RTL project of Verilog.

The project is written into a temporary sibling folder and renamed at the end, so an
interrupted compile never leaves a folder that looks complete.  ``tessera.json`` records
the model hash, types and layouts that ``emulate`` and ``verify`` rely on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import ClassVar, Iterator

import numpy as np
import onnx

from ..hls_templates import Fields, path as template_path, render
from .errors import ProjectError
from .ir.graph import Graph
from .lower.hls4ml_lower import HlsOptions, lower_to_hls4ml
from .observer import SILENT, Observer
from .project import PORTS, RTL_TB_EXPECTED, RTL_TB_INPUT, HlsLayerEntry, IoGroup, LayerRow, Manifest, RegisterArrays
from .reference.model import OrtReference, reference_model
from .samples import input_samples


@dataclasses.dataclass(frozen=True)
class ExactTestbench(Fields):
    """The project's exact testbench: its firmware's name, and per input and output port
    (comma-separated, in port order) its values per sample and fractional bits (codes <->
    the bridge's doubles)."""

    template: ClassVar[str] = "testbench/tessera_tb.cpp.tpl"
    project: str
    in_ports: int
    in_sizes: str
    in_fracs: str
    out_ports: int
    out_sizes: str
    out_fracs: str

    @classmethod
    def of(cls, project: str, inputs: IoGroup, outputs: IoGroup) -> "ExactTestbench":
        def each(group: IoGroup, what) -> str:
            return ", ".join(str(what(e)) for e in group.entries)

        return cls(project, len(inputs.entries), each(inputs, lambda e: e.size), each(inputs, lambda e: e.ftype.frac),
                   len(outputs.entries), each(outputs, lambda e: e.size), each(outputs, lambda e: e.ftype.frac))


@dataclasses.dataclass(frozen=True)
class PackedEntry(Fields):
    """The packed entry point: the bridge's parameters, and its arguments cut from one
    sample's packed inputs ``x`` and outputs ``y``."""

    template: ClassVar[str] = "sim/tessera_ports.cpp.tpl"
    project: str
    parameters: str
    arguments: str

    @classmethod
    def of(cls, project: str, inputs: IoGroup, outputs: IoGroup) -> "PackedEntry":
        def cuts(name: str, group: IoGroup) -> list[str]:
            starts = np.cumsum([0, *(e.size for e in group.entries)])[:-1]
            return [f"{name} + {int(a)}" for a in starts]

        ports = len(inputs.entries) + len(outputs.entries)
        return cls(project, ", ".join(["double *"] * ports), ", ".join(cuts("x", inputs) + cuts("y", outputs)))


def layer_table(graph: Graph) -> list[dict]:
    """Every node's row (:class:`~.project.LayerRow`) as JSON values: what ``tessera inspect`` prints."""
    return [LayerRow.of(graph, node).to_json() for node in graph.nodes]


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
        codes = input_samples(graph, tb_samples, seed=1234)
        expected = OrtReference(ref_model).run(codes)
        n = len(codes)
        head = Manifest.of(graph, model_path, opts, lowering.perm)
        tb = tmp / "tb_data"
        tb.mkdir(exist_ok=True)
        np.savetxt(tb / "tessera_input_codes.txt", head.input.hls_order(codes), fmt="%d")
        np.savetxt(tb / "tessera_expected_codes.txt", head.output.hls_order(expected), fmt="%d")
        # hls4ml's own testbench (used by Vitis HLS csim) reads real values.
        np.savetxt(tb / "tb_input_features.dat", head.input.to_hls(codes), fmt="%.17g")
        np.savetxt(tb / "tb_output_predictions.dat", head.output.to_hls(expected), fmt="%.17g")
        (tmp / "tessera_tb.cpp").write_text(render(ExactTestbench.of(opts.project_name, head.input, head.output)))
        (tmp / PORTS).write_text(render(PackedEntry.of(opts.project_name, head.input, head.output)))
        script = tmp / "build_tessera_tb.sh"
        script.write_text(template_path("testbench/build_tessera_tb.sh").read_text())
        script.chmod(0o755)

        dataclasses.replace(
            head, layers=tuple(LayerRow.of(graph, node) for node in graph.nodes),
            hls_layers=tuple(HlsLayerEntry(L.name, L.class_name, {k: str(v.precision) for k, v in L.types.items()})
                             for L in model.get_layers()),
            notices=(lowering.size.notice,) if lowering.size.notice else (),
            register_arrays=RegisterArrays(lowering.size.maximum_size, lowering.size.register_bits),
            testbench_samples=n, lowering_seconds=round(time.perf_counter() - t0, 3),
        ).write(tmp)
    return Path(out_dir).resolve()


def write_rtl_project(graph: Graph, model_path: str | Path | None, out_dir: str | Path, opts: HlsOptions,
                      pipeline: int, tb_samples: int = 64, force: bool = False, observer: Observer = SILENT,
                      traced=None) -> Path:
    """The RTL project of ``graph`` at ``out_dir``: the design traced by da4ml (``traced``:
    its trace, ``rtl.trace.trace``, when the caller has it) and checked against the exact
    semantics before anything is written (a difference: one line naming the layer, no
    folder), its pipelined Verilog under ``rtl/`` (``pipeline``: adder delays per stage), the
    exact reference, the testbench's codes and the manifest."""
    from .rtl.check import CHECK_SAMPLES, check_program
    from .rtl.design import write_design
    from .rtl.trace import pipelined, trace

    t0 = time.perf_counter()
    with observer.stage(f"tracing {len(graph.nodes)} layers into adder graphs (da4ml)"):
        traced = trace(graph) if traced is None else traced
        program = traced.program()
    with observer.stage(f"checking the traced program on {CHECK_SAMPLES:,} full-range samples"):
        check_program(traced, program)
    with observer.stage(f"pipelining at {pipeline} adder delays per stage and checking the stages"):
        pipe = pipelined(program, pipeline)
        check_program(traced, program, stages=pipe.solutions)
    with project_folder(out_dir, force) as tmp, observer.stage("writing the Verilog design"):
        design = write_design(graph, pipe, pipeline, program.cost, tmp / "rtl")
        ref_model = reference_model(graph)
        onnx.save(ref_model, tmp / "reference.onnx")
        codes = input_samples(graph, tb_samples, seed=1234)
        expected = OrtReference(ref_model).run(codes)
        (tmp / "tb_data").mkdir()
        np.ascontiguousarray(codes.reshape(len(codes), -1), dtype=np.int64).tofile(tmp / RTL_TB_INPUT)
        np.ascontiguousarray(expected.reshape(len(codes), -1), dtype=np.int64).tofile(tmp / RTL_TB_EXPECTED)
        identity = {v: np.arange(graph.values[v].size) for v in [*graph.inputs, *graph.outputs]}
        Manifest.of(graph, model_path, opts, identity, layers=tuple(LayerRow.of(graph, node) for node in graph.nodes),
                    testbench_samples=len(codes), lowering_seconds=round(time.perf_counter() - t0, 3),
                    rtl=design).write(tmp)
    return Path(out_dir).resolve()
