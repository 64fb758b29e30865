"""A traced, checked program -> a pipelined Verilog design in a folder (a project's ``rtl/``).

da4ml splits the program into stages of at most ``pipeline`` adder delays each (its latency
cutoff) and writes each stage as a module of adders, the pipeline registers between them and
an IO wrapper of uniform element widths (``tessera_model_wrapper``).  Tessera's top module
(``hls_templates/rtl/tessera_top.v.tpl``) puts the design's codes on that wrapper and adds
the valid chain; the whole folder is flat, so the simulator and the synthesis tools read it
with relative paths (lookup tables' ``.mem`` files are found from it)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ...hls_templates import Fields, render
from ..errors import UnsupportedModelError
from ..ir.graph import Graph

#: The design's top module and its file.
TOP = "tessera_top"
#: da4ml's module (and the prefix of its stage modules).
MODEL = "tessera_model"
#: da4ml's primitive that reads a table file; left out of designs without tables (its
#: ``$readmemh`` of a missing file stops the simulator and the synthesis).
TABLE_MODULE = "lookup_table.v"


@dataclass(frozen=True)
class RtlDesign:
    """What was written: the adder delays per stage asked for (``pipeline``), the clock
    cycles from ``in_valid`` to ``out_valid``, the stages, the ports (elements and bits per
    element, the outputs' signedness), da4ml's own estimate of LUTs and its register bits,
    and the files in the order the tools read them (``sources``: Verilog; ``tables``:
    ``.mem`` files)."""

    top: str
    pipeline: int
    latency: int
    stages: int
    n_in: int
    in_width: int
    n_out: int
    out_width: int
    out_signed: bool
    lut_estimate: int
    register_bits: int
    sources: tuple[str, ...]
    tables: tuple[str, ...] = ()

    @property
    def in_bits(self) -> int:
        return self.n_in * self.in_width

    @property
    def out_bits(self) -> int:
        return self.n_out * self.out_width

    def line(self) -> str:
        """The design in one line (``compile`` and ``inspect``)."""
        return (f"RTL: {self.latency} clock cycles from input to output (II 1, {self.stages} stages of at most "
                f"{self.pipeline} adder delays), ports {self.n_in} x {self.in_width} -> {self.n_out} x {self.out_width} "
                f"bits, da4ml's estimate {self.lut_estimate:,} LUT / {self.register_bits:,} FF")


@dataclass(frozen=True)
class TopModule(Fields):
    """The top module's fields (``hls_templates/rtl/tessera_top.v.tpl``)."""

    template: ClassVar[str] = "rtl/tessera_top.v.tpl"
    top: str
    model: str
    n_in: int
    in_width: int
    in_bits: int
    model_in_width: int
    n_out: int
    out_width: int
    out_bits: int
    model_out_width: int
    out_shift: int
    field_signed: int
    out_signedness: str
    latency: int


def port_widths(graph: Graph) -> tuple[int, int, bool]:
    """Bits per input element, bits per output element and whether the outputs are signed:
    one width for all elements of the packed ports, each port's codes extended to it."""
    ins = [graph.values[v].ftype for v in graph.inputs]
    outs = [graph.values[v].ftype for v in graph.outputs]
    signed = any(t.signed for t in outs)
    out_width = max(t.width + int(signed and not t.signed) for t in outs)
    return max(t.width for t in ins), out_width, signed


def _uniform(qints) -> tuple[int, int, bool]:
    """da4ml's wrapper ports: bits per element, the weight of their lowest bit and whether the
    fields are two's complement (its ``hetero_io_map``: every element at the largest integer
    and fractional widths, a sign bit in every field when any element has one, each element
    sign-extended if it is signed and zero-extended if not)."""
    from da4ml.types import minimal_kif

    kifs = [minimal_kif(q) for q in qints]
    signed = max(k for k, _, _ in kifs)
    top = max(i for _, i, _ in kifs) + signed
    frac = max(f for _, _, f in kifs)
    return top + frac, frac, bool(signed)


def write_design(graph: Graph, pipe, pipeline: int, lut_estimate: float, folder: Path) -> RtlDesign:
    """Write da4ml's pipeline ``pipe`` of ``graph`` and the top module into ``folder`` (created)."""
    from da4ml.codegen import VerilogModel

    folder.mkdir(parents=True, exist_ok=True)
    model_in, in_frac, _ = _uniform(pipe.inp_qint)
    model_out, out_frac, field_signed = _uniform(pipe.out_qint)
    if model_out <= 0:
        raise UnsupportedModelError("the design's outputs are constants (they do not depend on its inputs): nothing to "
                                    "build in hardware")
    if in_frac != 0 or out_frac > 0:
        raise AssertionError(f"da4ml's ports are not integer codes (input lsb 2**{-in_frac}, output 2**{-out_frac})")
    in_width, out_width, out_signed = port_widths(graph)
    if model_in > in_width:
        raise AssertionError(f"da4ml's inputs are {model_in} bits wide, the design's {in_width}")
    with tempfile.TemporaryDirectory(prefix="tessera-da4ml-") as tmp:
        VerilogModel(pipe, MODEL, tmp, latency_cutoff=pipeline, print_latency=False).write()
        src = Path(tmp) / "src"
        tables = sorted(p.name for p in (src / "memfiles").glob("*.mem"))
        for mem in tables:
            shutil.copy(src / "memfiles" / mem, folder / mem)
        statics = sorted(p.name for p in (src / "static").glob("*.v") if tables or p.name != TABLE_MODULE)
        (folder / "static").mkdir(exist_ok=True)
        for name in statics:
            shutil.copy(src / "static" / name, folder / "static" / name)
        stages = sorted(src.glob(f"{MODEL}_stage*.v"), key=lambda p: int(p.stem.rsplit("stage", 1)[1]))
        for p in [*stages, src / f"{MODEL}.v", src / f"{MODEL}_wrapper.v"]:
            shutil.copy(p, folder / p.name)
    n_stages = len(pipe.solutions)
    design = RtlDesign(TOP, int(pipeline), n_stages + 1, n_stages, int(pipe.shape[0]), in_width, int(pipe.shape[1]),
                       out_width, out_signed, int(round(lut_estimate)), int(pipe.reg_bits),
                       (*(f"static/{s}" for s in statics), *(p.name for p in stages), f"{MODEL}.v", f"{MODEL}_wrapper.v",
                        f"{TOP}.v"), tuple(tables))
    top = TopModule(TOP, MODEL, design.n_in, in_width, design.in_bits, model_in, design.n_out, out_width,
                    design.out_bits, model_out, -out_frac, int(field_signed),
                    "two's complement" if out_signed else "unsigned", design.latency)
    (folder / f"{TOP}.v").write_text(render(top))
    return design


__all__ = ["MODEL", "RtlDesign", "TABLE_MODULE", "TOP", "TopModule", "port_widths", "write_design"]
