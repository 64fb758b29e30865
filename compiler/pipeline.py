"""A model file -> the typed IR: the frontend (:mod:`.frontend`: read, clean, import), then the
passes (:mod:`.passes`: type every value, fold what they fold).  What the project writer, the
verifier and the API start from."""

from __future__ import annotations

from pathlib import Path

from .frontend import import_model, load_onnx
from .ir.graph import Graph
from .passes import run_passes


def compile_ir(path: str | Path, input_type: str | None = None) -> Graph:
    """Load, clean, import and type a model file; ``input_type`` (e.g. ``fixed<16,6>``): the
    declared type of a float input no Quant reads."""
    return run_passes(import_model(load_onnx(path), input_type))


__all__ = ["compile_ir"]
