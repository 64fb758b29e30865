"""Frontend: read QONNX/QCDQ files into the typed IR."""

from __future__ import annotations

from pathlib import Path

from ..ir.graph import Graph
from ..passes import run_passes
from .load import load_onnx
from .qonnx_import import import_model


def compile_ir(path: str | Path, input_type: str | None = None) -> Graph:
    """Load, clean, import and type a model file; ``input_type`` (e.g. ``fixed<16,6>``): the
    declared type of a float input no Quant reads."""
    return run_passes(import_model(load_onnx(path), input_type))


__all__ = ["compile_ir", "load_onnx", "import_model"]
