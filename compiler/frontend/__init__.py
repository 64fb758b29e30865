"""Frontend: read QONNX/QCDQ files into the typed IR."""

from __future__ import annotations

from pathlib import Path

from ..ir.graph import Graph
from ..passes import run_passes
from .load import load_onnx
from .qonnx_import import import_model


def compile_ir(path: str | Path) -> Graph:
    """Load, clean, import and type a model file."""
    return run_passes(import_model(load_onnx(path)))


__all__ = ["compile_ir", "load_onnx", "import_model"]
